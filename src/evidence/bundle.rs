//! The bundle contract: every file name a campaign bundle holds, and the files kept beside it.
//!
//! No other module spells a bundle file name; the plan asks [`step_file`] for each step's
//! evidence, the runner and the documents use the constants and functions here, so a reader of
//! this one file knows every name a bundle can contain.

use std::path::{Path, PathBuf};

/// The bundle's copy of the campaign file (what resume and restoration re-read).
pub const CAMPAIGN_COPY: &str = "campaign.toml";
/// Host, OS, CPU, GPU and engine facts at the start of the run.
pub const ENVIRONMENT: &str = "environment.json";
/// The plan as it ran (the same steps `--dry-run` prints).
pub const PLAN: &str = "plan.json";
/// The runner's record of what ran (rewritten after every step).
pub const RESULT: &str = "campaign-result.json";
/// Which plan steps are finished (rewritten after every step; resume reads it).
pub const CHECKPOINT: &str = "checkpoint.json";
/// Every file with its SHA-256 and size.
pub const MANIFEST: &str = "artifact-manifest.json";
/// The verdict's documents.
pub const DECISION_SUMMARY: &str = "decision-summary.json";
pub const PUBLICATION_SUMMARY: &str = "publication-summary.md";
pub const REPORT_HTML: &str = "report.html";
/// Per-arm, per-step statistics as CSV (one row per timed step, the columns of `bench --csv`).
pub const STATS_CSV: &str = "arm-stats.csv";

/// What the history store said about the run (`bakeoff run --history`), written before the
/// verdict is rendered; its lines are limitations of the verdict (`evidence::history`).
pub const HISTORY_CONTEXT: &str = "history-context.json";
/// The trend page of the run's own series (`bakeoff run --history`), linked from `report.html`.
pub const HISTORY_TREND: &str = "history-trend.html";

/// Campaign-level step evidence.
pub const INCUMBENT_SHUTDOWN: &str = "incumbent-shutdown.json";
pub const GPU_IDLE_BASELINE: &str = "gpu-idle-baseline.json";
pub const RESTORATION_LAUNCH: &str = "restoration-launch.json";
pub const RESTORATION_IDENTITY: &str = "restoration-identity.json";
pub const RESTORATION_PREFLIGHT: &str = "restoration-preflight.json";
/// What the run is about to start and, once started, its pid, process group, start time and
/// argv (or container name and labels): written and synced before and after every launch, so a
/// later `bakeoff recover` / `--resume` can prove what a dead run left on the lane.
pub const LAUNCH_JOURNAL: &str = "launch-journal.json";

/// What invocation `invocation` (`bakeoff recover` or a `--resume`) found of a dead run on the
/// lane and did about it.
pub fn recovery(invocation: u32) -> String {
    format!("recovery-{invocation}.json")
}

/// A `[fleet.slurm]` campaign's allocation (`evidence::allocation`): the holder job's id and the
/// nodes Slurm granted, written and synced before any arm starts, so `bakeoff recover` cancels it
/// after a crash and `--resume` knows the dead run's.
pub const SLURM_ALLOCATION: &str = "slurm-allocation.json";

/// The folder of a multi-lane bundle that holds one folder per lane.
pub const LANES_DIR: &str = "lanes";

/// A lane's folder in a multi-lane bundle (`lanes/<lane>`, relative to the bundle): the lane's own
/// run, with every file a one-lane bundle holds (its result, checkpoint, launch journal, plan,
/// step evidence, its own manifest). The arms' evidence names carry the lane by this folder:
/// `lanes/g1/fast-timing-4k-c1-warm.json`. A one-lane bundle has no such folder.
pub fn lane_dir(lane: &str) -> String {
    format!("{LANES_DIR}/{lane}")
}

/// The folder of the `n`-th run of arms moved onto lane `lane` from a drained lane
/// (docs/fleet.md): `lanes/<lane>.moved-<n>`, a whole one-lane bundle as a lane folder is (a
/// lane id has no `.`, so it is never another lane's folder).
pub fn moved_dir(lane: &str, n: usize) -> String {
    lane_dir(&format!("{lane}.moved-{n}"))
}

/// The bundle a lane folder (`<bundle>/lanes/<lane>`) belongs to; None for any other folder.
pub fn bundle_of_lane(dir: &Path) -> Option<&Path> {
    let lanes = dir.parent()?;
    (lanes.file_name()? == LANES_DIR).then(|| lanes.parent())?
}

/// What a lane folder's raw logs sit beside: `<bundle>.<lane>` (so `<bundle>.<lane>.logs/`
/// and `<bundle>.<lane>.incumbent.log`): beside the whole bundle, never in it.
pub fn lane_beside(bundle: &Path, lane: &str) -> PathBuf {
    sibling(bundle, lane)
}

/// A timed load ordered to the client on a Slurm lane's node (docs/fleet.md "Where the client
/// runs"): `<arm>-client-<first request index>-order.json`, the order the controller wrote.
pub fn client_order(arm: &str, first_index: u64) -> String {
    format!("{arm}-client-{first_index}-order.json")
}

/// The raw load the client step on the node wrote for that order (per-request traces, never
/// figures): `<arm>-client-<first request index>-load.json`.
pub fn client_output(arm: &str, first_index: u64) -> String {
    format!("{arm}-client-{first_index}-load.json")
}

/// An arm step's evidence: `<arm>-<step>[-<shape>].json`, e.g. `fast-timing-4k-c1-warm.json`.
pub fn step_file(arm: &str, step: &str, shape: Option<&str>) -> String {
    match shape {
        Some(s) => format!("{arm}-{step}-{s}.json"),
        None => format!("{arm}-{step}.json"),
    }
}

/// The incumbent stopped again by a resumed invocation.
pub fn incumbent_shutdown_resume(invocation: u32) -> String {
    format!("incumbent-shutdown-resume-{invocation}.json")
}

/// An arm stopped by a signal in invocation `invocation`.
pub fn stop_interrupted(arm: &str, invocation: u32) -> String {
    format!("{arm}-stop-interrupted-{invocation}.json")
}

/// The `n`-th launch of an arm resumed half way (launch + ready again).
pub fn relaunch(arm: &str, n: u32) -> String {
    format!("{arm}-relaunch-{n}.json")
}

/// The stop of a relaunch that failed.
pub fn stop_relaunch(arm: &str, n: u32) -> String {
    format!("{arm}-stop-relaunch-{n}.json")
}

/// The masked copy of an arm's engine log for its planned launch.
pub fn engine_log(arm: &str) -> String {
    format!("{arm}-engine.log")
}

/// The masked copy of an arm's engine log for its `n`-th launch.
pub fn engine_log_relaunch(arm: &str, n: u32) -> String {
    format!("{arm}-engine-relaunch-{n}.log")
}

/// Raw engine logs, beside the bundle (never in it: they may hold secrets; masked copies go in).
pub fn logs_dir(bundle: &Path) -> PathBuf {
    sibling(bundle, "logs")
}

/// One arm's raw engine log in [`logs_dir`].
pub fn raw_engine_log(bundle: &Path, arm: &str) -> PathBuf {
    logs_dir(bundle).join(format!("{arm}.log"))
}

/// The restored incumbent's log: beside the bundle, because it keeps growing after the run.
pub fn incumbent_log(bundle: &Path) -> PathBuf {
    sibling(bundle, "incumbent.log")
}

/// Disk space the run holds back for its last words (the final result, checkpoint and
/// manifest), in [`logs_dir`]: never part of the bundle, given up when the disk is full at the end.
pub fn space_reserve(bundle: &Path) -> PathBuf {
    logs_dir(bundle).join(".space-reserve")
}

/// A promotion folder (`bakeoff promote`): its record (transaction steps, bake intervals,
/// decision), its summary, and each later recovery of it.
pub const PROMOTION: &str = "promotion.json";
pub const PROMOTION_SUMMARY: &str = "promotion-summary.md";
pub fn promotion_recovery(n: u32) -> String {
    format!("promotion-recovery-{n}.json")
}

/// How `bakeoff promote --abort|--finish DIR` asks the running promotion to end its bake: a file
/// beside the folder (never in it, so the manifest never meets it).
pub fn promotion_control(dir: &Path) -> PathBuf {
    sibling(dir, "control")
}

/// The promoted winner's raw log (it outlives bakeoff: beside the folder, never in it).
pub fn promoted_log(dir: &Path) -> PathBuf {
    sibling(dir, "promoted.log")
}

fn sibling(bundle: &Path, suffix: &str) -> PathBuf {
    let name = bundle
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "bundle".into());
    bundle.with_file_name(format!("{name}.{suffix}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names() {
        assert_eq!(step_file("a", "ready", None), "a-ready.json");
        assert_eq!(
            step_file("a", "timing", Some("4k-c1-warm")),
            "a-timing-4k-c1-warm.json"
        );
        assert_eq!(
            logs_dir(Path::new("/x/run1")),
            PathBuf::from("/x/run1.logs")
        );
        assert_eq!(
            incumbent_log(Path::new("/x/run1")),
            PathBuf::from("/x/run1.incumbent.log")
        );
    }
}
