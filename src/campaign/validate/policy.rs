//! `[policy]`, after the gates are known (its default required gates are the ones that run).

use super::common::{is_id, p};
use crate::campaign::diag::Reporter;
use crate::campaign::spec::{Campaign, GateName, PreflightGate};
use std::collections::HashSet;

pub(super) fn policy(c: &mut Campaign, r: &mut Reporter) {
    let gpus = !c.lane.gpus.is_empty();
    let mut configured: Vec<GateName> = c
        .gates
        .preflight
        .iter()
        .map(|g: &PreflightGate| g.gate())
        .collect();
    if gpus {
        configured.extend([GateName::IdleBaseline, GateName::MemoryReserve]);
    }
    if c.gates.tools.is_some() {
        configured.push(GateName::Tools);
    }
    if c.gates.retrieval.is_some() {
        configured.push(GateName::Retrieval);
    }
    if c.gates.quality.is_some() {
        configured.push(GateName::Quality);
    }
    configured.push(GateName::Restoration);
    let pol = &mut c.policy;
    if pol.required_gates.is_empty() {
        pol.required_gates = configured;
    } else {
        let mut seen = HashSet::new();
        for (i, g) in pol.required_gates.iter().enumerate() {
            let at = p("policy.required_gates").index(i);
            if !seen.insert(*g) {
                r.error(
                    &at,
                    format!("`{}` is listed twice", g.as_str()),
                    "list each gate once",
                );
            } else if !configured.contains(g) {
                let fix = match g {
                    GateName::Smoke | GateName::Json | GateName::Streaming => format!(
                        "add \"{}\" to gates.preflight, or remove it here",
                        g.as_str()
                    ),
                    GateName::IdleBaseline | GateName::MemoryReserve => {
                        "list the lane's GPUs in lane.gpus, or remove it here".to_string()
                    }
                    _ => format!("add a [gates.{}] table, or remove it here", g.as_str()),
                };
                r.error(
                    &at,
                    format!(
                        "gate `{}` is required but does not run in this campaign",
                        g.as_str()
                    ),
                    fix,
                );
            }
        }
    }
    for (i, l) in pol.required_evidence_labels.iter().enumerate() {
        if !is_id(l) {
            r.error(
                &p("policy.required_evidence_labels").index(i),
                format!("`{l}` is not an evidence label"),
                "use lowercase words joined by `-`, e.g. \"matched-performance\", \"exact-restoration\"",
            );
        }
    }
    let f = pol.max_failed_fraction;
    if !(f.is_finite() && (0.0..=1.0).contains(&f)) {
        r.error(
            &p("policy.max_failed_fraction"),
            format!("fraction {f} is out of range"),
            "give the largest share of an arm's requests that may fail, from 0 to 1, e.g. 0.01 for 1% (0, the default, allows none)",
        );
    }
    for (m, tol) in &pol.tie_tolerance {
        let at = p("policy.tie_tolerance").key(m.as_str());
        if !(tol.is_finite() && (0.0..1.0).contains(tol)) {
            r.error(
                &at,
                format!("tolerance {tol} is out of range"),
                "give a relative difference from 0 to below 1, e.g. 0.05 for 5%",
            );
        }
        if !c.workload.ranking_priority.contains(m) {
            r.error(
                &at,
                format!("`{}` is not in workload.ranking_priority", m.as_str()),
                "add it to the ranking priority, or remove its tolerance",
            );
        }
    }
    for (i, q) in pol.quality_risks.iter().enumerate() {
        let at = p("policy.quality_risks").index(i);
        if q.pattern.trim().is_empty() {
            r.error(
                &at.key("pattern"),
                "empty pattern",
                "give a substring of the engine log line to look for",
            );
        }
        if q.limitation.trim().is_empty() {
            r.error(
                &at.key("limitation"),
                "empty limitation",
                "say what the verdict must state when the pattern appears",
            );
        }
    }
}

/// `[promotion]`: checked at load, so `run --dry-run` names a bad bake before the bake-off runs
/// (`bakeoff promote` checks it again for bundles written before).
pub(super) fn promotion(c: &Campaign, r: &mut Reporter) {
    let Some(t) = &c.promotion else { return };
    for (k, problem, fix) in t.issues() {
        r.error(&p("promotion").key(k), problem, fix);
    }
}
