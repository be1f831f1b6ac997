//! The one step interface: `run(cx, step) -> Done`, dispatched over the plan's [`StepKind`] to
//! the step's own file under `steps/`. To add a step kind: a variant in `campaign/plan.rs`
//! (with every parameter it needs), a file in `steps/`, and one arm here.

use super::arm::Live;
use super::context::Cx;
use super::step_outcome::Done;
use super::steps;
use crate::campaign::{PlanStep, StepKind};
use crate::evidence::result::Failure;
use serde_json::Value;

/// What executes the plan's steps for the runner: [`Real`] (the steps under `steps/`), or
/// fakes in the runner's own tests, so its paths (a failing step, a signal between steps or
/// during restoration) are tested without engines.
pub(crate) trait Steps {
    /// A running arm.
    type Live: Send;
    /// Runs plan step `s` (see [`run`]).
    async fn run(
        &mut self,
        cx: &mut Cx,
        s: &PlanStep,
        again: bool,
        live: Option<&mut Option<Self::Live>>,
    ) -> Done;
    /// Launches again an arm that an earlier invocation had started (resume).
    async fn relaunch(&mut self, cx: &mut Cx, arm: &str) -> Result<Self::Live, Failure>;
    /// Stops a running arm outside its plan (after a signal); the evidence of the stop.
    async fn stop(&mut self, cx: &mut Cx, arm: &str, live: Self::Live) -> Value;
}

/// The real steps.
pub(crate) struct Real;

impl Steps for Real {
    type Live = Live;
    async fn run(
        &mut self,
        cx: &mut Cx,
        s: &PlanStep,
        again: bool,
        live: Option<&mut Option<Live>>,
    ) -> Done {
        run(cx, s, again, live).await
    }
    async fn relaunch(&mut self, cx: &mut Cx, arm: &str) -> Result<Live, Failure> {
        steps::lifecycle::relaunch(cx, arm).await
    }
    async fn stop(&mut self, cx: &mut Cx, arm: &str, live: Live) -> Value {
        steps::lifecycle::stop_live(cx, arm, live).await.0
    }
}

/// Runs plan step `s`. `again`: a finished setup step redone by a resumed invocation. `live`:
/// the running arm's slot, for arm steps.
pub async fn run(cx: &mut Cx, s: &PlanStep, again: bool, live: Option<&mut Option<Live>>) -> Done {
    match &s.kind {
        StepKind::StopIncumbent => steps::incumbent::stop(cx, again).await,
        StepKind::GpuIdleBaseline { max_used_mib } => {
            steps::gpu::idle_baseline(cx, s, *max_used_mib, again).await
        }
        StepKind::RestoreIncumbent => steps::restoration::launch(cx).await,
        StepKind::RestorationIdentity { .. } => steps::restoration::identity(cx, s).await,
        StepKind::RestorationPreflight { gates } => {
            let done = steps::restoration::preflight(cx, s, gates).await;
            // The last restoration step: the restoration's verdict from all three.
            steps::restoration::settle(cx);
            done
        }
        kind => {
            let Some(live) = live else {
                unreachable!("arm step {} outside an arm", s.kind.name())
            };
            let arm = cx.arm(s.arm.as_deref().unwrap_or_default());
            match kind {
                StepKind::Launch => steps::lifecycle::launch(cx, &arm, s, live).await,
                StepKind::Ready { .. } => steps::lifecycle::ready(cx, &arm, s, live).await,
                StepKind::Stop => steps::lifecycle::stop(cx, &arm, live).await,
                StepKind::MemoryReserve { reserve_mib } => {
                    steps::gpu::memory_reserve(cx, &arm, s, *reserve_mib).await
                }
                StepKind::Preflight { gates } => {
                    steps::preflight::run(cx, &arm, s, gates, live).await
                }
                StepKind::Timing { .. } => steps::timing::run(cx, &arm, s, live).await,
                StepKind::LongContextTiming { .. } => {
                    steps::timing::long_context(cx, &arm, s, live).await
                }
                StepKind::Capacity(_) => steps::capacity::run(cx, &arm, s, live).await,
                StepKind::Trace(_) => steps::trace::run(cx, &arm, s, live).await,
                StepKind::Retrieval { .. } => steps::retrieval::run(cx, &arm, s, live).await,
                StepKind::Tools { .. } => steps::tools::run(cx, &arm, s, live).await,
                StepKind::Quality { .. } => steps::quality::run(cx, &arm, s, live).await,
                _ => unreachable!("campaign-level steps are matched above"),
            }
        }
    }
}
