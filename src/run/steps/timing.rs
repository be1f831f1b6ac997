//! `timing` (the matched prompt at one concurrency, cold or warm) and `long-context-timing`
//! (decode speed at the long-context prompt length). Both size an exact prompt on the arm,
//! reserve request indices and run the one timed load (run/timed.rs).

use super::timing_work;
use crate::campaign::plan::OpenLoopStep;
use crate::campaign::{ApiKind, Arm, PlanStep, RunState, StepKind, WorkSource};
use crate::client::Target;
use crate::evidence::result::{GoodputRecord, OutputLength, SloCheckRecord, TimingRecord};
use crate::evidence::FailureClass;
use crate::run::arm::{api_key, request_base, Live};
use crate::run::context::Cx;
use crate::run::guard::Guarded;
use crate::run::step_outcome::{fail, Done, Outcome};
use crate::run::timed;
use crate::workload::prompt::{self, MatchedPrompt, PromptSpec};
use crate::workload::Endpoint;
use serde_json::json;
use std::sync::Arc;
use std::time::Duration;

/// Sizes a matched prompt of `tokens` for `arm` on `target` (cancellable; a panic in the sizing
/// code is caught).
async fn build_prompt(
    cx: &Cx,
    arm: &Arm,
    target: &Target,
    tokens: u64,
) -> Guarded<Result<MatchedPrompt, String>> {
    let req = &cx.plan.request;
    let endpoint = endpoint(cx);
    let (target, model, tok) = (
        target.clone(),
        arm.served_model.clone(),
        arm.tokenizer.clone(),
    );
    let api_key = api_key(arm);
    let nonce = req.defeat_prefix_cache;
    let timeout = Duration::from_secs(req.sizing_timeout_s);
    cx.guarded(async move {
        prompt::build(&PromptSpec {
            target: &target,
            model: &model,
            endpoint,
            tokens,
            tokenizer: tok.as_deref(),
            api_key: api_key.as_deref(),
            nonce,
            timeout,
            extra_body: None,
        })
        .await
    })
    .await
}

pub(super) fn endpoint(cx: &Cx) -> Endpoint {
    match cx.plan.request.api {
        ApiKind::Chat => Endpoint::Chat,
        ApiKind::Completions => Endpoint::Completions,
    }
}

/// Sizes what the arm's timed steps send (`timing_work`), cancellable, a panic caught.
async fn size_work(
    cx: &Cx,
    arm: &Arm,
    target: &Target,
    matched_tokens: u64,
) -> Guarded<Result<(MatchedPrompt, timed::StepWork), String>> {
    let req = &cx.plan.request;
    let inp = timing_work::SizeInput {
        target: target.clone(),
        model: arm.served_model.clone(),
        endpoint: endpoint(cx),
        tokenizer: arm.tokenizer.clone(),
        api_key: api_key(arm),
        nonce: req.defeat_prefix_cache,
        timeout: Duration::from_secs(req.sizing_timeout_s),
        matched_tokens,
        max_tokens: cx.c().workload.max_tokens.into(),
        source: req.source.clone(),
        nonce_base: cx.rec.nonce_base(),
    };
    cx.guarded(timing_work::size(inp)).await
}

/// The timed input of `requests` requests at `concurrency`, their indices reserved on the arm.
pub(super) fn input(
    cx: &mut Cx,
    arm: &Arm,
    target: Target,
    prompt: Arc<MatchedPrompt>,
    body: (u32, bool),
    concurrency: u32,
    requests: u32,
) -> timed::TimingInput {
    let (max_tokens, ignore_eos) = body;
    let base = request_base(cx, arm, max_tokens, ignore_eos);
    timed::TimingInput {
        target,
        base,
        prompt,
        api_key: api_key(arm),
        concurrency,
        requests,
        open_loop: None,
        first_index: cx.rec.next_indices(&arm.id, requests as u64),
        nonce_base: cx.rec.nonce_base(),
        seed: cx.plan.request.sampling.seed,
        gpus: cx.c().lane.gpus.clone(),
        // The idle baseline's draw per GPU, stated beside each step's energy.
        idle_power_w: cx
            .gpu_baseline
            .as_ref()
            .and_then(|p| serde_json::to_value(p).ok())
            .map(|p| crate::evidence::energy::idle_power(&p))
            .unwrap_or_default(),
        schedule: None,
        client: None,
    }
}

/// Where `arm`'s timed loads run (`live`: the arm running): the lane's node on a Slurm lane
/// whose client runs there, else this process.
pub(super) fn client(
    cx: &Cx,
    arm: &Arm,
    live: &Live,
) -> Option<crate::run::client_node::NodeClient> {
    crate::run::client_node::for_arm(cx.c(), &live.running, cx.rec.dir(), &arm.id)
}

pub async fn run(cx: &mut Cx, arm: &Arm, s: &PlanStep, live: &mut Option<Live>) -> Done {
    let StepKind::Timing {
        state,
        prompt_tokens,
        max_tokens,
        concurrency,
        requests,
        ignore_eos,
        ref slo,
        first_item,
        ref open_loop,
    } = s.kind
    else {
        unreachable!("dispatched on Timing")
    };
    let ev_name = s.evidence.as_str();
    if let Some(failed) = ensure_work(cx, arm, live, prompt_tokens, ev_name).await {
        return failed;
    }
    let l = live.as_mut().expect("ready");
    let target = l.target();
    let mut work = l.work.clone().expect("sized above");
    if let (timed::StepWork::Items { first_item: f, .. }, Some(first)) = (&mut work, first_item) {
        *f = first;
    }
    let mut inp = input(
        cx,
        arm,
        target,
        l.prompt.clone().expect("sized with the work"),
        (max_tokens, ignore_eos),
        concurrency,
        requests,
    );
    if let Some(o) = open_loop {
        // The warm-up's requests take indices too: reserved right after the measured ones.
        let per = match &cx.plan.request.source {
            Some(WorkSource::Conversation { turns, .. }) => *turns,
            _ => 1,
        };
        let extra = o.indices(requests, per).saturating_sub(u64::from(requests));
        cx.rec.next_indices(&arm.id, extra);
        inp.open_loop = Some(o.clone());
    }
    let l = live.as_ref().expect("ready");
    inp.client = client(cx, arm, l);
    let out = match cx.guarded(timed::run_work(inp, work)).await {
        Guarded::Cancelled => return Done::cancelled(),
        Guarded::Panicked(m) => {
            return Done::new(Outcome::Fatal(fail(FailureClass::Crash, m, ev_name)), None)
        }
        Guarded::Done(Err(e)) => {
            let f = if l.crashed() {
                l.crash_failure("timing", ev_name)
            } else {
                fail(FailureClass::Crash, e.clone(), ev_name)
            };
            return Done::new(Outcome::Fatal(f), Some(json!({"error": e})));
        }
        Guarded::Done(Ok(out)) => out,
    };
    let slo_rec = (!slo.is_empty()).then(|| slo_records(slo, &out));
    let mut ev = out.evidence;
    ev["arm"] = json!(arm.id);
    ev["state"] = json!(state.as_str());
    ev["shape"] = json!(s.shape);
    let mut rec = match open_loop {
        Some(o) => timed::open_record(ev_name, o, &out.stats),
        None => timed::record(ev_name, concurrency, &out.stats),
    };
    rec.energy = out.energy.clone();
    if ignore_eos {
        rec.output_length = Some(output_length(&out.ok_metrics, u64::from(max_tokens)));
    }
    if let Some((checks, goodput)) = slo_rec {
        ev["slo"] = json!(checks);
        ev["goodput"] = json!(goodput);
        rec.slo = checks;
        rec.goodput = Some(goodput);
    }
    file_record(cx, arm, (state, concurrency, open_loop.as_ref()), rec);
    if l.crashed() {
        let shape = s.shape.as_deref().unwrap_or("");
        let mut f = l.crash_failure(&format!("timing {shape}"), ev_name);
        if let Some((class, fc)) = out.stats.failures_by_class.iter().next() {
            f.detail = format!(
                "{} ({} request(s) failed: {class}: {})",
                f.detail, out.stats.failed, fc.example
            );
        }
        return Done::new(Outcome::Fatal(f), Some(ev));
    }
    if out.stats.ok == 0 {
        let ex = out
            .stats
            .failures_by_class
            .iter()
            .next()
            .map(|(c, f)| format!("{c}: {}", f.example))
            .unwrap_or_default();
        let f = fail(
            FailureClass::Crash,
            format!("every timed request failed ({ex})"),
            ev_name,
        );
        return Done::new(Outcome::Fatal(f), Some(ev));
    }
    Done::ok(ev)
}

/// Sizes what the arm's timed steps send, once per launch (the first timed step does it; a
/// resumed run's first timed step may be a later one). Some(done) when the sizing failed.
pub(super) async fn ensure_work(
    cx: &mut Cx,
    arm: &Arm,
    live: &mut Option<Live>,
    prompt_tokens: u32,
    ev_name: &str,
) -> Option<Done> {
    let l = live.as_mut().expect("ready");
    let target = l.target();
    if l.work.is_none() {
        match size_work(cx, arm, &target, prompt_tokens as u64).await {
            Guarded::Cancelled => return Some(Done::cancelled()),
            Guarded::Panicked(m) => {
                return Some(Done::new(
                    Outcome::Fatal(fail(FailureClass::Crash, m, ev_name)),
                    None,
                ))
            }
            Guarded::Done(Err(e)) => {
                let f = if l.crashed() {
                    l.crash_failure("prompt sizing", ev_name)
                } else {
                    fail(FailureClass::Compatibility, e.clone(), ev_name)
                };
                let ev = json!({"error": e});
                return Some(Done::new(Outcome::Fatal(f), Some(ev)));
            }
            Guarded::Done(Ok((m, work))) => {
                let w = &mut cx.rec.result().workload;
                if w.source.is_none() {
                    w.source = cx
                        .plan
                        .request
                        .source
                        .as_ref()
                        .and_then(|s| serde_json::to_value(s).ok());
                }
                if let Some(list) = timing_work::item_list(&work) {
                    if let Some(e) = same_items(cx, arm, list) {
                        let f = fail(FailureClass::Compatibility, e.clone(), ev_name);
                        return Some(Done::new(Outcome::Fatal(f), Some(json!({"error": e}))));
                    }
                }
                l.prompt = Some(Arc::new(m));
                l.work = Some(work);
            }
        }
    }
    None
}

/// Files a timed step's record in the arm's result: cold, warm c1, a level above 1, or an
/// open-loop step keyed by its rate (and notes the matched prompt's reported tokens).
fn file_record(
    cx: &mut Cx,
    arm: &Arm,
    (state, concurrency, open_loop): (RunState, u32, Option<&OpenLoopStep>),
    rec: TimingRecord,
) {
    let matched = cx.plan.request.sends_matched_size();
    if let Some(p) = rec.prompt_tokens_reported.filter(|_| matched) {
        cx.rec
            .result()
            .workload
            .matched_prompt_tokens_reported
            .insert(arm.id.clone(), p);
    }
    let a = cx.rec.arm_result(&arm.id);
    match (state, concurrency, open_loop) {
        (_, _, Some(o)) => {
            a.rates.insert(o.key(), rec);
        }
        (RunState::Cold, _, None) => a.cold = Some(rec),
        (RunState::Warm, 1, None) => a.warm = Some(rec),
        (RunState::Warm, n, None) => {
            a.concurrency.insert(n.to_string(), rec);
        }
    }
}

/// Records the arm's work items and checks them against the arms sized before (this run or an
/// earlier invocation): a bake-off compares arms on the same work. Some(error) when they differ.
fn same_items(cx: &mut Cx, arm: &Arm, list: Vec<serde_json::Value>) -> Option<String> {
    let w = &mut cx.rec.result().workload;
    let other = w
        .work_items
        .iter()
        .find(|(id, l)| **id != arm.id && **l != list)
        .map(|(id, l)| (id.clone(), l.len()));
    w.work_items.insert(arm.id.clone(), list.clone());
    other.map(|(id, n)| {
        let first = w.work_items[&id]
            .iter()
            .zip(&list)
            .position(|(a, b)| a != b)
            .unwrap_or(n.min(list.len()));
        format!(
            "arm `{}` would send different work items than arm `{id}` ({} items against {n}; they first differ at position {first}): its endpoint counts the dataset's prompt or output tokens differently, so the length filters chose other items; widen or drop the filters (workload.dataset.min_prompt_tokens, max_prompt_tokens, max_output_tokens) so every arm gets the same work",
            arm.id,
            list.len()
        )
    })
}

/// The level's SLO verdict and goodput (`bench::slo::judge`, the judge `bakeoff bench` uses),
/// in the evidence's records.
pub(super) fn slo_records(
    limits: &[crate::metrics::slo::SloLimit],
    out: &timed::TimingOutput,
) -> (Vec<SloCheckRecord>, GoodputRecord) {
    let j = crate::bench::slo::judge(limits, &out.stats, out.ok_metrics.iter())
        .expect("called with limits");
    let checks = j
        .slo
        .checks
        .into_iter()
        .map(|c| SloCheckRecord {
            limit: c.check.limit.to_string(),
            observed_ms: c.check.observed_ms,
            met: c.check.met,
        })
        .collect();
    let g = j.goodput;
    (
        checks,
        GoodputRecord {
            requests_meeting: g.requests_meeting,
            requests_ok: g.requests_ok,
            goodput_req_s: g.goodput_req_s,
        },
    )
}

/// Requests at the long-context prompt length, closed loop at c1, always decoding `max_tokens`:
/// the arm's long-context decode speed and E2E (the retrieval step's record is updated). A
/// failure here is recorded in the file and leaves the retrieval figures in place.
pub async fn long_context(cx: &mut Cx, arm: &Arm, s: &PlanStep, live: &mut Option<Live>) -> Done {
    let StepKind::LongContextTiming {
        prompt_tokens,
        max_tokens,
        requests,
    } = s.kind
    else {
        unreachable!("dispatched on LongContextTiming")
    };
    let l = live.as_ref().expect("ready");
    let target = l.target();
    let prompt = match build_prompt(cx, arm, &target, prompt_tokens).await {
        Guarded::Done(Ok(m)) => Arc::new(m),
        Guarded::Done(Err(e)) => {
            return Done::ok(json!({"arm": arm.id, "error": format!("long-context prompt: {e}")}))
        }
        Guarded::Panicked(m) => return Done::ok(json!({"arm": arm.id, "error": m})),
        Guarded::Cancelled => return Done::cancelled(),
    };
    let mut inp = input(cx, arm, target, prompt, (max_tokens, true), 1, requests);
    inp.client = client(cx, arm, l);
    let out = match cx.guarded(timed::run(inp)).await {
        Guarded::Done(Ok(out)) => out,
        Guarded::Done(Err(e)) | Guarded::Panicked(e) => {
            return Done::ok(json!({"arm": arm.id, "error": e}))
        }
        Guarded::Cancelled => return Done::cancelled(),
    };
    let mut ev = out.evidence;
    ev["arm"] = json!(arm.id);
    ev["state"] = json!("long-context");
    ev["shape"] = json!(format!(
        "long context {prompt_tokens} prompt + {max_tokens} max tokens, ignore_eos, c1"
    ));
    let mut rec = timed::record(&s.evidence, 1, &out.stats);
    rec.energy = out.energy.clone();
    rec.output_length = Some(output_length(&out.ok_metrics, u64::from(max_tokens)));
    if let Some(lc) = cx.rec.arm_result(&arm.id).long_context.as_mut() {
        lc.evidence = s.evidence.clone();
        lc.decode_tok_s = rec.decode_tok_s.map(|s| s.p50);
        lc.e2e_ms = rec.e2e_ms.map(|s| s.p50);
        lc.timing = Some(rec);
    }
    Done::ok(ev)
}

/// A step's output length against the `asked` completion tokens, from its successful requests.
fn output_length(ok: &[crate::metrics::RequestMetrics], asked: u64) -> OutputLength {
    let mut o = OutputLength {
        asked,
        ..Default::default()
    };
    for m in ok {
        let Some(c) = m.completion_tokens else {
            o.unreported += 1;
            continue;
        };
        o.requests += 1;
        o.completion_tokens += c;
        o.short += u64::from(c < asked);
        o.min_tokens = Some(o.min_tokens.map_or(c, |x| x.min(c)));
        let r = m.reasoning_tokens.unwrap_or(0);
        o.reasoning_tokens += r;
        // No visible content at all: the budget went to reasoning.
        o.empty_visible += u64::from(r > 0 && m.ttft_ms.is_none());
    }
    o
}
