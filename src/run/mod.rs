//! The runner: executes a [`Plan`] step by step over one bundle.
//!
//! ```text
//! Plan ──▶ Runner::run: for each plan step (setup → arms → restoration), one loop:
//!            cancelled? ─▶ stop the live arm, skip to restoration
//!            finished? (resume) ─▶ skip      arm failed? ─▶ skip (its stop still runs)
//!            step::run (steps/<kind>.rs) ─▶ Recorder (evidence, result, checkpoint)
//!          ─▶ finish (timing, manifest)
//! ```
//!
//! The loop below is the only place that decides what runs next, handles a signal, counts
//! progress and checkpoints; the restoration steps run on every path out (success, a failed arm,
//! a signal, a panicking step: each step runs in its own task, see [`guard::guarded`]). The runner
//! prints nothing but progress lines; the verdict documents are written by the caller.

mod arm;
pub mod client_node;
pub mod client_step;
mod context;
mod first_records;
pub mod fleet;
mod fleet_drain;
mod fleet_merge;
pub mod fleet_resume;
mod guard;
pub mod journal;
pub mod lanerecord;
pub mod launch;
mod preconditions;
mod progress;
mod recorder;
pub mod recover;
mod reserve;
pub mod session;
pub mod slurm_fleet;
pub mod slurm_lanes;
mod step;
mod step_outcome;
pub mod steps;
pub mod testhook;
pub mod timed;

pub use guard::Cancel;
pub use launch::{lane_spec, launch_spec};
pub use preconditions::{preconditions, PortState};
pub use progress::{quiet, Note, Notify};

use crate::campaign::checkpoint::{InvocationTiming, StepStatus};
use crate::campaign::{Phase, Plan, PlanStep, StepKind};
use crate::evidence::bundle;
use crate::evidence::result::{ArmStatus, CampaignResult, Failure};
use crate::evidence::FailureClass;
use anyhow::Result;
use context::Cx;
use std::path::PathBuf;
use std::time::Instant;
use step::Steps;
use step_outcome::{fail, Outcome as StepOutcome};

pub struct Options {
    /// The bundle directory.
    pub bundle: PathBuf,
    pub resume: bool,
    /// Receives progress and warnings (the runner prints nothing).
    pub notify: Notify,
    pub cancel: Cancel,
    /// Lines for the result's notes, recorded when the bundle opens (e.g. a stale lane lock
    /// taken over).
    pub notes: Vec<String>,
    /// What a resumed run found of a dead invocation on the lane and did about it
    /// ([`recover::leftovers`], run before the preconditions): recorded when the bundle opens.
    pub recovery: Option<recover::Recovery>,
    /// Where the raw engine logs and the held-back space go: beside this path (None: beside
    /// the bundle). A lane folder of a multi-lane bundle keeps them beside the whole bundle.
    pub logs_beside: Option<PathBuf>,
    /// A lane of a multi-lane campaign: asked whether the lane died when an arm's step failed
    /// and when an arm's turn comes (docs/fleet.md "A lane that dies"). None (one lane): never.
    pub lane_probe: Option<LaneProbe>,
}

/// Whether the lane is dead: given the lane fault a step saw (`Cx::lane_fault`, or None),
/// Some(why) drains the lane: its arm's engine is stopped and every arm step left is not run
/// here ([`Outcome::drained`]).
pub type LaneProbe = std::sync::Arc<dyn Fn(Option<&str>) -> Option<String> + Send + Sync>;

/// A lane that died during its run: why, and the arms to run from the start on a live lane.
#[derive(Debug, Clone, PartialEq)]
pub struct Drained {
    pub cause: String,
    /// In plan order: the arm that was running, the arms queued after it, and the partner of
    /// any of them in a speculative pair (the two share a lane).
    pub arms: Vec<String>,
}

pub struct Outcome {
    pub complete: bool,
    /// `interrupted by SIGINT during <arm>/<step>`.
    pub interrupted: Option<String>,
    pub result: CampaignResult,
    pub timing: InvocationTiming,
    /// The lane died and was drained ([`Options::lane_probe`]).
    pub drained: Option<Drained>,
}

/// The arm whose steps are running.
struct ArmRun<L> {
    id: String,
    live: Option<L>,
    /// A step failed so the arm cannot go on: the rest is skipped, its stop still runs.
    fatal: bool,
}

struct Runner<S: Steps> {
    steps: S,
    cx: Cx,
    /// Finished steps when this invocation started.
    done_at_start: usize,
    interrupted: Option<String>,
    /// The bundle could not be written: the rest up to restoration is skipped, the campaign
    /// incomplete (a resume runs the unwritten step again).
    halted: Option<String>,
    arm: Option<ArmRun<S::Live>>,
    t0: Instant,
    probe: Option<LaneProbe>,
    /// The lane died (why): the arm steps left are not run here.
    drained: Option<String>,
}

/// Runs (or resumes) a campaign. Never returns before the incumbent restoration was attempted.
pub async fn run(plan: Plan, opts: Options) -> Result<Outcome> {
    run_with(plan, opts, step::Real).await
}

/// The runner's loop over plan steps executed by `steps`.
async fn run_with<S: Steps>(plan: Plan, opts: Options, steps: S) -> Result<Outcome> {
    let t0 = Instant::now();
    let mut cx = Cx::open(plan, &opts)?;
    for n in &opts.notes {
        let notes = &mut cx.rec.result().notes;
        if !notes.contains(n) {
            notes.push(n.clone());
        }
    }
    if let Some(r) = opts.recovery.as_ref().filter(|r| !r.is_empty()) {
        let by = serde_json::json!({"by": "bakeoff run --resume"});
        recover::record(&mut cx.rec, r, by);
        cx.rec.save();
    }
    let mut r = Runner {
        steps,
        done_at_start: cx.rec.finished_steps(),
        cx,
        interrupted: None,
        halted: None,
        arm: None,
        t0,
        probe: opts.lane_probe.clone(),
        drained: None,
    };
    let steps = r.cx.plan.steps.clone();
    for s in &steps {
        if s.phase != Phase::Arm
            || r.arm
                .as_ref()
                .is_some_and(|a| Some(&a.id) != s.arm.as_ref())
        {
            r.leave_arm();
        }
        if s.phase == Phase::Restoration {
            // A signal during restoration is recorded, but the restoration goes on.
            if r.cx.cancelled() {
                r.mark_interrupted(s);
            }
        } else {
            if r.interrupted.is_some()
                || r.halted.is_some()
                || (s.phase == Phase::Arm && (r.drained.is_some() || r.cx.rec.finished(s.number)))
            {
                continue;
            }
            if r.cx.cancelled() {
                r.interrupt(s).await;
                continue;
            }
        }
        r.execute(s).await;
    }
    if r.interrupted.is_none() && r.cx.cancelled() {
        // The signal came during the last step (restoration goes on regardless): one rule for
        // every signal before the bundle is sealed, exit 130 and an interrupted bundle.
        if let Some(last) = steps.last() {
            r.mark_interrupted(last);
        }
    }
    r.leave_arm();
    r.finish()
}

impl<S: Steps> Runner<S> {
    /// Runs one step unless it is finished (resume) or its arm already failed, and records it.
    async fn execute(&mut self, s: &PlanStep) {
        let again = self.cx.rec.finished(s.number);
        match s.phase {
            Phase::Setup if again && !s.kind.reruns_on_resume() => return,
            Phase::Arm if again => return,
            Phase::Arm => {
                if !self.enter_arm(s).await {
                    return;
                }
                if self.arm.as_ref().is_some_and(|a| a.fatal) && s.kind != StepKind::Stop {
                    self.cx.rec.finish_step(s, StepStatus::Skipped, None);
                    return;
                }
            }
            _ => {}
        }
        self.note(&progress::step_label(&self.cx, s));
        let t = Instant::now();
        let live = self.arm.as_mut().map(|a| &mut a.live);
        let done = guard::catch_panic(self.steps.run(&mut self.cx, s, again, live))
            .await
            .unwrap_or_else(|m| {
                step_outcome::Done::new(
                    StepOutcome::Fatal(fail(FailureClass::Crash, m, &s.evidence)),
                    None,
                )
            });
        let wall_ms = t.elapsed().as_secs_f64() * 1e3;
        let failed = matches!(
            done.outcome,
            StepOutcome::GateFailed(_) | StepOutcome::Fatal(_)
        );
        let file = done.file.clone().unwrap_or_else(|| s.evidence.clone());
        if let Some(ev) = &done.evidence {
            self.cx.rec.write_json_or_warn(&file, ev);
        }
        if let Some(e) = self.cx.rec.take_write_failure() {
            // Evidence not on disk: the step is not done; straight to restoration.
            self.unwritable(s, &file, e, wall_ms).await;
            return;
        }
        if again {
            // A setup step redone by a resumed invocation: its own file, outside the plan.
            let evidence = done.evidence.is_some().then_some(file.as_str());
            self.cx
                .rec
                .extra(s.arm.as_deref(), s.kind.name(), evidence, wall_ms);
            self.cx.rec.save();
            return;
        }
        match done.outcome {
            StepOutcome::Cancelled => {
                self.mark_interrupted(s);
                self.cx.rec.set_interrupted(s, wall_ms);
                self.stop_interrupted_arm().await;
            }
            StepOutcome::Halt(why) => self.halt(s, why, None, wall_ms).await,
            StepOutcome::Ok => self.cx.rec.finish_step(s, StepStatus::Done, Some(wall_ms)),
            StepOutcome::GateFailed(f) => {
                self.set_failure(s, f, false);
                self.cx.rec.finish_step(s, StepStatus::Done, Some(wall_ms));
            }
            StepOutcome::Fatal(f) => {
                self.set_failure(s, f, true);
                self.cx
                    .rec
                    .finish_step(s, StepStatus::Failed, Some(wall_ms));
            }
        }
        if let Some(e) = self.cx.rec.take_write_failure() {
            // The result or the checkpoint could not be saved.
            self.unwritable(s, &file, e, wall_ms).await;
            return;
        }
        if failed && s.phase == Phase::Arm {
            let seen = self.cx.lane_fault.take();
            if let Some(cause) = self.lane_dead(seen.as_deref()) {
                self.drain(s, cause).await;
            }
        }
    }

    /// The lane's probe's answer (None without one: a one-lane run is never drained).
    fn lane_dead(&self, seen: Option<&str>) -> Option<String> {
        self.probe.as_ref().and_then(|p| p(seen))
    }

    /// The lane died (`cause`): the arm of `s` is stopped (its engine, if one runs) and marked
    /// moved; every arm step left is not run here (its arms go to a live lane, docs/fleet.md).
    /// What the arm measured here stays in the lane's folder.
    async fn drain(&mut self, s: &PlanStep, cause: String) {
        let id = s.arm.clone().unwrap_or_default();
        self.cx.rec.warn(&format!(
            "the lane is drained ({cause}): arm {id} and the arms queued after it move to a live lane"
        ));
        if self.arm.is_none() {
            self.arm = Some(ArmRun {
                id: id.clone(),
                live: None,
                fatal: false,
            });
        }
        let here = self
            .cx
            .rec
            .arm_result(&id)
            .failure
            .as_ref()
            .map(|f| format!("; what failed here: {}", f.detail))
            .unwrap_or_default();
        self.stop_early("stop (lane drained)").await;
        let detail = format!("moved to a live lane: this lane was drained ({cause}){here}");
        self.cx.rec.arm_result(&id).failure =
            Some(fail(FailureClass::Interrupted, detail, &s.evidence));
        self.cx.rec.save();
        self.drained = Some(cause);
    }

    /// What a drained lane hands on: its cause and the arms whose steps did not all run here
    /// (never the control's copy: every lane has its own), with their speculative partners.
    fn moved_arms(&self) -> Option<Drained> {
        let cause = self.drained.clone()?;
        let p = &self.cx.plan;
        let c = &p.campaign;
        let unfinished = |a: &str| {
            p.steps.iter().any(|s| {
                s.phase == Phase::Arm
                    && s.arm.as_deref() == Some(a)
                    && !self.cx.rec.finished(s.number)
            })
        };
        let mut arms: Vec<String> = p
            .arm_ids()
            .into_iter()
            .filter(|a| !crate::campaign::lane_plan::is_control_copy(a) && unfinished(a))
            .map(str::to_string)
            .collect();
        let partner = |a: &str| {
            c.arms.iter().find_map(|x| match &x.speculative {
                Some(sp) if x.id == a => Some(sp.control.clone()),
                Some(sp) if sp.control == a => Some(x.id.clone()),
                _ => None,
            })
        };
        let with: Vec<String> = arms.iter().filter_map(|a| partner(a)).collect();
        for b in with {
            if !arms.contains(&b) {
                arms.push(b);
            }
        }
        let order: Vec<&str> = c.arms.iter().map(|a| a.id.as_str()).collect();
        arms.sort_by_key(|a| order.iter().position(|o| o == a));
        Some(Drained { cause, arms })
    }

    /// A step whose evidence (or the result, or the checkpoint) could not be written: it is not
    /// done (it runs again on resume), its arm is stopped and marked interrupted with the
    /// failure `evidence-unwritable`, and the run goes straight to restoration. A restoration
    /// step goes on (the incumbent comes back regardless); the campaign is incomplete.
    async fn unwritable(&mut self, s: &PlanStep, file: &str, e: String, wall_ms: f64) {
        let detail = format!("{} evidence could not be written: {e}", s.kind.name());
        self.cx.rec.warn(&format!(
            "{detail}; the campaign will be incomplete (free the disk, then `bakeoff run --resume {}`)",
            self.cx.rec.dir().display()
        ));
        let f = fail(FailureClass::EvidenceUnwritable, detail.clone(), file);
        self.halt(s, detail, Some(f), wall_ms).await;
        let _ = self.cx.rec.take_write_failure();
    }

    /// Stops the run at `s` (see [`StepOutcome::Halt`]): the step is not done, its arm (with
    /// `failure`, if any) stopped and marked interrupted, `detail` the campaign's incomplete
    /// reason; the remaining arm steps are skipped, the restoration runs. A restoration step goes
    /// on (the incumbent comes back regardless).
    async fn halt(&mut self, s: &PlanStep, detail: String, failure: Option<Failure>, wall_ms: f64) {
        if self.halted.is_none() {
            self.halted = Some(format!("stopped: {detail}"));
        }
        if s.phase == Phase::Restoration {
            return;
        }
        self.cx.rec.set_interrupted(s, wall_ms);
        if let (Phase::Arm, Some(id), Some(f)) = (s.phase, s.arm.as_deref(), failure) {
            self.cx.rec.arm_result(id).failure = Some(f);
        }
        self.cx.rec.save();
        self.stop_interrupted_arm().await;
    }

    /// Opens the arm of `s` when it is the arm's first step to run. An arm resumed half way
    /// (launched by an earlier invocation) is launched again first. False: the step must not run.
    async fn enter_arm(&mut self, s: &PlanStep) -> bool {
        let id = s.arm.clone().unwrap_or_default();
        if self.arm.as_ref().is_some_and(|a| a.id == id) {
            return true;
        }
        // Test-only: the arm's turn came, nothing of it launched.
        testhook::pause_for("arm-start", &id).await;
        if let Some(cause) = self.lane_dead(None) {
            // The lane died between arms: this arm and the rest go elsewhere.
            self.drain(s, cause).await;
            return false;
        }
        let fatal = self.cx.rec.arm_result(&id).status == ArmStatus::Failed;
        let a = self.cx.rec.arm_result(&id);
        if a.failure
            .as_ref()
            .is_some_and(|f| f.class == FailureClass::EvidenceUnwritable)
        {
            // An earlier invocation could not write this arm's evidence: the step runs again.
            a.failure = None;
        }
        self.arm = Some(ArmRun {
            id: id.clone(),
            live: None,
            fatal,
        });
        let started_before = self.cx.plan.steps.iter().any(|p| {
            p.arm.as_deref() == Some(id.as_str())
                && p.phase == Phase::Arm
                && matches!(p.kind, StepKind::Launch | StepKind::Ready { .. })
                && self.cx.rec.finished(p.number)
        });
        if !started_before || fatal {
            return true;
        }
        let label = format!("{}: relaunch", progress::arm_label(&self.cx, &id));
        self.note(&label);
        match self.steps.relaunch(&mut self.cx, &id).await {
            Ok(live) => {
                self.arm.as_mut().expect("opened above").live = Some(live);
                true
            }
            Err(f) if f.class == FailureClass::Interrupted => {
                // The relaunch stopped what it started; the arm stays interrupted.
                self.mark_interrupted(s);
                self.arm = None;
                self.cx.rec.arm_result(&id).status = ArmStatus::Interrupted;
                self.cx.rec.save();
                false
            }
            Err(f) => {
                self.set_failure(s, f, true);
                true
            }
        }
    }

    /// Closes the current arm: its end state, and a live engine dropped (endpoint arms).
    fn leave_arm(&mut self) {
        let Some(a) = self.arm.take() else { return };
        self.cx.rec.arm_result(&a.id).status = if a.fatal {
            ArmStatus::Failed
        } else {
            ArmStatus::Completed
        };
        self.cx.rec.save();
    }

    fn set_failure(&mut self, s: &PlanStep, f: Failure, fatal: bool) {
        if fatal {
            if let Some(a) = self.arm.as_mut() {
                a.fatal = true;
            }
        }
        let Some(id) = s.arm.as_deref().filter(|_| s.phase == Phase::Arm) else {
            return;
        };
        let a = self.cx.rec.arm_result(id);
        if fatal {
            a.status = ArmStatus::Failed;
            // The fatal failure explains why the arm stopped, over an earlier gate failure.
            a.failure = Some(f);
        } else if a.failure.is_none() {
            a.failure = Some(f);
        }
    }

    /// A signal arrived before `s`: the live arm is stopped; the rest up to restoration skipped.
    async fn interrupt(&mut self, s: &PlanStep) {
        self.mark_interrupted(s);
        if let (Phase::Arm, None, Some(id)) = (s.phase, &self.arm, &s.arm) {
            self.arm = Some(ArmRun {
                id: id.clone(),
                live: None,
                fatal: false,
            });
        }
        self.stop_interrupted_arm().await;
    }

    fn mark_interrupted(&mut self, s: &PlanStep) {
        if self.interrupted.is_none() {
            let sig = self.cx.signal().unwrap_or("a signal");
            let at = match s.phase {
                Phase::Setup => "setup",
                Phase::Restoration => "restoration",
                Phase::Arm => s.arm.as_deref().unwrap_or_default(),
            };
            self.interrupted = Some(format!(
                "interrupted by {sig} during {at}/{}",
                s.kind.name()
            ));
        }
    }

    async fn stop_interrupted_arm(&mut self) {
        self.stop_early("stop (interrupted)").await
    }

    /// Stops the running arm before its steps ended (a signal, a drained lane; `label` says
    /// which in the checkpoint) and records it as interrupted.
    async fn stop_early(&mut self, label: &str) {
        let Some(mut a) = self.arm.take() else { return };
        if let Some(live) = a.live.take() {
            let t = Instant::now();
            let ev = self.steps.stop(&mut self.cx, &a.id, live).await;
            let name = bundle::stop_interrupted(&a.id, self.cx.rec.invocation());
            let written = self.cx.rec.write_json_or_warn(&name, &ev);
            let w = t.elapsed().as_secs_f64() * 1e3;
            let evidence = written.then_some(name.as_str());
            self.cx.rec.extra(Some(&a.id), label, evidence, w);
            if written {
                self.cx.rec.add_evidence(&a.id, &name);
            }
        }
        self.cx.rec.arm_result(&a.id).status = ArmStatus::Interrupted;
        self.cx.rec.save();
    }

    fn note(&self, what: &str) {
        let done = self.cx.rec.finished_steps();
        (self.cx.notify)(Note::Step {
            done,
            total: self.cx.plan.steps.len(),
            this_run: done.saturating_sub(self.done_at_start),
            what,
        });
    }

    fn finish(mut self) -> Result<Outcome> {
        (self.cx.notify)(Note::Finished);
        let total_ms = self.t0.elapsed().as_secs_f64() * 1e3;
        let drained = self.drained.as_ref().map(|c| format!("drained: {c}"));
        let reason = self
            .interrupted
            .as_deref()
            .or(self.halted.as_deref())
            .or(drained.as_deref());
        let moved = self.moved_arms();
        let restores = self.cx.plan.restores();
        let (mut complete, timing) =
            self.cx
                .rec
                .close(reason, total_ms, self.cx.lane_has_gpus(), restores);
        // A disk that was full for a moment (another process's log, a filler) may have refused
        // the final result or the manifest: try again for a few seconds, so that the bundle is
        // sealed and says why it is incomplete, rather than being left with the in-run result.
        let mut sealed = Ok(());
        let mut unsaved = self.cx.rec.take_write_failure().is_some();
        for wait_ms in [0u64, 250, 500, 1000, 2000] {
            // A full disk: first the space held back when the bundle opened, then waits.
            if wait_ms > 0 && !self.cx.rec.release_reserve() {
                std::thread::sleep(std::time::Duration::from_millis(wait_ms));
            }
            if unsaved {
                self.cx.rec.save();
                unsaved = self.cx.rec.take_write_failure().is_some();
                if unsaved {
                    sealed = Err(anyhow::anyhow!(
                        "campaign-result.json or checkpoint.json could not be written"
                    ));
                    continue;
                }
            }
            sealed = crate::evidence::manifest::write(self.cx.rec.dir()).map(|_| ());
            if sealed.is_ok() {
                break;
            }
        }
        if let Err(e) = sealed {
            // Still an outcome: the caller reports the arms and the restoration.
            let why = format!("the manifest could not be written: {e:#}");
            self.cx.rec.warn(&why);
            complete = false;
            let r = self.cx.rec.result();
            r.complete = false;
            r.incomplete_reason = Some(why);
            self.cx.rec.save();
        }
        self.cx.rec.release_reserve();
        Ok(Outcome {
            complete,
            interrupted: self.interrupted,
            result: self.cx.rec.into_result(),
            timing,
            drained: moved,
        })
    }
}

#[cfg(test)]
mod tests;
