//! `bakeoff run FILE` on a campaign with several `[[lanes]]` (docs/fleet.md): every lane taken
//! (its lock, its lane record, its port), the lanes run side by side into one bundle, one
//! verdict. Progress is one line per step tagged with its lane (no bar: several lanes would
//! fight over one). A signal stops every lane's current step; each lane restores what it must
//! before the run ends (exit 130).

use crate::campaign::Campaign;
use crate::output::run::RunDoc;
use crate::run::{self as runner, Notify, PortState};
use anyhow::{Context, Result};
use std::path::{Path, PathBuf};

/// What `bakeoff run` hands over (its flags, its progress printer and its last words), so that
/// this file needs nothing of `run.rs`.
pub struct Ask {
    pub history: Option<String>,
    pub accept_lane_drift: bool,
    /// `--resume DIR`: every lane goes on from its own checkpoint.
    pub resume: bool,
    pub progress: Notify,
    pub ended: fn(&Path, &runner::Outcome, Option<&str>, &Path) -> RunDoc,
}

fn refuse(msg: impl Into<String>) -> anyhow::Error {
    super::Exit::with(2, msg).into()
}

/// Runs the lanes; the run's document (its `exit_code` is the run's: `bakeoff run` ends with it).
pub fn run(args: Ask, c: Campaign, bundle: PathBuf) -> Result<RunDoc> {
    // `--history` or `[history] db`: after the seal, each arm's figures against its own lane's
    // history, then the bundle added (`ended`, as one lane does).
    let history = args.history.clone().or_else(|| c.history_db());
    let rt = crate::load::pace::client_runtime().context("cannot start the async runtime")?;
    let (tx, rx) = tokio::sync::watch::channel::<Option<&'static str>>(None);
    rt.block_on(async {
        super::signals::cancel_on_signals(tx, "run", "stopping every lane's current step")
    })?;
    // `[fleet.slurm]`: the lanes Slurm grants, asked for now and held until the run ends (the
    // guard gives them back on every path out of here, errors included).
    let prev = if args.resume {
        crate::evidence::allocation::read(&bundle).map_err(refuse)?
    } else {
        None
    };
    let (c, held) = rt
        .block_on(runner::slurm_fleet::obtain(c, prev.as_ref(), || {
            rx.borrow().is_some()
        }))
        .map_err(|e| match e {
            runner::slurm_fleet::NoLanes::Refused(m) => refuse(m),
            runner::slurm_fleet::NoLanes::Signal => super::Exit::with(
                130,
                "the Slurm request was cancelled by a signal; nothing ran",
            )
            .into(),
        })?;
    if let Some(h) = &held {
        say!(
            "bakeoff run: Slurm granted job {} nodes {} in {:.1} s: {}",
            h.record.job_id,
            h.record.nodes.join(", "),
            h.record.pending_s,
            h.record
                .lanes
                .iter()
                .map(|g| format!("lane {} on {}", g.lane, g.node))
                .collect::<Vec<_>>()
                .join(", ")
        );
    }
    // Slurm lanes: each lane's address is its node's, asked of Slurm now.
    let c = runner::slurm_lanes::resolve(c).map_err(refuse)?;
    let fleet = if args.resume {
        runner::fleet_resume::begin_again(&c, bundle, runner::session::Purpose::Resume)
    } else {
        runner::fleet::begin(&c, bundle, args.accept_lane_drift)
    };
    let fleet = fleet.map_err(|r| {
        if let Some(rec) = &r.recovery {
            for l in rec.died.iter().chain(&rec.lines) {
                say!("bakeoff run: {l}");
            }
        }
        refuse(r.message)
    })?;
    if let Some(h) = &held {
        // Before any arm starts: a crash from here on leaves the job id for `bakeoff recover`.
        crate::evidence::allocation::write(&fleet.bundle, &h.record).map_err(|e| {
            refuse(format!(
                "cannot record the Slurm allocation in the bundle ({e:#}); nothing ran, the allocation is given back"
            ))
        })?;
    }
    started(&fleet, args.resume);
    let outcome = rt.block_on(runner::fleet::run(
        &fleet,
        args.progress.clone(),
        rx,
        args.resume,
    ))?;
    let restored_in = runner::fleet::incumbent_folder(&fleet.bundle, &fleet)
        .unwrap_or_else(|| fleet.bundle.clone());
    let mut doc = (args.ended)(&fleet.bundle, &outcome, history.as_deref(), &restored_in);
    doc.resumed = args.resume;
    drop(rt);
    drop(fleet);
    if let Some(h) = held {
        match h.release() {
            Ok(line) => say!("bakeoff run: {line}"),
            Err(e) => say!("bakeoff run: warning: {e}"),
        }
    }
    Ok(doc)
}

/// What each lane's session found before the run touches it (a resume: what the dead run
/// left on the lane and what was done about it).
fn started(f: &runner::fleet::Fleet, resume: bool) {
    let c = &f.plan.campaign;
    for l in &f.lanes {
        let s = &l.session;
        let lane = &s.plan.campaign.lane;
        if let Some(n) = s.lock.note() {
            say!("bakeoff run: lane {}: {n}", l.id);
        }
        if let Some(rec) = s.recovery.as_ref().filter(|r| !r.is_empty()) {
            for line in rec.died.iter().chain(&rec.lines) {
                say!("bakeoff run: lane {}: {line}", l.id);
            }
        }
        let arms: Vec<&str> = s.plan.arm_ids();
        let what = match &s.port {
            Some(PortState::Incumbent(p)) => {
                format!("incumbent `{}` serves it (pid {})", c.incumbent().id, p.pid)
            }
            Some(PortState::IncumbentJob(j)) => {
                format!("incumbent `{}` serves it (Slurm {j})", c.incumbent().id)
            }
            _ if s.plan.restores() => "free (no incumbent serving)".to_string(),
            _ => "free (a qualification lane: nothing to stop or restore)".to_string(),
        };
        say!(
            "bakeoff run: lane {} {}:{} is {what}; arms {}",
            l.id,
            lane.host,
            lane.port,
            arms.join(", ")
        );
    }
    say!(
        "bakeoff run: campaign {} over {} lanes side by side → {}{}",
        c.campaign.id,
        f.lanes.len(),
        f.bundle.display(),
        if resume { " (resuming)" } else { "" }
    );
}
