//! The one `campaign-result.json` of a multi-lane bundle, merged from its lanes' own results
//! (docs/fleet.md). Pure: no I/O.
//!
//! Each lane ran as a one-lane run in its folder (`lanes/<id>/`), so its result names evidence
//! relative to that folder; the merge puts every arm's record in the campaign's file order with
//! every `evidence` name prefixed by the lane's folder (the evidence names carry the lane), takes
//! the restoration and idle baseline of the incumbent's lane, and is complete only when every
//! lane is. The verdict is then derived from this one result as for one lane: the ranking reads
//! each arm's own step files, never an average across lanes.

use crate::evidence::result::{CampaignResult, LaneRun};
use serde::{de::DeserializeOwned, Serialize};

/// A lane's run as the merge takes it: its record in the bundle and its own result (None: its
/// runner never opened its bundle; `error` says why).
pub struct LaneOutcome {
    pub lane: LaneRun,
    pub result: Option<CampaignResult>,
    pub error: Option<String>,
}

/// `v` with every `evidence` name (a string, or each string of a list) prefixed by `folder/`.
fn prefixed<T: Serialize + DeserializeOwned + Clone>(v: &T, folder: &str) -> T {
    fn walk(v: &mut serde_json::Value, folder: &str) {
        match v {
            serde_json::Value::Object(m) => {
                for (k, x) in m.iter_mut() {
                    match (k.as_str(), x) {
                        ("evidence", serde_json::Value::String(s)) if !s.is_empty() => {
                            *s = format!("{folder}/{s}");
                        }
                        ("evidence", serde_json::Value::Array(a)) => {
                            for s in a.iter_mut() {
                                if let serde_json::Value::String(s) = s {
                                    *s = format!("{folder}/{s}");
                                }
                            }
                        }
                        (_, x) => walk(x, folder),
                    }
                }
            }
            serde_json::Value::Array(a) => a.iter_mut().for_each(|x| walk(x, folder)),
            _ => {}
        }
    }
    let Ok(mut j) = serde_json::to_value(v) else {
        return v.clone();
    };
    walk(&mut j, folder);
    serde_json::from_value(j).unwrap_or_else(|_| v.clone())
}

/// The campaign's result from `base` (the result a one-lane run of the whole campaign would
/// start from: identity, workload, policy, every arm pending, in file order) and each lane's.
pub fn merge(mut base: CampaignResult, lanes: Vec<LaneOutcome>) -> CampaignResult {
    let mut reasons = Vec::new();
    let mut lane_notes: Vec<Vec<String>> = Vec::new();
    for l in &lanes {
        let folder = l.lane.folder.as_str();
        let Some(r) = &l.result else {
            lane_notes.push(Vec::new());
            continue;
        };
        for a in &r.arms {
            if let Some(slot) = base.arms.iter_mut().find(|b| b.id == a.id) {
                *slot = prefixed(a, folder);
            }
        }
        let w = &mut base.workload;
        for (k, v) in &r.workload.matched_prompt_tokens_reported {
            w.matched_prompt_tokens_reported.insert(k.clone(), *v);
        }
        for (k, v) in &r.workload.work_items {
            w.work_items.insert(k.clone(), v.clone());
        }
        if w.source.is_none() {
            w.source = r.workload.source.clone();
        }
        if l.lane.incumbent.is_some() {
            base.restoration = r.restoration.as_ref().map(|x| prefixed(x, folder));
            base.idle_baseline = r.idle_baseline.as_ref().map(|x| prefixed(x, folder));
        }
        if r.measurement_path == "routed" {
            base.measurement_path = "routed".into();
        }
        lane_notes.push(r.notes.clone());
    }
    // A note every lane has is said once; a lane's own note is tagged with its lane.
    let everywhere = |n: &String| lane_notes.iter().all(|ns| ns.contains(n));
    for (l, ns) in lanes.iter().zip(&lane_notes) {
        for n in ns {
            let line = if everywhere(n) {
                n.clone()
            } else {
                format!("lane {}: {n}", l.lane.id)
            };
            if !base.notes.contains(&line) {
                base.notes.push(line);
            }
        }
    }
    // Nothing measures yet how much two lanes' cards differ (a control on every lane, issue 22
    // item 3): a verdict that ranks arms measured on different lanes says so.
    let ran: Vec<String> = lanes
        .iter()
        .filter(|l| !l.lane.arms.is_empty())
        .map(|l| format!("{} ({})", l.lane.id, l.lane.arms.join(", ")))
        .collect();
    if ran.len() > 1 {
        let line = format!(
            "Arms ran on {} lanes: {}. The card-to-card spread between lanes was not measured (no control recipe ran on every lane, docs/fleet.md): a margin between two arms of different lanes may be the lanes' and not the recipes'.",
            ran.len(),
            ran.join("; ")
        );
        if !base.notes.contains(&line) {
            base.notes.push(line);
        }
    }
    let mut runs = Vec::new();
    for l in lanes {
        let mut run = l.lane;
        match (&l.result, &l.error) {
            (Some(r), _) => {
                run.complete = r.complete;
                run.incomplete_reason = r.incomplete_reason.clone();
            }
            (None, e) => {
                run.complete = false;
                run.incomplete_reason = Some(
                    e.clone()
                        .unwrap_or_else(|| "the lane's run never started".into()),
                );
            }
        }
        if let Some(why) = run.incomplete_reason.as_ref().filter(|_| !run.complete) {
            reasons.push(format!("lane {}: {why}", run.id));
        }
        runs.push(run);
    }
    base.complete = runs.iter().all(|r| r.complete);
    base.incomplete_reason = (!base.complete).then(|| reasons.join("; "));
    base.lanes = runs;
    base
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::evidence::result::{ArmResult, ArmStatus, Restoration, TimingRecord};
    use crate::evidence::RestorationStatus;

    fn lane(id: &str, inc: Option<&str>, arms: &[&str]) -> LaneRun {
        LaneRun {
            id: id.into(),
            address: format!("127.0.0.1:{}", if inc.is_some() { 9000 } else { 9001 }),
            incumbent: inc.map(str::to_string),
            folder: format!("lanes/{id}"),
            arms: arms.iter().map(|a| a.to_string()).collect(),
            ..Default::default()
        }
    }

    fn arm(id: &str) -> ArmResult {
        ArmResult {
            id: id.into(),
            status: ArmStatus::Completed,
            evidence: vec![format!("{id}-launch.json")],
            warm: Some(TimingRecord {
                evidence: format!("{id}-timing-64-c1-warm.json"),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    fn result(arms: &[&str], complete: bool, notes: &[&str]) -> CampaignResult {
        let mut r = CampaignResult::new("c");
        r.arms = arms.iter().map(|a| arm(a)).collect();
        r.complete = complete;
        r.incomplete_reason = (!complete).then(|| "interrupted by SIGINT during a/timing".into());
        r.notes = notes.iter().map(|n| n.to_string()).collect();
        r
    }

    fn base() -> CampaignResult {
        let mut b = CampaignResult::new("c");
        b.arms = ["inc", "a", "b"]
            .iter()
            .map(|id| ArmResult {
                id: id.to_string(),
                ..Default::default()
            })
            .collect();
        b
    }

    #[test]
    fn every_arm_in_file_order_with_its_lane_in_every_evidence_name() {
        let mut g0 = result(&["inc", "b"], true, &["no GPU", "only g0"]);
        g0.restoration = Some(Restoration {
            status: RestorationStatus::Passed,
            evidence: Some("restoration-identity.json".into()),
            ..Default::default()
        });
        let g1 = result(&["a"], true, &["no GPU"]);
        let m = merge(
            base(),
            vec![
                LaneOutcome {
                    lane: lane("g0", Some("inc"), &["inc", "b"]),
                    result: Some(g0),
                    error: None,
                },
                LaneOutcome {
                    lane: lane("g1", None, &["a"]),
                    result: Some(g1),
                    error: None,
                },
            ],
        );
        let ids: Vec<&str> = m.arms.iter().map(|a| a.id.as_str()).collect();
        assert_eq!(ids, vec!["inc", "a", "b"]);
        let a = m.arm("a").unwrap();
        assert_eq!(a.evidence, vec!["lanes/g1/a-launch.json"]);
        assert_eq!(
            a.warm.as_ref().unwrap().evidence,
            "lanes/g1/a-timing-64-c1-warm.json"
        );
        assert_eq!(
            m.restoration.as_ref().unwrap().evidence.as_deref(),
            Some("lanes/g0/restoration-identity.json")
        );
        assert!(m.complete && m.incomplete_reason.is_none());
        assert_eq!(m.notes[..2], ["no GPU", "lane g0: only g0"]);
        assert_eq!(
            m.notes[2],
            "Arms ran on 2 lanes: g0 (inc, b); g1 (a). The card-to-card spread between lanes was not measured (no control recipe ran on every lane, docs/fleet.md): a margin between two arms of different lanes may be the lanes' and not the recipes'."
        );
        assert_eq!(m.notes.len(), 3);
        assert_eq!(m.lanes.len(), 2);
        assert!(m.lanes.iter().all(|l| l.complete));
    }

    #[test]
    fn one_incomplete_lane_makes_the_campaign_incomplete_and_says_which() {
        let m = merge(
            base(),
            vec![
                LaneOutcome {
                    lane: lane("g0", Some("inc"), &["inc", "b"]),
                    result: Some(result(&["inc", "b"], true, &[])),
                    error: None,
                },
                LaneOutcome {
                    lane: lane("g1", None, &["a"]),
                    result: Some(result(&["a"], false, &[])),
                    error: None,
                },
            ],
        );
        assert!(!m.complete);
        assert_eq!(
            m.incomplete_reason.as_deref(),
            Some("lane g1: interrupted by SIGINT during a/timing")
        );
        let m = merge(
            base(),
            vec![LaneOutcome {
                lane: lane("g1", None, &["a"]),
                result: None,
                error: Some("cannot open the bundle".into()),
            }],
        );
        assert_eq!(
            m.incomplete_reason.as_deref(),
            Some("lane g1: cannot open the bundle")
        );
        // Its arms stay pending: nothing was measured.
        assert_eq!(m.arm("a").unwrap().status, ArmStatus::Pending);
    }
}
