//! Trace replay (`bench --trace`): a JSONL trace (`workload::trace`) replayed at its own arrival
//! times (scaled, windowed, sampled), each request with its own input and output length and the
//! prompt blocks it shares with others. The requests are a work set (`workload::items`), so the
//! request lines, the expected against reported prompt tokens and the output-length note are the
//! dataset's; the schedule is an open loop with given offsets (`load::Arrival::Given`), so the
//! arrival error is the open loop's schedule lag (intended send to actual send), one path.

use super::observe::Observer;
use crate::load::{Arrival, Mode, Plan};
use crate::metrics::summary::RunStats;
use crate::workload::items::{Content, SizeCtx, WorkItem, WorkSet};
use crate::workload::prompt;
use crate::workload::trace::{self, Replay, Select};
use anyhow::{bail, Result};
use serde::Serialize;
use serde_json::json;
use std::path::PathBuf;
use std::sync::Arc;

pub use crate::workload::trace::MAX_REPLAY_TOKENS;

/// What `--trace` (or a campaign's `[workload.trace]`) asks for.
#[derive(Debug, Clone)]
pub struct TraceSpec {
    pub path: PathBuf,
    pub select: Select,
    /// Tokens per `hash_ids` block.
    pub block_tokens: u64,
    /// How errors name the file (`--trace`) and the other settings (`--trace-` + field).
    pub file_label: &'static str,
    pub label: &'static str,
}

impl TraceSpec {
    /// The name of setting `field` (`file`, `speedup`, `start`, `duration`, `sample`).
    pub fn label(&self, field: &str) -> String {
        match field {
            "file" => self.file_label.to_string(),
            f => format!("{}{f}", self.label),
        }
    }
}

/// A trace read, checked and selected (before any request: its errors come first).
pub struct Opened {
    file: trace::RequestTrace,
    sel: Select,
    replay: Replay,
}

/// Reads the trace and selects the replay (`seed` draws the sample).
pub fn open(t: &TraceSpec, seed: u64) -> Result<Opened> {
    let file = trace::load(&t.path, t.block_tokens)
        .map_err(|e| anyhow::anyhow!("{} {e}", t.label("file")))?;
    let sel = Select { seed, ..t.select };
    let replay = trace::select(&file, &sel, |f| t.label(f)).map_err(|e| anyhow::anyhow!(e))?;
    let prompt_tokens: u64 = replay.requests.iter().map(|r| r.input_length).sum();
    if prompt_tokens > MAX_REPLAY_TOKENS {
        bail!(
            "{} {}: the replay's prompts hold {prompt_tokens} tokens, over the {MAX_REPLAY_TOKENS} one run builds; narrow it with {} / {} or {}",
            t.label("file"),
            t.path.display(),
            t.label("start"),
            t.label("duration"),
            t.label("sample")
        );
    }
    Ok(Opened { file, sel, replay })
}

/// The replay, sized: its schedule and its requests.
#[derive(Debug, Clone)]
pub struct TraceLoad {
    pub offsets: Arc<[u64]>,
    pub work: Arc<WorkSet>,
    pub record: TraceRecord,
}

/// The report's `trace` record: what was replayed and how closely the schedule was kept.
#[derive(Debug, Clone, Serialize)]
pub struct TraceRecord {
    pub file: String,
    pub sha256: String,
    /// Requests in the file, and replayed (after the window and the sample).
    pub requests_in_file: usize,
    pub replayed: usize,
    pub speedup: f64,
    pub window_start_s: Option<f64>,
    pub window_duration_s: Option<f64>,
    pub sample: Option<usize>,
    pub seed: u64,
    pub block_tokens: u64,
    /// Replayed schedule: first to last intended send, seconds, and the mean rate over it.
    pub span_s: f64,
    pub mean_rate_per_s: f64,
    /// Prompt tokens of the replayed requests, and those the trace shares with an earlier
    /// request by its `hash_ids` (what a prefix cache could serve, before block rounding).
    pub prompt_tokens: u64,
    pub shared_tokens: u64,
    /// The endpoint's template tokens added to each prompt (measured once).
    pub template_overhead: i64,
    /// Actual send minus the trace's intended send over the measured requests (the open loop's
    /// `schedule_lag_ms`; a request held back by `--max-concurrency` counts here, never in its
    /// TTFT). Absent before the run.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub arrival_error_ms: Option<ArrivalError>,
}

/// Percentiles of the arrival error, ms.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct ArrivalError {
    pub n: usize,
    pub p50: f64,
    pub p99: f64,
    pub max: f64,
}

impl TraceRecord {
    /// The record with the level's arrival error.
    pub fn with_error(&self, stats: &RunStats) -> TraceRecord {
        let mut r = self.clone();
        r.arrival_error_ms = stats.metrics.get("schedule_lag_ms").map(|d| ArrivalError {
            n: d.n,
            p50: d.p50,
            p99: d.p99,
            max: d.max,
        });
        r
    }
}

/// Builds the opened replay's prompts. `salt` keys the block texts: a fresh one per run (the
/// run's nonce base), so a run never finds an earlier run's blocks in a cache.
pub async fn prepare(
    t: &TraceSpec,
    o: Opened,
    salt: u64,
    ctx: &SizeCtx<'_>,
    obs: &(impl Observer + ?Sized),
) -> Result<TraceLoad> {
    let Opened { file, sel, replay } = o;
    let prompt_tokens: u64 = replay.requests.iter().map(|r| r.input_length).sum();
    // The template's tokens, measured once with a small sized prompt (the trace's own words are
    // one token each, so each prompt's count is its input_length plus these).
    obs.note(&format!(
        "measuring the template overhead of {} for the trace's prompts ...",
        ctx.target
    ));
    let m = prompt::build(&ctx.spec(16)).await.map_err(|e| {
        anyhow::anyhow!("{}: measuring the template overhead: {e}", t.label("file"))
    })?;
    let overhead = m.template_overhead;
    let record = record(t, &file, &sel, &replay, prompt_tokens, overhead);
    obs.note(&format!(
        "replaying {} of {} requests of {} over {:.1} s ({:.1} requests/s on average, speedup {}); {} of {prompt_tokens} prompt tokens shared by hash_ids",
        record.replayed, record.requests_in_file, record.file, record.span_s, record.mean_rate_per_s, sel.speedup, record.shared_tokens
    ));
    let shared = trace::shared_tokens(&replay.requests, t.block_tokens);
    let items = replay
        .requests
        .iter()
        .enumerate()
        .map(|(i, r)| WorkItem {
            content: Content::Text(trace::prompt(r, i as u64, t.block_tokens, salt)),
            expected_tokens: u64::try_from(r.input_length as i64 + overhead).ok(),
            max_tokens: Some(r.output_length),
            source: json!({
                "trace_line": r.line,
                "timestamp_ms": r.timestamp_ms,
                "input_length": r.input_length,
                "output_length": r.output_length,
                "shared_tokens": shared[i],
            }),
        })
        .collect();
    let work = WorkSet {
        items,
        nonce: None,
        record: json!({
            "strategy": "trace",
            "describe": format!("trace {} ({} requests, blocks of {} tokens), one token per word", record.file, record.replayed, t.block_tokens),
            "nonce": false,
            "template_overhead": overhead,
            "sizing_requests": m.sizing_requests,
            "tokenize_requests": m.tokenize_requests,
        }),
    };
    Ok(TraceLoad {
        offsets: replay.offsets_ns.into(),
        work: Arc::new(work),
        record,
    })
}

fn record(
    t: &TraceSpec,
    file: &trace::RequestTrace,
    sel: &Select,
    replay: &Replay,
    prompt_tokens: u64,
    overhead: i64,
) -> TraceRecord {
    let n = replay.requests.len();
    let span_s = replay.offsets_ns.last().copied().unwrap_or(0) as f64 / 1e9;
    TraceRecord {
        file: file.path.display().to_string(),
        sha256: file.sha256.clone(),
        requests_in_file: file.requests.len(),
        replayed: n,
        speedup: sel.speedup,
        window_start_s: sel.start_s,
        window_duration_s: sel.duration_s,
        sample: sel.sample,
        seed: sel.seed,
        block_tokens: t.block_tokens,
        span_s,
        mean_rate_per_s: mean_rate(n, span_s),
        prompt_tokens,
        shared_tokens: trace::shared_tokens(&replay.requests, t.block_tokens)
            .iter()
            .sum(),
        template_overhead: overhead,
        arrival_error_ms: None,
    }
}

/// Requests per second over the schedule (all at once: the count, as a burst of one second).
fn mean_rate(n: usize, span_s: f64) -> f64 {
    match span_s > 0.0 {
        true => (n.saturating_sub(1)) as f64 / span_s,
        false => n as f64,
    }
}

impl TraceLoad {
    /// The replay's load plan: every request at its offset, the first `warmup` as warm-up.
    pub fn plan(&self, warmup: u64, max_in_flight: Option<usize>) -> Plan {
        let n = self.offsets.len() as u64;
        Plan {
            mode: Mode::Open {
                rate: self.record.mean_rate_per_s.max(1.0),
                arrival: Arrival::Given(self.offsets.clone()),
            },
            requests: Some(n.saturating_sub(warmup)),
            duration: None,
            warmup,
            warmup_duration: None,
            max_in_flight,
        }
    }

    /// Measured requests: those after the warm-up (refused when none is left).
    pub fn measured(&self, warmup: u64, label: &str) -> Result<u64> {
        let n = self.offsets.len() as u64;
        if warmup >= n {
            bail!("{label} {warmup} leaves none of the trace's {n} replayed requests to measure; lower it");
        }
        Ok(n - warmup)
    }
}
