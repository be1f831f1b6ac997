//! A multi-lane bundle taken up again after its run stopped (docs/fleet.md): `bakeoff recover`
//! puts every lane back after the run died, `bakeoff run --resume` finishes every lane from its
//! own checkpoint. Each lane is its own one-lane bundle (`lanes/<id>/`, with its launch journal
//! and checkpoint), so each is recovered or resumed exactly as one lane is; the bundle's one
//! result is then merged from the lanes' again, as a run merges it.
//!
//! ```text
//! begin_again: per lane (file order) lane_plan ─▶ session::begin_lane_for (its lock, its lane
//!              record; a resume: the dead run's proven leftovers stopped, its preconditions)
//! recover:     per lane recover::recover (leftovers, the incumbent restored on its lane, a
//!              qualification lane checked empty) ─▶ merge ─▶ the bundle sealed, not complete
//! resume:      fleet::run(resume) (a complete lane is not run again)
//! ```

use super::fleet::{base, begin_lanes, read_result, units_of, write_sealed, Fleet};
use super::fleet_merge::{merge, LaneOutcome};
use super::recover::Recovered;
use super::session::{Purpose, Refused};
use super::Notify;
use crate::campaign::Campaign;
use crate::evidence::bundle;
use anyhow::Result;
use std::path::PathBuf;

/// Takes every lane of the multi-lane bundle `bundle` again for `purpose` (a resume or a
/// recovery): each lane's lock, lane record and (a resume) its dead run's leftovers and
/// preconditions. Refused: a lane's reason, tagged with the lane; the lanes taken before it are
/// let go untouched (a resume may have stopped a dead run's proven leftovers: that is said).
pub fn begin_again(c: &Campaign, bundle: PathBuf, purpose: Purpose) -> Result<Fleet, Refused> {
    let taken_at = std::time::Instant::now();
    if !bundle.join(bundle::LANES_DIR).is_dir() {
        return Err(format!(
            "{} has no {}/ folder: it is not a multi-lane bundle, or its run died before it began",
            bundle.display(),
            bundle::LANES_DIR
        )
        .into());
    }
    // A refused lane lets go of those taken before it (their locks drop with them).
    let (plan, lanes) = begin_lanes(c, &bundle, purpose, false).map_err(|(r, _, _)| r)?;
    Ok(Fleet {
        plan,
        bundle,
        lanes,
        taken_at,
    })
}

/// What `bakeoff recover` did on a multi-lane bundle.
pub struct FleetRecovered {
    /// Each lane's id and recovery, in file order.
    pub lanes: Vec<(String, Recovered)>,
    /// The bundle was complete (and stays so).
    pub complete: bool,
    /// The merged result and the manifest could not be written: why.
    pub seal_error: Option<String>,
}

/// `bakeoff recover DIR` on a multi-lane bundle: every lane recovered as one lane is (its launch
/// journal's proven leftovers stopped, the incumbent restored on its lane, a qualification lane
/// checked empty), then the lanes' results merged into the bundle's one result, which says the
/// campaign is not finished, and the bundle sealed. Runs no arm. Call with every lane's lock held
/// (`begin_again` with [`Purpose::Recover`]).
pub async fn recover(f: &Fleet, notify: Notify) -> Result<FleetRecovered> {
    let prev = read_result(&f.bundle);
    // Each lane's own run, then the runs of arms moved off a drained lane (their folders).
    let units = units_of(f, prev.as_ref());
    let mut out = Vec::new();
    for u in &units {
        let l = &f.lanes[u.lane];
        let dir = f.bundle.join(&u.folder);
        let own = u.moved_from.is_none();
        let name = u.folder.rsplit('/').next().unwrap_or_default();
        let r = if dir.join(bundle::CHECKPOINT).is_file() {
            let tagged = lane_notify(&notify, &l.id);
            super::recover::recover(
                u.plan.clone(),
                dir.clone(),
                tagged,
                if own { l.session.notes() } else { Vec::new() },
                Some(bundle::lane_beside(&f.bundle, name)),
            )
            .await?
        } else {
            // Its runner never opened the folder: it started and stopped nothing.
            Recovered {
                lines: vec![
                    "its run never began (no checkpoint): nothing was started or stopped on it"
                        .into(),
                ],
                lane_ok: true,
                evidence: None,
                complete: false,
            }
        };
        let id = if own {
            l.id.clone()
        } else {
            format!("{} ({})", l.id, u.folder)
        };
        out.push((id, r));
    }
    let lanes = units
        .iter()
        .map(|u| {
            let result = read_result(&f.bundle.join(&u.folder));
            LaneOutcome {
                error: result
                    .is_none()
                    .then(|| "the lane's run never began (bakeoff died first)".to_string()),
                lane: u.record(f),
                result,
            }
        })
        .collect();
    let control = f.plan.campaign.control_arm().map(|a| a.id.as_str());
    let moves = prev.map(|p| p.moves).unwrap_or_default();
    let mut result = merge(base(f), lanes, control, moves);
    result.updated_at = crate::clock::wall_rfc3339();
    let complete = result.complete;
    if !complete {
        let said: Vec<String> = out
            .iter()
            .map(|(id, r)| format!("lane {id} {}", if r.lane_ok { "back" } else { "NOT back" }))
            .collect();
        result.incomplete_reason = Some(format!(
            "not finished: the lanes were recovered by `bakeoff recover` ({}); finish the campaign with `bakeoff run --resume {}`",
            said.join(", "),
            f.bundle.display()
        ));
    }
    let seal_error = write_sealed(f, &result).err().map(|e| format!("{e:#}"));
    Ok(FleetRecovered {
        lanes: out,
        complete,
        seal_error,
    })
}

/// `notify` with every warning tagged by the lane.
fn lane_notify(notify: &Notify, lane: &str) -> Notify {
    let n = notify.clone();
    let lane = lane.to_string();
    std::sync::Arc::new(move |note: super::Note<'_>| match note {
        super::Note::Warning(m) => n(super::Note::Warning(&format!("lane {lane}: {m}"))),
        other => n(other),
    })
}
