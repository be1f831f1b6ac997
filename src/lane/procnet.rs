//! Who listens on the lane port (Linux `/proc`), and stopping a process bakeoff did not start.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// A process found listening on a TCP port.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Listener {
    pub pid: u32,
    pub pgid: Option<u32>,
    pub cmdline: Vec<String>,
    pub exe: Option<String>,
    pub cwd: Option<String>,
}

/// Socket inodes listening on `port` (any address), from `/proc/net/tcp` and `/proc/net/tcp6`.
fn listening_inodes(port: u16) -> Vec<u64> {
    let mut out = Vec::new();
    for f in ["/proc/net/tcp", "/proc/net/tcp6"] {
        let Ok(text) = std::fs::read_to_string(f) else {
            continue;
        };
        for line in text.lines().skip(1) {
            let cols: Vec<&str> = line.split_whitespace().collect();
            if cols.len() < 10 || cols[3] != "0A" {
                continue;
            }
            let Some(p) = cols[1].rsplit(':').next() else {
                continue;
            };
            if u16::from_str_radix(p, 16).ok() == Some(port) {
                if let Ok(inode) = cols[9].parse::<u64>() {
                    if inode != 0 {
                        out.push(inode);
                    }
                }
            }
        }
    }
    out
}

/// The processes holding a socket that listens on `port`, lowest pid first (a server that forked
/// workers shares the socket; the lowest pid is usually the parent).
pub fn find_listeners(port: u16) -> Vec<Listener> {
    let inodes = listening_inodes(port);
    if inodes.is_empty() {
        return Vec::new();
    }
    let wanted: Vec<String> = inodes.iter().map(|i| format!("socket:[{i}]")).collect();
    let mut pids = Vec::new();
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    for e in dir.flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|n| n.parse::<u32>().ok()) else {
            continue;
        };
        let Ok(fds) = std::fs::read_dir(format!("/proc/{pid}/fd")) else {
            continue;
        };
        let hit = fds.flatten().any(|fd| {
            std::fs::read_link(fd.path())
                .map(|l| wanted.iter().any(|w| l.as_os_str() == w.as_str()))
                .unwrap_or(false)
        });
        if hit {
            pids.push(pid);
        }
    }
    pids.sort_unstable();
    pids.into_iter().map(describe).collect()
}

/// cmdline, exe, cwd and process group of `pid`.
pub fn describe(pid: u32) -> Listener {
    let cmdline = std::fs::read(format!("/proc/{pid}/cmdline"))
        .map(|b| {
            b.split(|c| *c == 0)
                .filter(|s| !s.is_empty())
                .map(|s| String::from_utf8_lossy(s).into_owned())
                .collect()
        })
        .unwrap_or_default();
    let link = |what: &str| {
        std::fs::read_link(format!("/proc/{pid}/{what}"))
            .ok()
            .map(|p| p.display().to_string())
    };
    Listener {
        pid,
        pgid: stat_field(pid, 2).and_then(|s| s.parse().ok()),
        cmdline,
        exe: link("exe"),
        cwd: link("cwd"),
    }
}

/// Field `n` (0 = state) after the `(comm)` of `/proc/<pid>/stat`.
fn stat_field(pid: u32, n: usize) -> Option<String> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let rest = &stat[stat.rfind(')')? + 1..];
    rest.split_whitespace().nth(n).map(str::to_string)
}

/// The process is gone (no such pid, or a zombie / dead entry).
pub fn gone(pid: u32) -> bool {
    match stat_field(pid, 0) {
        None => true,
        Some(s) => s == "Z" || s == "X",
    }
}

/// The environment of `pid` (readable for processes of the same user).
pub fn environ(pid: u32) -> Option<Vec<(String, String)>> {
    let b = std::fs::read(format!("/proc/{pid}/environ")).ok()?;
    Some(
        b.split(|c| *c == 0)
            .filter(|s| !s.is_empty())
            .filter_map(|s| {
                let s = String::from_utf8_lossy(s);
                s.split_once('=')
                    .map(|(k, v)| (k.to_string(), v.to_string()))
            })
            .collect(),
    )
}

/// A path made canonical when it exists (relative ones against `cwd`).
fn canon(p: &str, cwd: Option<&Path>) -> PathBuf {
    let pb = PathBuf::from(p);
    let pb = match (pb.is_relative() && p.contains('/'), cwd) {
        (true, Some(c)) => c.join(pb),
        _ => pb,
    };
    std::fs::canonicalize(&pb).unwrap_or(pb)
}

/// Does `found` run `argv` (argv\[0\] compared as files, the rest exactly)? `self_exe`: argv\[0\]
/// stands for this bakeoff executable.
pub fn matches(found: &Listener, argv: &[String], self_exe: bool, cwd: Option<&Path>) -> bool {
    if found.cmdline.len() != argv.len() || argv.is_empty() {
        return false;
    }
    if found.cmdline[1..] != argv[1..] {
        return false;
    }
    if self_exe && same_file_as_self(found.pid) {
        return true;
    }
    let want = if self_exe {
        std::env::current_exe()
            .ok()
            .and_then(|p| std::fs::canonicalize(p).ok())
            .unwrap_or_default()
    } else {
        canon(&argv[0], cwd)
    };
    let fcwd = found.cwd.as_ref().map(PathBuf::from);
    let got = canon(&found.cmdline[0], fcwd.as_deref());
    if got == want || found.cmdline[0] == argv[0] {
        return true;
    }
    // An interpreter (a venv python) may show its resolved executable in cmdline.
    match (&found.exe, std::fs::canonicalize(&want).ok()) {
        (Some(exe), Some(w)) => Path::new(exe) == w,
        _ => false,
    }
}

/// Does process `pid` run this very executable? Compared by device and inode through the
/// `/proc/*/exe` links, which still resolve when the file was replaced on disk (a rebuild).
fn same_file_as_self(pid: u32) -> bool {
    use std::os::unix::fs::MetadataExt;
    let ours = std::fs::metadata("/proc/self/exe");
    let theirs = std::fs::metadata(format!("/proc/{pid}/exe"));
    match (ours, theirs) {
        (Ok(a), Ok(b)) => a.dev() == b.dev() && a.ino() == b.ino(),
        _ => false,
    }
}

/// What stopping a foreign process did.
#[derive(Debug, Clone, serde::Serialize)]
pub struct ForeignStop {
    /// `process-group` (it leads its group) or `pid`.
    pub target: String,
    pub sigterm_sent: bool,
    pub sigkill_sent: bool,
    pub gone: bool,
    pub took_ms: f64,
    pub remaining_pids: Vec<u32>,
}

/// SIGTERM to the process group `pid` leads (else to `pid` alone), SIGKILL after `grace`.
pub async fn stop_foreign(l: &Listener, grace: Duration) -> ForeignStop {
    let t0 = Instant::now();
    let group = l.pgid == Some(l.pid);
    let send = |sig: i32| -> bool {
        let target = if group {
            -(l.pid as libc::pid_t)
        } else {
            l.pid as libc::pid_t
        };
        // SAFETY: kill(2) only sends a signal.
        unsafe { libc::kill(target, sig) == 0 }
    };
    let alive = |l: &Listener| -> Vec<u32> {
        if group {
            crate::lane::process::group_members(l.pid)
        } else if gone(l.pid) {
            Vec::new()
        } else {
            vec![l.pid]
        }
    };
    let sigterm_sent = send(libc::SIGTERM);
    let mut sigkill_sent = false;
    loop {
        if alive(l).is_empty() {
            break;
        }
        if t0.elapsed() >= grace {
            if !sigkill_sent {
                sigkill_sent = send(libc::SIGKILL);
            } else if t0.elapsed() >= grace + Duration::from_secs(5) {
                break;
            }
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let remaining = alive(l);
    ForeignStop {
        target: if group { "process-group" } else { "pid" }.into(),
        sigterm_sent,
        sigkill_sent,
        gone: remaining.is_empty(),
        took_ms: t0.elapsed().as_secs_f64() * 1e3,
        remaining_pids: remaining,
    }
}
