//! SLO gates in the verdict: an arm whose timed step at some concurrency level broke one of the
//! campaign's SLO limits (`[[workload.slo]]`, checked and recorded by the run per level) is
//! ineligible with class `slo-violated`, the detail naming the limit, the level and the observed
//! value. A level the arm never reached (a failed step) was not measured: the arm's own failure
//! already makes it ineligible, and a note says the SLO there could not be checked.

use super::FailureItem;
use crate::evidence::result::{ArmResult, CampaignResult, TimingRecord};
use crate::evidence::FailureClass;

/// The arm's timed records per level, lowest first (1 is the warm run).
fn levels(arm: &ArmResult) -> Vec<(u64, &TimingRecord)> {
    let mut v: Vec<(u64, &TimingRecord)> = arm.warm.iter().map(|t| (1, t)).collect();
    v.extend(
        arm.concurrency
            .iter()
            .filter_map(|(k, t)| Some((k.parse::<u64>().ok()?, t))),
    );
    v.sort_by_key(|(k, _)| *k);
    v
}

/// The arm's label, else its id (as `eligibility::ArmExt`, which this file may not import: the
/// eligibility calls it).
fn name(arm: &ArmResult) -> String {
    if arm.label.trim().is_empty() {
        arm.id.clone()
    } else {
        arm.label.clone()
    }
}

fn ms(x: f64) -> String {
    let s = format!("{x:.1}");
    s.trim_end_matches('0').trim_end_matches('.').to_string()
}

/// One failure per level at which the arm broke a limit; notes for the levels the SLOs cover
/// that the arm did not reach. `prior`: the arm's failures so far (a failed step covers its own
/// level and the levels after it).
pub fn violations(
    result: &CampaignResult,
    arm: &ArmResult,
    prior: &[FailureItem],
    notes: &mut Vec<String>,
) -> Vec<FailureItem> {
    let mut out = Vec::new();
    let recs = levels(arm);
    for (level, t) in &recs {
        let broken: Vec<String> = t
            .slo
            .iter()
            .filter(|c| !c.met)
            .map(|c| match c.observed_ms {
                Some(v) => format!("{} broken at C{level}: observed {} ms", c.limit, ms(v)),
                None => format!(
                    "{} broken at C{level}: not measured (no sample of the metric)",
                    c.limit
                ),
            })
            .collect();
        if broken.is_empty() {
            continue;
        }
        // A step that failed outright is covered by that failure.
        if prior
            .iter()
            .any(|f| f.evidence.as_deref() == Some(t.evidence.as_str()))
        {
            continue;
        }
        out.push(FailureItem {
            arm: arm.id.clone(),
            candidate: name(arm),
            class: FailureClass::SloViolated,
            detail: broken.join("; "),
            evidence: Some(t.evidence.clone()),
        });
    }
    let w = &result.workload;
    for g in &w.slo {
        let covered: Vec<u64> = match g.concurrency {
            Some(n) => vec![n],
            None => w.concurrency.clone(),
        };
        let missing: Vec<String> = covered
            .iter()
            .filter(|n| !recs.iter().any(|(k, _)| k == *n))
            .map(|n| format!("C{n}"))
            .collect();
        if missing.is_empty() || prior.is_empty() {
            continue;
        }
        notes.push(format!(
            "{}'s SLO {} was not measured at {}: the arm failed before that level ({}), which already makes it ineligible.",
            name(arm),
            g.limit,
            missing.join(", "),
            prior[0].class
        ));
    }
    out
}

#[cfg(test)]
#[path = "slo_tests.rs"]
mod tests;
