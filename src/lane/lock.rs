//! The lane lock: one campaign per lane at a time.
//!
//! An OS lock (`flock`, exclusive, non-blocking) on a file named after the lane's host and port
//! in a well-known directory: `$BAKEOFF_LOCK_DIR`, else `$XDG_RUNTIME_DIR/bakeoff`, else
//! `/tmp/bakeoff-lanes` (created mode 0700, and refused when it is a link or another user's). The
//! file holds the holder's pid, campaign id and bundle path, so a refused run can name it.
//!
//! The kernel drops an `flock` when its holder dies (SIGKILL, OOM killer, reboot), so a lock file
//! naming a dead process is free: the next run takes it over and says so ([`LaneLock::took_over`]).
//! The descriptor is close-on-exec: engines the run starts never inherit the lock.

use serde::{Deserialize, Serialize};
use std::fs::{File, OpenOptions};
use std::io::{Read, Seek, SeekFrom, Write};
use std::os::fd::AsRawFd;
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

/// What a lock file says about its holder.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Default)]
pub struct Holder {
    pub pid: u32,
    pub campaign_id: String,
    pub bundle: PathBuf,
    #[serde(default)]
    pub started_at: String,
}

impl Holder {
    pub fn describe(&self) -> String {
        format!(
            "pid {}, campaign `{}`, bundle {}{}",
            self.pid,
            self.campaign_id,
            self.bundle.display(),
            if self.started_at.is_empty() {
                String::new()
            } else {
                format!(", since {}", self.started_at)
            }
        )
    }
}

/// A held lane lock; dropping it (or the process ending) releases the lane.
#[derive(Debug)]
pub struct LaneLock {
    file: File,
    path: PathBuf,
    took_over: Option<Holder>,
}

/// The directory lane locks live in (see the module comment).
pub fn lock_dir() -> PathBuf {
    if let Some(d) = std::env::var_os("BAKEOFF_LOCK_DIR").filter(|d| !d.is_empty()) {
        return PathBuf::from(d);
    }
    if let Some(d) = std::env::var_os("XDG_RUNTIME_DIR").filter(|d| !d.is_empty()) {
        return PathBuf::from(d).join("bakeoff");
    }
    PathBuf::from("/tmp/bakeoff-lanes")
}

/// The lock file of a lane. Loopback and unspecified addresses of this machine are one lane per
/// port (`127.0.0.1`, `localhost`, `0.0.0.0`, `::1` and `::` all bind the same port).
pub fn lock_path(dir: &Path, host: &str, port: u16) -> PathBuf {
    let h = host.trim_matches(|c| c == '[' || c == ']');
    let h = if matches!(h, "127.0.0.1" | "localhost" | "0.0.0.0" | "::1" | "::") {
        "local".to_string()
    } else {
        h.chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || c == '.' || c == '-' {
                    c
                } else {
                    '_'
                }
            })
            .collect()
    };
    dir.join(format!("lane-{h}-{port}.lock"))
}

fn prepare_dir(dir: &Path) -> Result<(), String> {
    let fix = "set BAKEOFF_LOCK_DIR to a directory of your own";
    match std::fs::symlink_metadata(dir) {
        Err(_) => {
            std::fs::DirBuilder::new()
                .recursive(true)
                .mode(0o700)
                .create(dir)
                .map_err(|e| {
                    format!(
                        "cannot create the lane-lock directory {}: {e}; {fix}",
                        dir.display()
                    )
                })?;
            Ok(())
        }
        Ok(m) if !m.is_dir() => Err(format!(
            "the lane-lock directory {} is not a directory (a link or a file); remove it or {fix}",
            dir.display()
        )),
        // SAFETY: geteuid has no preconditions.
        Ok(m) if m.uid() != unsafe { libc::geteuid() } => Err(format!(
            "the lane-lock directory {} belongs to another user (uid {}); {fix}",
            dir.display(),
            m.uid()
        )),
        Ok(_) => Ok(()),
    }
}

fn read_holder(f: &mut File) -> Option<Holder> {
    let mut s = String::new();
    f.seek(SeekFrom::Start(0)).ok()?;
    f.read_to_string(&mut s).ok()?;
    serde_json::from_str(&s).ok()
}

fn pid_alive(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Err(_) => false,
        Ok(s) => !matches!(
            s.rfind(')')
                .and_then(|i| s[i + 1..].trim_start().chars().next()),
            Some('Z') | Some('X')
        ),
    }
}

impl LaneLock {
    /// Takes the lane's lock for `holder`, or says who holds it (one line).
    pub fn acquire(host: &str, port: u16, holder: &Holder) -> Result<LaneLock, String> {
        Self::acquire_in(&lock_dir(), host, port, holder)
    }

    pub fn acquire_in(
        dir: &Path,
        host: &str,
        port: u16,
        holder: &Holder,
    ) -> Result<LaneLock, String> {
        prepare_dir(dir)?;
        let path = lock_path(dir, host, port);
        let mut file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .mode(0o600)
            .custom_flags(libc::O_NOFOLLOW)
            .open(&path)
            .map_err(|e| {
                format!(
                    "cannot open the lane lock {}: {e}; set BAKEOFF_LOCK_DIR to a directory of your own",
                    path.display()
                )
            })?;
        // SAFETY: flock on a descriptor this function owns.
        let rc = unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) };
        if rc != 0 {
            let err = std::io::Error::last_os_error();
            if err.raw_os_error() == Some(libc::EWOULDBLOCK) {
                let who = read_holder(&mut file)
                    .map(|h| h.describe())
                    .unwrap_or_else(|| "a process that has not written its name yet".into());
                return Err(format!(
                    "lane {host}:{port} is held by another bakeoff run ({who}; lock {}); wait for it to finish or give this campaign another lane",
                    path.display()
                ));
            }
            return Err(format!("cannot lock {}: {err}", path.display()));
        }
        let previous = read_holder(&mut file).filter(|h| h.pid != std::process::id());
        let took_over = previous.filter(|h| h.pid != 0 && !pid_alive(h.pid));
        let text = serde_json::to_string_pretty(holder).unwrap_or_default() + "\n";
        let w = (|| -> std::io::Result<()> {
            file.set_len(0)?;
            file.seek(SeekFrom::Start(0))?;
            file.write_all(text.as_bytes())?;
            file.sync_all()
        })();
        if let Err(e) = w {
            return Err(format!(
                "cannot write the lane lock {}: {e}",
                path.display()
            ));
        }
        let _ = std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600));
        Ok(LaneLock {
            file,
            path,
            took_over,
        })
    }

    /// The holder of a stale lock (its process dead) this lock replaced.
    pub fn took_over(&self) -> Option<&Holder> {
        self.took_over.as_ref()
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// A line for the bundle: which lock this run holds, and any stale holder it replaced.
    pub fn note(&self) -> Option<String> {
        self.took_over.as_ref().map(|h| {
            format!(
                "lane lock {}: took over a stale lock of a run that is no longer running ({})",
                self.path.display(),
                h.describe()
            )
        })
    }
}

impl Drop for LaneLock {
    fn drop(&mut self) {
        // A lock released on a clean exit names nobody (a stale name means a run that died).
        let _ = self.file.set_len(0);
        // SAFETY: unlocks the descriptor this lock owns (closing it would as well).
        unsafe {
            libc::flock(self.file.as_raw_fd(), libc::LOCK_UN);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn holder(id: &str) -> Holder {
        Holder {
            pid: std::process::id(),
            campaign_id: id.into(),
            bundle: PathBuf::from("/b"),
            started_at: "now".into(),
        }
    }

    #[test]
    fn a_second_holder_is_refused_with_the_first_named() {
        let d = tempfile::tempdir().unwrap();
        let dir = d.path().join("locks");
        let a = LaneLock::acquire_in(&dir, "127.0.0.1", 8000, &holder("first")).unwrap();
        let mode = std::fs::metadata(&dir).unwrap().mode() & 0o777;
        assert_eq!(mode, 0o700);
        // localhost is the same lane.
        let e = LaneLock::acquire_in(&dir, "localhost", 8000, &holder("second")).unwrap_err();
        assert!(e.contains("campaign `first`"), "{e}");
        assert!(e.contains(&format!("pid {}", std::process::id())), "{e}");
        // Another port is another lane.
        let c = LaneLock::acquire_in(&dir, "127.0.0.1", 8001, &holder("third")).unwrap();
        drop(a);
        let b = LaneLock::acquire_in(&dir, "127.0.0.1", 8000, &holder("second")).unwrap();
        assert!(b.took_over().is_none(), "a released lock is not stale");
        drop((b, c));
    }

    #[test]
    fn a_stale_lock_of_a_dead_process_is_taken_over_and_said() {
        let d = tempfile::tempdir().unwrap();
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let dead = child.id();
        child.wait().unwrap();
        let stale = Holder {
            pid: dead,
            campaign_id: "dead-run".into(),
            bundle: PathBuf::from("/old"),
            started_at: String::new(),
        };
        std::fs::write(
            lock_path(d.path(), "127.0.0.1", 9),
            serde_json::to_string(&stale).unwrap(),
        )
        .unwrap();
        let l = LaneLock::acquire_in(d.path(), "127.0.0.1", 9, &holder("new")).unwrap();
        assert_eq!(l.took_over(), Some(&stale));
        assert!(l.note().unwrap().contains("dead-run"));
    }

    #[test]
    fn a_lock_dir_that_is_a_link_is_refused() {
        let d = tempfile::tempdir().unwrap();
        let link = d.path().join("l");
        std::os::unix::fs::symlink(d.path(), &link).unwrap();
        let e = LaneLock::acquire_in(&link, "127.0.0.1", 9, &holder("x")).unwrap_err();
        assert!(e.contains("not a directory"), "{e}");
    }
}
