//! `bakeoff selftest`: bakeoff's own timing error, measured against the reference engine.
//!
//! The engine runs as a child process and records, on CLOCK_MONOTONIC, when it handed each SSE
//! event to its socket. The client records when each event arrived, on the same clock. The
//! difference is what the client adds; nothing here is simulated.

use crate::client::control::{delete_json, get_json};
use crate::client::trace::kind;
use crate::client::{StreamOpts, Target, Trace};
use crate::load::session::{self, Session, Telemetry};
use crate::load::source::{PromptText, RequestSource};
use crate::load::{Mode, Plan, Source};
use crate::metrics::stats::Distribution;
use crate::workload::items::WorkSet;
use crate::workload::request::BodySpec;
use crate::workload::Endpoint;
use anyhow::{bail, Context, Result};
use clap::Args;
use serde::Serialize;
use serde_json::Value;
use std::collections::HashMap;
use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::Duration;

#[derive(Args, Debug, Clone)]
pub struct SelftestArgs {
    /// Concurrency levels to drive, in order.
    #[arg(long, value_delimiter = ',', default_value = "1,16,256,1024")]
    pub levels: Vec<usize>,
    /// Requests per stream at each level (the first wave is reported apart).
    #[arg(long, default_value_t = 3)]
    pub waves: u64,
    /// Tokens generated per request.
    #[arg(long, default_value_t = 64)]
    pub max_tokens: u64,
    /// Per-stream decode rate of the engine.
    #[arg(long, default_value_t = 100.0)]
    pub decode_tok_s: f64,
    /// Worker threads of the engine child process.
    #[arg(long, default_value_t = 2)]
    pub engine_workers: usize,
    /// Port of the reference engine the selftest starts (0 = any free port).
    #[arg(long, default_value_t = 0)]
    pub port: u16,
    /// Skip the bare-reader floor measurement.
    #[arg(long)]
    pub no_floor: bool,
    /// Write the results as JSON here.
    #[arg(long)]
    pub json: Option<std::path::PathBuf>,
    /// A dataset or synthetic-length workload instead of the literal prompt (`selftest_source`).
    #[command(flatten)]
    pub source: super::selftest_source::SelftestSourceArgs,
}

#[derive(Debug, Serialize)]
pub struct LevelResult {
    pub concurrency: usize,
    pub requests_ok: usize,
    pub requests_failed: usize,
    pub chunks: u64,
    /// Requests whose client event count differed from the engine's emission count.
    pub unmatched_requests: usize,
    /// Client arrival minus engine emission, per SSE event, ms.
    pub added_delay_ms: Option<Distribution>,
    /// Client TTFT minus engine TTFT (first content emission minus request receipt), ms.
    pub ttft_error_ms_all: Option<Distribution>,
    pub ttft_error_ms_after_first_wave: Option<Distribution>,
    /// |client chunk gap − engine chunk gap| for output chunks, ms.
    pub chunk_gap_error_ms: Option<Distribution>,
    /// The engine against its declared profile, from its own log: TTFT (first content emission
    /// minus request arrival; declared 20 ms plus the prompt's prefill at 100,000 tok/s, about
    /// 0.2 ms) and per-stream decode rate over the content events
    /// (declared `--decode-tok-s`).
    pub engine_ttft_ms: Option<Distribution>,
    pub engine_decode_tok_s: Option<Distribution>,
    /// The engine process's CPU time per chunk it emitted (from its threads' schedstat).
    pub engine_cpu_us_per_chunk: f64,
    pub client_cpu_us_per_chunk: f64,
    /// Of that, in the client's own code (user time) and in the kernel (system time).
    pub client_cpu_user_us_per_chunk: f64,
    pub client_cpu_sys_us_per_chunk: f64,
    /// Share of the client's reads stamped with the kernel's receive time (the rest: read time).
    pub kernel_stamped_reads: f64,
    /// Chunks per read of the client (SSE events over socket reads): how many chunks each
    /// wakeup found waiting. Streams in step (equal output lengths) give more per read.
    pub chunks_per_read: f64,
    /// The bare reader's CPU per chunk at this level (see `selftest_floor`): the kernel's share
    /// that any client on this host pays. Absent below 16 streams or with `--no-floor`.
    pub floor_cpu_user_us_per_chunk: Option<f64>,
    pub floor_cpu_sys_us_per_chunk: Option<f64>,
    /// SSE events the bare reader counted (the same workload as the client's).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub floor_chunks: Option<u64>,
    /// Naps the bare reader took before waiting (the client's rule; compare with `naps`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub floor_naps: Option<u64>,
    /// The bare reader's waits: how many, and why the others had no nap (`load::pace::Waits`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub floor_waits: Option<crate::load::pace::Waits>,
    /// Naps the client's runtime took before parking (reads gathered in rounds; see load::pace).
    pub naps: u64,
    /// The client runtime's parks: how many, and why the others had no nap.
    pub waits: crate::load::pace::Waits,
    pub peak_rss_mib: f64,
    pub wall_s: f64,
    /// With a dataset or synthetic workload: each request's item and token counts
    /// (`selftest_source::level_record`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub workload: Option<Value>,
}

#[derive(Debug, Serialize)]
pub struct SelftestReport {
    pub bakeoff_version: &'static str,
    pub tool: &'static str,
    pub started_at: String,
    pub host: HostFacts,
    pub max_tokens: u64,
    pub decode_tok_s: f64,
    pub waves: u64,
    /// Where the selftest's reference engine listened.
    pub engine_url: String,
    pub levels: Vec<LevelResult>,
    pub memory_model: &'static str,
    /// The dataset or synthetic work set (its `prompt` record, as bench's); absent: the literal
    /// prompt.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub workload: Option<Value>,
}

#[derive(Debug, Serialize)]
pub struct HostFacts {
    pub cpus: usize,
    pub cpu_model: String,
    pub kernel: String,
}

pub fn host_facts() -> HostFacts {
    let cpu_model = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split(':').nth(1))
                .map(|s| s.trim().to_string())
        })
        .unwrap_or_else(|| "unknown".into());
    let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease")
        .map(|s| s.trim().to_string())
        .unwrap_or_else(|_| "unknown".into());
    HostFacts {
        cpus: std::thread::available_parallelism()
            .map(|n| n.get())
            .unwrap_or(1),
        cpu_model,
        kernel,
    }
}

/// A reference engine child process, killed on drop.
pub struct EngineChild {
    child: Child,
    pub url: String,
}

impl EngineChild {
    /// Starts `bakeoff engine` (this same executable) with the given profile file, on `port`
    /// (0: any free port).
    pub fn spawn(profile: &std::path::Path, workers: usize, port: u16) -> Result<EngineChild> {
        let exe = std::env::current_exe().context("cannot find the bakeoff executable")?;
        let mut child = Command::new(exe)
            .args([
                "engine",
                "--port",
                &port.to_string(),
                "--workers",
                &workers.to_string(),
                "--profile",
            ])
            .arg(profile)
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .context("cannot start the reference engine")?;
        let stdout = child.stdout.take().expect("piped stdout");
        let mut line = String::new();
        BufReader::new(stdout)
            .read_line(&mut line)
            .context("reading the engine's listening line")?;
        let url = match line.trim().rsplit_once(' ') {
            Some((_, u)) if u.starts_with("http://") => u.to_string(),
            _ => {
                let _ = child.kill();
                let _ = child.wait();
                let hint = if port != 0 {
                    format!("; is port {port} free? (--port {port}; 0 picks a free one)")
                } else {
                    String::new()
                };
                bail!(
                    "the reference engine did not start (printed {:?}){hint}",
                    line.trim()
                );
            }
        };
        Ok(EngineChild { child, url })
    }
}

impl EngineChild {
    pub fn pid(&self) -> u32 {
        self.child.id()
    }
}

impl Drop for EngineChild {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The selftest's request source: a short literal chat prompt with a nonce line (or, with
/// `work`, each request's dataset or synthetic item and its output length), exactly `max_tokens`
/// generated (`ignore_eos`), built like every load's requests.
fn selftest_source(target: &Target, max_tokens: u64, work: Option<&Arc<WorkSet>>) -> RequestSource {
    RequestSource {
        target: target.clone(),
        endpoint: Endpoint::Chat,
        base: BodySpec {
            model: "selftest",
            max_tokens,
            temperature: Some(0.0),
            top_p: None,
            seed: Some(0),
            ignore_eos: true,
            stream: Some(true),
        }
        .build(),
        prompt: match work {
            Some(w) => PromptText::Work(w.clone()),
            None => PromptText::Literal {
                text: "selftest".into(),
                nonce: true,
            },
        },
        api_key: None,
        offset: 0,
        nonce_base: crate::workload::filler::random_nonce_base(),
    }
}

pub fn peak_rss_mib() -> f64 {
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: as above.
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) };
    ru.ru_maxrss as f64 / 1024.0
}

struct Emission {
    recv_ns: u64,
    emit_ns: Vec<u64>,
}

fn parse_emissions(v: &Value) -> Result<HashMap<String, Emission>> {
    let reqs = v
        .get("requests")
        .and_then(|r| r.as_array())
        .context("the engine's /debug/emissions has no 'requests' list")?;
    let mut map = HashMap::with_capacity(reqs.len());
    for r in reqs {
        let id = r
            .get("id")
            .and_then(|i| i.as_str())
            .unwrap_or_default()
            .to_string();
        let recv_ns = r.get("recv_ns").and_then(|x| x.as_u64()).unwrap_or(0);
        let emit_ns = r
            .get("emit_ns")
            .and_then(|e| e.as_array())
            .map(|a| a.iter().filter_map(|x| x.as_u64()).collect())
            .unwrap_or_default();
        map.insert(id, Emission { recv_ns, emit_ns });
    }
    Ok(map)
}

async fn level(
    target: &Target,
    engine_pid: u32,
    c: usize,
    args: &SelftestArgs,
    work: Option<&Arc<WorkSet>>,
) -> Result<LevelResult> {
    let t = Duration::from_secs(30);
    delete_json(target, "/debug/emissions", None, t)
        .await
        .map_err(|e| anyhow::anyhow!("clearing the emission log: {e}"))?;
    let session = Session {
        target: target.clone(),
        plan: Plan {
            mode: Mode::Closed { concurrency: c },
            requests: Some(c as u64 * args.waves),
            duration: None,
            warmup: 0,
            warmup_duration: None,
            max_in_flight: None,
        },
        source: Arc::new(selftest_source(target, args.max_tokens, work)),
        opts: StreamOpts {
            timeout: Duration::from_secs(300),
            stall: Duration::from_secs(60),
            collect: false,
        },
        cancel: None,
        telemetry: Telemetry::None,
        seed: 0,
    };
    let cpu0 = crate::clock::cpu_ns(libc::RUSAGE_SELF);
    let engine_cpu0 = process_cpu_s(engine_pid);
    let waits0 = crate::load::pace::waits();
    let wall0 = crate::clock::mono_ns();
    let out = session::run(session, Vec::<Trace>::new()).await?;
    out.window.map_err(|e| anyhow::anyhow!("{e}"))?;
    let traces = out.sink;
    let cpu1 = crate::clock::cpu_ns(libc::RUSAGE_SELF);
    let engine_cpu_s = process_cpu_s(engine_pid) - engine_cpu0;
    let (user, sys) = (cpu1.0 - cpu0.0, cpu1.1 - cpu0.1);
    let waits = crate::load::pace::waits() - waits0;
    let (kern, read) = (out.reads.kernel_stamped, out.reads.read_time);
    let wall_s = (crate::clock::mono_ns() - wall0) as f64 / 1e9;
    let (_, em) = get_json(target, "/debug/emissions", None, t)
        .await
        .map_err(|e| anyhow::anyhow!("reading the emission log: {e}"))?;
    let em = parse_emissions(&em)?;

    let mut delays = Vec::new();
    let mut ttft_all = Vec::new();
    let mut ttft_later = Vec::new();
    let mut gap_err = Vec::new();
    let (mut engine_ttft, mut engine_rate) = (Vec::new(), Vec::new());
    let mut chunks = 0u64;
    let mut unmatched = 0;
    let mut failed = 0;
    for tr in &traces {
        chunks += tr.events.len() as u64;
        if tr.error.is_some() {
            failed += 1;
            continue;
        }
        let Some(e) = tr.response_id.as_ref().and_then(|id| em.get(id)) else {
            unmatched += 1;
            continue;
        };
        if e.emit_ns.len() != tr.events.len() {
            unmatched += 1;
            continue;
        }
        let mut prev: Option<(u64, u64)> = None;
        let mut first_content = None;
        let (mut content, mut first_emit, mut last_emit) = (0u64, 0u64, 0u64);
        for (ev, &emit) in tr.events.iter().zip(&e.emit_ns) {
            if ev.kind & kind::CONTENT != 0 {
                if content == 0 {
                    first_emit = emit;
                }
                last_emit = emit;
                content += 1;
            }
            let arrival = tr.send_ns + ev.t_ns;
            delays.push((arrival as f64 - emit as f64) / 1e6);
            if ev.kind & kind::OUTPUT != 0 {
                if let Some((pa, pe)) = prev {
                    let cg = (arrival - pa) as f64;
                    let eg = emit as f64 - pe as f64;
                    gap_err.push((cg - eg).abs() / 1e6);
                }
                prev = Some((arrival, emit));
            }
            if first_content.is_none() && ev.kind & kind::CONTENT != 0 {
                first_content = Some((ev.t_ns, emit));
            }
        }
        if content > 1 && last_emit > first_emit {
            engine_rate.push((content - 1) as f64 / ((last_emit - first_emit) as f64 / 1e9));
        }
        if let Some((client_ttft, emit)) = first_content {
            let truth = emit.saturating_sub(e.recv_ns) as f64;
            engine_ttft.push(truth / 1e6);
            let err = (client_ttft as f64 - truth) / 1e6;
            ttft_all.push(err);
            if tr.index >= c as u64 {
                ttft_later.push(err);
            }
        }
    }
    Ok(LevelResult {
        concurrency: c,
        requests_ok: traces.len() - failed,
        requests_failed: failed,
        chunks,
        unmatched_requests: unmatched,
        added_delay_ms: Distribution::from_samples(&delays, 1),
        ttft_error_ms_all: Distribution::from_samples(&ttft_all, 1),
        ttft_error_ms_after_first_wave: Distribution::from_samples(&ttft_later, 1),
        chunk_gap_error_ms: Distribution::from_samples(&gap_err, 1),
        engine_ttft_ms: Distribution::from_samples(&engine_ttft, 1),
        engine_decode_tok_s: Distribution::from_samples(&engine_rate, 1),
        engine_cpu_us_per_chunk: engine_cpu_s * 1e6 / chunks.max(1) as f64,
        client_cpu_us_per_chunk: per_chunk(user + sys, chunks),
        client_cpu_user_us_per_chunk: per_chunk(user, chunks),
        client_cpu_sys_us_per_chunk: per_chunk(sys, chunks),
        kernel_stamped_reads: if kern + read > 0 {
            kern as f64 / (kern + read) as f64
        } else {
            0.0
        },
        chunks_per_read: chunks as f64 / (kern + read).max(1) as f64,
        floor_cpu_user_us_per_chunk: None,
        floor_cpu_sys_us_per_chunk: None,
        floor_chunks: None,
        floor_naps: None,
        floor_waits: None,
        naps: waits.naps,
        waits,
        peak_rss_mib: peak_rss_mib(),
        wall_s,
        workload: work.map(|w| super::selftest_source::level_record(w, &traces)),
    })
}

/// CPU seconds another process has run, summed over its threads' `schedstat` (nanoseconds;
/// threads that already exited are not counted, and the engine's live for the whole run).
fn process_cpu_s(pid: u32) -> f64 {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return 0.0;
    };
    let ns: u64 = tasks
        .flatten()
        .filter_map(|t| std::fs::read_to_string(t.path().join("schedstat")).ok())
        .filter_map(|s| s.split_whitespace().next()?.parse::<u64>().ok())
        .sum();
    ns as f64 / 1e9
}

/// The flags checked before the engine starts (a problem is a refusal, exit 2).
fn check_flags(args: &SelftestArgs) -> Result<()> {
    if args.levels.is_empty() || args.levels.contains(&0) {
        bail!("--levels needs positive concurrency levels, like 1,16,256");
    }
    if args.waves < 2 {
        bail!("--waves must be at least 2 (the first wave is reported apart)");
    }
    Ok(())
}

fn per_chunk(ns: u64, chunks: u64) -> f64 {
    if chunks > 0 {
        ns as f64 / 1e3 / chunks as f64
    } else {
        0.0
    }
}

pub fn run(args: SelftestArgs) -> Result<()> {
    super::refused(check_flags(&args))?;
    crate::clock::raise_nofile_limit();
    let dir = std::env::temp_dir().join(format!("bakeoff-selftest-{}", std::process::id()));
    std::fs::create_dir_all(&dir).with_context(|| format!("cannot create {}", dir.display()))?;
    let profile = dir.join("selftest.toml");
    std::fs::write(
        &profile,
        format!(
            "model = \"selftest\"\nttft_ms = 20\nprefill_tok_s = 100000\ndecode_tok_s = {}\ncontext_tokens = 32768\nkv_tokens = 100000000\n",
            args.decode_tok_s
        ),
    )?;
    let engine = EngineChild::spawn(&profile, args.engine_workers, args.port)?;
    let target = Target::parse(&engine.url).map_err(|e| anyhow::anyhow!(e))?;
    // One thread: chunk wakeups never cross threads and the client leaves the other cores to
    // the engine under test.
    let rt = crate::load::pace::client_runtime()?;
    let started_at = crate::clock::wall_rfc3339();
    let mut levels = Vec::new();
    let mut workload = None;
    rt.block_on(async {
        // Wait for the engine's health (it may declare a startup time).
        for _ in 0..100 {
            if let Ok((200, _)) = get_json(&target, "/health", None, Duration::from_secs(2)).await {
                break;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        let most = args.levels.iter().max().copied().unwrap_or(1) as u64 * args.waves;
        let work = super::selftest_source::prepare(
            &args.source,
            &target,
            "selftest",
            args.max_tokens,
            most,
        )
        .await?;
        workload = work.as_ref().map(|w| w.record.clone());
        for &c in &args.levels {
            eprintln!(
                "selftest: concurrency {c} ({} requests of {} tokens) ...",
                c as u64 * args.waves,
                args.max_tokens
            );
            let mut r = level(&target, engine.pid(), c, &args, work.as_ref()).await?;
            if c >= 16 && !args.no_floor {
                // Blocks this thread on purpose: the bare reader must run with no runtime.
                // It sends the same workload as the client (with a dataset, the same items in
                // the same order, so the same output lengths): per-request costs then weigh the
                // same in both figures, and the ratio is the client's own share.
                let src = selftest_source(&target, args.max_tokens, work.as_ref());
                let reqs: Vec<Vec<u8>> = (0..c as u64 * args.waves)
                    .map(|i| src.prepare(i).bytes)
                    .collect();
                let f = super::selftest_floor::measure(&target.authority(), &reqs, c, args.waves)?;
                r.floor_cpu_user_us_per_chunk = Some(f.user_us_per_chunk);
                r.floor_cpu_sys_us_per_chunk = Some(f.sys_us_per_chunk);
                r.floor_chunks = Some(f.chunks);
                r.floor_naps = Some(f.waits.naps);
                r.floor_waits = Some(f.waits);
            }
            levels.push(r);
        }
        anyhow::Ok(())
    })?;
    let engine_url = engine.url.clone();
    drop(engine);
    let _ = std::fs::remove_dir_all(&dir);
    let report = SelftestReport {
        bakeoff_version: crate::VERSION,
        tool: "bakeoff selftest",
        started_at,
        host: host_facts(),
        max_tokens: args.max_tokens,
        decode_tok_s: args.decode_tok_s,
        waves: args.waves,
        engine_url,
        levels,
        workload,
        memory_model: "in flight: 16 bytes per received chunk (offset + kind) plus one request body; after a request completes: one ~150-byte metrics record per request and 4 bytes per output chunk gap; chunk text is never kept",
    };
    print_report(&report);
    if let Some(p) = &args.json {
        crate::evidence::write_atomic(p, &serde_json::to_vec_pretty(&report)?)?;
        eprintln!("written to {}", p.display());
    }
    Ok(())
}

fn f(d: &Option<Distribution>, pick: fn(&Distribution) -> f64) -> String {
    d.as_ref()
        .map(|d| format!("{:.3}", pick(d)))
        .unwrap_or_else(|| "-".into())
}

fn print_report(r: &SelftestReport) {
    println!(
        "bakeoff selftest  {} cpus ({})  {} tokens/request at {} tok/s, {} waves",
        r.host.cpus, r.host.cpu_model, r.max_tokens, r.decode_tok_s, r.waves
    );
    if let Some(w) = &r.workload {
        println!("workload: {}", w["describe"].as_str().unwrap_or_default());
    }
    println!(
        "{:>6} {:>7} {:>9} | {:>8} {:>8} {:>8} | {:>9} {:>9} | {:>8} | {:>7} {:>11} {:>6} | {:>7} {:>6}",
        "conc",
        "ok/fail",
        "chunks",
        "add p50",
        "add p99",
        "add max",
        "ttft p99",
        "ttft p99*",
        "gap p99",
        "cpu/chk",
        "(user+sys)",
        "kstamp",
        "rss MiB",
        "wall s"
    );
    for l in &r.levels {
        println!(
            "{:>6} {:>7} {:>9} | {:>8} {:>8} {:>8} | {:>9} {:>9} | {:>8} | {:>6.2}µ {:>11} {:>5.1}% | {:>7.1} {:>6.1}",
            l.concurrency,
            format!("{}/{}", l.requests_ok, l.requests_failed),
            l.chunks,
            f(&l.added_delay_ms, |d| d.p50),
            f(&l.added_delay_ms, |d| d.p99),
            f(&l.added_delay_ms, |d| d.max),
            f(&l.ttft_error_ms_all, |d| d.p99),
            f(&l.ttft_error_ms_after_first_wave, |d| d.p99),
            f(&l.chunk_gap_error_ms, |d| d.p99),
            l.client_cpu_us_per_chunk,
            format!(
                "{:.2}+{:.2}",
                l.client_cpu_user_us_per_chunk, l.client_cpu_sys_us_per_chunk
            ),
            l.kernel_stamped_reads * 100.0,
            l.peak_rss_mib,
            l.wall_s
        );
        println!(
            "{:>6} engine: TTFT p50 {} p99 {} ms (declared 20 + prefill), decode p50 {} min {} tok/s (declared {}), CPU {:.1}µ per chunk",
            "",
            f(&l.engine_ttft_ms, |d| d.p50),
            f(&l.engine_ttft_ms, |d| d.p99),
            f(&l.engine_decode_tok_s, |d| d.p50),
            f(&l.engine_decode_tok_s, |d| d.min),
            r.decode_tok_s,
            l.engine_cpu_us_per_chunk
        );
        if let (Some(u), Some(s)) = (l.floor_cpu_user_us_per_chunk, l.floor_cpu_sys_us_per_chunk) {
            println!(
                "{:>6} floor: a bare epoll+recvmsg reader (no runtime, no parsing) {:.2}µ ({:.2}+{:.2}) per chunk, {} naps (client {}, ratio {:.2})",
                "",
                u + s,
                u,
                s,
                l.floor_naps.unwrap_or(0),
                l.naps,
                l.client_cpu_us_per_chunk / (u + s)
            );
            let w = |w: &crate::load::pace::Waits| {
                format!(
                    "{} waits: {} napped, {} below the read rate, {} lagging",
                    w.waits, w.naps, w.below_rate, w.lagging
                )
            };
            println!(
                "{:>6} waits: client {}; floor {}",
                "",
                w(&l.waits),
                l.floor_waits.as_ref().map_or("not measured".into(), w)
            );
        }
        if let Some(w) = &l.workload {
            super::selftest_source::print_level(w);
        }
        if l.unmatched_requests > 0 {
            println!(
                "       {} requests could not be matched to the engine's emission log",
                l.unmatched_requests
            );
        }
    }
    println!("times in ms; add = client arrival - engine emission per chunk; ttft p99* = after the first wave; cpu/chk = client CPU per received chunk (user+sys µs); kstamp = reads stamped with the kernel's receive time");
}
