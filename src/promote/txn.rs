//! The journaled transaction: stop the incumbent, launch the winner with its exact recipe,
//! readiness with the exit watch, identity, preflight, the bake; and the rollback, proven the way
//! a campaign's restoration is (the same identity code, a fresh preflight).

use super::bake::{self, BakeEnd};
use super::record::{Folder, Phase, Record};
use super::{Options, Outcome, Source};
use crate::campaign::fingerprint::{changes_since, fingerprint, Fingerprint};
use crate::campaign::{Arm, Campaign, Mask};
use crate::client::Target;
use crate::evidence::bundle;
use crate::gates;
use crate::lane::lock::{Holder, LaneLock};
use crate::lane::resident::{self, LaneState, SetBy};
use crate::lane::{self, procnet, LaneSpec, Running};
use crate::run::journal::Journaled;
use crate::run::journal::{Purpose, State};
use crate::run::launch::{lane_spec, launch_spec, runs_recipe};
use crate::run::steps::restoration::{served_identity, serving_identity};
use crate::run::testhook::pause;
use serde_json::json;
use std::time::Duration;

/// Takes the lane lock (one campaign or promotion per lane).
pub fn lock(c: &Campaign, what: &str, dir: &std::path::Path) -> Result<LaneLock, String> {
    LaneLock::acquire(
        &c.lane.host,
        c.lane.port,
        &Holder {
            pid: std::process::id(),
            campaign_id: what.to_string(),
            bundle: dir.to_path_buf(),
            started_at: crate::clock::wall_rfc3339(),
        },
    )
}

/// Runs the promotion with the lane lock held; `before` is the incumbent's fingerprint the
/// rollback check took (the restoration compares against it).
pub async fn run(
    s: &Source,
    o: &Options,
    plan: Vec<String>,
    before: Fingerprint,
) -> anyhow::Result<Outcome> {
    let c = &s.campaign;
    let rec = Record {
        schema: super::record::SCHEMA.into(),
        phase: Phase::Planned,
        campaign_bundle: s.dir.clone(),
        campaign_root_digest: s.root_digest.clone(),
        campaign_id: c.campaign.id.clone(),
        arm: s.arm.id.clone(),
        incumbent: c.incumbent().id.clone(),
        authorization: s.authorization.clone(),
        lane: format!("{}:{}", c.lane.host, c.lane.port),
        lanes: s.lanes.clone(),
        bake: json!({
            "bake_s": o.bake.as_secs_f64(), "table": o.table, "baseline": s.baseline,
            "plan": plan, "incumbent_fingerprint": before,
        }),
        steps: Vec::new(),
        intervals: Vec::new(),
        decision: None,
        why: String::new(),
        restart: Vec::new(),
        started_at: crate::clock::wall_rfc3339(),
        ended_at: None,
        notes: Vec::new(),
    };
    let mut f = Folder::create(&o.out, rec)?;
    let lane = lane_spec(c);
    (o.say)(&format!("promotion folder {}", o.out.display()));
    if let Some(l) = &s.lanes {
        (o.say)(&format!("`{}` {}", s.arm.id, l.words));
    }
    f.set_phase(Phase::Switching)?;
    pause("promote-before-stop").await;
    if let Err(why) = stop_incumbent(c, &mut f, &lane).await {
        return Ok(rollback(s, o, &mut f, &lane, None, &before, why).await);
    }
    pause("promote-incumbent-stopped").await;
    (o.say)(&format!("incumbent `{}` stopped", c.incumbent().id));
    let (running, i) = match launch_winner(c, &s.arm, &s.measured, &mut f, &lane).await {
        Ok(r) => r,
        Err((why, r)) => return Ok(rollback(s, o, &mut f, &lane, r, &before, why).await),
    };
    (o.say)(&format!(
        "`{}` serves the lane; identity and preflight proven",
        s.arm.id
    ));
    if let Some(sig) = *o.cancel.borrow() {
        let why = format!("{sig} arrived before the bake");
        return Ok(rollback(s, o, &mut f, &lane, Some((running, i)), &before, why).await);
    }
    f.set_phase(Phase::Baking)?;
    let mut running = running;
    match bake::run(s, o, &mut f, &mut running).await {
        BakeEnd::Passed(why) | BakeEnd::Finished(why) => Ok(keep(s, o, &mut f, running, i, why)),
        BakeEnd::Failed(why) => {
            Ok(rollback(s, o, &mut f, &lane, Some((running, i)), &before, why).await)
        }
    }
}

/// The winner stays: the record says promoted, the lane record names it.
fn keep(
    s: &Source,
    o: &Options,
    f: &mut Folder,
    running: Running,
    i: usize,
    why: String,
) -> Outcome {
    let c = &s.campaign;
    f.journal_close(&[(
        i,
        State::Started,
        "kept: promoted, it serves the lane".into(),
    )]);
    let pid = running.pid();
    // Dropping `Running` leaves the winner serving (its own process group, or container, or job).
    drop(running);
    let rec = crate::run::lanerecord::record_for(c, &s.arm, pid, set_by(s, o));
    if let Err(e) = resident::write(rec) {
        f.rec.notes.push(e);
    }
    finish(f, Phase::Promoted, format!("promoted: {why}"), Vec::new())
}

fn set_by(s: &Source, o: &Options) -> SetBy {
    SetBy {
        kind: "promotion".into(),
        id: s.campaign.campaign.id.clone(),
        dir: o.out.clone(),
    }
}

/// Records the decision and seals the folder.
pub fn finish(f: &mut Folder, phase: Phase, why: String, restart: Vec<String>) -> Outcome {
    f.rec.phase = phase;
    f.rec.decision = Some(phase.as_str().to_string());
    f.rec.why = why.clone();
    f.rec.restart = restart.clone();
    f.rec.ended_at = Some(crate::clock::wall_rfc3339());
    let text = super::summary::markdown(&f.rec);
    let page = super::page::render(&f.rec);
    let root_digest = match f.seal(&text, &page) {
        Ok(d) => d,
        Err(e) => {
            f.rec
                .notes
                .push(format!("the folder could not be sealed: {e:#}"));
            String::new()
        }
    };
    Outcome {
        phase,
        why,
        root_digest,
        restart,
    }
}

/// Stops what serves as the incumbent (its process group, or its Slurm jobs).
async fn stop_incumbent(c: &Campaign, f: &mut Folder, lane: &LaneSpec) -> Result<(), String> {
    let inc = c.incumbent();
    f.intent("stop-incumbent", format!("stop `{}`", inc.id))
        .map_err(|e| format!("the folder cannot be written ({e:#}); nothing was stopped"))?;
    let (host, port) = (c.lane.host.clone(), c.lane.port);
    if let Some(job_name) = inc.recipe().job_name() {
        let sbatch = c
            .launch_command(inc)
            .map(|l| l.start.argv[0].clone())
            .unwrap_or_default();
        let jobs = lane::slurm::jobs_named(&sbatch, job_name).map_err(|e| {
            let w = format!("could not list the incumbent's Slurm jobs: {e}");
            f.ended("stop-incumbent", false, w.clone(), json!(null));
            w
        })?;
        for (id, _, _) in &jobs {
            lane::slurm::stop_job(&sbatch, id, lane.stop_grace).await;
        }
        let free = lane::wait_port_free(&host, port, Duration::from_secs(10)).await;
        f.ended(
            "stop-incumbent",
            true,
            format!("cancelled {} job(s); port free: {free}", jobs.len()),
            json!({"jobs": jobs.len()}),
        );
        return Ok(());
    }
    let Some(l) = procnet::find_listeners(port).first().cloned() else {
        let w = "nothing served the lane any more when the incumbent was to be stopped".to_string();
        f.ended("stop-incumbent", false, w.clone(), json!(null));
        return Err(w);
    };
    if !runs_recipe(c, inc, &l) {
        let w = format!(
            "pid {} on the lane port is not the incumbent any more; it was left alone",
            l.pid
        );
        f.ended("stop-incumbent", false, w.clone(), json!(null));
        return Err(w);
    }
    let st = procnet::stop_foreign(&l, lane.stop_grace).await;
    let free = lane::wait_port_free(&host, port, Duration::from_secs(10)).await;
    let ok = free && st.gone;
    let w = format!(
        "stopped pid {} ({}): port {}",
        l.pid,
        st.target,
        if free { "free" } else { "still taken" }
    );
    f.ended(
        "stop-incumbent",
        ok,
        w.clone(),
        json!({"stop": st, "pid": l.pid}),
    );
    if ok {
        Ok(())
    } else {
        Err(w)
    }
}

type Launched = (Running, usize);

/// Launches the winner, waits until ready (exit watch), proves its identity and runs the
/// preflight. Err: why, and what was started (to stop in the rollback).
async fn launch_winner(
    c: &Campaign,
    arm: &Arm,
    measured: &Fingerprint,
    f: &mut Folder,
    lane: &LaneSpec,
) -> Result<Launched, (String, Option<Launched>)> {
    let log = bundle::promoted_log(&f.dir);
    let spec = launch_spec(c, arm, &log).map_err(|e| (format!("launch-winner: {e}"), None))?;
    let _ = f.intent("launch-winner", format!("launch `{}`", arm.id));
    let i = f
        .journal_intent(&arm.id, Purpose::Arm, &spec, lane)
        .map_err(|e| {
            (
                format!("the launch journal cannot be written ({e:#}); nothing was launched"),
                None,
            )
        })?;
    let mut r = match lane::launch(lane, &spec).await {
        Ok(r) => r,
        Err(e) => {
            f.journal_set(i, State::LaunchFailed);
            let w = format!("launch-winner: {}", e.message);
            f.ended("launch-winner", false, w.clone(), json!({"failure": e}));
            return Err((w, None));
        }
    };
    f.journal_started(i, &r);
    pause("promote-winner-launched").await;
    let ready = match lane::wait_ready(&mut r, lane).await {
        Ok(x) => x,
        Err(e) => {
            f.journal_set(i, State::LaunchFailed);
            let w = format!("launch-winner: not ready: {}", e.message);
            f.ended("launch-winner", false, w.clone(), json!({"failure": e}));
            return Err((w, Some((r, i))));
        }
    };
    f.ended(
        "launch-winner",
        true,
        format!("ready in {:.0} ms", ready.ready_ms),
        json!({"ready": ready, "pid": r.pid()}),
    );
    let (models, ctx) = (ready.model_ids.clone(), ready.context_tokens);
    // A container has no pid of bakeoff's own: what listens on the lane port is proven (the
    // engine, or docker's proxy), as a restored container incumbent is.
    let pid = r
        .pid()
        .or_else(|| procnet::find_listeners(c.lane.port).first().map(|l| l.pid));
    let measured = Some((measured, "the bake-off launched it"));
    if let Err(w) = identity(c, arm, pid, &models, ctx, measured, f, "winner-identity") {
        return Err((w, Some((r, i))));
    }
    if let Err(w) = preflight(c, arm, &r.target, f, "winner-preflight").await {
        return Err((w, Some((r, i))));
    }
    Ok((r, i))
}

/// Proves `arm` serves as `pid`: the argv/env hash of its recipe, the served model and context,
/// and (with `before`) its files and environment unchanged.
#[allow(clippy::too_many_arguments)]
fn identity(
    c: &Campaign,
    arm: &Arm,
    pid: Option<u32>,
    models: &[String],
    ctx: Option<u64>,
    before: Option<(&Fingerprint, &str)>,
    f: &mut Folder,
    step: &str,
) -> Result<(), String> {
    let _ = f.intent(step, format!("prove `{}` serves", arm.id));
    let lc = c.launch_command(arm);
    let (hash, process) = serving_identity(c, arm, pid, lc.as_ref());
    let expected = c.argv_env_hash(arm);
    let environ = pid.and_then(procnet::environ);
    let now = fingerprint(c, arm, environ.as_deref());
    let file_changes = before
        .map(|(b, since)| changes_since(b, &now, since))
        .unwrap_or_default();
    let mut bad = Vec::new();
    if let Some(w) = process.get("running_error").and_then(|v| v.as_str()) {
        bad.push(w.to_string());
    } else if hash != expected {
        bad.push(format!(
            "argv/env hash expected {expected}, got {}",
            if hash.is_empty() { "nothing" } else { &hash }
        ));
    }
    if !models.contains(&arm.served_model) {
        bad.push(format!(
            "served model expected `{}`, listed {:?}",
            arm.served_model, models
        ));
    }
    if ctx.is_some_and(|x| x != arm.served_context) {
        bad.push(format!(
            "context expected {}, got {}",
            arm.served_context,
            ctx.unwrap_or(0)
        ));
    }
    if !file_changes.is_empty() {
        bad.push(format!("files changed: {}", file_changes.join("; ")));
    }
    let facts = json!({"argv_env_hash": {"expected": expected, "actual": hash}, "process": process,
        "served_model": {"expected": arm.served_model, "listed": models}, "context": {"expected": arm.served_context, "actual": ctx},
        "recipe_files": {"changes": file_changes}});
    if bad.is_empty() {
        f.ended(
            step,
            true,
            "same recipe (argv/env), served model and context",
            facts,
        );
        Ok(())
    } else {
        let w = format!("{step}: {}", bad.join("; "));
        f.ended(step, false, w.clone(), facts);
        Err(w)
    }
}

/// The campaign's preflight gates on `arm` at `target`.
async fn preflight(
    c: &Campaign,
    arm: &Arm,
    target: &Target,
    f: &mut Folder,
    step: &str,
) -> Result<(), String> {
    let _ = f.intent(step, format!("preflight of `{}`", arm.id));
    let g = super::canary::context(c, arm, target);
    let checks: Vec<_> = super::preflight_names(c)
        .iter()
        .map(|n| crate::run::steps::preflight_check(n))
        .collect();
    let results = gates::run(&g, &checks).await;
    let bad: Vec<String> = results
        .iter()
        .filter(|r| !r.passed())
        .map(|r| format!("{}: {}", r.gate, r.reason))
        .collect();
    let facts = json!({"gates": results});
    if bad.is_empty() && !results.is_empty() {
        f.ended(
            step,
            true,
            format!("{} gate(s) passed", results.len()),
            facts,
        );
        Ok(())
    } else {
        let w = format!("{step}: {}", bad.join("; "));
        f.ended(step, false, w.clone(), facts);
        Err(w)
    }
}

/// The rollback: stop the winner (when started), restore the incumbent and prove it. A rollback
/// that cannot be proven marks the lane.
pub async fn rollback(
    s: &Source,
    o: &Options,
    f: &mut Folder,
    lane: &LaneSpec,
    winner: Option<Launched>,
    before: &Fingerprint,
    why: String,
) -> Outcome {
    (o.say)(&format!("rolling back: {why}"));
    let _ = f.set_phase(Phase::RollingBack);
    if let Some((r, i)) = winner {
        let _ = f.intent("stop-winner", format!("stop `{}`", s.arm.id));
        let st = lane::stop(r, lane.stop_grace).await;
        f.journal_set(i, State::Stopped);
        let ok = st.group_gone;
        f.ended(
            "stop-winner",
            ok,
            if ok {
                "stopped"
            } else {
                "its process group is still alive"
            },
            json!({"stop": st}),
        );
    }
    pause("promote-rollback").await;
    let c = &s.campaign;
    match restore(c, f, lane, Some(before)).await {
        Ok(words) => {
            let pid = procnet::find_listeners(c.lane.port).first().map(|l| l.pid);
            let rec = crate::run::lanerecord::record_for(c, c.incumbent(), pid, set_by(s, o));
            if let Err(e) = resident::write(rec) {
                f.rec.notes.push(e);
            }
            finish(
                f,
                Phase::RolledBack,
                format!("rolled back ({why}); {words}"),
                Vec::new(),
            )
        }
        Err(e) => failed(
            c,
            f,
            set_by(s, o),
            format!("{why}; then the rollback failed: {e}"),
        ),
    }
}

/// The rollback failed: the lane is marked and the restart commands are kept.
pub fn failed(c: &Campaign, f: &mut Folder, by: SetBy, why: String) -> Outcome {
    let restart: Vec<String> = restart_command(c, &bundle::incumbent_log(&f.dir))
        .into_iter()
        .collect();
    let mut rec = crate::run::lanerecord::record_for(c, c.incumbent(), None, by);
    rec.state = LaneState::RollbackFailed;
    rec.detail = why.clone();
    rec.restart = restart.clone();
    if let Err(e) = resident::write(rec) {
        f.rec.notes.push(e);
    }
    finish(f, Phase::RollbackFailed, why, restart)
}

/// Puts the incumbent back unless it serves, then proves it (identity with `before`, preflight).
pub async fn restore(
    c: &Campaign,
    f: &mut Folder,
    lane: &LaneSpec,
    before: Option<&Fingerprint>,
) -> Result<String, String> {
    let inc = c.incumbent();
    let target = inc
        .recipe()
        .serving_target()
        .unwrap_or_else(|| lane.target());
    let (pid, ready, words) = match serving_incumbent(c)? {
        Some(pid) => (pid, None, "the incumbent was still serving".to_string()),
        None => {
            let (pid, ready) = relaunch(c, inc, f, lane).await?;
            (
                pid,
                Some(ready),
                "the incumbent was started again".to_string(),
            )
        }
    };
    let (models, ctx) = match ready {
        Some(r) => (r.model_ids, r.context_tokens),
        None => served_identity(&target).await,
    };
    let before = before.map(|b| (b, "the incumbent's stop"));
    identity(c, inc, pid, &models, ctx, before, f, "restore-identity")?;
    preflight(c, inc, &target, f, "restore-preflight").await?;
    Ok(format!(
        "{words}; proven: same recipe, model and context, unchanged files, fresh preflight passed"
    ))
}

/// Does the incumbent serve now? Ok(Some(pid)) (pid None: a job-run one), Ok(None): nothing
/// serves; Err: something else holds the lane port.
fn serving_incumbent(c: &Campaign) -> Result<Option<Option<u32>>, String> {
    let inc = c.incumbent();
    if inc.recipe().job_name().is_some() {
        let jobs = crate::run::launch::slurm_jobs(c, inc);
        return Ok(jobs.iter().any(|j| j.1 == "RUNNING").then_some(None));
    }
    match procnet::find_listeners(c.lane.port).first() {
        None if lane::port_free(&c.lane.host, c.lane.port) => Ok(None),
        None => Err(format!("the lane port {} is held by a process bakeoff cannot identify; the incumbent could not be restored", c.lane.port)),
        Some(l) if runs_recipe(c, inc, l) => Ok(Some(Some(l.pid))),
        Some(l) => Err(Mask::from_process_env(c).scrub(&format!(
            "the lane port is held by pid {} ({}), not the incumbent; it was left alone and the incumbent could not be restored",
            l.pid,
            l.cmdline.join(" ")
        ))),
    }
}

async fn relaunch(
    c: &Campaign,
    inc: &Arm,
    f: &mut Folder,
    lane: &LaneSpec,
) -> Result<(Option<u32>, lane::ReadyFacts), String> {
    let spec = launch_spec(c, inc, &bundle::incumbent_log(&f.dir))?;
    let _ = f.intent("restore-incumbent", format!("start `{}` again", inc.id));
    let mut lane = lane.clone();
    lane.ready_timeout = lane.ready_timeout.max(Duration::from_secs(5));
    // Recorded before it starts, but restored regardless: an unwritable journal must not leave
    // the lane empty.
    let i = f
        .journal_intent(&inc.id, Purpose::RestoreIncumbent, &spec, &lane)
        .ok();
    let mut r = match lane::launch(&lane, &spec).await {
        Ok(r) => r,
        Err(e) => {
            if let Some(i) = i {
                f.journal_set(i, State::LaunchFailed);
            }
            let w = format!("restore-incumbent: {}", e.message);
            f.ended("restore-incumbent", false, w.clone(), json!({"failure": e}));
            return Err(w);
        }
    };
    if let Some(i) = i {
        f.journal_started(i, &r);
    }
    pause("promote-restore-launched").await;
    let ready = lane::wait_ready(&mut r, &lane).await;
    let pid = r.pid();
    // Dropping `Running` leaves the incumbent serving (it outlives bakeoff).
    drop(r);
    match ready {
        Ok(x) => {
            f.ended(
                "restore-incumbent",
                true,
                format!("ready in {:.0} ms", x.ready_ms),
                json!({"pid": pid, "ready": x}),
            );
            Ok((pid, x))
        }
        Err(e) => {
            if let Some(i) = i {
                f.journal_set(i, State::LaunchFailed);
            }
            let w = format!("restore-incumbent: not ready: {}", e.message);
            f.ended("restore-incumbent", false, w.clone(), json!({"failure": e}));
            Err(w)
        }
    }
}

/// The shell line that starts the incumbent again by hand, its output appended to `log`;
/// secrets as the variables the campaign names.
pub fn restart_command(c: &Campaign, log: &std::path::Path) -> Option<String> {
    let cmd = c.restart_command(c.incumbent(), log)?;
    Some(Mask::from_process_env(c).scrub(&cmd))
}
