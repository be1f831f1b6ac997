//! Eligibility: an arm that failed to run, failed any required gate, or regressed against its
//! matched no-speculation control cannot win. Every reason is a [`FailureItem`] with class,
//! detail and the evidence file that shows it.

use super::FailureItem;
use crate::evidence::result::{ArmResult, ArmStatus, CampaignResult, GateRecord};
use crate::evidence::{FailureClass, GateStatus, Policy, RankingMetric};
use std::collections::BTreeMap;

/// Smallest relative regression against a control that counts (guards against timer noise).
pub const REGRESSION_FLOOR: f64 = 0.02;

#[derive(Debug, Clone, Default, PartialEq)]
pub struct Eligibility {
    /// Arm ids that may win, in run order.
    pub eligible: Vec<String>,
    pub failures: Vec<FailureItem>,
    /// Arms that never reached an end state (pending, interrupted).
    pub untested: Vec<String>,
    /// Non-blocking observations for the limitations (non-required gate failures, speculative
    /// arms that could not be compared with their control).
    pub notes: Vec<String>,
}

/// Whether the policy (or the orchestrator's record) makes this gate required.
pub fn gate_required(g: &GateRecord, policy: &Policy) -> bool {
    g.required || policy.required_gates.contains(&g.name)
}

/// A failure class as the verdict names it: an unclassified launch or readiness failure is a
/// compatibility failure unless it ran out of memory (capacity).
fn normalize_class(class: FailureClass, detail: &str) -> FailureClass {
    match class {
        FailureClass::Launch => {
            let d = detail.to_ascii_lowercase();
            if d.contains("out of memory") && !d.contains("not oom") {
                FailureClass::Capacity
            } else {
                FailureClass::Compatibility
            }
        }
        c => c,
    }
}

fn gate_detail(g: &GateRecord) -> String {
    let counts = match (g.passed, g.total) {
        (Some(p), Some(t)) => format!("{} {p}/{t} passed", g.name),
        _ => format!("{} failed", g.name),
    };
    if g.detail.trim().is_empty() {
        counts
    } else {
        format!("{counts}; {}", g.detail.trim())
    }
}

pub fn assess(
    result: &CampaignResult,
    policy: &Policy,
    tol: &BTreeMap<RankingMetric, f64>,
) -> Eligibility {
    let mut e = Eligibility::default();
    for arm in &result.arms {
        let mut mine: Vec<FailureItem> = Vec::new();
        let item = |class: FailureClass, detail: String, evidence: Option<String>| FailureItem {
            arm: arm.id.clone(),
            candidate: arm.label_or_id(),
            class,
            detail,
            evidence,
        };
        match arm.status {
            ArmStatus::Pending | ArmStatus::Interrupted => {
                e.untested.push(arm.id.clone());
                continue;
            }
            ArmStatus::Failed | ArmStatus::Completed => {}
        }
        if let Some(f) = &arm.failure {
            mine.push(item(
                normalize_class(f.class, &f.detail),
                f.detail.clone(),
                f.evidence.clone(),
            ));
        } else if arm.status == ArmStatus::Failed {
            mine.push(item(
                FailureClass::Crash,
                "the arm did not complete its steps".into(),
                arm.evidence.first().cloned(),
            ));
        }
        for g in arm.gates.iter().filter(|g| g.status == GateStatus::Failed) {
            let class = g.name.failure_class();
            let dup = mine
                .iter()
                .any(|m| m.class == class || (m.evidence.is_some() && m.evidence == g.evidence));
            if gate_required(g, policy) {
                if !dup {
                    mine.push(item(class, gate_detail(g), g.evidence.clone()));
                }
            } else {
                e.notes.push(format!(
                    "{} failed the {} gate, which the policy does not require ({}).",
                    arm.label_or_id(),
                    g.name,
                    gate_detail(g)
                ));
            }
        }
        if let Some(f) = speculative_regression(result, arm, tol, &mut e.notes) {
            mine.push(f);
        }
        if mine.is_empty() && arm.warm.is_some() {
            e.eligible.push(arm.id.clone());
        } else if mine.is_empty() {
            mine.push(item(
                FailureClass::Incomplete,
                "no warm timing was recorded".into(),
                None,
            ));
        }
        e.failures.extend(mine);
    }
    e
}

/// Speculative decoding is credited only against its matched control: a long-context decode
/// or warm E2E regression against it is a `workload-regression` failure.
fn speculative_regression(
    result: &CampaignResult,
    arm: &ArmResult,
    tol: &BTreeMap<RankingMetric, f64>,
    notes: &mut Vec<String>,
) -> Option<FailureItem> {
    let spec = arm.speculative.as_ref()?;
    arm.warm.as_ref()?;
    let Some(ctl) = result.arm(&spec.control) else {
        notes.push(format!(
            "{}'s speculative decoding was not credited: its control `{}` is not in the result.",
            arm.label_or_id(),
            spec.control
        ));
        return None;
    };
    let fail = |detail: String, evidence: Option<String>| FailureItem {
        arm: arm.id.clone(),
        candidate: arm.label_or_id(),
        class: FailureClass::WorkloadRegression,
        detail,
        evidence,
    };
    let t_dec = tol
        .get(&RankingMetric::DecodeTokensPerSecond)
        .copied()
        .unwrap_or(0.0)
        .max(REGRESSION_FLOOR);
    match (
        arm.long_context.as_ref().and_then(|l| l.decode_tok_s),
        ctl.long_context.as_ref().and_then(|l| l.decode_tok_s),
    ) {
        (Some(s), Some(c)) if s < c * (1.0 - t_dec) => {
            return Some(fail(
                format!(
                    "long-context decode fell from {c:.1} tok/s without speculation ({}) to {s:.1} tok/s with {}",
                    ctl.id,
                    spec_name(arm)
                ),
                arm.long_context.as_ref().map(|l| l.evidence.clone()),
            ));
        }
        (Some(_), Some(_)) => {}
        (_, None) if arm.long_context.is_some() => notes.push(format!(
            "{}'s long-context decode could not be compared with its control {}, which has no long-context decode measurement.",
            arm.label_or_id(),
            ctl.label_or_id()
        )),
        _ => {}
    }
    let t_e2e = tol
        .get(&RankingMetric::E2e)
        .copied()
        .unwrap_or(0.0)
        .max(REGRESSION_FLOOR);
    let s = arm.warm.as_ref().and_then(|w| w.e2e_ms);
    let c = ctl.warm.as_ref().and_then(|w| w.e2e_ms);
    match (s, c) {
        (Some(s), Some(c)) if s.ci95[0] > c.ci95[1] && s.p50 > c.p50 * (1.0 + t_e2e) => Some(fail(
            format!(
                "warm median E2E rose from {:.1} ms without speculation ({}) to {:.1} ms with {}",
                c.p50,
                ctl.id,
                s.p50,
                spec_name(arm)
            ),
            arm.warm.as_ref().map(|w| w.evidence.clone()),
        )),
        (Some(_), None) => {
            notes.push(format!(
                "{}'s speculative decoding was not credited: its control {} has no warm E2E measurement.",
                arm.label_or_id(),
                ctl.label_or_id()
            ));
            None
        }
        _ => None,
    }
}

fn spec_name(arm: &ArmResult) -> String {
    arm.speculative
        .as_ref()
        .map(|s| s.method.to_uppercase())
        .unwrap_or_default()
}

/// Label helpers on the plain record.
pub trait ArmExt {
    fn label_or_id(&self) -> String;
}

impl ArmExt for ArmResult {
    fn label_or_id(&self) -> String {
        if self.label.trim().is_empty() {
            self.id.clone()
        } else {
            self.label.clone()
        }
    }
}
