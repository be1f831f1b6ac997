//! `[promotion]`: how `bakeoff promote` bakes the winner it puts in service (docs/promotion.md).
//! Every key has a default, so a campaign without the table can still be promoted.

use serde::{Deserialize, Serialize};

/// `[promotion]`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct PromotionTable {
    /// The bake window, seconds (`bakeoff promote --bake` wins).
    pub bake_s: f64,
    /// One analysis interval, seconds.
    pub interval_s: f64,
    /// Failed intervals that end the bake with a rollback.
    pub failure_limit: u32,
    /// The bake's traffic: the campaign's workload replayed at this many requests per second.
    pub rate: f64,
    /// Fewer successful requests than this in an interval: inconclusive (not a pass).
    pub min_requests: u64,
    /// An interval's TTFT p95 may exceed the arm's bake-off TTFT p95 by at most this many percent.
    pub ttft_p95_within_pct: f64,
    /// An interval's median decode tok/s may fall below the arm's bake-off median by at most this
    /// many percent.
    pub decode_tok_s_within_pct: f64,
    /// Failed requests an interval may have, percent of its requests.
    pub error_budget_pct: f64,
    /// A canary of the campaign's tools and quality gates runs every this many intervals (0:
    /// never); a canary gate that fails fails its interval.
    pub canary_every: u32,
}

impl Default for PromotionTable {
    fn default() -> Self {
        PromotionTable {
            bake_s: 300.0,
            interval_s: 30.0,
            failure_limit: 2,
            rate: 1.0,
            min_requests: 5,
            ttft_p95_within_pct: 20.0,
            decode_tok_s_within_pct: 20.0,
            error_budget_pct: 1.0,
            canary_every: 1,
        }
    }
}

impl PromotionTable {
    /// Each value out of range, as `[promotion] KEY: problem; fix` (for a bundle whose campaign
    /// was loaded before this table was checked at load).
    pub fn problems(&self) -> Vec<String> {
        self.issues()
            .into_iter()
            .map(|(k, problem, fix)| format!("[promotion] {k}: {problem}; {fix}"))
            .collect()
    }

    /// Each value out of range: (key, problem, fix).
    pub fn issues(&self) -> Vec<(&'static str, String, &'static str)> {
        let mut out = Vec::new();
        for (k, v) in [
            ("bake_s", self.bake_s),
            ("interval_s", self.interval_s),
            ("rate", self.rate),
            ("ttft_p95_within_pct", self.ttft_p95_within_pct),
            ("decode_tok_s_within_pct", self.decode_tok_s_within_pct),
        ] {
            if !(v.is_finite() && v > 0.0) {
                out.push((
                    k,
                    format!("must be a number > 0 (got {v})"),
                    "give a positive number",
                ));
            }
        }
        if !(self.error_budget_pct.is_finite() && (0.0..=100.0).contains(&self.error_budget_pct)) {
            out.push((
                "error_budget_pct",
                format!("must be in [0, 100] (got {})", self.error_budget_pct),
                "give a percentage",
            ));
        }
        if self.failure_limit == 0 {
            out.push((
                "failure_limit",
                "must be >= 1".into(),
                "give how many failed intervals roll back",
            ));
        }
        if self.interval_s > self.bake_s {
            out.push((
                "interval_s",
                format!("{} is longer than bake_s {}", self.interval_s, self.bake_s),
                "make the interval shorter than the bake",
            ));
        }
        out
    }
}
