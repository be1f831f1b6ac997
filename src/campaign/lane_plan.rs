//! One lane's share of a multi-lane campaign (docs/fleet.md): the campaign as that lane sees it
//! (`[lane]` = the lane) and its plan (the lane's arms in schedule order, the incumbent's stop
//! and restoration only on the incumbent's lane). The runner runs each lane's plan unchanged, as
//! it runs a one-lane campaign's, in the lane's own folder of the bundle.
//!
//! Plain data, no I/O.

use super::plan::{plan, Phase, Plan, PlanStep, StepKind};
use super::schedule::Schedule;
use super::spec::Campaign;

/// The campaign as lane `lane` runs it: `[lane]` is that lane's table and there is no
/// `[[lanes]]` list. Every arm stays (the incumbent is still the campaign's, and an arm's
/// recipe is read by id); only the lane's arms have steps in its plan ([`lane_plan`]). None:
/// no such lane.
pub fn lane_campaign(c: &Campaign, lane: &str) -> Option<Campaign> {
    let entry = c.fleet.iter().find(|e| e.id == lane)?;
    let mut sub = c.clone();
    sub.lane = entry.lane();
    sub.fleet.clear();
    Some(sub)
}

/// The id of the control's copy on a lane that does not run the control arm itself: the
/// control arm's id with a suffix no arm id can have (ids are letters, digits and `-`).
pub fn control_copy_id(control: &str) -> String {
    format!("{control}.control")
}

/// Whether `arm` is a control's copy ([`control_copy_id`]).
pub fn is_control_copy(arm: &str) -> bool {
    arm.ends_with(".control")
}

/// The plan of lane `lane` of `c` (a `[[lanes]]` campaign): the steps [`plan`] makes for
/// [`lane_campaign`] (so every lane parameter is this lane's: ready timeout, GPUs, memory
/// reserve), keeping the setup's idle baseline, the arm steps of the arms `schedule` puts on
/// the lane (a lane's arms run in file order, as they come in the plan), and the incumbent's stop
/// and restoration only on the lane that names it; numbered again from 1. Its schedule is the
/// lane's queue alone. None: no such lane.
///
/// The card-to-card control (docs/fleet.md): on a lane that does not run the control arm
/// ([`Campaign::control_arm`]) the lane's plan starts with a copy of it
/// ([`control_copy_id`], role candidate) that runs only the first timing steps, cold c1 and warm
/// c1 (the shape the ranking's TTFT, decode and E2E figures come from), between its launch and
/// its stop. On the control arm's own lane its own measurement of that step serves.
pub fn lane_plan(c: &Campaign, schedule: &Schedule, lane: &str) -> Option<Plan> {
    let queue = schedule.lanes.iter().find(|q| q.lane == lane)?.clone();
    queue_plan(c, queue, true)
}

/// The plan of arms `arms` moved onto lane `lane` from drained lane `from` (docs/fleet.md "A
/// lane that dies"): as [`lane_plan`] makes a lane's, for those arms alone (file order), each
/// from its start, without the control's copy (the lane measured its control in its own run);
/// on the incumbent's lane with the incumbent's stop and restoration again. None: no such lane.
pub fn moved_plan(
    c: &Campaign,
    schedule: &Schedule,
    lane: &str,
    arms: &[String],
    from: &str,
) -> Option<Plan> {
    let own = schedule.lanes.iter().find(|q| q.lane == lane)?;
    let steps = plan(c);
    let placed = c
        .arms
        .iter()
        .filter(|a| arms.contains(&a.id))
        .map(|a| super::schedule::Placed {
            arm: a.id.clone(),
            steps: steps
                .steps
                .iter()
                .filter(|s| s.arm.as_deref() == Some(a.id.as_str()))
                .count(),
            why: super::schedule::Why::Moved(from.to_string()),
        })
        .collect();
    let queue = super::schedule::LaneQueue {
        arms: placed,
        ..own.clone()
    };
    queue_plan(c, queue, false)
}

/// The plan of `queue` on its lane; `control`: with the control's copy when the queue does not
/// hold the control arm.
fn queue_plan(c: &Campaign, queue: super::schedule::LaneQueue, control: bool) -> Option<Plan> {
    let lane = queue.lane.clone();
    let lane = lane.as_str();
    let mut sub = lane_campaign(c, lane)?;
    let serves_incumbent = queue.incumbent.is_some();
    let copy = c
        .control_arm()
        .ok()
        .filter(|_| control)
        .filter(|a| !queue.arms.iter().any(|q| q.arm == a.id))
        .map(|a| {
            let mut copy = a.clone();
            copy.id = control_copy_id(&a.id);
            copy.role = super::spec::Role::Candidate;
            copy.speculative = None;
            // A Slurm copy's job is found by its name: never the original's (the incumbent's
            // name is how its lane's stop finds the incumbent).
            if let Some(s) = copy.slurm.as_mut() {
                s.job_name = format!("{}-control-{lane}", s.job_name);
            }
            copy
        });
    if let Some(copy) = &copy {
        sub.arms.insert(0, copy.clone());
    }
    let copy_id = copy.map(|a| a.id);
    let mut p = plan(&sub);
    let keep = |s: &PlanStep| match s.phase {
        Phase::Setup => serves_incumbent || matches!(s.kind, StepKind::GpuIdleBaseline { .. }),
        Phase::Arm if s.arm.is_some() && s.arm == copy_id => control_step(&s.kind),
        Phase::Arm => s
            .arm
            .as_deref()
            .is_some_and(|a| queue.arms.iter().any(|q| q.arm == a)),
        Phase::Restoration => serves_incumbent,
    };
    p.steps.retain(keep);
    for (i, s) in p.steps.iter_mut().enumerate() {
        s.number = i + 1;
    }
    p.schedule = Schedule { lanes: vec![queue] };
    Some(p)
}

/// The steps of the control's copy: launched, ready (and its memory reserve), the closed-loop
/// c1 timing steps (cold, then warm), stopped.
fn control_step(k: &StepKind) -> bool {
    match k {
        StepKind::Launch | StepKind::Ready { .. } | StepKind::MemoryReserve { .. } => true,
        StepKind::Stop => true,
        StepKind::Timing {
            concurrency,
            open_loop,
            ..
        } => *concurrency == 1 && open_loop.is_none(),
        _ => false,
    }
}

impl Plan {
    /// Whether the plan restores an incumbent (every one-lane plan; on a multi-lane campaign,
    /// only the incumbent's lane: a qualification lane has nothing to stop or restore).
    pub fn restores(&self) -> bool {
        self.steps.iter().any(|s| s.phase == Phase::Restoration)
    }

    /// The arms with steps in this plan (every arm of a one-lane plan; a lane's arms), in order.
    pub fn arm_ids(&self) -> Vec<&str> {
        let mut out: Vec<&str> = Vec::new();
        for s in self.steps.iter().filter(|s| s.phase == Phase::Arm) {
            if let Some(a) = s.arm.as_deref() {
                if !out.contains(&a) {
                    out.push(a);
                }
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn campaign(gpus: bool) -> Campaign {
        let d = tempfile::tempdir().unwrap();
        let f = d.path().join("campaign.toml");
        let arm = |id: &str, role: &str| {
            format!(
                "[[arms]]\nid = \"{id}\"\nrole = \"{role}\"\nengine = \"e\"\nmodel = \"m\"\nserved_model = \"m\"\nserved_context = 8192\n[arms.process]\nargv = [\"/bin/sleep\", \"100\"]\n"
            )
        };
        let g = if gpus { "gpus = [\"GPU-1\"]\n" } else { "" };
        let g2 = if gpus { "gpus = [\"GPU-2\"]\n" } else { "" };
        let text = format!(
            "[campaign]\nid = \"lane-plan\"\n[[lanes]]\nid = \"g0\"\nport = 18990\nincumbent = \"inc\"\n{g}[[lanes]]\nid = \"g1\"\nport = 18991\nready_timeout_s = 77\n{g2}[workload]\nranking_priority = [\"ttft\"]\nmatched_prompt_tokens = 64\nmax_tokens = 8\nwarm_repetitions = 2\nconcurrency = [1]\n[gates]\npreflight = [\"smoke\"]\n{}{}{}{}",
            arm("inc", "incumbent"),
            arm("a", "candidate"),
            arm("b", "candidate"),
            arm("c", "candidate")
        );
        std::fs::write(&f, text).unwrap();
        crate::campaign::load(&f).unwrap_or_else(|e| panic!("{e}"))
    }

    fn names(p: &Plan) -> Vec<String> {
        p.steps
            .iter()
            .map(|s| format!("{} {}", s.number, s.evidence))
            .collect()
    }

    #[test]
    fn each_lane_plans_its_own_arms_and_only_the_incumbents_lane_restores() {
        let c = campaign(false);
        let full = plan(&c);
        // inc on g0; a → g1, b → g0, c → g1 (equal lengths, least loaded, lane order).
        let g0 = lane_plan(&c, &full.schedule, "g0").unwrap();
        let g1 = lane_plan(&c, &full.schedule, "g1").unwrap();
        assert_eq!(g0.arm_ids(), vec!["inc", "b"]);
        // g1 first times a copy of the control (the incumbent's recipe): launch, ready, preflight
        // left out, cold and warm c1, stop.
        assert_eq!(g1.arm_ids(), vec!["inc.control", "a", "c"]);
        let copy: Vec<String> = names(&g1).into_iter().take(5).collect();
        assert_eq!(
            copy,
            [
                "1 inc.control-launch.json",
                "2 inc.control-ready.json",
                "3 inc.control-timing-64-c1-cold.json",
                "4 inc.control-timing-64-c1-warm.json",
                "5 inc.control-stop.json"
            ]
        );
        assert!(g0.restores() && !g1.restores());
        assert!(full.restores());
        let g0n = names(&g0);
        assert_eq!(g0n.first().unwrap(), "1 incumbent-shutdown.json");
        assert_eq!(
            g0n.last().unwrap(),
            &format!("{} restoration-preflight.json", g0n.len())
        );
        assert_eq!(names(&g1)[5], "6 a-launch.json");
        assert!(g1.steps.iter().all(|s| s.phase == Phase::Arm));
        // Every arm step of the whole plan is on exactly one lane, with the same evidence name.
        let mut lanes: Vec<&str> = g0
            .steps
            .iter()
            .chain(&g1.steps)
            .filter(|s| s.phase == Phase::Arm && !s.evidence.starts_with("inc.control"))
            .map(|s| s.evidence.as_str())
            .collect();
        let mut all: Vec<&str> = full
            .steps
            .iter()
            .filter(|s| s.phase == Phase::Arm)
            .map(|s| s.evidence.as_str())
            .collect();
        lanes.sort_unstable();
        all.sort_unstable();
        assert_eq!(lanes, all);
        // The lane's own settings: g1's ready timeout, its address.
        let ready = g1
            .steps
            .iter()
            .find_map(|s| match &s.kind {
                StepKind::Ready { timeout_s, .. } => Some(*timeout_s),
                _ => None,
            })
            .unwrap();
        assert_eq!(ready, 77);
        assert_eq!(g1.campaign.lane.port, 18991);
        assert!(!g1.campaign.multi_lane());
        assert_eq!(g1.schedule.lanes.len(), 1);
        assert!(lane_plan(&c, &full.schedule, "nope").is_none());
    }

    #[test]
    fn a_qualification_lane_with_gpus_keeps_its_idle_baseline() {
        let c = campaign(true);
        let full = plan(&c);
        let g1 = lane_plan(&c, &full.schedule, "g1").unwrap();
        assert_eq!(g1.steps[0].evidence, "gpu-idle-baseline.json");
        assert!(!g1
            .steps
            .iter()
            .any(|s| matches!(s.kind, StepKind::StopIncumbent)));
        assert_eq!(g1.campaign.lane.gpus, vec!["GPU-2".to_string()]);
    }
}
