//! The campaign orchestrator: runs a [`Plan`] step by step, one arm at a time, writing one
//! evidence file per step, `campaign-result.json` and `checkpoint.json` after every step, and the
//! manifest at the end. The incumbent is stopped first and restored last on every path out
//! (success, a failed arm, a signal, a panicking step).
//!
//! Every step that talks to an engine runs in its own task, raced against the cancellation watch
//! (set by the first SIGINT/SIGTERM): a cancelled step is aborted, a panicking one is a failed
//! step (class `crash`), and the orchestrator itself always reaches the stop and the restoration.

#[path = "run/procnet.rs"]
pub mod procnet;
#[path = "run/timing.rs"]
pub mod timing;

/// Writes a line to stderr, ignoring errors: a closed stderr (the parent went away) must never
/// stop the campaign before the incumbent is restored.
macro_rules! say {
    ($($t:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stderr(), $($t)*);
    }};
}

use super::checkpoint::{Checkpoint, ExtraStep, InvocationTiming, StepStatus};
use super::{
    plan, ApiKind, Arm, Campaign, CommandLine, EnvValue, Mask, Phase, Plan, PlanStep, RecipeRef,
    RunState, StepKind,
};
use crate::client::Target;
use crate::evidence::result::{
    ArmResult, ArmStatus, CampaignResult, Failure, GateRecord, LongContextRecord, Restoration,
    SpecRecord, WorkloadRecord, RESULT_FILE,
};
use crate::evidence::{FailureClass, GateName, GateStatus, RestorationStatus};
use crate::gates::{self, Check, GateContext, GateResult};
use crate::lane::{self, EnvVal, LaneSpec, LaunchSpec, ReadyFacts, Running};
use crate::telemetry::gpu;
use crate::workload::prompt::{self, MatchedPrompt, PromptSpec};
use crate::workload::Endpoint;
use anyhow::{anyhow, Result};
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::watch;

/// The first signal's name, once one arrived.
pub type Cancel = watch::Receiver<Option<&'static str>>;

pub struct Options {
    /// The bundle directory.
    pub bundle: PathBuf,
    pub resume: bool,
    /// Use a progress bar (a terminal); plain lines otherwise.
    pub progress_bar: bool,
    pub cancel: Cancel,
}

pub struct Outcome {
    pub complete: bool,
    /// `interrupted by SIGINT during <arm>/<step>`.
    pub interrupted: Option<String>,
    pub result: CampaignResult,
    pub timing: InvocationTiming,
}

/// Raw engine logs (never in the bundle: they may hold secrets; masked copies go in).
pub fn logs_dir(bundle: &Path) -> PathBuf {
    sibling(bundle, "logs")
}

/// The restored incumbent's log: outside the bundle, because it keeps growing.
pub fn incumbent_log(bundle: &Path) -> PathBuf {
    sibling(bundle, "incumbent.log")
}

fn sibling(bundle: &Path, suffix: &str) -> PathBuf {
    let name = bundle
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "bundle".into());
    bundle.with_file_name(format!("{name}.{suffix}"))
}

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

fn resolve_env(env: &BTreeMap<String, EnvValue>) -> Result<Vec<(String, EnvVal)>, String> {
    env.iter()
        .map(|(k, v)| match v {
            EnvValue::Literal(s) => Ok((k.clone(), EnvVal::literal(s))),
            EnvValue::FromEnv(name) => match std::env::var(name) {
                Ok(val) => Ok((k.clone(), EnvVal::secret(val))),
                Err(_) => Err(format!(
                    "the environment variable {name} (read by {k} = {{ from_env = \"{name}\" }}) is not set; export it before the run"
                )),
            },
        })
        .collect()
}

/// How the arm is started: the lane's launch spec (secrets resolved from the environment).
pub fn launch_spec(c: &Campaign, arm: &Arm, log_path: &Path) -> Result<LaunchSpec, String> {
    let lc = c.launch_command(arm);
    match (arm.recipe(), lc) {
        (RecipeRef::Endpoint(e), _) => Ok(LaunchSpec::Endpoint { url: e.url.clone() }),
        (RecipeRef::Container(ct), Some(_)) => {
            let mut labels = vec![
                ("bakeoff.campaign".to_string(), c.campaign.id.clone()),
                ("bakeoff.arm".to_string(), arm.id.clone()),
            ];
            labels.extend(ct.labels.iter().map(|(k, v)| (k.clone(), v.clone())));
            Ok(LaunchSpec::Container(lane::ContainerSpec {
                image: ct.image.clone(),
                args: ct.args.clone(),
                env: resolve_env(&ct.env)?,
                gpu_uuids: ct.gpus.clone(),
                ports: vec![(c.lane.port, ct.container_port)],
                volumes: ct
                    .volumes
                    .iter()
                    .map(|v| {
                        format!(
                            "{}:{}{}",
                            v.host.display(),
                            v.container,
                            if v.read_only { ":ro" } else { "" }
                        )
                    })
                    .collect(),
                labels,
                name: ct.name.clone(),
                log_path: log_path.to_path_buf(),
                docker: PathBuf::from(&ct.docker),
            }))
        }
        (_, Some(lc)) => {
            let mut argv = lc.start.argv.clone();
            if lc.start.self_exe {
                argv[0] = self_exe()?.display().to_string();
            }
            Ok(LaunchSpec::Process(lane::ProcessSpec {
                argv,
                env: resolve_env(&lc.start.env)?,
                cwd: lc.start.cwd.clone(),
                log_path: log_path.to_path_buf(),
            }))
        }
        (_, None) => Err("the arm has no launch command".into()),
    }
}

/// This bakeoff executable. When it was replaced on disk while running (a rebuild during a
/// campaign), Linux reports `PATH (deleted)`, which cannot be started: `/proc/self/exe` still
/// starts the very binary this run uses, so every arm, and the restored incumbent, runs the same
/// bakeoff.
fn self_exe() -> Result<PathBuf, String> {
    let exe =
        std::env::current_exe().map_err(|e| format!("cannot find the bakeoff executable: {e}"))?;
    if exe.to_string_lossy().ends_with(" (deleted)") {
        let proc_exe = PathBuf::from("/proc/self/exe");
        if proc_exe.exists() {
            return Ok(proc_exe);
        }
    }
    Ok(exe)
}

/// What listens on the lane port before the campaign starts.
#[derive(Debug, Clone)]
pub enum PortState {
    Free,
    Incumbent(procnet::Listener),
}

/// Checks that must pass before anything is launched. Each error is one line.
pub fn preconditions(c: &Campaign, bundle: &Path, resume: bool) -> Result<PortState, String> {
    // Suites load before any arm starts.
    checks_for_suites(c)?;
    // The lane port.
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
    let is_inc = match c.launch_command(inc) {
        Some(lc) if inc.kind().managed() => procnet::matches(
            l,
            &lc.start.argv,
            lc.start.self_exe,
            lc.start.cwd.as_deref(),
        ),
        _ => false,
    };
    if !is_inc {
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
    let d = logs_dir(bundle);
    std::fs::create_dir_all(&d).map_err(|e| {
        format!(
            "cannot create {} ({e}) next to the output directory; give a writable --output",
            d.display()
        )
    })?;
    Ok(())
}

/// Loads the tools and quality suites (so a bad suite stops the run before any arm starts).
fn checks_for_suites(c: &Campaign) -> Result<(Option<Check>, Option<Check>), String> {
    let tools = match &c.gates.tools {
        None => None,
        Some(t) => {
            let suite = crate::cli::gate::load_tools(t.suite.as_deref())
                .map_err(|e| format!("tools suite refused: {e}"))?;
            let variants = t
                .variants
                .iter()
                .map(|v| gates::ToolVariant::parse(v.as_str()))
                .collect::<Result<Vec<_>, _>>()?;
            Some(Check::Tools(gates::ToolsCheck::new(
                suite,
                t.batch as usize,
                variants,
            )?))
        }
    };
    let quality = match &c.gates.quality {
        None => None,
        Some(q) => {
            let suite = crate::cli::gate::load_quality(q.suite.as_deref())
                .map_err(|e| format!("quality suite refused: {e}"))?;
            let mut qc = gates::QualityCheck::new(suite, q.repetitions);
            qc.reasoning_headroom = q.reasoning_headroom;
            Some(Check::Quality(qc))
        }
    };
    Ok((tools, quality))
}

/// How a step ended for its arm.
enum Outcome1 {
    Ok,
    /// The step ran; its gate failed (the arm goes on).
    GateFailed(Failure),
    /// The arm cannot go on: the remaining steps are skipped and it is stopped.
    Fatal(Failure),
    /// A signal arrived: the step was cancelled.
    Cancelled,
}

enum Guarded<T> {
    Done(T),
    Panicked(String),
    Cancelled,
}

async fn wait_cancel(mut rx: Cancel) {
    loop {
        if rx.borrow_and_update().is_some() {
            return;
        }
        if rx.changed().await.is_err() {
            std::future::pending::<()>().await;
        }
    }
}

/// Runs `fut` in its own task, raced against the cancellation watch.
async fn guarded<T: Send + 'static>(
    cancel: &Cancel,
    fut: impl std::future::Future<Output = T> + Send + 'static,
) -> Guarded<T> {
    if cancel.borrow().is_some() {
        return Guarded::Cancelled;
    }
    let mut h = tokio::spawn(fut);
    tokio::select! {
        r = &mut h => match r {
            Ok(v) => Guarded::Done(v),
            Err(e) if e.is_panic() => {
                let p = e.into_panic();
                let msg = p
                    .downcast_ref::<String>()
                    .cloned()
                    .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
                    .unwrap_or_else(|| "a panic".into());
                Guarded::Panicked(format!("the step panicked: {msg}"))
            }
            Err(e) => Guarded::Panicked(format!("the step's task failed: {e}")),
        },
        _ = wait_cancel(cancel.clone()) => {
            h.abort();
            Guarded::Cancelled
        }
    }
}

/// An arm that is running.
struct Live {
    running: Running,
    spec: LaunchSpec,
    ready: Option<ReadyFacts>,
    prompt: Option<Arc<MatchedPrompt>>,
    /// Suffix of this launch's log copy in the bundle.
    log_name: String,
}

struct Progress {
    bar: Option<indicatif::ProgressBar>,
    t0: Instant,
    total: usize,
    done: usize,
}

impl Progress {
    fn new(total: usize, bar: bool) -> Progress {
        let bar = bar.then(|| {
            let b = indicatif::ProgressBar::new(total as u64);
            b.set_style(
                indicatif::ProgressStyle::with_template(
                    "{spinner} [{elapsed_precise}] {bar:30} {pos}/{len} steps (eta {eta})  {msg}",
                )
                .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
            );
            b
        });
        Progress {
            bar,
            t0: Instant::now(),
            total,
            done: 0,
        }
    }

    fn step(&mut self, what: &str) {
        let el = self.t0.elapsed().as_secs_f64();
        match &self.bar {
            Some(b) => {
                b.set_position(self.done as u64);
                b.set_message(what.to_string());
            }
            None => {
                let est = if self.done > 0 {
                    format!(
                        ", about {:.0} s left",
                        el / self.done as f64 * (self.total - self.done) as f64
                    )
                } else {
                    String::new()
                };
                say!(
                    "bakeoff run [{el:>7.1} s] step {}/{}: {what}{est}",
                    (self.done + 1).min(self.total),
                    self.total
                );
            }
        }
    }

    fn finish(&mut self) {
        if let Some(b) = self.bar.take() {
            b.finish_and_clear();
        }
    }
}

struct Orch {
    c: Campaign,
    plan: Plan,
    dir: PathBuf,
    lane: LaneSpec,
    mask: Mask,
    result: CampaignResult,
    ck: Checkpoint,
    inv: u32,
    cancel: Cancel,
    interrupted: Option<String>,
    progress: Progress,
    t0: Instant,
    engine_ms: f64,
    measure_ms: f64,
    gpu_baseline: Option<gpu::GpuProbe>,
    tools: Option<Check>,
    quality: Option<Check>,
}

fn fail(class: FailureClass, detail: impl Into<String>, evidence: &str) -> Failure {
    Failure {
        class,
        detail: detail.into(),
        evidence: Some(evidence.into()),
    }
}

fn is_engine_step(k: &StepKind) -> bool {
    matches!(
        k,
        StepKind::Launch
            | StepKind::Ready { .. }
            | StepKind::Stop
            | StepKind::StopIncumbent
            | StepKind::RestoreIncumbent
    )
}

/// Runs (or resumes) a campaign. Never returns before the incumbent restoration was attempted.
pub async fn run(c: Campaign, opts: Options) -> Result<Outcome> {
    let t0 = Instant::now();
    let plan = plan(&c);
    let dir = opts.bundle.clone();
    let (ck, result) = if opts.resume {
        let ck = Checkpoint::load(&dir)?;
        let r: CampaignResult = serde_json::from_slice(
            &std::fs::read(dir.join(RESULT_FILE))
                .map_err(|e| anyhow!("cannot read {RESULT_FILE} in the bundle: {e}"))?,
        )?;
        (ck, r)
    } else {
        (Checkpoint::new(&plan), new_result(&c))
    };
    let (tools, quality) = checks_for_suites(&c).map_err(|e| anyhow!(e))?;
    let mut o = Orch {
        lane: lane_spec(&c),
        mask: Mask::from_process_env(&c),
        progress: Progress::new(plan.steps.len(), opts.progress_bar),
        c,
        plan,
        dir,
        result,
        ck,
        inv: 0,
        cancel: opts.cancel,
        interrupted: None,
        t0,
        engine_ms: 0.0,
        measure_ms: 0.0,
        gpu_baseline: None,
        tools,
        quality,
    };
    o.ck.invocations += 1;
    o.inv = o.ck.invocations;
    o.progress.done = o.ck.steps.iter().filter(|s| s.status.finished()).count();
    if !opts.resume {
        o.write_setup_files()?;
    }
    o.result.complete = false;
    o.result.incomplete_reason = Some("running".into());
    o.save();

    o.setup().await;
    let n = o.c.arms.len();
    for i in 0..n {
        if o.interrupted.is_some() {
            break;
        }
        o.run_arm(i).await;
    }
    o.restore().await;
    o.finish()
}

fn new_result(c: &Campaign) -> CampaignResult {
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
    };
    r.measurement_path = if c.arms.iter().any(|a| a.endpoint.is_some()) {
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

impl Orch {
    fn write_json(&self, name: &str, v: &Value) -> Result<()> {
        let text = serde_json::to_string_pretty(v)? + "\n";
        crate::evidence::write_atomic(&self.dir.join(name), self.mask.scrub(&text).as_bytes())
    }

    fn write_text(&self, name: &str, text: &str) -> Result<()> {
        crate::evidence::write_atomic(&self.dir.join(name), self.mask.scrub(text).as_bytes())
    }

    fn save(&mut self) {
        self.result.updated_at = crate::clock::wall_rfc3339();
        if let Ok(v) = serde_json::to_value(&self.result) {
            if let Err(e) = self.write_json(RESULT_FILE, &v) {
                say!("warning: {e}");
            }
        }
        if let Err(e) = self.ck.save(&self.dir) {
            say!("warning: {e}");
        }
    }

    fn arm_result(&mut self, id: &str) -> &mut ArmResult {
        self.result
            .arms
            .iter_mut()
            .find(|a| a.id == id)
            .expect("every arm has a result entry")
    }

    fn required(&self, gate: GateName) -> bool {
        self.c.policy.required_gates.contains(&gate)
    }

    fn write_setup_files(&mut self) -> Result<()> {
        let src = std::fs::read(&self.c.source.path).map_err(|e| {
            anyhow!(
                "cannot read the campaign file {}: {e}",
                self.c.source.path.display()
            )
        })?;
        crate::evidence::write_atomic(&self.dir.join("campaign.toml"), &src)?;
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
        let engines: Vec<Value> = self
            .c
            .arms
            .iter()
            .map(|a| json!({"arm": a.id, "engine": a.engine, "source": "declared in the campaign file"}))
            .collect();
        let env = json!({
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
            "campaign_file": self.c.source.path,
            "campaign_sha256": self.c.source.sha256,
        });
        self.write_json("environment.json", &env)?;
        self.write_json(
            "plan.json",
            &json!({"campaign_id": self.c.campaign.id, "steps": self.plan.steps}),
        )?;
        Ok(())
    }

    fn cancelled(&self) -> bool {
        self.cancel.borrow().is_some()
    }

    fn mark_interrupted(&mut self, arm: &str, step: &str) {
        if self.interrupted.is_none() {
            let sig = (*self.cancel.borrow()).unwrap_or("a signal");
            self.interrupted = Some(format!("interrupted by {sig} during {arm}/{step}"));
        }
    }

    /// Records a finished plan step: checkpoint, result, progress.
    fn finish_step(&mut self, s: &PlanStep, status: StepStatus, wall_ms: Option<f64>) {
        if let Some(w) = wall_ms {
            if is_engine_step(&s.kind) {
                self.engine_ms += w;
            } else {
                self.measure_ms += w;
            }
        }
        let was = self.ck.step(s.number).status.finished();
        self.ck.set(s.number, status, wall_ms, self.inv);
        if status.finished() && !was {
            self.progress.done += 1;
        }
        if let (Some(arm), true) = (&s.arm, s.phase == Phase::Arm) {
            let ev = s.evidence.clone();
            let a = self.arm_result(arm);
            if status != StepStatus::Skipped && !a.evidence.contains(&ev) {
                a.evidence.push(ev);
            }
        }
        self.save();
    }

    fn extra(&mut self, arm: Option<&str>, step: &str, evidence: Option<&str>, wall_ms: f64) {
        if step.contains("launch") || step.contains("stop") || step.contains("restore") {
            self.engine_ms += wall_ms;
        } else {
            self.measure_ms += wall_ms;
        }
        self.ck.extra.push(ExtraStep {
            invocation: self.inv,
            arm: arm.map(str::to_string),
            step: step.into(),
            evidence: evidence.map(str::to_string),
            wall_ms,
        });
    }

    // ---------------------------------------------------------------- setup

    async fn setup(&mut self) {
        let setup: Vec<PlanStep> = self
            .plan
            .steps
            .iter()
            .filter(|s| s.phase == Phase::Setup)
            .cloned()
            .collect();
        for s in setup {
            if self.cancelled() {
                self.mark_interrupted("setup", s.kind.name());
                return;
            }
            match &s.kind {
                StepKind::StopIncumbent => {
                    let first = !self.ck.step(s.number).status.finished();
                    let name = if first {
                        s.evidence.clone()
                    } else {
                        format!("incumbent-shutdown-resume-{}.json", self.inv)
                    };
                    self.progress.step("stop the incumbent");
                    let t = Instant::now();
                    let (ev, stopped) = self.stop_incumbent().await;
                    let w = t.elapsed().as_secs_f64() * 1e3;
                    if first || stopped {
                        let _ = self.write_json(&name, &ev);
                    }
                    if first {
                        self.finish_step(&s, StepStatus::Done, Some(w));
                    } else {
                        self.extra(None, "stop-incumbent", stopped.then_some(&name), w);
                        self.save();
                    }
                }
                StepKind::GpuIdleBaseline { max_used_mib } => {
                    let uuids = self.c.lane.gpus.clone();
                    let max = *max_used_mib;
                    let t = Instant::now();
                    let p = tokio::task::spawn_blocking(gpu::probe).await.unwrap_or(
                        gpu::GpuProbe::NotApplicable {
                            reason: "the probe task failed".into(),
                        },
                    );
                    let v = gpu::idle_baseline(&p, &uuids, max);
                    let w = t.elapsed().as_secs_f64() * 1e3;
                    self.gpu_baseline = Some(p.clone());
                    if self.ck.step(s.number).status.finished() {
                        continue;
                    }
                    let _ = self.write_json(&s.evidence, &json!({"verdict": v, "probe": p}));
                    self.result.idle_baseline = Some(GateRecord {
                        name: GateName::IdleBaseline,
                        status: v.status.into(),
                        passed: None,
                        total: None,
                        detail: v.detail.clone(),
                        required: self.required(GateName::IdleBaseline),
                        evidence: Some(s.evidence.clone()),
                    });
                    self.finish_step(&s, StepStatus::Done, Some(w));
                }
                _ => {}
            }
        }
    }

    /// Stops whatever incumbent listens on the lane port. Returns the evidence and whether a
    /// process was stopped.
    async fn stop_incumbent(&mut self) -> (Value, bool) {
        let inc = self.c.incumbent().clone();
        let listeners = procnet::find_listeners(self.c.lane.port);
        let Some(l) = listeners.first().cloned() else {
            let free = lane::port_free(&self.c.lane.host, self.c.lane.port);
            return (
                json!({
                    "incumbent": inc.id,
                    "listening": !free,
                    "detail": if free { "nothing listened on the lane port: the incumbent was not running, nothing to stop" }
                              else { "the lane port is taken but no process could be identified" },
                    "at": crate::clock::wall_rfc3339(),
                }),
                false,
            );
        };
        let lc = self.c.launch_command(&inc);
        let matches = lc
            .as_ref()
            .map(|lc| {
                procnet::matches(
                    &l,
                    &lc.start.argv,
                    lc.start.self_exe,
                    lc.start.cwd.as_deref(),
                )
            })
            .unwrap_or(false);
        let mut ev = json!({
            "incumbent": inc.id,
            "listening": true,
            "process": l,
            "recipe_argv": lc.as_ref().map(|lc| lc.start.argv.clone()),
            "cmdline_matches_recipe": matches,
            "at": crate::clock::wall_rfc3339(),
        });
        if !matches {
            ev["detail"] = json!("the process on the lane port does not run the incumbent's recipe; it was left alone");
            return (ev, false);
        }
        let st = procnet::stop_foreign(&l, self.lane.stop_grace).await;
        let free =
            lane::wait_port_free(&self.c.lane.host, self.c.lane.port, Duration::from_secs(10))
                .await;
        self.ck.incumbent_shutdowns += 1;
        ev["stop"] = json!(st);
        ev["port_free"] = json!(free);
        ev["detail"] = json!(format!(
            "stopped pid {} ({}): SIGTERM{}; port {}",
            l.pid,
            st.target,
            if st.sigkill_sent {
                ", then SIGKILL"
            } else {
                ""
            },
            if free { "free" } else { "still taken" }
        ));
        (ev, true)
    }

    // ---------------------------------------------------------------- arms

    async fn run_arm(&mut self, ai: usize) {
        let arm = self.c.arms[ai].clone();
        let n_arms = self.c.arms.len();
        let steps: Vec<PlanStep> = self
            .plan
            .steps
            .iter()
            .filter(|s| s.phase == Phase::Arm && s.arm.as_deref() == Some(arm.id.as_str()))
            .cloned()
            .collect();
        let Some(first) = steps
            .iter()
            .position(|s| !self.ck.step(s.number).status.finished())
        else {
            return;
        };
        let mut live: Option<Live> = None;
        let mut fatal = matches!(self.arm_result(&arm.id).status, ArmStatus::Failed);
        // Resuming an arm interrupted half way: start it again (a relaunch, its own evidence).
        let started_before = steps[..first]
            .iter()
            .any(|s| matches!(s.kind, StepKind::Launch | StepKind::Ready { .. }));
        if started_before && !fatal {
            self.progress
                .step(&format!("arm {}/{n_arms} {}: relaunch", ai + 1, arm.id));
            match self.relaunch(&arm).await {
                Ok(l) => live = Some(l),
                Err(f) => {
                    if f.class == FailureClass::Interrupted {
                        self.mark_interrupted(&arm.id, "relaunch");
                        self.arm_result(&arm.id).status = ArmStatus::Interrupted;
                        self.save();
                        return;
                    }
                    self.set_failure(&arm.id, f, true);
                    fatal = true;
                }
            }
        }
        for s in &steps[first..] {
            let label = format!(
                "arm {}/{n_arms} {}: {}{}",
                ai + 1,
                arm.id,
                s.kind.name(),
                s.shape
                    .as_deref()
                    .map(|x| format!(" {x}"))
                    .unwrap_or_default()
            );
            if self.cancelled() {
                self.mark_interrupted(&arm.id, s.kind.name());
                self.interrupt_arm(&arm, live.take()).await;
                return;
            }
            if fatal && !matches!(s.kind, StepKind::Stop) {
                self.finish_step(s, StepStatus::Skipped, None);
                continue;
            }
            self.progress.step(&label);
            let t = Instant::now();
            let (out, ev) = self.step(&arm, s, &mut live).await;
            let w = t.elapsed().as_secs_f64() * 1e3;
            if let Some(ev) = &ev {
                if let Err(e) = self.write_json(&s.evidence, ev) {
                    say!("warning: {e}");
                }
            }
            match out {
                Outcome1::Cancelled => {
                    self.mark_interrupted(&arm.id, s.kind.name());
                    self.ck
                        .set(s.number, StepStatus::Interrupted, Some(w), self.inv);
                    self.interrupt_arm(&arm, live.take()).await;
                    return;
                }
                Outcome1::Ok => self.finish_step(s, StepStatus::Done, Some(w)),
                Outcome1::GateFailed(f) => {
                    self.set_failure(&arm.id, f, false);
                    self.finish_step(s, StepStatus::Done, Some(w));
                }
                Outcome1::Fatal(f) => {
                    self.set_failure(&arm.id, f, true);
                    fatal = true;
                    self.finish_step(s, StepStatus::Failed, Some(w));
                }
            }
        }
        if let Some(l) = live.take() {
            // Endpoint arms (no stop step) or a stop that did not consume it.
            drop(l);
        }
        let a = self.arm_result(&arm.id);
        a.status = if fatal {
            ArmStatus::Failed
        } else {
            ArmStatus::Completed
        };
        self.save();
    }

    fn set_failure(&mut self, arm: &str, f: Failure, fatal: bool) {
        let a = self.arm_result(arm);
        if fatal {
            a.status = ArmStatus::Failed;
        }
        let replace = match &a.failure {
            None => true,
            Some(_) => fatal && !a.status.eq(&ArmStatus::Failed),
        };
        if replace || (fatal && a.failure.is_none()) {
            a.failure = Some(f);
        } else if fatal {
            // A fatal failure after a gate failure: the fatal one explains why the arm stopped.
            a.failure = Some(f);
        }
    }

    /// Stops the running arm after a signal and records it as interrupted.
    async fn interrupt_arm(&mut self, arm: &Arm, live: Option<Live>) {
        if let Some(l) = live {
            let t = Instant::now();
            let (ev, _) = self.stop_live(arm, l).await;
            let name = format!("{}-stop-interrupted-{}.json", arm.id, self.inv);
            let _ = self.write_json(&name, &ev);
            let w = t.elapsed().as_secs_f64() * 1e3;
            self.extra(Some(&arm.id), "stop (interrupted)", Some(&name), w);
            let a = self.arm_result(&arm.id);
            if !a.evidence.contains(&name) {
                a.evidence.push(name);
            }
        }
        let reason = self.interrupted.clone().unwrap_or_default();
        let a = self.arm_result(&arm.id);
        a.status = ArmStatus::Interrupted;
        let _ = reason;
        self.save();
    }

    async fn launch_arm(&mut self, arm: &Arm, log_name: String) -> Result<Live, Value> {
        let logs = logs_dir(&self.dir);
        let _ = std::fs::create_dir_all(&logs);
        let log = logs.join(format!("{}.log", arm.id));
        let spec = match launch_spec(&self.c, arm, &log) {
            Ok(s) => s,
            Err(e) => {
                return Err(
                    json!({"failure": {"class": FailureClass::Compatibility, "cause": "spawn-failed", "message": e}}),
                )
            }
        };
        let st = self.ck.arms.entry(arm.id.clone()).or_default();
        st.launches += 1;
        st.next_index = 0;
        match lane::launch(&self.lane, &spec).await {
            Ok(running) => Ok(Live {
                running,
                spec,
                ready: None,
                prompt: None,
                log_name,
            }),
            Err(f) => Err(json!({"spec": spec.describe(&self.lane), "failure": f})),
        }
    }

    fn launch_evidence(&self, arm: &Arm, l: &Live) -> Value {
        json!({
            "arm": arm.id,
            "spec": l.spec.describe(&self.lane),
            "pid": l.running.pid,
            "pgid": l.running.pid,
            "container": l.running.container,
            "started_at": l.running.started_wall,
            "identity": l.running.identity,
            "plan_argv_env_hash": self.c.argv_env_hash(arm),
            "engine_log": l.log_name,
        })
    }

    /// Waits until the arm is ready (cancellable); checks it serves the declared model.
    async fn ready_arm(&mut self, arm: &Arm, l: &mut Live) -> (Outcome1, Value, &'static str) {
        let lane = self.lane.clone();
        let cancel = self.cancel.clone();
        let r = tokio::select! {
            r = lane::wait_ready(&mut l.running, &lane) => Some(r),
            _ = wait_cancel(cancel) => None,
        };
        let Some(r) = r else {
            return (Outcome1::Cancelled, json!({"interrupted": true}), "");
        };
        match r {
            Ok(f) => {
                let model_ok = f.model_ids.contains(&arm.served_model);
                let ctx_ok = f.context_tokens.is_none_or(|c| c == arm.served_context);
                let ev = json!({
                    "arm": arm.id, "facts": f,
                    "served_model_expected": arm.served_model,
                    "served_context_expected": arm.served_context,
                    "served_model_ok": model_ok,
                    "served_context_ok": ctx_ok,
                });
                l.ready = Some(f.clone());
                if !model_ok {
                    let d = format!(
                        "/v1/models lists {:?}, not the declared served_model `{}`",
                        f.model_ids, arm.served_model
                    );
                    return (
                        Outcome1::Fatal(fail(FailureClass::Compatibility, d, "")),
                        ev,
                        "ready",
                    );
                }
                if !ctx_ok {
                    let d = format!(
                        "the engine reports a served context of {} tokens ({}), the campaign declares {}",
                        f.context_tokens.unwrap_or(0),
                        f.context_source.as_deref().unwrap_or("?"),
                        arm.served_context
                    );
                    return (
                        Outcome1::Fatal(fail(FailureClass::Compatibility, d, "")),
                        ev,
                        "ready",
                    );
                }
                (Outcome1::Ok, ev, "ready")
            }
            Err(f) => {
                let d = format!("{}: {}", f.cause, f.message);
                let ev = json!({"arm": arm.id, "failure": f});
                (
                    Outcome1::Fatal(fail(FailureClass::Compatibility, d, "")),
                    ev,
                    "ready",
                )
            }
        }
    }

    /// Launch + ready again for an arm resumed half way; evidence `<arm>-relaunch-<n>.json`.
    async fn relaunch(&mut self, arm: &Arm) -> Result<Live, Failure> {
        let n = self.ck.arms.get(&arm.id).map(|a| a.launches).unwrap_or(1) + 1;
        let name = format!("{}-relaunch-{n}.json", arm.id);
        let t = Instant::now();
        let log_name = format!("{}-engine-relaunch-{n}.log", arm.id);
        let mut l = match self.launch_arm(arm, log_name).await {
            Ok(l) => l,
            Err(ev) => {
                let _ = self.write_json(&name, &ev);
                self.extra(
                    Some(&arm.id),
                    "relaunch",
                    Some(&name),
                    t.elapsed().as_secs_f64() * 1e3,
                );
                return Err(fail(
                    FailureClass::Compatibility,
                    format!("relaunch failed: {}", ev["failure"]),
                    &name,
                ));
            }
        };
        let mut ev = self.launch_evidence(arm, &l);
        let (out, rev, _) = self.ready_arm(arm, &mut l).await;
        ev["ready"] = rev;
        let _ = self.write_json(&name, &ev);
        self.extra(
            Some(&arm.id),
            "relaunch",
            Some(&name),
            t.elapsed().as_secs_f64() * 1e3,
        );
        let a = self.arm_result(&arm.id);
        a.evidence.push(name.clone());
        match out {
            Outcome1::Ok => Ok(l),
            Outcome1::Cancelled => {
                let (sev, _) = self.stop_live(arm, l).await;
                let _ = self.write_json(
                    &format!("{}-stop-interrupted-{}.json", arm.id, self.inv),
                    &sev,
                );
                Err(fail(
                    FailureClass::Interrupted,
                    "interrupted during the relaunch",
                    &name,
                ))
            }
            Outcome1::Fatal(mut f) | Outcome1::GateFailed(mut f) => {
                let (sev, _) = self.stop_live(arm, l).await;
                let _ = self.write_json(&format!("{}-stop-relaunch-{n}.json", arm.id), &sev);
                f.evidence = Some(name);
                Err(f)
            }
        }
    }

    /// Stops an arm: StopFacts, the GPU release check, the masked log copy, quality-risk lines.
    async fn stop_live(&mut self, arm: &Arm, l: Live) -> (Value, bool) {
        let log_path = l.running.log_path.clone();
        let offset = l.running.log_offset;
        let masker = l.spec.masker();
        let pid = l.running.pid;
        let facts = lane::stop(l.running, self.lane.stop_grace).await;
        let gpu_check = if self.c.lane.gpus.is_empty() {
            json!({"status": "not-applicable", "reason": "the lane owns no GPU"})
        } else {
            let base = self
                .gpu_baseline
                .clone()
                .unwrap_or(gpu::GpuProbe::NotApplicable {
                    reason: "no idle baseline".into(),
                });
            let uuids = self.c.lane.gpus.clone();
            let v = tokio::task::spawn_blocking(move || {
                gpu::wait_released(&base, &uuids, 512, Duration::from_secs(30))
            })
            .await
            .ok();
            json!(v)
        };
        let log = log_path
            .as_ref()
            .map(|p| masker.mask(&lane::logs::read_since(p, offset, usize::MAX)))
            .unwrap_or_default();
        let log = self.mask.scrub(&log);
        if log_path.is_some() {
            let _ = self.write_text(&l.log_name, &log);
            let a = self.arm_result(&arm.id);
            if !a.evidence.contains(&l.log_name) {
                a.evidence.push(l.log_name.clone());
            }
        }
        let risks: Vec<String> = log
            .lines()
            .filter(|line| {
                self.c
                    .policy
                    .quality_risks
                    .iter()
                    .any(|r| line.contains(&r.pattern))
            })
            .map(str::to_string)
            .collect();
        let a = self.arm_result(&arm.id);
        for r in risks {
            if !a.quality_risk_lines.contains(&r) {
                a.quality_risk_lines.push(r);
            }
        }
        let ok = facts.group_gone && facts.port_free != Some(false);
        (
            json!({"arm": arm.id, "pid": pid, "stop": facts, "gpu_released": gpu_check,
                   "engine_log": if log_path.is_some() { Some(&l.log_name) } else { None }}),
            ok,
        )
    }

    fn gate_ctx(&self, arm: &Arm, target: &Target) -> GateContext {
        let mut g = GateContext::new(target.clone(), arm.served_model.clone());
        g.api_key = arm.api_key_env.as_ref().and_then(|k| std::env::var(k).ok());
        g.temperature = self.c.workload.sampling.temperature;
        g.seed = self.c.workload.sampling.seed;
        if let Some(tp) = self.c.workload.sampling.top_p {
            g.extra_body.insert("top_p".into(), json!(tp));
        }
        g.context_tokens = Some(arm.served_context);
        g
    }

    fn gate_record(&self, r: &GateResult, evidence: &str) -> GateRecord {
        GateRecord {
            name: r.gate,
            status: r.status.into(),
            passed: Some(r.passed),
            total: Some(r.total),
            detail: r.reason.clone(),
            required: self.required(r.gate),
            evidence: Some(evidence.into()),
        }
    }

    fn put_gate(&mut self, arm: &str, rec: GateRecord) {
        let a = self.arm_result(arm);
        a.gates.retain(|g| g.name != rec.name);
        a.gates.push(rec);
    }

    /// Did the arm's process die? (process and reference arms)
    fn crashed(l: &Live) -> bool {
        match (l.running.kind, l.running.pid) {
            ("process" | "reference", Some(pid)) => lane::process::group_members(pid).is_empty(),
            _ => false,
        }
    }

    fn crash_failure(&self, l: &Live, step: &str, evidence: &str) -> Failure {
        let tail = l.running.log_tail(3).join(" | ");
        fail(
            FailureClass::Crash,
            format!("the arm's process exited during {step}; last log lines: {tail}"),
            evidence,
        )
    }

    /// Runs one arm step. Returns the outcome and the evidence to write.
    async fn step(
        &mut self,
        arm: &Arm,
        s: &PlanStep,
        live: &mut Option<Live>,
    ) -> (Outcome1, Option<Value>) {
        let ev_name = s.evidence.clone();
        match &s.kind {
            StepKind::Launch => {
                let log_name = format!("{}-engine.log", arm.id);
                match self.launch_arm(arm, log_name).await {
                    Ok(l) => {
                        let ev = self.launch_evidence(arm, &l);
                        *live = Some(l);
                        (Outcome1::Ok, Some(ev))
                    }
                    Err(ev) => {
                        let d = format!(
                            "launch failed: {}",
                            ev["failure"]["message"].as_str().unwrap_or("")
                        );
                        (
                            Outcome1::Fatal(fail(FailureClass::Compatibility, d, &ev_name)),
                            Some(ev),
                        )
                    }
                }
            }
            StepKind::Ready { .. } => {
                if live.is_none() {
                    // An endpoint arm: "launch" only checks its URL.
                    match self.launch_arm(arm, format!("{}-engine.log", arm.id)).await {
                        Ok(l) => *live = Some(l),
                        Err(ev) => {
                            return (
                                Outcome1::Fatal(fail(
                                    FailureClass::Compatibility,
                                    "the endpoint URL is not usable",
                                    &ev_name,
                                )),
                                Some(ev),
                            )
                        }
                    }
                }
                let l = live.as_mut().expect("launched");
                let (out, ev, _) = self.ready_arm(arm, l).await;
                if let Some(f) = &l.ready {
                    let a = self.arm_result(&arm.id);
                    a.reported_context = f.context_tokens;
                }
                let out = match out {
                    Outcome1::Fatal(mut f) => {
                        f.evidence = Some(ev_name.clone());
                        Outcome1::Fatal(f)
                    }
                    o => o,
                };
                (out, Some(ev))
            }
            StepKind::MemoryReserve { reserve_mib } => {
                let uuids = self.c.lane.gpus.clone();
                let r = *reserve_mib;
                let v = tokio::task::spawn_blocking(move || {
                    let p = gpu::probe();
                    (gpu::reserve_ok(&p, &uuids, r), p)
                })
                .await;
                match v {
                    Ok((v, p)) => {
                        let free: Option<u64> = p
                            .devices()
                            .iter()
                            .filter(|d| self.c.lane.gpus.contains(&d.uuid))
                            .map(|d| d.memory_total_mib.saturating_sub(d.memory_used_mib))
                            .reduce(|a, b| a + b);
                        self.arm_result(&arm.id).gpu_free_after_start_mib = free;
                        let rec = GateRecord {
                            name: GateName::MemoryReserve,
                            status: v.status.into(),
                            passed: None,
                            total: None,
                            detail: v.detail.clone(),
                            required: self.required(GateName::MemoryReserve),
                            evidence: Some(ev_name.clone()),
                        };
                        self.put_gate(&arm.id, rec);
                        let ev = json!({"verdict": v});
                        if v.ok() {
                            (Outcome1::Ok, Some(ev))
                        } else {
                            (
                                Outcome1::Fatal(fail(
                                    FailureClass::Capacity,
                                    v.detail.clone(),
                                    &ev_name,
                                )),
                                Some(ev),
                            )
                        }
                    }
                    Err(e) => (
                        Outcome1::Fatal(fail(
                            FailureClass::Crash,
                            format!("GPU probe failed: {e}"),
                            &ev_name,
                        )),
                        None,
                    ),
                }
            }
            StepKind::Preflight { gates: list } => {
                let l = live.as_ref().expect("ready");
                let ctx = self.gate_ctx(arm, &l.running.target);
                let checks: Vec<Check> = list.iter().map(|g| preflight_check(g.as_str())).collect();
                match guarded(&self.cancel, async move { gates::run(&ctx, &checks).await }).await {
                    Guarded::Cancelled => (Outcome1::Cancelled, None),
                    Guarded::Panicked(m) => (
                        Outcome1::Fatal(fail(FailureClass::Crash, m, &ev_name)),
                        None,
                    ),
                    Guarded::Done(results) => {
                        for r in &results {
                            let rec = self.gate_record(r, &ev_name);
                            self.put_gate(&arm.id, rec);
                        }
                        let ev = json!({"arm": arm.id, "gates": results});
                        let failed: Vec<String> = results
                            .iter()
                            .filter(|r| !r.passed())
                            .map(|r| format!("{}: {}", r.gate, r.reason))
                            .collect();
                        if Self::crashed(l) {
                            return (
                                Outcome1::Fatal(self.crash_failure(l, "preflight", &ev_name)),
                                Some(ev),
                            );
                        }
                        if failed.is_empty() {
                            (Outcome1::Ok, Some(ev))
                        } else {
                            (
                                Outcome1::Fatal(fail(
                                    FailureClass::Preflight,
                                    failed.join("; "),
                                    &ev_name,
                                )),
                                Some(ev),
                            )
                        }
                    }
                }
            }
            StepKind::Timing {
                state,
                concurrency,
                requests,
                ..
            } => {
                self.timing_step(arm, s, live, *state, *concurrency, *requests)
                    .await
            }
            StepKind::Retrieval {
                target_tokens,
                needles,
                depths,
                max_tokens,
                ..
            } => {
                let check = match gates::RetrievalCheck::new(
                    *target_tokens,
                    *needles as usize,
                    depths.clone(),
                    self.c.workload.sampling.seed,
                    *max_tokens as u64,
                    arm.tokenizer.clone(),
                ) {
                    Ok(c) => Check::Retrieval(c),
                    Err(e) => {
                        return (
                            Outcome1::GateFailed(fail(FailureClass::Retrieval, e, &ev_name)),
                            None,
                        )
                    }
                };
                let (out, ev, r) = self
                    .gate_step(arm, s, live, check, FailureClass::Retrieval)
                    .await;
                if let Some(r) = r {
                    let actual: Vec<u64> = r.details["actual_prompt_tokens"]
                        .as_array()
                        .map(|a| a.iter().filter_map(|x| x.as_u64()).collect())
                        .unwrap_or_default();
                    let (mut dec, mut e2e) = (Vec::new(), Vec::new());
                    for o in &r.observations {
                        for x in &o.exchanges {
                            let ct = x.response.usage.as_ref().and_then(|u| u.completion_tokens);
                            if let (Some(e), Some(ttfo), Some(ct)) =
                                (x.latency.e2e_ms, x.latency.ttfo_ms, ct)
                            {
                                if ct > 1 && e > ttfo {
                                    dec.push((ct - 1) as f64 / ((e - ttfo) / 1e3));
                                }
                            }
                            if let Some(e) = x.latency.e2e_ms {
                                e2e.push(e);
                            }
                        }
                    }
                    let mean =
                        |v: &[f64]| (!v.is_empty()).then(|| v.iter().sum::<f64>() / v.len() as f64);
                    let mut rec = LongContextRecord {
                        evidence: ev_name.clone(),
                        target_tokens: *target_tokens,
                        actual_prompt_tokens: actual,
                        passed: r.passed(),
                        decode_tok_s: mean(&dec),
                        e2e_ms: mean(&e2e),
                    };
                    // The retrieval answers are a few tokens: decode speed at this prompt
                    // length comes from a timed full-length answer when the arm still serves.
                    if matches!(out, Outcome1::Ok | Outcome1::GateFailed(_)) {
                        if let Some((name, d, e)) =
                            self.long_context_timing(arm, live, *target_tokens).await
                        {
                            rec.evidence = name;
                            rec.decode_tok_s = d;
                            rec.e2e_ms = e;
                        }
                    }
                    self.arm_result(&arm.id).long_context = Some(rec);
                }
                (out, ev)
            }
            StepKind::Tools { .. } => match self.tools.clone() {
                Some(c) => {
                    let (o, e, _) = self
                        .gate_step(arm, s, live, c, FailureClass::ToolSchema)
                        .await;
                    (o, e)
                }
                None => (
                    Outcome1::GateFailed(fail(
                        FailureClass::ToolSchema,
                        "no tools suite",
                        &ev_name,
                    )),
                    None,
                ),
            },
            StepKind::Quality { .. } => match self.quality.clone() {
                Some(c) => {
                    let (o, e, _) = self.gate_step(arm, s, live, c, FailureClass::Quality).await;
                    (o, e)
                }
                None => (
                    Outcome1::GateFailed(fail(FailureClass::Quality, "no quality suite", &ev_name)),
                    None,
                ),
            },
            StepKind::Stop => match live.take() {
                Some(l) => {
                    let (ev, _ok) = self.stop_live(arm, l).await;
                    (Outcome1::Ok, Some(ev))
                }
                None => (
                    Outcome1::Ok,
                    Some(
                        json!({"arm": arm.id, "detail": "nothing was running (the launch failed); nothing to stop"}),
                    ),
                ),
            },
            _ => (Outcome1::Ok, None),
        }
    }

    async fn gate_step(
        &mut self,
        arm: &Arm,
        s: &PlanStep,
        live: &mut Option<Live>,
        check: Check,
        class: FailureClass,
    ) -> (Outcome1, Option<Value>, Option<GateResult>) {
        let ev_name = s.evidence.clone();
        let l = live.as_ref().expect("ready");
        let ctx = self.gate_ctx(arm, &l.running.target);
        match guarded(
            &self.cancel,
            async move { gates::run_one(&ctx, &check).await },
        )
        .await
        {
            Guarded::Cancelled => (Outcome1::Cancelled, None, None),
            Guarded::Panicked(m) => (
                Outcome1::Fatal(fail(FailureClass::Crash, m, &ev_name)),
                None,
                None,
            ),
            Guarded::Done(r) => {
                let rec = self.gate_record(&r, &ev_name);
                self.put_gate(&arm.id, rec);
                let ev = serde_json::to_value(&r).unwrap_or(Value::Null);
                let out = if Self::crashed(l) {
                    Outcome1::Fatal(self.crash_failure(l, s.kind.name(), &ev_name))
                } else if r.passed() {
                    Outcome1::Ok
                } else {
                    Outcome1::GateFailed(fail(class, format!("{}: {}", r.gate, r.reason), &ev_name))
                };
                (out, Some(ev), Some(r))
            }
        }
    }

    /// Sizes a matched prompt of `tokens` for `arm` on `target` (cancellable; a panic in the
    /// sizing code is caught).
    async fn build_prompt(
        &self,
        arm: &Arm,
        target: &Target,
        api_key: Option<String>,
        tokens: u64,
    ) -> Guarded<Result<prompt::MatchedPrompt, String>> {
        let endpoint = match self.c.workload.api {
            ApiKind::Chat => Endpoint::Chat,
            ApiKind::Completions => Endpoint::Completions,
        };
        let (target, model, tok) = (
            target.clone(),
            arm.served_model.clone(),
            arm.tokenizer.clone(),
        );
        let nonce = !self.c.workload.allow_prefix_cache;
        guarded(&self.cancel, async move {
            prompt::build(&PromptSpec {
                target: &target,
                model: &model,
                endpoint,
                tokens,
                tokenizer: tok.as_deref(),
                api_key: api_key.as_deref(),
                nonce,
                timeout: Duration::from_secs(300),
                extra_body: None,
            })
            .await
        })
        .await
    }

    /// The request body every timed request of `arm` shares (the prompt is added per request).
    fn request_base(&self, arm: &Arm, ignore_eos: bool) -> serde_json::Map<String, Value> {
        let w = &self.c.workload;
        let mut base = serde_json::Map::new();
        base.insert("model".into(), json!(arm.served_model));
        base.insert("max_tokens".into(), json!(w.max_tokens));
        base.insert("temperature".into(), json!(w.sampling.temperature));
        if let Some(tp) = w.sampling.top_p {
            base.insert("top_p".into(), json!(tp));
        }
        base.insert("seed".into(), json!(w.sampling.seed));
        if ignore_eos {
            base.insert("ignore_eos".into(), json!(true));
        }
        base.insert("stream".into(), json!(true));
        base.insert("stream_options".into(), json!({"include_usage": true}));
        base
    }

    /// Long-context timing: requests at the arm's long-context target prompt length (exact,
    /// like the matched prompt) with the workload's `max_tokens` and `ignore_eos`, closed loop at
    /// concurrency 1, written to `<arm>-timing-<tokens>-c1-long.json`. Returns that file's name
    /// and the median decode tok/s and E2E ms; `None` when it could not run (recorded in the
    /// file when it got that far).
    async fn long_context_timing(
        &mut self,
        arm: &Arm,
        live: &mut Option<Live>,
        tokens: u64,
    ) -> Option<(String, Option<f64>, Option<f64>)> {
        const LONG_REQUESTS: u32 = 2;
        let name = format!("{}-timing-{tokens}-c1-long.json", arm.id);
        let l = live.as_mut()?;
        let target = l.running.target.clone();
        let api_key = arm.api_key_env.as_ref().and_then(|k| std::env::var(k).ok());
        let built = self
            .build_prompt(arm, &target, api_key.clone(), tokens)
            .await;
        let prompt = match built {
            Guarded::Done(Ok(m)) => Arc::new(m),
            Guarded::Done(Err(e)) => {
                let ev = json!({"arm": arm.id, "error": format!("long-context prompt: {e}")});
                let _ = self.write_json(&name, &ev);
                return None;
            }
            _ => return None,
        };
        // Long-context timing always runs to max_tokens, whatever the workload says.
        let base = self.request_base(arm, true);
        let w = &self.c.workload;
        let st = self.ck.arms.entry(arm.id.clone()).or_default();
        let first_index = st.next_index;
        st.next_index += LONG_REQUESTS as u64;
        let inp = timing::TimingInput {
            target,
            base,
            prompt,
            api_key,
            concurrency: 1,
            requests: LONG_REQUESTS,
            first_index,
            seed: w.sampling.seed,
            gpus: self.c.lane.gpus.clone(),
        };
        let Guarded::Done(Ok(out)) = guarded(&self.cancel, timing::run(inp)).await else {
            return None;
        };
        let mut ev = out.evidence;
        ev["arm"] = json!(arm.id);
        ev["state"] = json!("long-context");
        ev["shape"] = json!(format!(
            "long context {tokens} prompt + {} max tokens, ignore_eos, c1",
            w.max_tokens
        ));
        let rec = timing::record(&name, 1, &out.stats);
        if self.write_json(&name, &ev).is_err() {
            return None;
        }
        let a = self.arm_result(&arm.id);
        if !a.evidence.contains(&name) {
            a.evidence.push(name.clone());
        }
        Some((
            name,
            rec.decode_tok_s.map(|s| s.p50),
            rec.e2e_ms.map(|s| s.p50),
        ))
    }

    #[allow(clippy::too_many_arguments)]
    async fn timing_step(
        &mut self,
        arm: &Arm,
        s: &PlanStep,
        live: &mut Option<Live>,
        state: RunState,
        concurrency: u32,
        requests: u32,
    ) -> (Outcome1, Option<Value>) {
        let ev_name = s.evidence.clone();
        let l = live.as_mut().expect("ready");
        let target = l.running.target.clone();
        let api_key = arm.api_key_env.as_ref().and_then(|k| std::env::var(k).ok());
        if l.prompt.is_none() {
            let tokens = self.c.workload.matched_prompt_tokens as u64;
            let built = self
                .build_prompt(arm, &target, api_key.clone(), tokens)
                .await;
            match built {
                Guarded::Cancelled => return (Outcome1::Cancelled, None),
                Guarded::Panicked(m) => {
                    return (
                        Outcome1::Fatal(fail(FailureClass::Crash, m, &ev_name)),
                        None,
                    )
                }
                Guarded::Done(Err(e)) => {
                    let f = if Self::crashed(l) {
                        self.crash_failure(l, "prompt sizing", &ev_name)
                    } else {
                        fail(
                            FailureClass::Compatibility,
                            format!("matched prompt: {e}"),
                            &ev_name,
                        )
                    };
                    return (
                        Outcome1::Fatal(f),
                        Some(json!({"error": format!("matched prompt: {e}")})),
                    );
                }
                Guarded::Done(Ok(m)) => l.prompt = Some(Arc::new(m)),
            }
        }
        let base = self.request_base(arm, self.c.workload.sampling.ignore_eos);
        let st = self.ck.arms.entry(arm.id.clone()).or_default();
        let first_index = st.next_index;
        st.next_index += requests as u64;
        let inp = timing::TimingInput {
            target,
            base,
            prompt: l.prompt.clone().expect("built above"),
            api_key,
            concurrency,
            requests,
            first_index,
            seed: self.c.workload.sampling.seed,
            gpus: self.c.lane.gpus.clone(),
        };
        match guarded(&self.cancel, timing::run(inp)).await {
            Guarded::Cancelled => (Outcome1::Cancelled, None),
            Guarded::Panicked(m) => (
                Outcome1::Fatal(fail(FailureClass::Crash, m, &ev_name)),
                None,
            ),
            Guarded::Done(Err(e)) => {
                let f = if Self::crashed(l) {
                    self.crash_failure(l, "timing", &ev_name)
                } else {
                    fail(FailureClass::Crash, e.clone(), &ev_name)
                };
                (Outcome1::Fatal(f), Some(json!({"error": e})))
            }
            Guarded::Done(Ok(out)) => {
                let mut ev = out.evidence;
                ev["arm"] = json!(arm.id);
                ev["state"] = json!(state.as_str());
                ev["shape"] = json!(s.shape);
                let rec = timing::record(&ev_name, concurrency, &out.stats);
                let crashed = Self::crashed(l);
                if let Some(p) = rec.prompt_tokens_reported {
                    self.result
                        .workload
                        .matched_prompt_tokens_reported
                        .insert(arm.id.clone(), p);
                }
                let a2 = self.arm_result(&arm.id);
                match (state, concurrency) {
                    (RunState::Cold, _) => a2.cold = Some(rec),
                    (RunState::Warm, 1) => a2.warm = Some(rec),
                    (RunState::Warm, n) => {
                        a2.concurrency.insert(n.to_string(), rec);
                    }
                }
                if crashed {
                    let l = live.as_ref().expect("live");
                    let mut f = self.crash_failure(
                        l,
                        &format!("timing {}", s.shape.as_deref().unwrap_or("")),
                        &ev_name,
                    );
                    if let Some((class, fc)) = out.stats.failures_by_class.iter().next() {
                        f.detail = format!(
                            "{} ({} request(s) failed: {class}: {})",
                            f.detail, out.stats.failed, fc.example
                        );
                    }
                    return (Outcome1::Fatal(f), Some(ev));
                }
                if out.stats.ok == 0 {
                    let ex = out
                        .stats
                        .failures_by_class
                        .iter()
                        .next()
                        .map(|(c, f)| format!("{c}: {}", f.example))
                        .unwrap_or_default();
                    return (
                        Outcome1::Fatal(fail(
                            FailureClass::Crash,
                            format!("every timed request failed ({ex})"),
                            &ev_name,
                        )),
                        Some(ev),
                    );
                }
                (Outcome1::Ok, Some(ev))
            }
        }
    }

    // ---------------------------------------------------------------- restoration

    async fn restore(&mut self) {
        let steps: Vec<PlanStep> = self
            .plan
            .steps
            .iter()
            .filter(|s| s.phase == Phase::Restoration)
            .cloned()
            .collect();
        let inc = self.c.incumbent().clone();
        let mut rest = Restoration {
            status: RestorationStatus::NotAttempted,
            ..Default::default()
        };
        let mut ready: Option<ReadyFacts> = None;
        let mut pid: Option<u32> = None;
        let mut ok = true;
        let mut details: Vec<String> = Vec::new();
        for s in &steps {
            if self.cancelled() && self.interrupted.is_none() {
                self.mark_interrupted("restoration", s.kind.name());
            }
            self.progress
                .step(&format!("restoration: {}", s.kind.name()));
            let t = Instant::now();
            let (ev, passed) = match &s.kind {
                StepKind::RestoreIncumbent => {
                    let (ev, r, p) = self.restore_launch(&inc).await;
                    ready = r;
                    pid = p;
                    let launched_ok = ready.is_some() || p.is_some();
                    (ev, launched_ok)
                }
                StepKind::RestorationIdentity {
                    recipe_hash,
                    argv_env_hash,
                    served_model,
                    served_context,
                } => {
                    let (ev, passed) = self
                        .restore_identity(
                            &inc,
                            pid,
                            ready.as_ref(),
                            recipe_hash,
                            argv_env_hash,
                            served_model,
                            *served_context,
                            &mut rest,
                        )
                        .await;
                    (ev, passed)
                }
                StepKind::RestorationPreflight { gates: list } => {
                    let names: Vec<&str> = if list.is_empty() {
                        vec!["smoke", "streaming"]
                    } else {
                        list.iter().map(|g| g.as_str()).collect()
                    };
                    let target = self.incumbent_target(&inc);
                    let ctx = self.gate_ctx(&inc, &target);
                    let checks: Vec<Check> = names.iter().map(|n| preflight_check(n)).collect();
                    // Not cancellable: the restoration finishes even after a signal.
                    let results = gates::run(&ctx, &checks).await;
                    let passed_n = results.iter().filter(|r| r.passed()).count() as u64;
                    let all = passed_n == results.len() as u64 && !results.is_empty();
                    let reasons: Vec<String> = results
                        .iter()
                        .map(|r| format!("{}: {}", r.gate, r.reason))
                        .collect();
                    rest.preflight = Some(GateRecord {
                        name: GateName::RestorationPreflight,
                        status: GateStatus::from_passed(all),
                        passed: Some(passed_n),
                        total: Some(results.len() as u64),
                        detail: reasons.join("; "),
                        required: self.required(GateName::Restoration),
                        evidence: Some(s.evidence.clone()),
                    });
                    (json!({"incumbent": inc.id, "gates": results}), all)
                }
                _ => (Value::Null, true),
            };
            let w = t.elapsed().as_secs_f64() * 1e3;
            let _ = self.write_json(&s.evidence, &ev);
            if !passed {
                ok = false;
                details.push(format!("{} failed", s.kind.name()));
            }
            let st = if passed {
                StepStatus::Done
            } else {
                StepStatus::Failed
            };
            self.finish_step(s, st, Some(w));
        }
        rest.status = RestorationStatus::from_passed(ok);
        rest.detail = if ok {
            let mut d = "the incumbent serves again from the same recipe, with the declared model and context, and passed a fresh preflight".to_string();
            if let (Some(p), true) = (pid, inc.kind().managed() && inc.container.is_none()) {
                d.push_str(&format!(
                    "; it keeps serving as pid {p} (its own process group): stop it with `kill -TERM -- -{p}`"
                ));
            }
            d
        } else {
            details.join("; ")
        };
        rest.evidence = Some("restoration-identity.json".into());
        self.result.restoration = Some(rest);
        self.save();
    }

    fn incumbent_target(&self, inc: &Arm) -> Target {
        match &inc.endpoint {
            Some(e) => Target::parse(&e.url).unwrap_or_else(|_| self.lane.target()),
            None => self.lane.target(),
        }
    }

    /// Starts the incumbent again (detached: it outlives bakeoff), unless it already serves.
    async fn restore_launch(&mut self, inc: &Arm) -> (Value, Option<ReadyFacts>, Option<u32>) {
        if let Some(l) = procnet::find_listeners(self.c.lane.port).first() {
            let lc = self.c.launch_command(inc);
            let m = lc
                .as_ref()
                .map(|lc| {
                    procnet::matches(
                        l,
                        &lc.start.argv,
                        lc.start.self_exe,
                        lc.start.cwd.as_deref(),
                    )
                })
                .unwrap_or(false);
            return (
                json!({"incumbent": inc.id, "already_serving": m, "process": l,
                       "detail": if m { "the incumbent was still serving (it had not been stopped); not started again" }
                                 else { "the lane port is held by a process that is not the incumbent; the incumbent could not be restored" }}),
                None,
                m.then_some(l.pid),
            );
        }
        let log = incumbent_log(&self.dir);
        let spec = match launch_spec(&self.c, inc, &log) {
            Ok(s) => s,
            Err(e) => return (json!({"incumbent": inc.id, "failure": e}), None, None),
        };
        let mut lane = self.lane.clone();
        lane.ready_timeout = lane.ready_timeout.max(Duration::from_secs(5));
        match lane::launch(&lane, &spec).await {
            Err(f) => (
                json!({"incumbent": inc.id, "spec": spec.describe(&lane), "failure": f}),
                None,
                None,
            ),
            Ok(mut r) => {
                let pid = r.pid;
                let ready = lane::wait_ready(&mut r, &lane).await;
                let desc = spec.describe(&lane);
                let ev = json!({
                    "incumbent": inc.id, "spec": desc, "pid": pid, "detached": true,
                    "log_outside_bundle": log.display().to_string(),
                    "started_at": r.started_wall,
                    "ready": ready.as_ref().ok(), "failure": ready.as_ref().err(),
                });
                // Dropping `Running` leaves the incumbent running (own process group).
                drop(r);
                match ready {
                    Ok(f) => (ev, Some(f), pid),
                    Err(_) => (ev, None, None),
                }
            }
        }
    }

    #[allow(clippy::too_many_arguments)]
    async fn restore_identity(
        &mut self,
        inc: &Arm,
        pid: Option<u32>,
        ready: Option<&ReadyFacts>,
        recipe_hash: &str,
        argv_env_hash: &str,
        served_model: &str,
        served_context: u64,
        rest: &mut Restoration,
    ) -> (Value, bool) {
        // The recipe, re-read from the bundle's copy of the campaign file.
        let copy = std::fs::read_to_string(self.dir.join("campaign.toml")).unwrap_or_default();
        let recipe_actual = super::parse(&copy, &self.c.source.path)
            .ok()
            .and_then(|c| c.arm(&inc.id).map(|a| c.recipe_hash(a)))
            .unwrap_or_default();
        // What actually runs: the serving process's argv and env.
        let lc = self.c.launch_command(inc);
        let pid = pid.or_else(|| {
            procnet::find_listeners(self.c.lane.port)
                .first()
                .map(|l| l.pid)
        });
        let (argv_actual, proc_desc) = match (pid, &lc, inc.endpoint.as_ref()) {
            (_, None, Some(_)) => (self.c.argv_env_hash(inc), Value::Null),
            (Some(pid), Some(lc), _) => {
                let l = procnet::describe(pid);
                let matches = procnet::matches(
                    &l,
                    &lc.start.argv,
                    lc.start.self_exe,
                    lc.start.cwd.as_deref(),
                );
                let mut argv = l.cmdline.clone();
                if matches && !argv.is_empty() {
                    argv[0] = lc.start.argv[0].clone();
                }
                let penv = procnet::environ(pid).unwrap_or_default();
                let mut env = BTreeMap::new();
                for (k, v) in &lc.start.env {
                    let got = penv.iter().find(|(n, _)| n == k).map(|(_, x)| x.clone());
                    match (v, got) {
                        (EnvValue::FromEnv(n), Some(_)) => {
                            env.insert(k.clone(), EnvValue::FromEnv(n.clone()));
                        }
                        (EnvValue::Literal(_), Some(x)) => {
                            env.insert(k.clone(), EnvValue::Literal(x));
                        }
                        _ => {}
                    }
                }
                let h = CommandLine {
                    argv,
                    env,
                    cwd: lc.start.cwd.clone(),
                    self_exe: lc.start.self_exe,
                }
                .argv_env_hash();
                let container = inc.container.is_some();
                (
                    if container {
                        self.c.argv_env_hash(inc)
                    } else {
                        h
                    },
                    json!({"pid": pid, "cmdline": l.cmdline, "cmdline_matches_recipe": matches}),
                )
            }
            _ => (String::new(), Value::Null),
        };
        let target = self.incumbent_target(inc);
        let (model_ids, ctx) = match ready {
            Some(f) => (f.model_ids.clone(), f.context_tokens),
            None => served_identity(&target).await,
        };
        let model_actual = model_ids
            .iter()
            .find(|m| *m == served_model)
            .cloned()
            .or(model_ids.first().cloned());
        rest.recipe_hash_expected = recipe_hash.into();
        rest.recipe_hash_actual = recipe_actual.clone();
        rest.argv_env_hash_expected = argv_env_hash.into();
        rest.argv_env_hash_actual = argv_actual.clone();
        rest.served_model_expected = served_model.into();
        rest.served_model_actual = model_actual.clone();
        rest.context_expected = served_context;
        rest.context_actual = ctx;
        let checks = json!({
            "recipe_hash": recipe_actual == recipe_hash,
            "argv_env_hash": argv_actual == argv_env_hash,
            "served_model": model_actual.as_deref() == Some(served_model),
            "context": ctx.is_none_or(|c| c == served_context),
        });
        let passed = checks
            .as_object()
            .expect("object")
            .values()
            .all(|v| v == &json!(true));
        (
            json!({
                "incumbent": inc.id,
                "recipe_hash": {"expected": recipe_hash, "actual": recipe_actual},
                "argv_env_hash": {"expected": argv_env_hash, "actual": argv_actual},
                "served_model": {"expected": served_model, "actual": model_actual, "listed": model_ids},
                "context": {"expected": served_context, "actual": ctx},
                "process": proc_desc,
                "checks": checks,
                "passed": passed,
            }),
            passed,
        )
    }

    fn finish(mut self) -> Result<Outcome> {
        self.progress.finish();
        let all_end = self
            .result
            .arms
            .iter()
            .all(|a| matches!(a.status, ArmStatus::Completed | ArmStatus::Failed));
        let restored = self
            .result
            .restoration
            .as_ref()
            .is_some_and(|r| r.status == RestorationStatus::Passed);
        let complete = all_end && restored && self.interrupted.is_none();
        self.result.complete = complete;
        self.result.incomplete_reason = if complete {
            None
        } else if let Some(i) = &self.interrupted {
            Some(i.clone())
        } else if !restored {
            Some("the incumbent's restoration failed (see restoration-*.json)".into())
        } else {
            Some("not every arm reached an end state".into())
        };
        if let Some(i) = &self.interrupted {
            if !self.result.notes.contains(i) {
                self.result.notes.push(i.clone());
            }
        }
        if self.c.lane.gpus.is_empty() {
            let n = "GPU telemetry not applicable: the lane owns no GPU (idle baseline, memory reserve and GPU samples were not taken)".to_string();
            if !self.result.notes.contains(&n) {
                self.result.notes.push(n);
            }
        }
        let total = self.t0.elapsed().as_secs_f64() * 1e3;
        let overhead = (total - self.engine_ms - self.measure_ms).max(0.0);
        let timing = InvocationTiming {
            invocation: self.inv,
            started_at: self.result.started_at.clone(),
            total_ms: total,
            engine_lifecycle_ms: self.engine_ms,
            measurement_ms: self.measure_ms,
            overhead_ms: overhead,
            overhead_fraction: if total > 0.0 { overhead / total } else { 0.0 },
            outcome: self
                .result
                .incomplete_reason
                .clone()
                .unwrap_or_else(|| "complete".into()),
        };
        self.ck.timing.push(timing.clone());
        self.save();
        crate::evidence::manifest::write(&self.dir)?;
        // The verdict from the bundle alone, as `bakeoff report DIR` writes it (decision
        // summary, publication summary, report.html; the manifest is rewritten to cover them).
        if let Err(e) = crate::report::render_all(&self.dir) {
            eprintln!(
                "bakeoff run: the verdict could not be written ({e:#}); run `bakeoff report {}`",
                self.dir.display()
            );
        }
        Ok(Outcome {
            complete,
            interrupted: self.interrupted.clone(),
            result: self.result,
            timing,
        })
    }
}

fn preflight_check(name: &str) -> Check {
    match name {
        "json" => Check::Json,
        "streaming" => Check::Streaming,
        _ => Check::Smoke,
    }
}

/// Served model ids and context from `/v1/models` (max_model_len or meta.n_ctx), else `/props`.
async fn served_identity(t: &Target) -> (Vec<String>, Option<u64>) {
    let to = Duration::from_secs(10);
    let Ok((200, v)) = crate::client::control::get_json(t, "/v1/models", None, to).await else {
        return (Vec::new(), None);
    };
    let data = v["data"].as_array().cloned().unwrap_or_default();
    let ids = data
        .iter()
        .filter_map(|m| m["id"].as_str().map(str::to_string))
        .collect();
    let mut ctx = data.iter().find_map(|m| m["max_model_len"].as_u64());
    if ctx.is_none() {
        if let Ok((200, p)) = crate::client::control::get_json(t, "/props", None, to).await {
            ctx = p["default_generation_settings"]["n_ctx"].as_u64();
        }
    }
    if ctx.is_none() {
        ctx = data.iter().find_map(|m| m["meta"]["n_ctx"].as_u64());
    }
    (ids, ctx)
}
