//! One file per step kind (see run/step.rs for the dispatch), and what the gate steps share.

pub mod capacity;
pub mod gpu;
pub mod incumbent;
pub mod lifecycle;
pub mod preflight;
pub mod quality;
pub mod restoration;
pub mod retrieval;
pub mod timing;
pub mod timing_work;
pub mod tools;
pub mod trace;

use super::arm::{gate_ctx, Live};
use super::context::Cx;
use super::guard::Guarded;
use super::step_outcome::{fail, Outcome};
use crate::campaign::{Arm, PlanStep};
use crate::evidence::result::{GateRecord, RequestCounts};
use crate::evidence::FailureClass;
use crate::gates::{self, Check, GateResult};
use serde_json::Value;

/// The gate record of result `r`, whose evidence is `evidence`.
pub fn gate_record(cx: &Cx, r: &GateResult, evidence: &str) -> GateRecord {
    GateRecord {
        name: r.gate,
        status: r.status.into(),
        passed: Some(r.passed),
        total: Some(r.total),
        detail: r.reason.clone(),
        required: cx.required(r.gate),
        evidence: Some(evidence.into()),
        requests: request_counts(r),
    }
}

/// The requests gate `r` sent and those that failed as requests (an error status, a connection
/// error, a timeout, a broken stream: `exchange.response.error`), not as wrong answers. None when
/// it sent none.
pub fn request_counts(r: &GateResult) -> Option<RequestCounts> {
    let mut c = RequestCounts::default();
    for x in r.observations.iter().flat_map(|o| &o.exchanges) {
        c.sent += 1;
        if let Some(e) = &x.response.error {
            c.failed += 1;
            *c.failures_by_class
                .entry(e.class.as_str().to_string())
                .or_default() += 1;
        }
    }
    let mut failed = r.observations.iter().filter(|o| !o.passed()).peekable();
    c.failures_are_request_errors =
        failed.peek().is_some() && failed.all(|o| o.class.as_deref() == Some("request-error"));
    (c.sent > 0).then_some(c)
}

/// The class a failed gate gives its arm: `class`, or `availability` when every failed
/// observation failed on a request error (the engine did not answer; no answer was wrong).
pub fn gate_failure_class(r: &GateResult, class: FailureClass) -> FailureClass {
    if request_counts(r).is_some_and(|c| c.failures_are_request_errors) {
        FailureClass::Availability
    } else {
        class
    }
}

/// Runs one gate check on the live arm (cancellable, a panic caught) and records its gate.
/// A failed gate fails with `class`; a process that died meanwhile is a `crash`.
pub async fn gate_step(
    cx: &mut Cx,
    arm: &Arm,
    s: &PlanStep,
    live: &Option<Live>,
    check: Check,
    class: FailureClass,
) -> (Outcome, Option<Value>, Option<GateResult>) {
    let ev_name = s.evidence.clone();
    let l = live.as_ref().expect("ready");
    let ctx = gate_ctx(cx, arm, &l.target());
    match cx
        .guarded(async move { gates::run_one(&ctx, &check).await })
        .await
    {
        Guarded::Cancelled => (Outcome::Cancelled, None, None),
        Guarded::Panicked(m) => (
            Outcome::Fatal(fail(FailureClass::Crash, m, &ev_name)),
            None,
            None,
        ),
        Guarded::Done(r) => {
            let rec = gate_record(cx, &r, &ev_name);
            cx.rec.put_gate(&arm.id, rec);
            let ev = serde_json::to_value(&r).unwrap_or(Value::Null);
            let out = if l.crashed() {
                Outcome::Fatal(l.crash_failure(s.kind.name(), &ev_name))
            } else if r.passed() {
                Outcome::Ok
            } else {
                Outcome::GateFailed(fail(
                    gate_failure_class(&r, class),
                    format!("{}: {}", r.gate, r.reason),
                    &ev_name,
                ))
            };
            (out, Some(ev), Some(r))
        }
    }
}

/// The preflight check of a gate name.
pub fn preflight_check(name: &str) -> Check {
    match name {
        "json" => Check::Json,
        "streaming" => Check::Streaming,
        _ => Check::Smoke,
    }
}
