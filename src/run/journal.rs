//! The launch journal (`launch-journal.json`): before anything is started on the lane (an arm,
//! its relaunch, the restored incumbent) the run records what it is about to start; once it
//! started, its pid, process group, start time and argv (or container name and labels; or the
//! Slurm job's name, submitting uid and, once sbatch answered, its id); once
//! stopped, that. Every change is written and synced (file and directory) by the recorder
//! before the run goes on, so a run killed at any point leaves a journal that names everything
//! it may have left running (see [`super::recover`]).

use crate::lane::adopt;
use crate::lane::marks::Marks;
pub use crate::lane::marks::State;
use crate::lane::{LaneSpec, LaunchSpec, Running};
use serde::{Deserialize, Serialize};

/// Why something was started.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "kebab-case")]
pub enum Purpose {
    /// An arm's planned launch.
    Arm,
    /// An arm resumed half way, launched again.
    Relaunch,
    /// The incumbent started again by the restoration (it outlives the run).
    RestoreIncumbent,
}

/// One launch.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Entry {
    pub seq: u32,
    pub invocation: u32,
    pub arm: String,
    pub purpose: Purpose,
    pub state: State,
    /// `process`, `container`, `reference`.
    pub kind: String,
    /// What is started (secrets `***`).
    pub argv: Vec<String>,
    /// Wall clock of the intent, and of the last change.
    pub recorded_at: String,
    #[serde(default)]
    pub updated_at: String,
    /// The boot and the clock tick (as `/proc/<pid>/stat` field 22 counts) just before the launch:
    /// a process started with this argv at or after it, in this boot, is this launch.
    pub boot_id: String,
    pub intent_ticks: Option<u64>,
    /// What this kind of launch records to be found again (`process`, `container`, `slurm`).
    #[serde(flatten)]
    pub marks: Marks,
    /// What a recovery did about it.
    #[serde(default)]
    pub recovery: Option<String>,
}

impl Entry {
    /// Could it still be running? (not stopped, failed or found gone)
    pub fn open(&self) -> bool {
        matches!(self.state, State::Starting | State::Started)
    }
}

/// Whoever keeps a launch journal durable: the run's recorder and a promotion's folder. Both
/// record before they act the same way; each says only how it writes the file.
pub trait Journaled {
    fn journal_mut(&mut self) -> &mut Journal;
    /// The invocation entries are recorded under (a run counts its resumes; a promotion is 1).
    fn invocation(&self) -> u32;
    /// Writes `launch-journal.json` atomically and synced.
    fn save_journal(&mut self) -> anyhow::Result<()>;

    /// Records, durably, that `spec` is about to be started for `arm`; the entry's index. An
    /// error: the intent could not be written (nothing should be started then).
    fn journal_intent(
        &mut self,
        arm: &str,
        purpose: Purpose,
        spec: &LaunchSpec,
        lane: &LaneSpec,
    ) -> anyhow::Result<usize> {
        let inv = self.invocation();
        let i = self.journal_mut().intent(inv, arm, purpose, spec, lane);
        self.save_journal().map(|_| i)
    }

    /// Records, durably, what entry `i` started (pid, group, start time; or the container). A
    /// failed write is the writer's to report: what runs must still be stopped.
    fn journal_started(&mut self, i: usize, r: &Running) {
        self.journal_mut().started(i, r);
        let _ = self.save_journal();
    }

    /// Records, durably, a new state of entry `i`.
    fn journal_set(&mut self, i: usize, state: State) {
        self.journal_mut().set(i, state);
        let _ = self.save_journal();
    }
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Default)]
pub struct Journal {
    pub entries: Vec<Entry>,
}

impl Journal {
    /// Records the intent to start `spec` for `arm`; returns its index.
    pub fn intent(
        &mut self,
        invocation: u32,
        arm: &str,
        purpose: Purpose,
        spec: &LaunchSpec,
        lane: &LaneSpec,
    ) -> usize {
        let masker = spec.masker();
        let now = crate::clock::wall_rfc3339();
        self.entries.push(Entry {
            seq: self.entries.len() as u32 + 1,
            invocation,
            arm: arm.to_string(),
            purpose,
            state: State::Starting,
            kind: spec.kind().to_string(),
            argv: spec.argv(lane).iter().map(|a| masker.mask(a)).collect(),
            recorded_at: now.clone(),
            updated_at: now,
            boot_id: adopt::boot_id(),
            intent_ticks: adopt::now_ticks(),
            marks: spec.intent_marks(),
            recovery: None,
        });
        self.entries.len() - 1
    }

    /// Records what entry `i` started.
    pub fn started(&mut self, i: usize, r: &Running) {
        let Some(e) = self.entries.get_mut(i) else {
            return;
        };
        e.state = State::Started;
        e.updated_at = crate::clock::wall_rfc3339();
        r.record_started(&mut e.marks, &e.argv);
    }

    pub fn set(&mut self, i: usize, state: State) {
        if let Some(e) = self.entries.get_mut(i) {
            e.state = state;
            e.updated_at = crate::clock::wall_rfc3339();
        }
    }
}
