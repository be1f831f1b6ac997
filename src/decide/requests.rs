//! The requests an arm sent and those that failed, step by step: what the availability
//! requirement counts (eligibility.rs) and what the verdict discloses when failures stayed within
//! the policy's `max_failed_fraction` allowance. One walk, so a failure and a disclosure always
//! count the same requests (docs/verdict.md, "Which requests count").

use crate::evidence::result::{ArmResult, TimingRecord};
use std::collections::BTreeMap;

/// One step's request counts.
pub struct StepRequests<'a> {
    /// The step's evidence file.
    pub evidence: &'a str,
    /// The step as the verdict names it: `cold`, `warm`, `C4`, `long-context timing`, or a gate's
    /// name.
    pub step: String,
    pub sent: u64,
    pub failed: u64,
    pub by_class: &'a BTreeMap<String, u64>,
}

/// Every step of the arm that sent requests and counted them: the timed steps (cold, warm, each
/// concurrency level, long-context timing) and the gates. Open-loop rate and capacity steps are
/// left out on purpose: they push the engine toward and past its limit, and the failures they
/// see are judged there (their SLOs, the capacity search's failure-share limit), not as the arm's
/// availability.
pub fn steps(arm: &ArmResult) -> Vec<StepRequests<'_>> {
    let mut v = Vec::new();
    for (step, t) in timed(arm) {
        v.push(StepRequests {
            evidence: &t.evidence,
            step,
            sent: t.requests_ok + t.requests_failed,
            failed: t.requests_failed,
            by_class: &t.failures_by_class,
        });
    }
    for g in &arm.gates {
        if let (Some(r), Some(ev)) = (&g.requests, &g.evidence) {
            v.push(StepRequests {
                evidence: ev,
                step: format!("{} gate", g.name.as_str()),
                sent: r.sent,
                failed: r.failed,
                by_class: &r.failures_by_class,
            });
        }
    }
    v
}

/// The arm's closed-loop timed steps, each with its name in the verdict: `cold`, `warm`, `C<k>`
/// per concurrency level, `long-context timing` (one walk: `ArmResult::closed_loop_steps`).
pub fn timed(arm: &ArmResult) -> Vec<(String, &TimingRecord)> {
    arm.closed_loop_steps()
}

/// `0.04` → `4%`, `0.025` → `2.5%`.
pub fn percent(x: f64) -> String {
    let p = x * 100.0;
    if p == p.round() {
        format!("{p:.0}%")
    } else {
        format!("{p:.1}%")
    }
}

/// The disclosure for an arm whose failed requests stayed within the allowance: "1 of 51 requests
/// failed (http-status at C4), within the 4% allowance". None when nothing failed, or when the
/// failures exceed the allowance (then the arm fails `availability` with the same counts).
pub fn within_allowance(arm: &ArmResult, max_fraction: f64) -> Option<String> {
    let steps = steps(arm);
    let sent: u64 = steps.iter().map(|s| s.sent).sum();
    let failed: u64 = steps.iter().map(|s| s.failed).sum();
    if sent == 0 || failed == 0 || failed as f64 / sent as f64 > max_fraction {
        return None;
    }
    let parts: Vec<String> = steps
        .iter()
        .filter(|s| s.failed > 0)
        .map(|s| {
            let classes: Vec<String> = s
                .by_class
                .iter()
                .map(|(c, n)| {
                    if *n > 1 {
                        format!("{c} ×{n}")
                    } else {
                        c.clone()
                    }
                })
                .collect();
            let what = if classes.is_empty() {
                format!("{} failed", s.failed)
            } else {
                classes.join(", ")
            };
            format!("{what} at {}", s.step)
        })
        .collect();
    Some(format!(
        "{failed} of {sent} requests failed ({}), within the {} allowance",
        parts.join("; "),
        percent(max_fraction)
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn timing(ev: &str, conc: u64, ok: u64, failed: u64) -> TimingRecord {
        TimingRecord {
            evidence: ev.into(),
            concurrency: conc,
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

    fn arm() -> ArmResult {
        ArmResult {
            id: "a".into(),
            warm: Some(timing("a-warm.json", 1, 20, 0)),
            concurrency: BTreeMap::from([("4".into(), timing("a-c4.json", 4, 30, 1))]),
            ..Default::default()
        }
    }

    #[test]
    fn failures_within_the_allowance_are_disclosed_with_their_step() {
        let a = arm();
        assert_eq!(
            within_allowance(&a, 0.04).as_deref(),
            Some("1 of 51 requests failed (http-status at C4), within the 4% allowance")
        );
    }

    #[test]
    fn nothing_failed_or_beyond_the_allowance_is_not_a_disclosure() {
        let a = arm();
        assert_eq!(within_allowance(&a, 0.01), None, "1/51 is over 1%");
        let mut clean = arm();
        clean.concurrency.clear();
        assert_eq!(within_allowance(&clean, 0.04), None);
    }
}
