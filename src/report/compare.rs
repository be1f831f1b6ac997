//! `bakeoff compare DIR1 DIR2`: the arms two campaigns share, side by side. Unlike workloads
//! (matched prompt tokens, max tokens, concurrency, sampling, prefix-cache policy, API,
//! long-context targets, workload source, hardware, measurement protocol) are refused unless forced, with every
//! difference named. Each side is labelled by campaign id and run time (or a user label); the
//! comparison renders as a table or JSON, and [`regressions`] lists every metric of B worse than
//! A's beyond a threshold (`--fail-on-regression PCT`).

use crate::decide::metric::{
    descriptor, first_turn_ttft, interval_kind, IntervalKind, TTFT_FIRST_TURN, WARM_STATS,
};
use crate::decide::rank::{ties, Measure};
use crate::evidence::result::{ArmResult, CampaignResult, Stat};
use crate::evidence::RankingMetric;
use serde::Serialize;
use std::fmt::Write as _;

/// One way two campaigns' workloads differ.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Difference {
    pub field: &'static str,
    pub a: String,
    pub b: String,
}

impl std::fmt::Display for Difference {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {} vs {}", self.field, self.a, self.b)
    }
}

fn reported_prompt(r: &CampaignResult) -> String {
    let mut v: Vec<u64> = r
        .workload
        .matched_prompt_tokens_reported
        .values()
        .copied()
        .collect();
    v.sort();
    v.dedup();
    match v.as_slice() {
        [] => r.workload.matched_prompt_tokens.to_string(),
        [x] => x.to_string(),
        many => format!("{many:?}"),
    }
}

/// Every workload difference that makes two campaigns unlike.
pub fn differences(a: &CampaignResult, b: &CampaignResult) -> Vec<Difference> {
    let mut d = Vec::new();
    let mut check = |field: &'static str, x: String, y: String| {
        if x != y {
            d.push(Difference { field, a: x, b: y });
        }
    };
    check(
        "matched_prompt_tokens",
        a.workload.matched_prompt_tokens.to_string(),
        b.workload.matched_prompt_tokens.to_string(),
    );
    check(
        "matched_prompt_tokens (endpoint-reported)",
        reported_prompt(a),
        reported_prompt(b),
    );
    check(
        "max_tokens",
        a.workload.max_tokens.to_string(),
        b.workload.max_tokens.to_string(),
    );
    check(
        "concurrency",
        format!("{:?}", a.workload.concurrency),
        format!("{:?}", b.workload.concurrency),
    );
    check(
        "hardware",
        format!("{:?}", a.identity.hardware),
        format!("{:?}", b.identity.hardware),
    );
    check(
        "measurement path",
        a.measurement_path.clone(),
        b.measurement_path.clone(),
    );
    check(
        "warm repetitions",
        a.workload.warm_repetitions_per_arm.to_string(),
        b.workload.warm_repetitions_per_arm.to_string(),
    );
    check(
        "sampling",
        a.workload.sampling.to_string(),
        b.workload.sampling.to_string(),
    );
    let cache = |r: &CampaignResult| match r.workload.allow_prefix_cache {
        Some(true) => "allowed (allow_prefix_cache = true)".to_string(),
        Some(false) => "defeated by a nonce (allow_prefix_cache = false)".to_string(),
        None => "not recorded (bundle predates it)".to_string(),
    };
    check("prefix cache", cache(a), cache(b));
    let api = |r: &CampaignResult| {
        if r.workload.api.is_empty() {
            "not recorded".to_string()
        } else {
            r.workload.api.clone()
        }
    };
    check("api", api(a), api(b));
    // The workload source (dataset digest and sampling, distributions, conversation, shared
    // prefix), without the file's path (the same file may sit elsewhere on another machine).
    let source = |r: &CampaignResult| match &r.workload.source {
        None => "the matched prompt".to_string(),
        Some(v) => {
            let mut v = v.clone();
            if let Some(o) = v.as_object_mut() {
                o.remove("path");
            }
            v.to_string()
        }
    };
    check("workload source", source(a), source(b));
    check(
        "long_context_targets",
        format!("{:?}", a.workload.long_context_targets),
        format!("{:?}", b.workload.long_context_targets),
    );
    d
}

/// One shared arm's figures in both campaigns.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Row {
    pub arm: String,
    /// Per warm metric (TTFT, decode, E2E): its statistic in A and in B.
    pub metrics: Vec<(RankingMetric, Option<Stat>, Option<Stat>)>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Comparison {
    /// Each side's label: `<campaign id> (run <started_at>)`, or the user's.
    pub a: String,
    pub b: String,
    pub forced: Vec<Difference>,
    pub rows: Vec<Row>,
    pub only_a: Vec<String>,
    pub only_b: Vec<String>,
}

/// The warm medians, then the first conversation turns' TTFT (uncached by design: a comparison
/// of two runs whose later turns a prefix cache served differently still has a like figure).
fn stats(arm: &ArmResult) -> Vec<(RankingMetric, Option<Stat>)> {
    let w = arm.warm.as_ref();
    WARM_STATS
        .iter()
        .map(|d| (d.metric, w.and_then(|w| d.stat(w))))
        .chain([(TTFT_FIRST_TURN.metric, first_turn_ttft(arm))])
        .collect()
}

/// Compares the arms (by id) two campaigns share. Unlike workloads are an error naming every
/// difference, unless `force`.
pub fn compare(a: &CampaignResult, b: &CampaignResult, force: bool) -> anyhow::Result<Comparison> {
    let diffs = differences(a, b);
    if !diffs.is_empty() && !force {
        anyhow::bail!(
            "the campaigns ran unlike workloads ({}); their numbers are not comparable. Pass --force to compare anyway",
            diffs.iter().map(|d| d.to_string()).collect::<Vec<_>>().join("; ")
        );
    }
    let mut rows = Vec::new();
    for x in &a.arms {
        if let Some(y) = b.arm(&x.id) {
            let metrics = stats(x)
                .into_iter()
                .zip(stats(y))
                .map(|((n, s1), (_, s2))| (n, s1, s2))
                // First-turn TTFT only where a side had conversation turns.
                .filter(|(n, s1, s2)| *n != TTFT_FIRST_TURN.metric || s1.is_some() || s2.is_some())
                .collect();
            rows.push(Row {
                arm: x.id.clone(),
                metrics,
            });
        }
    }
    Ok(Comparison {
        a: label(a),
        b: label(b),
        forced: diffs,
        rows,
        only_a: a
            .arms
            .iter()
            .filter(|x| b.arm(&x.id).is_none())
            .map(|x| x.id.clone())
            .collect(),
        only_b: b
            .arms
            .iter()
            .filter(|x| a.arm(&x.id).is_none())
            .map(|x| x.id.clone())
            .collect(),
    })
}

/// A side's default label: campaign id and when it ran, so two runs of one campaign differ.
pub fn label(r: &CampaignResult) -> String {
    if r.started_at.is_empty() {
        r.campaign_id.clone()
    } else {
        format!("{} (run {})", r.campaign_id, r.started_at)
    }
}

/// The change of B against A, in percent of A's median (None when not measured in both or A's
/// median is 0).
pub fn change_pct(x: &Stat, y: &Stat) -> Option<f64> {
    (x.p50 != 0.0).then(|| (y.p50 - x.p50) / x.p50 * 100.0)
}

/// One metric of one arm that is worse in B than in A by more than the threshold.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Regression {
    pub arm: String,
    pub metric: RankingMetric,
    pub a_p50: f64,
    pub b_p50: f64,
    /// How much worse B is, in percent of A (positive: slower TTFT/E2E, lower decode).
    pub worse_pct: f64,
    /// The two intervals of the median overlap (order-statistic CIs, or ranges below 6
    /// requests): beyond the threshold, but not shown to be a real difference
    /// (not counted by `--fail-on-regression`).
    pub inside_cis: bool,
}

/// Every shared metric whose median is worse in B than in A by more than `pct` percent of A's,
/// each marked whether the two intervals overlap (then the difference is not established).
pub fn regressions(c: &Comparison, pct: f64) -> Vec<Regression> {
    let mut out = Vec::new();
    for r in &c.rows {
        for (m, x, y) in &r.metrics {
            let (Some(x), Some(y)) = (x, y) else {
                continue;
            };
            let Some(ch) = change_pct(x, y) else {
                continue;
            };
            let worse = if descriptor(*m).higher_is_better() {
                -ch
            } else {
                ch
            };
            if worse > pct {
                out.push(Regression {
                    arm: r.arm.clone(),
                    metric: *m,
                    a_p50: x.p50,
                    b_p50: y.p50,
                    worse_pct: worse,
                    inside_cis: cis_overlap(x, y),
                });
            }
        }
    }
    out
}

/// One metric of one shared arm in `compare --json`'s `rows`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct MetricRow {
    pub arm: String,
    pub metric: RankingMetric,
    /// The metric's field name (`ttft_ms`).
    pub field: String,
    pub a: Option<Stat>,
    pub b: Option<Stat>,
    pub change_pct: Option<f64>,
}

/// What `compare --json` prints: labels, forced differences, a row per shared arm and metric,
/// the arms of one side only, the load warnings and, with `--fail-on-regression`, its limit and
/// what passed it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ComparisonDoc {
    pub a: String,
    pub b: String,
    pub forced_differences: Vec<Difference>,
    pub rows: Vec<MetricRow>,
    pub only_a: Vec<String>,
    pub only_b: Vec<String>,
    pub warnings: Vec<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fail_on_regression_pct: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub regressions: Option<Vec<Regression>>,
}

impl ComparisonDoc {
    /// The comparison's document with no warnings and no regression gate.
    pub fn new(c: &Comparison) -> ComparisonDoc {
        let rows = c
            .rows
            .iter()
            .flat_map(|r| {
                r.metrics.iter().map(move |(m, x, y)| MetricRow {
                    arm: r.arm.clone(),
                    metric: *m,
                    field: descriptor(*m).field(),
                    a: *x,
                    b: *y,
                    change_pct: match (x, y) {
                        (Some(x), Some(y)) => change_pct(x, y),
                        _ => None,
                    },
                })
            })
            .collect();
        ComparisonDoc {
            a: c.a.clone(),
            b: c.b.clone(),
            forced_differences: c.forced.clone(),
            rows,
            only_a: c.only_a.clone(),
            only_b: c.only_b.clone(),
            warnings: Vec::new(),
            fail_on_regression_pct: None,
            regressions: None,
        }
    }

    /// The document as JSON, its keys sorted (through `Value`) as `compare --json` always wrote
    /// them.
    pub fn to_json(&self) -> serde_json::Value {
        serde_json::to_value(self).expect("a comparison has only string keys")
    }
}

/// The comparison as a table: per shared arm and metric, both medians with CIs, the change and
/// whether it is inside the CIs (a tie).
pub fn render(c: &Comparison) -> String {
    let mut o = String::new();
    let _ = writeln!(o, "compare A = {} with B = {}", c.a, c.b);
    for d in &c.forced {
        let _ = writeln!(o, "  warning (--force): workloads differ: {d}");
    }
    let _ = writeln!(
        o,
        "{:<28}{:<14}{:>32}{:>32}{:>10}  verdict",
        "arm", "metric", "A p50 [interval]", "B p50 [interval]", "change"
    );
    for r in &c.rows {
        for (m, x, y) in &r.metrics {
            let d = descriptor(*m);
            let f = |s: &Option<Stat>| {
                s.map(|s| {
                    format!(
                        "{:.1} [{:.1}, {:.1}]{}",
                        s.p50,
                        s.ci95[0],
                        s.ci95[1],
                        interval_tag(&s)
                    )
                })
                .unwrap_or_else(|| "—".into())
            };
            let (change, verdict) = match (x, y) {
                (Some(x), Some(y)) => {
                    let pct = if x.p50 != 0.0 {
                        (y.p50 - x.p50) / x.p50 * 100.0
                    } else {
                        0.0
                    };
                    let tie = cis_overlap(x, y);
                    let better = d.better(y.p50, x.p50);
                    (
                        format!("{pct:+.1}%"),
                        if tie {
                            "tie (intervals overlap)"
                        } else if better {
                            "B better"
                        } else {
                            "A better"
                        },
                    )
                }
                _ => ("—".into(), "not measured in both"),
            };
            let _ = writeln!(
                o,
                "{:<28}{:<14}{:>32}{:>32}{:>10}  {verdict}",
                r.arm,
                d.field(),
                f(x),
                f(y),
                change
            );
        }
    }
    if c.rows.is_empty() {
        let _ = writeln!(o, "no shared arms (arms are matched by id)");
    } else {
        let _ = writeln!(
            o,
            "intervals of the median: N% an order-statistic CI with its exact coverage; rN% the range [min, max] of fewer than 6 requests (no 95 % interval is possible), with its coverage; bs a bootstrap from an older bundle (coverage not recorded)"
        );
    }
    if !c.only_a.is_empty() {
        let _ = writeln!(o, "only in A: {}", c.only_a.join(", "));
    }
    if !c.only_b.is_empty() {
        let _ = writeln!(o, "only in B: {}", c.only_b.join(", "));
    }
    o
}

/// A short mark of what an interval is: `97%` (an order-statistic CI with its coverage), `r94%`
/// (the range of fewer than 6 requests, with its coverage), `bs` (a bootstrap from an older
/// bundle, coverage not recorded).
fn interval_tag(s: &Stat) -> String {
    match interval_kind(s) {
        IntervalKind::Ci(c) => format!(" {:.0}%", c * 100.0),
        IntervalKind::Range(c) => format!(" r{:.0}%", c * 100.0),
        IntervalKind::Bootstrap => " bs".into(),
    }
}

/// Whether the intervals of two medians overlap (no tolerance): order-statistic CIs, or ranges
/// below 6 requests.
fn cis_overlap(x: &Stat, y: &Stat) -> bool {
    ties(Measure::of(*x), Measure::of(*y), 0.0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::evidence::result::{StepReuse, TurnReuse};

    fn result(first_turns: Option<&[f64]>) -> CampaignResult {
        let mut a = ArmResult {
            id: "inc".into(),
            ..Default::default()
        };
        if let Some(t) = first_turns {
            a.reuse = vec![StepReuse {
                step: "warm".into(),
                turns: vec![TurnReuse {
                    turn: 1,
                    ttft_ms: t.to_vec(),
                    ..Default::default()
                }],
                ..Default::default()
            }];
        }
        CampaignResult {
            campaign_id: "c".into(),
            arms: vec![a],
            ..Default::default()
        }
    }

    #[test]
    fn first_turn_ttft_is_compared_and_regresses_only_where_conversations_ran() {
        let a = result(Some(&[20.0, 21.0, 22.0, 20.5, 21.5, 20.0, 22.0, 21.0]));
        let b = result(Some(&[30.0, 31.0, 32.0, 30.5, 31.5, 30.0, 32.0, 31.0]));
        let c = compare(&a, &b, false).unwrap();
        let row = &c.rows[0].metrics;
        let (m, x, y) = row.last().unwrap();
        assert_eq!(*m, RankingMetric::TtftFirstTurn);
        assert_eq!((x.unwrap().p50, y.unwrap().p50), (21.0, 31.0));
        let r = regressions(&c, 10.0);
        assert_eq!(r.len(), 1, "{r:?}");
        assert_eq!(r[0].metric, RankingMetric::TtftFirstTurn);
        assert!(!r[0].inside_cis);
        // Without conversations on either side the row is not there at all.
        let plain = compare(&result(None), &result(None), false).unwrap();
        assert!(plain.rows[0]
            .metrics
            .iter()
            .all(|(m, _, _)| *m != RankingMetric::TtftFirstTurn));
    }
}
