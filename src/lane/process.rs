//! Process arms: spawn an argv in its own process group with output appended to a log file;
//! stop the whole group (SIGTERM, grace, SIGKILL) and prove nothing of it is left.

use super::recipe::{
    At, CommandLine, EnvValue, LaunchCommand, Named, Recipe, RecipeKind, StopMethod,
};
use super::{port, EnvVal, ExitInfo, LaneSpec, LaunchFailure, Masker, Running, StopFacts, StopHow};
use crate::clock::mono_ns;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::Path;
use std::path::PathBuf;
use std::time::Duration;

/// What [`launch`] needs besides the lane.
pub(super) struct Start<'a> {
    pub kind: &'static str,
    /// The kind's state around the process's ([`super::Handle::Process`] or `Reference`).
    pub handle: fn(Handle) -> super::Handle,
    pub argv: &'a [String],
    pub env: &'a [(String, EnvVal)],
    pub cwd: Option<&'a Path>,
    pub log_path: &'a Path,
    pub identity: String,
    pub masker: Masker,
    pub started_ns: u64,
}

/// Opens `path` for appending (creating its folder) and returns it with its current length: the
/// offset where this launch's output starts.
pub(super) fn open_log(path: &Path) -> std::io::Result<(std::fs::File, u64)> {
    if let Some(dir) = path.parent() {
        if !dir.as_os_str().is_empty() {
            std::fs::create_dir_all(dir)?;
        }
    }
    use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
    // The raw log may hold what the engine printed of its secrets: its owner's only.
    let f = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .mode(0o600)
        .open(path)?;
    f.set_permissions(std::fs::Permissions::from_mode(0o600))?;
    let len = f.metadata()?.len();
    Ok((f, len))
}

/// [`open_log`] for a launch: a log that cannot be opened fails it (`spawn-failed`), naming the
/// file.
// The failure is returned by value, as the public async `lane::launch` does.
#[allow(clippy::result_large_err)]
pub(super) fn open_arm_log(
    path: &Path,
    masker: &Masker,
    started_ns: u64,
) -> Result<(std::fs::File, u64), LaunchFailure> {
    open_log(path).map_err(|e| {
        let msg = format!("cannot open the log file {}: {e}", path.display());
        LaunchFailure::spawn_failed(masker, &msg, started_ns)
    })
}

// The failure is returned by value, as the public async `lane::launch` does.
#[allow(clippy::result_large_err)]
pub(super) fn launch(lane: &LaneSpec, s: Start<'_>) -> Result<Running, LaunchFailure> {
    let fail = |msg: String| LaunchFailure::spawn_failed(&s.masker, &msg, s.started_ns);
    let Some(program) = s.argv.first() else {
        return Err(fail(format!("{} arm has an empty argv", s.kind)));
    };
    let (log, offset) = open_arm_log(s.log_path, &s.masker, s.started_ns)?;
    let log2 = log
        .try_clone()
        .map_err(|e| fail(format!("cannot duplicate the log file handle: {e}")))?;
    let mut cmd = tokio::process::Command::new(program);
    cmd.args(&s.argv[1..])
        .stdin(std::process::Stdio::null())
        .stdout(log)
        .stderr(log2)
        // Its own process group: stop signals the group, and a Ctrl-C at bakeoff's terminal does
        // not reach it (an incumbent must survive bakeoff).
        .process_group(0)
        .kill_on_drop(false);
    for (k, v) in s.env {
        cmd.env(k, &v.value);
    }
    if let Some(d) = s.cwd {
        cmd.current_dir(d);
    }
    let child = cmd.spawn().map_err(|e| {
        let hint = if e.kind() == std::io::ErrorKind::NotFound {
            "; check that the program exists (a path, or a name on PATH) and the cwd exists"
        } else {
            ""
        };
        fail(format!("cannot start `{program}`: {e}{hint}"))
    })?;
    let pid = child.id();
    Ok(Running {
        handle: (s.handle)(Handle {
            pid,
            child: Some(child),
        }),
        started_ns: s.started_ns,
        started_wall: crate::clock::wall_rfc3339(),
        log_path: Some(s.log_path.to_path_buf()),
        log_offset: offset,
        target: lane.target(),
        identity: s.identity,
        masker: s.masker,
        exit: None,
    })
}

/// What a process (or reference) arm holds: its child, and its pid (also its process group id).
pub(super) struct Handle {
    pub(super) pid: Option<u32>,
    child: Option<tokio::process::Child>,
}

fn child(running: &mut Running) -> Option<&mut tokio::process::Child> {
    match &mut running.handle {
        super::Handle::Process(h) | super::Handle::Reference(h) => h.child.as_mut(),
        _ => None,
    }
}

/// Resolves when the process exits (at once when it already has); pending forever for a
/// running without a child.
pub(super) async fn wait_exit(running: &mut Running) -> ExitInfo {
    if let Some(e) = &running.exit {
        return e.clone();
    }
    match child(running) {
        Some(c) => {
            let info = match c.wait().await {
                Ok(st) => ExitInfo::from_status(st),
                Err(_) => ExitInfo {
                    code: None,
                    signal: None,
                    oom_killed: false,
                },
            };
            running.exit = Some(info.clone());
            info
        }
        None => std::future::pending().await,
    }
}

/// Non-blocking: has the process exited? Records it.
pub(super) fn try_exit(running: &mut Running) -> Option<ExitInfo> {
    if running.exit.is_none() {
        if let Some(Ok(Some(st))) = child(running).map(|c| c.try_wait()) {
            running.exit = Some(ExitInfo::from_status(st));
        }
    }
    running.exit.clone()
}

/// Sends `sig` to process group `pgid`; false when the group no longer exists.
pub fn signal_group(pgid: u32, sig: i32) -> bool {
    // SAFETY: kill(2) with a negative pid signals a process group; no memory is involved.
    unsafe { libc::kill(-(pgid as libc::pid_t), sig) == 0 }
}

/// Live (non-zombie) processes of group `pgid`. `kill(-pgid, 0)` failing with ESRCH proves the
/// group is gone; when it succeeds, /proc is read to tell live members from zombies waiting for
/// their parent.
pub fn group_members(pgid: u32) -> Vec<u32> {
    // SAFETY: signal 0 only checks for existence and permission.
    let r = unsafe { libc::kill(-(pgid as libc::pid_t), 0) };
    if r != 0 && std::io::Error::last_os_error().raw_os_error() == Some(libc::ESRCH) {
        return Vec::new();
    }
    let Ok(dir) = std::fs::read_dir("/proc") else {
        // No /proc: trust kill(2).
        return vec![pgid];
    };
    let mut live = Vec::new();
    for entry in dir.flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|n| n.parse::<u32>().ok())
        else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
            continue;
        };
        // pid (comm) state ppid pgrp …; comm may contain spaces and parentheses.
        let Some(rest) = stat.rfind(')').map(|i| &stat[i + 1..]) else {
            continue;
        };
        let mut f = rest.split_whitespace();
        let state = f.next().unwrap_or("");
        let pgrp = f.nth(1).and_then(|p| p.parse::<u32>().ok());
        if pgrp == Some(pgid) && state != "Z" && state != "X" {
            live.push(pid);
        }
    }
    live.sort_unstable();
    live
}

pub fn signal_name(sig: i32) -> &'static str {
    match sig {
        libc::SIGHUP => "SIGHUP",
        libc::SIGINT => "SIGINT",
        libc::SIGQUIT => "SIGQUIT",
        libc::SIGILL => "SIGILL",
        libc::SIGABRT => "SIGABRT",
        libc::SIGBUS => "SIGBUS",
        libc::SIGFPE => "SIGFPE",
        libc::SIGKILL => "SIGKILL",
        libc::SIGSEGV => "SIGSEGV",
        libc::SIGPIPE => "SIGPIPE",
        libc::SIGTERM => "SIGTERM",
        _ => "signal",
    }
}

/// Polls until the leader is reaped and no live member of the group is left, or `until` (mono ns).
async fn wait_group_gone(running: &mut Running, pgid: u32, until: u64) -> bool {
    loop {
        let leader_done = try_exit(running).is_some();
        if leader_done && group_members(pgid).is_empty() {
            return true;
        }
        if mono_ns() >= until {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

pub(super) async fn stop(running: &mut Running, grace: Duration) -> StopFacts {
    let t0 = mono_ns();
    let mut detail = Vec::new();
    let Some(pgid) = running.pid() else {
        // Spawned but no pid means tokio already reaped it.
        return StopFacts {
            how: StopHow::AlreadyExited,
            exit: running.exit.clone(),
            took_ms: 0.0,
            group_gone: true,
            remaining_pids: Vec::new(),
            port_free: Some(port::port_free(&running.target.host, running.target.port)),
            detail: "the process had already exited and was reaped".into(),
            slurm_job: None,
        };
    };
    let how = if let Some(e) = try_exit(running) {
        detail.push(format!("process {pgid} had already exited ({e})"));
        let left = group_members(pgid);
        if !left.is_empty() {
            signal_group(pgid, libc::SIGKILL);
            detail.push(format!(
                "SIGKILL to the {} leftover process(es) of its group: {left:?}",
                left.len()
            ));
            wait_group_gone(running, pgid, mono_ns() + 5_000_000_000).await;
        }
        StopHow::AlreadyExited
    } else {
        signal_group(pgid, libc::SIGTERM);
        detail.push(format!("SIGTERM to process group {pgid}"));
        let grace_end = t0 + grace.as_nanos() as u64;
        if wait_group_gone(running, pgid, grace_end).await {
            StopHow::Sigterm
        } else {
            let left = group_members(pgid);
            signal_group(pgid, libc::SIGKILL);
            detail.push(format!(
                "still running after the {:.1} s grace: SIGKILL to the group ({} live: {left:?})",
                grace.as_secs_f64(),
                left.len()
            ));
            wait_group_gone(running, pgid, mono_ns() + 5_000_000_000).await;
            StopHow::Sigkill
        }
    };
    let remaining = group_members(pgid);
    if remaining.is_empty() {
        detail.push("no process of the group is left".into());
    } else {
        detail.push(format!("processes of the group still alive: {remaining:?}"));
    }
    finish_stop(running, how, t0, remaining.is_empty(), remaining, detail).await
}

/// The common end of every managed stop: time it, check the lane port is free, build the facts
/// (secrets masked). `remaining`: the arm's host processes still alive.
pub(crate) async fn finish_stop(
    running: &Running,
    how: StopHow,
    t0: u64,
    group_gone: bool,
    remaining: Vec<u32>,
    mut detail: Vec<String>,
) -> StopFacts {
    let took_ms = mono_ns().saturating_sub(t0) as f64 / 1e6;
    let free = port::wait_port_free(
        &running.target.host,
        running.target.port,
        Duration::from_secs(2),
    )
    .await;
    if !free {
        detail.push(format!(
            "port {}:{} still in use 2 s after the stop",
            running.target.host, running.target.port
        ));
    }
    StopFacts {
        how,
        exit: running.exit.clone(),
        took_ms,
        group_gone,
        remaining_pids: remaining,
        port_free: Some(free),
        detail: running.masker.mask(&detail.join("; ")),
        slurm_job: None,
    }
}

/// `[arms.process]`: a command bakeoff starts in its own process group and stops with SIGTERM
/// (SIGKILL after the lane's grace).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProcessRecipe {
    /// Program and arguments, one element each; never a shell string. After load, a relative
    /// program path containing `/` is absolute (resolved against `cwd`); other arguments are
    /// passed verbatim (no `$VAR` expansion) and a relative path among them is relative to `cwd`.
    pub argv: Vec<String>,
    /// Added to bakeoff's own environment.
    #[serde(default)]
    pub env: BTreeMap<String, EnvValue>,
    /// Working directory; default the campaign file's directory; absolute after load.
    #[serde(default)]
    pub cwd: PathBuf,
}

impl Recipe for ProcessRecipe {
    fn kind(&self) -> RecipeKind {
        RecipeKind::Process
    }

    fn env(&self) -> Option<&BTreeMap<String, EnvValue>> {
        Some(&self.env)
    }

    /// The argv and env as loaded, `cwd` set; `CUDA_VISIBLE_DEVICES` = the lane's GPU UUIDs is
    /// added when the lane has GPUs and the arm does not set it. Stopped as a process group.
    fn command(&self, at: &At) -> Option<LaunchCommand> {
        let mut cmd = CommandLine::new(self.argv.clone());
        cmd.env = self.env.clone();
        if !at.gpus.is_empty() && !cmd.env.contains_key("CUDA_VISIBLE_DEVICES") {
            cmd.env.insert(
                "CUDA_VISIBLE_DEVICES".into(),
                EnvValue::Literal(at.gpus.join(",")),
            );
        }
        cmd.cwd = Some(self.cwd.clone());
        Some(LaunchCommand {
            start: cmd,
            stop: StopMethod::ProcessGroup {
                grace_s: at.stop_grace_s,
            },
        })
    }

    fn named_files(&self) -> Named<'_> {
        Named::Command {
            argv: &self.argv,
            env: &self.env,
            cwd: &self.cwd,
        }
    }
}
