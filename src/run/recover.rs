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

use super::context::Cx;
use super::journal::{Entry, Purpose, State};
use super::recorder::{read_journal, Recorder};
use super::step_outcome::Outcome as StepOutcome;
use super::steps::restoration;
use super::{Notify, Options};
use crate::campaign::{Campaign, Plan, StepKind};
use crate::evidence::bundle;
use crate::lane::marks::{LaneFacts, Launch};
use crate::run::journal::Journaled;
use anyhow::Result;
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::time::Duration;

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

/// One open journal entry: what the launch's kind proves and does about it (see
/// [`crate::lane::leftover`]), its new state (none: unchanged) and what was done, in words.
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
    let launch = Launch {
        who: &who,
        restored: e.purpose == Purpose::RestoreIncumbent,
        argv: &e.argv,
        boot_id: &e.boot_id,
        intent_ticks: e.intent_ticks,
    };
    let lane = LaneFacts {
        port: c.lane.port,
        grace,
        ready_timeout: Duration::from_secs(c.lane.ready_timeout_s),
    };
    let a = e.marks.adopt(&launch, &lane);
    r.unproven.extend(a.unproven);
    r.cancelled_jobs.extend(a.cancelled_jobs);
    r.slurm_facts = a.slurm_jobs;
    (a.state, a.words)
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
/// `logs_beside`: what the raw logs sit beside (a lane folder of a multi-lane bundle: the whole
/// bundle). A plan that restores nothing (a qualification lane) checks that nothing serves
/// the lane any more.
pub async fn recover(
    plan: Plan,
    dir: PathBuf,
    notify: Notify,
    notes: Vec<String>,
    logs_beside: Option<PathBuf>,
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
        logs_beside,
        lane_probe: None,
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
    if !cx.plan.restores() {
        // A qualification lane: nothing to restore; back means empty.
        let left = crate::lane::procnet::find_listeners(cx.c().lane.port);
        ok = left.is_empty() && crate::lane::port_free(&cx.c().lane.host, cx.c().lane.port);
        lines.push(if ok {
            format!("nothing serves the qualification lane {lane} (it had no incumbent to restore)")
        } else {
            format!(
                "the qualification lane {lane} is still in use{}: not proven the dead run's, left alone; stop it before `bakeoff run --resume`",
                left.first().map(|l| format!(" (pid {})", l.pid)).unwrap_or_default()
            )
        });
    } else if ok {
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
            match (cx.plan.restores(), ok) {
                (true, true) => "the incumbent serves",
                (true, false) => "the incumbent could NOT be restored",
                (false, true) => "nothing serves the qualification lane",
                (false, false) => "the qualification lane is still in use",
            },
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
