//! The one SLO judge: a level's limits checked against its distributions, and its goodput (the
//! successful requests whose own latencies met every limit, per second of the window). Used by
//! `bakeoff bench` at every level and by a campaign's timing steps (`run/steps/timing.rs`, which
//! records it in the evidence's own form).

use crate::metrics::slo::{self, Goodput, SloCheck, SloLimit};
use crate::metrics::summary::RunStats;
use crate::metrics::RequestMetrics;
use serde::Serialize;

/// A level's SLO verdict: met when every check is.
#[derive(Debug, Clone, Serialize)]
pub struct SloVerdict {
    pub met: bool,
    pub checks: Vec<CheckLine>,
}

/// One check and its sentence.
#[derive(Debug, Clone, Serialize)]
pub struct CheckLine {
    #[serde(flatten)]
    pub check: SloCheck,
    /// `ttft p95 <= 500 ms: 120 ms, met`.
    pub text: String,
}

/// The verdict and the goodput of one level.
#[derive(Debug, Clone)]
pub struct Judgement {
    pub slo: SloVerdict,
    pub goodput: Goodput,
}

/// Judges a finished level; None without limits. `ok`: the metrics of its successful measured
/// requests.
pub fn judge<'a>(
    limits: &[SloLimit],
    stats: &RunStats,
    ok: impl IntoIterator<Item = &'a RequestMetrics>,
) -> Option<Judgement> {
    if limits.is_empty() {
        return None;
    }
    let checks: Vec<CheckLine> = slo::check(limits, &stats.metrics)
        .into_iter()
        .map(|c| CheckLine {
            text: c.to_string(),
            check: c,
        })
        .collect();
    Some(Judgement {
        slo: SloVerdict {
            met: checks.iter().all(|c| c.check.met),
            checks,
        },
        goodput: slo::goodput(limits, ok, stats.window_s),
    })
}
