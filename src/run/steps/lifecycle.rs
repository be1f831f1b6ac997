//! An arm's life in the lane: `launch`, `ready` (health, served model and context; fail fast on
//! exit), `stop` (port and GPU memory released, the masked log copied in, quality-risk lines),
//! and the relaunch of an arm resumed half way.

use crate::campaign::fingerprint::fingerprint;
use crate::campaign::{Arm, PlanStep};
use crate::evidence::bundle;
use crate::evidence::result::Failure;
use crate::evidence::FailureClass;
use crate::lane;
use crate::run::arm::Live;
use crate::run::context::Cx;
use crate::run::guard::wait_cancel;
use crate::run::journal::Journaled;
use crate::run::journal::{Purpose, State};
use crate::run::launch::launch_spec;
use crate::run::step_outcome::{fail, Done, Outcome};
use crate::telemetry::gpu;
use serde_json::{json, Value};
use std::time::{Duration, Instant};

pub async fn launch(cx: &mut Cx, arm: &Arm, s: &PlanStep, live: &mut Option<Live>) -> Done {
    match launch_arm(cx, arm, bundle::engine_log(&arm.id), Purpose::Arm).await {
        Ok(l) => {
            let ev = launch_evidence(cx, arm, &l);
            *live = Some(l);
            Done::ok(ev)
        }
        Err(ev) => {
            let d = format!(
                "launch failed: {}",
                ev["failure"]["message"].as_str().unwrap_or("")
            );
            if ev["failure"]["cause"] == "port-in-use" {
                // Nothing was started: something else holds the lane's port.
                cx.lane_fault = Some(d.clone());
            }
            Done::new(
                Outcome::Fatal(fail(FailureClass::Compatibility, d, &s.evidence)),
                Some(ev),
            )
        }
    }
}

pub async fn ready(cx: &mut Cx, arm: &Arm, s: &PlanStep, live: &mut Option<Live>) -> Done {
    let endpoint = live.is_none();
    if endpoint {
        // An endpoint arm: "launch" only checks its URL.
        match launch_arm(cx, arm, bundle::engine_log(&arm.id), Purpose::Arm).await {
            Ok(l) => *live = Some(l),
            Err(ev) => {
                let f = fail(
                    FailureClass::Compatibility,
                    "the endpoint URL is not usable",
                    &s.evidence,
                );
                return Done::new(Outcome::Fatal(f), Some(ev));
            }
        }
    }
    let l = live.as_mut().expect("launched");
    let (out, mut ev) = ready_arm(cx, arm, l).await;
    journal_node(cx, l);
    if endpoint {
        // An endpoint arm has no launch file: its URL (and, for https, how its certificate was
        // checked) is recorded here.
        ev["spec"] = l.spec.describe(&cx.lane);
    }
    if let Some(f) = &l.ready {
        cx.rec.arm_result(&arm.id).reported_context = f.context_tokens;
    }
    if matches!(out, Outcome::Ok) {
        // Test-only: the arm serves, its measurement not begun.
        crate::run::testhook::pause_for("arm-ready", &arm.id).await;
    }
    let out = match out {
        Outcome::Fatal(mut f) => {
            f.evidence = Some(s.evidence.clone());
            Outcome::Fatal(f)
        }
        o => o,
    };
    Done::new(out, Some(ev))
}

pub async fn stop(cx: &mut Cx, arm: &Arm, live: &mut Option<Live>) -> Done {
    match live.take() {
        Some(l) => Done::ok(stop_live(cx, &arm.id, l).await.0),
        None => Done::ok(
            json!({"arm": arm.id, "detail": "nothing was running (the launch failed); nothing to stop"}),
        ),
    }
}

/// Starts the arm (its raw log beside the bundle); the error is the launch's evidence. What is
/// started is recorded in the launch journal first (durably), and its pid, group and start time
/// once started: nothing is started that a recovery could not find again.
async fn launch_arm(
    cx: &mut Cx,
    arm: &Arm,
    log_name: String,
    purpose: Purpose,
) -> Result<Live, Value> {
    let logs = bundle::logs_dir(cx.rec.beside());
    let _ = std::fs::create_dir_all(&logs);
    let log = bundle::raw_engine_log(cx.rec.beside(), &arm.id);
    let spec = match launch_spec(cx.c(), arm, &log) {
        Ok(s) => s,
        Err(e) => {
            return Err(
                json!({"failure": {"class": FailureClass::Compatibility, "cause": "spawn-failed", "message": e}}),
            )
        }
    };
    let managed = spec.managed();
    let journal = if managed {
        match cx.rec.journal_intent(&arm.id, purpose, &spec, &cx.lane) {
            Ok(i) => Some(i),
            Err(e) => {
                let m = format!(
                    "nothing was started: what was about to start could not be recorded ({e:#})"
                );
                return Err(
                    json!({"spec": spec.describe(&cx.lane), "failure": {"class": FailureClass::EvidenceUnwritable, "cause": "journal-unwritable", "message": m}}),
                );
            }
        }
    } else {
        None
    };
    cx.rec.count_launch(&arm.id);
    match lane::launch(&cx.lane, &spec).await {
        Ok(running) => {
            // Test-only: started, its pid not yet recorded.
            crate::run::testhook::pause_for("launch-unrecorded", &arm.id).await;
            if let Some(i) = journal {
                cx.rec.journal_started(i, &running);
            }
            Ok(Live {
                running,
                spec,
                ready: None,
                prompt: None,
                work: None,
                log_name,
                journal,
            })
        }
        Err(f) => {
            if let Some(i) = journal {
                cx.rec.journal_set(i, State::LaunchFailed);
            }
            Err(json!({"spec": spec.describe(&cx.lane), "failure": f}))
        }
    }
}

fn launch_evidence(cx: &Cx, arm: &Arm, l: &Live) -> Value {
    let mut ev = json!({
        "arm": arm.id,
        "spec": l.spec.describe(&cx.lane),
        "started_at": l.running.started_wall,
        "identity": l.running.identity,
        "plan_argv_env_hash": cx.c().argv_env_hash(arm),
        "engine_log": l.log_name,
        // What its files were when measured: `promote` refuses this arm if they change.
        "recipe_fingerprint": fingerprint(cx.c(), arm, None),
    });
    // What this kind of arm records of itself (pid and group, container, Slurm job).
    if let Some(o) = ev.as_object_mut() {
        o.extend(l.running.launch_facts());
    }
    ev
}

/// A Slurm arm's node, known once its job runs, goes into the launch journal (durably).
fn journal_node(cx: &mut Cx, l: &Live) {
    if let (Some(i), Some(job)) = (l.journal, l.running.slurm_job()) {
        if job.node.is_some() {
            cx.rec.journal_started(i, &l.running);
        }
    }
}

/// Waits until the arm is ready (cancellable); checks it serves the declared model and context.
async fn ready_arm(cx: &Cx, arm: &Arm, l: &mut Live) -> (Outcome, Value) {
    let r = tokio::select! {
        r = lane::wait_ready(&mut l.running, &cx.lane) => Some(r),
        _ = wait_cancel(cx.cancel.clone()) => None,
    };
    let Some(r) = r else {
        return (Outcome::Cancelled, json!({"interrupted": true}));
    };
    let f = match r {
        Ok(f) => f,
        Err(f) => {
            let d = format!("{}: {}", f.cause, f.message);
            let ev = json!({"arm": arm.id, "failure": f});
            return (Outcome::Fatal(fail(FailureClass::Compatibility, d, "")), ev);
        }
    };
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
        return (Outcome::Fatal(fail(FailureClass::Compatibility, d, "")), ev);
    }
    if !ctx_ok {
        let d = format!(
            "the engine reports a served context of {} tokens ({}), the campaign declares {}",
            f.context_tokens.unwrap_or(0),
            f.context_source.as_deref().unwrap_or("?"),
            arm.served_context
        );
        return (Outcome::Fatal(fail(FailureClass::Compatibility, d, "")), ev);
    }
    (Outcome::Ok, ev)
}

/// Launch + ready again for an arm resumed half way; evidence `<arm>-relaunch-<n>.json`. The
/// class `interrupted` says a signal stopped it.
pub async fn relaunch(cx: &mut Cx, id: &str) -> Result<Live, Failure> {
    let arm = cx.arm(id);
    let n = cx.rec.launches(id) + 1;
    let name = bundle::relaunch(id, n);
    let t = Instant::now();
    let mut l = match launch_arm(
        cx,
        &arm,
        bundle::engine_log_relaunch(id, n),
        Purpose::Relaunch,
    )
    .await
    {
        Ok(l) => l,
        Err(ev) => {
            cx.rec.write_json_or_warn(&name, &ev);
            let w = t.elapsed().as_secs_f64() * 1e3;
            cx.rec.extra(Some(id), "relaunch", Some(&name), w);
            let d = format!("relaunch failed: {}", ev["failure"]);
            return Err(fail(FailureClass::Compatibility, d, &name));
        }
    };
    let mut ev = launch_evidence(cx, &arm, &l);
    let (out, rev) = ready_arm(cx, &arm, &mut l).await;
    journal_node(cx, &l);
    ev["ready"] = rev;
    cx.rec.write_json_or_warn(&name, &ev);
    let w = t.elapsed().as_secs_f64() * 1e3;
    cx.rec.extra(Some(id), "relaunch", Some(&name), w);
    cx.rec.arm_result(id).evidence.push(name.clone());
    match out {
        Outcome::Ok => Ok(l),
        // The ready check never halts a run; were it to, the relaunch stops as if interrupted.
        Outcome::Cancelled | Outcome::Halt(_) => {
            let (sev, _) = stop_live(cx, id, l).await;
            let stop_name = bundle::stop_interrupted(id, cx.rec.invocation());
            cx.rec.write_json_or_warn(&stop_name, &sev);
            Err(fail(
                FailureClass::Interrupted,
                "interrupted during the relaunch",
                &name,
            ))
        }
        Outcome::Fatal(mut f) | Outcome::GateFailed(mut f) => {
            let (sev, _) = stop_live(cx, id, l).await;
            cx.rec
                .write_json_or_warn(&bundle::stop_relaunch(id, n), &sev);
            f.evidence = Some(name);
            Err(f)
        }
    }
}

/// Stops an arm: the stop facts, the GPU release check, the masked log copy, quality-risk
/// lines. Returns the evidence and whether the lane is free again.
pub async fn stop_live(cx: &mut Cx, id: &str, l: Live) -> (Value, bool) {
    let log_path = l.running.log_path.clone();
    let offset = l.running.log_offset;
    let masker = l.spec.masker();
    let pid = l.running.pid();
    let journal = l.journal;
    let facts = lane::stop(l.running, cx.lane.stop_grace).await;
    if let Some(i) = journal {
        if facts.group_gone {
            cx.rec.journal_set(i, State::Stopped);
        }
    }
    let gpu_check = if !cx.lane_has_gpus() {
        json!({"status": "not-applicable", "reason": "the lane owns no GPU"})
    } else {
        let base = cx
            .gpu_baseline
            .clone()
            .unwrap_or(gpu::GpuProbe::NotApplicable {
                reason: "no idle baseline".into(),
            });
        let uuids = cx.c().lane.gpus.clone();
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
    let log = cx.mask.scrub(&log);
    // The bundle's copy of the engine log is cited only once it is on disk.
    let mut log_written = false;
    if log_path.is_some() {
        match cx.rec.write_text(&l.log_name, &log) {
            Ok(()) => {
                cx.rec.add_evidence(id, &l.log_name);
                log_written = true;
            }
            Err(e) => {
                cx.rec.warn(&e.to_string());
                let n = format!("{}: not written ({e:#})", l.log_name);
                let notes = &mut cx.rec.result().notes;
                if !notes.contains(&n) {
                    notes.push(n);
                }
            }
        }
    }
    let risks: Vec<String> = log
        .lines()
        .filter(|line| {
            cx.c()
                .policy
                .quality_risks
                .iter()
                .any(|r| line.contains(&r.pattern))
        })
        .map(str::to_string)
        .collect();
    let a = cx.rec.arm_result(id);
    for r in risks {
        if !a.quality_risk_lines.contains(&r) {
            a.quality_risk_lines.push(r);
        }
    }
    let ok = facts.group_gone && facts.port_free != Some(false);
    (
        json!({"arm": id, "pid": pid, "stop": facts, "gpu_released": gpu_check,
               "engine_log": if log_written { Some(&l.log_name) } else { None }}),
        ok,
    )
}
