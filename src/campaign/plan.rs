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

use super::spec::{ApiKind, Campaign, PreflightGate, Sampling, ToolVariant};
use crate::evidence::bundle;
use serde::Serialize;
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
        /// The SLO limits checked at this level (`[[workload.slo]]`), with goodput under them;
        /// warm steps only, empty without SLOs.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        slo: Vec<crate::metrics::slo::SloLimit>,
        /// With a dataset or synthetic source (`RequestContract::source`): the work item of the
        /// step's first request; request i sends item `first_item + i` (mod the items), the same
        /// on every arm.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        first_item: Option<u64>,
        /// An open-loop step (`[workload.open_loop]`): requests start at a rate, `concurrency`
        /// is then the cap (0: none). None: the closed loop at `concurrency`.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        open_loop: Option<OpenLoopStep>,
    },
    /// The arm's capacity under SLOs (`[workload.capacity]`): adaptive open-loop probes.
    Capacity(super::capacity::CapacityStep),
    /// The arm replays `[workload.trace]` at its arrival times.
    Trace(super::spec::Trace),
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
            StepKind::Capacity(_) => "capacity",
            StepKind::Trace(_) => "trace",
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

/// The load of an open-loop timing step: `requests` measured requests started at `rate` per
/// second (`bench --rate`), at most `max_concurrency` in flight, after a warm-up by count and/or
/// by time.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct OpenLoopStep {
    pub rate: f64,
    pub arrival: super::spec::ArrivalProcess,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_concurrency: Option<u32>,
    pub warmup: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub warmup_secs: Option<f64>,
}

impl OpenLoopStep {
    /// The step's key in an arm's results and its shape label: `r4`, `r2.5-cap8`.
    pub fn key(&self) -> String {
        match self.max_concurrency {
            Some(c) => format!("r{}-cap{c}", self.rate),
            None => format!("r{}", self.rate),
        }
    }

    /// Request indices to reserve for a step of `requests` measured requests whose arrivals
    /// are `per` requests each (a conversation's turns; else 1): the measured arrivals, the
    /// warm-up by count, and the load's own bound on the warm-up by time (its count is not
    /// known before), each arrival numbered `arrival·per + k`.
    pub fn indices(&self, requests: u32, per: u32) -> u64 {
        let per = u64::from(per.max(1));
        let by_time = self
            .warmup_secs
            .map_or(0, |s| (s * self.rate * 3.0).ceil() as u64 + 16);
        let arrivals =
            u64::from(requests).div_ceil(per) + u64::from(self.warmup).div_ceil(per) + by_time;
        arrivals * per
    }

    /// The dry run's words: `open loop at 4 req/s (poisson), cap 8, warm-up 5 s`.
    pub fn describe(&self) -> String {
        let cap = match self.max_concurrency {
            Some(c) => format!("cap {c} in flight"),
            None => "no cap".into(),
        };
        let warm = warmup_words(self.warmup, self.warmup_secs);
        format!(
            "open loop at {} req/s ({}), {cap}, {warm}",
            self.rate,
            self.arrival.as_str()
        )
    }
}

/// A warm-up by count and/or time in words: `no warm-up`, `warm-up 5 s`, `warm-up 2 request(s)`.
pub fn warmup_words(warmup: u32, secs: Option<f64>) -> String {
    match (warmup, secs) {
        (0, None) => "no warm-up".to_string(),
        (0, Some(s)) => format!("warm-up {s} s"),
        (n, None) => format!("warm-up {n} request(s)"),
        (n, Some(s)) => format!("warm-up {n} request(s) and {s} s"),
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
    /// Where the timed requests' prompts come from beside the matched prompt
    /// (`[workload.dataset]`, `.synthetic`, `.conversation`, `.shared_prefix`); None: the
    /// matched prompt.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<WorkSource>,
}

/// A timed step's workload source, with everything it needs (parsed, digested).
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum WorkSource {
    /// A dataset file: its path, SHA-256 (read at load) and sampling; every arm sends the same
    /// items in the same order.
    Dataset(super::spec::DatasetSource),
    /// Synthetic lengths: `pool` seeded draws, request k sending draw k mod pool.
    Synthetic {
        input_tokens: Option<crate::workload::synthetic::Dist>,
        output_tokens: Option<crate::workload::synthetic::Dist>,
        seed: u64,
        pool: usize,
    },
    /// Multi-turn conversations; each user turn is a matched prompt of `matched_prompt_tokens`,
    /// or (with `dataset`) the conversations of a dataset replayed, user turn by user turn; with
    /// `shared_prefix` each conversation starts with one of its groups' prefixes.
    Conversation {
        turns: u32,
        think_time_ms: f64,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        dataset: Option<super::spec::DatasetSource>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        shared_prefix: Option<super::spec::SharedPrefixSource>,
    },
    /// Every prompt starts with one of `groups` shared prefixes of `tokens` tokens.
    SharedPrefix {
        tokens: u64,
        groups: u32,
        order: super::spec::PrefixOrder,
        seed: u64,
    },
}

impl RequestContract {
    /// Whether every timed request's prompt is the matched prompt's size: the matched prompt
    /// itself, or a shared prefix and the rest of the matched prompt. Datasets and synthetic
    /// lengths send other sizes, and a conversation's later turns carry the turns before them.
    pub fn sends_matched_size(&self) -> bool {
        matches!(self.source, None | Some(WorkSource::SharedPrefix { .. }))
    }
}

/// Most synthetic draws sized per arm (bench's bound).
pub const MAX_SYNTHETIC_POOL: usize = 4096;

/// The plan's workload source (None: the matched prompt). `requests`: the timed requests of one
/// arm (the synthetic pool).
pub fn work_source(w: &super::spec::Workload, requests: u64) -> Option<WorkSource> {
    use crate::workload::synthetic::Dist;
    if let Some(c) = &w.conversation {
        return Some(WorkSource::Conversation {
            turns: c.turns,
            think_time_ms: c.think_time_ms,
            dataset: w.dataset.clone(),
            shared_prefix: w.shared_prefix.clone(),
        });
    }
    if let Some(d) = &w.dataset {
        return Some(WorkSource::Dataset(d.clone()));
    }
    if let Some(s) = &w.synthetic {
        // Validated at load; a distribution that does not parse is left out.
        let parse = |v: &Option<String>| v.as_deref().and_then(|v| Dist::parse("", v).ok());
        return Some(WorkSource::Synthetic {
            input_tokens: parse(&s.input_tokens),
            output_tokens: parse(&s.output_tokens),
            seed: s.seed,
            pool: (requests as usize).clamp(1, MAX_SYNTHETIC_POOL),
        });
    }
    w.shared_prefix.as_ref().map(|p| WorkSource::SharedPrefix {
        tokens: p.tokens,
        groups: p.groups,
        order: p.order,
        seed: p.seed,
    })
}

impl WorkSource {
    /// Dataset and synthetic sources send work items (the steps number them).
    pub fn has_items(&self) -> bool {
        matches!(self, WorkSource::Dataset(_) | WorkSource::Synthetic { .. })
    }
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
    /// The suites the gate steps run, as read when the plan was made.
    pub suites: Vec<SuiteDigest>,
    /// Which lane each arm runs on, in what order (one lane: every arm, in file order).
    #[serde(skip)]
    pub schedule: super::schedule::Schedule,
}

/// A suite a gate runs: where it comes from, the SHA-256 of its bytes and how many cases (tools)
/// or items (quality) it holds, so a case that vanished from the file shows in the plan.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SuiteDigest {
    /// `tools` or `quality`.
    pub gate: String,
    /// The file, or the built-in suite's repository path.
    pub path: String,
    pub sha256: String,
    pub cases: usize,
}

/// The campaign's suites, read now (a suite that does not load is left out: validation has
/// refused it already).
pub fn suite_digests(c: &Campaign) -> Vec<SuiteDigest> {
    use crate::gates::builtin::{load_quality, load_tools};
    let mut out = Vec::new();
    if let Some(t) = &c.gates.tools {
        if let Ok(s) = load_tools(t.suite.as_deref()) {
            out.push(SuiteDigest {
                gate: "tools".into(),
                path: s.path.display().to_string(),
                sha256: s.sha256.clone(),
                cases: s.cases.len(),
            });
        }
    }
    if let Some(q) = &c.gates.quality {
        if let Ok(s) = load_quality(q.suite.as_deref()) {
            out.push(SuiteDigest {
                gate: "quality".into(),
                path: s.path.display().to_string(),
                sha256: s.sha256.clone(),
                cases: s.items.len(),
            });
        }
    }
    out
}

/// Expands a loaded campaign into its steps.
pub fn plan(c: &Campaign) -> Plan {
    let mut b = Builder::default();
    let inc = c.incumbent();
    let gpus = !c.lane.gpus.is_empty();
    if inc.kind().managed() {
        b.setup(&inc.id, StepKind::StopIncumbent, bundle::INCUMBENT_SHUTDOWN);
    }
    if gpus {
        let kind = StepKind::GpuIdleBaseline {
            max_used_mib: c.lane.idle_baseline_max_mib,
        };
        b.push(
            Phase::Setup,
            None,
            kind,
            None,
            bundle::GPU_IDLE_BASELINE.into(),
        );
    }
    let w = &c.workload;
    // Timed requests per arm: cold c1 (1), warm c1, and each level above 1.
    let per_arm: u64 = 1
        + u64::from(w.warm_repetitions)
            * (1 + w
                .concurrency
                .iter()
                .filter(|&&n| n > 1)
                .map(|&n| u64::from(n))
                .sum::<u64>())
        + w.open_loop.as_ref().map_or(0, |o| {
            o.rates.len() as u64 * (u64::from(o.requests) + u64::from(o.warmup))
        });
    let source = work_source(w, per_arm);
    let items = source.as_ref().is_some_and(WorkSource::has_items);
    for arm in &c.arms {
        arm_steps(&mut b, c, arm, items);
    }
    restoration_steps(&mut b, c);
    let schedule = schedule(c, &b.steps);
    Plan {
        campaign: c.clone(),
        request: RequestContract {
            api: w.api,
            sampling: w.sampling.clone(),
            defeat_prefix_cache: !w.allow_prefix_cache,
            sizing_timeout_s: 300,
            source,
        },
        steps: b.steps,
        suites: suite_digests(c),
        schedule,
    }
}

/// The arms over the campaign's lanes, each weighed by its arm steps in the plan.
fn schedule(c: &Campaign, steps: &[PlanStep]) -> super::schedule::Schedule {
    use super::schedule::{assign, ArmLoad, LaneSlot};
    let lanes: Vec<LaneSlot> = c
        .lanes()
        .into_iter()
        .map(|l| LaneSlot {
            address: l.lane.address(),
            id: l.id,
            incumbent: l.incumbent,
        })
        .collect();
    let arms: Vec<ArmLoad> = c
        .arms
        .iter()
        .map(|a| ArmLoad {
            id: a.id.clone(),
            steps: steps
                .iter()
                .filter(|s| s.phase == Phase::Arm && s.arm.as_deref() == Some(a.id.as_str()))
                .count(),
            paired_with: a.speculative.as_ref().map(|s| s.control.clone()),
            bound_to: c.bound_lane(a),
        })
        .collect();
    assign(&lanes, &arms)
}

/// The plan's steps as they are added, numbered in order.
#[derive(Default)]
struct Builder {
    steps: Vec<PlanStep>,
}

impl Builder {
    fn push(
        &mut self,
        phase: Phase,
        arm: Option<&str>,
        kind: StepKind,
        shape: Option<String>,
        evidence: String,
    ) {
        self.steps.push(PlanStep {
            number: self.steps.len() + 1,
            phase,
            arm: arm.map(str::to_string),
            kind,
            shape,
            evidence,
        });
    }

    fn setup(&mut self, arm: &str, kind: StepKind, evidence: &str) {
        self.push(Phase::Setup, Some(arm), kind, None, evidence.into());
    }

    fn restoration(&mut self, arm: &str, kind: StepKind, evidence: &str) {
        self.push(Phase::Restoration, Some(arm), kind, None, evidence.into());
    }

    /// An arm step; its evidence file is `<arm>-<step>[-<shape>].json`.
    fn arm(&mut self, arm: &str, kind: StepKind, shape: Option<String>) {
        let step = kind.name();
        self.arm_filed_as(arm, step, kind, shape);
    }

    /// An arm step whose evidence file is named after `step` (the long-context timing files
    /// are timing files: `<arm>-timing-<tokens>-c1-long.json`).
    fn arm_filed_as(&mut self, arm: &str, step: &str, kind: StepKind, shape: Option<String>) {
        let evidence = bundle::step_file(arm, step, shape.as_deref());
        self.push(Phase::Arm, Some(arm), kind, shape, evidence);
    }
}

/// One arm's steps: launch, ready, memory reserve, preflight, timing, long context, tools,
/// quality, stop (each when the campaign and the arm's kind call for it).
fn arm_steps(b: &mut Builder, c: &Campaign, arm: &super::Arm, items: bool) {
    let id = arm.id.as_str();
    let managed = arm.kind().managed();
    if managed {
        b.arm(id, StepKind::Launch, None);
    }
    let ready = StepKind::Ready {
        served_model: arm.served_model.clone(),
        served_context: arm.served_context,
        timeout_s: c.lane.ready_timeout_s,
    };
    b.arm(id, ready, None);
    if managed && !c.lane.gpus.is_empty() {
        let reserve_mib = c.lane.memory_reserve_mib;
        b.arm(id, StepKind::MemoryReserve { reserve_mib }, None);
    }
    if !c.gates.preflight.is_empty() {
        let gates = c.gates.preflight.clone();
        b.arm(id, StepKind::Preflight { gates }, None);
    }
    timing_steps(b, c, id, items);
    if let Some(k) = super::capacity::CapacityStep::of(&c.workload) {
        b.arm(id, StepKind::Capacity(k), None);
    }
    if let Some(t) = &c.workload.trace {
        b.arm(id, StepKind::Trace(t.clone()), None);
    }
    if let (Some(rg), Some((profile, tokens))) = (&c.gates.retrieval, c.long_context_target(arm)) {
        let retrieval = StepKind::Retrieval {
            profile: profile.to_string(),
            target_tokens: tokens,
            needles: rg.needles,
            depths: rg.depths.clone(),
            max_tokens: rg.max_tokens,
        };
        b.arm(id, retrieval, Some(tokens.to_string()));
        let long = StepKind::LongContextTiming {
            prompt_tokens: tokens,
            max_tokens: c.workload.max_tokens,
            requests: LONG_CONTEXT_REQUESTS,
        };
        b.arm_filed_as(id, "timing", long, Some(format!("{tokens}-c1-long")));
    }
    if let Some(t) = &c.gates.tools {
        let tools = StepKind::Tools {
            suite: t.suite.clone(),
            batch: t.batch,
            variants: t.variants.clone(),
        };
        b.arm(id, tools, None);
    }
    if let Some(q) = &c.gates.quality {
        let quality = StepKind::Quality {
            suite: q.suite.clone(),
            repetitions: q.repetitions,
            reasoning_headroom: q.reasoning_headroom,
        };
        b.arm(id, quality, None);
    }
    if managed {
        b.arm(id, StepKind::Stop, None);
    }
}

/// The timed steps of arm `id`: cold c1, warm c1, then each warm level above 1. With a work set
/// of items, each step takes the next `requests` items.
fn timing_steps(b: &mut Builder, c: &Campaign, id: &str, items: bool) {
    let w = &c.workload;
    let label = c.prompt_label();
    let timing = |state: RunState, concurrency: u32, requests: u32| StepKind::Timing {
        state,
        prompt_tokens: w.matched_prompt_tokens,
        max_tokens: w.max_tokens,
        concurrency,
        requests,
        ignore_eos: w.sampling.ignore_eos,
        slo: match state {
            RunState::Warm => w.slo_at(concurrency),
            RunState::Cold => Vec::new(),
        },
        first_item: None,
        open_loop: None,
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
    shapes.extend(open_loop_steps(w, label));
    let mut next_item = 0u64;
    for (mut kind, shape) in shapes {
        if let (
            StepKind::Timing {
                requests,
                first_item,
                ..
            },
            true,
        ) = (&mut kind, items)
        {
            *first_item = Some(next_item);
            next_item += u64::from(*requests);
        }
        b.arm(id, kind, Some(shape));
    }
}

/// The open-loop steps of `[workload.open_loop]`: one warm step per rate, in the order given,
/// named `<label>-r<rate>[-cap<C>]-warm`.
fn open_loop_steps(w: &super::spec::Workload, label: &str) -> Vec<(StepKind, String)> {
    let Some(o) = &w.open_loop else {
        return Vec::new();
    };
    o.rates
        .iter()
        .map(|&rate| {
            let step = OpenLoopStep {
                rate,
                arrival: o.arrival,
                max_concurrency: o.max_concurrency,
                warmup: o.warmup,
                warmup_secs: o.warmup_secs,
            };
            let shape = format!("{label}-{}-warm", step.key());
            let kind = StepKind::Timing {
                state: RunState::Warm,
                prompt_tokens: w.matched_prompt_tokens,
                max_tokens: w.max_tokens,
                concurrency: o.max_concurrency.unwrap_or(0),
                requests: o.requests,
                ignore_eos: w.sampling.ignore_eos,
                slo: w.slo_open_loop(),
                first_item: None,
                open_loop: Some(step),
            };
            (kind, shape)
        })
        .collect()
}

/// The incumbent put back (when bakeoff starts it) and proven: identity, then a fresh preflight.
fn restoration_steps(b: &mut Builder, c: &Campaign) {
    let inc = c.incumbent();
    if inc.kind().managed() {
        b.restoration(
            &inc.id,
            StepKind::RestoreIncumbent,
            bundle::RESTORATION_LAUNCH,
        );
    }
    let identity = StepKind::RestorationIdentity {
        recipe_hash: c.recipe_hash(inc),
        argv_env_hash: c.argv_env_hash(inc),
        served_model: inc.served_model.clone(),
        served_context: inc.served_context,
    };
    b.restoration(&inc.id, identity, bundle::RESTORATION_IDENTITY);
    let gates = c.gates.preflight.clone();
    b.restoration(
        &inc.id,
        StepKind::RestorationPreflight { gates },
        bundle::RESTORATION_PREFLIGHT,
    );
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
}

#[cfg(test)]
mod tests {
    /// Every step kind a campaign can plan, with the evidence file each writes: the names are
    /// the bundle's contract (resume, verify and the reports find steps by them).
    #[test]
    fn the_plan_names_every_steps_evidence_file() {
        let d = tempfile::tempdir().unwrap();
        let f = d.path().join("campaign.toml");
        let arm = |id: &str, role: &str| {
            format!(
                "[[arms]]\nid = \"{id}\"\nrole = \"{role}\"\nengine = \"e\"\nmodel = \"m\"\nserved_model = \"m\"\nserved_context = 8192\nlong_context_profile = \"full\"\n[arms.process]\nargv = [\"/bin/sleep\", \"100\"]\n"
            )
        };
        let text = format!(
            "[campaign]\nid = \"plan-test\"\n[lane]\nport = 18996\ngpus = [\"GPU-1\"]\n[workload]\nranking_priority = [\"ttft\"]\nmatched_prompt_tokens = 64\nmax_tokens = 8\nwarm_repetitions = 2\nconcurrency = [1, 4, 2]\nlong_context_targets = {{ full = 600 }}\n[gates]\npreflight = [\"smoke\"]\n[gates.tools]\n[gates.retrieval]\n[gates.quality]\n{}{}",
            arm("inc", "incumbent"),
            arm("a", "candidate")
        );
        std::fs::write(&f, text).unwrap();
        let c = crate::campaign::load(&f).unwrap_or_else(|e| panic!("{e}"));
        let p = super::plan(&c);
        let got: Vec<String> = p
            .steps
            .iter()
            .map(|s| format!("{} {}", s.kind.name(), s.evidence))
            .collect();
        let mut want = vec![
            "stop-incumbent incumbent-shutdown.json".to_string(),
            "gpu-idle-baseline gpu-idle-baseline.json".to_string(),
        ];
        for a in ["inc", "a"] {
            for (step, file) in [
                ("launch", "launch"),
                ("ready", "ready"),
                ("memory-reserve", "memory-reserve"),
                ("preflight", "preflight"),
                ("timing", "timing-64-c1-cold"),
                ("timing", "timing-64-c1-warm"),
                ("timing", "timing-64-c2-warm"),
                ("timing", "timing-64-c4-warm"),
                ("retrieval", "retrieval-600"),
                ("long-context-timing", "timing-600-c1-long"),
                ("tools", "tools"),
                ("quality", "quality"),
                ("stop", "stop"),
            ] {
                want.push(format!("{step} {a}-{file}.json"));
            }
        }
        want.extend([
            "restore-incumbent restoration-launch.json".to_string(),
            "restoration-identity restoration-identity.json".to_string(),
            "restoration-preflight restoration-preflight.json".to_string(),
        ]);
        assert_eq!(got, want);
        assert!(p.steps.iter().enumerate().all(|(i, s)| s.number == i + 1));
    }
}
