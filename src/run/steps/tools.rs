//! `tools`: the tools suite on the ready arm, `batch` requests per variant (plan step
//! parameters; the suite was loaded before any arm started).

use super::gate_step;
use crate::campaign::{Arm, PlanStep};
use crate::evidence::FailureClass;
use crate::run::arm::Live;
use crate::run::context::Cx;
use crate::run::step_outcome::{fail, Done, Outcome};

pub async fn run(cx: &mut Cx, arm: &Arm, s: &PlanStep, live: &Option<Live>) -> Done {
    let Some(check) = cx.tools.clone() else {
        let f = fail(FailureClass::ToolSchema, "no tools suite", &s.evidence);
        return Done::new(Outcome::GateFailed(f), None);
    };
    let (out, ev, _) = gate_step(cx, arm, s, live, check, FailureClass::ToolSchema).await;
    Done::new(out, ev)
}
