//! What a dead bakeoff run left on the lane: the marks a run records about each process it
//! starts ([`ProcessMark`]: pid, process group, the process's start time from
//! `/proc/<pid>/stat` field 22, the boot it ran in, its argv), the proof that a process found
//! later is that very process ([`prove`]), and stopping its process group ([`stop_group`]).
//!
//! A pid alone proves nothing: after the run died its pid may have been given to anything. The
//! start time (clock ticks since boot) and the boot id together name one process for the life of
//! the machine; the argv guards against a mistaken record. Nothing is ever signalled without
//! that proof.

use super::process::group_members;
use serde::Serialize;
use std::time::{Duration, Instant};

pub use super::marks::ProcessMark;

/// What became of a recorded process.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Found {
    /// No process of it is left (exited, or the machine rebooted since).
    Gone(String),
    /// Proven the run's own: these live processes of its group.
    Own(Vec<u32>),
    /// Something else has the pid (or the proof failed): never touched. Why, in words.
    NotOurs(String),
}

/// This boot's id (empty where the kernel does not say).
pub fn boot_id() -> String {
    std::fs::read_to_string("/proc/sys/kernel/random/boot_id")
        .map(|s| s.trim().to_string())
        .unwrap_or_default()
}

/// Field `n` (1-based, as proc(5) numbers them) of `/proc/<pid>/stat`; `None` for a process
/// that does not exist.
fn stat_field(pid: u32, n: usize) -> Option<String> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let rest = &stat[stat.rfind(')')? + 1..];
    // Field 3 (state) is the first after `(comm)`.
    rest.split_whitespace()
        .nth(n.checked_sub(3)?)
        .map(str::to_string)
}

/// `/proc/<pid>/stat` field 22: start time in clock ticks since boot.
pub fn start_ticks(pid: u32) -> Option<u64> {
    stat_field(pid, 22)?.parse().ok()
}

/// Is `pid` a live process (not a zombie)?
fn alive(pid: u32) -> bool {
    stat_field(pid, 3).is_some_and(|s| s != "Z" && s != "X")
}

/// Now, in the clock ticks of [`start_ticks`] (from `/proc/uptime`).
pub fn now_ticks() -> Option<u64> {
    let up = std::fs::read_to_string("/proc/uptime").ok()?;
    let secs: f64 = up.split_whitespace().next()?.parse().ok()?;
    // SAFETY: sysconf only reads a system constant.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    let hz = if hz > 0 { hz as f64 } else { 100.0 };
    Some((secs * hz) as u64)
}

/// `/proc/<pid>/cmdline` as argv.
pub fn cmdline(pid: u32) -> Option<Vec<String>> {
    let b = std::fs::read(format!("/proc/{pid}/cmdline")).ok()?;
    Some(
        b.split(|c| *c == 0)
            .filter(|s| !s.is_empty())
            .map(|s| String::from_utf8_lossy(s).into_owned())
            .collect(),
    )
}

/// The mark of process `pid` just started with `argv` (shown as recorded: masked).
pub fn mark(pid: u32, argv: Vec<String>) -> ProcessMark {
    ProcessMark {
        pid,
        pgid: stat_field(pid, 5)
            .and_then(|s| s.parse().ok())
            .unwrap_or(pid),
        start_ticks: start_ticks(pid).unwrap_or(0),
        boot_id: boot_id(),
        argv,
    }
}

/// Does `actual` match the recorded `argv`? Element by element, exactly, except that each `***`
/// in a recorded element (a masked secret) matches any text.
pub fn argv_matches(recorded: &[String], actual: &[String]) -> bool {
    recorded.len() == actual.len() && recorded.iter().zip(actual).all(|(r, a)| masked_eq(r, a))
}

fn masked_eq(pattern: &str, text: &str) -> bool {
    let parts: Vec<&str> = pattern.split("***").collect();
    if parts.len() == 1 {
        return pattern == text;
    }
    let (first, last) = (parts[0], parts[parts.len() - 1]);
    if !text.starts_with(first) || text.len() < first.len() + last.len() || !text.ends_with(last) {
        return false;
    }
    let mut rest = &text[first.len()..text.len() - last.len()];
    for p in &parts[1..parts.len() - 1] {
        match rest.find(p) {
            Some(i) => rest = &rest[i + p.len()..],
            None => return false,
        }
    }
    true
}

/// Proves (or not) that the process `m` records is still there and is that process.
pub fn prove(m: &ProcessMark) -> Found {
    let boot = boot_id();
    if !m.boot_id.is_empty() && !boot.is_empty() && m.boot_id != boot {
        return Found::Gone(format!(
            "the machine rebooted since pid {} was started (boot {} then, {} now): nothing of it can be running",
            m.pid, m.boot_id, boot
        ));
    }
    let members = group_members(m.pgid);
    if !alive(m.pid) {
        // The leader is gone; its group can only hold processes it started (a group id is not
        // given to a new process while the group exists), each started no earlier than it.
        let own: Vec<u32> = members
            .iter()
            .copied()
            .filter(|&p| start_ticks(p).is_some_and(|t| t >= m.start_ticks))
            .collect();
        if own.is_empty() {
            return Found::Gone(format!(
                "pid {} has exited; no process of its group is left",
                m.pid
            ));
        }
        return Found::Own(own);
    }
    let now = start_ticks(m.pid).unwrap_or(0);
    let argv = cmdline(m.pid).unwrap_or_default();
    if now != m.start_ticks {
        return Found::NotOurs(format!(
            "pid {} is now another process (`{}`, started at tick {now}; the run's process started at tick {}): the pid was reused",
            m.pid,
            argv.join(" "),
            m.start_ticks
        ));
    }
    if !argv_matches(&m.argv, &argv) {
        return Found::NotOurs(format!(
            "pid {} started at the recorded time but runs `{}`, not the recorded `{}`",
            m.pid,
            argv.join(" "),
            m.argv.join(" ")
        ));
    }
    if members.is_empty() {
        Found::Own(vec![m.pid])
    } else {
        Found::Own(members)
    }
}

/// Group leaders started at or after `since_ticks` (this boot) running `argv`: what a run that
/// died between recording its intent and recording the pid may have started.
pub fn started_after(argv: &[String], since_ticks: u64) -> Vec<ProcessMark> {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for e in dir.flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|n| n.parse::<u32>().ok()) else {
            continue;
        };
        let pgid = stat_field(pid, 5).and_then(|s| s.parse::<u32>().ok());
        if pgid != Some(pid) || !alive(pid) {
            continue;
        }
        if start_ticks(pid).is_none_or(|t| t < since_ticks) {
            continue;
        }
        if cmdline(pid).is_some_and(|a| argv_matches(argv, &a)) {
            out.push(mark(pid, argv.to_vec()));
        }
    }
    out.sort_by_key(|m| m.pid);
    out
}

/// What stopping a proven group did.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct GroupStop {
    pub pgid: u32,
    pub sigterm_sent: bool,
    pub sigkill_sent: bool,
    pub gone: bool,
    pub remaining_pids: Vec<u32>,
    pub took_ms: f64,
}

/// Stops the process group `pgid` (SIGTERM, `grace`, SIGKILL) and waits until no live member is
/// left (5 s after the SIGKILL at most). Call only with a group [`prove`] found the run's own.
pub fn stop_group(pgid: u32, grace: Duration) -> GroupStop {
    let t0 = Instant::now();
    let send = |sig: i32| super::process::signal_group(pgid, sig);
    let sigterm_sent = send(libc::SIGTERM);
    let mut sigkill_sent = false;
    while !group_members(pgid).is_empty() {
        if t0.elapsed() >= grace {
            if !sigkill_sent {
                sigkill_sent = send(libc::SIGKILL);
            } else if t0.elapsed() >= grace + Duration::from_secs(5) {
                break;
            }
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let remaining = group_members(pgid);
    GroupStop {
        pgid,
        sigterm_sent,
        sigkill_sent,
        gone: remaining.is_empty(),
        remaining_pids: remaining,
        took_ms: t0.elapsed().as_secs_f64() * 1e3,
    }
}

/// The labels of container `name` as `docker` reports them; `None`: no such container.
pub fn container_labels(
    docker: &str,
    name: &str,
) -> Result<Option<std::collections::BTreeMap<String, String>>, String> {
    let o = std::process::Command::new(docker)
        .args(["inspect", "-f", "{{json .Config.Labels}}", name])
        .stdin(std::process::Stdio::null())
        .output()
        .map_err(|e| format!("cannot run `{docker} inspect`: {e}"))?;
    if !o.status.success() {
        let err = String::from_utf8_lossy(&o.stderr).to_lowercase();
        if err.contains("no such") {
            return Ok(None);
        }
        return Err(format!("`{docker} inspect {name}` failed: {}", err.trim()));
    }
    let text = String::from_utf8_lossy(&o.stdout);
    let v: serde_json::Value = serde_json::from_str(text.trim())
        .map_err(|e| format!("`{docker} inspect {name}` printed no labels ({e})"))?;
    Ok(Some(
        v.as_object()
            .map(|m| {
                m.iter()
                    .map(|(k, v)| (k.clone(), v.as_str().unwrap_or_default().to_string()))
                    .collect()
            })
            .unwrap_or_default(),
    ))
}

/// Proves container `name` is the run's own (every recorded label present with its value) and
/// removes it (`docker rm -f`).
pub fn adopt_container(
    docker: &str,
    name: &str,
    labels: &std::collections::BTreeMap<String, String>,
) -> Found {
    let have = match container_labels(docker, name) {
        Ok(None) => return Found::Gone(format!("no container named `{name}` exists")),
        Ok(Some(h)) => h,
        Err(e) => return Found::NotOurs(format!("cannot check container `{name}`: {e}")),
    };
    if let Some((k, v)) = labels.iter().find(|(k, v)| have.get(*k) != Some(*v)) {
        return Found::NotOurs(format!(
            "container `{name}` does not carry the run's label {k}={v} (it has {:?})",
            have.get(k)
        ));
    }
    let o = std::process::Command::new(docker)
        .args(["rm", "-f", name])
        .stdin(std::process::Stdio::null())
        .output();
    match o {
        Ok(o) if o.status.success() => Found::Own(Vec::new()),
        Ok(o) => Found::NotOurs(format!(
            "container `{name}` is the run's own but `{docker} rm -f` failed: {}",
            String::from_utf8_lossy(&o.stderr).trim()
        )),
        Err(e) => Found::NotOurs(format!("cannot run `{docker} rm -f {name}`: {e}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::process::CommandExt;

    #[test]
    fn a_container_is_removed_only_with_the_run_labels() {
        use std::collections::BTreeMap;
        let d = tempfile::tempdir().unwrap();
        let docker = d.path().join("docker");
        let log = d.path().join("calls");
        std::fs::write(
            &docker,
            format!(
                "#!/bin/sh\necho \"$@\" >> {}\ncase \"$1 $4\" in\n  'inspect mine') echo '{{\"bakeoff.arm\":\"a\",\"x\":\"y\"}}' ;;\n  'inspect theirs') echo '{{\"other\":\"1\"}}' ;;\n  inspect*) echo 'Error: No such object' >&2; exit 1 ;;\nesac\n",
                log.display()
            ),
        )
        .unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&docker, std::fs::Permissions::from_mode(0o755)).unwrap();
        let docker = docker.display().to_string();
        let want: BTreeMap<String, String> = [("bakeoff.arm".to_string(), "a".to_string())].into();
        assert_eq!(adopt_container(&docker, "mine", &want), Found::Own(vec![]));
        assert!(matches!(
            adopt_container(&docker, "theirs", &want),
            Found::NotOurs(_)
        ));
        assert!(matches!(
            adopt_container(&docker, "gone", &want),
            Found::Gone(_)
        ));
        let calls = std::fs::read_to_string(&log).unwrap();
        assert!(calls.contains("rm -f mine"), "{calls}");
        assert!(!calls.contains("rm -f theirs"), "{calls}");
    }

    #[test]
    fn masked_argv_matches_any_secret() {
        let s = |v: &[&str]| v.iter().map(|x| x.to_string()).collect::<Vec<_>>();
        assert!(argv_matches(
            &s(&["a", "--key=***"]),
            &s(&["a", "--key=xyz"])
        ));
        assert!(argv_matches(&s(&["a", "***"]), &s(&["a", "anything"])));
        assert!(!argv_matches(
            &s(&["a", "--key=***"]),
            &s(&["a", "--kex=xyz"])
        ));
        assert!(!argv_matches(&s(&["a"]), &s(&["a", "b"])));
        assert!(argv_matches(&s(&["x***y***z"]), &s(&["x1y2z"])));
        assert!(!argv_matches(&s(&["x***y***z"]), &s(&["x1z"])));
    }

    #[test]
    fn a_live_process_is_proven_and_a_reused_pid_is_not() {
        let mut child = std::process::Command::new("sleep")
            .arg("30")
            .process_group(0)
            .spawn()
            .unwrap();
        let pid = child.id();
        // Between fork and exec the child's cmdline is not yet `sleep 30`; a proof taken in that
        // instant would rightly refuse it. Recovery proves long after launch; the test waits.
        let cmdline = format!("/proc/{pid}/cmdline");
        let deadline = std::time::Instant::now() + Duration::from_secs(5);
        while std::fs::read(&cmdline).unwrap_or_default() != b"sleep\x0030\x00" {
            assert!(
                std::time::Instant::now() < deadline,
                "sleep 30 never exec'd"
            );
            std::thread::sleep(Duration::from_millis(5));
        }
        let m = mark(pid, vec!["sleep".into(), "30".into()]);
        assert_eq!(m.pgid, pid);
        assert!(m.start_ticks > 0);
        assert_eq!(prove(&m), Found::Own(vec![pid]));
        // The same pid with another start time: another process.
        let other = ProcessMark {
            start_ticks: m.start_ticks + 1,
            ..m.clone()
        };
        assert!(matches!(prove(&other), Found::NotOurs(w) if w.contains("reused")));
        // Another argv: not proven.
        let other = ProcessMark {
            argv: vec!["sleep".into(), "31".into()],
            ..m.clone()
        };
        assert!(matches!(prove(&other), Found::NotOurs(_)));
        assert_eq!(
            started_after(&m.argv, m.start_ticks)
                .iter()
                .map(|x| x.pid)
                .collect::<Vec<_>>(),
            vec![pid]
        );
        // Recorded in another boot (the machine rebooted since): gone, whatever has the pid now.
        let other = ProcessMark {
            boot_id: "another-boot".into(),
            ..m.clone()
        };
        assert!(matches!(prove(&other), Found::Gone(w) if w.contains("rebooted")));
        let st = stop_group(m.pgid, Duration::from_secs(2));
        let _ = child.wait();
        assert!(st.gone && st.sigterm_sent, "{st:?}");
        assert!(matches!(prove(&m), Found::Gone(_)));
    }
}
