//! The verdict: eligibility by gates, lexicographic ranking by the campaign's priorities,
//! speculative decoding credited against its matched control, labels, the promotion policy,
//! limitations and per-arm decision text. Pure: [`decide`] reads a [`CampaignResult`] and the
//! campaign's [`Policy`] and does no I/O. It reads evidence types only (`crate::evidence`), never
//! the campaign module: the policy is the one `campaign-result.json` records.

pub mod cache;
pub mod capacity;
pub mod eligibility;
pub mod energy;
pub mod metric;
pub mod output_length;
pub mod policy;
pub mod rank;
pub mod requests;
pub mod reuse;
pub mod slo;
pub mod spread;
pub mod text;

use crate::evidence::result::CampaignResult;
use crate::evidence::{FailureClass, Policy, RankingMetric};
use serde::{Deserialize, Serialize};

/// Why an arm cannot win.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FailureItem {
    pub arm: String,
    /// The arm's label.
    pub candidate: String,
    pub class: FailureClass,
    pub detail: String,
    pub evidence: Option<String>,
}

/// One arm's place in the verdict.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ArmVerdict {
    pub id: String,
    pub label: String,
    pub role: String,
    pub eligible: bool,
    /// 1-based place among eligible arms.
    pub rank: Option<usize>,
    /// current | challenger | rejected | rollback | none.
    pub decision_label: String,
    /// The per-arm decision text (rules in README "Verdict rules").
    pub decision: String,
}

/// The decision over a whole campaign.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Verdict {
    pub priorities: Vec<RankingMetric>,
    /// Arm id of the winner: the best eligible arm.
    pub winner: Option<String>,
    /// The priority (index into `priorities`) that decided the winner; None when it was the only
    /// eligible arm or tied on every priority.
    pub decided_by: Option<usize>,
    /// Eligible arm ids, best first.
    pub ranking: Vec<String>,
    pub arms: Vec<ArmVerdict>,
    pub failures: Vec<FailureItem>,
    pub evidence_labels: Vec<String>,
    pub decision_labels: Vec<String>,
    pub promotion_authorized: bool,
    pub reason: String,
    pub next_gate: String,
    pub limitations: Vec<String>,
    /// Every planned arm reached an end state and the incumbent was restored.
    pub complete: bool,
}

/// The ranking priorities: the result's record (what the run used), else the policy's order is
/// unknown and `ttft` first is assumed.
pub fn priorities(result: &CampaignResult) -> Vec<RankingMetric> {
    if result.workload.ranking_priority.is_empty() {
        vec![RankingMetric::Ttft, RankingMetric::DecodeTokensPerSecond]
    } else {
        result.workload.ranking_priority.clone()
    }
}

/// Tie tolerances: the policy's, then any the result recorded that the policy lacks.
pub fn tolerances(
    result: &CampaignResult,
    policy: &Policy,
) -> std::collections::BTreeMap<RankingMetric, f64> {
    let mut t = policy.tie_tolerance.clone();
    for (k, v) in &result.workload.tie_tolerance {
        t.entry(*k).or_insert(*v);
    }
    t
}

/// Decides the campaign from its evidence alone.
pub fn decide(result: &CampaignResult, policy: &Policy) -> Verdict {
    let prios = priorities(result);
    let tol = tolerances(result, policy);
    let elig = eligibility::assess(result, policy, &tol);
    let arms: Vec<_> = result.arms.iter().collect();
    let picks = rank::rank(
        &arms,
        &elig.eligible,
        &prios,
        &tol,
        result.workload.concurrency_priority_level,
        &spread::Cross::of(result),
    );
    let ranking: Vec<String> = picks.iter().map(|p| p.arm.clone()).collect();
    let winner_pick = picks.first().cloned();
    let winner = winner_pick.as_ref().map(|p| p.arm.clone());
    let complete = result.complete && policy::restored(result);
    let pol = policy::apply(result, policy, winner.as_deref(), complete, &elig);
    let mut limitations = text::limitations(result, policy, &elig);
    limitations.extend(cache::limitations(result, winner.as_deref()));
    // The arm the winner beat: its cached share against the winner's.
    let beaten = ranking.get(1).map(String::as_str);
    let decided = winner_pick
        .as_ref()
        .and_then(|p| p.decided_by)
        .map(|i| prios[i]);
    limitations.extend(reuse::limitations(
        result,
        winner.as_deref(),
        beaten,
        decided,
    ));
    limitations.extend(output_length::limitations(&result.arms));
    limitations.extend(energy::limitations(result, &prios));
    let mut reason = text::reason(result, &prios, &tol, winner_pick.as_ref(), &elig);
    // Failed requests the allowance let through are said wherever the arm's figures are used.
    let allowed = |id: &str| {
        result
            .arm(id)
            .and_then(|a| requests::within_allowance(a, policy.max_failed_fraction))
    };
    if let Some(d) = winner.as_deref().and_then(allowed) {
        reason = format!("{} {d}.", reason.trim_end());
    }
    let mut arms_v = text::arm_decisions(
        result,
        &prios,
        &tol,
        &ranking,
        winner_pick.as_ref().and_then(|p| p.decided_by),
        &elig,
        &pol,
    );
    for a in arms_v.iter_mut() {
        let short = result.arm(&a.id).and_then(output_length::flag);
        for d in short.into_iter().chain(allowed(&a.id)) {
            a.decision = format!("{}; {d}", a.decision);
        }
    }
    Verdict {
        priorities: prios,
        decided_by: winner_pick.as_ref().and_then(|p| p.decided_by),
        winner,
        ranking,
        arms: arms_v,
        failures: elig.failures.clone(),
        evidence_labels: pol.evidence_labels.clone(),
        decision_labels: pol.decision_labels.clone(),
        promotion_authorized: pol.authorized,
        reason,
        next_gate: pol.next_gate.clone(),
        limitations,
        complete,
    }
}
