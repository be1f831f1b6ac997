//! One timed step: the matched prompt (or the campaign's workload source: dataset items,
//! synthetic lengths, multi-turn conversations (replayed from a dataset, opened with a shared
//! prefix), shared prefixes) at a fixed concurrency, closed loop, or at a rate, open loop (with
//! an optional cap and a warm-up by count or time; the level plan is `bench`'s), with an engine
//! `/metrics` snapshot before and after and GPU samples where the lane has GPUs.

use super::client_node::NodeClient;
use super::client_step::{self, LoadOut};
use crate::bench::conv::{self, PrefixPlan, SourceParts};
use crate::bench::line::LineWriter;
use crate::bench::sweep::Level;
use crate::bench::{ArrivalKind, LoadMode, LoadRecord, LoadShape};
use crate::campaign::plan::OpenLoopStep;
use crate::campaign::ArrivalProcess;
use crate::client::{StreamOpts, Target};
use crate::evidence::result::{Stat, TimingRecord};
use crate::load::places::{PlaceSummary, Shape};
use crate::load::session;
use crate::load::source::PromptText;
use crate::load::{Mode, Plan, Source};
use crate::metrics::summary::RunStats;
use crate::workload::conversation::{GroupOrder, Scripts};
use crate::workload::items::WorkSet;
use crate::workload::prefix::PrefixPrompt;
use crate::workload::prompt::MatchedPrompt;
use serde_json::{json, Map, Value};
use std::sync::Arc;
use std::time::Duration;

/// A timed request's limit and its longest silence, seconds.
const TIMEOUT_S: f64 = 600.0;
const STALL_S: f64 = 120.0;

/// Everything a timed step needs (owned: it runs in its own task).
pub struct TimingInput {
    pub target: Target,
    /// The shared body (`workload::request::BodySpec`); the prompt is added per request.
    pub base: Map<String, Value>,
    /// The matched prompt: what every request sends, or the user turn of a conversation, or
    /// the request's own part after a shared prefix; its endpoint and nonce setting are the
    /// step's (dataset items and synthetic lengths send their own prompts).
    pub prompt: Arc<MatchedPrompt>,
    pub api_key: Option<String>,
    pub concurrency: u32,
    pub requests: u32,
    /// An open-loop step: its rate, arrivals, cap and warm-up (`concurrency` is then unused).
    pub open_loop: Option<OpenLoopStep>,
    /// Request indices used: `first_index ..< first_index + requests` (distinct per server).
    pub first_index: u64,
    /// Where the campaign's request numbers start (`checkpoint.json` keeps it, so a resume
    /// continues without repeating a prompt): request `i`'s nonce is
    /// `nonce_number(nonce_base, first_index + i)`.
    pub nonce_base: u64,
    pub seed: u64,
    pub gpus: Vec<String>,
    /// The idle baseline's power draw per GPU UUID, W (recorded beside the step's energy).
    pub idle_power_w: std::collections::BTreeMap<String, f64>,
    /// A trace replay's own schedule (`bench::trace::TraceLoad::plan`): replaces the closed
    /// or open loop; its `load` record is the plan's.
    pub schedule: Option<Plan>,
    /// Where the load client runs: None in this process; on a Slurm lane's node (docs/fleet.md
    /// "Where the client runs") as a job step of the arm's job.
    pub client: Option<NodeClient>,
}

/// A timed step's workload source, sized once per launch (`run/steps/timing.rs`).
#[derive(Clone, Default)]
pub enum StepWork {
    /// Every request sends the matched prompt.
    #[default]
    Matched,
    /// Dataset items or synthetic lengths: request i sends item `first_item + i`.
    Items { set: Arc<WorkSet>, first_item: u64 },
    /// Each stream runs conversations of `turns` turns; each user turn is the matched prompt,
    /// or the next user turn of a dataset's conversation (`script`); with `prefix`, each
    /// conversation starts with its group's shared prefix.
    Conversation {
        turns: u32,
        think_time_ms: f64,
        script: Option<Arc<Scripts>>,
        prefix: Option<PrefixWork>,
    },
    /// Each prompt is one of `groups` shared prefixes, then the matched prompt.
    Prefix {
        prefix: Arc<PrefixPrompt>,
        groups: u32,
        order: GroupOrder,
    },
}

/// A shared prefix sized for the arm: `groups` prefixes chosen in `order`.
#[derive(Clone)]
pub struct PrefixWork {
    pub prefix: Arc<PrefixPrompt>,
    pub groups: u32,
    pub order: GroupOrder,
}

impl StepWork {
    /// The per-turn / per-group summary this source has.
    fn shape(&self) -> Option<Shape> {
        match self {
            StepWork::Conversation {
                turns,
                think_time_ms,
                prefix,
                ..
            } => Some(Shape {
                multi_turn: Some((*turns, *think_time_ms)),
                shared_prefix: prefix.as_ref().map(|p| (p.prefix.tokens, p.groups)),
            }),
            StepWork::Prefix { prefix, groups, .. } => Some(Shape {
                multi_turn: None,
                shared_prefix: Some((prefix.tokens, *groups)),
            }),
            _ => None,
        }
    }
}

pub struct TimingOutput {
    pub stats: RunStats,
    pub evidence: Value,
    /// The per-request metrics of the successful requests (goodput under the campaign's SLOs).
    pub ok_metrics: Vec<crate::metrics::RequestMetrics>,
    /// The GPU energy over the measured window, from the evidence (`evidence::energy`).
    pub energy: Option<crate::evidence::energy::StepEnergy>,
}

/// Runs the step through `load::session` (as `bakeoff bench` does); the evidence holds the
/// stats, one line per request (with raw chunk offsets), the engine's own metric deltas and GPU
/// samples joined to the step.
pub async fn run(inp: TimingInput) -> Result<TimingOutput, String> {
    run_work(inp, StepWork::Matched).await
}

/// [`run`] with the campaign's workload source: what the requests send beside the matched
/// prompt.
pub async fn run_work(inp: TimingInput, work: StepWork) -> Result<TimingOutput, String> {
    let (source, items, script) = source(&inp, &work);
    let plan = load_plan(&inp);
    let opts = StreamOpts {
        timeout: Duration::from_secs_f64(TIMEOUT_S),
        stall: Duration::from_secs_f64(STALL_S),
        collect: false,
    };
    // One load, here or on the lane's node; its figures come from its traces the same way.
    let (out, client) = match &inp.client {
        None => {
            let t = inp.target.clone();
            let out = client_step::load(t, plan, source, opts, inp.gpus.clone(), inp.seed).await?;
            (out, None)
        }
        Some(nc) => {
            let n = ordered_requests(&inp, &plan);
            let o =
                client_step::order(&inp.target, &plan, &*source, n, &opts, &inp.gpus, inp.seed)?;
            let (out, record) = super::client_node::run(nc, &o, inp.first_index).await?;
            (out, Some(record))
        }
    };
    finish(&inp, &work, (items, script), out, client)
}

/// Every request index a load of `plan` may ask for: its warm-up and measured requests, and on
/// an open loop the indices the step reserved for a warm-up by time (`OpenLoopStep::indices`).
fn ordered_requests(inp: &TimingInput, plan: &Plan) -> u64 {
    let counted = plan.requests.unwrap_or(0) + plan.warmup;
    let given = match &plan.mode {
        crate::load::Mode::Open {
            arrival: crate::load::Arrival::Given(o),
            ..
        } => o.len() as u64,
        _ => 0,
    };
    let reserved = inp
        .open_loop
        .as_ref()
        .map_or(0, |o| o.indices(inp.requests, 1));
    counted.max(given).max(reserved).max(1)
}

/// The step's figures and evidence from its load (wherever it ran): the statistics folded from
/// its traces, one line per request, the load record, the lane's telemetry.
fn finish(
    inp: &TimingInput,
    work: &StepWork,
    (items, script): (Option<Arc<WorkSet>>, Option<Arc<Scripts>>),
    out: LoadOut,
    client: Option<Value>,
) -> Result<TimingOutput, String> {
    let collector = out.collector();
    let window = out.window();
    let reads = out.reads();
    let stats = collector.summarize(inp.seed);
    // The one per-request line `bench --requests-jsonl` writes too.
    let mut writer = LineWriter {
        start: Some(out.started_ns),
        items: items.clone().map(|w| (w, inp.first_index)),
        script,
        level: None,
    };
    let lines: Vec<Value> = out.traces.iter().map(|t| writer.line(t)).collect();
    let workload = work.shape().map(|shape| {
        let mut p = PlaceSummary::default();
        out.traces.iter().for_each(|t| p.fold(t));
        p.summary(shape)
    });
    let structured = workload.is_some();
    let load = match &inp.open_loop {
        None if inp.schedule.is_some() => {
            json!({"mode": "trace-replay", "requests": inp.requests, "first_index": inp.first_index,
                 "window": window.as_ref().ok().map(|w| json!({"start_ns": w.start_ns, "end_ns": w.end_ns,
                     "warmup_requests": w.warmup_requests, "cap_delayed": w.cap_delayed, "peak_in_flight": w.peak_in_flight}))})
        }
        None => {
            json!({"mode": "closed-loop", "concurrency": inp.concurrency, "requests": inp.requests,
                 "first_index": inp.first_index, "warmup": 0,
                 "nonce_base": inp.prompt.nonce.then_some(inp.nonce_base)})
        }
        Some(o) => open_load_record(inp, o, window.as_ref().ok()),
    };
    // With a cap that delayed requests the schedule lag is the cap's doing (bench's words).
    let cap = match (&inp.open_loop, &inp.schedule) {
        (Some(o), _) => Some(o.max_concurrency.map(|c| c as usize)),
        (None, Some(p)) => Some(p.max_in_flight),
        (None, None) => None,
    };
    let load_warnings = match (cap, &window) {
        (Some(cap), Ok(w)) => crate::bench::session::limit_warnings(&stats, &reads, w, cap),
        _ => Vec::new(),
    };
    let evidence = json!({
        "load": load,
        "load_error": window.as_ref().err().map(|e| e.to_string()),
        "sampling": Value::Object(inp.base.clone()),
        "prompt": prompt_record(inp, work, items.as_deref()),
        "stats": stats,
        // Requests served from the prefix cache although their prompts carried a nonce
        // (conversations and shared prefixes are meant to be).
        "prefix_cache_warning": if inp.prompt.nonce && !structured { stats.prefix_cache.defeated_cache_warning() } else { None },
        "arrival_clock": reads.evidence(),
        // Set when the client, not the server, was the limit (its reads fell behind).
        "client_limit_warning": session::client_limit_warning(&stats, &reads),
        "engine_metrics": out.engine_metrics,
        "gpu": out.gpu,
        // The measured window (first send to last completion; CLOCK_MONOTONIC ns, the GPU
        // readings' clock): the energy is integrated over it.
        "window_mono_ns": [collector.first_send_ns, collector.last_end_ns],
        "requests": lines,
    });
    let mut evidence = evidence;
    if evidence["gpu"]["samples"].is_array() {
        evidence["gpu"]["idle_power_w"] = json!(inp.idle_power_w);
    }
    if cap.is_some() {
        evidence["load_warnings"] = json!(load_warnings);
    }
    if let Some(w) = workload {
        // Per turn (conversations) or per group (shared prefixes): the cache effect.
        evidence["workload"] = w;
    }
    if let Some(c) = client {
        // Where the load's client ran: the lane's node, its Slurm job and step, its files.
        evidence["client"] = c;
    }
    if let Err(e) = window {
        if stats.ok == 0 {
            return Err(format!("the load could not run: {e}"));
        }
    }
    let ok_metrics = out
        .traces
        .iter()
        .filter(|t| t.ok() && !t.warmup)
        .map(crate::metrics::RequestMetrics::from_trace)
        .collect();
    let energy = crate::evidence::energy::from_step_file(&evidence);
    Ok(TimingOutput {
        stats,
        evidence,
        ok_metrics,
        energy,
    })
}

/// The step's request source (`bench::conv::source`, as `bakeoff bench` builds its levels'),
/// and its work items renumbered to the step's server indices (request i of the step sends item
/// `first_item + i` on every arm). A promotion's bake sends its intervals through it too.
pub type StepSource = (Arc<dyn Source>, Option<Arc<WorkSet>>, Option<Arc<Scripts>>);

pub fn source(inp: &TimingInput, work: &StepWork) -> StepSource {
    let (mut prompt, mut items) = (PromptText::Matched(inp.prompt.clone()), None);
    let (mut multi_turn, mut prefix, mut script) = (None, None, None);
    let plan = |p: &PrefixWork| PrefixPlan {
        prefix: p.prefix.clone(),
        groups: p.groups,
        order: p.order,
        total_tokens: inp.prompt.target_tokens + p.prefix.tokens,
    };
    match work {
        StepWork::Matched => {}
        StepWork::Items { set, first_item } => {
            let set = Arc::new(set.rotated(inp.first_index, *first_item));
            prompt = PromptText::Work(set.clone());
            items = Some(set);
        }
        StepWork::Conversation {
            turns,
            think_time_ms,
            script: sc,
            prefix: p,
        } => {
            multi_turn = Some((*turns, *think_time_ms));
            prefix = p.as_ref().map(plan);
            script = sc.clone();
        }
        StepWork::Prefix {
            prefix: p,
            groups,
            order,
        } => {
            prefix = Some(PrefixPlan {
                prefix: p.clone(),
                groups: *groups,
                order: *order,
                total_tokens: inp.prompt.target_tokens + p.tokens,
            })
        }
    }
    let parts = SourceParts {
        target: &inp.target,
        endpoint: inp.prompt.endpoint,
        base: &inp.base,
        prompt,
        api_key: inp.api_key.clone(),
        offset: inp.first_index,
        nonce_base: inp.nonce_base,
        // Fresh prefixes per step: a step never meets an earlier step's in the cache.
        prefix_number: inp.first_index,
        script: script.clone().map(|s| (s, inp.prompt.nonce)),
    };
    (
        conv::source(multi_turn, prefix.as_ref(), parts),
        items,
        script,
    )
}

/// The step's load plan: the closed loop at its concurrency, or the open-loop level `bench`
/// plans for the same rate, arrivals, cap and warm-up (`bench::session::level_plan`).
fn load_plan(inp: &TimingInput) -> Plan {
    if let Some(p) = &inp.schedule {
        return p.clone();
    }
    let Some(o) = &inp.open_loop else {
        return Plan {
            mode: Mode::Closed {
                concurrency: inp.concurrency as usize,
            },
            requests: Some(inp.requests as u64),
            duration: None,
            warmup: 0,
            warmup_duration: None,
            max_in_flight: None,
        };
    };
    let shape = open_shape(inp, o);
    let level = Level {
        concurrency: 1,
        rate: Some(o.rate),
        max_in_flight: shape.max_concurrency,
    };
    crate::bench::session::level_plan(&shape, shape.requests, level, inp.seed)
}

/// The open-loop step as `bench`'s load shape (`--rate R --arrival A --max-concurrency C
/// --requests N --warmup W --warmup-duration S`).
fn open_shape(inp: &TimingInput, o: &OpenLoopStep) -> LoadShape {
    LoadShape {
        rate: vec![o.rate],
        arrival: match o.arrival {
            ArrivalProcess::Constant => ArrivalKind::Constant,
            ArrivalProcess::Poisson => ArrivalKind::Poisson,
        },
        max_concurrency: o.max_concurrency.map(|c| c as usize),
        requests: Some(inp.requests as u64),
        warmup: o.warmup.into(),
        warmup_duration: o.warmup_secs,
        ..Default::default()
    }
}

/// An open-loop step's `load` record: bench's (`bench::LoadRecord`, the same keys as a bench
/// report's `load`), with the step's first request index.
fn open_load_record(
    inp: &TimingInput,
    o: &OpenLoopStep,
    window: Option<&crate::load::RunWindow>,
) -> Value {
    let shape = open_shape(inp, o);
    let mut r = LoadRecord {
        mode: LoadMode::OpenLoop,
        concurrency: None,
        rate_per_s: Some(o.rate),
        max_concurrency: shape.max_concurrency,
        arrival: Some(shape.arrival),
        warmup_duration_s: o.warmup_secs,
        requests: shape.requests,
        warmup: shape.warmup,
        timeout_s: TIMEOUT_S,
        stall_timeout_s: STALL_S,
        prefix_cache_nonce: inp.prompt.nonce,
        nonce_base: inp.prompt.nonce.then_some(inp.nonce_base),
        nonce_base_from: inp.prompt.nonce.then_some("campaign"),
        seed: Some(inp.seed),
        ..Default::default()
    };
    if let Some(w) = window {
        r.record_window(w);
    }
    let mut v = serde_json::to_value(&r).unwrap_or(Value::Null);
    v["first_index"] = json!(inp.first_index);
    v
}

/// The step's `prompt` record: the matched prompt, the work set's record (dataset: file, digest,
/// sampling, items), or the matched prompt with the conversation or shared prefix.
fn prompt_record(inp: &TimingInput, work: &StepWork, items: Option<&WorkSet>) -> Value {
    if let Some(w) = items {
        return w.record.clone();
    }
    let m = &inp.prompt;
    let mut v = serde_json::to_value(&**m).unwrap_or(Value::Null);
    match work {
        StepWork::Conversation {
            turns,
            think_time_ms,
            script,
            prefix,
        } => {
            v["conversation"] = json!({
                "turns": turns,
                "think_time_ms": think_time_ms,
                "what": match script {
                    Some(_) => "each stream replays a dataset's conversations: turn k resends turns 1..k-1 with the model's actual replies, then the conversation's next user turn",
                    None => "each stream runs conversations: turn k resends turns 1..k-1 with the model's actual replies, then a new user turn (this matched prompt, its own nonce line)",
                },
            });
            if let Some(s) = script {
                v["conversation"]["dataset"] = s.record.clone();
            }
            if let Some(p) = prefix {
                v["target_tokens"] = json!(m.target_tokens + p.prefix.tokens);
                v["shared_prefix"] = prefix_record(m, p);
            }
        }
        StepWork::Prefix {
            prefix,
            groups,
            order,
        } => {
            v["target_tokens"] = json!(m.target_tokens + prefix.tokens);
            let p = PrefixWork {
                prefix: prefix.clone(),
                groups: *groups,
                order: *order,
            };
            v["shared_prefix"] = prefix_record(m, &p);
        }
        _ => {}
    }
    v
}

/// The `shared_prefix` part of a step's prompt record.
fn prefix_record(m: &MatchedPrompt, p: &PrefixWork) -> Value {
    json!({
        "tokens": p.prefix.tokens,
        "groups": p.groups,
        "order": conv::order_name(p.order),
        "what": "each prompt is its group's shared prefix (a group nonce line and filler, ending with a newline: exactly `tokens` of content), then the request's own part (this matched prompt: its nonce line and filler)",
        "prompt": serde_json::to_value(&p.prefix.prompt).unwrap_or(Value::Null),
        "rest_target_tokens": m.target_tokens,
    })
}

fn stat(s: &RunStats, name: &str) -> Option<Stat> {
    s.metrics.get(name).map(|d| d.median_stat())
}

/// The result record of a timed step.
pub fn record(evidence: &str, concurrency: u32, s: &RunStats) -> TimingRecord {
    let prompt = s
        .metrics
        .get("prompt_tokens")
        .filter(|d| d.min == d.max)
        .map(|d| d.p50 as u64);
    TimingRecord {
        evidence: evidence.to_string(),
        concurrency: concurrency as u64,
        requests_ok: s.ok,
        requests_failed: s.failed,
        failures_by_class: s
            .failures_by_class
            .iter()
            .map(|(c, f)| (c.clone(), f.count))
            .collect(),
        ttft_ms: stat(s, "ttft_ms"),
        decode_tok_s: stat(s, "decode_tok_s"),
        e2e_ms: stat(s, "e2e_ms"),
        itl_ms: stat(s, "itl_ms"),
        aggregate_output_tok_s: s.aggregate_output_tok_s,
        prompt_tokens_reported: prompt,
        ..Default::default()
    }
}

/// The result record of an open-loop step: [`record`] with the rate asked for, the arrivals,
/// the cap and the rate achieved.
pub fn open_record(evidence: &str, o: &OpenLoopStep, s: &RunStats) -> TimingRecord {
    TimingRecord {
        rate_per_s: Some(o.rate),
        arrival: Some(o.arrival.as_str().to_string()),
        max_concurrency: o.max_concurrency.map(u64::from),
        achieved_rate_per_s: s.request_rate_per_s,
        ..record(evidence, o.max_concurrency.unwrap_or(0), s)
    }
}
