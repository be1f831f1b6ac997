//! One timed step: the matched prompt at a fixed concurrency, closed loop, with an engine
//! `/metrics` snapshot before and after and GPU samples where the lane has GPUs.

use crate::client::{StreamOpts, Target, Trace};
use crate::evidence::result::{CiMethod, Stat, TimingRecord};
use crate::load::session::{self, Session, Telemetry};
use crate::load::source::{PromptText, RequestSource};
use crate::load::{Mode, Plan};
use crate::metrics::summary::RunStats;
use crate::workload::prompt::MatchedPrompt;
use serde_json::{json, Map, Value};
use std::sync::Arc;
use std::time::Duration;

/// Everything a timed step needs (owned: it runs in its own task).
pub struct TimingInput {
    pub target: Target,
    /// The shared body (`workload::request::BodySpec`); the prompt is added per request.
    pub base: Map<String, Value>,
    pub prompt: Arc<MatchedPrompt>,
    pub api_key: Option<String>,
    pub concurrency: u32,
    pub requests: u32,
    /// Request indices used: `first_index ..< first_index + requests` (distinct per server).
    pub first_index: u64,
    /// Where the campaign's request numbers start (`checkpoint.json` keeps it, so a resume
    /// continues without repeating a prompt): request `i`'s nonce is
    /// `nonce_number(nonce_base, first_index + i)`.
    pub nonce_base: u64,
    pub seed: u64,
    pub gpus: Vec<String>,
}

pub struct TimingOutput {
    pub stats: RunStats,
    pub evidence: Value,
    /// The per-request metrics of the successful requests (goodput under the campaign's SLOs).
    pub ok_metrics: Vec<crate::metrics::RequestMetrics>,
}

/// Runs the step through `load::session` (as `bakeoff bench` does); the evidence holds the
/// stats, one line per request (with raw chunk offsets), the engine's own metric deltas and GPU
/// samples joined to the step.
pub async fn run(inp: TimingInput) -> Result<TimingOutput, String> {
    let source = Arc::new(RequestSource {
        target: inp.target.clone(),
        endpoint: inp.prompt.endpoint,
        base: inp.base.clone(),
        prompt: PromptText::Matched(inp.prompt.clone()),
        api_key: inp.api_key.clone(),
        offset: inp.first_index,
        nonce_base: inp.nonce_base,
    });
    let s = Session {
        target: inp.target.clone(),
        plan: Plan {
            mode: Mode::Closed {
                concurrency: inp.concurrency as usize,
            },
            requests: Some(inp.requests as u64),
            duration: None,
            warmup: 0,
            warmup_duration: None,
            max_in_flight: None,
        },
        source,
        opts: StreamOpts {
            timeout: Duration::from_secs(600),
            stall: Duration::from_secs(120),
            collect: false,
        },
        cancel: None,
        telemetry: Telemetry::Lane {
            gpus: inp.gpus.clone(),
        },
        seed: inp.seed,
    };
    let out = session::run(s, Vec::<Trace>::new())
        .await
        .map_err(|e| format!("{e:#}"))?;
    let stats = out.stats();
    let lines: Vec<Value> = out
        .sink
        .iter()
        .map(|t| request_line(t, out.started_ns))
        .collect();
    let lane = out.lane.expect("asked for lane telemetry");
    let evidence = json!({
        "load": {"mode": "closed-loop", "concurrency": inp.concurrency, "requests": inp.requests,
                 "first_index": inp.first_index, "warmup": 0,
                 "nonce_base": inp.prompt.nonce.then_some(inp.nonce_base)},
        "load_error": out.window.as_ref().err().map(|e| e.to_string()),
        "sampling": Value::Object(inp.base.clone()),
        "prompt": serde_json::to_value(&*inp.prompt).unwrap_or(Value::Null),
        "stats": stats,
        // Requests served from the prefix cache although their prompts carried a nonce.
        "prefix_cache_warning": if inp.prompt.nonce { stats.prefix_cache.defeated_cache_warning() } else { None },
        "arrival_clock": out.reads.evidence(),
        // Set when the client, not the server, was the limit (its reads fell behind).
        "client_limit_warning": session::client_limit_warning(&stats, &out.reads),
        "engine_metrics": lane.engine_metrics,
        "gpu": lane.gpu,
        "requests": lines,
    });
    if let Err(e) = out.window {
        if stats.ok == 0 {
            return Err(format!("the load could not run: {e}"));
        }
    }
    let ok_metrics = out
        .sink
        .iter()
        .filter(|t| t.ok())
        .map(crate::metrics::RequestMetrics::from_trace)
        .collect();
    Ok(TimingOutput {
        stats,
        evidence,
        ok_metrics,
    })
}

fn request_line(t: &Trace, start: u64) -> Value {
    let m = crate::metrics::RequestMetrics::from_trace(t);
    json!({
        "index": t.index,
        "ok": t.ok(),
        "error": t.error,
        "status": t.status,
        "send_offset_ms": (t.send_ns as i64 - start as i64) as f64 / 1e6,
        "metrics": m,
        "usage": t.usage,
        "finish_reason": t.finish_reason,
        "chunk_offsets_ns": t.events.iter().map(|e| e.t_ns).collect::<Vec<_>>(),
        "chunk_kinds": t.events.iter().map(|e| e.kind).collect::<Vec<_>>(),
    })
}

fn stat(s: &RunStats, name: &str) -> Option<Stat> {
    s.metrics.get(name).map(|d| Stat {
        p50: d.p50,
        ci95: d.median_ci,
        p95: d.p95,
        n: d.n as u64,
        ci_method: CiMethod::parse(d.median_ci_method),
        ci_coverage: Some(d.median_ci_coverage),
    })
}

/// The result record of a timed step.
pub fn record(evidence: &str, concurrency: u32, s: &RunStats) -> TimingRecord {
    let prompt = s
        .metrics
        .get("prompt_tokens")
        .filter(|d| d.min == d.max)
        .map(|d| d.p50 as u64);
    TimingRecord {
        evidence: evidence.to_string(),
        concurrency: concurrency as u64,
        requests_ok: s.ok,
        requests_failed: s.failed,
        failures_by_class: s
            .failures_by_class
            .iter()
            .map(|(c, f)| (c.clone(), f.count))
            .collect(),
        ttft_ms: stat(s, "ttft_ms"),
        decode_tok_s: stat(s, "decode_tok_s"),
        e2e_ms: stat(s, "e2e_ms"),
        itl_ms: stat(s, "itl_ms"),
        aggregate_output_tok_s: s.aggregate_output_tok_s,
        prompt_tokens_reported: prompt,
        ..Default::default()
    }
}
