//! Everything a promotion checks before it touches the lane: which arm, on whose authority, that
//! the lane still serves the bundle's incumbent (no drift), and that the way back works (the
//! rollback check). Each refusal is one line that says what was found and what to do.

use super::Baseline;
use crate::campaign::fingerprint::{changes, changes_since, fingerprint, Fingerprint};
use crate::campaign::{Arm, Campaign, Mask};
use crate::decide::Verdict;
use crate::evidence::bundle;
use crate::evidence::result::CampaignResult;
use crate::lane::procnet;
use crate::lane::resident::{self, LaneState};
use crate::run::launch::{launch_spec, runs_recipe, slurm_jobs};
use serde_json::Value;
use std::path::Path;

/// The arm chosen and on whose authority.
pub struct Chosen {
    pub arm: Arm,
    pub authorization: String,
    /// The operator must pass `--confirm` (policy manual, or an eligible arm other than the
    /// winner).
    pub needs_confirm: bool,
    pub baseline: Baseline,
}

/// Picks the arm to promote from the verdict. `authorized_if_auto`: the verdict would authorize
/// its winner under policy auto (so only the manual policy stands between it and a promotion).
pub fn choose(
    c: &Campaign,
    v: &Verdict,
    result: &CampaignResult,
    arm: Option<&str>,
    authorized_if_auto: bool,
) -> Result<Chosen, String> {
    let id = match arm.or(v.winner.as_deref()) {
        Some(a) => a.to_string(),
        None => {
            return Err(format!(
                "the verdict has no winner, so there is nothing to promote ({})",
                v.next_gate
            ))
        }
    };
    let Some(a) = c.arm(&id).cloned() else {
        let ids: Vec<&str> = c.arms.iter().map(|a| a.id.as_str()).collect();
        return Err(format!(
            "--arm {id}: the campaign has no such arm; its arms: {}",
            ids.join(", ")
        ));
    };
    if a.id == c.incumbent().id {
        return Err(format!(
            "`{id}` is the incumbent: it already serves the lane, there is nothing to promote"
        ));
    }
    if !a.kind().managed() {
        return Err(format!(
            "`{id}` is an endpoint arm: bakeoff does not own it (it never starts or stops it), so it cannot put it in service; switch your router to it by hand"
        ));
    }
    if !v.complete {
        return Err(format!(
            "the campaign did not complete (or its incumbent was not proven restored), so its verdict authorizes nothing: {}",
            v.next_gate
        ));
    }
    if !v.ranking.contains(&id) {
        let why: Vec<String> = v
            .failures
            .iter()
            .filter(|f| f.arm == id)
            .map(|f| format!("{}: {}", f.class, f.detail))
            .collect();
        return Err(format!(
            "`{id}` is not eligible in the verdict ({}); only an eligible arm can be promoted",
            if why.is_empty() {
                "it has no warm measurement".to_string()
            } else {
                why.join("; ")
            }
        ));
    }
    let winner = v.winner.as_deref() == Some(id.as_str());
    let (authorization, needs_confirm) = if winner && v.promotion_authorized {
        (
            "the verdict authorizes it (policy auto: every required gate and evidence label holds)"
                .to_string(),
            false,
        )
    } else if winner && authorized_if_auto {
        (
            "policy manual: the verdict's winner, promoted on the operator's --confirm".to_string(),
            true,
        )
    } else if winner {
        return Err(format!(
            "the verdict does not authorize promoting `{id}`: {}",
            v.next_gate
        ));
    } else {
        (
            format!(
                "an eligible arm other than the winner `{}`, promoted on the operator's --confirm",
                v.winner.as_deref().unwrap_or("?")
            ),
            true,
        )
    };
    let baseline = Baseline::of(result, &id);
    Ok(Chosen {
        arm: a,
        authorization,
        needs_confirm,
        baseline,
    })
}

/// What serves the lane now: the incumbent's pid (None: a job-run incumbent). Err: drift, or a
/// lane whose rollback failed.
pub fn lane_serves_incumbent(c: &Campaign) -> Result<Option<u32>, String> {
    let inc = c.incumbent();
    let lane = format!("{}:{}", c.lane.host, c.lane.port);
    if let Some(rec) = resident::read(&c.lane.host, c.lane.port)? {
        if rec.state == LaneState::RollbackFailed {
            return Err(format!(
                "{}; nothing is promoted on this lane until it is resolved (`bakeoff lane status {}` says how)",
                rec.summary(),
                c.lane.port
            ));
        }
        if rec.current() && rec.resident.argv_env_hash != c.argv_env_hash(inc) {
            return Err(format!(
                "drift: the lane changed since the bake-off: {}, but the bundle expected its incumbent `{}` ({}); run a new bake-off against what serves now",
                rec.summary(),
                inc.id,
                inc.served_model
            ));
        }
    }
    if inc.recipe().job_name().is_some() {
        let jobs = slurm_jobs(c, inc);
        if jobs.iter().any(|j| j.1 == "RUNNING") {
            return Ok(None);
        }
        return Err(format!(
            "drift: no job of the incumbent `{}` runs on lane {lane}; the bundle expected it serving; start it, or run a new bake-off",
            inc.id
        ));
    }
    let Some(l) = procnet::find_listeners(c.lane.port).first().cloned() else {
        return Err(format!(
            "drift: nothing serves lane {lane}, but the bundle expected its incumbent `{}` serving; start it (or run a new bake-off against the lane as it is)",
            inc.id
        ));
    };
    if !runs_recipe(c, inc, &l) {
        let mask = Mask::from_process_env(c);
        return Err(mask.scrub(&format!(
            "drift: lane {lane} is served by pid {} ({}), which is not the bundle's incumbent `{}`; the lane changed since the bake-off: run a new one against what serves now",
            l.pid,
            l.cmdline.join(" "),
            inc.id
        )));
    }
    Ok(Some(l.pid))
}

/// The fingerprint the bake-off recorded when it stopped the incumbent.
pub fn recorded_fingerprint(dir: &Path) -> Option<Fingerprint> {
    let b = std::fs::read(dir.join(bundle::INCUMBENT_SHUTDOWN)).ok()?;
    let v: Value = serde_json::from_slice(&b).ok()?;
    serde_json::from_value(v["recipe_fingerprint"].clone()).ok()
}

/// The rollback check: the incumbent's files and environment are what the bake-off recorded,
/// its launch spec builds (secrets set), and its kind's restart check passes. Ok: the lines of
/// what was proven, and the fingerprint now (the restoration compares against it).
pub fn rollback(
    c: &Campaign,
    bundle_dir: &Path,
    pid: Option<u32>,
    log: &Path,
) -> Result<(Vec<String>, Fingerprint), String> {
    let inc = c.incumbent();
    let environ = pid.and_then(procnet::environ);
    let now = fingerprint(c, inc, environ.as_deref());
    let mut lines = Vec::new();
    match recorded_fingerprint(bundle_dir) {
        Some(before) => {
            let ch = changes(&before, &now);
            if !ch.is_empty() {
                return Err(format!(
                    "rollback check: the incumbent `{}` is not what the bake-off recorded: {}; the way back is not the recipe that was measured: run a new bake-off",
                    inc.id,
                    ch.join("; ")
                ));
            }
            lines.push(format!(
                "the incumbent's files and environment match the fingerprint the bake-off recorded at its stop ({} file(s))",
                now.files.len()
            ));
        }
        None => {
            return Err(format!(
                "rollback check: the bundle recorded no fingerprint of the incumbent `{}` (the bake-off did not stop it: it was not serving), so the way back cannot be compared with what was measured; run a new bake-off with the incumbent serving",
                inc.id
            ))
        }
    }
    launch_spec(c, inc, log).map_err(|e| {
        format!(
            "rollback check: the incumbent `{}` could not be started again: {e}",
            inc.id
        )
    })?;
    lines.push("its launch spec builds (every secret it names is set)".into());
    let lc = c.launch_command(inc);
    let said = inc
        .recipe()
        .restart_check(lc.as_ref())
        .map_err(|e| format!("rollback check: the incumbent `{}`: {e}", inc.id))?;
    lines.push(said);
    Ok((lines, now))
}

/// What the bake-off's launch of `arm` recorded of its recipe's files (its launch evidence).
pub fn measured_fingerprint(dir: &Path, arm: &str) -> Option<Fingerprint> {
    let b = std::fs::read(dir.join(bundle::step_file(arm, "launch", None))).ok()?;
    let v: Value = serde_json::from_slice(&b).ok()?;
    serde_json::from_value(v["recipe_fingerprint"].clone()).ok()
}

/// The winner check: the recipe files of `arm` are the ones the bake-off measured (a model,
/// profile or config edited since would put something unmeasured in service). Ok: the
/// fingerprint the launch compares against again.
pub fn winner(c: &Campaign, dir: &Path, arm: &Arm) -> Result<Fingerprint, String> {
    let Some(measured) = measured_fingerprint(dir, &arm.id) else {
        return Err(format!(
            "winner check: the bundle recorded no fingerprint of `{}`'s recipe files in {} (made by a bakeoff before 2026-12-02), so what would be promoted cannot be compared with what was measured; run a new bake-off",
            arm.id,
            bundle::step_file(&arm.id, "launch", None)
        ));
    };
    let now = fingerprint(c, arm, None);
    let ch = changes_since(&measured, &now, "the bake-off launched it");
    if !ch.is_empty() {
        return Err(format!(
            "winner check: `{}` is not the recipe the bake-off measured: {}; nothing was touched: put the files back or run a new bake-off",
            arm.id,
            ch.join("; ")
        ));
    }
    Ok(measured)
}
