//! `[workload.trace]`: the trace file is read and checked now (its SHA-256 and request count go
//! into the plan; an unreadable line is named with its field), the window and sample selected, so a
//! campaign whose replay cannot run is refused before anything starts.

use super::common::p;
use crate::campaign::diag::Reporter;
use crate::campaign::paths::resolve;
use crate::campaign::spec::Campaign;
use crate::workload::trace::{self, Select, MAX_REPLAY_TOKENS};
use std::path::Path;

/// The table's fields as `workload::trace::select` names them in its errors.
fn field(f: &str) -> &'static str {
    match f {
        "speedup" => "speedup",
        "start" => "start_s",
        "duration" => "duration_s",
        _ => "sample",
    }
}

pub(super) fn trace(c: &mut Campaign, dir: &Path, r: &mut Reporter) {
    let smallest_context = c
        .arms
        .iter()
        .map(|a| a.served_context)
        .filter(|&n| n > 0)
        .min();
    let Some(t) = c.workload.trace.as_mut() else {
        return;
    };
    let at = p("workload.trace");
    t.path = resolve(dir, &t.path);
    if t.block_tokens == 0 {
        r.error(
            &at.key("block_tokens"),
            "block_tokens = 0: a hash_ids block must hold tokens",
            "give the trace's block size, e.g. block_tokens = 512 (the Mooncake traces')",
        );
        return;
    }
    if t.max_concurrency == Some(0) {
        r.error(
            &at.key("max_concurrency"),
            "max_concurrency = 0 would send nothing",
            "give 1 or more, or leave it out (no cap)",
        );
    }
    let file = match trace::load(&t.path, t.block_tokens) {
        Ok(f) => f,
        Err(e) => {
            r.error(
                &at.key("path"),
                format!("the trace is refused: {e}"),
                "fix the named line (JSONL: one object a line with timestamp, input_length, output_length and optional hash_ids), or give another path relative to the campaign file",
            );
            return;
        }
    };
    t.sha256 = file.sha256.clone();
    t.requests_in_file = file.requests.len();
    let sel = Select {
        speedup: t.speedup,
        start_s: t.start_s,
        duration_s: t.duration_s,
        sample: t.sample,
        seed: t.seed,
    };
    let replay = match trace::select(&file, &sel, |f| field(f).to_string()) {
        Ok(x) => x,
        Err(e) => {
            let f = ["speedup", "start_s", "duration_s", "sample"]
                .into_iter()
                .find(|f| e.starts_with(&format!("{f}:")))
                .unwrap_or("path");
            let problem = e.strip_prefix(&format!("{f}: ")).unwrap_or(&e);
            r.error(
                &at.key(f),
                problem.to_string(),
                "change it so that the replay keeps at least one request of the trace",
            );
            return;
        }
    };
    let n = replay.requests.len();
    if u64::from(t.warmup) >= n as u64 {
        r.error(
            &at.key("warmup"),
            format!(
                "warmup = {} leaves none of the {n} replayed requests to measure",
                t.warmup
            ),
            format!("give warmup below {n}, or widen the window / sample"),
        );
    }
    let tokens: u64 = replay.requests.iter().map(|q| q.input_length).sum();
    if tokens > MAX_REPLAY_TOKENS {
        r.error(
            &at.key("path"),
            format!("the replay's prompts hold {tokens} tokens, over the {MAX_REPLAY_TOKENS} one step builds"),
            "narrow it with start_s / duration_s or sample",
        );
    }
    // A request longer than an arm's context would be refused by the engine: a failed request
    // that says nothing about the arm.
    if let (Some(ctx), Some(q)) = (
        smallest_context,
        replay
            .requests
            .iter()
            .max_by_key(|q| q.input_length + q.output_length),
    ) {
        if q.input_length + q.output_length > ctx {
            r.error(
                &at.key("path"),
                format!(
                    "line {} asks for {} input + {} output tokens, more than the {ctx}-token context of the smallest arm",
                    q.line, q.input_length, q.output_length
                ),
                "replay a window or sample without such requests, or a trace sized for these arms",
            );
        }
    }
}
