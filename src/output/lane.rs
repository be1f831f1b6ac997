//! `bakeoff lane status --json`: `bakeoff.lane-status/1`, each lane's record as bakeoff last
//! proved it.

use serde::Serialize;

#[derive(Debug, Clone, Serialize)]
pub struct LaneStatusDoc {
    pub schema: &'static str,
    pub exit_code: u8,
    /// Where the lane records were read (`BAKEOFF_LOCK_DIR` or its default).
    pub lock_dir: String,
    /// Every lane with a record, or the one asked for; empty when none has one.
    pub lanes: Vec<LaneEntry>,
}

#[derive(Debug, Clone, Serialize)]
pub struct LaneEntry {
    /// The record file's content, as written when a campaign restored its incumbent or a
    /// promotion ended.
    pub record: serde_json::Value,
    /// The recorded process still runs (None: no process recorded).
    pub process_alive: Option<bool>,
    /// The record in one line, as the terminal output's.
    pub summary: String,
    /// The lane is marked rollback-failed (`record.state`).
    #[serde(skip)]
    pub marked: bool,
}

impl LaneStatusDoc {
    pub const SCHEMA: &'static str = "bakeoff.lane-status/1";

    pub fn new(lock_dir: String, lanes: Vec<LaneEntry>) -> Self {
        LaneStatusDoc {
            schema: Self::SCHEMA,
            exit_code: if lanes.iter().any(|l| l.marked) {
                super::exit::ROLLBACK_FAILED
            } else {
                super::exit::DONE
            },
            lock_dir,
            lanes,
        }
    }
}
