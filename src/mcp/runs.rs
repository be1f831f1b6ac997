//! Campaign runs started through MCP: each is a child `bakeoff run --json` (or `--resume`), so
//! it holds the lane lock, installs its own SIGINT/SIGTERM handlers and restores the incumbent
//! exactly as a run from the terminal does; `stop` sends it SIGINT, the same path as Ctrl-C.
//! Its stdout (the `bakeoff.run/1` document) and stderr go to files under the root's
//! `.bakeoff-mcp/`, not pipes, so a run outlives the session that started it and still ends
//! cleanly (a later session reads its bundle); progress is read from the bundle's checkpoint,
//! plain data.

use crate::campaign::checkpoint::{Checkpoint, StepStatus};
use crate::evidence::bundle;
use crate::evidence::result::{ArmStatus, CampaignResult};
use schemars::JsonSchema;
use serde::Serialize;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::watch;

/// Lines of the run's stderr `watch` returns at most.
const LOG_LINES: usize = 20;

/// Every run this server started, by handle (`run-1`, `run-2`, …).
#[derive(Default)]
pub struct Runs {
    runs: Mutex<BTreeMap<String, Arc<Run>>>,
}

struct Run {
    id: String,
    bundle: PathBuf,
    pid: u32,
    resumed: bool,
    /// The run's stderr and stdout files.
    log: PathBuf,
    doc: PathBuf,
    /// The exit code and the document, once the child ended.
    ended: watch::Receiver<Option<Ended>>,
}

#[derive(Debug, Clone)]
struct Ended {
    /// None: killed by a signal it did not handle.
    code: Option<i32>,
    document: Option<serde_json::Value>,
}

/// What `watch`, `stop` and `start` return about one run.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct RunStatus {
    /// The run handle (`run-1`): give it to `watch` and `stop`.
    pub run: String,
    /// The bundle folder (absolute).
    pub bundle: String,
    /// The `bakeoff run` process.
    pub pid: u32,
    /// This run resumes an interrupted bundle.
    pub resumed: bool,
    /// `running` or `exited`.
    pub state: String,
    /// The run's exit code once exited (0 complete, 1 incomplete, 2 refused, 130 interrupted;
    /// README, "Exit codes"); None while running or when killed by a signal.
    pub exit_code: Option<i32>,
    /// Plan steps finished (this and earlier invocations) and in all; None before the run
    /// wrote its checkpoint.
    pub steps_done: Option<usize>,
    pub steps_total: Option<usize>,
    /// The step running now (the first step not finished), while running; None for a
    /// multi-lane run, whose lanes each have theirs (`lanes`).
    pub current_step: Option<StepPart>,
    /// A multi-lane run (docs/fleet.md): each lane run's own progress, from its folder's
    /// checkpoint (`steps_done`/`steps_total` above are their sums). Empty for one lane.
    pub lanes: Vec<LaneProgress>,
    /// Each arm's status from `campaign-result.json`: pending, completed, failed, interrupted.
    pub arms: Vec<ArmProgress>,
    /// The run's `bakeoff.run/1` document (docs/agents.md), once exited.
    pub document: Option<serde_json::Value>,
    /// The last lines the run wrote on stderr (its progress and its last words).
    pub log_tail: Vec<String>,
    /// The file holding all of its stderr (under the root's `.bakeoff-mcp/`).
    pub log: String,
}

#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct StepPart {
    pub number: usize,
    pub arm: Option<String>,
    pub step: String,
    /// `pending` (running or next) or `interrupted` (runs again on resume).
    pub status: String,
}

/// One lane run of a multi-lane run: a lane's own folder (`lanes/g1`) or a run of arms moved
/// there from a drained lane (`lanes/g1.moved-1`).
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct LaneProgress {
    /// Its folder in the bundle.
    pub folder: String,
    pub steps_done: usize,
    pub steps_total: usize,
    /// Its first step not finished, while the run is running.
    pub current_step: Option<StepPart>,
}

#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct ArmProgress {
    pub id: String,
    pub status: String,
    /// The failure class, when it failed (`compatibility`, `crash`, …).
    pub failure: Option<String>,
}

impl Runs {
    /// Spawns `bakeoff run ARGS --json --no-progress` (no shell: an argv) for `bundle`, its
    /// output into `dir` (under the root).
    pub fn start(
        &self,
        args: Vec<std::ffi::OsString>,
        bundle: PathBuf,
        resumed: bool,
        dir: &Path,
    ) -> Result<RunStatus, String> {
        let exe = std::env::current_exe()
            .map_err(|e| format!("cannot find the bakeoff executable to run the campaign: {e}"))?;
        std::fs::create_dir_all(dir)
            .map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
        // One lock over numbering, spawning and registering: two starts never share a handle.
        let mut runs = self.runs.lock().unwrap_or_else(|p| p.into_inner());
        let id = format!("run-{}", runs.len() + 1);
        let stem = format!("{}-{id}", std::process::id());
        let (log, doc) = (
            dir.join(format!("{stem}.log")),
            dir.join(format!("{stem}.json")),
        );
        let file = |p: &Path| {
            std::fs::File::create(p).map_err(|e| format!("cannot create {}: {e}", p.display()))
        };
        let mut child = tokio::process::Command::new(exe)
            .arg("run")
            .args(args)
            .args(["--json", "--no-progress"])
            .stdin(Stdio::null())
            .stdout(file(&doc)?)
            .stderr(file(&log)?)
            // Its own process group: a Ctrl-C meant for the client reaches the run only
            // through `stop`, never half way.
            .process_group(0)
            .spawn()
            .map_err(|e| format!("cannot start bakeoff run: {e}"))?;
        let pid = child.id().unwrap_or(0);
        let (tx, rx) = watch::channel(None);
        let run = Arc::new(Run {
            id: id.clone(),
            bundle,
            pid,
            resumed,
            log,
            doc,
            ended: rx,
        });
        let r = run.clone();
        tokio::spawn(async move {
            let code = child.wait().await.ok().and_then(|s| s.code());
            let document = std::fs::read(&r.doc)
                .ok()
                .and_then(|b| serde_json::from_slice(&b).ok());
            let _ = tx.send(Some(Ended { code, document }));
        });
        runs.insert(id, run.clone());
        drop(runs);
        Ok(run.status())
    }

    fn get(&self, id: &str) -> Result<Arc<Run>, String> {
        let runs = self.runs.lock().unwrap_or_else(|p| p.into_inner());
        runs.get(id).cloned().ok_or_else(|| {
            let known: Vec<&str> = runs.keys().map(String::as_str).collect();
            format!(
                "run: no run {id} was started by this server (known: {}); `start` returns the handle",
                if known.is_empty() { "none".to_string() } else { known.join(", ") }
            )
        })
    }

    /// The run's status, after waiting up to `wait` for it to end.
    pub async fn watch(&self, id: &str, wait: Duration) -> Result<RunStatus, String> {
        let run = self.get(id)?;
        run.wait(wait).await;
        Ok(run.status())
    }

    /// Sends the run SIGINT (what Ctrl-C does: it stops the current step, restores the
    /// incumbent and seals the bundle), then waits up to `wait` for it to end.
    pub async fn stop(&self, id: &str, wait: Duration) -> Result<RunStatus, String> {
        let run = self.get(id)?;
        if run.ended.borrow().is_none() {
            // SAFETY: kill(2) with our own child's pid and a signal number; no memory involved.
            let rc = unsafe { libc::kill(run.pid as libc::pid_t, libc::SIGINT) };
            if rc != 0 {
                return Err(format!(
                    "cannot send SIGINT to run {id} (pid {}): {}",
                    run.pid,
                    std::io::Error::last_os_error()
                ));
            }
        }
        run.wait(wait).await;
        Ok(run.status())
    }

    /// A run of this server that is still going on `bundle`.
    pub fn running_on(&self, bundle: &Path) -> Option<String> {
        let runs = self.runs.lock().unwrap_or_else(|p| p.into_inner());
        runs.values()
            .find(|r| r.bundle == bundle && r.ended.borrow().is_none())
            .map(|r| r.id.clone())
    }
}

impl Run {
    async fn wait(&self, wait: Duration) {
        let mut rx = self.ended.clone();
        let _ = tokio::time::timeout(wait, rx.wait_for(|e| e.is_some())).await;
    }

    fn status(&self) -> RunStatus {
        let ended = self.ended.borrow().clone();
        let running = ended.is_none();
        let folders = lane_folders(&self.bundle);
        let lanes = lane_progress(&folders, running);
        let (current, steps_done, steps_total) = if lanes.is_empty() {
            let ck = Checkpoint::load(&self.bundle).ok();
            (
                ck.as_ref().filter(|_| running).and_then(current_step),
                ck.as_ref().map(done),
                ck.as_ref().map(|c| c.steps.len()),
            )
        } else {
            let done = lanes.iter().map(|l| l.steps_done).sum();
            let total = lanes.iter().map(|l| l.steps_total).sum();
            (None, Some(done), Some(total))
        };
        RunStatus {
            run: self.id.clone(),
            bundle: self.bundle.display().to_string(),
            pid: self.pid,
            resumed: self.resumed,
            state: if ended.is_some() { "exited" } else { "running" }.to_string(),
            exit_code: ended.as_ref().and_then(|e| e.code),
            steps_done,
            steps_total,
            current_step: current,
            lanes,
            arms: arms(&self.bundle, &folders),
            document: ended.and_then(|e| e.document),
            log_tail: tail(&self.log),
            log: self.log.display().to_string(),
        }
    }
}

fn done(c: &Checkpoint) -> usize {
    c.steps.iter().filter(|s| s.status.finished()).count()
}

/// The first step of `c` not finished.
fn current_step(c: &Checkpoint) -> Option<StepPart> {
    c.steps
        .iter()
        .find(|s| !s.status.finished())
        .map(|s| StepPart {
            number: s.number,
            arm: s.arm.clone(),
            step: s.step.clone(),
            status: match s.status {
                StepStatus::Interrupted => "interrupted",
                _ => "pending",
            }
            .to_string(),
        })
}

/// The lane runs' folders of a multi-lane bundle (`lanes/g0`, `lanes/g1`, `lanes/g1.moved-1`,
/// in name order: a moved run after its lane's own); empty for a one-lane bundle.
fn lane_folders(dir: &Path) -> Vec<PathBuf> {
    let mut folders: Vec<PathBuf> = std::fs::read_dir(dir.join(bundle::LANES_DIR))
        .map(|rd| rd.flatten().map(|e| e.path()).collect())
        .unwrap_or_default();
    folders.sort();
    folders
}

/// Each lane run's progress (every lane folder with a checkpoint).
fn lane_progress(folders: &[PathBuf], running: bool) -> Vec<LaneProgress> {
    folders
        .iter()
        .filter_map(|f| {
            let c = Checkpoint::load(f).ok()?;
            let name = f.file_name()?.to_string_lossy();
            Some(LaneProgress {
                folder: format!("{}/{name}", bundle::LANES_DIR),
                steps_done: done(&c),
                steps_total: c.steps.len(),
                current_step: if running { current_step(&c) } else { None },
            })
        })
        .collect()
}

/// Each arm's status as `campaign-result.json` says it now (empty before the run wrote it). A
/// multi-lane run merges its lanes' results only at its end: until then each arm's status is
/// its lane run's (`lanes/*/campaign-result.json`; a moved run's, where the arm ran again).
fn arms(dir: &Path, lanes: &[PathBuf]) -> Vec<ArmProgress> {
    let Ok(r) = crate::report::read_result(dir) else {
        return Vec::new();
    };
    // In name order a moved run comes after its lane's own: the later run of an arm wins.
    let lane_results: Vec<CampaignResult> = lanes
        .iter()
        .filter_map(|l| crate::report::read_result(l).ok())
        .collect();
    let merged_already = !r.lanes.is_empty() && r.lanes.iter().all(|l| l.complete);
    r.arms
        .iter()
        .map(|a| {
            let own = (!merged_already)
                .then(|| {
                    lane_results
                        .iter()
                        .rev()
                        .filter_map(|lr| lr.arm(&a.id))
                        .find(|la| la.status != ArmStatus::Pending)
                })
                .flatten()
                .unwrap_or(a);
            ArmProgress {
                id: a.id.clone(),
                status: serde_json::to_value(own.status)
                    .ok()
                    .and_then(|v| v.as_str().map(str::to_string))
                    .unwrap_or_default(),
                failure: own.failure.as_ref().map(|f| f.class.to_string()),
            }
        })
        .collect()
}

/// The last [`LOG_LINES`] lines of the run's stderr file.
fn tail(p: &Path) -> Vec<String> {
    let text = std::fs::read(p)
        .map(|b| String::from_utf8_lossy(&b).into_owned())
        .unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(LOG_LINES)..]
        .iter()
        .map(|l| l.to_string())
        .collect()
}
