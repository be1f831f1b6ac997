//! `retrieval`: needles at the arm's long-context target (exact prompt length); records the
//! arm's long-context figures from the retrieval answers (the long-context timing step that
//! follows replaces the decode speed and E2E with a timed full-length answer).

use super::gate_step;
use crate::campaign::{Arm, PlanStep, StepKind};
use crate::evidence::result::LongContextRecord;
use crate::evidence::FailureClass;
use crate::gates::{self, Check};
use crate::run::arm::Live;
use crate::run::context::Cx;
use crate::run::step_outcome::{fail, Done, Outcome};

pub async fn run(cx: &mut Cx, arm: &Arm, s: &PlanStep, live: &Option<Live>) -> Done {
    let StepKind::Retrieval {
        target_tokens,
        needles,
        depths,
        max_tokens,
        ..
    } = &s.kind
    else {
        unreachable!("dispatched on Retrieval")
    };
    let check = match gates::RetrievalCheck::new(
        *target_tokens,
        *needles as usize,
        depths.clone(),
        cx.plan.request.sampling.seed,
        *max_tokens as u64,
        arm.tokenizer.clone(),
    ) {
        Ok(c) => Check::Retrieval(c),
        Err(e) => {
            let f = fail(FailureClass::Retrieval, e, &s.evidence);
            return Done::new(Outcome::GateFailed(f), None);
        }
    };
    let (out, ev, r) = gate_step(cx, arm, s, live, check, FailureClass::Retrieval).await;
    if let Some(r) = r {
        let actual: Vec<u64> = r.details["actual_prompt_tokens"]
            .as_array()
            .map(|a| a.iter().filter_map(|x| x.as_u64()).collect())
            .unwrap_or_default();
        let (mut dec, mut e2e) = (Vec::new(), Vec::new());
        for o in &r.observations {
            for x in &o.exchanges {
                let ct = x.response.usage.as_ref().and_then(|u| u.completion_tokens);
                if let (Some(e), Some(ttfo), Some(ct)) = (x.latency.e2e_ms, x.latency.ttfo_ms, ct) {
                    if ct > 1 && e > ttfo {
                        dec.push((ct - 1) as f64 / ((e - ttfo) / 1e3));
                    }
                }
                if let Some(e) = x.latency.e2e_ms {
                    e2e.push(e);
                }
            }
        }
        let mean = |v: &[f64]| (!v.is_empty()).then(|| v.iter().sum::<f64>() / v.len() as f64);
        cx.rec.arm_result(&arm.id).long_context = Some(LongContextRecord {
            evidence: s.evidence.clone(),
            target_tokens: *target_tokens,
            actual_prompt_tokens: actual,
            passed: r.passed(),
            decode_tok_s: mean(&dec),
            e2e_ms: mean(&e2e),
            timing: None,
        });
    }
    Done::new(out, ev)
}
