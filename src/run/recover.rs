//! Recovery after bakeoff itself died (SIGKILL, the OOM killer, a reboot): what the dead run left
//! on the lane, proven from its launch journal ([`super::journal`]), stopped; the incumbent put
//! back; the bundle sealed with a note that says what happened.
//!
//! ```text
//! leftovers (bakeoff run --resume, bakeoff recover): for each journal entry still open
//!   arm / relaunch ─▶ prove (pid + start time + argv, same boot) ─▶ own: stop its group
//!                                                               ─▶ not ours: left alone, said
//!   Slurm arm ─▶ prove (scontrol: job id + job name + uid + submit time) ─▶ own: scancel, wait
//!                until Slurm lists it ended and the port is free   ─▶ not ours: left alone, said
//!   restore-incumbent ─▶ own and alive: it is the incumbent (kept; waited for until it listens)
//! recover (bakeoff recover only): leftovers, then the restoration steps (launch unless the
//!   incumbent serves, identity, preflight), `recovery-<n>.json`, the manifest
//! ```

use super::cx::{Cx, Outcome as StepOutcome};
use super::journal::{Entry, Purpose, State};
use super::recorder::{read_journal, Recorder};
use super::steps::restoration;
use super::{Notify, Options};
use crate::campaign::{Campaign, Plan, StepKind};
use crate::evidence::bundle;
use crate::lane::adopt::{self, Found};
use crate::lane::adopt_slurm::{self, Job, SlurmMark};
use crate::lane::procnet;
use anyhow::Result;
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// What a recovery found of the dead run and did about it.
#[derive(Debug, Clone, Default)]
pub struct Recovery {
    /// One line per finding, for the terminal and the notes.
    pub lines: Vec<String>,
    /// The invocation that died before sealing the bundle, in words (none: it did not die).
    pub died: Option<String>,
    /// What could not be proven the run's own and was left alone (with what to do).
    pub unproven: Vec<String>,
    /// Journal entries to update: (index, new state, what was done).
    changes: Vec<(usize, State, String)>,
    /// Slurm jobs of the dead run this recovery cancelled (their ids).
    pub cancelled_jobs: Vec<String>,
    /// What the last Slurm entry's proof and cancel found (moved into its `found` entry).
    slurm_facts: Option<Value>,
    /// The evidence (`recovery-<n>.json`'s `found`).
    pub evidence: Value,
}

impl Recovery {
    /// Nothing of a dead run was found (nothing to say in the bundle).
    pub fn is_empty(&self) -> bool {
        self.died.is_none() && self.changes.is_empty() && self.unproven.is_empty()
    }
}

/// The bundle's result says its last invocation is still running, and no manifest was written:
/// that invocation died (the caller holds the lane lock, so it is not running).
fn died(dir: &Path) -> Option<String> {
    let r: Value = serde_json::from_slice(&std::fs::read(dir.join(bundle::RESULT)).ok()?).ok()?;
    let running = r["incomplete_reason"]
        .as_str()
        .is_some_and(|s| s.starts_with("running"));
    if !running || r["complete"] == true {
        return None;
    }
    let ck = crate::campaign::checkpoint::Checkpoint::load(dir).ok();
    let inv = ck.map(|c| c.invocations).unwrap_or(0);
    let at = r["updated_at"].as_str().unwrap_or("?");
    Some(format!(
        "invocation {inv} of this bundle died before it finished (bakeoff was killed: SIGKILL, the OOM killer or a reboot; last record at {at}); it wrote no manifest{}",
        if dir.join(bundle::MANIFEST).exists() {
            " for its own steps"
        } else {
            ""
        }
    ))
}

/// Finds what the dead run left on the lane (from the bundle's launch journal), stops what is
/// proven its own and says what it found. Call with the lane lock held. Never signals a process
/// it cannot prove the run started.
pub fn leftovers(dir: &Path, c: &Campaign) -> Result<Recovery> {
    let journal = read_journal(dir)?;
    let mut r = Recovery {
        died: died(dir),
        ..Default::default()
    };
    let grace = Duration::from_secs(c.lane.stop_grace_s);
    let mut found = Vec::new();
    for (i, e) in journal.entries.iter().enumerate() {
        if !e.open() {
            continue;
        }
        let (state, what) = one(e, c, grace, &mut r);
        found.push(json!({
            "seq": e.seq, "arm": e.arm, "purpose": e.purpose, "invocation": e.invocation,
            "recorded": e.marks.process, "container": e.marks.container, "slurm": e.marks.slurm,
            "state": state, "detail": what,
        }));
        if let (Some(x), Some(v)) = (found.last_mut(), r.slurm_facts.take()) {
            x["slurm_jobs"] = v;
        }
        r.lines.push(what.clone());
        if let Some(s) = state {
            r.changes.push((i, s, what));
        }
    }
    if journal.entries.is_empty() {
        r.lines.push(format!(
            "the bundle has no {}: nothing recorded as started by its runs",
            bundle::LAUNCH_JOURNAL
        ));
    }
    r.evidence = json!({
        "died": r.died, "entries": found, "unproven": r.unproven,
        "at": crate::clock::wall_rfc3339(),
    });
    Ok(r)
}

/// One open journal entry: its new state (none: unchanged) and what was done, in words.
fn one(e: &Entry, c: &Campaign, grace: Duration, r: &mut Recovery) -> (Option<State>, String) {
    let who = format!(
        "{} `{}` (launch {} of invocation {})",
        match e.purpose {
            Purpose::Arm => "arm",
            Purpose::Relaunch => "relaunched arm",
            Purpose::RestoreIncumbent => "restored incumbent",
        },
        e.arm,
        e.seq,
        e.invocation
    );
    if let Some(m) = &e.marks.slurm {
        return slurm_one(e, m, &who, c, grace, r);
    }
    if let Some(ct) = &e.marks.container {
        if e.purpose == Purpose::RestoreIncumbent {
            // The restored incumbent: kept (the lane check after the recovery sees if it serves).
            return match adopt::container_labels(&ct.docker, &ct.name) {
                Ok(None) => (
                    Some(State::Gone),
                    format!("{who}: container `{}` is gone", ct.name),
                ),
                Ok(Some(_)) => (
                    None,
                    format!("{who}: container `{}` is there: kept", ct.name),
                ),
                Err(e) => (
                    None,
                    format!("{who}: container `{}` could not be checked: {e}", ct.name),
                ),
            };
        }
        return match adopt::adopt_container(&ct.docker, &ct.name, &ct.labels) {
            Found::Gone(why) => (Some(State::Gone), format!("{who}: already gone ({why})")),
            Found::Own(_) => (
                Some(State::StoppedByRecovery),
                format!(
                    "{who}: container `{}` left running by the dead run (its labels match): removed",
                    ct.name
                ),
            ),
            Found::NotOurs(why) => {
                let msg = format!(
                    "{who}: NOT stopped: {why}; if it is a leftover of this run, remove it yourself (`{} rm -f {}`)",
                    ct.docker, ct.name
                );
                r.unproven.push(msg.clone());
                (None, msg)
            }
        };
    }
    let marks = match &e.marks.process {
        Some(m) => vec![m.clone()],
        None => {
            // Killed between the intent and the pid's record: what started with that argv since.
            let found = match e.intent_ticks {
                Some(t) if e.boot_id == adopt::boot_id() => adopt::started_after(&e.argv, t),
                _ => Vec::new(),
            };
            if found.is_empty() {
                return (
                    Some(State::Gone),
                    format!("{who}: recorded as about to start, but no process with its argv started since then is running"),
                );
            }
            found
        }
    };
    let mut words = Vec::new();
    let mut state = None;
    for m in &marks {
        match adopt::prove(m) {
            Found::Gone(why) => {
                words.push(format!("{who}: already gone ({why})"));
                state.get_or_insert(State::Gone);
            }
            Found::NotOurs(why) => {
                let msg = format!(
                    "{who}: NOT stopped: {why}; bakeoff stops only what it can prove it started; if it is a leftover of this run, stop it yourself (`kill -TERM -- -{}`)",
                    m.pgid
                );
                r.unproven.push(msg.clone());
                words.push(msg);
                state.get_or_insert(State::Gone);
            }
            Found::Own(pids) if e.purpose == Purpose::RestoreIncumbent => {
                if wait_listening(c, m.pgid, Duration::from_secs(c.lane.ready_timeout_s)) {
                    words.push(format!(
                        "{who}: still runs (pid {}, proven by its start time and argv) and serves the lane: kept",
                        m.pid
                    ));
                } else {
                    let st = adopt::stop_group(m.pgid, grace);
                    words.push(format!(
                        "{who}: runs (pids {pids:?}) but never listened on the lane port: stopped ({})",
                        stop_words(&st)
                    ));
                    state = Some(State::StoppedByRecovery);
                }
            }
            Found::Own(pids) => {
                let st = adopt::stop_group(m.pgid, grace);
                words.push(format!(
                    "{who}: left running by the dead run (pid {}, started at tick {}, argv as recorded; group members {pids:?}): stopped ({})",
                    m.pid,
                    m.start_ticks,
                    stop_words(&st)
                ));
                state = Some(if st.gone {
                    State::StoppedByRecovery
                } else {
                    r.unproven.push(format!(
                        "{who}: processes {:?} survived SIGKILL",
                        st.remaining_pids
                    ));
                    State::Started
                });
            }
        }
    }
    (state, words.join("; "))
}

/// One open journal entry of a Slurm job: the recorded job id proven (scontrol: id, name, uid,
/// submit time) and cancelled; without a recorded id (the run died before sbatch's answer was
/// recorded), the live jobs of the recorded name, each proven the same way (submitted no earlier
/// than the intent).
fn slurm_one(
    e: &Entry,
    m: &SlurmMark,
    who: &str,
    c: &Campaign,
    grace: Duration,
    r: &mut Recovery,
) -> (Option<State>, String) {
    let by_id = !m.job_id.is_empty();
    let ids = if by_id {
        vec![m.job_id.clone()]
    } else {
        match adopt_slurm::named(m) {
            Ok(ids) if ids.is_empty() => {
                r.slurm_facts = Some(json!([]));
                return (
                    Some(State::Gone),
                    format!(
                        "{who}: recorded as about to be submitted as Slurm job `{}` (its id was never recorded), and Slurm lists no live job of that name",
                        m.job_name
                    ),
                );
            }
            Ok(ids) => ids,
            Err(err) => {
                let msg = format!(
                    "{who}: recorded as about to be submitted as Slurm job `{}` (its id was never recorded), and Slurm cannot be asked ({err}); NOT cancelled: if a job of that name is a leftover of this run, cancel it yourself (`squeue --name {}`, then `scancel ID`)",
                    m.job_name, m.job_name
                );
                r.unproven.push(msg.clone());
                return (None, msg);
            }
        }
    };
    let mut words = Vec::new();
    let mut facts = Vec::new();
    let mut state = None;
    for id in &ids {
        match adopt_slurm::prove(m, id) {
            Job::Gone(why) => {
                words.push(format!("{who}: Slurm job {id} is already gone ({why})"));
                state.get_or_insert(State::Gone);
                facts.push(json!({"job_id": id, "found": "gone", "why": why}));
            }
            Job::NotOurs(why) => {
                let msg = format!(
                    "{who}: Slurm job {id} NOT cancelled: {why}; bakeoff cancels only a job it can prove the dead run submitted (recorded id, name `{}`, uid {}, submitted after the run meant to); if it is a leftover of this run, cancel it yourself (`scancel {id}`)",
                    m.job_name, m.uid
                );
                // Found by name only: a job of that name submitted earlier is not this launch's.
                if by_id {
                    r.unproven.push(msg.clone());
                }
                words.push(msg);
                state.get_or_insert(State::Gone);
                facts.push(json!({"job_id": id, "found": "not-ours", "why": why}));
            }
            Job::Own(seen) if e.purpose == Purpose::RestoreIncumbent => {
                words.push(format!(
                    "{who}: Slurm job {id} `{}` is still {} (proven by its id, name, user and submit time): kept",
                    seen.job_name, seen.state
                ));
                facts.push(json!({"job_id": id, "found": "own", "seen": seen, "kept": true}));
            }
            Job::Own(seen) => {
                let st = adopt_slurm::cancel(m, &seen, grace, c.lane.port);
                let port = match (st.port_free, &st.port_host) {
                    (Some(true), Some(h)) => format!("; port {h}:{} is free", c.lane.port),
                    (Some(false), Some(h)) => format!(
                        "; port {h}:{} still answers 10 s after the job ended",
                        c.lane.port
                    ),
                    _ => String::new(),
                };
                words.push(format!(
                    "{who}: Slurm job {id} `{}` ({}, {}, node {}) left running by the dead run (proven by its id, name, user and submit time): {}; Slurm lists it {}{port}",
                    seen.job_name,
                    seen.state,
                    seen.user,
                    seen.node.as_deref().unwrap_or("none yet"),
                    st.commands.join(", then "),
                    if st.state.is_empty() { "no more" } else { &st.state },
                ));
                if st.ended {
                    state = Some(State::StoppedByRecovery);
                    r.cancelled_jobs.push(id.clone());
                } else {
                    r.unproven.push(format!(
                        "{who}: Slurm job {id} is still listed as {} after scancel; check it with `squeue -j {id}` and cancel it with `scancel {id}`",
                        st.state
                    ));
                    state = Some(State::Started);
                }
                facts.push(json!({"job_id": id, "found": "own", "seen": seen, "cancel": st}));
            }
        }
    }
    r.slurm_facts = Some(json!(facts));
    (state, words.join("; "))
}

fn stop_words(st: &adopt::GroupStop) -> String {
    format!(
        "SIGTERM to process group {}{}; {}",
        st.pgid,
        if st.sigkill_sent {
            ", then SIGKILL"
        } else {
            ""
        },
        if st.gone {
            "nothing of it is left".to_string()
        } else {
            format!("still alive: {:?}", st.remaining_pids)
        }
    )
}

/// Waits until a process of group `pgid` listens on the lane port.
fn wait_listening(c: &Campaign, pgid: u32, limit: Duration) -> bool {
    let t = Instant::now();
    loop {
        let ls = procnet::find_listeners(c.lane.port);
        if ls.iter().any(|l| l.pgid == Some(pgid)) {
            return true;
        }
        if t.elapsed() >= limit || crate::lane::process::group_members(pgid).is_empty() {
            return false;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Records a recovery in the bundle being resumed: `recovery-<n>.json`, the journal's new states,
/// and notes (the dead invocation; what was stopped or left alone).
pub(super) fn record(rec: &mut Recorder, r: &Recovery, extra: Value) -> String {
    let name = bundle::recovery(rec.invocation());
    let mut ev = r.evidence.clone();
    if let (Some(o), Some(x)) = (ev.as_object_mut(), extra.as_object()) {
        o.extend(x.clone());
    }
    rec.write_json_or_warn(&name, &ev);
    for (i, st, what) in &r.changes {
        if let Some(e) = rec.journal().entries.get_mut(*i) {
            e.state = *st;
            e.recovery = Some(what.clone());
            e.updated_at = crate::clock::wall_rfc3339();
        }
    }
    let _ = rec.save_journal();
    let inv = rec.invocation();
    let mut notes = Vec::new();
    if let Some(d) = &r.died {
        notes.push(format!(
            "{d}; invocation {inv} recovered the lane (see {name})"
        ));
    }
    let stopped = r
        .changes
        .iter()
        .filter(|c| c.1 == State::StoppedByRecovery)
        .count()
        .saturating_sub(r.cancelled_jobs.len());
    if !r.cancelled_jobs.is_empty() {
        notes.push(format!(
            "invocation {inv} cancelled Slurm job(s) {} the dead run left running (see {name})",
            r.cancelled_jobs.join(", ")
        ));
    }
    if stopped > 0 {
        notes.push(format!(
            "invocation {inv} stopped {stopped} process group(s) the dead run left running (see {name})"
        ));
    }
    for u in &r.unproven {
        notes.push(format!("invocation {inv}: {u}"));
    }
    let res = rec.result();
    for n in notes {
        if !res.notes.contains(&n) {
            res.notes.push(n);
        }
    }
    name
}

/// What `bakeoff recover` did.
pub struct Recovered {
    pub lines: Vec<String>,
    /// The incumbent serves with its identity again.
    pub lane_ok: bool,
    /// The evidence file written (none: the bundle was not touched).
    pub evidence: Option<String>,
    /// The bundle was complete (and stays so): nothing to resume.
    pub complete: bool,
}

/// `bakeoff recover DIR`: the dead run's leftovers stopped, the incumbent restored (started
/// again unless it serves; identity and a preflight checked), the bundle sealed with a manifest.
/// It runs no arm: `bakeoff run --resume DIR` finishes the campaign. Call with the lane lock held.
pub async fn recover(
    plan: Plan,
    dir: PathBuf,
    notify: Notify,
    notes: Vec<String>,
) -> Result<Recovered> {
    let found = leftovers(&dir, &plan.campaign)?;
    let mut lines = found.lines.clone();
    if let Some(d) = &found.died {
        lines.insert(0, d.clone());
    }
    let (_tx, rx) = tokio::sync::watch::channel(None);
    let opts = Options {
        bundle: dir.clone(),
        resume: true,
        notify,
        cancel: rx,
        notes,
        recovery: None,
    };
    let complete = std::fs::read(dir.join(bundle::RESULT))
        .ok()
        .and_then(|b| serde_json::from_slice::<Value>(&b).ok())
        .is_some_and(|v| v["complete"] == true);
    let mut cx = Cx::open(plan, &opts)?;
    for n in &opts.notes {
        let notes = &mut cx.rec.result().notes;
        if !notes.contains(n) {
            notes.push(n.clone());
        }
    }
    // The restoration steps as the plan has them, their evidence gathered in one file.
    let steps = cx.plan.steps.clone();
    let mut restore = serde_json::Map::new();
    let mut ok = true;
    for s in &steps {
        let done = match &s.kind {
            StepKind::RestoreIncumbent => restoration::launch(&mut cx).await,
            StepKind::RestorationIdentity { .. } => restoration::identity(&mut cx, s).await,
            StepKind::RestorationPreflight { gates } => {
                restoration::preflight(&mut cx, s, gates).await
            }
            _ => continue,
        };
        let passed = matches!(done.outcome, StepOutcome::Ok);
        ok &= passed;
        restore.insert(
            s.kind.name().to_string(),
            json!({"passed": passed, "evidence": done.evidence}),
        );
    }
    let failed = std::mem::take(&mut cx.restore.failed_steps);
    let pid = cx.restore.pid;
    let inc = cx.incumbent().id;
    let lane = format!("{}:{}", cx.c().lane.host, cx.c().lane.port);
    if ok {
        lines.push(format!(
            "the incumbent `{inc}` serves the lane {lane} with its identity and passed a fresh preflight{}",
            pid.map(|p| format!(" (pid {p})")).unwrap_or_default()
        ));
    } else {
        lines.push(format!(
            "the incumbent `{inc}` could not be restored on {lane}: {}",
            failed.join("; ")
        ));
    }
    let extra = json!({"restoration": restore, "lane_ok": ok, "by": "bakeoff recover"});
    let name = record(&mut cx.rec, &found, extra);
    let r = cx.rec.result();
    r.complete = complete;
    r.incomplete_reason = (!complete).then(|| {
        format!(
            "not finished: {}the lane was recovered by `bakeoff recover` ({}); finish the campaign with `bakeoff run --resume {}`",
            found
                .died
                .as_ref()
                .map(|_| "an invocation died before it finished; ")
                .unwrap_or_default(),
            if ok { "the incumbent serves" } else { "the incumbent could NOT be restored" },
            dir.display()
        )
    });
    cx.rec.save();
    if let Some(e) = cx.rec.take_write_failure() {
        lines.push(format!("the bundle could not be fully written: {e}"));
    }
    match crate::evidence::manifest::write(&dir) {
        Ok(_) => lines.push(format!(
            "the bundle is sealed again (manifest written; see {name})"
        )),
        Err(e) => lines.push(format!("the manifest could not be written: {e:#}")),
    }
    Ok(Recovered {
        lines,
        lane_ok: ok,
        evidence: Some(name),
        complete,
    })
}
