//! `[fleet.slurm]` at run start and end (docs/fleet.md "K lanes from Slurm"): the request for K
//! nodes submitted and waited for, each granted node made the node of a lane `slurm-<n>`, the
//! allocation held for the run and cancelled on every path out (the run's end, an error, a
//! signal; after a crash, `bakeoff recover` from the bundle's `slurm-allocation.json`).

use crate::campaign::{Campaign, FleetSlurm};
use crate::evidence::allocation::{GrantedLane, SlurmAllocation};
use crate::lane::slurm_alloc::{self, Wait};
use std::time::{Duration, Instant};

/// The allocation held for a run: cancelled when dropped, so an error or a panic between the
/// grant and the run's end gives the nodes back too; [`Held::release`] is the run's own end.
pub struct Held {
    pub record: SlurmAllocation,
    released: bool,
}

impl Held {
    /// Cancels the holder job now: the line to say, or why Slurm did not take it back.
    pub fn release(mut self) -> Result<String, String> {
        self.released = true;
        let a = &self.record;
        slurm_alloc::release(&a.job_id, &a.job_name).map(|_| {
            format!(
                "Slurm allocation {} ({}) given back (scancel {})",
                a.job_id,
                a.nodes.join(", "),
                a.job_id
            )
        })
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        if !self.released {
            let _ = slurm_alloc::release(&self.record.job_id, &self.record.job_name);
        }
    }
}

/// Why the run got no lanes from Slurm.
#[derive(Debug)]
pub enum NoLanes {
    /// Slurm refused or did not grant the request in time (exit 2): what Slurm said, the fix.
    Refused(String),
    /// A signal came while the request pended (exit 130); the request was cancelled.
    Signal,
}

/// Asks Slurm for the campaign's `[fleet.slurm]` nodes and waits for them (at most its
/// `pending_timeout_s`; `cancelled` ends the wait). The campaign comes back with each granted
/// lane's node set, and the allocation held. Without `[fleet.slurm]`: unchanged, nothing held.
/// `prev` (a resume): the dead run's allocation, cancelled first if Slurm still holds it.
pub async fn obtain(
    mut c: Campaign,
    prev: Option<&SlurmAllocation>,
    cancelled: impl Fn() -> bool,
) -> Result<(Campaign, Option<Held>), NoLanes> {
    let (Some(s), Some(argv)) = (
        c.fleet_table.as_ref().and_then(|t| t.grant.clone()),
        c.slurm_request(),
    ) else {
        return Ok((c, None));
    };
    if let Some(p) = prev {
        slurm_alloc::release(&p.job_id, &p.job_name).map_err(NoLanes::Refused)?;
    }
    let t0 = Instant::now();
    let job = slurm_alloc::submit(&argv).map_err(|e| NoLanes::Refused(refused(&s, &e)))?;
    let mut held = Held {
        record: SlurmAllocation {
            job_id: job.clone(),
            job_name: FleetSlurm::job_name(&c.campaign.id),
            request: argv,
            invocation: prev.map_or(1, |p| p.invocation + 1),
            ..Default::default()
        },
        released: false,
    };
    let timeout = Duration::from_secs(s.pending_timeout_s);
    let wait = slurm_alloc::wait_granted(&job, timeout, cancelled)
        .await
        .map_err(NoLanes::Refused)?;
    let nodes = match wait {
        Wait::Granted(n) => n,
        Wait::Cancelled => return Err(NoLanes::Signal),
        Wait::Pending { state, reason } => {
            return Err(NoLanes::Refused(format!(
                "Slurm did not grant {} node(s) of partition `{}` within {} s: job {job} is still {state} (reason: {reason}{}); the request was cancelled; {}",
                s.lanes,
                s.partition,
                s.pending_timeout_s,
                reason_words(&reason).map(|w| format!(": {w}")).unwrap_or_default(),
                fix(&s, &reason)
            )))
        }
        Wait::Ended { state, reason } => {
            return Err(NoLanes::Refused(format!(
                "Slurm ended the request (job {job}) before it ran: {state} (reason: {reason}); check `scontrol show job {job}` and the partition `{}`",
                s.partition
            )))
        }
    };
    if nodes.len() != s.lanes as usize {
        return Err(NoLanes::Refused(format!(
            "Slurm granted {} node(s) ({}) for job {job}, not the {} asked for; the request was cancelled",
            nodes.len(),
            nodes.join(", "),
            s.lanes
        )));
    }
    let mut lanes = Vec::new();
    for e in c.fleet.iter_mut() {
        if let Some(n) = e.granted {
            let node = nodes[n as usize - 1].clone();
            e.slurm_node = Some(node.clone());
            lanes.push(GrantedLane {
                lane: e.id.clone(),
                node,
            });
        }
    }
    let r = &mut held.record;
    r.nodes = nodes;
    r.lanes = lanes;
    r.granted_at = crate::clock::wall_rfc3339();
    r.pending_s = t0.elapsed().as_secs_f64();
    Ok((c, Some(held)))
}

/// `c` with each granted lane on the node `a` recorded for it (a recovery puts the dead run's
/// lanes back where they were). Err: a granted lane the record does not name.
pub fn as_recorded(mut c: Campaign, a: &SlurmAllocation) -> Result<Campaign, String> {
    for e in c.fleet.iter_mut().filter(|e| e.granted.is_some()) {
        let g = a.lanes.iter().find(|g| g.lane == e.id).ok_or_else(|| {
            format!(
                "lane {}: the bundle's allocation record (job {}) names no node for it",
                e.id, a.job_id
            )
        })?;
        e.slurm_node = Some(g.node.clone());
    }
    Ok(c)
}

/// sbatch's refusal in the run's words.
fn refused(s: &FleetSlurm, e: &str) -> String {
    format!(
        "{e}; asked for {} node(s) of partition `{}`: ask for fewer `lanes` in [fleet.slurm] (at most the nodes `sinfo -p {}` lists usable, less those your own [[lanes]] name), or fix the request's other fields there",
        s.lanes, s.partition, s.partition
    )
}

/// What a pending reason means, for the reasons a too-large request meets.
fn reason_words(reason: &str) -> Option<&'static str> {
    Some(match reason {
        "PartitionNodeLimit" => {
            "the partition has fewer nodes than asked, or limits a job to fewer"
        }
        "Resources" => "the nodes are busy with other jobs",
        "Priority" => "other jobs come first",
        "ReqNodeNotAvail" => "a node the request needs is down, drained or reserved",
        "PartitionTimeLimit" => "the time limit is above the partition's",
        "AssocGrpNodeLimit" | "AssocMaxNodesPerJobLimit" | "QOSMaxNodePerJobLimit" => {
            "the account's or QOS's node limit is below the request"
        }
        _ => return None,
    })
}

fn fix(s: &FleetSlurm, reason: &str) -> String {
    match reason {
        "Resources" | "Priority" => format!(
            "raise `pending_timeout_s` ({} s) in [fleet.slurm], or run when the partition is free",
            s.pending_timeout_s
        ),
        "PartitionTimeLimit" => {
            "lower `time_limit` in [fleet.slurm] to the partition's MaxTime".into()
        }
        _ => format!(
            "ask for fewer `lanes` in [fleet.slurm] (`sinfo -p {}` lists the partition's nodes; the nodes your own [[lanes]] name are excluded)",
            s.partition
        ),
    }
}
