//! The one `campaign-result.json` of a multi-lane bundle, merged from its lanes' own results
//! (docs/fleet.md). Pure: no I/O.
//!
//! Each lane ran as a one-lane run in its folder (`lanes/<id>/`), so its result names evidence
//! relative to that folder; the merge puts every arm's record in the campaign's file order with
//! every `evidence` name prefixed by the lane's folder (the evidence names carry the lane), takes
//! the restoration and idle baseline of the incumbent's lane, and is complete only when every
//! lane is. The verdict is then derived from this one result as for one lane: the ranking reads
//! each arm's own step files, never an average across lanes.

use crate::evidence::lane_spread::{LaneControl, LaneSpread, FILE as LANE_SPREAD_FILE};
use crate::evidence::result::{ArmMove, CampaignResult, LaneRun};
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

/// The control's figures on every lane and the spread they show (`base.lane_spread`), with the
/// verdict's lines about them in `base.notes`; when no control ran on every lane, the line that
/// the spread was not measured. Only when arms ran on more than one lane.
fn spread(base: &mut CampaignResult, lanes: &[LaneOutcome], control: Result<&str, String>) {
    // Per lane id (a lane's moved runs with its own), the arms counted there.
    let mut by_lane: Vec<(&str, Vec<&str>)> = Vec::new();
    for l in lanes.iter().filter(|l| !l.lane.arms.is_empty()) {
        let arms = l.lane.arms.iter().map(String::as_str);
        match by_lane.iter_mut().find(|(id, _)| *id == l.lane.id) {
            Some((_, a)) => a.extend(arms),
            None => by_lane.push((&l.lane.id, arms.collect())),
        }
    }
    let ran: Vec<String> = by_lane
        .iter()
        .map(|(id, arms)| format!("{id} ({})", arms.join(", ")))
        .collect();
    if ran.len() < 2 {
        return;
    }
    let arms_ran = format!("Arms ran on {} lanes: {}.", ran.len(), ran.join("; "));
    let mut push = |line: String| {
        if !base.notes.contains(&line) {
            base.notes.push(line);
        }
    };
    let not_measured = |why: &str| {
        format!(
            "{arms_ran} The card-to-card spread between lanes was not measured ({why}, docs/fleet.md): a margin between two arms of different lanes may be the lanes' and not the recipes'."
        )
    };
    let control = match control {
        Ok(c) => c,
        Err(why) => {
            push(not_measured(&format!(
                "no control recipe ran on every lane: {why}"
            )));
            return;
        }
    };
    let copy = crate::campaign::lane_plan::control_copy_id(control);
    let (mut found, mut missing) = (Vec::new(), Vec::new());
    for l in lanes {
        if l.lane.moved_from.is_some() {
            // A moved run has no control: its lane's own run measured it.
            continue;
        }
        let rec = l
            .result
            .as_ref()
            .and_then(|r| r.arms.iter().find(|a| a.id == copy || a.id == control));
        let emptied = l.lane.drained.is_some() && l.lane.arms.is_empty();
        match rec.map(|a| (a, prefixed(a, &l.lane.folder))) {
            Some((a, p)) if p.warm.is_some() => {
                let warm = p.warm.as_ref().expect("checked");
                found.push(LaneControl::of(&l.lane.id, &a.id, warm));
            }
            // A drained lane none of whose arms counted needs no control figures.
            _ if emptied => {}
            Some((a, _)) => missing.push(format!(
                "lane {}: the control {} has no warm c1 timing ({:?}{})",
                l.lane.id,
                a.id,
                a.status,
                a.failure
                    .as_ref()
                    .map(|f| format!(": {}", f.detail))
                    .unwrap_or_default()
            )),
            None => missing.push(format!("lane {}: the control did not run", l.lane.id)),
        }
    }
    let s = LaneSpread::of(control, found, missing);
    if s.spread.is_empty() || !s.missing.is_empty() {
        let why = if s.missing.is_empty() {
            "the controls measured no figure on two lanes".to_string()
        } else {
            s.missing.join("; ")
        };
        push(not_measured(&why));
    } else {
        let figures: Vec<String> = s
            .spread
            .iter()
            .map(|(m, x)| format!("{} {:.1} %", m.as_str(), x.spread * 100.0))
            .collect();
        push(format!(
            "{arms_ran} The card-to-card spread, measured by a short A/A timing of {control}'s recipe on every lane ({}): {} across {} lanes; a margin between arms of different lanes within it is a tie.",
            LANE_SPREAD_FILE,
            figures.join(", "),
            s.lanes.len()
        ));
    }
    for o in &s.outliers {
        push(o.clone());
    }
    base.lane_spread = Some(s);
}

/// The campaign's result from `base` (the result a one-lane run of the whole campaign would
/// start from: identity, workload, policy, every arm pending, in file order) and each lane's.
///
/// `control`: the id of the arm whose recipe is the card-to-card control (its copy on the
/// lanes that do not run it is `lane_plan::control_copy_id`), or why none ran.
///
/// `moves`: the arms moved off drained lanes (docs/fleet.md "A lane that dies"). A moved arm's
/// record is its moved run's (that run comes after the drained one in `lanes`); the drained run
/// no longer lists it, and says why it was drained. A drained run does not leave the campaign
/// incomplete when its arms ran elsewhere and its restoration (if it has one) passed.
pub fn merge(
    mut base: CampaignResult,
    mut lanes: Vec<LaneOutcome>,
    control: Result<&str, String>,
    moves: Vec<ArmMove>,
) -> CampaignResult {
    for l in lanes.iter_mut() {
        let out: Vec<&ArmMove> = moves
            .iter()
            .filter(|m| m.left_in == l.lane.folder)
            .collect();
        if let Some(m) = out.first() {
            l.lane.drained = Some(m.cause.clone());
            l.lane.arms.retain(|a| !out.iter().any(|m| &m.arm == a));
        }
    }
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
    spread(&mut base, &lanes, control);
    // A lane measured over the network: its figures include the round trip (a moved run is on
    // the same lane, said once).
    for l in lanes.iter().filter(|l| l.lane.moved_from.is_none()) {
        let Some(n) = l
            .lane
            .client
            .as_ref()
            .and_then(|c| c.note(&l.lane.id, &l.lane.address))
        else {
            continue;
        };
        if !base.notes.contains(&n) {
            base.notes.push(n);
        }
    }
    for n in super::fleet_drain::notes(&moves) {
        if !base.notes.contains(&n) {
            base.notes.push(n);
        }
    }
    let mut runs = Vec::new();
    let mut done = Vec::new();
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
        // A drained run is done when its restoration (its lane's incumbent) passed or it had none.
        let restored = l.result.as_ref().is_some_and(|r| {
            r.restoration
                .as_ref()
                .is_none_or(|x| x.status == crate::evidence::RestorationStatus::Passed)
        });
        done.push(run.complete || (run.drained.is_some() && restored));
        if let Some(why) = run
            .incomplete_reason
            .as_ref()
            .filter(|_| !done[done.len() - 1])
        {
            reasons.push(format!("lane {}: {why}", run.id));
        }
        runs.push(run);
    }
    let stranded: Vec<&str> = moves
        .iter()
        .filter(|m| m.to.is_none())
        .map(|m| m.arm.as_str())
        .collect();
    if !stranded.is_empty() {
        reasons.push(format!(
            "arm(s) {} not run: their lane was drained and no live lane was left; `bakeoff run --resume` runs them",
            stranded.join(", ")
        ));
    }
    base.complete = done.iter().all(|d| *d) && stranded.is_empty();
    base.moves = moves;
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

    /// g0 (the incumbent's lane: inc, b) and g1 (a qualification lane: a) with their results.
    fn two_lanes(g0: CampaignResult, g1: CampaignResult) -> Vec<LaneOutcome> {
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
        ]
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
            two_lanes(g0, g1),
            Err("the control arm `inc` is an endpoint".into()),
            Vec::new(),
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
            "Arms ran on 2 lanes: g0 (inc, b); g1 (a). The card-to-card spread between lanes was not measured (no control recipe ran on every lane: the control arm `inc` is an endpoint, docs/fleet.md): a margin between two arms of different lanes may be the lanes' and not the recipes'."
        );
        assert!(m.lane_spread.is_none());
        assert_eq!(m.notes.len(), 3);
        assert_eq!(m.lanes.len(), 2);
        assert!(m.lanes.iter().all(|l| l.complete));
    }

    #[test]
    fn a_lane_measured_over_the_network_says_its_round_trip_in_the_notes() {
        use crate::evidence::client_path::{ClientPath, Rtt};
        let mut lanes = two_lanes(result(&["inc", "b"], true, &[]), result(&["a"], true, &[]));
        lanes[0].lane.client = Some(ClientPath {
            host: "ctl".into(),
            mode: "same-host".into(),
            ..Default::default()
        });
        lanes[1].lane.client = Some(ClientPath {
            host: "ctl".into(),
            mode: "network".into(),
            rtt_ms: Some(Rtt {
                n: 20,
                p50: 0.05,
                p99: 0.09,
                max: 0.1,
            }),
            rtt_error: None,
        });
        let m = merge(base(), lanes, Ok("inc"), Vec::new());
        let net: Vec<&String> = m.notes.iter().filter(|n| n.starts_with("Lane ")).collect();
        assert_eq!(
            net,
            ["Lane g1 (127.0.0.1:9001) was measured from ctl over the network (TCP round trip p50 0.050 ms, p99 0.090 ms over 20 connects): its TTFT and E2E figures include the round trip, and the host's CPU drove every lane's load."]
        );
        assert_eq!(m.lanes[1].client.as_ref().unwrap().mode, "network");
    }

    #[test]
    fn one_incomplete_lane_makes_the_campaign_incomplete_and_says_which() {
        let m = merge(
            base(),
            two_lanes(result(&["inc", "b"], true, &[]), result(&["a"], false, &[])),
            Ok("inc"),
            Vec::new(),
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
            Ok("inc"),
            Vec::new(),
        );
        assert_eq!(
            m.incomplete_reason.as_deref(),
            Some("lane g1: cannot open the bundle")
        );
        // Its arms stay pending: nothing was measured.
        assert_eq!(m.arm("a").unwrap().status, ArmStatus::Pending);
    }

    #[test]
    fn the_controls_on_every_lane_give_the_spread_and_replace_the_not_measured_line() {
        let timed = |id: &str, ttft: f64| {
            let mut a = arm(id);
            let w = a.warm.as_mut().unwrap();
            w.ttft_ms = Some(crate::evidence::result::Stat {
                p50: ttft,
                ci95: [ttft - 0.1, ttft + 0.1],
                p95: ttft,
                n: 6,
                ..Default::default()
            });
            a
        };
        let mut g0 = result(&[], true, &[]);
        g0.arms = vec![timed("inc", 60.0), timed("b", 40.0)];
        let mut g1 = result(&[], true, &[]);
        g1.arms = vec![timed("inc.control", 64.8), timed("a", 43.0)];
        let m = merge(base(), two_lanes(g0, g1), Ok("inc"), Vec::new());
        // The copy is not an arm of the campaign: only its figures are kept.
        assert!(m.arm("inc.control").is_none());
        let s = m.lane_spread.as_ref().unwrap();
        assert_eq!(s.lanes.len(), 2);
        assert_eq!(s.lanes[1].arm, "inc.control");
        assert_eq!(
            s.lanes[1].evidence,
            "lanes/g1/inc.control-timing-64-c1-warm.json"
        );
        let t = s.spread[&crate::evidence::RankingMetric::Ttft].spread;
        assert!((t - 0.08).abs() < 1e-9, "{t}");
        assert_eq!(
            m.notes[0],
            "Arms ran on 2 lanes: g0 (inc, b); g1 (a). The card-to-card spread, measured by a short A/A timing of inc's recipe on every lane (lane-spread.json): ttft 8.0 % across 2 lanes; a margin between arms of different lanes within it is a tie."
        );
        assert!(
            m.notes[1].starts_with("Lane g0's control (inc) differs"),
            "{:?}",
            m.notes
        );
        assert!(
            m.notes[2].starts_with("Lane g1's control (inc) differs"),
            "{:?}",
            m.notes
        );
    }
}
