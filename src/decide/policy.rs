//! Evidence labels, decision labels, the promotion policy and the next gate.

use super::eligibility::{ArmExt, Eligibility};
use crate::evidence::result::{ArmResult, CampaignResult};
use crate::evidence::{FailureClass, GateName, GateStatus, Policy, Promotion, RestorationStatus};

/// Evidence labels in the order the verdict lists them.
pub const LABEL_ORDER: &[&str] = &[
    "functional",
    "capacity",
    "matched-performance",
    "bounded-quality",
    "compatibility-failure",
    "exact-restoration",
];

#[derive(Debug, Clone, PartialEq, Default)]
pub struct PolicyOutcome {
    /// What the campaign as a whole can claim.
    pub evidence_labels: Vec<String>,
    /// What the winner itself can claim (the policy checks these).
    pub winner_labels: Vec<String>,
    pub decision_labels: Vec<String>,
    pub authorized: bool,
    pub next_gate: String,
}

/// The incumbent was put back and proven (identity and preflight).
pub fn restored(r: &CampaignResult) -> bool {
    r.restoration
        .as_ref()
        .is_some_and(|x| x.status == RestorationStatus::Passed)
}

fn gate_passed(arm: &ArmResult, name: GateName) -> Option<bool> {
    let g: Vec<_> = arm.gates.iter().filter(|g| g.name == name).collect();
    if g.is_empty() {
        None
    } else {
        Some(g.iter().all(|g| g.status == GateStatus::Passed))
    }
}

/// The evidence labels one arm's own evidence supports.
pub fn arm_labels(r: &CampaignResult, arm: &ArmResult) -> Vec<String> {
    let mut out = Vec::new();
    let pre: Vec<_> = arm
        .gates
        .iter()
        .filter(|g| g.name.failure_class() == FailureClass::Preflight)
        .collect();
    if !pre.is_empty() && pre.iter().all(|g| g.status == GateStatus::Passed) {
        out.push("functional");
    }
    if arm.long_context.as_ref().is_some_and(|l| l.passed)
        || gate_passed(arm, GateName::Retrieval) == Some(true)
    {
        out.push("capacity");
    }
    let target = r.workload.matched_prompt_tokens;
    let reported = arm
        .warm
        .as_ref()
        .and_then(|w| w.prompt_tokens_reported)
        .or_else(|| {
            r.workload
                .matched_prompt_tokens_reported
                .get(&arm.id)
                .copied()
        });
    if arm.warm.is_some() && target > 0 && reported == Some(target) {
        out.push("matched-performance");
    }
    if gate_passed(arm, GateName::Quality) == Some(true) {
        out.push("bounded-quality");
    }
    if restored(r) {
        out.push("exact-restoration");
    }
    out.into_iter().map(String::from).collect()
}

fn ordered(mut v: Vec<String>) -> Vec<String> {
    v.sort_by_key(|l| {
        LABEL_ORDER
            .iter()
            .position(|x| x == l)
            .unwrap_or(usize::MAX)
    });
    v.dedup();
    v
}

pub fn apply(
    r: &CampaignResult,
    policy: &Policy,
    winner: Option<&str>,
    complete: bool,
    elig: &Eligibility,
) -> PolicyOutcome {
    let mut all: Vec<String> = r.arms.iter().flat_map(|a| arm_labels(r, a)).collect();
    if elig
        .failures
        .iter()
        .any(|f| f.class == FailureClass::Compatibility)
    {
        all.push("compatibility-failure".into());
    }
    if restored(r) {
        all.push("exact-restoration".into());
    }
    let evidence_labels = ordered(all);
    let warm = winner.and_then(|w| r.arm(w));
    let winner_labels = warm.map(|a| ordered(arm_labels(r, a))).unwrap_or_default();
    let is_incumbent = warm.is_some_and(|a| a.role == "incumbent");

    // Required gates the winner has not passed.
    let mut unmet_gates: Vec<String> = Vec::new();
    if let Some(a) = warm {
        for g in &policy.required_gates {
            let ok = match g {
                GateName::Restoration => restored(r),
                GateName::IdleBaseline => r
                    .idle_baseline
                    .as_ref()
                    .is_some_and(|b| b.status == GateStatus::Passed),
                other => {
                    gate_passed(a, *other) == Some(true)
                        || (matches!(other, GateName::Retrieval)
                            && a.long_context.as_ref().is_some_and(|l| l.passed))
                }
            };
            if !ok {
                unmet_gates.push(g.as_str().to_string());
            }
        }
    }
    let missing_labels: Vec<String> = policy
        .required_evidence_labels
        .iter()
        .filter(|l| !winner_labels.contains(l))
        .cloned()
        .collect();

    let authorized = policy.promotion == Promotion::Auto
        && complete
        && warm.is_some()
        && !is_incumbent
        && unmet_gates.is_empty()
        && missing_labels.is_empty();

    let mut decision_labels: Vec<String> = Vec::new();
    match warm {
        Some(_) if is_incumbent => decision_labels.push("current".into()),
        Some(_) => decision_labels.push("challenger".into()),
        None => decision_labels.push("rejected".into()),
    }
    if !authorized {
        decision_labels.push("no-promotion".into());
    }
    if r.restoration.is_some() && !restored(r) {
        decision_labels.push("rollback".into());
    }

    let wname = warm.map(|a| a.label_or_id()).unwrap_or_default();
    let next_gate = if !restored(r) {
        let why = r
            .restoration
            .as_ref()
            .map(|x| format!("restoration {}: {}", x.status, x.detail))
            .unwrap_or_else(|| "restoration was not recorded".into());
        format!("Restore the incumbent and prove it (same recipe and argv/env hashes, served model and context, fresh preflight) before anything else ({why}).")
    } else if !r.complete {
        format!(
            "Finish the campaign: {}.",
            r.incomplete_reason
                .clone()
                .unwrap_or_else(|| "not every planned arm reached an end state".into())
        )
    } else if warm.is_none() {
        "No arm is eligible: fix the failures listed and run the campaign again.".into()
    } else if is_incumbent {
        format!("None: the incumbent {wname} remains the best eligible arm, so there is nothing to promote.")
    } else if !unmet_gates.is_empty() {
        format!(
            "Run and pass the required gate(s) {} on {wname} before considering promotion.",
            unmet_gates.join(", ")
        )
    } else if !missing_labels.is_empty() {
        format!(
            "Obtain the required evidence label(s) {} for {wname} (no gate of this campaign produced them) before considering promotion.",
            missing_labels.join(", ")
        )
    } else if policy.promotion == Promotion::Manual {
        format!("A person reviews this verdict and promotes {wname} by hand (policy: manual promotion).")
    } else {
        format!("None: policy auto authorizes promoting {wname}; every required gate and evidence label holds.")
    };
    PolicyOutcome {
        evidence_labels,
        winner_labels,
        decision_labels,
        authorized,
        next_gate,
    }
}
