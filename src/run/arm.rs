//! An arm that is running ([`Live`]) and what every step that talks to it shares: its gate
//! context, its request body, the crash check.

use super::context::Cx;
use super::step_outcome::fail;
use crate::campaign::Arm;
use crate::client::Target;
use crate::evidence::result::Failure;
use crate::evidence::FailureClass;
use crate::gates::GateContext;
use crate::lane::{LaunchSpec, ReadyFacts, Running};
use crate::workload::prompt::MatchedPrompt;
use crate::workload::request::BodySpec;
use serde_json::json;
use std::sync::Arc;

/// An arm that is running.
pub struct Live {
    pub running: Running,
    pub spec: LaunchSpec,
    pub ready: Option<ReadyFacts>,
    /// The matched prompt, sized once per launch by the first timing step.
    pub prompt: Option<Arc<MatchedPrompt>>,
    /// The workload source beside it (dataset items, conversations, ...), sized with it.
    pub work: Option<crate::run::timed::StepWork>,
    /// This launch's masked log copy in the bundle.
    pub log_name: String,
    /// Its entry in the launch journal.
    pub journal: Option<usize>,
}

impl Live {
    /// Did the arm's process die? (process and reference arms; a Slurm arm: its job ended)
    pub fn crashed(&self) -> bool {
        self.running.crashed()
    }

    pub fn crash_failure(&self, step: &str, evidence: &str) -> Failure {
        let tail = self.running.log_tail(3).join(" | ");
        fail(
            FailureClass::Crash,
            format!("the arm's process exited during {step}; last log lines: {tail}"),
            evidence,
        )
    }

    pub fn target(&self) -> Target {
        self.running.target.clone()
    }
}

/// The gate context of `arm` at `target`: the run's sampling, the arm's key and context.
pub fn gate_ctx(cx: &Cx, arm: &Arm, target: &Target) -> GateContext {
    let s = &cx.plan.request.sampling;
    let mut g = GateContext::new(target.clone(), arm.served_model.clone());
    g.api_key = api_key(arm);
    g.temperature = s.temperature;
    g.seed = s.seed;
    if let Some(tp) = s.top_p {
        g.extra_body.insert("top_p".into(), json!(tp));
    }
    g.context_tokens = Some(arm.served_context);
    g
}

/// The arm's API key, read from the variable the campaign names (never recorded).
pub fn api_key(arm: &Arm) -> Option<String> {
    arm.api_key_env.as_ref().and_then(|k| std::env::var(k).ok())
}

/// The request body every timed request of `arm` shares (the prompt is added per request).
pub fn request_base(
    cx: &Cx,
    arm: &Arm,
    max_tokens: u32,
    ignore_eos: bool,
) -> serde_json::Map<String, serde_json::Value> {
    let s = &cx.plan.request.sampling;
    BodySpec {
        model: &arm.served_model,
        max_tokens: max_tokens.into(),
        temperature: Some(s.temperature),
        top_p: s.top_p,
        seed: Some(s.seed),
        ignore_eos,
        stream: Some(true),
    }
    .build()
}
