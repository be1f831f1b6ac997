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
    /// Where it ran in each, when either campaign had several lanes (docs/fleet.md).
    pub lanes: Option<ArmLanes>,
}

/// The lanes an arm ran on in A and in B (`id (host:port)`; None: the campaign's one lane).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ArmLanes {
    pub a: Option<String>,
    pub b: Option<String>,
    /// Its figures came from different cards in A and B: a different lane address, or one
    /// side's only lane against a lane of the other's several.
    pub other_card: bool,
}

/// The lane an arm ran on in a multi-lane campaign: its id and address.
fn lane_of(r: &CampaignResult, arm: &str) -> Option<(String, String)> {
    r.lanes
        .iter()
        .find(|l| l.arms.iter().any(|a| a == arm))
        .map(|l| (l.id.clone(), l.address.clone()))
}

fn arm_lanes(a: &CampaignResult, b: &CampaignResult, arm: &str) -> Option<ArmLanes> {
    if a.lanes.is_empty() && b.lanes.is_empty() {
        return None;
    }
    let (x, y) = (lane_of(a, arm), lane_of(b, arm));
    let other_card = match (&x, &y) {
        (Some((_, p)), Some((_, q))) => p != q,
        _ => true,
    };
    let name = |l: Option<(String, String)>| l.map(|(id, addr)| format!("{id} ({addr})"));
    Some(ArmLanes {
        a: name(x),
        b: name(y),
        other_card,
    })
}

/// The card-to-card spread that bounds a change of `m` between two cards: the larger of the
/// two campaigns' measured spreads, with its words; None when neither measured one on `m`.
pub fn card_spread(c: &Comparison, m: RankingMetric) -> Option<(f64, String)> {
    c.spreads
        .iter()
        .filter_map(|s| Some((s.spread.get(&m)?.spread, s.words(m)?)))
        .max_by(|x, y| x.0.total_cmp(&y.0))
}

/// Whether B's change against A on `m` is within the card-to-card spread, for an arm whose
/// figures came from different cards: `|a − b| / min(a, b) ≤ spread`, the ranking's measure.
fn within_spread(c: &Comparison, r: &Row, m: RankingMetric, x: &Stat, y: &Stat) -> Option<String> {
    if !r.lanes.as_ref().is_some_and(|l| l.other_card) {
        return None;
    }
    let (s, words) = card_spread(c, m)?;
    crate::decide::spread::margin_within(x.p50, y.p50, s).then_some(words)
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
    /// The card-to-card spreads the two campaigns measured (multi-lane ones only).
    #[serde(skip)]
    pub spreads: Vec<crate::evidence::result::LaneSpread>,
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
                lanes: arm_lanes(a, b, &x.id),
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
        spreads: [a, b]
            .iter()
            .filter_map(|r| r.lane_spread.clone())
            .collect(),
    })
}

/// Shared arms whose figures came from different cards, on a metric with no card-to-card
/// spread to judge the change by: one warning each.
pub fn card_warnings(c: &Comparison) -> Vec<String> {
    let mut out = Vec::new();
    for r in &c.rows {
        let Some(l) = r.lanes.as_ref().filter(|l| l.other_card) else {
            continue;
        };
        let unbounded: Vec<String> = r
            .metrics
            .iter()
            .filter(|(m, x, y)| x.is_some() && y.is_some() && card_spread(c, *m).is_none())
            .map(|(m, _, _)| descriptor(*m).field())
            .collect();
        if !unbounded.is_empty() {
            out.push(format!(
                "`{}` ran on {} in A and {} in B, and no card-to-card spread was measured for {}: a change there may be the card's, not the arm's",
                r.arm,
                on(&l.a),
                on(&l.b),
                unbounded.join(", ")
            ));
        }
    }
    out
}

/// A side's lane in words.
fn on(s: &Option<String>) -> String {
    s.clone().unwrap_or_else(|| "its one lane".into())
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
    /// The arm ran on different cards in A and B and the change is within the card-to-card
    /// spread (its words); not counted by `--fail-on-regression` either.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub within_card_spread: Option<String>,
}

impl Regression {
    /// Whether `--fail-on-regression` counts it: beyond the intervals and the card spread.
    pub fn counts(&self) -> bool {
        !self.inside_cis && self.within_card_spread.is_none()
    }
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
                    within_card_spread: within_spread(c, r, *m, x, y),
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
    /// Where the arm ran in A and B, when either campaign had several lanes.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub lanes: Option<ArmLanes>,
    /// The change is within the card-to-card spread (its words): the arm ran on different cards.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub within_card_spread: Option<String>,
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
                    lanes: r.lanes.clone(),
                    within_card_spread: match (x, y) {
                        (Some(x), Some(y)) => within_spread(c, r, *m, x, y),
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

    /// `compare --json`'s whole document: each bundle's load notes and the card warnings, and,
    /// with a regression limit `pct`, the limit and every change past it (counted or not).
    /// The CLI and the MCP server's `compare` give the same document.
    pub fn full(
        c: &Comparison,
        notes_a: &[String],
        notes_b: &[String],
        pct: Option<f64>,
    ) -> ComparisonDoc {
        let mut doc = ComparisonDoc::new(c);
        doc.warnings = notes_a
            .iter()
            .map(|n| format!("A: {n}"))
            .chain(notes_b.iter().map(|n| format!("B: {n}")))
            .chain(card_warnings(c))
            .collect();
        if let Some(p) = pct {
            doc.fail_on_regression_pct = Some(p);
            doc.regressions = Some(regressions(c, p));
        }
        doc
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
                            "tie (intervals overlap)".to_string()
                        } else if let Some(w) = within_spread(c, r, *m, x, y) {
                            format!("tie ({w})")
                        } else if better {
                            "B better".into()
                        } else {
                            "A better".into()
                        },
                    )
                }
                _ => ("—".into(), "not measured in both".into()),
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
    for r in &c.rows {
        if let Some(l) = r.lanes.as_ref().filter(|l| l.other_card) {
            let _ = writeln!(
                o,
                "lanes: `{}` ran on {} in A and {} in B (different cards)",
                r.arm,
                on(&l.a),
                on(&l.b)
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

#[cfg(test)]
mod lane_tests {
    use super::*;
    use crate::evidence::result::{LaneRun, LaneSpread, MetricSpread, TimingRecord};

    fn stat(p50: f64) -> Stat {
        // A tight interval: the intervals alone never tie these.
        Stat {
            p50,
            ci95: [p50 * 0.995, p50 * 1.005],
            p95: p50,
            n: 20,
            ci_method: None,
            ci_coverage: Some(0.95),
        }
    }

    /// One arm `cand` with warm TTFT `ttft` on lane `lane` of two, the spread 8 % on TTFT.
    fn multi(lane: &str, ttft: f64) -> CampaignResult {
        let arm = ArmResult {
            id: "cand".into(),
            warm: Some(TimingRecord {
                ttft_ms: Some(stat(ttft)),
                ..Default::default()
            }),
            ..Default::default()
        };
        let run = |id: &str, port: u16, arms: Vec<String>| LaneRun {
            id: id.into(),
            address: format!("127.0.0.1:{port}"),
            arms,
            ..Default::default()
        };
        let mut spread = LaneSpread::default();
        spread.spread.insert(
            RankingMetric::Ttft,
            MetricSpread {
                spread: 0.08,
                lanes: 2,
                lowest: "g0".into(),
                highest: "g1".into(),
            },
        );
        let on = |l: &str| {
            if l == lane {
                vec!["cand".into()]
            } else {
                vec![]
            }
        };
        CampaignResult {
            campaign_id: "c".into(),
            arms: vec![arm],
            lanes: vec![run("g0", 18200, on("g0")), run("g1", 18201, on("g1"))],
            lane_spread: Some(spread),
            ..Default::default()
        }
    }

    #[test]
    fn a_change_within_the_card_spread_on_another_card_is_a_tie_not_a_regression() {
        // 5 % slower on the other card: within the 8 % spread, not counted.
        let c = compare(&multi("g0", 40.0), &multi("g1", 42.0), false).unwrap();
        let l = c.rows[0].lanes.as_ref().unwrap();
        assert_eq!(
            (l.a.as_deref(), l.b.as_deref(), l.other_card),
            (
                Some("g0 (127.0.0.1:18200)"),
                Some("g1 (127.0.0.1:18201)"),
                true
            )
        );
        let r = regressions(&c, 2.0);
        assert_eq!(r.len(), 1, "{r:?}");
        assert_eq!(
            r[0].within_card_spread.as_deref(),
            Some("within card-to-card spread (8.0 % across 2 lanes)")
        );
        assert!(!r[0].counts());
        assert!(render(&c).contains("tie (within card-to-card spread (8.0 % across 2 lanes))"));
        assert!(render(&c).contains("lanes: `cand` ran on g0 (127.0.0.1:18200) in A and g1 (127.0.0.1:18201) in B (different cards)"));
        // Decode and E2E were not measured; TTFT has a spread: no warning.
        assert!(card_warnings(&c).is_empty(), "{:?}", card_warnings(&c));
        // 15 % slower: beyond the spread, counted.
        let c = compare(&multi("g0", 40.0), &multi("g1", 46.0), false).unwrap();
        assert!(regressions(&c, 2.0)[0].counts());
        // The same 5 % on the same card is a real regression: the spread is between cards.
        let c = compare(&multi("g1", 40.0), &multi("g1", 42.0), false).unwrap();
        assert!(!c.rows[0].lanes.as_ref().unwrap().other_card);
        assert!(regressions(&c, 2.0)[0].counts());
    }

    #[test]
    fn another_card_without_a_measured_spread_is_warned_about() {
        let mut b = multi("g1", 42.0);
        b.lane_spread = None;
        let mut a = multi("g0", 40.0);
        a.lane_spread = None;
        let c = compare(&a, &b, false).unwrap();
        assert!(regressions(&c, 2.0)[0].counts());
        let w = card_warnings(&c);
        assert_eq!(w.len(), 1, "{w:?}");
        assert!(
            w[0].contains("no card-to-card spread was measured for ttft_ms"),
            "{w:?}"
        );
        // A one-lane campaign against a multi-lane one: its one lane is another card.
        let mut one = multi("g0", 40.0);
        one.lanes.clear();
        let c = compare(&one, &multi("g1", 42.0), false).unwrap();
        let l = c.rows[0].lanes.as_ref().unwrap();
        assert!(l.a.is_none() && l.other_card, "{l:?}");
        assert!(regressions(&c, 2.0)[0].within_card_spread.is_some());
    }
}
