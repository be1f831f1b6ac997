//! Eligibility: an arm that failed to run, failed any required gate, failed more requests than
//! the policy's availability requirement allows, or regressed against its matched
//! no-speculation control cannot win. Every reason is a [`FailureItem`] with class,
//! detail and the evidence file that shows it.

use super::{requests, FailureItem};
use crate::evidence::result::{ArmResult, ArmStatus, CampaignResult, GateRecord, TimingRecord};
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
        let within = requests::within_allowance(arm, policy.max_failed_fraction).is_some();
        if let Some(f) = arm
            .failure
            .as_ref()
            .filter(|f| !(within && only_request_errors(arm, f)))
        {
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
        for g in arm
            .gates
            .iter()
            .filter(|g| g.status == GateStatus::Failed && !(within && request_errors_only(g)))
        {
            let class = gate_class(g);
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
        if let Some((detail, evidence)) = availability(arm, policy.max_failed_fraction) {
            let dup = mine
                .iter()
                .any(|m| m.class != FailureClass::Availability && m.evidence == evidence);
            if let Some(m) = mine
                .iter_mut()
                .find(|m| m.class == FailureClass::Availability)
            {
                m.detail = format!("{detail}; {}", m.detail);
            } else if !dup {
                mine.push(item(FailureClass::Availability, detail, evidence));
            }
        }
        if let Some((detail, evidence)) = super::output_length::failure(arm) {
            mine.push(item(FailureClass::Compatibility, detail, evidence));
        }
        let slo = super::slo::violations(result, arm, &mine, &mut e.notes);
        mine.extend(slo);
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

/// A gate whose failed observations all failed on a request error (the engine did not answer;
/// no answer was wrong). Within the allowance those requests count against `max_failed_fraction`
/// like any other, not against the gate: the allowance and the gate agree (docs/verdict.md,
/// "Which requests count").
fn request_errors_only(g: &GateRecord) -> bool {
    g.requests
        .as_ref()
        .is_some_and(|r| r.failures_are_request_errors)
}

/// The arm's recorded failure is a gate that failed on request errors only.
fn only_request_errors(arm: &ArmResult, f: &crate::evidence::result::Failure) -> bool {
    f.class == FailureClass::Availability
        && arm
            .gates
            .iter()
            .any(|g| g.evidence.is_some() && g.evidence == f.evidence && request_errors_only(g))
}

/// The failure class of a failed gate: its own, or `availability` when every failed observation
/// failed on a request error (HTTP error, connection error, timeout) rather than a wrong answer.
pub fn gate_class(g: &GateRecord) -> FailureClass {
    if request_errors_only(g) {
        FailureClass::Availability
    } else {
        g.name.failure_class()
    }
}

/// The availability requirement: the arm's failed requests over all its timed steps and gates,
/// against `max_fraction`. Some((detail, evidence file with the most failures)) when over it.
fn availability(arm: &ArmResult, max_fraction: f64) -> Option<(String, Option<String>)> {
    let steps = requests::steps(arm);
    let sent: u64 = steps.iter().map(|s| s.sent).sum();
    let failed: u64 = steps.iter().map(|s| s.failed).sum();
    if sent == 0 || failed == 0 || failed as f64 / sent as f64 <= max_fraction {
        return None;
    }
    let mut worst: Option<&requests::StepRequests> = None;
    let mut parts = Vec::new();
    for s in steps.iter().filter(|s| s.failed > 0) {
        if worst.is_none_or(|w| s.failed > w.failed) {
            worst = Some(s);
        }
        let classes: Vec<String> = s
            .by_class
            .iter()
            .map(|(c, n)| format!("{c} ×{n}"))
            .collect();
        let classes = if classes.is_empty() {
            String::new()
        } else {
            format!(" ({})", classes.join(", "))
        };
        parts.push(format!(
            "{}: {} of {} failed{classes}",
            s.evidence, s.failed, s.sent
        ));
    }
    let detail = format!(
        "{failed} of {sent} requests failed ({}; the policy allows {}): {}",
        requests::percent(failed as f64 / sent as f64),
        requests::percent(max_fraction),
        parts.join("; ")
    );
    Some((detail, worst.map(|w| w.evidence.to_string())))
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
    if let Some(detail) = super::capacity::regression(arm, ctl, &spec_name(arm)) {
        return Some(fail(
            detail,
            arm.capacity.as_ref().map(|c| c.evidence.clone()),
        ));
    }
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
    let warm = match (s, c) {
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
    };
    warm.or_else(|| level_regression(arm, ctl, tol, notes))
}

/// The speculative arm against its control at each concurrency level above 1 (C1 is the warm
/// E2E above): aggregate throughput lower than the control's beyond the `concurrency` tolerance,
/// or a median E2E whose interval lies wholly above the control's and beyond the `e2e`
/// tolerance, is a `workload-regression` naming the level and both figures.
fn level_regression(
    arm: &ArmResult,
    ctl: &ArmResult,
    tol: &BTreeMap<RankingMetric, f64>,
    notes: &mut Vec<String>,
) -> Option<FailureItem> {
    let t = |m: RankingMetric| tol.get(&m).copied().unwrap_or(0.0).max(REGRESSION_FLOOR);
    let (t_tp, t_e2e) = (t(RankingMetric::Concurrency), t(RankingMetric::E2e));
    let mut levels: Vec<(u64, &TimingRecord)> = arm
        .concurrency
        .iter()
        .filter_map(|(k, r)| Some((k.parse::<u64>().ok()?, r)))
        .collect();
    levels.sort_by_key(|(k, _)| *k);
    let fail = |detail: String, evidence: &str| FailureItem {
        arm: arm.id.clone(),
        candidate: arm.label_or_id(),
        class: FailureClass::WorkloadRegression,
        detail,
        evidence: Some(evidence.to_string()),
    };
    let mut missing = Vec::new();
    for (k, s) in levels {
        let Some(c) = ctl.concurrency.get(&k.to_string()) else {
            missing.push(format!("C{k}"));
            continue;
        };
        if let (Some(st), Some(ct)) = (s.aggregate_output_tok_s, c.aggregate_output_tok_s) {
            if ct > 0.0 && st < ct * (1.0 - t_tp) {
                return Some(fail(
                    format!(
                        "{:.0} % less C{k} throughput than its control: {st:.1} tok/s with {} against {ct:.1} tok/s without speculation ({}), beyond the {:.0} % tolerance",
                        (1.0 - st / ct) * 100.0,
                        spec_name(arm),
                        ctl.id,
                        t_tp * 100.0
                    ),
                    &s.evidence,
                ));
            }
        }
        if let (Some(se), Some(ce)) = (s.e2e_ms, c.e2e_ms) {
            if se.ci95[0] > ce.ci95[1] && se.p50 > ce.p50 * (1.0 + t_e2e) {
                return Some(fail(
                    format!(
                        "C{k} median E2E rose from {:.1} ms without speculation ({}) to {:.1} ms with {}",
                        ce.p50,
                        ctl.id,
                        se.p50,
                        spec_name(arm)
                    ),
                    &s.evidence,
                ));
            }
        }
    }
    if !missing.is_empty() {
        notes.push(format!(
            "{}'s speculative decoding could not be compared with its control {} at {}: the control has no measurement there.",
            arm.label_or_id(),
            ctl.label_or_id(),
            missing.join(", ")
        ));
    }
    None
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::evidence::result::{RequestCounts, TimingRecord};
    use crate::evidence::GateName;

    fn timing(ev: &str, ok: u64, failed: u64) -> TimingRecord {
        TimingRecord {
            evidence: ev.into(),
            requests_ok: ok,
            requests_failed: failed,
            failures_by_class: if failed > 0 {
                BTreeMap::from([("http-status".to_string(), failed)])
            } else {
                BTreeMap::new()
            },
            ..Default::default()
        }
    }

    fn result(arm: ArmResult) -> CampaignResult {
        CampaignResult {
            arms: vec![arm],
            ..Default::default()
        }
    }

    fn flaky() -> ArmResult {
        ArmResult {
            id: "a".into(),
            status: ArmStatus::Completed,
            warm: Some(timing("a-timing-64-c1-warm.json", 5, 0)),
            concurrency: BTreeMap::from([("2".into(), timing("a-timing-64-c2-warm.json", 8, 2))]),
            ..Default::default()
        }
    }

    #[test]
    fn failed_timed_requests_over_the_policy_make_the_arm_ineligible() {
        let e = assess(&result(flaky()), &Policy::default(), &BTreeMap::new());
        assert!(e.eligible.is_empty());
        assert_eq!(e.failures.len(), 1, "{:?}", e.failures);
        let f = &e.failures[0];
        assert_eq!(f.class, FailureClass::Availability);
        assert_eq!(f.evidence.as_deref(), Some("a-timing-64-c2-warm.json"));
        assert_eq!(
            f.detail,
            "2 of 15 requests failed (13.3%; the policy allows 0%): a-timing-64-c2-warm.json: 2 of 10 failed (http-status ×2)"
        );
        // Within a declared fraction it is eligible.
        let p = Policy {
            max_failed_fraction: 0.2,
            ..Default::default()
        };
        let e = assess(&result(flaky()), &p, &BTreeMap::new());
        assert_eq!(e.eligible, ["a"]);
    }

    #[test]
    fn a_gate_failed_by_request_errors_is_availability_and_counts() {
        let mut a = flaky();
        a.concurrency.clear();
        a.gates.push(GateRecord {
            name: GateName::Tools,
            status: GateStatus::Failed,
            passed: Some(9),
            total: Some(10),
            detail: "request failed: HTTP 500".into(),
            required: true,
            evidence: Some("a-tools.json".into()),
            requests: Some(RequestCounts {
                sent: 10,
                failed: 1,
                failures_by_class: BTreeMap::from([("http-status".into(), 1)]),
                failures_are_request_errors: true,
            }),
        });
        let e = assess(&result(a.clone()), &Policy::default(), &BTreeMap::new());
        assert_eq!(e.failures.len(), 1, "{:?}", e.failures);
        assert_eq!(e.failures[0].class, FailureClass::Availability);
        assert!(e.failures[0]
            .detail
            .contains("a-tools.json: 1 of 10 failed"));
        // A wrong answer beside it keeps the gate's own class.
        a.gates[0]
            .requests
            .as_mut()
            .unwrap()
            .failures_are_request_errors = false;
        let p = Policy {
            max_failed_fraction: 0.5,
            ..Default::default()
        };
        let e = assess(&result(a), &p, &BTreeMap::new());
        assert_eq!(e.failures.len(), 1, "{:?}", e.failures);
        assert_eq!(e.failures[0].class, FailureClass::ToolSchema);
    }
}
