//! `bakeoff recover DIR`: put the lane back (every lane of a multi-lane bundle: [`lanes`]) after
//! the run that wrote bundle DIR died (SIGKILL, the OOM killer, a reboot). It stops what the
//! bundle's launch journal proves the dead run left running (pid + start time + argv; never
//! anything it cannot prove), restores the incumbent
//! (identity and a fresh preflight checked), records what it did (`recovery-<n>.json`, notes) and
//! seals the bundle. It runs no arm: `bakeoff run --resume DIR` finishes the campaign.
//!
//! Exit codes: 0 the incumbent serves; 1 it could not be restored (the lines say why and what
//! serves); 2 refused before touching anything (no bundle, or a run still holds the lane).

use crate::campaign::Campaign;
use crate::output::recover::{LanePart, RecoverDoc};
use crate::run::{self as runner, session::Purpose, Note, Notify};
use anyhow::{Context, Result};
use clap::Args;
use std::path::{Path, PathBuf};
use std::sync::Arc;

#[derive(Args, Debug, Clone)]
pub struct RecoverArgs {
    /// The bundle of the run that died.
    pub dir: PathBuf,
    /// Print one JSON document on stdout at the end (`bakeoff.recover/1`, docs/agents.md):
    /// each lane's outcome. The lines stay on stderr.
    #[arg(long)]
    pub json: bool,
}

fn refuse(msg: impl Into<String>) -> anyhow::Error {
    super::Exit::with(2, msg).into()
}

/// The campaign the bundle ran (its copy, its paths resolved against the original campaign
/// file's directory). A file that changed since is said: the restoration's identity check
/// compares the incumbent's own files again.
fn load(dir: &Path) -> Result<Campaign> {
    let b = super::bundle_campaign_lanes(dir, "bakeoff recover")?;
    for l in &b.changed {
        say!("bakeoff recover: warning: {l}");
    }
    Ok(b.campaign)
}

pub fn run(args: RecoverArgs) -> Result<()> {
    let out = super::JsonOut::new("recover", args.json);
    out.end(recover(&args, &out))
}

fn recover(args: &RecoverArgs, out: &super::JsonOut) -> Result<()> {
    let dir = super::absolute(&args.dir);
    if crate::promote::is_promotion(&dir) {
        if out.on() {
            return Err(refuse(format!(
                "{} is a promotion folder: `bakeoff recover --json` of a promotion is not built yet; run it without --json",
                dir.display()
            )));
        }
        return super::promote::recover(&dir);
    }
    let c = load(&dir)?;
    let doc = if c.multi_lane() {
        lanes(c, &dir)?
    } else {
        one_lane(c, &dir)?
    };
    out.emit(&doc)?;
    match doc.exit_code {
        0 => Ok(()),
        code => Err(super::Exit::silent(code).into()),
    }
}

/// `bakeoff recover DIR` of a one-lane bundle.
fn one_lane(c: Campaign, dir: &Path) -> Result<RecoverDoc> {
    // One `[[lanes]]` table on a Slurm node: its address is the node's, as the run had it.
    let c = runner::slurm_lanes::resolve_any(c).map_err(refuse)?;
    // The lane must be nobody's: a live run restores its incumbent itself.
    let session = runner::session::begin(c, dir.to_path_buf(), Purpose::Recover)
        .map_err(|r| refuse(r.message))?;
    if let Some(n) = session.lock.note() {
        say!("bakeoff recover: {n}");
    }
    let notify: Notify = Arc::new(|n: Note<'_>| {
        if let Note::Warning(m) = n {
            say!("warning: {m}");
        }
    });
    let rt = crate::load::pace::client_runtime().context("cannot start the async runtime")?;
    let r = rt.block_on(runner::recover::recover(
        session.plan.clone(),
        dir.to_path_buf(),
        notify,
        session.notes(),
        None,
    ))?;
    for l in &r.lines {
        say!("bakeoff recover: {l}");
    }
    drop(rt);
    drop(session);
    if !r.lane_ok {
        say!(
            "bakeoff recover: the lane is NOT back; see {} in {}",
            r.evidence.as_deref().unwrap_or("the bundle"),
            dir.display()
        );
    } else if r.complete {
        say!("bakeoff recover: the lane is back; the bundle was already complete");
    } else {
        say!(
            "bakeoff recover: the lane is back; finish the campaign with `bakeoff run --resume {}`",
            dir.display()
        );
    }
    let complete = r.complete;
    Ok(RecoverDoc::new(
        dir.display().to_string(),
        vec![lane_part(None, r)],
        complete,
        None,
    ))
}

/// One lane's outcome in the document.
fn lane_part(id: Option<String>, r: runner::recover::Recovered) -> LanePart {
    LanePart {
        id,
        back: r.lane_ok,
        evidence: r.evidence,
        lines: r.lines,
    }
}

/// `bakeoff recover DIR` of a multi-lane bundle: every lane's lock taken first (a lane a live run
/// holds refuses the whole recovery before anything is touched), then each lane recovered as one
/// lane is, one summary line per lane; exit 1 when any lane is not back.
fn lanes(c: Campaign, dir: &Path) -> Result<RecoverDoc> {
    // `[fleet.slurm]`: each granted lane on the node the dead run recorded for it.
    let alloc = crate::evidence::allocation::read(dir).map_err(refuse)?;
    let c = match &alloc {
        Some(a) => runner::slurm_fleet::as_recorded(c, a).map_err(refuse)?,
        None => c,
    };
    // Slurm lanes: each lane's address is its node's, as the run had it (a node down now too).
    let c = runner::slurm_lanes::resolve_any(c).map_err(|e| {
        refuse(if e.contains("has not granted") {
            format!("{e}; the bundle has no allocation record: the run died before Slurm granted its lanes, so no arm ran there (a request still pending shows in `squeue --name=bakeoff-fleet-<campaign>`: scancel it)")
        } else {
            e
        })
    })?;
    let fleet = runner::fleet_resume::begin_again(&c, dir.to_path_buf(), Purpose::Recover)
        .map_err(|r| refuse(r.message))?;
    for l in &fleet.lanes {
        if let Some(n) = l.session.lock.note() {
            say!("bakeoff recover: lane {}: {n}", l.id);
        }
    }
    let notify: Notify = Arc::new(|n: Note<'_>| {
        if let Note::Warning(m) = n {
            say!("warning: {m}");
        }
    });
    let rt = crate::load::pace::client_runtime().context("cannot start the async runtime")?;
    let r = rt.block_on(runner::fleet_resume::recover(&fleet, notify))?;
    drop(rt);
    drop(fleet);
    for (id, lane) in &r.lanes {
        for l in &lane.lines {
            say!("bakeoff recover: lane {id}: {l}");
        }
    }
    if let Some(e) = &r.seal_error {
        say!("bakeoff recover: the bundle's merged result could not be sealed: {e}");
    }
    let mut back = true;
    for (id, lane) in &r.lanes {
        back &= lane.lane_ok;
        say!(
            "bakeoff recover: lane {id} {}{}",
            if lane.lane_ok {
                "is back"
            } else {
                "is NOT back"
            },
            lane.evidence
                .as_deref()
                .map(|e| format!(" (see lanes/{id}/{e})"))
                .unwrap_or_default()
        );
    }
    if !back {
        say!(
            "bakeoff recover: not every lane is back; see each lane's recovery file in {}",
            dir.display()
        );
        if let Some(a) = &alloc {
            say!(
                "bakeoff recover: Slurm allocation {} ({}) is kept until the lanes are back; `scancel {}` gives it back",
                a.job_id,
                a.nodes.join(", "),
                a.job_id
            );
        }
    }
    // Every lane proven back: the dead run's nodes go back to Slurm.
    let mut released = true;
    if let Some(a) = alloc.as_ref().filter(|_| back) {
        match crate::lane::slurm_alloc::release(&a.job_id, &a.job_name) {
            Ok(true) => say!(
                "bakeoff recover: Slurm allocation {} ({}) given back (scancel {})",
                a.job_id,
                a.nodes.join(", "),
                a.job_id
            ),
            Ok(false) => say!(
                "bakeoff recover: Slurm allocation {} ({}) was already gone",
                a.job_id,
                a.job_name
            ),
            Err(e) => {
                say!("bakeoff recover: {e}");
                released = false;
            }
        }
    }
    if back && released {
        if r.complete {
            say!("bakeoff recover: every lane is back; the bundle was already complete");
        } else {
            say!(
                "bakeoff recover: every lane is back; finish the campaign with `bakeoff run --resume {}`",
                dir.display()
            );
        }
    }
    let parts = r
        .lanes
        .into_iter()
        .map(|(id, lane)| lane_part(Some(id), lane))
        .collect();
    let mut doc = RecoverDoc::new(dir.display().to_string(), parts, r.complete, r.seal_error);
    if !released {
        // The lanes are back but the dead run's nodes are still held: not done.
        doc.exit_code = crate::output::exit::FAILED;
        doc.next = None;
    }
    Ok(doc)
}
