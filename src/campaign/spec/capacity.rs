//! `[workload.capacity]`: each arm's capacity under SLOs, searched with open-loop probes after
//! its timing steps (`bench::capacity` the search, `run/steps/capacity.rs` the step).

use super::workload::ArrivalProcess;
use serde::{Deserialize, Serialize};

/// `[workload.capacity]`: the SLO set, the search, its bounds and the failure-share limit.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Capacity {
    /// The limits every probe must hold, each in `[[workload.slo]]`'s grammar
    /// (`"ttft_p95=500ms"`, a comma list allowed); empty: the `[[workload.slo]]` entries that
    /// apply at every level.
    #[serde(default)]
    pub slo: Vec<String>,
    /// First probe's rate, requests per second (doubling search).
    #[serde(default = "default_start_rate")]
    pub start_rate: f64,
    /// Probe these rates, increasing, instead of doubling then bisecting.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub rates: Vec<f64>,
    /// No probe above this rate.
    #[serde(default = "default_max_rate")]
    pub max_rate: f64,
    /// At most this many probes per arm.
    #[serde(default = "default_max_steps")]
    pub max_steps: u32,
    /// Bisection stops when (broken − held) / held is at most this.
    #[serde(default = "default_precision")]
    pub precision: f64,
    /// Measured requests per probe (without `duration_secs`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub requests: Option<u32>,
    /// Seconds of arrivals per probe: rate × duration_secs requests (instead of `requests`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub duration_secs: Option<f64>,
    /// A probe whose share of failed requests is above this broke.
    #[serde(default = "default_failure_share")]
    pub max_failure_share: f64,
    #[serde(default)]
    pub arrival: ArrivalProcess,
}

fn default_start_rate() -> f64 {
    1.0
}
fn default_max_rate() -> f64 {
    64.0
}
fn default_max_steps() -> u32 {
    8
}
fn default_precision() -> f64 {
    0.1
}
/// `bakeoff bench --max-failure-share`'s default (`bench::sweep::DEFAULT_MAX_FAILURE_SHARE`).
fn default_failure_share() -> f64 {
    0.05
}

/// Measured requests per probe when neither `requests` nor `duration_secs` is given.
pub const DEFAULT_PROBE_REQUESTS: u32 = 32;
