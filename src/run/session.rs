//! What `bakeoff run` and `bakeoff recover` share before anything on the lane is touched, in one
//! place: the lane lock (one campaign per lane), what a dead invocation left on the lane (a resume
//! stops what its journal proves the dead run's own), and the preconditions (the port, the output
//! directory, the suites). The CLI keeps only flags, printing and exit codes.
//!
//! ```text
//! begin(campaign, bundle, purpose) ─▶ lock the lane ─▶ Resume: leftovers ─▶ Run/Resume: preconditions
//!                                                                         ─▶ Session (plan, lock, …)
//! ```

use super::preconditions::{preconditions, preconditions_beside, PortState};
use super::recover::{self, Recovery};
use crate::campaign::{self, Campaign, Plan};
use crate::lane::lock::{Holder, LaneLock};
use std::path::{Path, PathBuf};

/// Why a session starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Purpose {
    /// `bakeoff run FILE`: a new bundle.
    Run,
    /// `bakeoff run --resume DIR`: finish an interrupted bundle (a dead run's leftovers first).
    Resume,
    /// `bakeoff recover DIR`: only put the lane back (the recovery finds the leftovers itself).
    Recover,
}

/// A campaign ready to touch its lane: the lock is held for as long as this lives.
pub struct Session {
    pub plan: Plan,
    /// The bundle directory, absolute.
    pub bundle: PathBuf,
    pub lock: LaneLock,
    /// A resume: what the dead invocation left on the lane and what was done about it.
    pub recovery: Option<Recovery>,
    /// A run or a resume: what serves the lane now (none for a recovery).
    pub port: Option<PortState>,
    /// What the lane record said (an out-of-date record, or drift accepted as a limitation).
    pub lane_note: Option<String>,
}

impl Session {
    /// Lines for the result's notes (a stale lock taken over).
    pub fn notes(&self) -> Vec<String> {
        self.lock
            .note()
            .into_iter()
            .chain(self.lane_note.clone())
            .collect()
    }
}

/// A session refused: why (who holds the lane, or which precondition failed and what the
/// recovery left alone), and what a resume's recovery already did (to be said all the same).
pub struct Refused {
    pub message: String,
    pub recovery: Option<Box<Recovery>>,
}

impl From<String> for Refused {
    fn from(message: String) -> Refused {
        Refused {
            message,
            recovery: None,
        }
    }
}

/// Takes the lane lock for `c` writing `bundle`, then does what `purpose` needs before the lane
/// is touched. Err: refused before the campaign touched the lane (only a resume's recovery may
/// have stopped a dead run's proven leftovers: [`Refused::recovery`] says so).
pub fn begin(c: Campaign, bundle: PathBuf, purpose: Purpose) -> Result<Session, Refused> {
    begin_with(c, bundle, purpose, false)
}

/// [`begin`], with `accept_drift` (`bakeoff run --accept-lane-drift`): a lane record naming
/// another resident than the declared incumbent is a limitation instead of a refusal. A lane whose
/// promotion's rollback failed is refused all the same (a recovery too: it would restore an
/// incumbent over an unresolved lane).
pub fn begin_with(
    c: Campaign,
    bundle: PathBuf,
    purpose: Purpose,
    accept_drift: bool,
) -> Result<Session, Refused> {
    let lock = lock_lane(&c, &bundle)?;
    let lane_note = super::lanerecord::check(&c, accept_drift || purpose != Purpose::Run)?;
    let recovery = match purpose {
        Purpose::Resume => Some(recover::leftovers(&bundle, &c).map_err(|e| format!("{e:#}"))?),
        Purpose::Run | Purpose::Recover => None,
    };
    let plan = campaign::plan(&c);
    let port = match purpose {
        Purpose::Recover => None,
        Purpose::Run | Purpose::Resume => {
            let resume = purpose == Purpose::Resume;
            match preconditions(&plan, &bundle, resume) {
                Ok(p) => Some(p),
                Err(e) => {
                    let message = match recovery.as_ref().filter(|r| !r.unproven.is_empty()) {
                        Some(r) => format!(
                            "{e} (the recovery left alone what it could not prove the dead run's own: {})",
                            r.unproven.join("; ")
                        ),
                        None => e,
                    };
                    return Err(Refused {
                        message,
                        recovery: recovery.map(Box::new),
                    });
                }
            }
        }
    };
    Ok(Session {
        plan,
        bundle,
        lock,
        recovery,
        port,
        lane_note,
    })
}

/// One lane of a multi-lane campaign ready to run (`run::fleet`): `plan` is the lane's
/// (`campaign::lane_plan`), `dir` its folder of the bundle, `beside` what its raw logs sit
/// beside. The lane's lock is taken and its lane record checked as for a one-lane run (a
/// qualification lane's record only for a failed rollback: nothing is stopped or restored
/// there), then its preconditions (its port free, or serving the incumbent on the incumbent's
/// lane).
pub fn begin_lane(
    plan: Plan,
    dir: PathBuf,
    beside: &Path,
    accept_drift: bool,
) -> Result<Session, Refused> {
    begin_lane_for(plan, dir, beside, Purpose::Run, accept_drift)
}

/// [`begin_lane`] for `purpose`: a resume first stops what the lane's launch journal proves the
/// dead run left (as a one-lane resume does), then checks the preconditions of a resume; a
/// recovery takes the lock and checks the lane record only (the recovery finds the leftovers).
pub fn begin_lane_for(
    plan: Plan,
    dir: PathBuf,
    beside: &Path,
    purpose: Purpose,
    accept_drift: bool,
) -> Result<Session, Refused> {
    let c = &plan.campaign;
    let lock = lock_lane(c, &dir)?;
    let lane_note = if plan.restores() {
        super::lanerecord::check(c, accept_drift || purpose != Purpose::Run)?
    } else {
        super::lanerecord::check_qualification(c)?
    };
    let recovery = match purpose {
        Purpose::Resume => Some(recover::leftovers(&dir, c).map_err(|e| format!("{e:#}"))?),
        Purpose::Run | Purpose::Recover => None,
    };
    let port = match purpose {
        Purpose::Recover => None,
        Purpose::Run | Purpose::Resume => {
            match preconditions_beside(&plan, &dir, beside, purpose == Purpose::Resume) {
                Ok(p) => Some(p),
                Err(message) => {
                    return Err(Refused {
                        message,
                        recovery: recovery.map(Box::new),
                    })
                }
            }
        }
    };
    Ok(Session {
        plan,
        bundle: dir,
        lock,
        recovery,
        port,
        lane_note,
    })
}

/// `c`'s lane lock, held by this process for the run writing `bundle`.
fn lock_lane(c: &Campaign, bundle: &Path) -> Result<LaneLock, String> {
    LaneLock::acquire(
        &c.lane.host,
        c.lane.port,
        &Holder {
            pid: std::process::id(),
            campaign_id: c.campaign.id.clone(),
            bundle: bundle.to_path_buf(),
            started_at: crate::clock::wall_rfc3339(),
        },
    )
}
