//! The bake's gate canary: a small run of the campaign's tools and quality gates on the winner
//! every `canary_every`-th interval, beside the bake's traffic. A winner whose tool calls or
//! answers break in service fails the interval with the gate's own reason, as a slow one does.
//!
//! Small: the tools gate sends one request per suite case and variant (all at once), the quality
//! gate one attempt per item. The retrieval gate is not part of it (a long-context prompt per
//! needle is no canary).

use crate::campaign::{Arm, Campaign};
use crate::client::Target;
use crate::gates::{self, Check, GateContext};
use serde_json::{json, Value};

/// The gate context of `arm` at `target`: the campaign's sampling, the arm's key and context.
pub fn context(c: &Campaign, arm: &Arm, target: &Target) -> GateContext {
    let s = &c.workload.sampling;
    let mut g = GateContext::new(target.clone(), arm.served_model.clone());
    g.api_key = arm.api_key_env.as_ref().and_then(|k| std::env::var(k).ok());
    g.temperature = s.temperature;
    g.seed = s.seed;
    g.context_tokens = Some(arm.served_context);
    g
}

/// The canary's checks: the campaign's tools and quality gates, each made small. Empty when the
/// campaign declares neither; Err when a suite no longer loads, naming the field and the file
/// (the promotion's checks refuse it before the switch: `check::bake_inputs`).
pub fn checks(c: &Campaign) -> Result<Vec<Check>, String> {
    let mut out = Vec::new();
    let file = |s: Option<&std::path::Path>| {
        s.map(|p| p.display().to_string())
            .unwrap_or_else(|| "the built-in suite".into())
    };
    if let Some(t) = &c.gates.tools {
        let suite = gates::builtin::load_tools(t.suite.as_deref())
            .map_err(|e| format!("gates.tools.suite ({}): {e}", file(t.suite.as_deref())))?;
        let variants = t
            .variants
            .iter()
            .map(|v| gates::ToolVariant::parse(v.as_str()))
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| format!("gates.tools.variants: {e}"))?;
        // One request per case, all in flight at once: the canary fits beside an interval.
        let batch = suite.cases.len().max(1);
        out.push(Check::Tools(gates::ToolsCheck::new(
            suite, batch, variants,
        )?));
    }
    if let Some(q) = &c.gates.quality {
        let suite = gates::builtin::load_quality(q.suite.as_deref())
            .map_err(|e| format!("gates.quality.suite ({}): {e}", file(q.suite.as_deref())))?;
        let mut qc = gates::QualityCheck::new(suite, 1);
        qc.reasoning_headroom = q.reasoning_headroom;
        out.push(Check::Quality(qc));
    }
    Ok(out)
}

/// One canary's outcome: a check per gate (for the interval's record) and, when one failed,
/// its reason.
pub struct Outcome {
    pub checks: Vec<Value>,
    pub failures: Vec<String>,
}

/// Runs the canary's checks on the winner.
pub async fn run(g: &GateContext, checks: &[Check]) -> Outcome {
    let results = gates::run(g, checks).await;
    let mut o = Outcome {
        checks: Vec::new(),
        failures: Vec::new(),
    };
    for r in &results {
        let name = r.gate.as_str();
        o.checks
            .push(json!({"check": "canary", "gate": name, "passed": r.passed,
            "total": r.total, "reason": r.reason, "seconds": r.duration_s, "met": r.passed()}));
        if !r.passed() {
            o.failures.push(format!(
                "canary {name}: {} ({}/{})",
                r.reason, r.passed, r.total
            ));
        }
    }
    o
}
