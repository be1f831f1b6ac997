//! `[workload.trace]`: each arm replays a JSONL request trace at its own arrival times
//! (`workload::trace` reads it, `bench::trace` builds the replay, `run/steps/trace.rs` the step),
//! as `bakeoff bench --trace` does.

use serde::{Deserialize, Serialize};
use std::path::PathBuf;

/// `[workload.trace]`: the file, the part replayed and how fast.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Trace {
    /// The JSONL trace, relative to the campaign file's directory: one request a line with
    /// `timestamp` (ms), `input_length`, `output_length` and optional `hash_ids`.
    pub path: PathBuf,
    /// Trace time runs this many times faster (2: twice the arrival rate).
    #[serde(default = "one")]
    pub speedup: f64,
    /// The window: requests from `start_s` (trace time, seconds) for `duration_s`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start_s: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub duration_s: Option<f64>,
    /// Replay this many requests of the window, drawn with `seed`, kept in arrival order.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sample: Option<usize>,
    #[serde(default)]
    pub seed: u64,
    /// Tokens per `hash_ids` block (the Mooncake traces use 512).
    #[serde(default = "block_tokens")]
    pub block_tokens: u64,
    /// The first requests count as warm-up (sent on schedule, not measured).
    #[serde(default)]
    pub warmup: u32,
    /// At most this many requests in flight; one held back counts as schedule lag (arrival
    /// error), never as TTFT.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_concurrency: Option<u32>,
    /// SHA-256 of the file's bytes and its request count, read at load (never from the campaign).
    #[serde(skip_deserializing, default, skip_serializing_if = "String::is_empty")]
    pub sha256: String,
    #[serde(skip_deserializing, default)]
    pub requests_in_file: usize,
}

fn one() -> f64 {
    1.0
}

fn block_tokens() -> u64 {
    crate::workload::trace::DEFAULT_BLOCK_TOKENS
}

impl Trace {
    /// The dry run's words.
    pub fn describe(&self) -> String {
        let mut w = format!(
            "replay {} ({} requests in the file, sha256 {}…) at speedup {}",
            self.path.display(),
            self.requests_in_file,
            self.sha256.chars().take(12).collect::<String>(),
            self.speedup
        );
        if let Some(s) = self.start_s {
            w.push_str(&format!(", from {s} s"));
        }
        if let Some(d) = self.duration_s {
            w.push_str(&format!(" for {d} s"));
        }
        if let Some(n) = self.sample {
            w.push_str(&format!(", {n} sampled (seed {})", self.seed));
        }
        if self.warmup > 0 {
            w.push_str(&format!(", the first {} as warm-up", self.warmup));
        }
        if let Some(c) = self.max_concurrency {
            w.push_str(&format!(", at most {c} in flight"));
        }
        w.push_str("; arrival error (p50/p99/max) measured");
        w
    }
}
