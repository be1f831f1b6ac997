//! Everything a promotion checks before it touches the lane: which arm, on whose authority, that
//! the lane still serves the bundle's incumbent (no drift), and that the way back works (the
//! rollback check). Each refusal is one line that says what was found and what to do.

use super::Baseline;
use crate::campaign::checkpoint::Checkpoint;
use crate::campaign::fingerprint::{changes, changes_since, fingerprint, Fingerprint};
use crate::campaign::{Arm, Campaign, Mask};
use crate::decide::Verdict;
use crate::evidence::bundle;
use crate::evidence::result::CampaignResult;
use crate::gates::Check;
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

/// The bake check: what the bake will send and run is what the bake-off measured with, proven
/// before anything stops. The dataset its traffic replays is the file the bake-off sent (the
/// bundle's checkpoint digests it); the gate suites its canary runs are the files the bake-off's
/// gates ran, and they load. Ok: the canary's checks (empty: no canary) and what was proven, in
/// words; Err: the field and the file, and what to do.
pub fn bake_inputs(
    c: &Campaign,
    ck: &Checkpoint,
    canary_every: u32,
) -> Result<(Vec<Check>, Vec<String>), String> {
    let refuse = |why: String| {
        format!("bake check: {why}; nothing was touched: put the file back, or run a new bake-off")
    };
    let mut lines = Vec::new();
    if let Some(why) = ck.workload_changed(c) {
        return Err(refuse(format!(
            "the bake replays the campaign's workload, but {why}"
        )));
    }
    if let Some(d) = &c.workload.dataset {
        lines.push(format!(
            "the dataset {} is the file the bake-off sent (sha256 {}…)",
            d.path.display(),
            d.sha256.chars().take(12).collect::<String>()
        ));
    }
    if canary_every == 0 {
        return Ok((Vec::new(), lines));
    }
    let suites = [
        (
            "gates.tools.suite",
            c.gates.tools.as_ref().and_then(|t| t.suite.as_deref()),
        ),
        (
            "gates.quality.suite",
            c.gates.quality.as_ref().and_then(|q| q.suite.as_deref()),
        ),
    ];
    for (field, path) in suites {
        let Some(path) = path else { continue };
        match ck.file_named_by(field) {
            Some(f) => {
                if let Some(why) = f.changed() {
                    return Err(refuse(format!(
                        "{field}: the bake's gate canary would not run the suite the bake-off's gate passed: {why}"
                    )));
                }
                lines.push(format!(
                    "{field} {} is the file the bake-off's gate ran",
                    path.display()
                ));
            }
            // Not a file when the bake-off began (a built-in suite named by its repository path).
            None if path.is_file() => {
                return Err(refuse(format!(
                    "{field}: {} was not a file when the bake-off began, so the bake's gate canary would not run the suite its gate ran",
                    path.display()
                )))
            }
            None => {}
        }
    }
    let checks = super::canary::checks(c)
        .map_err(|e| refuse(format!("the bake's gate canary cannot run: {e}")))?;
    if !checks.is_empty() {
        let names: Vec<&str> = checks.iter().map(|k| k.name()).collect();
        lines.push(format!(
            "the gate canary's suites load ({})",
            names.join(" and ")
        ));
    }
    Ok((checks, lines))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::campaign::checkpoint::Checkpoint;

    const ARMS: &str = "[[arms]]\nid = \"inc\"\nrole = \"incumbent\"\nengine = \"e\"\nmodel = \"m\"\nserved_model = \"m\"\nserved_context = 4096\n[arms.process]\nargv = [\"/bin/sleep\", \"1000\"]\n";

    /// A campaign in `dir` with `workload` lines, `tables` and `arms` after the incumbent.
    fn campaign(dir: &Path, workload: &str, tables: &str, arms: &str) -> Campaign {
        let text = format!(
            "[campaign]\nid = \"promo-check\"\n[lane]\nport = 18399\n[workload]\nranking_priority = [\"ttft\"]\nmatched_prompt_tokens = 64\nmax_tokens = 8\n{workload}\n{tables}\n{ARMS}{arms}"
        );
        let file = dir.join("c.toml");
        std::fs::write(&file, &text).unwrap();
        crate::campaign::parse(&text, &file).unwrap_or_else(|e| panic!("{e}"))
    }

    fn verdict(winner: &str) -> Verdict {
        Verdict {
            priorities: Vec::new(),
            winner: Some(winner.into()),
            decided_by: None,
            ranking: vec![winner.into()],
            arms: Vec::new(),
            failures: Vec::new(),
            evidence_labels: Vec::new(),
            decision_labels: Vec::new(),
            promotion_authorized: true,
            reason: String::new(),
            next_gate: String::new(),
            limitations: Vec::new(),
            complete: true,
        }
    }

    #[test]
    fn an_endpoint_arm_is_refused_bakeoff_does_not_own_it() {
        let d = tempfile::tempdir().unwrap();
        let gw = "[[arms]]\nid = \"gw\"\nrole = \"candidate\"\nengine = \"e\"\nmodel = \"m\"\nserved_model = \"gw\"\nserved_context = 4096\n[arms.endpoint]\nurl = \"http://127.0.0.1:18398\"\n";
        let c = campaign(d.path(), "", "", gw);
        let r = CampaignResult::default();
        let Err(e) = choose(&c, &verdict("gw"), &r, None, true) else {
            panic!("an endpoint arm was chosen for promotion")
        };
        assert!(
            e.contains("`gw` is an endpoint arm: bakeoff does not own it")
                && e.contains("switch your router to it by hand"),
            "{e}"
        );
    }

    #[test]
    fn the_bake_check_refuses_a_changed_suite_or_dataset_naming_field_and_file() {
        let d = tempfile::tempdir().unwrap();
        let root = Path::new(env!("CARGO_MANIFEST_DIR"));
        let suite = d.path().join("tools.toml");
        std::fs::copy(root.join("suites/tools.toml"), &suite).unwrap();
        let data = d.path().join("d.jsonl");
        std::fs::copy(root.join("examples/datasets/sample.jsonl"), &data).unwrap();
        let (workload, tables) = (
            "[workload.dataset]\npath = \"d.jsonl\"\n",
            "[gates.tools]\nbatch = 1\nvariants = [\"plain\"]\nsuite = \"tools.toml\"\n",
        );
        let c = campaign(d.path(), workload, tables, "");
        let ck = Checkpoint::new(&crate::campaign::plan(&c));
        let (checks, lines) = bake_inputs(&c, &ck, 1).unwrap();
        assert_eq!(checks.len(), 1, "{lines:?}");
        assert!(lines.join("\n").contains("gates.tools.suite"), "{lines:?}");
        assert!(bake_inputs(&c, &ck, 0).unwrap().0.is_empty(), "no canary");

        // The suite edited since the bake-off (it still loads): refused, field and file named.
        let text = std::fs::read_to_string(&suite).unwrap();
        std::fs::write(&suite, format!("{text}\n# edited\n")).unwrap();
        let e = bake_inputs(&c, &ck, 1).map(|_| ()).unwrap_err();
        assert!(
            e.contains("gates.tools.suite")
                && e.contains(&suite.display().to_string())
                && e.contains("changed since the run started")
                && e.contains("nothing was touched"),
            "{e}"
        );
        // The suite no longer loads: refused with the suite's own error.
        std::fs::write(&suite, "not = [valid").unwrap();
        let e = bake_inputs(&c, &ck, 1).map(|_| ()).unwrap_err();
        assert!(e.contains("gates.tools.suite"), "{e}");
        std::fs::write(&suite, &text).unwrap();
        assert!(bake_inputs(&c, &ck, 1).is_ok());

        // The dataset the bake replays changed: the campaign copy loads it anew, the checkpoint
        // keeps what the bake-off sent.
        std::fs::write(&data, "{\"id\": \"x\", \"prompt\": \"other\"}\n").unwrap();
        let c = campaign(d.path(), workload, tables, "");
        let e = bake_inputs(&c, &ck, 1).map(|_| ()).unwrap_err();
        assert!(
            e.contains("the bake replays the campaign's workload") && e.contains("d.jsonl"),
            "{e}"
        );
    }
}
