//! `slurm-allocation.json` (docs/fleet.md "K lanes from Slurm"): the holder job a `[fleet.slurm]`
//! run asked Slurm for, the nodes Slurm granted and the lane each node became. Written and synced
//! at the top of the bundle before any arm starts (a crash after it leaves the job id for
//! `bakeoff recover` to cancel); copied into `campaign-result.json` (`slurm_allocation`).

use super::bundle::SLURM_ALLOCATION;
use serde::{Deserialize, Serialize};
use std::path::Path;

#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct SlurmAllocation {
    /// The holder job's id, and its name (`bakeoff-fleet-<campaign>`): a recovery cancels the
    /// job only when Slurm still gives it that name.
    pub job_id: String,
    pub job_name: String,
    /// The request as submitted (sbatch's argv).
    pub request: Vec<String>,
    /// The nodes Slurm granted, in `scontrol show hostnames` order.
    pub nodes: Vec<String>,
    /// Each granted lane and its node, in lane order.
    pub lanes: Vec<GrantedLane>,
    /// When Slurm ran the holder (RFC 3339), and how long the request pended, in seconds.
    pub granted_at: String,
    pub pending_s: f64,
    /// Which invocation asked for it (1 the run, then each `--resume`: a fresh allocation).
    pub invocation: u32,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct GrantedLane {
    pub lane: String,
    pub node: String,
}

/// Writes the record at the top of `bundle` (atomic and synced).
pub fn write(bundle: &Path, a: &SlurmAllocation) -> anyhow::Result<()> {
    let t = serde_json::to_string_pretty(a)? + "\n";
    super::write_atomic(&bundle.join(SLURM_ALLOCATION), t.as_bytes())
}

/// The bundle's record; None when it has none. Err: it is there and cannot be read.
pub fn read(bundle: &Path) -> Result<Option<SlurmAllocation>, String> {
    let p = bundle.join(SLURM_ALLOCATION);
    match std::fs::read(&p) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(format!("cannot read {}: {e}", p.display())),
        Ok(b) => serde_json::from_slice(&b)
            .map(Some)
            .map_err(|e| format!("{} is not an allocation record: {e}", p.display())),
    }
}
