//! `decision-summary.json`, schema `anvil-serving.benchmark-decision-summary/v1`. Every number
//! comes from the campaign result; every evidence name is a file of the manifest (or one of
//! the verdict files written beside it).

use super::{HTML_FILE, PUBLICATION_FILE};
use crate::decide::eligibility::ArmExt;
use crate::decide::metric::{interval_kind, IntervalKind, DECODE, TTFT};
use crate::decide::Verdict;
use crate::evidence::manifest::Manifest;
use crate::evidence::result::{ArmResult, ArmStatus, CampaignResult, Stat};
use crate::evidence::RankingMetric;
use crate::evidence::{GateName, GateStatus};
use serde_json::{json, Map, Value};
use std::collections::BTreeMap;

pub const SCHEMA: &str = "anvil-serving.benchmark-decision-summary/v1";

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

fn gates(v: &Verdict, r: &CampaignResult, m: &Manifest) -> Vec<Value> {
    let mut out = Vec::new();
    let row = |name: String, status: String, detail: Option<String>, ev: Option<String>| {
        let mut o = Map::new();
        o.insert("name".into(), json!(name));
        o.insert("status".into(), json!(status));
        if let Some(e) = ev {
            o.insert("evidence".into(), json!(e));
        }
        if let Some(d) = detail.filter(|d| !d.trim().is_empty()) {
            o.insert("detail".into(), json!(d));
        }
        Value::Object(o)
    };
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
    let started = r
        .arms
        .iter()
        .filter(|a| !matches!(a.status, ArmStatus::Pending | ArmStatus::Interrupted))
        .count();
    for name in names {
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
        let mut o = row(format!("{name} ({})", gate_kind(name)), status, None, ev);
        o["required"] = json!(recs.iter().any(|(_, g)| g.required));
        out.push(o);
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
    }
    match &r.restoration {
        Some(x) => {
            let ev = known(m, x.evidence.as_deref())
                .or_else(|| known(m, x.preflight.as_ref().and_then(|p| p.evidence.as_deref())));
            out.push(row(
                "exact incumbent restoration".into(),
                x.status.to_string(),
                Some(x.detail.clone()),
                ev,
            ));
        }
        None => out.push(row(
            "exact incumbent restoration".into(),
            GateStatus::Skipped.to_string(),
            Some("not recorded".into()),
            None,
        )),
    }
    let _ = v;
    out
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

/// What a median's interval is, for the documents: `{"method": "order-statistic", "coverage":
/// 0.96875, "n": 6, "label": "96.88 % CI"}`; method `range` below 6 requests (label "range, no
/// 95 % interval"); an older bundle's bootstrap has no coverage.
pub fn interval_json(s: &Stat) -> Value {
    let (method, label) = match interval_kind(s) {
        IntervalKind::Ci(c) => (
            "order-statistic",
            format!("{} % CI", crate::decide::metric::pct(c)),
        ),
        IntervalKind::Range(c) => (
            "range",
            format!(
                "range, {} % coverage; no 95 % interval below {} requests",
                crate::decide::metric::pct(c),
                crate::metrics::stats::MIN_N_FOR_95
            ),
        ),
        IntervalKind::Bootstrap => ("bootstrap", "bootstrap CI, coverage not recorded".into()),
    };
    json!({"method": method, "coverage": s.ci_coverage, "n": s.n, "label": label})
}

fn headline(v: &Verdict, r: &CampaignResult) -> Vec<Value> {
    // Winner first, then measured arms that were rejected, then the rest in ranking order,
    // the incumbent last.
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
        .iter()
        .filter_map(|id| {
            let a = r.arm(id)?;
            let w = a.warm.as_ref()?;
            let (t, d) = (TTFT.stat(w)?, DECODE.stat(w)?);
            let decision = v
                .arms
                .iter()
                .find(|x| x.id == a.id)
                .map(|x| x.decision.clone())
                .unwrap_or_default();
            let mut o = json!({
                "candidate": a.label_or_id(),
                "arm": a.id,
                "context_tokens": a.served_context.max(1),
                "warm_requests": w.requests_ok,
                "evidence": w.evidence,
                "decision": decision,
            });
            for (m, s) in [(&TTFT, t), (&DECODE, d)] {
                o[m.p50_key()] = json!(round1(s.p50));
                o[m.ci95_key()] = json!([round1(s.ci95[0]), round1(s.ci95[1])]);
                o[m.ci_key()] = interval_json(&s);
            }
            for c in headline_levels(r) {
                if let Some(x) = aggregate_at(a, c) {
                    o[level_key(c)] = json!(round1(x));
                }
            }
            if let Some(l) = a.long_context.as_ref().and_then(|l| l.decode_tok_s) {
                o["long_context_decode_tok_s"] = json!(round1(l));
            }
            Some(o)
        })
        .collect()
}

fn long_context_tokens(r: &CampaignResult) -> Map<String, Value> {
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
            let val = if v.len() == 1 { json!(v[0]) } else { json!(v) };
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

/// The decision summary as JSON.
pub fn build(v: &Verdict, r: &CampaignResult, m: &Manifest) -> Value {
    let winner = v
        .winner
        .as_ref()
        .and_then(|id| r.arm(id))
        .map(|a| format!("{} ({} on {})", a.label_or_id(), a.model, a.engine));
    let failures: Vec<Value> = v
        .failures
        .iter()
        .map(|f| {
            let mut o = json!({"candidate": f.candidate, "arm": f.arm, "class": f.class, "detail": f.detail});
            if let Some(e) = known(m, f.evidence.as_deref()) {
                o["evidence"] = json!(e);
            }
            o
        })
        .collect();
    let cold = r.arms.iter().any(|a| a.cold.is_some());
    json!({
        "schema": SCHEMA,
        "campaign_id": r.campaign_id,
        "complete": v.complete,
        "identity": {
            "hardware": r.identity.hardware,
            "topology": r.identity.topology,
            "incumbent": r.identity.incumbent,
        },
        "workload": {
            "ranking_priority": v.priorities.iter().map(|p| p.as_str()).collect::<Vec<_>>(),
            "matched_prompt_tokens": matched_tokens(r),
            "max_tokens": r.workload.max_tokens,
            "concurrency": r.workload.concurrency,
            "warm_repetitions_per_arm": r.workload.warm_repetitions_per_arm.max(1),
            "long_context_actual_prompt_tokens": long_context_tokens(r),
        },
        "measurement": {
            "path": r.measurement_path,
            "warm_cold_state": if cold { "cold labeled runs followed by warm repetitions" } else { "warm repetitions only" },
            "candidate_arms": r.arms.iter().filter(|a| a.role != "incumbent").count(),
            "statistics": ["median", "interval of the median: order statistics with exact coverage (95 % or more from 6 requests; the range [min, max] below, which no 95 % interval can replace)", "p95", "aggregate throughput"],
            "concurrency_levels": headline_levels(r),
            "ranked_concurrency_level": ranked_level(v, r),
        },
        "gates": gates(v, r, m),
        "headline_results": headline(v, r),
        "failures": failures,
        "limitations": v.limitations,
        "decision": {
            "evidence_labels": v.evidence_labels,
            "decision_labels": v.decision_labels,
            "promotion_authorized": v.promotion_authorized,
            "winner": winner,
            "winner_arm": v.winner,
            "reason": v.reason,
            "next_gate": v.next_gate,
            "ranking": v.ranking,
        },
        "arms": v.arms,
        "evidence": evidence(v, r, m),
        "bakeoff_version": crate::VERSION,
    })
}
