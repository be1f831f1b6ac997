//! What the runner tells whoever shows its progress. The runner prints nothing itself: the CLI
//! (cli/run.rs) turns these notes into a progress bar or lines, and warnings into stderr lines.

use super::context::Cx;
use crate::campaign::{Phase, PlanStep, StepKind};
use std::sync::Arc;

/// One thing worth showing.
pub enum Note<'a> {
    /// Work is starting: `done` of `total` plan steps are finished (this and earlier
    /// invocations), `this_run` of them by this invocation.
    Step {
        done: usize,
        total: usize,
        this_run: usize,
        what: &'a str,
    },
    /// Something went wrong that does not stop the run (an evidence write that failed).
    Warning(&'a str),
    /// The last step ran.
    Finished,
}

/// The receiver of [`Note`]s (the CLI's printer; tests may collect them).
pub type Notify = Arc<dyn Fn(Note<'_>) + Send + Sync>;

/// A receiver that shows nothing.
pub fn quiet() -> Notify {
    Arc::new(|_| {})
}

/// `arm 2/3 fast`: the arm's place in the campaign.
pub fn arm_label(cx: &Cx, id: &str) -> String {
    let arms = &cx.c().arms;
    let i = arms.iter().position(|a| a.id == id).unwrap_or(0);
    format!("arm {}/{} {id}", i + 1, arms.len())
}

/// What plan step `s` does, in words.
pub fn step_label(cx: &Cx, s: &PlanStep) -> String {
    match s.phase {
        Phase::Setup => match s.kind {
            StepKind::StopIncumbent => "stop the incumbent".to_string(),
            _ => format!("setup: {}", s.kind.name()),
        },
        Phase::Restoration => format!("restoration: {}", s.kind.name()),
        Phase::Arm => format!(
            "{}: {}{}",
            arm_label(cx, s.arm.as_deref().unwrap_or_default()),
            s.kind.name(),
            s.shape
                .as_deref()
                .map(|x| format!(" {x}"))
                .unwrap_or_default()
        ),
    }
}
