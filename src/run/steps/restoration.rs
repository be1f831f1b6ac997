//! The restoration phase, run on every path out: `restore-incumbent` (start it again, detached,
//! unless it still serves), `restoration-identity` (the same recipe, argv/env, served model and
//! context) and `restoration-preflight` (a fresh preflight). None of them is cancellable.

use super::preflight_check;
use crate::campaign::fingerprint::{changes, fingerprint, Fingerprint};
use crate::campaign::{
    Arm, Campaign, CommandLine, EnvValue, LaunchCommand, PlanStep, PreflightGate, StepKind,
};
use crate::client::Target;
use crate::evidence::bundle;
use crate::evidence::result::GateRecord;
use crate::evidence::{FailureClass, GateName, GateStatus, RestorationStatus};
use crate::gates::{self, Check};
use crate::lane::recipe::Proof;
use crate::lane::{self, procnet};
use crate::run::arm::gate_ctx;
use crate::run::context::Cx;
use crate::run::journal::Journaled;
use crate::run::journal::{Purpose, State};
use crate::run::launch::{launch_spec, runs_recipe};
use crate::run::step_outcome::{fail, Done, Outcome};
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::time::Duration;

/// Why a restoration step failed, in one line, from its evidence.
fn cause(ev: &Value) -> String {
    let f = &ev["failure"];
    if let Some(s) = f.as_str() {
        return s.to_string();
    }
    if let Some(m) = f["message"].as_str() {
        return m.to_string();
    }
    if let Some(d) = ev["detail"].as_str() {
        return d.to_string();
    }
    if let Some(checks) = ev["checks"].as_object() {
        let bad: Vec<String> = checks
            .iter()
            .filter(|(_, v)| *v != &json!(true))
            .map(|(k, _)| {
                if let Some(ch) = ev[k.as_str()]["changes"].as_array() {
                    let ch: Vec<&str> = ch.iter().filter_map(Value::as_str).collect();
                    return format!("{k}: {}", ch.join("; "));
                }
                format!(
                    "{k} expected {} got {}",
                    ev[k.as_str()]["expected"],
                    ev[k.as_str()]["actual"]
                )
            })
            .collect();
        if !bad.is_empty() {
            return format!("identity mismatch: {}", bad.join(", "));
        }
    }
    if let Some(g) = ev["gates"].as_array() {
        let bad: Vec<String> = g
            .iter()
            .filter(|x| x["status"] != "passed")
            .map(|x| {
                format!(
                    "{} {}",
                    x["name"].as_str().unwrap_or("gate"),
                    x["detail"].as_str().unwrap_or("failed")
                )
            })
            .collect();
        if !bad.is_empty() {
            return bad.join("; ");
        }
    }
    "see its evidence".into()
}

/// What serves on the lane port now, in words.
fn lane_now(cx: &Cx) -> String {
    let c = cx.c();
    match procnet::find_listeners(c.lane.port).first() {
        None if lane::port_free(&c.lane.host, c.lane.port) => format!(
            "nothing serves the lane {}:{} now",
            c.lane.host, c.lane.port
        ),
        None => format!(
            "the lane {}:{} is held by a process bakeoff cannot identify",
            c.lane.host, c.lane.port
        ),
        Some(l) => cx.mask.scrub(&format!(
            "pid {} serves the lane {}:{} now: {}",
            l.pid,
            c.lane.host,
            c.lane.port,
            l.cmdline.join(" ")
        )),
    }
}

/// The shell line that starts the incumbent again by hand, its output appended to `log`
/// (secrets read from the same environment variables the campaign names).
pub fn restart_command(cx: &Cx, log: &std::path::Path) -> Option<String> {
    let cmd = cx.c().restart_command(&cx.incumbent(), log)?;
    Some(cx.mask.scrub(&cmd))
}

/// A restoration step's evidence and whether it passed.
fn done(cx: &mut Cx, step: &str, ev: Value, passed: bool, evidence: &str) -> Done {
    if passed {
        return Done::ok(ev);
    }
    let why = format!("{step} failed: {} (see {evidence})", cause(&ev));
    cx.restore.failed_steps.push(why.clone());
    let f = fail(FailureClass::Restoration, why, evidence);
    Done::new(Outcome::Fatal(f), Some(ev))
}

fn incumbent_target(cx: &Cx, inc: &Arm) -> Target {
    inc.recipe()
        .serving_target()
        .unwrap_or_else(|| cx.lane.target())
}

/// The `restore-incumbent` step's evidence and whether the incumbent serves.
fn launch_done(cx: &mut Cx, ev: Value, passed: bool) -> Done {
    done(
        cx,
        "restore-incumbent",
        ev,
        passed,
        bundle::RESTORATION_LAUNCH,
    )
}

/// Starts the incumbent again (detached: it outlives bakeoff), unless it already serves.
pub async fn launch(cx: &mut Cx) -> Done {
    let inc = cx.incumbent();
    let port = cx.c().lane.port;
    let jobs = crate::run::launch::slurm_jobs(cx.c(), &inc);
    if !jobs.is_empty() {
        // A Slurm incumbent that still runs (or waits) under its job name: not submitted again.
        // It may be one a dead run submitted a moment before it died, still pending or starting:
        // waited for until it answers (as a launch is), so the identity check sees it serve.
        let target = incumbent_target(cx, &inc);
        let wait = cx.lane.ready_timeout.max(Duration::from_secs(5));
        let answered = crate::lane::wait_answers(&target, &cx.lane, wait).await;
        let ev = json!({"incumbent": inc.id, "already_serving": true,
            "slurm_jobs": jobs.iter().map(|(id, st, node)| json!({"job_id": id, "state": st, "node": node})).collect::<Vec<_>>(),
            "answers": answered.as_ref().err().map_or("yes".to_string(), |e| format!("not within {:.0} s: {e}", wait.as_secs_f64())),
            "detail": "the incumbent's Slurm job was still running or pending (it had not been stopped); not submitted again"});
        return launch_done(cx, ev, true);
    }
    if let Some(l) = procnet::find_listeners(port).first() {
        let m = runs_recipe(cx.c(), &inc, l);
        let ev = json!({"incumbent": inc.id, "already_serving": m, "process": l,
               "detail": if m { "the incumbent was still serving (it had not been stopped); not started again" }
                         else { "the lane port is held by a process that is not the incumbent; the incumbent could not be restored" }});
        cx.restore.pid = m.then_some(l.pid);
        return launch_done(cx, ev, m);
    }
    let log = bundle::incumbent_log(cx.rec.beside());
    let spec = match launch_spec(cx.c(), &inc, &log) {
        Ok(s) => s,
        Err(e) => {
            let ev = json!({"incumbent": inc.id, "failure": e});
            return launch_done(cx, ev, false);
        }
    };
    let mut lane = cx.lane.clone();
    lane.ready_timeout = lane.ready_timeout.max(Duration::from_secs(5));
    // Recorded before it starts, so a recovery finds it (the incumbent is restored regardless:
    // a journal that cannot be written is the run's failure, not a reason to leave the lane empty).
    let journal = cx
        .rec
        .journal_intent(&inc.id, Purpose::RestoreIncumbent, &spec, &lane)
        .ok();
    let mut r = match lane::launch(&lane, &spec).await {
        Ok(r) => r,
        Err(f) => {
            if let Some(i) = journal {
                cx.rec.journal_set(i, State::LaunchFailed);
            }
            let ev = json!({"incumbent": inc.id, "spec": spec.describe(&lane), "failure": f});
            return launch_done(cx, ev, false);
        }
    };
    if let Some(i) = journal {
        cx.rec.journal_started(i, &r);
    }
    // Test-only: the incumbent was started again, not yet ready.
    crate::run::testhook::pause("restoration-launched").await;
    let pid = r.pid();
    let ready = lane::wait_ready(&mut r, &lane).await;
    if let (Some(i), Err(_)) = (journal, &ready) {
        cx.rec.journal_set(i, State::LaunchFailed);
    }
    let ev = json!({
        "slurm_job": r.slurm_job(),
        "incumbent": inc.id, "spec": spec.describe(&lane), "pid": pid, "detached": true,
        "log_outside_bundle": log.display().to_string(),
        "started_at": r.started_wall,
        "ready": ready.as_ref().ok(), "failure": ready.as_ref().err(),
    });
    // Dropping `Running` leaves the incumbent running (own process group).
    drop(r);
    let ok = ready.is_ok();
    if let Ok(f) = ready {
        cx.restore.ready = Some(f);
        cx.restore.pid = pid;
    }
    launch_done(cx, ev, ok)
}

/// The argv/env identity of what serves the lane as the incumbent, proven the way its recipe
/// kind says ([`Proof`]), and what was looked at.
pub fn serving_identity(
    c: &Campaign,
    inc: &Arm,
    pid: Option<u32>,
    lc: Option<&LaunchCommand>,
) -> (String, Value) {
    match (inc.recipe().proof(), pid, lc) {
        (Proof::Planned, _, None) => (c.argv_env_hash(inc), Value::Null),
        (Proof::Jobs, _, Some(_)) => {
            // An incumbent that is its jobs: a running job of the recipe's name, submitted from
            // the recipe's command line.
            let jobs = crate::run::launch::slurm_jobs(c, inc);
            let running = jobs.iter().any(|j| j.1 == "RUNNING");
            let jobs: Vec<Value> = jobs
                .iter()
                .map(|(id, st, node)| json!({"job_id": id, "state": st, "node": node}))
                .collect();
            let hash = if running {
                c.argv_env_hash(inc)
            } else {
                String::new()
            };
            (hash, json!({"slurm_jobs": jobs}))
        }
        (Proof::Process { planned_hash }, Some(pid), Some(lc)) => {
            let (hash, mut facts) = process_identity(c, inc, pid, lc, planned_hash);
            // A kind whose listener is not itself (a container behind docker's proxy) proves
            // what runs its own way; a failed proof is no identity.
            match inc.recipe().running_identity(&c.at(inc)) {
                None => (hash, facts),
                Some(Ok(seen)) => {
                    facts["running"] = seen;
                    (hash, facts)
                }
                Some(Err(why)) => {
                    facts["running_error"] = json!(why);
                    (String::new(), facts)
                }
            }
        }
        _ => (String::new(), Value::Null),
    }
}

/// The identity of the process serving as the incumbent: its argv and env read back (or, with
/// `planned_hash`, the planned identity once it is found).
fn process_identity(
    c: &Campaign,
    inc: &Arm,
    pid: u32,
    lc: &LaunchCommand,
    planned_hash: bool,
) -> (String, Value) {
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
    let hash = if planned_hash {
        c.argv_env_hash(inc)
    } else {
        h
    };
    (
        hash,
        json!({"pid": pid, "cmdline": l.cmdline, "cmdline_matches_recipe": matches}),
    )
}

/// Proves the restored incumbent is the one that was stopped: recipe hash (re-read from the
/// bundle's campaign copy), argv/env of the serving process, served model and context.
pub async fn identity(cx: &mut Cx, s: &PlanStep) -> Done {
    let StepKind::RestorationIdentity {
        recipe_hash,
        argv_env_hash,
        served_model,
        served_context,
    } = &s.kind
    else {
        unreachable!("dispatched on RestorationIdentity")
    };
    let inc = cx.incumbent();
    let c = cx.c();
    let copy =
        std::fs::read_to_string(cx.rec.dir().join(bundle::CAMPAIGN_COPY)).unwrap_or_default();
    let recipe_actual = crate::campaign::parse(&copy, &c.source.path)
        .ok()
        .and_then(|c| c.arm(&inc.id).map(|a| c.recipe_hash(a)))
        .unwrap_or_default();
    // What actually runs: the serving process's argv and env.
    let lc = c.launch_command(&inc);
    let pid = cx
        .restore
        .pid
        .or_else(|| procnet::find_listeners(c.lane.port).first().map(|l| l.pid));
    let (argv_actual, proc_desc) = serving_identity(c, &inc, pid, lc.as_ref());
    let target = incumbent_target(cx, &inc);
    let (model_ids, ctx) = match &cx.restore.ready {
        Some(f) => (f.model_ids.clone(), f.context_tokens),
        None => served_identity(&target).await,
    };
    let model_actual = model_ids
        .iter()
        .find(|m| *m == served_model)
        .cloned()
        .or(model_ids.first().cloned());
    let rest = &mut cx.restore.record;
    rest.recipe_hash_expected = recipe_hash.clone();
    rest.recipe_hash_actual = recipe_actual.clone();
    rest.argv_env_hash_expected = argv_env_hash.clone();
    rest.argv_env_hash_actual = argv_actual.clone();
    rest.served_model_expected = served_model.clone();
    rest.served_model_actual = model_actual.clone();
    rest.context_expected = *served_context;
    rest.context_actual = ctx;
    // The files and environment the recipe depends on, against the incumbent's stop.
    let before = stop_fingerprint(cx);
    let environ = pid.and_then(procnet::environ);
    let now = fingerprint(cx.c(), &inc, environ.as_deref());
    let file_changes = before
        .as_ref()
        .map(|b| changes(b, &now))
        .unwrap_or_default();
    let files_ev = json!({
        "expected": before, "actual": now, "changes": file_changes,
        "detail": if before.is_none() { "no fingerprint was recorded at the incumbent's stop (it was not stopped by this bundle): nothing to compare" } else { "compared with the fingerprint recorded at the incumbent's stop" },
    });
    let checks = json!({
        "recipe_files": file_changes.is_empty(),
        "recipe_hash": &recipe_actual == recipe_hash,
        "argv_env_hash": &argv_actual == argv_env_hash,
        "served_model": model_actual.as_deref() == Some(served_model.as_str()),
        "context": ctx.is_none_or(|c| c == *served_context),
    });
    let passed = checks
        .as_object()
        .expect("object")
        .values()
        .all(|v| v == &json!(true));
    let ev = json!({
        "incumbent": inc.id,
        "recipe_hash": {"expected": recipe_hash, "actual": recipe_actual},
        "argv_env_hash": {"expected": argv_env_hash, "actual": argv_actual},
        "served_model": {"expected": served_model, "actual": model_actual, "listed": model_ids},
        "context": {"expected": served_context, "actual": ctx},
        "process": proc_desc,
        "recipe_files": files_ev,
        "checks": checks,
        "passed": passed,
    });
    done(cx, s.kind.name(), ev, passed, &s.evidence)
}

/// The recipe fingerprint recorded by the latest stop of the incumbent in this bundle (a resumed
/// invocation's own stop first).
fn stop_fingerprint(cx: &Cx) -> Option<Fingerprint> {
    let dir = cx.rec.dir();
    let names = (2..=cx.rec.invocation())
        .rev()
        .map(bundle::incumbent_shutdown_resume)
        .chain([bundle::INCUMBENT_SHUTDOWN.to_string()]);
    names
        .filter_map(|n| std::fs::read(dir.join(n)).ok())
        .filter_map(|b| serde_json::from_slice::<Value>(&b).ok())
        .find_map(|v| serde_json::from_value(v["recipe_fingerprint"].clone()).ok())
}

/// The preflight gates again, on the restored incumbent (smoke and streaming when the campaign
/// lists none). Not cancellable: the restoration finishes even after a signal.
pub async fn preflight(cx: &mut Cx, s: &PlanStep, list: &[PreflightGate]) -> Done {
    crate::run::testhook::pause("restoration-preflight").await;
    let names: Vec<&str> = if list.is_empty() {
        vec!["smoke", "streaming"]
    } else {
        list.iter().map(|g| g.as_str()).collect()
    };
    let inc = cx.incumbent();
    let target = incumbent_target(cx, &inc);
    let ctx = gate_ctx(cx, &inc, &target);
    let checks: Vec<Check> = names.iter().map(|n| preflight_check(n)).collect();
    let results = gates::run(&ctx, &checks).await;
    let passed_n = results.iter().filter(|r| r.passed()).count() as u64;
    let all = passed_n == results.len() as u64 && !results.is_empty();
    let reasons: Vec<String> = results
        .iter()
        .map(|r| format!("{}: {}", r.gate, r.reason))
        .collect();
    let rec = GateRecord {
        name: GateName::RestorationPreflight,
        status: GateStatus::from_passed(all),
        passed: Some(passed_n),
        total: Some(results.len() as u64),
        detail: reasons.join("; "),
        required: cx.required(GateName::Restoration),
        evidence: Some(s.evidence.clone()),
        requests: None,
    };
    cx.restore.record.preflight = Some(rec);
    let ev = json!({"incumbent": inc.id, "gates": results});
    done(cx, s.kind.name(), ev, all, &s.evidence)
}

/// The restoration's verdict from its steps, into the result.
pub fn settle(cx: &mut Cx) {
    let failed = std::mem::take(&mut cx.restore.failed_steps);
    let mut rest = std::mem::take(&mut cx.restore.record);
    let ok = failed.is_empty();
    if ok {
        crate::run::lanerecord::restored(cx);
    }
    rest.status = RestorationStatus::from_passed(ok);
    // No pid here: it goes stale when the process stops; `bakeoff run` prints it instead.
    rest.detail = if ok {
        "the incumbent serves again from the same recipe, with the declared model and context, and passed a fresh preflight".to_string()
    } else {
        let log = bundle::incumbent_log(cx.rec.beside());
        let restart = match restart_command(cx, &log) {
            Some(c) => format!("; start the incumbent again with: {c}"),
            None => {
                "; the incumbent is an endpoint bakeoff does not start: start it as you usually do"
                    .into()
            }
        };
        let causes = if failed[0].starts_with("restore-incumbent") && failed.len() > 1 {
            // Identity and preflight cannot pass without a serving incumbent: the first cause.
            format!("{}; identity and preflight could not be checked", failed[0])
        } else {
            failed.join("; ")
        };
        format!("{causes}; {}{restart}", lane_now(cx))
    };
    rest.evidence = Some(bundle::RESTORATION_IDENTITY.into());
    cx.rec.result().restoration = Some(rest);
}

/// Served model ids and context from `/v1/models` (max_model_len or meta.n_ctx), else `/props`.
pub async fn served_identity(t: &Target) -> (Vec<String>, Option<u64>) {
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
