//! The records a new run starts from: `campaign-result.json`'s first state (identity, workload,
//! one entry per arm) and `environment.json` (what the run ran on).

use crate::campaign::{Campaign, Plan};
use crate::evidence::result::{ArmResult, CampaignResult, SloGate, SpecRecord, WorkloadRecord};
use crate::telemetry::host;
use serde_json::{json, Value};
use std::collections::BTreeMap;

/// The result record a new run starts from: identity, workload, one entry per arm the plan runs
/// (every arm of a one-lane campaign; a lane's arms on a multi-lane one).
pub fn new_result(plan: &Plan) -> CampaignResult {
    let c = &plan.campaign;
    let ran = plan.arm_ids();
    let arms: Vec<&crate::campaign::Arm> = c
        .arms
        .iter()
        .filter(|a| ran.contains(&a.id.as_str()))
        .collect();
    let mut r = CampaignResult::new(&c.campaign.id);
    r.started_at = crate::clock::wall_rfc3339();
    let inc = c.incumbent();
    r.identity = crate::evidence::result::Identity {
        hardware: if c.campaign.hardware_is_auto() {
            host::hardware()
        } else {
            c.campaign.hardware.clone()
        },
        topology: c.campaign.topology.clone(),
        incumbent: inc.label.clone(),
        incumbent_arm: inc.id.clone(),
        host: host::hostname(),
    };
    let w = &c.workload;
    r.workload = WorkloadRecord {
        ranking_priority: w.ranking_priority.clone(),
        matched_prompt_tokens: w.matched_prompt_tokens as u64,
        matched_prompt_tokens_reported: BTreeMap::new(),
        max_tokens: w.max_tokens as u64,
        warm_repetitions_per_arm: w.warm_repetitions as u64,
        concurrency: w.concurrency.iter().map(|&x| x as u64).collect(),
        long_context_targets: w.long_context_targets.clone(),
        sampling: serde_json::to_value(&w.sampling).unwrap_or(Value::Null),
        tie_tolerance: c.policy.tie_tolerance.clone(),
        allow_prefix_cache: Some(w.allow_prefix_cache),
        api: serde_json::to_value(w.api)
            .ok()
            .and_then(|v| v.as_str().map(str::to_string))
            .unwrap_or_default(),
        prompt_label: w.prompt_label.clone(),
        slo: w
            .slo
            .iter()
            .map(|e| SloGate {
                limit: e.limit.clone(),
                concurrency: e.concurrency.map(u64::from),
            })
            .collect(),
        concurrency_priority_level: w.concurrency_priority_level.map(u64::from),
        // Recorded by the first timing step that sizes the source (run/steps/timing.rs).
        source: None,
        work_items: BTreeMap::new(),
    };
    // The policy the verdict follows, recorded so the verdict is a function of the bundle alone.
    r.policy = Some(c.policy.clone());
    // An endpoint measured without certificate verification is a limitation of the verdict.
    for a in &arms {
        if let Some(n) = a.recipe().limitation(&a.id) {
            if !r.notes.contains(&n) {
                r.notes.push(n);
            }
        }
    }
    r.measurement_path = if arms.iter().any(|a| a.recipe().routed()) {
        "routed".into()
    } else {
        "online-direct".into()
    };
    r.arms = arms
        .iter()
        .map(|a| ArmResult {
            id: a.id.clone(),
            label: a.label.clone(),
            role: a.role.as_str().into(),
            engine: a.engine.clone(),
            model: a.model.clone(),
            quantization: a.quantization.clone(),
            served_context: a.served_context,
            speculative: a.speculative.as_ref().map(|s| SpecRecord {
                method: s.method.clone(),
                control: s.control.clone(),
            }),
            long_context_profile: a.long_context_profile.clone(),
            price: c.lane.price(),
            ..Default::default()
        })
        .collect();
    r
}

/// `environment.json`: what the run ran on.
pub fn environment(c: &Campaign) -> Value {
    let (cpu, ncpu) = host::cpu_model();
    let engines: Vec<Value> = c
        .arms
        .iter()
        .map(
            |a| json!({"arm": a.id, "engine": a.engine, "source": "declared in the campaign file"}),
        )
        .collect();
    json!({
        "bakeoff_version": crate::VERSION,
        "hostname": host::hostname(),
        "os": host::os_name(),
        "kernel": host::kernel(),
        "arch": std::env::consts::ARCH,
        "cpu": {"model": cpu, "logical_cpus": ncpu},
        "memory": host::memory(),
        "gpu": host::gpu_probe(),
        "engines": engines,
        "started_at": crate::clock::wall_rfc3339(),
        "campaign_file": c.source.path,
        "campaign_sha256": c.source.sha256,
    })
}
