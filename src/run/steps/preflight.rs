//! `preflight`: the quick gates (smoke, json, streaming) on the ready arm; any failure ends the
//! arm.

use super::{gate_failure_class, gate_record, preflight_check};
use crate::campaign::{Arm, PlanStep, PreflightGate};
use crate::evidence::FailureClass;
use crate::gates::{self, Check};
use crate::run::arm::{gate_ctx, Live};
use crate::run::context::Cx;
use crate::run::guard::Guarded;
use crate::run::step_outcome::{fail, Done, Outcome};
use serde_json::json;

pub async fn run(
    cx: &mut Cx,
    arm: &Arm,
    s: &PlanStep,
    list: &[PreflightGate],
    live: &Option<Live>,
) -> Done {
    let l = live.as_ref().expect("ready");
    let ctx = gate_ctx(cx, arm, &l.target());
    let checks: Vec<Check> = list.iter().map(|g| preflight_check(g.as_str())).collect();
    let results = match cx
        .guarded(async move { gates::run(&ctx, &checks).await })
        .await
    {
        Guarded::Cancelled => return Done::cancelled(),
        Guarded::Panicked(m) => {
            return Done::new(
                Outcome::Fatal(fail(FailureClass::Crash, m, &s.evidence)),
                None,
            )
        }
        Guarded::Done(r) => r,
    };
    for r in &results {
        let rec = gate_record(cx, r, &s.evidence);
        cx.rec.put_gate(&arm.id, rec);
    }
    let ev = json!({"arm": arm.id, "gates": results});
    let failed: Vec<String> = results
        .iter()
        .filter(|r| !r.passed())
        .map(|r| format!("{}: {}", r.gate, r.reason))
        .collect();
    let out = if l.crashed() {
        Outcome::Fatal(l.crash_failure("preflight", &s.evidence))
    } else if failed.is_empty() {
        Outcome::Ok
    } else {
        // Request errors on every failed gate: the engine did not answer, none answered wrong.
        let request_errors = results
            .iter()
            .filter(|r| !r.passed())
            .all(|r| gate_failure_class(r, FailureClass::Preflight) == FailureClass::Availability);
        let class = if request_errors {
            FailureClass::Availability
        } else {
            FailureClass::Preflight
        };
        Outcome::Fatal(fail(class, failed.join("; "), &s.evidence))
    };
    Done::new(out, Some(ev))
}
