//! A campaign expanded into its ordered steps (arms × steps), and the dry-run text.
//!
//! Plain data: [`plan`] does no I/O. Order:
//!
//! 1. setup: `stop-incumbent` (managed incumbents), then `gpu-idle-baseline` (lanes with GPUs) —
//!    the baseline is taken with the incumbent stopped, so it is process-free;
//! 2. per arm, in file order: `launch`, `ready`, `memory-reserve` (GPU lanes), `preflight`,
//!    `timing` cold (c1), `timing` warm (c1), `timing` at each concurrency level above 1,
//!    `retrieval`, `tools`, `quality`, `stop` (endpoint arms have no launch, memory-reserve or
//!    stop);
//! 3. restoration: `restore-incumbent` (managed incumbents), `restoration-identity`,
//!    `restoration-preflight`.
//!
//! Every step writes one evidence file named `<arm>-<step>[-<shape>].json`, e.g.
//! `fast-arm-timing-4k-c1-warm.json`; campaign-level steps use `incumbent-shutdown.json`,
//! `gpu-idle-baseline.json` and `restoration-{launch,identity,preflight}.json`
//! (every name comes from `evidence/bundle.rs`).
//!
//! The plan is the whole contract of a run: every parameter a step uses is in its [`StepKind`]
//! or in [`Plan::request`], and the runner reads nothing else of the workload, so `--dry-run`
//! prints exactly what runs.

use super::command::{Mask, StopMethod};
use super::spec::{
    ApiKind, Arm, Campaign, PreflightGate, Promotion, RecipeRef, Sampling, ToolVariant,
};
use crate::evidence::bundle;
use serde::Serialize;
use std::fmt::Write as _;
use std::path::PathBuf;

/// Where a step belongs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Phase {
    Setup,
    Arm,
    Restoration,
}

/// Cold (the first timed run after the arm started) or warm; never merged.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum RunState {
    Cold,
    Warm,
}

impl RunState {
    pub fn as_str(self) -> &'static str {
        match self {
            RunState::Cold => "cold",
            RunState::Warm => "warm",
        }
    }
}

/// What a step does, with everything it needs.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum StepKind {
    /// Stop the incumbent (its recipe's stop method) to free the lane.
    StopIncumbent,
    /// Record lane GPU memory with nothing running; fails above `max_used_mib`.
    GpuIdleBaseline { max_used_mib: u64 },
    /// Start the arm's recipe.
    Launch,
    /// Health 200, then `/v1/models` lists `served_model` (and the served context when the engine
    /// reports one); fail fast when the process exits first.
    Ready {
        served_model: String,
        served_context: u64,
        timeout_s: u64,
    },
    /// At least `reserve_mib` of lane GPU memory free with the arm ready.
    MemoryReserve { reserve_mib: u64 },
    /// The quick gates.
    Preflight { gates: Vec<PreflightGate> },
    /// A timed run of the matched prompt: `requests` requests at `concurrency` (closed loop).
    Timing {
        state: RunState,
        prompt_tokens: u32,
        max_tokens: u32,
        concurrency: u32,
        requests: u32,
        ignore_eos: bool,
    },
    /// Needle retrieval at the arm's long-context target.
    Retrieval {
        profile: String,
        target_tokens: u64,
        needles: u32,
        depths: Vec<f64>,
        max_tokens: u32,
    },
    /// Decode speed at the long-context prompt length: `requests` requests of exactly
    /// `prompt_tokens` at c1, each decoding `max_tokens` (ignore_eos), recorded as the arm's
    /// long-context figures (the retrieval answers are too short to time decoding).
    LongContextTiming {
        prompt_tokens: u64,
        max_tokens: u32,
        requests: u32,
    },
    /// The tools suite: `batch` requests per variant.
    Tools {
        suite: Option<PathBuf>,
        batch: u32,
        variants: Vec<ToolVariant>,
    },
    /// The quality suite, `repetitions` times.
    Quality {
        suite: Option<PathBuf>,
        repetitions: u32,
        reasoning_headroom: Option<u64>,
    },
    /// Stop the arm; check the GPU memory and the lane port are released.
    Stop,
    /// Start the incumbent again with its recipe and wait until it is ready.
    RestoreIncumbent,
    /// Prove the restored incumbent is the one that was stopped.
    RestorationIdentity {
        recipe_hash: String,
        argv_env_hash: String,
        served_model: String,
        served_context: u64,
    },
    /// The preflight gates again, on the restored incumbent.
    RestorationPreflight { gates: Vec<PreflightGate> },
}

impl StepKind {
    /// The step's name (also the `<step>` part of its evidence file name, for arm steps).
    pub fn name(&self) -> &'static str {
        match self {
            StepKind::StopIncumbent => "stop-incumbent",
            StepKind::GpuIdleBaseline { .. } => "gpu-idle-baseline",
            StepKind::Launch => "launch",
            StepKind::Ready { .. } => "ready",
            StepKind::MemoryReserve { .. } => "memory-reserve",
            StepKind::Preflight { .. } => "preflight",
            StepKind::Timing { .. } => "timing",
            StepKind::Retrieval { .. } => "retrieval",
            StepKind::LongContextTiming { .. } => "long-context-timing",
            StepKind::Tools { .. } => "tools",
            StepKind::Quality { .. } => "quality",
            StepKind::Stop => "stop",
            StepKind::RestoreIncumbent => "restore-incumbent",
            StepKind::RestorationIdentity { .. } => "restoration-identity",
            StepKind::RestorationPreflight { .. } => "restoration-preflight",
        }
    }

    /// Setup steps that a resumed invocation runs again although they are finished: the
    /// incumbent was restored at the end of the last invocation and must be stopped again, and
    /// the GPU release checks need this invocation's idle baseline.
    pub fn reruns_on_resume(&self) -> bool {
        matches!(
            self,
            StepKind::StopIncumbent | StepKind::GpuIdleBaseline { .. }
        )
    }
}

/// How every request of the run is made: the endpoint kind, the sampling parameters (always
/// sent explicitly), whether prompts carry a cache-defeating nonce, and the prompt-sizing limit.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RequestContract {
    pub api: ApiKind,
    pub sampling: Sampling,
    /// Prompts differ per request (a nonce), so no prefix cache can serve them.
    pub defeat_prefix_cache: bool,
    pub sizing_timeout_s: u64,
}

/// Requests of each long-context timing step.
pub const LONG_CONTEXT_REQUESTS: u32 = 2;

/// One step of the plan.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PlanStep {
    /// 1-based position in the plan.
    pub number: usize,
    pub phase: Phase,
    /// The arm it acts on: the arm for arm steps, the incumbent for the incumbent steps, `None`
    /// for the idle baseline.
    pub arm: Option<String>,
    pub kind: StepKind,
    /// The shape label (`4k-c1-warm`, `24000`), when the step has one.
    pub shape: Option<String>,
    /// The evidence file it writes, relative to the bundle directory.
    pub evidence: String,
}

/// The whole campaign as ordered steps. Holds the campaign it came from, for rendering.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Plan {
    pub campaign: Campaign,
    pub request: RequestContract,
    pub steps: Vec<PlanStep>,
}

/// Expands a loaded campaign into its steps.
pub fn plan(c: &Campaign) -> Plan {
    let mut steps: Vec<PlanStep> = Vec::new();
    let mut push = |phase: Phase,
                    arm: Option<&str>,
                    kind: StepKind,
                    shape: Option<String>,
                    evidence: String| {
        steps.push(PlanStep {
            number: steps.len() + 1,
            phase,
            arm: arm.map(str::to_string),
            kind,
            shape,
            evidence,
        });
    };
    let inc = c.incumbent();
    let inc_managed = inc.kind().managed();
    let gpus = !c.lane.gpus.is_empty();

    if inc_managed {
        push(
            Phase::Setup,
            Some(&inc.id),
            StepKind::StopIncumbent,
            None,
            bundle::INCUMBENT_SHUTDOWN.into(),
        );
    }
    if gpus {
        push(
            Phase::Setup,
            None,
            StepKind::GpuIdleBaseline {
                max_used_mib: c.lane.idle_baseline_max_mib,
            },
            None,
            bundle::GPU_IDLE_BASELINE.into(),
        );
    }

    let w = &c.workload;
    let label = c.prompt_label();
    for arm in &c.arms {
        let id = arm.id.as_str();
        let file = |step: &str, shape: Option<&str>| bundle::step_file(id, step, shape);
        let managed = arm.kind().managed();
        if managed {
            push(
                Phase::Arm,
                Some(id),
                StepKind::Launch,
                None,
                file("launch", None),
            );
        }
        push(
            Phase::Arm,
            Some(id),
            StepKind::Ready {
                served_model: arm.served_model.clone(),
                served_context: arm.served_context,
                timeout_s: c.lane.ready_timeout_s,
            },
            None,
            file("ready", None),
        );
        if managed && gpus {
            push(
                Phase::Arm,
                Some(id),
                StepKind::MemoryReserve {
                    reserve_mib: c.lane.memory_reserve_mib,
                },
                None,
                file("memory-reserve", None),
            );
        }
        if !c.gates.preflight.is_empty() {
            push(
                Phase::Arm,
                Some(id),
                StepKind::Preflight {
                    gates: c.gates.preflight.clone(),
                },
                None,
                file("preflight", None),
            );
        }
        let timing = |state: RunState, concurrency: u32, requests: u32| StepKind::Timing {
            state,
            prompt_tokens: w.matched_prompt_tokens,
            max_tokens: w.max_tokens,
            concurrency,
            requests,
            ignore_eos: w.sampling.ignore_eos,
        };
        let mut levels: Vec<u32> = w.concurrency.iter().copied().filter(|&n| n > 1).collect();
        levels.sort_unstable();
        let mut shapes = vec![
            (timing(RunState::Cold, 1, 1), format!("{label}-c1-cold")),
            (
                timing(RunState::Warm, 1, w.warm_repetitions),
                format!("{label}-c1-warm"),
            ),
        ];
        for n in levels {
            shapes.push((
                timing(RunState::Warm, n, n.saturating_mul(w.warm_repetitions)),
                format!("{label}-c{n}-warm"),
            ));
        }
        for (kind, shape) in shapes {
            let f = file("timing", Some(&shape));
            push(Phase::Arm, Some(id), kind, Some(shape), f);
        }
        if let (Some(rg), Some((profile, tokens))) =
            (&c.gates.retrieval, c.long_context_target(arm))
        {
            let shape = tokens.to_string();
            push(
                Phase::Arm,
                Some(id),
                StepKind::Retrieval {
                    profile: profile.to_string(),
                    target_tokens: tokens,
                    needles: rg.needles,
                    depths: rg.depths.clone(),
                    max_tokens: rg.max_tokens,
                },
                Some(shape.clone()),
                file("retrieval", Some(&shape)),
            );
            let shape = format!("{tokens}-c1-long");
            push(
                Phase::Arm,
                Some(id),
                StepKind::LongContextTiming {
                    prompt_tokens: tokens,
                    max_tokens: w.max_tokens,
                    requests: LONG_CONTEXT_REQUESTS,
                },
                Some(shape.clone()),
                file("timing", Some(&shape)),
            );
        }
        if let Some(t) = &c.gates.tools {
            push(
                Phase::Arm,
                Some(id),
                StepKind::Tools {
                    suite: t.suite.clone(),
                    batch: t.batch,
                    variants: t.variants.clone(),
                },
                None,
                file("tools", None),
            );
        }
        if let Some(q) = &c.gates.quality {
            push(
                Phase::Arm,
                Some(id),
                StepKind::Quality {
                    suite: q.suite.clone(),
                    repetitions: q.repetitions,
                    reasoning_headroom: q.reasoning_headroom,
                },
                None,
                file("quality", None),
            );
        }
        if managed {
            push(
                Phase::Arm,
                Some(id),
                StepKind::Stop,
                None,
                file("stop", None),
            );
        }
    }

    if inc_managed {
        push(
            Phase::Restoration,
            Some(&inc.id),
            StepKind::RestoreIncumbent,
            None,
            bundle::RESTORATION_LAUNCH.into(),
        );
    }
    push(
        Phase::Restoration,
        Some(&inc.id),
        StepKind::RestorationIdentity {
            recipe_hash: c.recipe_hash(inc),
            argv_env_hash: c.argv_env_hash(inc),
            served_model: inc.served_model.clone(),
            served_context: inc.served_context,
        },
        None,
        bundle::RESTORATION_IDENTITY.into(),
    );
    push(
        Phase::Restoration,
        Some(&inc.id),
        StepKind::RestorationPreflight {
            gates: c.gates.preflight.clone(),
        },
        None,
        bundle::RESTORATION_PREFLIGHT.into(),
    );
    Plan {
        campaign: c.clone(),
        request: RequestContract {
            api: w.api,
            sampling: w.sampling.clone(),
            defeat_prefix_cache: !w.allow_prefix_cache,
            sizing_timeout_s: 300,
        },
        steps,
    }
}

fn list<T, F: Fn(&T) -> String>(items: &[T], f: F) -> String {
    if items.is_empty() {
        "none".into()
    } else {
        items.iter().map(f).collect::<Vec<_>>().join(", ")
    }
}

impl Plan {
    /// The steps that act on `arm` (its own steps, plus the incumbent steps for the incumbent).
    pub fn steps_for<'a>(&'a self, arm: &'a str) -> impl Iterator<Item = &'a PlanStep> + 'a {
        self.steps
            .iter()
            .filter(move |s| s.arm.as_deref() == Some(arm))
    }

    /// Every evidence file the plan writes, in order.
    pub fn evidence_files(&self) -> Vec<&str> {
        self.steps.iter().map(|s| s.evidence.as_str()).collect()
    }

    /// The human-readable dry run: identity, lane, workload, gates, then per phase and arm the
    /// exact commands and the numbered steps with their evidence files, then the policy. A
    /// `from_env` value appears only as `NAME=<from $NAME, masked>`; `mask` scrubs any secret
    /// value that would still appear.
    pub fn render(&self, mask: &Mask) -> String {
        let c = &self.campaign;
        let mut o = String::new();
        let id = &c.campaign;
        let _ = writeln!(
            o,
            "bakeoff dry run of campaign {} (nothing is started and no request is sent)",
            id.id
        );
        let _ = writeln!(
            o,
            "  file       {} (sha256 {})",
            c.source.path.display(),
            c.source.sha256
        );
        if let Some(d) = &id.description {
            let _ = writeln!(o, "  about      {}", d.replace('\n', " "));
        }
        let hw = if id.hardware_is_auto() {
            "auto (detected at run time)".to_string()
        } else {
            id.hardware.clone()
        };
        let _ = writeln!(o, "  hardware   {hw}");
        let _ = writeln!(o, "  topology   {}", id.topology);
        let _ = writeln!(o, "  output     {}", id.output.display());
        let l = &c.lane;
        let _ = writeln!(
            o,
            "lane         {} (health {}, ready within {} s, stop grace {} s)",
            l.base_url(),
            l.health_path,
            l.ready_timeout_s,
            l.stop_grace_s
        );
        if l.gpus.is_empty() {
            let _ = writeln!(
                o,
                "  gpus       none: the idle baseline and memory-reserve steps are left out"
            );
        } else {
            let _ = writeln!(
                o,
                "  gpus       {}; keep {} MiB free after an arm is ready; idle baseline at most {} MiB used",
                l.gpus.join(", "),
                l.memory_reserve_mib,
                l.idle_baseline_max_mib
            );
        }
        let w = &c.workload;
        let _ = writeln!(
            o,
            "workload     matched prompt {} tokens (label {}), max_tokens {}, {} API, prefix cache {}",
            w.matched_prompt_tokens,
            w.prompt_label,
            w.max_tokens,
            match w.api {
                super::spec::ApiKind::Chat => "chat",
                super::spec::ApiKind::Completions => "completions",
            },
            if w.allow_prefix_cache { "allowed" } else { "defeated by a nonce" }
        );
        let _ = writeln!(
            o,
            "  runs       1 cold request, {} warm repetitions at c1; concurrency levels {}",
            w.warm_repetitions,
            list(&w.concurrency, |n| n.to_string())
        );
        let s = &w.sampling;
        let _ = writeln!(
            o,
            "  sampling   temperature {}, top_p {}, seed {}, ignore_eos {}",
            s.temperature,
            s.top_p.map_or("unset".to_string(), |t| t.to_string()),
            s.seed,
            s.ignore_eos
        );
        if !w.long_context_targets.is_empty() {
            let t: Vec<(&String, &u64)> = w.long_context_targets.iter().collect();
            let _ = writeln!(
                o,
                "  long ctx   {}",
                list(&t, |(k, v)| format!("{k} = {v} tokens"))
            );
        }
        let _ = writeln!(
            o,
            "  ranking    {}",
            w.ranking_priority
                .iter()
                .map(|m| m.as_str())
                .collect::<Vec<_>>()
                .join(" > ")
        );
        let g = &c.gates;
        let _ = writeln!(
            o,
            "gates        preflight: {}",
            list(&g.preflight, |x| x.as_str().to_string())
        );
        if let Some(t) = &g.tools {
            let _ = writeln!(
                o,
                "  tools      {} requests per variant ({}), suite {}",
                t.batch,
                list(&t.variants, |v| v.as_str().to_string()),
                t.suite
                    .as_ref()
                    .map_or("built-in".to_string(), |p| p.display().to_string())
            );
        }
        if let Some(r) = &g.retrieval {
            let _ = writeln!(
                o,
                "  retrieval  {} needle(s) at depths {}, answer max_tokens {}",
                r.needles,
                list(&r.depths, |d| d.to_string()),
                r.max_tokens
            );
        }
        if let Some(q) = &g.quality {
            let _ = writeln!(
                o,
                "  quality    {} repetition(s), suite {}",
                q.repetitions,
                q.suite
                    .as_ref()
                    .map_or("built-in".to_string(), |p| p.display().to_string())
            );
        }

        let _ = writeln!(
            o,
            "\nplan: {} arms, {} steps",
            c.arms.len(),
            self.steps.len()
        );
        let width = self
            .steps
            .iter()
            .map(|s| s.evidence.len())
            .max()
            .unwrap_or(0);
        let mut current: Option<(Phase, Option<&str>)> = None;
        for step in &self.steps {
            let key = (
                step.phase,
                if step.phase == Phase::Arm {
                    step.arm.as_deref()
                } else {
                    None
                },
            );
            if current != Some(key) {
                current = Some(key);
                match step.phase {
                    Phase::Setup => {
                        let _ = writeln!(o, "\nsetup");
                    }
                    Phase::Restoration => {
                        let _ = writeln!(o, "\nrestoration of incumbent {}", c.incumbent().id);
                    }
                    Phase::Arm => {
                        if let Some(arm) = step.arm.as_deref().and_then(|a| c.arm(a)) {
                            render_arm_header(&mut o, c, arm, mask);
                        }
                    }
                }
            }
            let _ = writeln!(
                o,
                "  {:>3}. {:<21} {:<width$} {}",
                step.number,
                step.kind.name(),
                step.evidence,
                describe(c, step)
            );
        }

        let p = &c.policy;
        let _ = writeln!(o, "\npolicy");
        let _ = writeln!(
            o,
            "  promotion        {}",
            match p.promotion {
                Promotion::Manual => "manual (the verdict recommends; a person promotes)",
                Promotion::Auto => "auto (an eligible winner may be promoted without a person)",
            }
        );
        let _ = writeln!(
            o,
            "  required gates   {}",
            list(&p.required_gates, |g| g.as_str().to_string())
        );
        let _ = writeln!(
            o,
            "  required labels  {}",
            list(&p.required_evidence_labels, |l| l.clone())
        );
        let tol: Vec<String> = p
            .tie_tolerance
            .iter()
            .map(|(m, t)| format!("{} {}%", m.as_str(), t * 100.0))
            .collect();
        let _ = writeln!(o, "  tie tolerance    {}", list(&tol, |s| s.clone()));
        if p.quality_risks.is_empty() {
            let _ = writeln!(o, "  quality risks    none");
        } else {
            let _ = writeln!(o, "  quality risks    engine log lines containing:");
            for q in &p.quality_risks {
                let _ = writeln!(o, "    {:?} → limitation: {}", q.pattern, q.limitation);
            }
        }
        mask.scrub(&o)
    }
}

fn render_arm_header(o: &mut String, c: &Campaign, arm: &Arm, mask: &Mask) {
    let _ = writeln!(
        o,
        "\narm {} ({}, {}){}",
        arm.id,
        arm.role.as_str(),
        arm.kind().as_str(),
        if arm.label != arm.id {
            format!(": {}", arm.label)
        } else {
            String::new()
        }
    );
    let quant = arm
        .quantization
        .as_deref()
        .map(|q| format!(", {q}"))
        .unwrap_or_default();
    let _ = writeln!(
        o,
        "       engine {}; model {}{quant}",
        arm.engine, arm.model
    );
    let mut serves = format!(
        "       serves `{}`, context {} tokens",
        arm.served_model, arm.served_context
    );
    if let Some((name, tokens)) = c.long_context_target(arm) {
        let _ = write!(serves, "; long-context profile {name} ({tokens} tokens)");
    }
    let _ = writeln!(o, "{serves}");
    if let Some(s) = &arm.speculative {
        let mut t = format!("       speculative {}", s.method);
        if let Some(d) = &s.draft_model {
            let _ = write!(t, ", draft {d}");
        }
        if let Some(k) = s.draft_tokens {
            let _ = write!(t, ", {k} draft tokens");
        }
        let _ = writeln!(o, "{t}; matched control {}", s.control);
    }
    if let Some(k) = &arm.api_key_env {
        let _ = writeln!(o, "       api key from ${k} (masked)");
    }
    let _ = writeln!(
        o,
        "       recipe sha256 {}; argv/env sha256 {}",
        c.recipe_hash(arm),
        c.argv_env_hash(arm)
    );
    match (c.launch_command(arm), arm.recipe()) {
        (Some(l), _) => {
            if let Some(cwd) = &l.start.cwd {
                let _ = writeln!(o, "       cwd   {}", cwd.display());
            }
            let self_note = if l.start.self_exe {
                "  (bakeoff = this executable)"
            } else {
                ""
            };
            let _ = writeln!(o, "       start {}{self_note}", l.start.display(mask));
            match &l.stop {
                StopMethod::ProcessGroup { grace_s } => {
                    let _ = writeln!(
                        o,
                        "       stop  SIGTERM to the process group, SIGKILL after {grace_s} s"
                    );
                }
                StopMethod::Commands { commands } => {
                    for cmd in commands {
                        let _ = writeln!(o, "       stop  {}", cmd.display(mask));
                    }
                }
                StopMethod::NotManaged => {}
            }
        }
        (None, RecipeRef::Endpoint(e)) => {
            let _ = writeln!(
                o,
                "       endpoint {} (already running; measured, never started or stopped)",
                e.url
            );
        }
        (None, _) => {}
    }
}

fn describe(c: &Campaign, step: &PlanStep) -> String {
    let arm = step.arm.as_deref().unwrap_or("");
    match &step.kind {
        StepKind::StopIncumbent => format!("stop incumbent {arm} to free the lane"),
        StepKind::GpuIdleBaseline { max_used_mib } => {
            format!("lane GPUs with nothing running; fail above {max_used_mib} MiB used")
        }
        StepKind::Launch => "start the recipe".into(),
        StepKind::Ready {
            served_model,
            served_context,
            timeout_s,
        } => {
            let managed = c.arm(arm).is_some_and(|a| a.kind().managed());
            format!(
                "health 200 and /v1/models lists `{served_model}` (context {served_context}) within {timeout_s} s{}",
                if managed { "; fail fast on exit" } else { "" }
            )
        }
        StepKind::MemoryReserve { reserve_mib } => format!("at least {reserve_mib} MiB GPU memory free"),
        StepKind::Preflight { gates } => list(gates, |g| g.as_str().to_string()),
        StepKind::Timing {
            state,
            prompt_tokens,
            max_tokens,
            concurrency,
            requests,
            ignore_eos,
        } => format!(
            "{} {requests} request(s) at c{concurrency}, {prompt_tokens} prompt + {max_tokens} max tokens{}",
            state.as_str(),
            if *ignore_eos { ", ignore_eos" } else { "" }
        ),
        StepKind::LongContextTiming {
            prompt_tokens,
            max_tokens,
            requests,
        } => format!(
            "{requests} request(s) at c1, {prompt_tokens} prompt + {max_tokens} max tokens, ignore_eos (decode speed at long context)"
        ),
        StepKind::Retrieval {
            profile,
            target_tokens,
            needles,
            depths,
            ..
        } => format!(
            "{profile}: {target_tokens}-token prompt, {needles} needle(s) at depths {}",
            list(depths, |d| d.to_string())
        ),
        StepKind::Tools { batch, variants, .. } => format!(
            "{batch} per variant: {}",
            list(variants, |v| v.as_str().to_string())
        ),
        StepKind::Quality { repetitions, .. } => format!("{repetitions} repetition(s)"),
        StepKind::Stop => {
            if c.lane.gpus.is_empty() {
                "stop; lane port released".into()
            } else {
                "stop; lane port and GPU memory released".into()
            }
        }
        StepKind::RestoreIncumbent => format!("start {arm} again from the same recipe; wait until ready"),
        StepKind::RestorationIdentity {
            served_model,
            served_context,
            ..
        } => format!(
            "same recipe hash, argv/env hash, served model `{served_model}` and context {served_context}"
        ),
        StepKind::RestorationPreflight { gates } => list(gates, |g| g.as_str().to_string()),
    }
}
