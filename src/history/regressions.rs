//! Change points of every series, as the history commands report them.

use super::changepoint::{detect, Change, Obs, Params};
use super::series::{higher_is_better, Series};

/// A change point of one series, with what the recipe identity changed there.
#[derive(Debug, Clone, PartialEq)]
pub struct Found {
    pub series: usize,
    pub change: Change,
    /// The first bundle after the change: digest, started, path.
    pub digest: String,
    pub started_at: String,
    pub path: String,
    /// What changed in the recipe identity between the last point before and the first after.
    pub changed: Vec<String>,
    /// The figure got worse (slower, less throughput).
    pub regression: bool,
    /// How much worse (positive) or better (negative), percent of the level before.
    pub worse_pct: f64,
}

/// Every change point of `series` (each series oldest first); `since`: only those whose first
/// bundle after the change started at or after it (the series are read whole, so the levels
/// before it still count).
pub fn find(series: &[Series], p: &Params, since: Option<&str>) -> Vec<Found> {
    let mut out = Vec::new();
    for (si, s) in series.iter().enumerate() {
        let obs: Vec<Obs> = s
            .points
            .iter()
            .map(|pt| Obs::with_interval(pt.value, pt.lo, pt.hi))
            .collect();
        for c in detect(&obs, p) {
            let first = &s.points[c.index];
            if since.is_some_and(|t| first.started_at.as_str() < t) {
                continue;
            }
            let before = &s.points[c.index - 1];
            let sign = if higher_is_better(&s.key.figure) {
                -1.0
            } else {
                1.0
            };
            let worse_pct = sign * c.relative * 100.0;
            out.push(Found {
                series: si,
                change: c,
                digest: first.digest.clone(),
                started_at: first.started_at.clone(),
                path: first.path.clone(),
                changed: first.facts.changes_from(&before.facts),
                regression: worse_pct > 0.0,
                worse_pct,
            });
        }
    }
    out
}
