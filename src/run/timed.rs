//! One timed step: the matched prompt at a fixed concurrency, closed loop, with an engine
//! `/metrics` snapshot before and after and GPU samples where the lane has GPUs.

use crate::client::{post_request_bytes, StreamOpts, Target, Trace};
use crate::evidence::result::{Stat, TimingRecord};
use crate::load::{self, Mode, Plan, Prepared, Source};
use crate::metrics::summary::{Collector, RunStats};
use crate::telemetry::{engine_metrics, sampler};
use crate::workload::prompt::MatchedPrompt;
use serde_json::{json, Map, Value};
use std::sync::Arc;
use std::time::Duration;

/// Everything a timed step needs (owned: it runs in its own task).
pub struct TimingInput {
    pub target: Target,
    pub base: Map<String, Value>,
    pub prompt: Arc<MatchedPrompt>,
    pub api_key: Option<String>,
    pub concurrency: u32,
    pub requests: u32,
    /// Request indices used: `first_index ..< first_index + requests` (distinct per server).
    pub first_index: u64,
    pub seed: u64,
    pub gpus: Vec<String>,
}

struct Body {
    target: Target,
    base: Map<String, Value>,
    prompt: Arc<MatchedPrompt>,
    api_key: Option<String>,
    offset: u64,
}

impl Source for Body {
    fn prepare(&self, index: u64) -> Prepared {
        let mut body = self.base.clone();
        self.prompt.insert_input(&mut body, self.offset + index);
        let bytes = serde_json::to_vec(&body).expect("JSON body");
        Prepared {
            bytes: post_request_bytes(
                &self.target,
                self.prompt.endpoint.path(),
                &bytes,
                self.api_key.as_deref(),
                true,
            ),
            prompt_tokens: Some(self.prompt.target_tokens),
        }
    }
}

pub struct TimingOutput {
    pub stats: RunStats,
    pub evidence: Value,
}

/// Runs the step; the evidence holds the stats, one line per request (with raw chunk offsets),
/// the engine's own metric deltas and GPU samples joined to the step.
pub async fn run(inp: TimingInput) -> Result<TimingOutput, String> {
    let before = engine_metrics::scrape(&inp.target, "/metrics", Duration::from_secs(5)).await;
    let gpu = (!inp.gpus.is_empty())
        .then(|| sampler::Sampler::start(&inp.gpus, Duration::from_millis(200)));
    let source = Arc::new(Body {
        target: inp.target.clone(),
        base: inp.base.clone(),
        prompt: inp.prompt.clone(),
        api_key: inp.api_key.clone(),
        offset: inp.first_index,
    });
    let plan = Plan {
        mode: Mode::Closed {
            concurrency: inp.concurrency as usize,
        },
        requests: Some(inp.requests as u64),
        duration: None,
        warmup: 0,
    };
    let opts = StreamOpts {
        timeout: Duration::from_secs(600),
        stall: Duration::from_secs(120),
        collect: false,
    };
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<Trace>();
    let t0 = crate::clock::mono_ns();
    let window = load::run(inp.target.clone(), plan, source, opts, tx).await;
    let t1 = crate::clock::mono_ns();
    let samples = gpu.map(|s| s.stop());
    let after = engine_metrics::scrape(&inp.target, "/metrics", Duration::from_secs(5)).await;
    let mut c = Collector::default();
    let mut lines = Vec::new();
    while let Ok(t) = rx.try_recv() {
        c.add(&t, Some(inp.prompt.target_tokens));
        lines.push(request_line(&t, t0));
    }
    let stats = c.summarize(inp.seed);
    let engine = match (&before, &after) {
        (Ok(b), Ok(a)) => json!({
            "url": a.url,
            "diff": engine_metrics::diff(&b.metrics, &a.metrics),
            "before_mono_ns": b.mono_ns, "after_mono_ns": a.mono_ns,
        }),
        (b, a) => json!({
            "not_available": true,
            "before_error": b.as_ref().err(),
            "after_error": a.as_ref().err(),
        }),
    };
    let gpu = match samples {
        None => json!({"status": "not-applicable", "reason": "the lane owns no GPU"}),
        Some(set) => json!({
            "source": set.source, "note": set.note, "interval_ms": set.interval_ms,
            "per_gpu": sampler::summarize(&set.samples, t0, t1),
        }),
    };
    let evidence = json!({
        "load": {"mode": "closed-loop", "concurrency": inp.concurrency, "requests": inp.requests,
                 "first_index": inp.first_index, "warmup": 0},
        "load_error": window.as_ref().err().map(|e| e.to_string()),
        "sampling": Value::Object(inp.base.clone()),
        "prompt": serde_json::to_value(&*inp.prompt).unwrap_or(Value::Null),
        "stats": stats,
        "engine_metrics": engine,
        "gpu": gpu,
        "requests": lines,
    });
    if let Err(e) = window {
        if stats.ok == 0 {
            return Err(format!("the load could not run: {e}"));
        }
    }
    Ok(TimingOutput { stats, evidence })
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
        ci95: d.median_ci95,
        p95: d.p95,
        n: d.n as u64,
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
        ttft_ms: stat(s, "ttft_ms"),
        decode_tok_s: stat(s, "decode_tok_s"),
        e2e_ms: stat(s, "e2e_ms"),
        itl_ms: stat(s, "itl_ms"),
        aggregate_output_tok_s: s.aggregate_output_tok_s,
        prompt_tokens_reported: prompt,
    }
}
