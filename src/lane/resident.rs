//! The lane record: what serves a lane, durably, beside its lane lock
//! (`lane-<host>-<port>.record.json` in [`super::lock::lock_dir`]).
//!
//! Written (atomically: temp file, fsync, rename, directory fsync) by a campaign whose
//! restoration proved its incumbent back, and by a promotion (the winner kept, the incumbent
//! rolled back, or the rollback failed). `bakeoff lane status [PORT]` prints it.
//!
//! A record is *current* while the process it names still runs (same pid and start time, same
//! boot) or while it says a rollback failed: a record whose process is gone says what served
//! once, not what serves now, and refuses nothing (a lane port reused by an unrelated run must
//! not inherit an old record's refusal).

use super::adopt;
use super::lock::lock_dir;
use super::marks::ProcessMark;
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

/// What serves the lane.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Default)]
pub struct Resident {
    /// The arm id in the campaign that put it there.
    pub arm: String,
    pub served_model: String,
    /// `process`, `reference`, `container`, `slurm`.
    pub kind: String,
    /// The recipe's hash and the argv/env hash of its command (the campaign's own identities).
    pub recipe_hash: String,
    pub argv_env_hash: String,
    /// The digests of the files and environment the recipe names (a campaign fingerprint).
    #[serde(default)]
    pub fingerprint: serde_json::Value,
    /// The serving process, as proven when the record was written (none: not a local process).
    #[serde(default)]
    pub process: Option<ProcessMark>,
    /// The container or Slurm job name, where the kind has one.
    #[serde(default)]
    pub name: Option<String>,
}

/// Who wrote the record.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Default)]
pub struct SetBy {
    /// `campaign` (its restoration) or `promotion`.
    pub kind: String,
    /// The campaign id (a promotion: the campaign whose verdict it acted on).
    pub id: String,
    /// The bundle or promotion folder.
    pub dir: PathBuf,
}

/// The lane's state.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Default)]
#[serde(rename_all = "kebab-case")]
pub enum LaneState {
    /// `resident` serves the lane, proven when the record was written.
    #[default]
    Serving,
    /// A promotion's rollback failed: nothing proven serves the lane. Every `run` and `promote`
    /// on this lane is refused until `bakeoff lane resolve` proves the resident serves again.
    RollbackFailed,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Default)]
pub struct LaneRecord {
    pub host: String,
    pub port: u16,
    pub state: LaneState,
    pub resident: Resident,
    /// Wall clock when `resident` was put in service (or the rollback failed).
    pub since: String,
    pub set_by: SetBy,
    /// A failed rollback: why, and the commands that start the resident again by hand.
    #[serde(default)]
    pub detail: String,
    #[serde(default)]
    pub restart: Vec<String>,
    /// The previous record's one-line summary (what served before this one).
    #[serde(default)]
    pub previous: Option<String>,
}

/// The record file of a lane (beside its lock file).
pub fn record_path(dir: &Path, host: &str, port: u16) -> PathBuf {
    let lock = super::lock::lock_path(dir, host, port);
    lock.with_extension("record.json")
}

impl LaneRecord {
    /// One line: what serves, since when, set by whom.
    pub fn summary(&self) -> String {
        let r = &self.resident;
        match self.state {
            LaneState::Serving => format!(
                "`{}` (model {}, {} recipe {}) serves lane {}:{} since {}, set by {} `{}` ({})",
                r.arm,
                r.served_model,
                r.kind,
                short(&r.recipe_hash),
                self.host,
                self.port,
                self.since,
                self.set_by.kind,
                self.set_by.id,
                self.set_by.dir.display()
            ),
            LaneState::RollbackFailed => format!(
                "ROLLBACK FAILED on lane {}:{} at {}: `{}` was to be restored and is not proven serving ({}); set by {} {}",
                self.host,
                self.port,
                self.since,
                r.arm,
                self.detail,
                self.set_by.kind,
                self.set_by.dir.display()
            ),
        }
    }

    /// Does the process the record names still run (same boot, pid and start time; a zombie
    /// waiting to be reaped does not)?
    pub fn process_alive(&self) -> bool {
        let Some(m) = &self.resident.process else {
            return false;
        };
        m.boot_id == adopt::boot_id()
            && !super::procnet::gone(m.pid)
            && adopt::start_ticks(m.pid).is_some_and(|t| t == m.start_ticks)
    }

    /// Does the record still say something about the lane now? (see the module comment)
    pub fn current(&self) -> bool {
        self.state == LaneState::RollbackFailed || self.process_alive()
    }
}

fn short(h: &str) -> &str {
    &h[..h.len().min(12)]
}

/// Reads the lane's record from the lock directory (None: no record).
pub fn read(host: &str, port: u16) -> Result<Option<LaneRecord>, String> {
    read_in(&lock_dir(), host, port)
}

pub fn read_in(dir: &Path, host: &str, port: u16) -> Result<Option<LaneRecord>, String> {
    let p = record_path(dir, host, port);
    match std::fs::read(&p) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(format!("cannot read the lane record {}: {e}", p.display())),
        Ok(b) => serde_json::from_slice(&b).map(Some).map_err(|e| {
            format!(
                "the lane record {} is not valid ({e}); move it aside once you know what serves the lane",
                p.display()
            )
        }),
    }
}

/// Writes the lane's record atomically, keeping the summary of the one it replaces.
pub fn write(mut rec: LaneRecord) -> Result<PathBuf, String> {
    write_in(&lock_dir(), &mut rec)
}

pub fn write_in(dir: &Path, rec: &mut LaneRecord) -> Result<PathBuf, String> {
    let p = record_path(dir, &rec.host, rec.port);
    if rec.previous.is_none() {
        rec.previous = read_in(dir, &rec.host, rec.port)
            .ok()
            .flatten()
            .map(|r| r.summary());
    }
    let bytes = serde_json::to_vec_pretty(rec).map_err(|e| e.to_string())?;
    crate::evidence::write_atomic(&p, &bytes)
        .map_err(|e| format!("cannot write the lane record {}: {e:#}", p.display()))?;
    Ok(p)
}

/// The process mark of `pid` for a record (its start time and boot; `argv` with secrets masked).
pub fn mark_of(pid: u32, argv: Vec<String>) -> ProcessMark {
    adopt::mark(pid, argv)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(pid: u32) -> LaneRecord {
        LaneRecord {
            host: "127.0.0.1".into(),
            port: 9,
            resident: Resident {
                arm: "inc".into(),
                process: Some(mark_of(pid, vec![])),
                ..Default::default()
            },
            since: "now".into(),
            ..Default::default()
        }
    }

    #[test]
    fn a_record_is_current_while_its_process_runs_and_keeps_what_came_before() {
        let d = tempfile::tempdir().unwrap();
        assert!(read_in(d.path(), "localhost", 9).unwrap().is_none());
        let mut r = rec(std::process::id());
        assert!(r.current(), "this test's own process runs");
        write_in(d.path(), &mut r).unwrap();
        let back = read_in(d.path(), "127.0.0.1", 9).unwrap().unwrap();
        assert_eq!(back.resident.arm, "inc");
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let pid = child.id();
        let mut dead = rec(pid);
        child.wait().unwrap();
        dead.resident.arm = "other".into();
        assert!(
            !dead.current(),
            "a record of a process that ended refuses nothing"
        );
        write_in(d.path(), &mut dead).unwrap();
        let back = read_in(d.path(), "localhost", 9).unwrap().unwrap();
        assert!(back.previous.unwrap().contains("`inc`"));
        dead.state = LaneState::RollbackFailed;
        assert!(dead.current(), "a failed rollback stays until resolved");
    }
}
