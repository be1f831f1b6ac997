//! The long-context retrieval gate: a haystack of an exact *actual* prompt token count, needles
//! (`The <key> is <value>.`) with seeded random values at declared depths, one question per needle,
//! scored by normalised exact match.
//!
//! Sizing: the prompt (one user message: a header, filler words with the needle sentences, and the
//! question) is sized to the target with the endpoint's own tokenizer: a local `tokenizer.json`
//! when given, else the server's `/tokenize`, else real requests (`usage.prompt_tokens`, at most
//! [`CALIBRATION_BUDGET`] per question). The chat template's overhead is measured with one short
//! real request. Needle positions are fixed word indices, so every question's prompt shares the
//! haystack up to its tail. The endpoint's `usage.prompt_tokens` decides: fewer tokens than the
//! target fail the observation as under-filled, more as over-filled; a response without usage
//! fails too. A target (plus the answer budget) beyond the served context is refused, not sent.

use super::context::{served, ServedContext};
use super::exchange::{chat_body, send, split_think, Reply};
use super::expect::{excerpt, words_only};
use super::{top_reasons, GateContext, GateResult, Observation, Status, Verdict};
use crate::evidence::GateName;
use crate::workload::filler::{self, FINE_PIECES};
use crate::workload::prompt::{load_tokenizer, Backend, HttpBackend};
use crate::workload::Endpoint;
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde::Serialize;
use serde_json::{json, Value};
use std::path::PathBuf;

/// Real requests one question's sizing may use when the endpoint has no `/tokenize`.
pub const CALIBRATION_BUDGET: u32 = 12;
/// Default answer budget (`max_tokens`).
pub const DEFAULT_MAX_TOKENS: u64 = 32;
/// Most needles per gate.
pub const MAX_NEEDLES: usize = 12;

const HEADER: &str = "Below are notes with a few facts hidden among filler words. Read them, then answer the question at the end with the value only.\n\n";

/// Needle keys: `The <key> is <value>.` / `What is the <key>?`.
const KEYS: &[&str] = &[
    "access code of vault Orion",
    "pin of locker Vega",
    "serial number of drone Lyra",
    "ticket number of passenger Altair",
    "room number of guest Sirius",
    "batch number of crate Rigel",
    "badge number of agent Deneb",
    "order number of client Castor",
    "door code of lab Mira",
    "tag number of parcel Polaris",
    "seat number of pilot Antares",
    "permit number of truck Spica",
];

/// The retrieval gate's configuration.
#[derive(Debug, Clone)]
pub struct RetrievalCheck {
    /// The `usage.prompt_tokens` every request must be reported with.
    pub tokens: u64,
    pub needles: usize,
    /// Depth of each needle as a fraction of the filler (0 = start, 1 = end).
    pub depths: Vec<f64>,
    /// Seeds the needle keys and values (recorded).
    pub seed: u64,
    /// The answer budget (`max_tokens`).
    pub max_tokens: u64,
    /// The served model's tokenizer.json (else the server's /tokenize, else calibration).
    pub tokenizer: Option<PathBuf>,
}

impl RetrievalCheck {
    /// Validates the configuration; empty `depths` spreads the needles evenly.
    pub fn new(
        tokens: u64,
        needles: usize,
        depths: Vec<f64>,
        seed: u64,
        max_tokens: u64,
        tokenizer: Option<PathBuf>,
    ) -> Result<RetrievalCheck, String> {
        if tokens == 0 {
            return Err("--retrieval-tokens must be at least 1".into());
        }
        if needles == 0 || needles > MAX_NEEDLES {
            return Err(format!("--retrieval-needles must be 1 to {MAX_NEEDLES}"));
        }
        if max_tokens == 0 {
            return Err("the retrieval answer budget must be at least 1 token".into());
        }
        let depths = if depths.is_empty() {
            (0..needles)
                .map(|i| (i + 1) as f64 / (needles + 1) as f64)
                .collect()
        } else {
            depths
        };
        if depths.len() != needles {
            return Err(format!(
                "--retrieval-depths lists {} depths for {needles} needles; give one per needle",
                depths.len()
            ));
        }
        if let Some(d) = depths.iter().find(|d| !(0.0..=1.0).contains(*d)) {
            return Err(format!(
                "--retrieval-depths: {d} is not a fraction from 0 to 1"
            ));
        }
        Ok(RetrievalCheck {
            tokens,
            needles,
            depths,
            seed,
            max_tokens,
            tokenizer,
        })
    }
}

/// One planted fact.
#[derive(Debug, Clone, Serialize)]
pub struct Needle {
    pub key: String,
    pub value: String,
    /// Declared depth (fraction of the filler).
    pub depth: f64,
    /// The filler word it is planted before.
    pub word_index: u64,
}

/// The needles for a seed: distinct keys, 5-digit values.
pub fn needles_for(seed: u64, depths: &[f64]) -> Vec<Needle> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut keys: Vec<&str> = KEYS.to_vec();
    keys.shuffle(&mut rng);
    depths
        .iter()
        .zip(keys)
        .map(|(&d, k)| Needle {
            key: k.to_string(),
            value: rng.gen_range(10_000u32..100_000).to_string(),
            depth: d,
            word_index: 0,
        })
        .collect()
}

fn question(n: &Needle) -> String {
    format!(
        "\n\nQuestion: What is the {}? Answer with the value only.",
        n.key
    )
}

/// The user message: header, `words` filler words with the needles planted, `tail` pieces, the
/// question.
fn content(needles: &[Needle], words: u64, tail: &str, q: &str) -> String {
    let mut s = String::with_capacity(HEADER.len() + words as usize * 6 + 200);
    s.push_str(HEADER);
    let mut planted = vec![false; needles.len()];
    for i in 0..=words {
        for (k, n) in needles.iter().enumerate() {
            if !planted[k] && (n.word_index == i || (i == words && n.word_index > words)) {
                planted[k] = true;
                if i > 0 {
                    s.push(' ');
                }
                s.push_str(&format!("The {} is {}.", n.key, n.value));
            }
        }
        if i < words {
            if i > 0 || planted.iter().any(|p| *p) {
                s.push(' ');
            }
            s.push_str(filler::word(i));
        }
    }
    s.push_str(tail);
    s.push_str(q);
    s
}

/// True when the answer is the value (or restates `The <key> is <value>`), comparing alphanumeric
/// words only, case-insensitively.
pub fn matches(answer: &str, n: &Needle) -> bool {
    let a = words_only(answer);
    a == words_only(&n.value) || a == words_only(&format!("the {} is {}", n.key, n.value))
}

enum Counter {
    Local(Box<tokenizers::Tokenizer>),
    Server,
    Usage,
}

impl Counter {
    fn name(&self) -> &'static str {
        match self {
            Counter::Local(_) => "local-tokenizer",
            Counter::Server => "server-tokenize",
            Counter::Usage => "usage-calibration",
        }
    }
}

struct Sizer<'a> {
    backend: HttpBackend<'a>,
    counter: Counter,
    counts: u64,
    real_requests: u64,
}

impl Sizer<'_> {
    /// Content tokens (prompt tokens, template included, in calibration).
    async fn count(&mut self, text: &str) -> Result<u64, String> {
        self.counts += 1;
        match &self.counter {
            Counter::Local(t) => t
                .encode_fast(text, false)
                .map(|e| e.len() as u64)
                .map_err(|e| format!("the tokenizer could not encode the prompt: {e}")),
            Counter::Server => self
                .backend
                .tokenize(text)
                .await?
                .ok_or_else(|| "the server's /tokenize stopped answering".to_string()),
            Counter::Usage => {
                self.real_requests += 1;
                self.backend.prompt_tokens(text).await
            }
        }
    }

    /// Filler words and tail pieces whose content counts exactly `goal`.
    async fn fit(
        &mut self,
        needles: &[Needle],
        q: &str,
        goal: u64,
        start: u64,
        rate: f64,
    ) -> Result<(u64, String), String> {
        let budget = if matches!(self.counter, Counter::Usage) {
            CALIBRATION_BUDGET
        } else {
            60
        };
        let mut used = 0u32;
        let mut lo: Option<(u64, u64)> = None;
        let mut hi: Option<(u64, u64)> = None;
        let mut w = start;
        let mut prev: Option<(u64, u64)> = None;
        loop {
            if used >= budget {
                return Err(format!(
                    "sizing the retrieval prompt to {goal} tokens took more than {budget} counts with {}; pass --tokenizer FILE (the served model's tokenizer.json)",
                    self.counter.name()
                ));
            }
            used += 1;
            let c = self.count(&content(needles, w, "", q)).await?;
            if c == goal {
                return Ok((w, String::new()));
            }
            if c < goal {
                lo = Some((w, c));
            } else {
                if w == 0 {
                    return Err(format!(
                        "the target is too small: the shortest retrieval prompt (header, needles and question, no filler) counts {c} tokens with {}; use a larger --retrieval-tokens",
                        self.counter.name()
                    ));
                }
                hi = Some((w, c));
            }
            let r = match prev {
                Some((pw, pc)) if pw != w && pc != c => {
                    ((c as f64 - pc as f64) / (w as f64 - pw as f64)).max(0.05)
                }
                _ => rate,
            };
            prev = Some((w, c));
            let guess = (w as f64 + (goal as f64 - c as f64) / r).round().max(0.0) as u64;
            w = match (lo, hi) {
                (Some((lw, _)), Some((hw, _))) => {
                    if hw <= lw + 1 {
                        break;
                    }
                    let g = guess.clamp(lw + 1, hw - 1);
                    if g == w {
                        (lw + hw) / 2
                    } else {
                        g
                    }
                }
                (Some((lw, _)), None) => guess.max(lw + 1),
                (None, Some((hw, _))) => guess.min(hw - 1),
                (None, None) => unreachable!("one side is set"),
            };
        }
        // The next word overshoots: add one-token pieces after the largest filler below the goal.
        let (lw, lc) = lo.expect("set when the loop breaks");
        let mut tail = String::new();
        let mut cur = lc;
        'grow: while cur < goal {
            for piece in FINE_PIECES {
                if used >= budget {
                    break 'grow;
                }
                used += 1;
                let cand = format!("{tail}{piece}");
                let c = self.count(&content(needles, lw, &cand, q)).await?;
                if c == goal {
                    return Ok((lw, cand));
                }
                if c > cur && c < goal {
                    tail = cand;
                    cur = c;
                    continue 'grow;
                }
            }
            break;
        }
        Err(format!(
            "could not size the retrieval prompt to exactly {goal} tokens with {} ({lc} tokens at {lw} words; every one-token piece overshoots)",
            self.counter.name()
        ))
    }
}

fn refused(mut r: GateResult, reason: String, details: Value) -> GateResult {
    r.status = Status::Failed;
    r.reason = reason;
    r.details = details;
    r
}

/// Sizes the haystack to exactly `check.tokens` prompt tokens: picks the counter (a local
/// tokenizer, the server's /tokenize, or real requests), measures the chat template's overhead,
/// places each needle at its depth and fits the filler for each needle's question. Returns the
/// overhead, the content tokens aimed at and per needle (filler words, tail pieces, question).
async fn size_haystack(
    sizer: &mut Sizer<'_>,
    check: &RetrievalCheck,
    needles: &mut [Needle],
) -> Result<(i64, u64, Vec<(u64, String, String)>), String> {
    if let Some(p) = &check.tokenizer {
        sizer.counter = Counter::Local(Box::new(load_tokenizer(p)?));
    } else if sizer.backend.tokenize(HEADER).await?.is_some() {
        sizer.counter = Counter::Server;
    }
    // Template overhead: one short real request.
    let overhead = if matches!(sizer.counter, Counter::Usage) {
        0i64
    } else {
        sizer.real_requests += 1;
        let u = sizer.backend.prompt_tokens(HEADER).await? as i64;
        u - sizer.count(HEADER).await? as i64
    };
    let goal = check.tokens as i64 - overhead;
    if goal <= 0 {
        return Err(format!(
            "--retrieval-tokens {} is below the chat template overhead of {overhead} tokens",
            check.tokens
        ));
    }
    let goal = goal as u64;
    // Tokens per filler word, from a cheap count (a real request in calibration).
    let probe_words = 200u64;
    let rate = if matches!(sizer.counter, Counter::Usage) {
        1.3
    } else {
        let c = sizer.count(&filler::words(probe_words)).await?;
        (c as f64 / probe_words as f64).max(0.1)
    };
    let fixed: usize = needles.iter().map(|n| n.key.len() + 20).sum::<usize>() + HEADER.len() + 80;
    let est = ((goal as f64 - fixed as f64 / 4.0) / rate).max(0.0) as u64;
    for n in needles.iter_mut() {
        n.word_index = (n.depth * est as f64).round() as u64;
    }
    let mut fits = Vec::new();
    for n in needles.iter() {
        let q = question(n);
        let (w, tail) = sizer.fit(needles, &q, goal, est, rate).await?;
        fits.push((w, tail, q));
    }
    Ok((overhead, goal, fits))
}

/// One needle's answer judged: the retrieved value, or the failure class and why (a failed
/// request, a prompt not exactly `t` tokens or not proven so, no visible answer, a wrong one).
fn judge(
    reply: &Reply,
    got: Option<u64>,
    answer: &str,
    n: &Needle,
    t: u64,
) -> Result<String, (&'static str, String)> {
    if let Some(e) = reply.error_words() {
        Err(("request-error", format!("request failed: {e}")))
    } else if let Some(g) = got.filter(|&g| g < t) {
        Err((
            "under-filled",
            format!("under-filled: the endpoint counted {g} prompt tokens, the target is {t}"),
        ))
    } else if let Some(g) = got.filter(|&g| g > t) {
        Err((
            "over-filled",
            format!("over-filled: the endpoint counted {g} prompt tokens, the target is {t}"),
        ))
    } else if got.is_none() {
        Err((
            "no-usage",
            "the response carried no usage.prompt_tokens, so the prompt size is unproven".into(),
        ))
    } else if answer.is_empty() {
        Err((
            "no-visible-answer",
            format!(
                "no visible answer at {t} actual prompt tokens (finish_reason {})",
                reply.finish_reason.as_deref().unwrap_or("none")
            ),
        ))
    } else if matches(answer, n) {
        Ok(format!(
            "retrieved {} exactly at {t} actual prompt tokens",
            n.value
        ))
    } else {
        Err((
            "wrong-answer",
            format!(
                "answered {:?}, expected {:?} at {t} actual prompt tokens",
                excerpt(answer, 80),
                n.value
            ),
        ))
    }
}

/// The gate's status and reason from its observations: passed only when every needle was
/// retrieved exactly.
fn settle(r: &mut GateResult, actual: &[Option<u64>], target: u64) {
    let tokens_words = actual
        .iter()
        .map(|a| a.map_or("none".to_string(), |a| a.to_string()))
        .collect::<Vec<_>>()
        .join(", ");
    if r.passed == r.total && r.total > 0 {
        r.status = Status::Passed;
        r.reason = format!(
            "{}/{} needles retrieved exactly; actual prompt tokens {tokens_words} (target {})",
            r.passed, r.total, target
        );
    } else {
        r.status = Status::Failed;
        r.reason = format!(
            "{}/{} needles: {}; actual prompt tokens {tokens_words} (target {})",
            r.passed,
            r.total,
            top_reasons(
                r.observations
                    .iter()
                    .filter(|o| !o.passed())
                    .map(|o| o.reason.as_str()),
                2
            ),
            target
        );
    }
}

/// Runs the retrieval gate.
pub async fn run(ctx: &GateContext, check: &RetrievalCheck) -> GateResult {
    // A long prompt may legitimately be silent until its prefill ends: only the whole-request
    // limit applies.
    let mut long = ctx.clone();
    long.stall = ctx.stall.max(ctx.timeout);
    let ctx = &long;
    let r = GateResult::start(GateName::Retrieval, ctx);
    let served_ctx: ServedContext = served(ctx).await;
    let mut needles = needles_for(check.seed, &check.depths);
    let base = json!({
        "target_tokens": check.tokens,
        "answer_max_tokens": check.max_tokens,
        "served_context": served_ctx,
        "seed": check.seed,
        "scoring": "normalised exact match: the answer's alphanumeric words, lower case, equal the value's (or 'the <key> is <value>')",
    });
    if let Some(c) = served_ctx.tokens {
        if check.tokens + check.max_tokens > c {
            let mut d = base.clone();
            d["refused"] = json!(true);
            return refused(
                r,
                format!(
                    "refused, nothing sent: a {}-token prompt plus {} answer tokens does not fit the served context of {c} tokens ({})",
                    check.tokens, check.max_tokens, served_ctx.source
                ),
                d,
            );
        }
    }

    // The counter: a local tokenizer, the server's /tokenize, or real requests.
    let backend = HttpBackend {
        target: &ctx.target,
        model: &ctx.model,
        endpoint: Endpoint::Chat,
        api_key: ctx.api_key.as_deref(),
        timeout: ctx.timeout,
        extra_body: Some(&ctx.extra_body).filter(|m| !m.is_empty()),
        mode: Default::default(),
        retried: Vec::new(),
    };
    let mut sizer = Sizer {
        backend,
        counter: Counter::Usage,
        counts: 0,
        real_requests: 0,
    };
    let mut notes: Vec<String> = Vec::new();
    let (overhead, goal, fits) = match size_haystack(&mut sizer, check, &mut needles).await {
        Ok(x) => x,
        Err(e) => {
            let mut d = base.clone();
            d["needles"] = json!(needles);
            return refused(
                r,
                format!("could not build the haystack, nothing sent: {e}"),
                d,
            );
        }
    };
    if overhead < 0 {
        notes.push(format!(
            "the measured template overhead is negative ({overhead})"
        ));
    }

    let mut r = r;
    let mut actual = Vec::new();
    for (i, (n, (w, tail, q))) in needles.iter().zip(&fits).enumerate() {
        let text = content(&needles, *w, tail, q);
        let body = chat_body(
            ctx,
            vec![json!({"role": "user", "content": text})],
            check.max_tokens,
            ctx.seed,
        );
        let (req, reply) = send(ctx, body, true).await;
        let got = reply.usage.as_ref().and_then(|u| u.prompt_tokens);
        actual.push(got);
        let (answer, _, _) = split_think(&reply.content);
        let t = check.tokens;
        let verdict = judge(&reply, got, &answer, n, t);
        let (v, class, reason) = match verdict {
            Ok(m) => (Verdict::Pass, None, m),
            Err((c, m)) => (Verdict::Fail, Some(c.to_string()), m),
        };
        r.observations.push(Observation {
            id: format!("needle-{}#1", i + 1),
            item: Some(format!("needle-{}", i + 1)),
            variant: None,
            attempt: Some(1),
            verdict: v,
            class,
            reason,
            exchanges: vec![reply.record(req, ctx.excerpt_chars)],
            details: json!({
                "key": n.key,
                "expected": n.value,
                "depth": n.depth,
                "word_index": n.word_index,
                "filler_words": w,
                "tail_pieces": tail,
                "target_tokens": t,
                "client_prompt_tokens": goal as i64 + overhead,
                "actual_prompt_tokens": got,
                "answer": excerpt(&answer, 200),
            }),
        });
    }
    r.count();
    let mut d = base;
    d["strategy"] = json!(sizer.counter.name());
    d["template_overhead"] = json!(overhead);
    d["content_tokens"] = json!(goal);
    d["sizing_counts"] = json!(sizer.counts);
    d["sizing_real_requests"] = json!(sizer.real_requests);
    d["needles"] = json!(needles);
    d["actual_prompt_tokens"] = json!(actual);
    if !notes.is_empty() {
        d["notes"] = json!(notes);
    }
    r.details = d;
    settle(&mut r, &actual, check.tokens);
    r
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn needles_are_seeded() {
        let a = needles_for(7, &[0.25, 0.75]);
        let b = needles_for(7, &[0.25, 0.75]);
        assert_eq!(a[0].value, b[0].value);
        assert_ne!(a[0].key, a[1].key);
        assert_eq!(a[0].value.len(), 5);
        assert_ne!(needles_for(8, &[0.5])[0].value, "");
    }

    #[test]
    fn planted_haystack() {
        let mut n = needles_for(1, &[0.0, 0.5, 1.0]);
        n[0].word_index = 0;
        n[1].word_index = 5;
        n[2].word_index = 99;
        let s = content(&n, 10, " the", &question(&n[1]));
        assert!(s.starts_with(HEADER));
        for x in &n {
            assert!(s.contains(&format!("The {} is {}.", x.key, x.value)), "{s}");
        }
        assert!(s.contains(&format!("What is the {}?", n[1].key)));
        assert!(!s.contains("  "), "{s}");
        assert!(matches(&format!("{}.", n[1].value), &n[1]));
        assert!(matches(
            &format!("The {} is {}", n[1].key, n[1].value),
            &n[1]
        ));
        assert!(!matches("12345 67890", &n[1]));
    }
}
