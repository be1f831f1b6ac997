//! Before the first step: the preconditions (suites load, lane port, output directory), the
//! lane and launch specs, the new result record and the environment facts.

use crate::campaign::{Arm, Campaign, Mask, Plan, StepKind};
use crate::evidence::bundle;
use crate::evidence::result::{ArmResult, CampaignResult, SloGate, SpecRecord, WorkloadRecord};
use crate::gates::{self, Check};
use crate::lane::{self, procnet, LaneSpec, LaunchSpec};
use crate::telemetry::gpu;
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

/// The lane as the lane module wants it.
pub fn lane_spec(c: &Campaign) -> LaneSpec {
    LaneSpec {
        host: c.lane.host.clone(),
        port: c.lane.port,
        health_path: c.lane.health_path.clone(),
        ready_timeout: Duration::from_secs(c.lane.ready_timeout_s),
        stop_grace: Duration::from_secs(c.lane.stop_grace_s),
        gpu_uuids: c.lane.gpus.clone(),
    }
}

/// How the arm is started: the lane's launch spec (secrets resolved from the environment), as
/// its recipe kind builds it.
pub fn launch_spec(c: &Campaign, arm: &Arm, log_path: &Path) -> Result<LaunchSpec, String> {
    let lc = c.launch_command(arm);
    arm.recipe().launch_spec(&c.at(arm), lc.as_ref(), log_path)
}

/// The live jobs of an arm that runs as scheduler jobs found by name (a Slurm arm): (job id,
/// state, node); empty for other arms or when they cannot be listed.
pub fn slurm_jobs(c: &Campaign, arm: &Arm) -> Vec<(String, String, String)> {
    arm.recipe().jobs(c.launch_command(arm).as_ref())
}

/// Does the process listening as `l` run the incumbent's recipe? (A Slurm arm: does a job of
/// its name run?)
pub fn runs_recipe(c: &Campaign, arm: &Arm, l: &procnet::Listener) -> bool {
    arm.recipe().serves(c.launch_command(arm).as_ref(), l)
}

/// What listens on the lane port before the campaign starts.
#[derive(Debug, Clone)]
pub enum PortState {
    Free,
    Incumbent(procnet::Listener),
}

/// Checks that must pass before anything is launched. Each error is one line.
pub fn preconditions(plan: &Plan, bundle: &Path, resume: bool) -> Result<PortState, String> {
    let c = &plan.campaign;
    // Suites load before any arm starts.
    suites(plan)?;
    if lane::port_free(&c.lane.host, c.lane.port) {
        return output_ok(bundle, resume).map(|_| PortState::Free);
    }
    let inc = c.incumbent();
    let listeners = procnet::find_listeners(c.lane.port);
    let Some(l) = listeners.first() else {
        return Err(format!(
            "port {}:{} is in use by something that is not the incumbent (a process bakeoff cannot identify); stop it or give the lane another port",
            c.lane.host, c.lane.port
        ));
    };
    if !(inc.kind().managed() && runs_recipe(c, inc, l)) {
        let mask = Mask::from_process_env(c);
        return Err(mask.scrub(&format!(
            "port {}:{} is in use by something that is not the incumbent `{}` (pid {}: {}); stop it or give the lane another port",
            c.lane.host,
            c.lane.port,
            inc.id,
            l.pid,
            l.cmdline.join(" ")
        )));
    }
    output_ok(bundle, resume)?;
    Ok(PortState::Incumbent(l.clone()))
}

fn output_ok(bundle: &Path, resume: bool) -> Result<(), String> {
    // Output directory: creatable, writable, and not an existing bundle unless resuming.
    if bundle.exists() && !bundle.is_dir() {
        return Err(format!(
            "output {} exists and is not a directory; give another --output",
            bundle.display()
        ));
    }
    if !resume {
        if let Ok(mut rd) = std::fs::read_dir(bundle) {
            if rd.next().is_some() {
                return Err(format!(
                    "output directory {} is not empty (an earlier bundle?); give another --output, remove it, or continue it with --resume {}",
                    bundle.display(),
                    bundle.display()
                ));
            }
        }
    }
    std::fs::create_dir_all(bundle).map_err(|e| {
        format!(
            "cannot create the output directory {}: {e}; give a writable --output",
            bundle.display()
        )
    })?;
    let probe = bundle.join(".bakeoff-write-probe");
    std::fs::write(&probe, b"probe").map_err(|e| {
        format!(
            "the output directory {} is not writable ({e}); give a writable --output",
            bundle.display()
        )
    })?;
    let _ = std::fs::remove_file(&probe);
    let d = bundle::logs_dir(bundle);
    std::fs::create_dir_all(&d).map_err(|e| {
        format!(
            "cannot create {} ({e}) next to the output directory; give a writable --output",
            d.display()
        )
    })?;
    // Raw engine logs may hold unmasked secrets: their directory is the owner's only.
    {
        use std::os::unix::fs::PermissionsExt;
        let _ = std::fs::set_permissions(&d, std::fs::Permissions::from_mode(0o700));
    }
    Ok(())
}

/// Loads the tools and quality suites the plan's steps name (so a bad suite stops the run before
/// any arm starts).
pub fn suites(plan: &Plan) -> Result<(Option<Check>, Option<Check>), String> {
    let (mut tools, mut quality) = (None, None);
    for s in &plan.steps {
        match &s.kind {
            StepKind::Tools {
                suite,
                batch,
                variants,
            } if tools.is_none() => {
                let suite = gates::builtin::load_tools(suite.as_deref())
                    .map_err(|e| format!("tools suite refused: {e}"))?;
                let variants = variants
                    .iter()
                    .map(|v| gates::ToolVariant::parse(v.as_str()))
                    .collect::<Result<Vec<_>, _>>()?;
                tools = Some(Check::Tools(gates::ToolsCheck::new(
                    suite,
                    *batch as usize,
                    variants,
                )?));
            }
            StepKind::Quality {
                suite,
                repetitions,
                reasoning_headroom,
            } if quality.is_none() => {
                let suite = gates::builtin::load_quality(suite.as_deref())
                    .map_err(|e| format!("quality suite refused: {e}"))?;
                let mut qc = gates::QualityCheck::new(suite, *repetitions);
                qc.reasoning_headroom = *reasoning_headroom;
                quality = Some(Check::Quality(qc));
            }
            _ => {}
        }
    }
    Ok((tools, quality))
}

/// The result record a new run starts from: identity, workload, one entry per arm.
pub fn new_result(c: &Campaign) -> CampaignResult {
    let mut r = CampaignResult::new(&c.campaign.id);
    r.started_at = crate::clock::wall_rfc3339();
    let inc = c.incumbent();
    r.identity = crate::evidence::result::Identity {
        hardware: if c.campaign.hardware_is_auto() {
            detect_hardware()
        } else {
            c.campaign.hardware.clone()
        },
        topology: c.campaign.topology.clone(),
        incumbent: inc.label.clone(),
        incumbent_arm: inc.id.clone(),
        host: hostname(),
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
    for a in &c.arms {
        if let Some(n) = a.recipe().limitation(&a.id) {
            if !r.notes.contains(&n) {
                r.notes.push(n);
            }
        }
    }
    r.measurement_path = if c.arms.iter().any(|a| a.recipe().routed()) {
        "routed".into()
    } else {
        "online-direct".into()
    };
    r.arms = c
        .arms
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
            ..Default::default()
        })
        .collect();
    r
}

/// `environment.json`: what the run ran on.
pub fn environment(c: &Campaign) -> Value {
    let (cpu, ncpu) = cpu_model();
    let read = |p: &str| {
        std::fs::read_to_string(p)
            .ok()
            .map(|s| s.trim().to_string())
    };
    let os = std::fs::read_to_string("/etc/os-release")
        .ok()
        .and_then(|t| {
            t.lines()
                .find(|l| l.starts_with("PRETTY_NAME="))
                .map(|l| l["PRETTY_NAME=".len()..].trim_matches('"').to_string())
        });
    let engines: Vec<Value> = c
        .arms
        .iter()
        .map(
            |a| json!({"arm": a.id, "engine": a.engine, "source": "declared in the campaign file"}),
        )
        .collect();
    json!({
        "bakeoff_version": crate::VERSION,
        "hostname": hostname(),
        "os": os,
        "kernel": read("/proc/sys/kernel/osrelease"),
        "arch": std::env::consts::ARCH,
        "cpu": {"model": cpu, "logical_cpus": ncpu},
        "memory": read("/proc/meminfo").and_then(|m| m.lines().next().map(str::to_string)),
        "gpu": probe_once(),
        "engines": engines,
        "started_at": crate::clock::wall_rfc3339(),
        "campaign_file": c.source.path,
        "campaign_sha256": c.source.sha256,
    })
}

/// One GPU probe per run for the identity and environment records (NVML init is slow).
fn probe_once() -> gpu::GpuProbe {
    static P: std::sync::OnceLock<gpu::GpuProbe> = std::sync::OnceLock::new();
    P.get_or_init(gpu::probe).clone()
}

fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|s| s.trim().to_string())
        .unwrap_or_else(|_| "unknown".into())
}

fn cpu_model() -> (String, usize) {
    let text = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let model = text
        .lines()
        .find(|l| l.starts_with("model name"))
        .and_then(|l| l.split_once(':'))
        .map(|(_, v)| v.trim().to_string())
        .unwrap_or_else(|| "unknown CPU".into());
    let n = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1);
    (model, n)
}

fn detect_hardware() -> String {
    let p = probe_once();
    let d = p.devices();
    if d.is_empty() {
        let (m, n) = cpu_model();
        format!("CPU only: {n} x {m}")
    } else {
        let names: Vec<String> = d
            .iter()
            .map(|g| format!("{}, {} MiB", g.name, g.memory_total_mib))
            .collect();
        format!("{} GPU(s): {}", d.len(), names.join("; "))
    }
}
