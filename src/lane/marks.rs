//! The durable marks of a launch, per kind: what the launch journal records about what a run
//! starts, before the launch (the container's name and labels, the Slurm job's name, uid and
//! submission time) and once it started (the process's pid, start time and argv; the Slurm job's
//! id and node). A later recovery finds the launch again from them (see [`super::adopt`] and
//! [`super::adopt_slurm`]).

use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// What a run records about a process it started, to find it again after the run died.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq, Default)]
pub struct ProcessMark {
    pub pid: u32,
    /// Its process group (the arm leads its own group: `pgid == pid`).
    pub pgid: u32,
    /// `/proc/<pid>/stat` field 22: when the process started, in clock ticks since boot.
    pub start_ticks: u64,
    /// `/proc/sys/kernel/random/boot_id` when it started (a reboot ends every process).
    pub boot_id: String,
    /// The argv it was started with, secrets shown as `***` (a `***` matches any text).
    pub argv: Vec<String>,
}

/// What a run records about a Slurm job it submits, to find it again after the run died.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq, Default)]
pub struct SlurmMark {
    /// The job name bakeoff gave it (`--job-name`).
    pub job_name: String,
    /// Slurm's job id, once sbatch answered (empty: the run died before it was recorded).
    #[serde(default)]
    pub job_id: String,
    /// The uid that submitted it (Slurm's `UserId=name(uid)`).
    pub uid: u32,
    /// Unix seconds just before the submission: the job's `SubmitTime` is no earlier.
    pub intent_unix: u64,
    /// The sbatch that submitted it (its directory holds scontrol, squeue and scancel).
    pub sbatch: String,
    /// The node it was placed on, when sbatch's answer already said so.
    #[serde(default)]
    pub node: Option<String>,
}

impl SlurmMark {
    /// The mark of a job about to be submitted by `sbatch` under `job_name`, by this process's user.
    pub fn intent(job_name: &str, sbatch: &str) -> SlurmMark {
        SlurmMark {
            job_name: job_name.to_string(),
            job_id: String::new(),
            // SAFETY: getuid only reads this process's user id.
            uid: unsafe { libc::getuid() },
            intent_unix: crate::clock::unix_secs(),
            sbatch: sbatch.to_string(),
            node: None,
        }
    }

    pub(super) fn tool(&self, name: &str) -> PathBuf {
        match Path::new(&self.sbatch)
            .parent()
            .filter(|d| !d.as_os_str().is_empty())
        {
            Some(d) => d.join(name),
            None => PathBuf::from(name),
        }
    }
}

/// A container the run started: found again by name, proven by its labels.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq, Default)]
pub struct ContainerMark {
    pub name: String,
    pub labels: BTreeMap<String, String>,
    /// The docker CLI that started it.
    pub docker: String,
}

/// The marks of one launch, as the journal entry holds them (flattened into it: the fields
/// `process`, `container`, `slurm`).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Default)]
pub struct Marks {
    #[serde(default)]
    pub process: Option<ProcessMark>,
    #[serde(default)]
    pub container: Option<ContainerMark>,
    /// A Slurm arm: the job name bakeoff gave, the uid and time of the submission, then the job
    /// id (found again by id, proven by name, user and submit time).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub slurm: Option<SlurmMark>,
}

/// Where the launch stands.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "kebab-case")]
pub enum State {
    /// Recorded before the launch; nothing known started yet.
    Starting,
    /// Started: its mark is recorded.
    Started,
    /// The launch failed (what it started, if anything, was cleaned up by the launch).
    LaunchFailed,
    /// Stopped by the run.
    Stopped,
    /// Stopped by a later `bakeoff recover` / `--resume` after the run died.
    StoppedByRecovery,
    /// Found gone by a later recovery.
    Gone,
}

/// The open launch as the journal recorded it.
pub struct Launch<'a> {
    /// Who it is, in words (`arm `a` (launch 2 of invocation 1)`).
    pub who: &'a str,
    /// The incumbent the restoration started: kept when it still serves.
    pub restored: bool,
    /// The argv recorded (secrets `***`).
    pub argv: &'a [String],
    /// The boot and clock tick just before the launch.
    pub boot_id: &'a str,
    pub intent_ticks: Option<u64>,
}

/// The lane the launch ran on, as the recovery needs it.
pub struct LaneFacts {
    pub port: u16,
    /// SIGTERM → SIGKILL (scancel) grace.
    pub grace: Duration,
    /// How long a restored incumbent may take to listen.
    pub ready_timeout: Duration,
}

/// What the recovery found of one launch and did about it.
#[derive(Debug, Default)]
pub struct Adopted {
    /// The launch's new state (none: unchanged).
    pub state: Option<State>,
    /// What was done, in words.
    pub words: String,
    /// What could not be proven the run's own and was left alone (with what to do).
    pub unproven: Vec<String>,
    /// Slurm jobs cancelled (their ids).
    pub cancelled_jobs: Vec<String>,
    /// A Slurm launch: what the proof and cancel found of each job.
    pub slurm_jobs: Option<Value>,
}

impl Adopted {
    pub(super) fn said(state: Option<State>, words: String) -> Adopted {
        Adopted {
            state,
            words,
            ..Default::default()
        }
    }
}
