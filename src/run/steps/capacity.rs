//! `capacity`: the arm's capacity under SLOs (`[workload.capacity]`). Each probe is an
//! open-loop step through the one timed load (`run/timed.rs`, as every open-loop step), judged
//! by the one SLO judge (`bench::slo`) and the failure share; `bench::capacity` chooses the next
//! rate (doubling then bisection, or a list) and says what the probes found. Every probe is
//! recorded in `<arm>-capacity.json`; the arm's result gets the bracket. A probe at which the
//! client's overload signals fired ends the search: that figure is the client's, not the arm's.

use super::timing;
use crate::bench::capacity::{self as search, Measured, Outcome, Probe, Search};
use crate::campaign::capacity::CapacityStep;
use crate::campaign::plan::OpenLoopStep;
use crate::campaign::{Arm, PlanStep, StepKind, WorkSource};
use crate::evidence::result::{CapacityProbeRecord, CapacityRecord};
use crate::evidence::FailureClass;
use crate::run::arm::Live;
use crate::run::context::Cx;
use crate::run::guard::Guarded;
use crate::run::step_outcome::{fail, Done, Outcome as StepOutcome};
use crate::run::timed;
use serde_json::{json, Value};

pub async fn run(cx: &mut Cx, arm: &Arm, s: &PlanStep, live: &mut Option<Live>) -> Done {
    let StepKind::Capacity(k) = &s.kind else {
        unreachable!("dispatched on Capacity")
    };
    let ev_name = s.evidence.as_str();
    if let Some(failed) = timing::ensure_work(cx, arm, live, k.prompt_tokens, ev_name).await {
        return failed;
    }
    let plan = search_of(k);
    let (mut done, mut records, mut files) = (Vec::<Probe>::new(), Vec::new(), Vec::new());
    while let Some(rate) = search::next_rate(&plan, &done) {
        let out = match probe(cx, arm, k, rate, live).await {
            Guarded::Done(Ok(out)) => out,
            Guarded::Cancelled => return Done::cancelled(),
            Guarded::Panicked(e) | Guarded::Done(Err(e)) => {
                let l = live.as_ref().expect("ready");
                let f = match l.crashed() {
                    true => l.crash_failure(&format!("capacity probe at {rate} req/s"), ev_name),
                    false => fail(FailureClass::Crash, e.clone(), ev_name),
                };
                let ev = evidence(arm, k, &plan, &done, files, Some(&e));
                return Done::new(StepOutcome::Fatal(f), Some(ev));
            }
        };
        let (record, measured, file) = judged(k, rate, out);
        let outcome = search::judge(&plan, &measured);
        records.push(probe_record(record, &outcome));
        files.push(file);
        done.push(Probe { rate, outcome });
        let l = live.as_ref().expect("ready");
        if l.crashed() {
            let f = l.crash_failure(&format!("capacity probe at {rate} req/s"), ev_name);
            let ev = evidence(arm, k, &plan, &done, files, None);
            return Done::new(StepOutcome::Fatal(f), Some(ev));
        }
    }
    let b = search::bracket(&plan, &done);
    let rec = CapacityRecord {
        evidence: ev_name.to_string(),
        held_rate_per_s: b.held_rate_per_s,
        broken_rate_per_s: b.broken_rate_per_s,
        broken_by: b.broken_by,
        client_bound_rate_per_s: b.client_bound_rate_per_s,
        client_bound_because: b.client_bound_because,
        stopped_because: b.stopped_because,
        probes: records,
    };
    let mut ev = evidence(arm, k, &plan, &done, files, None);
    ev["capacity"] = json!(rec);
    cx.rec.arm_result(&arm.id).capacity = Some(rec);
    Done::ok(ev)
}

/// The search the step's table declares.
fn search_of(k: &CapacityStep) -> Search {
    Search {
        start_rate: k.start_rate,
        rates: k.rates.clone(),
        max_rate: k.max_rate,
        max_steps: k.max_steps,
        precision: k.precision,
        max_failure_share: k.max_failure_share,
    }
}

/// Runs one probe at `rate`: an open-loop step of the arm's sized work, its request indices
/// reserved (a conversation's arrivals are `turns` requests each).
async fn probe(
    cx: &mut Cx,
    arm: &Arm,
    k: &CapacityStep,
    rate: f64,
    live: &mut Option<Live>,
) -> Guarded<Result<timed::TimingOutput, String>> {
    let requests = k.requests_at(rate);
    let l = live.as_ref().expect("ready");
    let (target, work, prompt) = (
        l.target(),
        l.work.clone().expect("sized above"),
        l.prompt.clone().expect("sized with the work"),
    );
    let mut inp = timing::input(
        cx,
        arm,
        target,
        prompt,
        (k.max_tokens, k.ignore_eos),
        0,
        requests,
    );
    let o = OpenLoopStep {
        rate,
        arrival: k.arrival,
        max_concurrency: None,
        warmup: 0,
        warmup_secs: None,
    };
    let per = match &cx.plan.request.source {
        Some(WorkSource::Conversation { turns, .. }) => *turns,
        _ => 1,
    };
    let extra = o.indices(requests, per).saturating_sub(u64::from(requests));
    cx.rec.next_indices(&arm.id, extra);
    inp.open_loop = Some(o);
    inp.client = timing::client(cx, arm, l);
    cx.guarded(timed::run_work(inp, work)).await
}

/// A finished probe: its record (before the outcome), what the judge needs, and its evidence.
fn judged(
    k: &CapacityStep,
    rate: f64,
    out: timed::TimingOutput,
) -> (CapacityProbeRecord, Measured, Value) {
    let (checks, goodput) = timing::slo_records(&k.slo, &out);
    let st = &out.stats;
    let warning = out
        .evidence
        .get("client_limit_warning")
        .and_then(Value::as_str)
        .map(String::from);
    let lag_p99 = st.metrics.get("schedule_lag_ms").map(|d| d.p99);
    let signals: Vec<String> = warning
        .filter(|_| material(lag_p99, rate))
        .into_iter()
        .collect();
    let measured = Measured {
        slo_broken: checks
            .iter()
            .filter(|c| !c.met)
            .map(|c| match c.observed_ms {
                Some(v) => format!("{}: {v:.1} ms", c.limit),
                None => format!("{}: not measured", c.limit),
            })
            .collect(),
        ok: st.ok,
        failed: st.failed,
        client_signals: signals,
    };
    let record = CapacityProbeRecord {
        rate_per_s: rate,
        requests_ok: st.ok,
        requests_failed: st.failed,
        achieved_rate_per_s: st.request_rate_per_s,
        goodput: Some(goodput),
        slo: checks,
        output_tokens: (st.ok > 0 && st.requests_without_usage == 0)
            .then_some(st.completion_tokens_total),
        energy: out.energy.clone(),
        ..Default::default()
    };
    let mut file = out.evidence;
    file["rate_per_s"] = json!(rate);
    (record, measured, file)
}

/// Whether the client's overload warning bears on the probe's verdict: its open loop sent
/// requests late by at least a tenth of the mean gap between arrivals, so the rate offered was not
/// the rate asked. Late reads alone do not: every latency runs from the actual send to the
/// kernel's receive stamp, which a late read does not move; nor do a few milliseconds of
/// schedule lag on a busy client host at a few requests per second.
fn material(lag_p99_ms: Option<f64>, rate: f64) -> bool {
    let gap_ms = 1000.0 / rate;
    lag_p99_ms.is_some_and(|l| l >= 0.1 * gap_ms)
}

fn probe_record(mut r: CapacityProbeRecord, o: &Outcome) -> CapacityProbeRecord {
    let (name, because) = match o {
        Outcome::Held => ("held", None),
        Outcome::Broken(w) => ("broken", Some(w.clone())),
        Outcome::ClientBound(w) => ("client-bound", Some(w.clone())),
    };
    r.outcome = name.into();
    r.because = because;
    r
}

/// The step's evidence: the search declared, each probe's outcome and full timed record (the
/// load, stats, SLO checks, goodput and one line per request, as an open-loop step's file).
fn evidence(
    arm: &Arm,
    k: &CapacityStep,
    plan: &Search,
    done: &[Probe],
    files: Vec<Value>,
    error: Option<&str>,
) -> Value {
    let probes: Vec<Value> = done
        .iter()
        .zip(files)
        .map(|(p, mut f)| {
            f["outcome"] = json!(p.outcome);
            f
        })
        .collect();
    json!({
        "arm": arm.id,
        "state": "warm",
        "search": plan,
        "slo": k.slo.iter().map(|l| l.to_string()).collect::<Vec<_>>(),
        "arrival": k.arrival.as_str(),
        "probes": probes,
        "error": error,
    })
}

#[cfg(test)]
mod tests {
    use super::material;

    #[test]
    fn a_client_warning_bears_on_a_probe_only_when_the_rate_offered_was_not_the_rate_asked() {
        // 5.3 ms late at 3 req/s (a 333 ms gap): the rate offered was the rate asked.
        assert!(!material(Some(5.3), 3.0));
        // 40 ms late at 5 req/s (a 200 ms gap): it was not.
        assert!(material(Some(40.0), 5.0));
        assert!(!material(None, 5.0));
    }
}
