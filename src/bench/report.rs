//! The typed report of one measured level (`bench --json`, one entry of a sweep's `levels`).

use super::slo::SloVerdict;
use super::spec::{ArrivalKind, Level};
use crate::metrics::slo::Goodput;
use crate::metrics::summary::RunStats;
use crate::workload::Endpoint;
use serde::Serialize;
use serde_json::{Map, Value};

/// Everything `--json` writes of one level.
#[derive(Debug, Serialize)]
pub struct BenchReport {
    pub bakeoff_version: &'static str,
    pub tool: &'static str,
    pub started_at: String,
    pub url: String,
    pub model: String,
    pub endpoint: Endpoint,
    /// What every request sent besides its prompt (the request body).
    pub sampling: Map<String, Value>,
    pub load: LoadRecord,
    /// How the prompts were made: the matched prompt's record, or a dataset's or synthetic
    /// source's (`workload::items`), with a shared prefix or replayed conversations added.
    pub prompt: Value,
    /// True when Ctrl-C or SIGTERM stopped the run: the statistics cover the requests that
    /// completed before it; requests in flight were dropped, not counted as failures.
    pub interrupted: bool,
    /// Where arrival times came from (`load::session::Reads::evidence`).
    pub arrival_clock: Value,
    /// What the reader of the numbers must know (also printed with the summary).
    pub warnings: Vec<String>,
    /// https only: how the server's certificate was checked (`client::Trust::record`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tls: Option<Value>,
    /// Multi-turn / shared-prefix runs: per-turn and per-group rows and the cached tokens share
    /// (`load::places`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub workload: Option<Value>,
    #[serde(flatten)]
    pub stats: RunStats,
    /// With SLO limits: met or not, each check with its observed value (`bench::slo`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub slo: Option<SloVerdict>,
    /// `--trace`: what was replayed and the arrival error against its schedule (`bench::trace`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub trace: Option<super::trace::TraceRecord>,
    /// With SLO limits: successful requests whose own latencies met every limit, and per second.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub goodput: Option<Goodput>,
    /// `keep_points`: each successful measured request's send time and latencies (not in
    /// `--json`).
    #[serde(skip)]
    pub points: Vec<SentRequest>,
}

impl BenchReport {
    /// The level this report measured.
    pub fn level(&self) -> Level {
        Level {
            concurrency: self.load.concurrency.unwrap_or(1),
            rate: self.load.rate_per_s,
            max_in_flight: self.load.max_concurrency,
        }
    }
}

/// A successful measured request: its send time (CLOCK_MONOTONIC ns, shared by every level)
/// and its metrics.
pub type SentRequest = (u64, crate::metrics::RequestMetrics);

/// Closed or open loop.
#[derive(Debug, Clone, Copy, Serialize, PartialEq, Default)]
#[serde(rename_all = "kebab-case")]
pub enum LoadMode {
    #[default]
    ClosedLoop,
    OpenLoop,
}

/// The report's `load` record: how the level's requests were started.
#[derive(Debug, Clone, Default, Serialize)]
pub struct LoadRecord {
    pub mode: LoadMode,
    /// Closed loop only.
    pub concurrency: Option<usize>,
    pub rate_per_s: Option<f64>,
    pub max_concurrency: Option<usize>,
    pub arrival: Option<ArrivalKind>,
    pub warmup_duration_s: Option<f64>,
    pub requests: Option<u64>,
    pub duration_s: Option<f64>,
    pub warmup: u64,
    pub timeout_s: f64,
    pub stall_timeout_s: f64,
    pub prefix_cache_nonce: bool,
    pub nonce_base: Option<u64>,
    /// `--seed` or `random`.
    pub nonce_base_from: Option<&'static str>,
    pub seed: Option<u64>,
    pub api_key_env: Option<String>,
    pub sweep_level: Option<usize>,
    pub sweep_concurrency: Option<Vec<usize>>,
    pub sweep_rate: Option<Vec<f64>>,
    pub find_saturation: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub multi_turn: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub think_time_ms: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub shared_prefix_tokens: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub prefix_groups: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub prefix_order: Option<&'static str>,
    /// After the run: requests of the warm-up (by count and by time).
    pub warmup_requests: u64,
    /// After the run, open loop: the most requests in flight at once.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub peak_in_flight: Option<u64>,
    /// After the run, with a cap: measured requests that waited for a slot.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cap_delayed_requests: Option<u64>,
    /// After the run, open loop: how the thread that wrote each request at its time was
    /// scheduled (`realtime`, `short-slice`, `default`); absent where the client's runtime sent
    /// them (a cap, conversations, TLS).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub send_thread: Option<&'static str>,
}

impl LoadRecord {
    /// Adds the level's load-shape numbers after the run.
    pub fn record_window(&mut self, w: &crate::load::RunWindow) {
        self.warmup_requests = w.warmup_requests;
        if self.mode == LoadMode::OpenLoop {
            self.peak_in_flight = Some(w.peak_in_flight);
            self.send_thread = w.send_thread;
        }
        if self.max_concurrency.is_some() {
            self.cap_delayed_requests = Some(w.cap_delayed);
        }
    }
}
