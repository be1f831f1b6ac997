//! What every step is given ([`Cx`]) and what it hands back ([`Done`]), and the guard that runs
//! a step's engine work in its own task, raced against the cancellation watch.

use super::recorder::Recorder;
use super::setup;
use super::Options;
use crate::campaign::{Arm, Campaign, Mask, Plan};
use crate::evidence::result::{Failure, Restoration};
use crate::evidence::{FailureClass, GateName};
use crate::gates::Check;
use crate::lane::{LaneSpec, ReadyFacts};
use crate::telemetry::gpu;
use anyhow::Result;
use serde_json::Value;
use tokio::sync::watch;

/// The first signal's name, once one arrived.
pub type Cancel = watch::Receiver<Option<&'static str>>;

/// How a step ended.
pub enum Outcome {
    Ok,
    /// The step ran; its gate failed (the arm goes on).
    GateFailed(Failure),
    /// The arm cannot go on: the remaining steps are skipped and it is stopped.
    Fatal(Failure),
    /// A signal arrived: the step was cancelled.
    Cancelled,
}

/// A step's outcome and the evidence to write.
pub struct Done {
    pub outcome: Outcome,
    pub evidence: Option<Value>,
    /// The file the evidence goes to when not the plan step's own (a setup step redone).
    pub file: Option<String>,
}

impl Done {
    pub fn new(outcome: Outcome, evidence: Option<Value>) -> Done {
        Done {
            outcome,
            evidence,
            file: None,
        }
    }
    pub fn ok(evidence: Value) -> Done {
        Done::new(Outcome::Ok, Some(evidence))
    }
    pub fn cancelled() -> Done {
        Done::new(Outcome::Cancelled, None)
    }
}

pub fn fail(class: FailureClass, detail: impl Into<String>, evidence: &str) -> Failure {
    Failure {
        class,
        detail: detail.into(),
        evidence: Some(evidence.into()),
    }
}

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
}

impl Cx {
    /// Opens the bundle (new, or resumed from its checkpoint) and loads the suites.
    pub fn open(plan: Plan, opts: &Options) -> Result<Cx> {
        let c = &plan.campaign;
        let mask = Mask::from_process_env(c);
        let (tools, quality) = setup::suites(&plan).map_err(|e| anyhow::anyhow!(e))?;
        let rec = Recorder::open(
            &plan,
            opts.bundle.clone(),
            mask.clone(),
            opts.resume,
            opts.notify.clone(),
        )?;
        Ok(Cx {
            lane: setup::lane_spec(c),
            mask,
            rec,
            cancel: opts.cancel.clone(),
            gpu_baseline: None,
            tools,
            quality,
            restore: RestoreState::default(),
            notify: opts.notify.clone(),
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
        guarded(&self.cancel, fut).await
    }
}

pub enum Guarded<T> {
    Done(T),
    Panicked(String),
    Cancelled,
}

pub async fn wait_cancel(mut rx: Cancel) {
    loop {
        if rx.borrow_and_update().is_some() {
            return;
        }
        if rx.changed().await.is_err() {
            std::future::pending::<()>().await;
        }
    }
}

/// Runs `fut` in its own task, raced against the cancellation watch: a cancelled step is
/// aborted, a panicking one becomes a message (the runner records it as a `crash`).
pub async fn guarded<T: Send + 'static>(
    cancel: &Cancel,
    fut: impl std::future::Future<Output = T> + Send + 'static,
) -> Guarded<T> {
    if cancel.borrow().is_some() {
        return Guarded::Cancelled;
    }
    let mut h = tokio::spawn(fut);
    tokio::select! {
        r = &mut h => match r {
            Ok(v) => Guarded::Done(v),
            Err(e) if e.is_panic() => Guarded::Panicked(panic_message(e.into_panic())),
            Err(e) => Guarded::Panicked(format!("the step's task failed: {e}")),
        },
        _ = wait_cancel(cancel.clone()) => {
            h.abort();
            Guarded::Cancelled
        }
    }
}

/// Polls `fut`, turning a panic into its message: a step that panics outside its guarded task
/// fails (class `crash`) instead of ending the run before the restoration.
pub async fn catch_panic<F: std::future::Future>(fut: F) -> Result<F::Output, String> {
    let mut fut = std::pin::pin!(fut);
    std::future::poll_fn(move |ctx| {
        match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| fut.as_mut().poll(ctx))) {
            Ok(std::task::Poll::Ready(v)) => std::task::Poll::Ready(Ok(v)),
            Ok(std::task::Poll::Pending) => std::task::Poll::Pending,
            Err(p) => std::task::Poll::Ready(Err(panic_message(p))),
        }
    })
    .await
}

fn panic_message(p: Box<dyn std::any::Any + Send>) -> String {
    let msg = p
        .downcast_ref::<String>()
        .cloned()
        .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
        .unwrap_or_else(|| "a panic".into());
    format!("the step panicked: {msg}")
}
