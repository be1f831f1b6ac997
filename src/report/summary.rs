//! `decision-summary.json`, schema `anvil-serving.benchmark-decision-summary/v1`, typed:
//! [`DecisionSummary`] is what [`build`] makes, what `publication-summary.md` and `report.html`
//! read, and what a reader of the file gets back. Every number comes from the campaign result;
//! every evidence name is a file of the manifest (or one of the verdict files written beside it).
//!
//! Fields the v1 schema does not require default when absent, so older summaries and the
//! reference example read back.

use super::{HTML_FILE, PUBLICATION_FILE};
use crate::decide::eligibility::ArmExt;
use crate::decide::metric::{interval_kind, IntervalKind, DECODE, TTFT};
use crate::decide::{ArmVerdict, Verdict};
use crate::evidence::manifest::Manifest;
use crate::evidence::result::{ArmResult, ArmStatus, CampaignResult, Stat};
use crate::evidence::RankingMetric;
use crate::evidence::{FailureClass, GateName, GateStatus};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

pub const SCHEMA: &str = "anvil-serving.benchmark-decision-summary/v1";

/// The whole document. Written through `serde_json::Value` (see [`DecisionSummary::to_json`]),
/// so its keys come out sorted, as they always have.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DecisionSummary {
    pub schema: String,
    pub campaign_id: String,
    pub complete: bool,
    pub identity: SummaryIdentity,
    pub workload: SummaryWorkload,
    pub measurement: SummaryMeasurement,
    pub gates: Vec<GateRow>,
    /// Winner first, measured rejected arms next, the rest in ranking order, the incumbent last.
    pub headline_results: Vec<Headline>,
    pub failures: Vec<FailureRow>,
    pub limitations: Vec<String>,
    /// What weakens each arm's figures, from the manifest's validity block: one line per arm
    /// with something to say, or "Nothing weakens these figures."
    #[serde(default)]
    pub validity: Vec<String>,
    pub decision: SummaryDecision,
    /// Per arm, GPU energy and cost per million output tokens at the priority level
    /// (`decide::energy`): `null` with the reason where not measured.
    #[serde(default)]
    pub energy_cost: Vec<crate::decide::energy::EnergyCost>,
    #[serde(default)]
    pub arms: Vec<ArmVerdict>,
    pub evidence: Vec<String>,
    #[serde(default)]
    pub bakeoff_version: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SummaryIdentity {
    pub hardware: String,
    pub topology: String,
    pub incumbent: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SummaryWorkload {
    pub ranking_priority: Vec<RankingMetric>,
    /// The size the endpoints reported (the most common), else the target.
    pub matched_prompt_tokens: u64,
    #[serde(default)]
    pub max_tokens: u64,
    #[serde(default)]
    pub concurrency: Vec<u64>,
    pub warm_repetitions_per_arm: u64,
    /// Per context profile (`<profile>_arms`), the long-context prompt's reported tokens.
    pub long_context_actual_prompt_tokens: BTreeMap<String, PromptTokens>,
}

/// One prompt size, or one per arm when the arms of a profile differ.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum PromptTokens {
    One(u64),
    Many(Vec<u64>),
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SummaryMeasurement {
    pub path: String,
    pub warm_cold_state: String,
    pub candidate_arms: u64,
    pub statistics: Vec<String>,
    #[serde(default)]
    pub concurrency_levels: Vec<u64>,
    /// Written as `null` when the ranking does not read a level.
    #[serde(default)]
    pub ranked_concurrency_level: Option<u64>,
}

/// One gate line: the idle baseline, one per gate name over all arms (with `required`), one per
/// arm that failed it, the restoration.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GateRow {
    pub name: String,
    pub status: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub evidence: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub required: Option<bool>,
}

/// One arm's warm figures. The metric keys are `decide::metric`'s (`TTFT.p50_key()`, …; a unit
/// test holds them equal); every key not named here is a level's aggregate throughput.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Headline {
    pub candidate: String,
    #[serde(default)]
    pub arm: String,
    pub context_tokens: u64,
    #[serde(default)]
    pub warm_requests: u64,
    #[serde(default)]
    pub evidence: String,
    pub decision: String,
    pub ttft_p50_ms: f64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ttft_p50_ci95_ms: Option<[f64; 2]>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ttft_p50_ci: Option<Interval>,
    pub decode_p50_tok_s: f64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub decode_p50_ci95_tok_s: Option<[f64; 2]>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub decode_p50_ci: Option<Interval>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub long_context_decode_tok_s: Option<f64>,
    /// `c<level>_aggregate_tok_s` ([`level_key`]) → tok/s.
    #[serde(flatten)]
    pub aggregate_tok_s: BTreeMap<String, f64>,
}

impl Headline {
    /// The aggregate output throughput at level `c`, when the arm ran it.
    pub fn aggregate_at(&self, c: u64) -> Option<f64> {
        self.aggregate_tok_s.get(&level_key(c)).copied()
    }
}

/// What a median's interval is: `{"method": "order-statistic", "coverage": 0.96875, "n": 6,
/// "label": "96.88 % CI"}`; method `range` below 6 requests; an older bundle's bootstrap has no
/// coverage.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Interval {
    pub method: IntervalMethod,
    pub coverage: Option<f64>,
    pub n: u64,
    pub label: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum IntervalMethod {
    OrderStatistic,
    Range,
    Bootstrap,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FailureRow {
    pub candidate: String,
    #[serde(default)]
    pub arm: String,
    pub class: FailureClass,
    pub detail: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub evidence: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SummaryDecision {
    pub evidence_labels: Vec<String>,
    pub decision_labels: Vec<String>,
    pub promotion_authorized: bool,
    /// `<label> (<model> on <engine>)`.
    pub winner: Option<String>,
    #[serde(default)]
    pub winner_arm: Option<String>,
    pub reason: String,
    pub next_gate: String,
    #[serde(default)]
    pub ranking: Vec<String>,
}

impl DecisionSummary {
    /// The document as JSON. Through `Value`, whose map is sorted: the file's keys stay in the
    /// order every earlier bakeoff wrote them.
    pub fn to_json(&self) -> serde_json::Value {
        serde_json::to_value(self).expect("a decision summary has only string keys")
    }
}

fn round1(x: f64) -> f64 {
    (x * 10.0).round() / 10.0
}

/// An evidence name when the bundle has that file.
fn known(m: &Manifest, name: Option<&str>) -> Option<String> {
    let n = name?;
    (m.files.iter().any(|f| f.path == n) || n == PUBLICATION_FILE || n == HTML_FILE)
        .then(|| n.to_string())
}

/// The matched prompt size the endpoints reported (the most common value), else the target.
fn matched_tokens(r: &CampaignResult) -> u64 {
    let mut count: BTreeMap<u64, usize> = BTreeMap::new();
    for v in r.workload.matched_prompt_tokens_reported.values() {
        *count.entry(*v).or_default() += 1;
    }
    count
        .into_iter()
        .max_by_key(|(_, c)| *c)
        .map(|(v, _)| v)
        .unwrap_or(r.workload.matched_prompt_tokens)
        .max(1)
}

fn row(name: String, status: String, detail: Option<String>, evidence: Option<String>) -> GateRow {
    GateRow {
        name,
        status,
        evidence,
        detail: detail.filter(|d| !d.trim().is_empty()),
        required: None,
    }
}

fn gates(r: &CampaignResult, m: &Manifest) -> Vec<GateRow> {
    let mut out = Vec::new();
    if let Some(b) = &r.idle_baseline {
        out.push(row(
            "idle GPU baseline".into(),
            b.status.to_string(),
            Some(b.detail.clone()),
            known(m, b.evidence.as_deref()),
        ));
    }
    let mut names: Vec<GateName> = Vec::new();
    for a in &r.arms {
        for g in &a.gates {
            if !names.contains(&g.name) {
                names.push(g.name);
            }
        }
    }
    for name in names {
        out.extend(gate_rows(name, r, m));
    }
    out.push(restoration_row(r, m));
    out
}

/// One gate over every arm (how many passed, whether required), then a line per arm that
/// failed it.
fn gate_rows(name: GateName, r: &CampaignResult, m: &Manifest) -> Vec<GateRow> {
    let started = r
        .arms
        .iter()
        .filter(|a| !matches!(a.status, ArmStatus::Pending | ArmStatus::Interrupted))
        .count();
    let recs: Vec<_> = r
        .arms
        .iter()
        .flat_map(|a| a.gates.iter().map(move |g| (a, g)))
        .filter(|(_, g)| g.name == name)
        .collect();
    let passed = recs
        .iter()
        .filter(|(_, g)| g.status == GateStatus::Passed)
        .count();
    let ran = recs.iter().filter(|(_, g)| g.status.ran()).count();
    let status = if ran == 0 {
        GateStatus::Skipped.to_string()
    } else if passed == ran && ran == started {
        format!("passed on all {ran} arms")
    } else if passed == ran {
        format!("passed on every arm that ran it ({ran} of {started})")
    } else {
        format!("passed on {passed} of {ran} arms that ran it")
    };
    let ev = if recs.len() == 1 {
        known(m, recs[0].1.evidence.as_deref())
    } else {
        None
    };
    let mut out = vec![GateRow {
        required: Some(recs.iter().any(|(_, g)| g.required)),
        ..row(format!("{name} ({})", gate_kind(name)), status, None, ev)
    }];
    for (a, g) in recs.iter().filter(|(_, g)| g.status == GateStatus::Failed) {
        let counts = match (g.passed, g.total) {
            (Some(p), Some(t)) => format!("{p}/{t} passed"),
            _ => String::new(),
        };
        let detail = [counts, g.detail.clone()]
            .into_iter()
            .filter(|s| !s.is_empty())
            .collect::<Vec<_>>()
            .join("; ");
        out.push(row(
            format!("{} {name}", a.label_or_id()),
            GateStatus::Failed.to_string(),
            Some(detail),
            known(m, g.evidence.as_deref()),
        ));
    }
    out
}

fn restoration_row(r: &CampaignResult, m: &Manifest) -> GateRow {
    match &r.restoration {
        Some(x) => {
            let ev = known(m, x.evidence.as_deref())
                .or_else(|| known(m, x.preflight.as_ref().and_then(|p| p.evidence.as_deref())));
            row(
                "exact incumbent restoration".into(),
                x.status.to_string(),
                Some(x.detail.clone()),
                ev,
            )
        }
        None => row(
            "exact incumbent restoration".into(),
            GateStatus::Skipped.to_string(),
            Some("not recorded".into()),
            None,
        ),
    }
}

/// What a gate checks, in words.
fn gate_kind(name: GateName) -> &'static str {
    match name {
        GateName::Smoke | GateName::Json | GateName::Streaming | GateName::RestorationPreflight => {
            "preflight"
        }
        GateName::Tools => "tool calling",
        GateName::Retrieval => "long-context exact retrieval",
        GateName::Quality => "bounded quality",
        GateName::IdleBaseline | GateName::MemoryReserve => "GPU memory",
        GateName::Restoration => "exact incumbent restoration",
    }
}

/// The concurrency levels the headline shows, ascending: every level the campaign declared
/// (those that ran on some arm, C1 the warm run, when the result records none).
pub fn headline_levels(r: &CampaignResult) -> Vec<u64> {
    let mut l: Vec<u64> = r.workload.concurrency.clone();
    if l.is_empty() {
        for a in &r.arms {
            l.extend(a.concurrency.keys().filter_map(|k| k.parse::<u64>().ok()));
        }
    }
    l.sort();
    l.dedup();
    l
}

/// The level the ranking's `concurrency` priority reads (`concurrency_priority_level`, else the
/// highest level), when the campaign ranks on it.
pub fn ranked_level(v: &Verdict, r: &CampaignResult) -> Option<u64> {
    v.priorities
        .contains(&RankingMetric::Concurrency)
        .then(|| {
            r.workload
                .concurrency_priority_level
                .or_else(|| headline_levels(r).last().copied())
        })
        .flatten()
}

/// A level's headline key: `c2_aggregate_tok_s`.
pub fn level_key(c: u64) -> String {
    format!("c{c}_aggregate_tok_s")
}

/// An arm's aggregate output throughput at level `c` (C1: the warm run).
fn aggregate_at(a: &ArmResult, c: u64) -> Option<f64> {
    a.concurrency
        .get(&c.to_string())
        .and_then(|t| t.aggregate_output_tok_s)
        .or_else(|| {
            (c == 1)
                .then(|| a.warm.as_ref()?.aggregate_output_tok_s)
                .flatten()
        })
}

/// What a median's interval is, for the documents: method `order-statistic` with its exact
/// coverage (label "96.88 % CI"); `range` below 6 requests (label "range, no 95 % interval");
/// an older bundle's bootstrap has no coverage.
pub fn interval(s: &Stat) -> Interval {
    let (method, label) = match interval_kind(s) {
        IntervalKind::Ci(c) => (
            IntervalMethod::OrderStatistic,
            format!("{} % CI", crate::decide::metric::pct(c)),
        ),
        IntervalKind::Range(c) => (
            IntervalMethod::Range,
            format!(
                "range, {} % coverage; no 95 % interval below {} requests",
                crate::decide::metric::pct(c),
                crate::metrics::stats::MIN_N_FOR_95
            ),
        ),
        IntervalKind::Bootstrap => (
            IntervalMethod::Bootstrap,
            "bootstrap CI, coverage not recorded".into(),
        ),
    };
    Interval {
        method,
        coverage: s.ci_coverage,
        n: s.n,
        label,
    }
}

/// The headline's arms: winner first, then measured arms that were rejected, then the rest in
/// ranking order, the incumbent last.
fn headline_order(v: &Verdict, r: &CampaignResult) -> Vec<String> {
    let mut order: Vec<String> = Vec::new();
    order.extend(v.winner.iter().cloned());
    for f in &v.failures {
        if !order.contains(&f.arm) {
            order.push(f.arm.clone());
        }
    }
    for id in &v.ranking {
        if !order.contains(id) {
            order.push(id.clone());
        }
    }
    let inc = &r.identity.incumbent_arm;
    if let Some(p) = order.iter().position(|x| x == inc) {
        if Some(inc) != v.winner.as_ref() {
            let x = order.remove(p);
            order.push(x);
        }
    }
    order
}

/// An arm's headline row; None when it has no warm TTFT and decode.
fn headline_row(v: &Verdict, r: &CampaignResult, a: &ArmResult) -> Option<Headline> {
    let w = a.warm.as_ref()?;
    let (t, d) = (TTFT.stat(w)?, DECODE.stat(w)?);
    let decision = v
        .arms
        .iter()
        .find(|x| x.id == a.id)
        .map(|x| x.decision.clone())
        .unwrap_or_default();
    let ci95 = |s: &Stat| Some([round1(s.ci95[0]), round1(s.ci95[1])]);
    Some(Headline {
        candidate: a.label_or_id(),
        arm: a.id.clone(),
        context_tokens: a.served_context.max(1),
        warm_requests: w.requests_ok,
        evidence: w.evidence.clone(),
        decision,
        ttft_p50_ms: round1(t.p50),
        ttft_p50_ci95_ms: ci95(&t),
        ttft_p50_ci: Some(interval(&t)),
        decode_p50_tok_s: round1(d.p50),
        decode_p50_ci95_tok_s: ci95(&d),
        decode_p50_ci: Some(interval(&d)),
        long_context_decode_tok_s: a
            .long_context
            .as_ref()
            .and_then(|l| l.decode_tok_s)
            .map(round1),
        aggregate_tok_s: headline_levels(r)
            .into_iter()
            .filter_map(|c| Some((level_key(c), round1(aggregate_at(a, c)?))))
            .collect(),
    })
}

fn headline(v: &Verdict, r: &CampaignResult) -> Vec<Headline> {
    headline_order(v, r)
        .iter()
        .filter_map(|id| headline_row(v, r, r.arm(id)?))
        .collect()
}

fn long_context_tokens(r: &CampaignResult) -> BTreeMap<String, PromptTokens> {
    let mut by: BTreeMap<String, Vec<u64>> = BTreeMap::new();
    for a in &r.arms {
        if let Some(l) = &a.long_context {
            if let Some(t) = l
                .actual_prompt_tokens
                .iter()
                .max()
                .copied()
                .filter(|t| *t > 0)
            {
                let key = format!(
                    "{}_arms",
                    a.long_context_profile
                        .clone()
                        .unwrap_or_else(|| "long_context".into())
                        .replace('-', "_")
                );
                by.entry(key).or_default().push(t);
            }
        }
    }
    by.into_iter()
        .map(|(k, mut v)| {
            v.sort();
            v.dedup();
            let val = if v.len() == 1 {
                PromptTokens::One(v[0])
            } else {
                PromptTokens::Many(v)
            };
            (k, val)
        })
        .collect()
}

fn evidence(v: &Verdict, r: &CampaignResult, m: &Manifest) -> Vec<String> {
    let mut want: Vec<Option<String>> = vec![
        Some(crate::evidence::result::RESULT_FILE.into()),
        Some(super::CAMPAIGN_COPY.into()),
        Some(PUBLICATION_FILE.into()),
        Some(HTML_FILE.into()),
    ];
    if let Some(b) = &r.idle_baseline {
        want.push(b.evidence.clone());
    }
    for id in v.winner.iter().chain(v.ranking.iter().take(3)) {
        if let Some(a) = r.arm(id) {
            want.push(a.warm.as_ref().map(|w| w.evidence.clone()));
            want.extend(a.concurrency.values().map(|c| Some(c.evidence.clone())));
            want.push(a.long_context.as_ref().map(|l| l.evidence.clone()));
            want.extend(a.gates.iter().map(|g| g.evidence.clone()));
        }
    }
    want.extend(v.failures.iter().map(|f| f.evidence.clone()));
    if let Some(x) = &r.restoration {
        want.push(x.evidence.clone());
        want.push(x.preflight.as_ref().and_then(|p| p.evidence.clone()));
    }
    let mut out: Vec<String> = Vec::new();
    for w in want.into_iter().flatten() {
        if let Some(k) = known(m, Some(&w)) {
            if !out.contains(&k) {
                out.push(k);
            }
        }
    }
    out
}

/// The decision summary of a verdict.
pub fn build(v: &Verdict, r: &CampaignResult, m: &Manifest) -> DecisionSummary {
    let winner = v
        .winner
        .as_ref()
        .and_then(|id| r.arm(id))
        .map(|a| format!("{} ({} on {})", a.label_or_id(), a.model, a.engine));
    let failures = v
        .failures
        .iter()
        .map(|f| FailureRow {
            candidate: f.candidate.clone(),
            arm: f.arm.clone(),
            class: f.class,
            detail: f.detail.clone(),
            evidence: known(m, f.evidence.as_deref()),
        })
        .collect();
    let cold = r.arms.iter().any(|a| a.cold.is_some());
    DecisionSummary {
        schema: SCHEMA.into(),
        campaign_id: r.campaign_id.clone(),
        complete: v.complete,
        identity: SummaryIdentity {
            hardware: r.identity.hardware.clone(),
            topology: r.identity.topology.clone(),
            incumbent: r.identity.incumbent.clone(),
        },
        workload: SummaryWorkload {
            ranking_priority: v.priorities.clone(),
            matched_prompt_tokens: matched_tokens(r),
            max_tokens: r.workload.max_tokens,
            concurrency: r.workload.concurrency.clone(),
            warm_repetitions_per_arm: r.workload.warm_repetitions_per_arm.max(1),
            long_context_actual_prompt_tokens: long_context_tokens(r),
        },
        measurement: SummaryMeasurement {
            path: r.measurement_path.clone(),
            warm_cold_state: if cold {
                "cold labeled runs followed by warm repetitions"
            } else {
                "warm repetitions only"
            }
            .into(),
            candidate_arms: r.arms.iter().filter(|a| a.role != "incumbent").count() as u64,
            statistics: [
                "median",
                "interval of the median: order statistics with exact coverage (95 % or more from 6 requests; the range [min, max] below, which no 95 % interval can replace)",
                "p95",
                "aggregate throughput",
            ]
            .map(String::from)
            .to_vec(),
            concurrency_levels: headline_levels(r),
            ranked_concurrency_level: ranked_level(v, r),
        },
        gates: gates(r, m),
        headline_results: headline(v, r),
        failures,
        limitations: v.limitations.clone(),
        validity: validity_lines(m),
        decision: SummaryDecision {
            evidence_labels: v.evidence_labels.clone(),
            decision_labels: v.decision_labels.clone(),
            promotion_authorized: v.promotion_authorized,
            winner,
            winner_arm: v.winner.clone(),
            reason: v.reason.clone(),
            next_gate: v.next_gate.clone(),
            ranking: v.ranking.clone(),
        },
        energy_cost: r
            .arms
            .iter()
            .map(|a| crate::decide::energy::figures(a, r.workload.concurrency_priority_level))
            .collect(),
        arms: v.arms.clone(),
        evidence: evidence(v, r, m),
        bakeoff_version: crate::VERSION.into(),
    }
}

/// The validity section's lines (`evidence::validity`): per arm what weakens its figures.
fn validity_lines(m: &Manifest) -> Vec<String> {
    if m.validity.is_empty() {
        return vec!["Not recorded (the manifest has no validity block).".into()];
    }
    let lines: Vec<String> = m
        .validity
        .iter()
        .filter_map(|(arm, v)| {
            let w = v.weakens();
            (!w.is_empty()).then(|| format!("{arm}: {}.", w.join("; ")))
        })
        .collect();
    if lines.is_empty() {
        vec!["Nothing weakens these figures.".into()]
    } else {
        lines
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The headline's field names are the metric descriptors' keys: a renamed descriptor key
    /// must rename the field too.
    #[test]
    fn headline_keys_are_the_descriptors() {
        let i = Interval {
            method: IntervalMethod::Range,
            coverage: Some(0.9375),
            n: 5,
            label: "range".into(),
        };
        let h = Headline {
            candidate: "c".into(),
            arm: "a".into(),
            context_tokens: 1,
            warm_requests: 5,
            evidence: "e".into(),
            decision: "d".into(),
            ttft_p50_ms: 50.0,
            ttft_p50_ci95_ms: Some([49.0, 51.0]),
            ttft_p50_ci: Some(i.clone()),
            decode_p50_tok_s: 80.0,
            decode_p50_ci95_tok_s: Some([79.0, 81.0]),
            decode_p50_ci: Some(i),
            long_context_decode_tok_s: None,
            aggregate_tok_s: BTreeMap::from([(level_key(2), 120.0)]),
        };
        let v = serde_json::to_value(&h).unwrap();
        for m in [&TTFT, &DECODE] {
            for k in [m.p50_key(), m.ci95_key(), m.ci_key()] {
                assert!(v.get(&k).is_some(), "{k} missing from {v}");
            }
        }
        assert_eq!(v["c2_aggregate_tok_s"], serde_json::json!(120.0));
        assert_eq!(v["ttft_p50_ci"]["method"], serde_json::json!("range"));
        let back: Headline = serde_json::from_value(v).unwrap();
        assert_eq!(back, h);
        assert_eq!(back.aggregate_at(2), Some(120.0));
    }

    /// The reference verdict (which has only the schema's required fields) reads as the type.
    #[test]
    fn the_reference_example_reads_as_the_type() {
        let s: DecisionSummary = serde_json::from_str(include_str!(
            "../../tests/data/decision-summary.example.json"
        ))
        .unwrap();
        assert_eq!(s.schema, SCHEMA);
        assert_eq!(s.headline_results[0].aggregate_at(2), Some(128.7));
        assert_eq!(
            s.workload.long_context_actual_prompt_tokens["bounded_64k_arms"],
            PromptTokens::Many(vec![53456, 53706])
        );
        assert_eq!(s.failures[1].class, FailureClass::ToolSchema);
    }
}
