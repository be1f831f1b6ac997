//! The runner's paths on fake steps (no engine is started): every step runs once and in order; a
//! failing step skips the rest of its arm but not its stop; a signal between steps stops the live
//! arm and goes straight to the restoration; a signal during the restoration does not cut it
//! short; a panicking step is a failed step; a resumed run does not redo finished steps.

use super::context::Cx;
use super::step::Steps;
use super::step_outcome::{fail, Done, Outcome as StepOutcome};
use super::{run_with, Options, Outcome};
use crate::campaign::checkpoint::{Checkpoint, StepStatus};
use crate::campaign::{self, Phase, PlanStep, StepKind};
use crate::evidence::result::{ArmStatus, Failure, Restoration};
use crate::evidence::{FailureClass, RestorationStatus};
use serde_json::{json, Value};
use std::path::Path;
use tokio::sync::watch;

const CAMPAIGN: &str = r#"
[campaign]
id = "runner-test"
hardware = "test host"
topology = "fake steps"
output = "bundle"

[lane]
host = "127.0.0.1"
port = 1

[workload]
ranking_priority = ["ttft"]
matched_prompt_tokens = 64
max_tokens = 8
warm_repetitions = 1
concurrency = [1, 2]

[gates]
preflight = ["smoke"]

[policy]
required_gates = ["smoke", "restoration"]

[[arms]]
id = "inc"
role = "incumbent"
engine = "bakeoff reference engine"
model = "m"
[arms.reference]
profile = "PROFILE"

[[arms]]
id = "a"
role = "candidate"
engine = "bakeoff reference engine"
model = "m"
[arms.reference]
profile = "PROFILE"

[[arms]]
id = "b"
role = "candidate"
engine = "bakeoff reference engine"
model = "m"
[arms.reference]
profile = "PROFILE"
"#;

fn plan(dir: &Path) -> campaign::Plan {
    let profile =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/profiles/reference-50ms-80tps.toml");
    let text = CAMPAIGN.replace("PROFILE", &profile.display().to_string());
    let file = dir.join("campaign.toml");
    std::fs::write(&file, text).unwrap();
    let c = campaign::load(&file).unwrap_or_else(|e| panic!("{:?}", e.diagnostics));
    campaign::plan(&c)
}

/// What the fakes do at a step, by its evidence file name.
#[derive(Default)]
struct Fake {
    /// Evidence names of the steps run, in order; `stop <arm>` for stops outside the plan,
    /// `relaunch <arm>` for relaunches.
    log: Vec<String>,
    fail_at: Option<&'static str>,
    panic_at: Option<&'static str>,
    /// The step after which a SIGINT arrives.
    signal_after: Option<&'static str>,
    tx: Option<watch::Sender<Option<&'static str>>>,
}

impl Steps for Fake {
    type Live = String;

    async fn run(
        &mut self,
        cx: &mut Cx,
        s: &PlanStep,
        _again: bool,
        live: Option<&mut Option<String>>,
    ) -> Done {
        self.log.push(s.evidence.clone());
        if self.signal_after == Some(s.evidence.as_str()) {
            let _ = self.tx.as_ref().unwrap().send(Some("SIGINT"));
        }
        if self.panic_at == Some(s.evidence.as_str()) {
            panic!("a fake step panicked");
        }
        if self.fail_at == Some(s.evidence.as_str()) {
            let f = fail(FailureClass::Compatibility, "a fake failure", &s.evidence);
            return Done::new(StepOutcome::Fatal(f), Some(json!({"fake": true})));
        }
        match (&s.kind, live) {
            (StepKind::Launch, Some(l)) => *l = s.arm.clone(),
            (StepKind::Stop, Some(l)) => *l = None,
            (StepKind::RestorationPreflight { .. }, _) => {
                cx.rec.result().restoration = Some(Restoration {
                    status: RestorationStatus::Passed,
                    ..Default::default()
                });
            }
            _ => {}
        }
        Done::ok(json!({"fake": s.kind.name()}))
    }

    async fn relaunch(&mut self, _cx: &mut Cx, arm: &str) -> Result<String, Failure> {
        self.log.push(format!("relaunch {arm}"));
        Ok(arm.to_string())
    }

    async fn stop(&mut self, _cx: &mut Cx, arm: &str, live: String) -> Value {
        assert_eq!(arm, live, "the live arm is the one stopped");
        self.log.push(format!("stop {arm}"));
        json!({"fake": "stop"})
    }
}

struct Ran {
    out: Outcome,
    log: Vec<String>,
    plan: campaign::Plan,
    ck: Checkpoint,
}

async fn go(dir: &Path, mut fake: Fake, resume: bool) -> Ran {
    let plan = plan(dir);
    let bundle = dir.join("bundle");
    std::fs::create_dir_all(&bundle).unwrap();
    let (tx, rx) = watch::channel(None);
    fake.tx = Some(tx);
    let opts = Options {
        bundle: bundle.clone(),
        resume,
        notify: super::quiet(),
        cancel: rx,
        notes: vec![],
        recovery: None,
        logs_beside: None,
        lane_probe: None,
    };
    let mut fake = fake;
    let out = run_with_fake(plan.clone(), opts, &mut fake).await;
    Ran {
        out,
        log: std::mem::take(&mut fake.log),
        plan,
        ck: Checkpoint::load(&bundle).unwrap(),
    }
}

async fn run_with_fake(plan: campaign::Plan, opts: Options, fake: &mut Fake) -> Outcome {
    run_with(plan, opts, FakeRef(fake)).await.unwrap()
}

/// The fakes by reference, so the test reads their log afterwards.
struct FakeRef<'a>(&'a mut Fake);

impl Steps for FakeRef<'_> {
    type Live = String;
    async fn run(
        &mut self,
        cx: &mut Cx,
        s: &PlanStep,
        again: bool,
        live: Option<&mut Option<String>>,
    ) -> Done {
        self.0.run(cx, s, again, live).await
    }
    async fn relaunch(&mut self, cx: &mut Cx, arm: &str) -> Result<String, Failure> {
        self.0.relaunch(cx, arm).await
    }
    async fn stop(&mut self, cx: &mut Cx, arm: &str, live: String) -> Value {
        self.0.stop(cx, arm, live).await
    }
}

fn all(plan: &campaign::Plan) -> Vec<String> {
    plan.steps.iter().map(|s| s.evidence.clone()).collect()
}

fn status(r: &Ran, evidence: &str) -> StepStatus {
    r.ck.steps
        .iter()
        .find(|s| s.evidence == evidence)
        .unwrap_or_else(|| panic!("{evidence} not in the plan"))
        .status
}

fn arm_status(r: &Ran, id: &str) -> ArmStatus {
    r.out
        .result
        .arms
        .iter()
        .find(|a| a.id == id)
        .unwrap()
        .status
}

fn restoration(plan: &campaign::Plan) -> Vec<String> {
    plan.steps
        .iter()
        .filter(|s| s.phase == Phase::Restoration)
        .map(|s| s.evidence.clone())
        .collect()
}

#[tokio::test]
async fn every_step_runs_once_in_order_and_the_bundle_is_complete() {
    let d = tempfile::tempdir().unwrap();
    let r = go(d.path(), Fake::default(), false).await;
    assert_eq!(r.log, all(&r.plan));
    assert!(r.out.complete, "{:?}", r.out.result.incomplete_reason);
    assert!(r.ck.steps.iter().all(|s| s.status == StepStatus::Done));
    for id in ["inc", "a", "b"] {
        assert_eq!(arm_status(&r, id), ArmStatus::Completed);
    }
    // The recorder wrote every step's evidence and the manifest.
    for f in all(&r.plan) {
        assert!(d.path().join("bundle").join(&f).exists(), "{f}");
    }
    assert!(d
        .path()
        .join("bundle")
        .join(crate::evidence::bundle::MANIFEST)
        .exists());
}

#[tokio::test]
async fn a_failing_step_skips_the_rest_of_its_arm_but_not_its_stop_nor_the_restoration() {
    let d = tempfile::tempdir().unwrap();
    let fake = Fake {
        fail_at: Some("a-preflight.json"),
        ..Default::default()
    };
    let r = go(d.path(), fake, false).await;
    let a_steps: Vec<&str> = r
        .plan
        .steps
        .iter()
        .filter(|s| s.arm.as_deref() == Some("a") && s.phase == Phase::Arm)
        .map(|s| s.evidence.as_str())
        .collect();
    let ran_a: Vec<&str> = r
        .log
        .iter()
        .map(String::as_str)
        .filter(|e| e.starts_with("a-"))
        .collect();
    assert_eq!(
        ran_a,
        [
            "a-launch.json",
            "a-ready.json",
            "a-preflight.json",
            "a-stop.json"
        ]
    );
    for e in &a_steps {
        let want = match *e {
            "a-preflight.json" => StepStatus::Failed,
            "a-launch.json" | "a-ready.json" | "a-stop.json" => StepStatus::Done,
            _ => StepStatus::Skipped,
        };
        assert_eq!(status(&r, e), want, "{e}");
    }
    assert_eq!(arm_status(&r, "a"), ArmStatus::Failed);
    let a = r.out.result.arms.iter().find(|a| a.id == "a").unwrap();
    assert_eq!(
        a.failure.as_ref().unwrap().class,
        FailureClass::Compatibility
    );
    // The next arm and the restoration still ran; the campaign is complete (a failed arm is an
    // end state).
    assert!(r.log.iter().any(|e| e == "b-stop.json"));
    assert!(r.log.ends_with(&restoration(&r.plan)));
    assert!(r.out.complete);
}

#[tokio::test]
async fn a_signal_between_steps_stops_the_live_arm_and_restores() {
    let d = tempfile::tempdir().unwrap();
    let fake = Fake {
        signal_after: Some("a-preflight.json"),
        ..Default::default()
    };
    let r = go(d.path(), fake, false).await;
    let at = r.log.iter().position(|e| e == "a-preflight.json").unwrap();
    let mut want: Vec<String> = vec!["stop a".into()];
    want.extend(restoration(&r.plan));
    assert_eq!(r.log[at + 1..], want[..], "{:?}", r.log);
    assert_eq!(
        r.out.interrupted.as_deref(),
        Some("interrupted by SIGINT during a/timing")
    );
    assert!(!r.out.complete);
    assert_eq!(arm_status(&r, "a"), ArmStatus::Interrupted);
    assert_eq!(status(&r, "a-preflight.json"), StepStatus::Done);
    assert_eq!(status(&r, "b-launch.json"), StepStatus::Pending);
    assert!(restoration(&r.plan)
        .iter()
        .all(|e| status(&r, e) == StepStatus::Done));
    assert!(d.path().join("bundle/a-stop-interrupted-1.json").exists());
}

#[tokio::test]
async fn a_signal_during_the_restoration_does_not_cut_it_short() {
    let d = tempfile::tempdir().unwrap();
    let p = plan(d.path());
    let first = restoration(&p)[0].clone();
    let fake = Fake {
        signal_after: Some(Box::leak(first.into_boxed_str())),
        ..Default::default()
    };
    let r = go(d.path(), fake, false).await;
    assert!(r.log.ends_with(&restoration(&r.plan)));
    assert_eq!(
        r.log,
        all(&r.plan),
        "nothing skipped, nothing stopped twice"
    );
    assert_eq!(
        r.out.interrupted.as_deref(),
        Some("interrupted by SIGINT during restoration/restoration-identity")
    );
    assert!(!r.out.complete);
    assert!(restoration(&r.plan)
        .iter()
        .all(|e| status(&r, e) == StepStatus::Done));
}

#[tokio::test]
async fn a_signal_during_the_last_restoration_step_still_interrupts_the_run() {
    let d = tempfile::tempdir().unwrap();
    let p = plan(d.path());
    let last = restoration(&p).last().unwrap().clone();
    let fake = Fake {
        signal_after: Some(Box::leak(last.into_boxed_str())),
        ..Default::default()
    };
    let r = go(d.path(), fake, false).await;
    assert_eq!(r.log, all(&r.plan), "nothing skipped");
    assert_eq!(
        r.out.interrupted.as_deref(),
        Some("interrupted by SIGINT during restoration/restoration-preflight"),
        "the one rule: a signal before the bundle is sealed interrupts the run"
    );
    assert!(!r.out.complete);
}

#[tokio::test]
async fn a_panicking_step_is_a_crash_and_the_run_goes_on() {
    let d = tempfile::tempdir().unwrap();
    let fake = Fake {
        panic_at: Some("b-ready.json"),
        ..Default::default()
    };
    let r = go(d.path(), fake, false).await;
    assert_eq!(status(&r, "b-ready.json"), StepStatus::Failed);
    let b = r.out.result.arms.iter().find(|a| a.id == "b").unwrap();
    let f = b.failure.as_ref().unwrap();
    assert_eq!(f.class, FailureClass::Crash);
    assert!(f.detail.contains("a fake step panicked"), "{}", f.detail);
    assert!(r.log.iter().any(|e| e == "b-stop.json"));
    assert!(r.log.ends_with(&restoration(&r.plan)));
}

#[tokio::test]
async fn a_resumed_run_relaunches_the_arm_it_left_and_redoes_nothing_finished() {
    let d = tempfile::tempdir().unwrap();
    let fake = Fake {
        signal_after: Some("a-timing-64-c1-cold.json"),
        ..Default::default()
    };
    let first = go(d.path(), fake, false).await;
    assert!(first.out.interrupted.is_some());
    let done_before: Vec<String> = first
        .ck
        .steps
        .iter()
        .filter(|s| s.status.finished() && s.phase_is_arm_or_setup())
        .map(|s| s.evidence.clone())
        .collect();
    let r = go(d.path(), Fake::default(), true).await;
    assert!(r.out.complete, "{:?}", r.out.result.incomplete_reason);
    // The incumbent is stopped again (it was restored), arm `a` is relaunched, and no finished
    // arm step runs again.
    assert_eq!(r.log[0], "incumbent-shutdown.json");
    assert!(r.log.iter().any(|e| e == "relaunch a"));
    for e in &done_before {
        if e != "incumbent-shutdown.json" {
            assert!(!r.log.contains(e), "{e} ran again: {:?}", r.log);
        }
    }
    assert!(r.log.iter().any(|e| e == "a-timing-64-c1-warm.json"));
    assert_eq!(r.ck.invocations, 2);
}

trait PhaseOf {
    fn phase_is_arm_or_setup(&self) -> bool;
}

impl PhaseOf for crate::campaign::checkpoint::StepState {
    fn phase_is_arm_or_setup(&self) -> bool {
        !self.step.starts_with("restor")
    }
}
