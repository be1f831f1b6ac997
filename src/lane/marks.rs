//! The durable marks of a launch, per kind: what the launch journal records about what a run
//! starts, before the launch (the container's name and labels, the Slurm job's name, uid and
//! submission time) and once it started (the process's pid, start time and argv; the Slurm job's
//! id and node). A later recovery finds the launch again from them (see [`super::adopt`] and
//! [`super::adopt_slurm`]).

use super::adopt::ProcessMark;
use super::adopt_slurm::SlurmMark;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

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
