//! Slurm arms: the recipe submitted as a batch job with `sbatch`, the endpoint on the job's node,
//! the job's state read with `scontrol show job` (accounting may be off: no `sacct`), stopped the
//! Slurm way (`scancel --signal=TERM --full`, up to the grace, then `scancel`), never by signalling
//! a local process.
//!
//! Secrets: the env values travel in sbatch's own environment, which Slurm exports to the job
//! (`--export=ALL`); they are never on a command line nor in the job script.

use super::process::open_arm_log;
use super::{
    Cause, EnvVal, ExitInfo, LaneSpec, LaunchFailure, Masker, Running, SlurmSpec, StopFacts,
    StopHow,
};
use crate::clock::mono_ns;
use serde::Serialize;
use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Pause between two `scontrol show job` while waiting.
const POLL: Duration = Duration::from_millis(100);
/// Longest wait for one Slurm CLI call.
const CLI_TIMEOUT: Duration = Duration::from_secs(30);

/// What bakeoff knows of an arm's Slurm job: recorded in the launch, ready-failure and stop
/// evidence.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct SlurmJob {
    pub job_id: String,
    pub job_name: String,
    /// The node it runs on (`BatchHost`), once it started.
    pub node: Option<String>,
    /// The node's address (`NodeAddr`): where the endpoint is.
    pub node_addr: Option<String>,
    /// The last `JobState` seen (PENDING, RUNNING, COMPLETED, FAILED, CANCELLED, TIMEOUT, …).
    pub state: String,
    /// The scheduler's last `Reason` (e.g. `Resources`, `NonZeroExitCode`), `None` for "None".
    pub reason: Option<String>,
    /// `ExitCode` as Slurm writes it: `code:signal`.
    pub exit_code: Option<String>,
    /// The Slurm CLI's directory (`None`: looked up on PATH).
    #[serde(skip)]
    bin_dir: Option<PathBuf>,
}

impl SlurmJob {
    /// The Slurm command `name` (`srun`, `scancel`, …) beside the arm's sbatch.
    pub fn tool(&self, name: &str) -> PathBuf {
        match &self.bin_dir {
            Some(d) => d.join(name),
            None => PathBuf::from(name),
        }
    }

    /// `JOBID (state STATE, reason R, exit code C, node N)`, for messages.
    pub fn describe(&self) -> String {
        let mut s = format!("Slurm job {} ({}", self.job_id, self.state);
        if let Some(r) = &self.reason {
            s.push_str(&format!(", reason {r}"));
        }
        if let Some(c) = &self.exit_code {
            s.push_str(&format!(", exit code {c}"));
        }
        if let Some(n) = &self.node {
            s.push_str(&format!(", node {n}"));
        }
        s.push(')');
        s
    }

    fn update(&mut self, info: &JobInfo) {
        self.state = info.state.clone();
        self.reason = info.reason.clone();
        self.exit_code = info.exit_code.clone();
        if info.node.is_some() {
            self.node = info.node.clone();
        }
    }
}

/// A job as `scontrol show job -o` prints it (the fields bakeoff reads).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JobInfo {
    pub state: String,
    pub reason: Option<String>,
    pub exit_code: Option<String>,
    /// `BatchHost`, else the first of `NodeList`.
    pub node: Option<String>,
}

impl JobInfo {
    /// The job has ended (or is ending): nothing of it serves any more.
    pub fn ended(&self) -> bool {
        !matches!(
            self.state.as_str(),
            "PENDING" | "RUNNING" | "CONFIGURING" | "REQUEUED" | "RESIZING" | "SUSPENDED"
        )
    }

    /// The exit as bakeoff reports it: `ExitCode=C:S` is the code, or the signal when S > 0.
    pub fn exit_info(&self) -> ExitInfo {
        let (code, signal) = match self.exit_code.as_deref().and_then(|e| e.split_once(':')) {
            Some((c, s)) => (c.parse::<i32>().ok(), s.parse::<i32>().ok()),
            None => (None, None),
        };
        match signal {
            Some(s) if s > 0 => ExitInfo {
                code: None,
                signal: Some(s),
                oom_killed: self.state == "OUT_OF_MEMORY",
            },
            _ => ExitInfo {
                code,
                signal: None,
                oom_killed: self.state == "OUT_OF_MEMORY",
            },
        }
    }
}

/// `KEY=VALUE` fields of one `scontrol show … -o` line (values never contain spaces there,
/// except the trailing free-text ones bakeoff does not read).
pub fn fields(line: &str) -> BTreeMap<String, String> {
    line.split_whitespace()
        .filter_map(|f| f.split_once('='))
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

/// Parses `scontrol show job -o ID`.
pub fn parse_job(line: &str) -> Option<JobInfo> {
    let f = fields(line);
    let state = f.get("JobState")?.clone();
    let some = |k: &str| {
        f.get(k)
            .filter(|v| !v.is_empty() && *v != "None" && *v != "(null)")
            .cloned()
    };
    let node = some("BatchHost").or_else(|| {
        some("NodeList").map(|n| n.split([',', '[']).next().unwrap_or_default().to_string())
    });
    Some(JobInfo {
        state,
        reason: some("Reason"),
        exit_code: some("ExitCode"),
        node,
    })
}

/// The sbatch argv the lane runs: the plan's, with `--output=LOG --open-mode=append` after
/// `--parsable` (the job's stdout and stderr go to the arm's log).
pub fn submit_argv(spec: &SlurmSpec) -> Vec<String> {
    let mut a = spec.sbatch_argv.clone();
    let at = a
        .iter()
        .position(|x| x == "--parsable")
        .map(|i| i + 1)
        .unwrap_or(1.min(a.len()));
    a.insert(at, "--open-mode=append".into());
    a.insert(at, format!("--output={}", spec.log_path.display()));
    a
}

/// The directory of the sbatch in argv\[0\], where scontrol and scancel are too.
fn bin_dir(argv0: &str) -> Option<PathBuf> {
    let p = Path::new(argv0);
    p.parent()
        .filter(|d| !d.as_os_str().is_empty())
        .map(Path::to_path_buf)
}

struct Out {
    ok: bool,
    stdout: String,
    stderr: String,
}

async fn cli(
    program: &Path,
    args: &[&str],
    env: &[(String, EnvVal)],
    cwd: Option<&Path>,
) -> Result<Out, String> {
    let mut cmd = tokio::process::Command::new(program);
    cmd.args(args)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true);
    for (k, v) in env {
        cmd.env(k, &v.value);
    }
    if let Some(d) = cwd {
        cmd.current_dir(d);
    }
    let child = cmd
        .spawn()
        .map_err(|e| format!("cannot run `{}`: {e}", program.display()))?;
    match tokio::time::timeout(CLI_TIMEOUT, child.wait_with_output()).await {
        Ok(Ok(o)) => Ok(Out {
            ok: o.status.success(),
            stdout: String::from_utf8_lossy(&o.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&o.stderr).into_owned(),
        }),
        Ok(Err(e)) => Err(format!("`{}` failed: {e}", program.display())),
        Err(_) => Err(format!(
            "`{} {}` did not finish within {:.0} s",
            program.display(),
            args.first().unwrap_or(&""),
            CLI_TIMEOUT.as_secs_f64()
        )),
    }
}

/// The job's state; `Ok(None)` when Slurm no longer knows the job.
async fn query(job: &SlurmJob) -> Result<Option<JobInfo>, String> {
    let o = cli(
        &job.tool("scontrol"),
        &["show", "job", "-o", &job.job_id],
        &[],
        None,
    )
    .await?;
    if !o.ok {
        if o.stderr.contains("Invalid job id") {
            return Ok(None);
        }
        return Err(format!(
            "scontrol show job {}: {}",
            job.job_id,
            o.stderr.trim()
        ));
    }
    parse_job(&o.stdout)
        .map(Some)
        .ok_or_else(|| format!("unexpected scontrol output: {}", o.stdout.trim()))
}

/// `NodeAddr` of a node (its hostname when Slurm gives none).
async fn node_addr(job: &SlurmJob, node: &str) -> String {
    match cli(
        &job.tool("scontrol"),
        &["show", "node", "-o", node],
        &[],
        None,
    )
    .await
    {
        Ok(o) if o.ok => fields(&o.stdout)
            .get("NodeAddr")
            .cloned()
            .unwrap_or_else(|| node.to_string()),
        _ => node.to_string(),
    }
}

async fn scancel(job: &SlurmJob, args: &[&str]) -> String {
    let mut a: Vec<&str> = args.to_vec();
    a.push(&job.job_id);
    let shown = format!("scancel {}", a.join(" "));
    match cli(&job.tool("scancel"), &a, &[], None).await {
        Ok(o) if o.ok => shown,
        Ok(o) => format!("{shown} failed: {}", o.stderr.trim()),
        Err(e) => format!("{shown}: {e}"),
    }
}

pub(super) async fn launch(
    lane: &LaneSpec,
    spec: &SlurmSpec,
    identity: String,
    masker: Masker,
    started_ns: u64,
) -> Result<Running, LaunchFailure> {
    let fail = |msg: String| LaunchFailure::spawn_failed(&masker, &msg, started_ns);
    let (mut log, offset) = open_arm_log(&spec.log_path, &masker, started_ns)?;
    let argv = submit_argv(spec);
    let args: Vec<&str> = argv[1..].iter().map(String::as_str).collect();
    let out = cli(Path::new(&argv[0]), &args, &spec.env, spec.cwd.as_deref())
        .await
        .map_err(|e| fail(format!("slurm arm {}: {e}", spec.job_name)))?;
    let _ = write!(log, "{}", masker.mask(&out.stderr));
    let job_id = out
        .stdout
        .trim()
        .split(';')
        .next()
        .unwrap_or_default()
        .to_string();
    if !out.ok || job_id.is_empty() || !job_id.chars().all(|c| c.is_ascii_digit() || c == '_') {
        let tail = super::logs::last_lines(&masker.mask(&out.stderr), super::LOG_TAIL_LINES);
        let last = tail.last().cloned().unwrap_or_default();
        return Err(fail(format!(
            "`sbatch` refused the job {}: {last}",
            spec.job_name
        ))
        .with_log_tail(tail));
    }
    let job = SlurmJob {
        job_id,
        job_name: spec.job_name.clone(),
        state: "PENDING".into(),
        bin_dir: bin_dir(&argv[0]),
        ..SlurmJob::default()
    };
    Ok(Running {
        handle: super::Handle::Slurm(Handle {
            job,
            pending_timeout: spec.pending_timeout,
        }),
        started_ns,
        started_wall: crate::clock::wall_rfc3339(),
        log_path: Some(spec.log_path.clone()),
        log_offset: offset,
        target: lane.target(),
        identity,
        masker,
        exit: None,
    })
}

/// What a Slurm arm holds: its job as last seen, the longest wait for it to start.
pub(super) struct Handle {
    pub(super) job: SlurmJob,
    pending_timeout: Option<Duration>,
}

fn job_of(running: &Running) -> Option<SlurmJob> {
    match &running.handle {
        super::Handle::Slurm(h) => Some(h.job.clone()),
        _ => None,
    }
}

fn set_job(running: &mut Running, job: SlurmJob) {
    if let super::Handle::Slurm(h) = &mut running.handle {
        h.job = job;
    }
}

/// How the wait for the job to start ended.
pub(super) enum Start {
    /// RUNNING on its node; `running.target` now points there.
    Running,
    /// It ended before or while starting.
    Exited(ExitInfo),
    /// Still PENDING past its pending timeout (or the ready timeout): it was cancelled.
    Failed(Box<LaunchFailure>),
}

/// Waits until the job runs (then points the target at its node), ends, or stays pending past
/// `pending_timeout` (default: the lane's ready timeout), in which case it is cancelled.
pub(super) async fn wait_running(running: &mut Running, lane: &LaneSpec) -> Start {
    let pending = match &running.handle {
        super::Handle::Slurm(h) => h.pending_timeout,
        _ => None,
    };
    let limit = pending
        .unwrap_or(lane.ready_timeout)
        .min(lane.ready_timeout);
    let deadline_ns = running.started_ns.saturating_add(limit.as_nanos() as u64);
    let Some(mut job) = job_of(running) else {
        return Start::Exited(ExitInfo {
            code: None,
            signal: None,
            oom_killed: false,
        });
    };
    let mut last_err = None;
    let start = loop {
        match query(&job).await {
            Ok(None) => {
                job.state = "UNKNOWN".into();
                job.reason = Some("Slurm no longer knows the job".into());
                break Start::Exited(ExitInfo {
                    code: None,
                    signal: None,
                    oom_killed: false,
                });
            }
            Ok(Some(info)) => {
                job.update(&info);
                if info.ended() {
                    break Start::Exited(info.exit_info());
                }
                if info.state == "RUNNING" {
                    if let Some(node) = &info.node {
                        let addr = node_addr(&job, node).await;
                        job.node_addr = Some(addr.clone());
                        running.target.host = addr;
                        break Start::Running;
                    }
                }
            }
            Err(e) => last_err = Some(e),
        }
        if mono_ns() >= deadline_ns {
            let waited = running.elapsed_ms() / 1e3;
            // The scheduler's account before the cancel changes it.
            let (state, why) = (
                job.state.clone(),
                job.reason.clone().unwrap_or_else(|| "none given".into()),
            );
            let cancel = scancel(&job, &[]).await;
            let gone = wait_ended(&mut job, Duration::from_secs(10)).await;
            let mut message = format!(
                "Slurm job {} ({}) was still {state} {:.1} s after submission (the scheduler's \
                 reason: {why}), past its {:.0} s pending timeout; it was cancelled ({cancel}): \
                 now {}",
                job.job_id,
                job.job_name,
                waited,
                limit.as_secs_f64(),
                if gone {
                    job.state.clone()
                } else {
                    format!("still listed as {}", job.state)
                },
            );
            if let Some(e) = &last_err {
                message.push_str(&format!("; last scontrol error: {e}"));
            }
            let mut f = LaunchFailure::new(Cause::Timeout, running.masker.mask(&message), 0.0);
            f.elapsed_ms = running.elapsed_ms();
            f.log_tail = running.log_tail(super::LOG_TAIL_LINES);
            set_job(running, job.clone());
            f.cleanup = Some(StopFacts {
                how: StopHow::Sigterm,
                exit: None,
                took_ms: 0.0,
                group_gone: gone,
                remaining_pids: Vec::new(),
                port_free: None,
                detail: cancel,
                slurm_job: Some(job),
            });
            return Start::Failed(Box::new(f));
        }
        tokio::time::sleep(POLL).await;
    };
    if let Start::Exited(e) = &start {
        running.exit = Some(e.clone());
    }
    set_job(running, job);
    start
}

/// Polls until the job has ended or is gone, up to `limit`; whether it did.
async fn wait_ended(job: &mut SlurmJob, limit: Duration) -> bool {
    let t0 = mono_ns();
    loop {
        match query(job).await {
            Ok(None) => return true,
            Ok(Some(info)) => {
                job.update(&info);
                if info.ended() && info.state != "COMPLETING" {
                    return true;
                }
            }
            Err(_) => {}
        }
        if mono_ns().saturating_sub(t0) >= limit.as_nanos() as u64 {
            return false;
        }
        tokio::time::sleep(POLL).await;
    }
}

/// Whether Slurm lists the job as ended or no longer knows it (a blocking `scontrol show job`,
/// for the crash check between requests). `false` when scontrol cannot answer: no crash is
/// claimed without the scheduler saying so.
pub fn job_ended(job: &SlurmJob) -> bool {
    let Ok(o) = std::process::Command::new(job.tool("scontrol"))
        .args(["show", "job", "-o", &job.job_id])
        .stdin(std::process::Stdio::null())
        .output()
    else {
        return false;
    };
    if !o.status.success() {
        return String::from_utf8_lossy(&o.stderr).contains("Invalid job id");
    }
    parse_job(&String::from_utf8_lossy(&o.stdout)).is_some_and(|i| i.ended())
}

/// Resolves when the job has ended (polls `scontrol show job` every 100 ms), recording its state.
pub(super) async fn wait_exit(running: &mut Running) -> ExitInfo {
    if let Some(e) = &running.exit {
        return e.clone();
    }
    let Some(mut job) = job_of(running) else {
        return std::future::pending().await;
    };
    loop {
        match query(&job).await {
            Ok(None) => {
                let e = ExitInfo {
                    code: None,
                    signal: None,
                    oom_killed: false,
                };
                job.state = "UNKNOWN".into();
                set_job(running, job);
                running.exit = Some(e.clone());
                return e;
            }
            Ok(Some(info)) if info.ended() => {
                job.update(&info);
                let e = info.exit_info();
                set_job(running, job);
                running.exit = Some(e.clone());
                return e;
            }
            _ => tokio::time::sleep(POLL).await,
        }
    }
}

/// `scancel --signal=TERM --full JOBID`, up to `grace` for the job to end, then `scancel JOBID`;
/// waits for Slurm to list it as ended and for the lane port to be free.
pub(super) async fn stop(running: &mut Running, grace: Duration) -> StopFacts {
    let t0 = mono_ns();
    let Some(mut job) = job_of(running) else {
        return super::process::finish_stop(
            running,
            StopHow::AlreadyExited,
            t0,
            true,
            Vec::new(),
            vec!["no Slurm job was submitted".into()],
        )
        .await;
    };
    let mut detail = Vec::new();
    let state = query(&job).await;
    if let Ok(Some(info)) = &state {
        job.update(info);
    }
    let how = match state {
        Ok(None) => {
            detail.push(format!("Slurm job {} is no longer known", job.job_id));
            StopHow::AlreadyExited
        }
        Ok(Some(info)) if info.ended() && info.state != "COMPLETING" => {
            detail.push(format!("{} had already ended", job.describe()));
            StopHow::AlreadyExited
        }
        Ok(Some(info)) if info.state == "PENDING" => {
            detail.push(scancel(&job, &[]).await);
            StopHow::Sigterm
        }
        _ => {
            detail.push(scancel(&job, &["--signal=TERM", "--full"]).await);
            if wait_ended(&mut job, grace).await {
                StopHow::Sigterm
            } else {
                detail.push(format!(
                    "still {} after the {:.0} s grace",
                    job.state,
                    grace.as_secs_f64()
                ));
                detail.push(scancel(&job, &[]).await);
                StopHow::Sigkill
            }
        }
    };
    let gone = wait_ended(&mut job, Duration::from_secs(30)).await;
    if !gone {
        detail.push(format!("Slurm still lists the job as {}", job.state));
    }
    if let Ok(Some(info)) = query(&job).await {
        job.update(&info);
        if info.ended() {
            running.exit = Some(info.exit_info());
        }
    }
    detail.push(job.describe());
    set_job(running, job.clone());
    let mut facts = super::process::finish_stop(running, how, t0, gone, Vec::new(), detail).await;
    facts.slurm_job = Some(job);
    facts
}

/// Live Slurm jobs of this user named `name` (`squeue -h --me --name N
/// --states=RUNNING,PENDING,CONFIGURING -o "%i %T %N"`): another user's job of the same name is
/// never taken for the incumbent: (job id, state, node). `sbatch` is the recipe's argv\[0\] (its directory holds
/// squeue). Blocking: a quick call, used before and between steps.
pub fn jobs_named(sbatch: &str, name: &str) -> Result<Vec<(String, String, String)>, String> {
    let job = SlurmJob {
        bin_dir: bin_dir(sbatch),
        ..SlurmJob::default()
    };
    let o = std::process::Command::new(job.tool("squeue"))
        .args([
            "-h",
            "--me",
            "--name",
            name,
            "--states=RUNNING,PENDING,CONFIGURING",
            "-o",
            "%i %T %N",
        ])
        .stdin(std::process::Stdio::null())
        .output()
        .map_err(|e| format!("cannot run squeue: {e}"))?;
    if !o.status.success() {
        return Err(format!(
            "squeue: {}",
            String::from_utf8_lossy(&o.stderr).trim()
        ));
    }
    Ok(String::from_utf8_lossy(&o.stdout)
        .lines()
        .filter_map(|l| {
            let mut f = l.split_whitespace();
            Some((
                f.next()?.to_string(),
                f.next()?.to_string(),
                f.next().unwrap_or("").to_string(),
            ))
        })
        .collect())
}

/// Stops a job bakeoff did not launch in this run (a Slurm incumbent found by name): the same
/// Slurm way as [`stop`]. Returns what was done and whether Slurm lists it as ended.
pub async fn stop_job(sbatch: &str, job_id: &str, grace: Duration) -> (SlurmJob, String, bool) {
    let mut job = SlurmJob {
        job_id: job_id.to_string(),
        bin_dir: bin_dir(sbatch),
        ..SlurmJob::default()
    };
    let mut detail = vec![scancel(&job, &["--signal=TERM", "--full"]).await];
    let mut gone = wait_ended(&mut job, grace).await;
    if !gone {
        detail.push(scancel(&job, &[]).await);
        gone = wait_ended(&mut job, Duration::from_secs(30)).await;
    }
    detail.push(job.describe());
    (job.clone(), detail.join("; "), gone)
}

#[cfg(test)]
mod tests {
    use super::*;

    const FAILED: &str = "JobId=2 JobName=wrap UserId=root(0) JobState=FAILED Reason=NonZeroExitCode Dependency=(null) ExitCode=3:0 RunTime=00:00:00 NodeList=vm BatchHost=vm NumNodes=1";
    const PENDING: &str = "JobId=7 JobName=x JobState=PENDING Reason=PartitionConfig ExitCode=0:0 NodeList= NumNodes=1";

    #[test]
    fn parses_scontrol() {
        let f = parse_job(FAILED).unwrap();
        assert_eq!(f.state, "FAILED");
        assert_eq!(f.reason.as_deref(), Some("NonZeroExitCode"));
        assert_eq!(f.node.as_deref(), Some("vm"));
        assert!(f.ended());
        assert_eq!(f.exit_info().code, Some(3));
        let p = parse_job(PENDING).unwrap();
        assert!(!p.ended());
        assert_eq!(p.node, None);
        assert_eq!(p.reason.as_deref(), Some("PartitionConfig"));
        let k = parse_job("JobState=CANCELLED Reason=None ExitCode=0:15").unwrap();
        assert_eq!(k.reason, None);
        assert_eq!(k.exit_info().signal, Some(15));
        assert!(parse_job("garbage").is_none());
    }

    #[test]
    fn submit_adds_output() {
        let spec = SlurmSpec {
            sbatch_argv: vec![
                "/opt/slurm/bin/sbatch".into(),
                "--parsable".into(),
                "--job-name=j".into(),
                "--wrap=exec x".into(),
            ],
            env: vec![],
            cwd: None,
            log_path: PathBuf::from("/b/logs/a.log"),
            job_name: "j".into(),
            pending_timeout: None,
        };
        assert_eq!(
            submit_argv(&spec),
            vec![
                "/opt/slurm/bin/sbatch",
                "--parsable",
                "--output=/b/logs/a.log",
                "--open-mode=append",
                "--job-name=j",
                "--wrap=exec x"
            ]
        );
        assert_eq!(
            bin_dir("/opt/slurm/bin/sbatch"),
            Some(PathBuf::from("/opt/slurm/bin"))
        );
        assert_eq!(bin_dir("sbatch"), None);
    }
}
