//! A lane that dies during a multi-lane run is drained (docs/fleet.md "A lane that dies"): the
//! lane's probe says when it is dead, its arms move to a live lane, and the moves are recorded
//! with their cause.
//!
//! ```text
//! lane runner: an arm step failed, or an arm's turn came ─▶ probe(lane fault seen)
//!   Slurm lane:   `scontrol show node`: DOWN, DRAIN, FAIL, NOT_RESPONDING, unknown ─▶ dead
//!   any lane:     the lane port taken by something bakeoff did not start ─▶ dead
//!   dead ─▶ its arm's engine stopped, the arm steps left not run (Outcome::drained)
//! fleet: a drained lane's arms ─▶ the first idle live lane (a qualification lane first)
//!        ─▶ a run of its own there, `lanes/<lane>.moved-<n>/`, each arm from its start
//! ```

use super::LaneProbe;
use crate::campaign::Campaign;
use crate::evidence::result::ArmMove;
use std::sync::Arc;

/// The probe of lane `lane` of `c`: a Slurm lane asks Slurm about its node (a node Slurm no
/// longer runs jobs on is dead, whatever the step saw); any lane is dead when a step saw its
/// port taken by something bakeoff did not start.
pub fn probe(c: &Campaign, lane: &str) -> LaneProbe {
    let node = c
        .fleet
        .iter()
        .find(|e| e.id == lane)
        .and_then(|e| e.slurm_node.clone());
    Arc::new(move |seen: Option<&str>| {
        let slurm = node
            .as_deref()
            .and_then(|n| crate::lane::slurm_node::dead("sbatch", n));
        slurm.or_else(|| {
            seen.map(|s| {
                format!("the lane's port is taken by something bakeoff did not start ({s})")
            })
        })
    })
}

/// The lane a drained lane's arms go to: the first lane, in file order, that is neither busy
/// nor dead, a qualification lane before the incumbent's (`restores`: whose incumbent would be
/// stopped and restored once more). None: every live lane is busy (wait) or none is left.
pub fn pick(restores: &[bool], busy: &[bool], dead: &[bool]) -> Option<usize> {
    let free = |i: &usize| !busy[*i] && !dead[*i];
    let n = restores.len();
    (0..n)
        .filter(free)
        .find(|&i| !restores[i])
        .or_else(|| (0..n).find(free))
}

/// The verdict's lines about the moves (in `campaign-result.json`'s notes, so the limitations
/// say them): where each arm ran instead and why, and the arms no live lane was left for.
pub fn notes(moves: &[ArmMove]) -> Vec<String> {
    moves
        .iter()
        .map(|m| match &m.to {
            Some(to) => format!(
                "Arm {} moved from lane {} to lane {to}: lane {} was drained ({}); it ran again from its start in {}, and what it measured on lane {} stays in {} and is not counted.",
                m.arm,
                m.from,
                m.from,
                m.cause,
                m.folder.as_deref().unwrap_or_default(),
                m.from,
                m.left_in
            ),
            None => format!(
                "Arm {} did not run: lane {} was drained ({}) and no live lane was left to move it to; `bakeoff run --resume` runs it on a lane that is live then.",
                m.arm, m.from, m.cause
            ),
        })
        .collect()
}
