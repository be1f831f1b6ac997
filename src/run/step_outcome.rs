//! What a step hands back to the runner: how it ended ([`Outcome`]) and the evidence to write
//! ([`Done`]).

use crate::evidence::result::Failure;
use crate::evidence::FailureClass;
use serde_json::Value;

/// How a step ended.
pub enum Outcome {
    Ok,
    /// The step ran; its gate failed (the arm goes on).
    GateFailed(Failure),
    /// The arm cannot go on: the remaining steps are skipped and it is stopped.
    Fatal(Failure),
    /// A signal arrived: the step was cancelled.
    Cancelled,
    /// The run cannot go on as planned through no fault of the arm (a file the campaign names
    /// changed under it): the step is not done (it runs again on resume), the arm is stopped and
    /// marked interrupted, and the run goes straight to restoration; the words say what changed
    /// and the fix.
    Halt(String),
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
