//! What every step is given: [`Cx`], the run's shared state (the plan, the lane, the recorder,
//! the cancellation watch, the loaded suites) and what steps hand to later steps.

use super::guard::{self, Cancel, Guarded};
use super::launch;
use super::preconditions;
use super::recorder::Recorder;
use super::Options;
use crate::campaign::{Arm, Campaign, Mask, Plan};
use crate::evidence::result::Restoration;
use crate::evidence::GateName;
use crate::gates::Check;
use crate::lane::{LaneSpec, ReadyFacts};
use crate::telemetry::gpu;
use anyhow::Result;

/// What the restoration steps learn from each other (launch → identity → preflight).
#[derive(Default)]
pub struct RestoreState {
    pub record: Restoration,
    pub ready: Option<ReadyFacts>,
    pub pid: Option<u32>,
    pub failed_steps: Vec<String>,
}

/// The run's shared state: the plan, the lane, the recorder and what steps hand to later steps.
pub struct Cx {
    pub plan: Plan,
    pub lane: LaneSpec,
    pub mask: Mask,
    pub rec: Recorder,
    pub cancel: Cancel,
    /// The idle GPU baseline, for the GPU release check after each arm's stop.
    pub gpu_baseline: Option<gpu::GpuProbe>,
    pub tools: Option<Check>,
    pub quality: Option<Check>,
    pub restore: RestoreState,
    pub notify: super::Notify,
    /// A fault of the lane itself that a step saw (the lane port taken by something bakeoff did
    /// not start): read by the runner's lane check after the step (docs/fleet.md "A lane that
    /// dies").
    pub lane_fault: Option<String>,
}

impl Cx {
    /// Opens the bundle (new, or resumed from its checkpoint) and loads the suites.
    pub fn open(plan: Plan, opts: &Options) -> Result<Cx> {
        let c = &plan.campaign;
        let mask = Mask::from_process_env(c);
        let (tools, quality) = preconditions::suites(&plan).map_err(|e| anyhow::anyhow!(e))?;
        let rec = Recorder::open(
            &plan,
            opts.bundle.clone(),
            opts.logs_beside
                .clone()
                .unwrap_or_else(|| opts.bundle.clone()),
            mask.clone(),
            opts.resume,
            opts.notify.clone(),
        )?;
        Ok(Cx {
            lane: launch::lane_spec(c),
            mask,
            rec,
            cancel: opts.cancel.clone(),
            gpu_baseline: None,
            tools,
            quality,
            restore: RestoreState::default(),
            notify: opts.notify.clone(),
            lane_fault: None,
            plan,
        })
    }

    pub fn c(&self) -> &Campaign {
        &self.plan.campaign
    }

    pub fn arm(&self, id: &str) -> Arm {
        self.c()
            .arm(id)
            .cloned()
            .expect("every plan step names an arm of its campaign")
    }

    pub fn incumbent(&self) -> Arm {
        self.c().incumbent().clone()
    }

    pub fn lane_has_gpus(&self) -> bool {
        !self.c().lane.gpus.is_empty()
    }

    pub fn required(&self, gate: GateName) -> bool {
        self.c().policy.required_gates.contains(&gate)
    }

    pub fn cancelled(&self) -> bool {
        self.cancel.borrow().is_some()
    }

    pub fn signal(&self) -> Option<&'static str> {
        *self.cancel.borrow()
    }

    /// Runs `fut` in its own task, raced against the cancellation watch.
    pub async fn guarded<T: Send + 'static>(
        &self,
        fut: impl std::future::Future<Output = T> + Send + 'static,
    ) -> Guarded<T> {
        guard::guarded(&self.cancel, fut).await
    }
}
