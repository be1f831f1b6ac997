//! `trace`: the arm replays `[workload.trace]` at the trace's own arrival times, through the one
//! timed load (`run/timed.rs`) with the replay `bakeoff bench --trace` builds (`bench::trace`):
//! each request its own input and output length, shared `hash_ids` blocks the same tokens, and
//! the arrival error (intended send to actual send) measured. Its figures go into the arm's
//! result (`trace`) and `<arm>-trace.json` holds every request.

use super::timing;
use crate::bench::trace::{self as replay, TraceSpec};
use crate::bench::Quiet;
use crate::campaign::spec::Trace;
use crate::campaign::{Arm, PlanStep, StepKind};
use crate::evidence::result::{ArrivalErrorRecord, TraceReplayRecord};
use crate::evidence::FailureClass;
use crate::run::arm::{api_key, Live};
use crate::run::context::Cx;
use crate::run::guard::Guarded;
use crate::run::step_outcome::{fail, Done, Outcome};
use crate::run::timed::{self, StepWork};
use crate::workload::items::SizeCtx;
use crate::workload::trace::Select;
use serde_json::json;
use std::time::Duration;

pub async fn run(cx: &mut Cx, arm: &Arm, s: &PlanStep, live: &mut Option<Live>) -> Done {
    let StepKind::Trace(t) = &s.kind else {
        unreachable!("dispatched on Trace")
    };
    let ev = s.evidence.as_str();
    let matched = cx.c().workload.matched_prompt_tokens;
    if let Some(failed) = timing::ensure_work(cx, arm, live, matched, ev).await {
        return failed;
    }
    let spec = TraceSpec {
        path: t.path.clone(),
        select: Select {
            speedup: t.speedup,
            start_s: t.start_s,
            duration_s: t.duration_s,
            sample: t.sample,
            seed: t.seed,
        },
        block_tokens: t.block_tokens,
        file_label: "workload.trace.path",
        label: "workload.trace.",
    };
    let l = live.as_ref().expect("ready");
    let target = l.target();
    let prompt = l.prompt.clone().expect("sized with the work");
    let req = &cx.plan.request;
    let (model, tok, key) = (
        arm.served_model.clone(),
        arm.tokenizer.clone(),
        api_key(arm),
    );
    let (endpoint, timeout) = (
        timing::endpoint(cx),
        Duration::from_secs(req.sizing_timeout_s),
    );
    // Blocks keyed per arm and run: an arm never finds another's (or an earlier run's) blocks.
    let salt = arm
        .id
        .bytes()
        .fold(cx.rec.nonce_base() ^ 0xcbf2_9ce4_8422_2325, |h, b| {
            (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
        });
    let (seed, spec2, target2) = (t.seed, spec.clone(), target.clone());
    let built = cx
        .guarded(async move {
            let ctx = SizeCtx {
                target: &target2,
                model: &model,
                endpoint,
                tokenizer: tok.as_deref(),
                api_key: key.as_deref(),
                nonce: false,
                timeout,
                extra_body: None,
            };
            let opened = replay::open(&spec2, seed).map_err(|e| format!("{e:#}"))?;
            replay::prepare(&spec2, opened, salt, &ctx, &Quiet)
                .await
                .map_err(|e| format!("{e:#}"))
        })
        .await;
    let load = match built {
        Guarded::Cancelled => return Done::cancelled(),
        Guarded::Panicked(m) => {
            return Done::new(Outcome::Fatal(fail(FailureClass::Crash, m, ev)), None)
        }
        Guarded::Done(Err(e)) => {
            let f = fail(
                FailureClass::Compatibility,
                format!("trace replay: {e}"),
                ev,
            );
            return Done::new(Outcome::Fatal(f), Some(json!({"error": e})));
        }
        Guarded::Done(Ok(x)) => x,
    };
    // Every arm must replay the same requests: the file read at load. A file changed under the
    // run is no fault of the arm: the run stops here, nothing replayed, to go on once it is back.
    if !t.sha256.is_empty() && load.record.sha256 != t.sha256 {
        return Done::new(
            Outcome::Halt(format!(
                "the trace file {} (workload.trace.path) changed since the campaign was loaded (sha256 {} then, {} now); every arm must replay the same trace: put the original file back, then `bakeoff run --resume {}`, or start a new campaign",
                t.path.display(),
                t.sha256,
                load.record.sha256,
                cx.rec.dir().display()
            )),
            None,
        );
    }
    let warmup = u64::from(t.warmup);
    let measured = load.offsets.len() as u64 - warmup.min(load.offsets.len() as u64);
    let (max_tokens, ignore_eos) = (
        cx.c().workload.max_tokens,
        cx.c().workload.sampling.ignore_eos,
    );
    let mut inp = timing::input(
        cx,
        arm,
        target,
        prompt,
        (max_tokens, ignore_eos),
        0,
        measured as u32,
    );
    // The warm-up requests come first and take indices too.
    cx.rec.next_indices(&arm.id, warmup);
    let cap = t.max_concurrency.map(|c| c as usize);
    inp.schedule = Some(load.plan(warmup, cap));
    inp.client = timing::client(cx, arm, live.as_ref().expect("ready"));
    let work = StepWork::Items {
        set: load.work.clone(),
        first_item: 0,
    };
    // Test-only: the replay is planned, no request of it sent.
    crate::run::testhook::pause_for("trace-replay", &arm.id).await;
    let out = match cx.guarded(timed::run_work(inp, work)).await {
        Guarded::Done(Ok(out)) => out,
        Guarded::Cancelled => return Done::cancelled(),
        Guarded::Panicked(e) | Guarded::Done(Err(e)) => {
            let l = live.as_ref().expect("ready");
            let f = match l.crashed() {
                true => l.crash_failure("trace replay", ev),
                false => fail(FailureClass::Crash, e.clone(), ev),
            };
            return Done::new(Outcome::Fatal(f), Some(json!({"error": e})));
        }
    };
    let rec = load.record.with_error(&out.stats);
    let mut result = record(ev, t, warmup, &rec, &out.stats);
    result.timing.energy = out.energy.clone();
    let mut evidence = out.evidence;
    evidence["arm"] = json!(arm.id);
    evidence["trace"] = json!(rec);
    cx.rec.arm_result(&arm.id).trace = Some(result);
    let l = live.as_ref().expect("ready");
    if l.crashed() {
        return Done::new(
            Outcome::Fatal(l.crash_failure("trace replay", ev)),
            Some(evidence),
        );
    }
    Done::ok(evidence)
}

/// The arm's result record of the replay.
fn record(
    ev: &str,
    t: &Trace,
    warmup: u64,
    rec: &replay::TraceRecord,
    stats: &crate::metrics::summary::RunStats,
) -> TraceReplayRecord {
    TraceReplayRecord {
        timing: timed::record(ev, t.max_concurrency.unwrap_or(0), stats),
        file: rec.file.clone(),
        sha256: rec.sha256.clone(),
        replayed: rec.replayed as u64,
        warmup,
        speedup: rec.speedup,
        mean_rate_per_s: rec.mean_rate_per_s,
        prompt_tokens: rec.prompt_tokens,
        shared_tokens: rec.shared_tokens,
        arrival_error_ms: rec.arrival_error_ms.map(|a| ArrivalErrorRecord {
            n: a.n as u64,
            p50: a.p50,
            p99: a.p99,
            max: a.max,
        }),
    }
}
