//! `bakeoff recover DIR`: put the lane back after the run that wrote bundle DIR died (SIGKILL,
//! the OOM killer, a reboot). It stops what the bundle's launch journal proves the dead run left
//! running (pid + start time + argv; never anything it cannot prove), restores the incumbent
//! (identity and a fresh preflight checked), records what it did (`recovery-<n>.json`, notes) and
//! seals the bundle. It runs no arm: `bakeoff run --resume DIR` finishes the campaign.
//!
//! Exit codes: 0 the incumbent serves; 1 it could not be restored (the lines say why and what
//! serves); 2 refused before touching anything (no bundle, or a run still holds the lane).

macro_rules! say {
    ($($t:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stderr(), $($t)*);
    }};
}

use crate::campaign::{self, checkpoint::Checkpoint, Campaign};
use crate::lane::lock::{Holder, LaneLock};
use crate::run::{self as runner, Note, Notify};
use anyhow::{Context, Result};
use clap::Args;
use std::path::{Path, PathBuf};
use std::sync::Arc;

#[derive(Args, Debug, Clone)]
pub struct RecoverArgs {
    /// The bundle of the run that died.
    pub dir: PathBuf,
}

fn refuse(msg: impl Into<String>) -> anyhow::Error {
    super::Exit::with(2, msg).into()
}

/// The campaign the bundle ran (its copy, anchored at the original file's directory).
fn load(dir: &Path) -> Result<Campaign> {
    let ck = Checkpoint::load(dir).map_err(|e| {
        refuse(format!(
            "{e:#}; give the directory of a bundle `bakeoff run` wrote"
        ))
    })?;
    let copy = dir.join(crate::evidence::bundle::CAMPAIGN_COPY);
    let text = std::fs::read_to_string(&copy)
        .map_err(|e| refuse(format!("cannot read {}: {e}", copy.display())))?;
    match campaign::parse(&text, &ck.campaign_file) {
        Ok(c) => Ok(c),
        Err(e) => {
            for d in &e.diagnostics {
                say!("{d}");
            }
            Err(refuse("the bundle's campaign.toml copy no longer loads"))
        }
    }
}

pub fn run(args: RecoverArgs) -> Result<()> {
    let dir = if args.dir.is_absolute() {
        args.dir.clone()
    } else {
        std::env::current_dir()
            .map(|d| d.join(&args.dir))
            .unwrap_or_else(|_| args.dir.clone())
    };
    let c = load(&dir)?;
    // The lane must be nobody's: a live run restores its incumbent itself.
    let lock = LaneLock::acquire(
        &c.lane.host,
        c.lane.port,
        &Holder {
            pid: std::process::id(),
            campaign_id: c.campaign.id.clone(),
            bundle: dir.clone(),
            started_at: crate::clock::wall_rfc3339(),
        },
    )
    .map_err(refuse)?;
    if let Some(n) = lock.note() {
        say!("bakeoff recover: {n}");
    }
    let plan = campaign::plan(&c);
    let notify: Notify = Arc::new(|n: Note<'_>| {
        if let Note::Warning(m) = n {
            say!("warning: {m}");
        }
    });
    let rt = crate::load::pace::client_runtime().context("cannot start the async runtime")?;
    let r = rt.block_on(runner::recover::recover(
        plan,
        dir.clone(),
        notify,
        lock.note().into_iter().collect(),
    ))?;
    for l in &r.lines {
        say!("bakeoff recover: {l}");
    }
    drop(rt);
    drop(lock);
    if !r.lane_ok {
        say!(
            "bakeoff recover: the lane is NOT back; see {} in {}",
            r.evidence.as_deref().unwrap_or("the bundle"),
            dir.display()
        );
        return Err(super::Exit::silent(1).into());
    }
    if r.complete {
        say!("bakeoff recover: the lane is back; the bundle was already complete");
    } else {
        say!(
            "bakeoff recover: the lane is back; finish the campaign with `bakeoff run --resume {}`",
            dir.display()
        );
    }
    Ok(())
}
