//! The one per-request line: `bench --requests-jsonl` and each entry of a campaign timing
//! step's `requests` evidence. The metrics, the raw per-chunk arrival offsets, and what the
//! workload adds (a dataset or synthetic item, a conversation's turn or a prefix group, a
//! replayed conversation's source, a sweep level).

use crate::client::Trace;
use crate::load::places::place_fields;
use crate::workload::conversation::Scripts;
use crate::workload::items::{annotate, WorkSet};
use serde_json::{json, Value};
use std::sync::Arc;

/// A request's line: its metrics and raw chunk offsets. `run_start`: the CLOCK_MONOTONIC ns
/// `send_offset_ms` counts from.
pub fn request_line(t: &Trace, run_start: u64) -> Value {
    let m = crate::metrics::RequestMetrics::from_trace(t);
    json!({
        "index": t.index,
        "warmup": t.warmup,
        "ok": t.ok(),
        "error": t.error,
        "status": t.status,
        "response_id": t.response_id,
        "send_offset_ms": (t.send_ns as i64 - run_start as i64) as f64 / 1e6,
        "schedule_lag_ms": t.intended_ns.map(|i| t.send_ns.saturating_sub(i) as f64 / 1e6),
        "connect_ms": t.connect_ns.map(|c| c as f64 / 1e6),
        "metrics": m,
        "usage": t.usage,
        "finish_reason": t.finish_reason,
        "client_prompt_tokens": t.client_prompt_tokens,
        "chunk_offsets_ns": t.events.iter().map(|e| e.t_ns).collect::<Vec<_>>(),
        "chunk_kinds": t.events.iter().map(|e| e.kind).collect::<Vec<_>>(),
    })
}

/// The level a line belongs to in a sweep.
#[derive(Debug, Clone, Copy)]
pub struct LevelTag {
    pub index: usize,
    /// Closed loop: its concurrency; open loop: its rate.
    pub concurrency: Option<usize>,
    pub rate_per_s: Option<f64>,
}

/// Writes the lines of one load: the request line and what its workload adds.
#[derive(Default)]
pub struct LineWriter {
    /// `send_offset_ms` counts from here; None: from the first trace written.
    pub start: Option<u64>,
    /// Dataset or synthetic items, with the index offset their requests were numbered from.
    pub items: Option<(Arc<WorkSet>, u64)>,
    /// Replayed dataset conversations.
    pub script: Option<Arc<Scripts>>,
    pub level: Option<LevelTag>,
}

impl LineWriter {
    pub fn line(&mut self, t: &Trace) -> Value {
        let start = *self.start.get_or_insert(t.send_ns);
        let mut line = request_line(t, start);
        place_fields(&mut line, t);
        if let Some(l) = self.level {
            line["sweep_level"] = json!(l.index);
            line["concurrency"] = json!(l.concurrency);
            if l.rate_per_s.is_some() {
                line["rate_per_s"] = json!(l.rate_per_s);
            }
        }
        if let Some((w, offset)) = &self.items {
            annotate(w, *offset, t, &mut line);
        }
        if let Some(s) = &self.script {
            annotate_script(s, t, &mut line);
        }
        line
    }
}

/// What the line of a replayed dataset conversation adds: its source item and the turn's
/// output length.
fn annotate_script(s: &Scripts, t: &Trace, line: &mut Value) {
    let Some(p) = t.place else { return };
    if let (Some(c), Some(k)) = (p.conversation, p.turn) {
        let script = s.of(c);
        line["source"] = script.source.clone();
        line["sent_max_tokens"] = json!(script.max_tokens.get(k as usize - 1).copied().flatten());
    }
}
