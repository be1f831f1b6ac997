//! Lexicographic ranking by the campaign's priorities, with ties.
//!
//! Two arms tie on a metric when the intervals of their medians overlap, or when their relative
//! difference is within the tolerance the campaign declares for that metric. The intervals are
//! what the sample supports (`metrics::stats`): an order-statistic CI of 95 % or more from 6
//! requests on, the range `[min, max]` below (a wider, more cautious test than a 95 % CI would
//! be; the reason says which was used); a
//! tie passes the decision to the next priority. Ties are not transitive, so the ranking never
//! sorts with them: it picks the best arm of a set by successive filtering (keep the arms that
//! tie with the best on priority 1, then on priority 2, ...), and ranks by repeated picking.

use super::metric::descriptor;
pub use super::metric::{measure, measure_at, Measure};
use super::spread::Cross;
use crate::evidence::result::{ArmResult, CampaignResult};
use crate::evidence::RankingMetric;
use std::collections::BTreeMap;

/// Whether two measures tie: overlapping intervals of the median (order-statistic CIs or ranges),
/// overlapping capacity brackets [held, broken) (half-open: an arm that held where the other
/// broke is ahead), or a relative difference within `tol`.
pub fn ties(a: Measure, b: Measure, tol: f64) -> bool {
    if let (Some(x), Some(y)) = (a.ci95, b.ci95) {
        let bracket = a.stat.is_none() && b.stat.is_none();
        if bracket && x[0] < y[1] && y[0] < x[1] {
            return true;
        }
        if !bracket && x[0] <= y[1] && y[0] <= x[1] {
            return true;
        }
    }
    let scale = a.value.abs().max(b.value.abs());
    scale == 0.0 || (a.value - b.value).abs() / scale <= tol
}

/// "within card-to-card spread (8.0 % across 2 lanes)" when `best` and an arm of `tied` ran on
/// different lanes and their margin on `m` is within the spread; with whether the spread alone
/// tied them (the tie rule alone, with tolerance `tol`, would separate them).
pub fn spread_words(
    r: &CampaignResult,
    m: RankingMetric,
    best: &str,
    tied: &[String],
    tol: f64,
) -> Option<(String, bool)> {
    let cross = Cross::of(r);
    let lvl = r.workload.concurrency_priority_level;
    let bm = measure_at(r.arm(best)?, m, lvl)?;
    let (mut any, mut alone) = (false, false);
    for x in tied.iter().filter(|x| *x != best) {
        let Some(v) = r.arm(x).and_then(|a| measure_at(a, m, lvl)) else {
            continue;
        };
        if cross.within(m, best, x, bm.value, v.value) {
            any = true;
            alone |= !ties(bm, v, tol);
        }
    }
    any.then(|| Some((r.lane_spread.as_ref()?.words(m)?, alone)))
        .flatten()
}

/// `how` (the tie rule's words for a tie on `m`) with the spread's: replaced when only the
/// spread tied them, added when the intervals or the tolerance tied them too.
pub fn with_spread(
    how: String,
    r: &CampaignResult,
    m: RankingMetric,
    best: &str,
    tied: &[String],
    tol: f64,
) -> String {
    match spread_words(r, m, best, tied, tol) {
        Some((w, true)) => w,
        Some((w, false)) => format!("{how}; {w}"),
        None => how,
    }
}

/// Whether `a` is strictly better than `b` on `m` (ignoring ties).
pub fn better(m: RankingMetric, a: f64, b: f64) -> bool {
    descriptor(m).better(a, b)
}

/// How one pick was decided.
#[derive(Debug, Clone, PartialEq)]
pub struct Pick {
    pub arm: String,
    /// Index into the priorities of the metric that separated it from the rest; None when the
    /// set was a single arm (0 used), or when it tied on every priority.
    pub decided_by: Option<usize>,
    /// Per priority index: the set of arms (the pick among them) that tied on that metric.
    pub tied_with: BTreeMap<usize, Vec<String>>,
    /// The arm that came closest on the deciding metric (the best of the rest).
    pub runner_up: Option<String>,
}

/// Picks the best of `set` (arm ids of `arms`) by the priorities; `level` is the concurrency
/// level the `concurrency` and `goodput` priorities compare (None: the highest each arm ran);
/// `cross`: arms of different lanes also tie within the card-to-card spread (`decide::spread`).
pub fn pick(
    arms: &[&ArmResult],
    set: &[String],
    priorities: &[RankingMetric],
    tol: &BTreeMap<RankingMetric, f64>,
    level: Option<u64>,
    cross: &Cross,
) -> Option<Pick> {
    let get = |id: &str| arms.iter().find(|a| a.id == id).copied();
    let mut cur: Vec<String> = set.to_vec();
    if cur.is_empty() {
        return None;
    }
    if cur.len() == 1 {
        return Some(Pick {
            arm: cur[0].clone(),
            decided_by: None,
            tied_with: BTreeMap::new(),
            runner_up: None,
        });
    }
    let mut tied_with = BTreeMap::new();
    for (i, &m) in priorities.iter().enumerate() {
        let vals: Vec<(String, Measure)> = cur
            .iter()
            .filter_map(|id| Some((id.clone(), measure_at(get(id)?, m, level)?)))
            .collect();
        let Some((best_id, best)) = vals.iter().cloned().reduce(|x, y| {
            if better(m, y.1.value, x.1.value) {
                y
            } else {
                x
            }
        }) else {
            continue;
        };
        let t = tol.get(&m).copied().unwrap_or(0.0);
        let tied: Vec<String> = vals
            .iter()
            .filter(|(id, v)| {
                ties(best, *v, t) || cross.within(m, &best_id, id, best.value, v.value)
            })
            .map(|(id, _)| id.clone())
            .collect();
        let others: Vec<(String, Measure)> = vals
            .iter()
            .filter(|(id, _)| !tied.contains(id))
            .cloned()
            .collect();
        if tied.len() == 1 {
            let runner_up = others
                .into_iter()
                .reduce(|x, y| {
                    if better(m, y.1.value, x.1.value) {
                        y
                    } else {
                        x
                    }
                })
                .map(|(id, _)| id);
            return Some(Pick {
                arm: best_id,
                decided_by: Some(i),
                tied_with,
                runner_up,
            });
        }
        tied_with.insert(i, tied.clone());
        cur = tied;
    }
    // Tied on every priority: the best first-priority value among the survivors.
    let m0 = priorities.first().copied();
    let best = cur
        .iter()
        .map(|id| {
            let v = m0
                .and_then(|m| measure_at(get(id)?, m, level))
                .map(|x| x.value);
            (id.clone(), v)
        })
        .reduce(|x, y| match (m0, x.1, y.1) {
            (Some(m), Some(a), Some(b)) if better(m, b, a) => y,
            (_, None, Some(_)) => y,
            _ => x,
        })
        .map(|(id, _)| id)
        .unwrap_or_else(|| cur[0].clone());
    Some(Pick {
        arm: best,
        decided_by: None,
        tied_with,
        runner_up: None,
    })
}

/// Full ranking of `set`: repeated [`pick`]s.
pub fn rank(
    arms: &[&ArmResult],
    set: &[String],
    priorities: &[RankingMetric],
    tol: &BTreeMap<RankingMetric, f64>,
    level: Option<u64>,
    cross: &Cross,
) -> Vec<Pick> {
    let mut rest: Vec<String> = set.to_vec();
    let mut out = Vec::new();
    while let Some(p) = pick(arms, &rest, priorities, tol, level, cross) {
        rest.retain(|x| *x != p.arm);
        out.push(p);
    }
    out
}
