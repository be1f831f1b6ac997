//! Per-model runtime state: KV admission (FIFO), running count, prefix cache, counters.

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering::Relaxed};
use std::sync::{Arc, Mutex, MutexGuard};

use tokio::sync::oneshot;

use super::profile::Profile;

/// Prefix-cache block size, tokens.
pub const BLOCK_TOKENS: usize = 16;
/// Block budget of the prefix cache when `kv_tokens` is unlimited.
const DEFAULT_CACHE_BLOCKS: usize = 1 << 20;

#[derive(Default)]
pub struct Counters {
    pub prompt_tokens: AtomicU64,
    pub generation_tokens: AtomicU64,
    pub spec_draft_tokens: AtomicU64,
    pub spec_accepted_tokens: AtomicU64,
    pub prefix_cache_queries: AtomicU64,
    pub prefix_cache_hits: AtomicU64,
    pub request_success: AtomicU64,
    pub request_errors: AtomicU64,
}

struct Kv {
    used: u64,
    queue: VecDeque<(u64, oneshot::Sender<()>)>,
}

struct PrefixCache {
    blocks: HashMap<u64, u64>,
    tick: u64,
    cap: usize,
}

/// One served model.
pub struct Model {
    pub profile: Profile,
    /// Requests admitted and not yet finished (`vllm:num_requests_running`).
    pub running: AtomicUsize,
    /// Completion requests seen by this model (1-based sequence numbers).
    pub seq: AtomicU64,
    pub counters: Counters,
    kv: Mutex<Kv>,
    cache: Mutex<PrefixCache>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// Held while a request is admitted; dropping it frees its KV reservation.
pub struct Admission {
    model: Arc<Model>,
    need: u64,
    /// When the request was admitted (ns).
    pub at_ns: u64,
}

impl Drop for Admission {
    fn drop(&mut self) {
        self.model.running.fetch_sub(1, Relaxed);
        self.model.release(self.need);
    }
}

impl Model {
    pub fn new(profile: Profile) -> Model {
        let cap = if profile.kv_tokens > 0 {
            (profile.kv_tokens as usize / BLOCK_TOKENS).max(1)
        } else {
            DEFAULT_CACHE_BLOCKS
        };
        Model {
            profile,
            running: AtomicUsize::new(0),
            seq: AtomicU64::new(0),
            counters: Counters::default(),
            kv: Mutex::new(Kv {
                used: 0,
                queue: VecDeque::new(),
            }),
            cache: Mutex::new(PrefixCache {
                blocks: HashMap::new(),
                tick: 0,
                cap,
            }),
        }
    }

    fn fits(&self, used: u64, need: u64) -> bool {
        let cap = self.profile.kv_tokens;
        cap == 0 || used + need <= cap || used == 0
    }

    /// Reserve `need` KV tokens, waiting FIFO behind earlier requests when they do not fit.
    /// `recv_ns` is the admission time when no wait was needed.
    pub async fn admit(self: &Arc<Self>, need: u64, recv_ns: u64) -> Admission {
        let rx = {
            let mut kv = lock(&self.kv);
            if kv.queue.is_empty() && self.fits(kv.used, need) {
                kv.used += need;
                None
            } else {
                let (tx, rx) = oneshot::channel();
                kv.queue.push_back((need, tx));
                Some(rx)
            }
        };
        let at_ns = match rx {
            None => recv_ns,
            Some(rx) => {
                // The sender is only dropped after granting (or never): an error cannot happen
                // while the model lives.
                let _ = rx.await;
                crate::clock::mono_ns()
            }
        };
        self.running.fetch_add(1, Relaxed);
        Admission {
            model: self.clone(),
            need,
            at_ns,
        }
    }

    fn release(&self, need: u64) {
        let mut kv = lock(&self.kv);
        kv.used -= need;
        while let Some(&(n, _)) = kv.queue.front() {
            if !self.fits(kv.used, n) {
                break;
            }
            let (n, tx) = kv.queue.pop_front().expect("front exists");
            kv.used += n;
            if tx.send(()).is_err() {
                kv.used -= n; // the waiter went away
            }
        }
    }

    /// Requests waiting for KV space.
    pub fn waiting(&self) -> usize {
        lock(&self.kv).queue.len()
    }

    /// Fraction of the KV capacity reserved (0 when unlimited).
    pub fn kv_usage(&self) -> f64 {
        let cap = self.profile.kv_tokens;
        if cap == 0 {
            return 0.0;
        }
        (lock(&self.kv).used as f64 / cap as f64).min(1.0)
    }

    /// Cached prompt tokens for `ids`: 16 × the leading blocks already cached, counting only
    /// blocks that end before the last prompt token (which is always computed).
    pub fn cache_lookup(&self, ids: &[u64]) -> usize {
        let usable = ids.len().saturating_sub(1) / BLOCK_TOKENS;
        let hashes = block_hashes(&ids[..usable * BLOCK_TOKENS]);
        let mut c = lock(&self.cache);
        c.tick += 1;
        let tick = c.tick;
        let mut hit = 0;
        for h in hashes {
            match c.blocks.get_mut(&h) {
                Some(t) => {
                    *t = tick;
                    hit += 1;
                }
                None => break,
            }
        }
        hit * BLOCK_TOKENS
    }

    /// Remember every full block of `ids` (after its prefill), evicting least recently used blocks.
    pub fn cache_insert(&self, ids: &[u64]) {
        let full = ids.len() / BLOCK_TOKENS;
        let hashes = block_hashes(&ids[..full * BLOCK_TOKENS]);
        let mut c = lock(&self.cache);
        c.tick += 1;
        let tick = c.tick;
        for h in hashes {
            c.blocks.insert(h, tick);
        }
        if c.blocks.len() > c.cap {
            // Evict down to 90% of the budget, oldest first.
            let mut ticks: Vec<u64> = c.blocks.values().copied().collect();
            let remove = c.blocks.len() - c.cap * 9 / 10;
            ticks.select_nth_unstable(remove.saturating_sub(1));
            let cut = ticks[remove.saturating_sub(1)];
            c.blocks.retain(|_, t| *t > cut);
        }
    }
}

/// splitmix64 finaliser: a fast, well-mixed 64-bit hash step.
#[inline]
pub fn mix64(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// Hash chain over 16-token blocks: block i's key covers every token before its end.
fn block_hashes(ids: &[u64]) -> Vec<u64> {
    let mut h = 0x5eed_b10c_u64;
    ids.chunks_exact(BLOCK_TOKENS)
        .map(|b| {
            for &id in b {
                h = mix64(h ^ id);
            }
            h
        })
        .collect()
}

/// Prometheus text with vLLM's metric names, one `model_name` label per sample.
pub fn metrics_text(models: &[Arc<Model>]) -> String {
    let mut o = String::with_capacity(4096);
    let mut family = |name: &str, kind: &str, help: &str, f: &dyn Fn(&Model) -> String| {
        let base = if kind == "counter" {
            name.strip_suffix("_total").unwrap_or(name)
        } else {
            name
        };
        o.push_str(&format!("# HELP {base} {help}\n# TYPE {base} {kind}\n"));
        for m in models {
            let label = super::json::string(&m.profile.model);
            o.push_str(&format!("{name}{{model_name={label}}} {}\n", f(m)));
        }
    };
    let c = |a: &AtomicU64| a.load(Relaxed).to_string();
    family(
        "vllm:num_requests_running",
        "gauge",
        "Requests admitted and not finished.",
        &|m| m.running.load(Relaxed).to_string(),
    );
    family(
        "vllm:num_requests_waiting",
        "gauge",
        "Requests waiting for KV-cache space.",
        &|m| m.waiting().to_string(),
    );
    family(
        "vllm:kv_cache_usage_perc",
        "gauge",
        "Fraction of the KV capacity reserved (1 = full).",
        &|m| format!("{}", m.kv_usage()),
    );
    family(
        "vllm:prompt_tokens_total",
        "counter",
        "Prompt tokens of admitted requests.",
        &|m| c(&m.counters.prompt_tokens),
    );
    family(
        "vllm:generation_tokens_total",
        "counter",
        "Generated tokens.",
        &|m| c(&m.counters.generation_tokens),
    );
    family(
        "vllm:spec_decode_num_draft_tokens_total",
        "counter",
        "Draft tokens proposed by speculative decoding.",
        &|m| c(&m.counters.spec_draft_tokens),
    );
    family(
        "vllm:spec_decode_num_accepted_tokens_total",
        "counter",
        "Draft tokens accepted by speculative decoding.",
        &|m| c(&m.counters.spec_accepted_tokens),
    );
    family(
        "vllm:prefix_cache_queries_total",
        "counter",
        "Prompt tokens looked up in the prefix cache.",
        &|m| c(&m.counters.prefix_cache_queries),
    );
    family(
        "vllm:prefix_cache_hits_total",
        "counter",
        "Prompt tokens found in the prefix cache.",
        &|m| c(&m.counters.prefix_cache_hits),
    );
    family(
        "vllm:request_success_total",
        "counter",
        "Requests that finished normally.",
        &|m| c(&m.counters.request_success),
    );
    o
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefix_cache_hits_whole_leading_blocks() {
        let mut p = Profile::with_model("m");
        p.prefix_cache = true;
        let m = Model::new(p);
        let a: Vec<u64> = (0..50).collect();
        assert_eq!(m.cache_lookup(&a), 0);
        m.cache_insert(&a);
        assert_eq!(m.cache_lookup(&a), 48);
        let mut b = a.clone();
        b[20] = 999;
        assert_eq!(m.cache_lookup(&b), 16);
        // A prompt of exactly 48 tokens keeps its last block uncached (its last token is computed).
        assert_eq!(m.cache_lookup(&a[..48]), 32);
    }

    #[test]
    fn kv_admission_is_fifo() {
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        rt.block_on(async {
            let mut p = Profile::with_model("m");
            p.kv_tokens = 100;
            let m = Arc::new(Model::new(p));
            let a = m.admit(60, 1).await;
            assert_eq!(m.running.load(Relaxed), 1);
            let m2 = m.clone();
            let waiter = tokio::spawn(async move { m2.admit(50, 2).await.at_ns });
            tokio::task::yield_now().await;
            assert_eq!(m.waiting(), 1);
            drop(a);
            let at = waiter.await.unwrap();
            assert!(at > 2);
            // Larger than the whole capacity: admitted alone.
            let big = m.admit(500, 3).await;
            assert_eq!(big.at_ns, 3);
        });
    }
}
