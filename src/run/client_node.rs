//! A timed step's load run by the client on the lane's own node (docs/fleet.md "Where the client
//! runs"): the order written into the lane's folder, `bakeoff client-step` run there as a job
//! step of the arm's Slurm job (`lane::slurm_step`), its output read back and checked (it ran on
//! the lane's node, from the node's address, within its order). Both files stay in the bundle,
//! hashed by its manifest as every evidence file is.

use super::client_step::{LoadOut, Order, OUT_FORMAT};
use crate::campaign::Campaign;
use crate::evidence::bundle;
use crate::lane::slurm::SlurmJob;
use crate::lane::Running;
use serde_json::{json, Value};
use std::path::{Path, PathBuf};

/// Where a step's client runs when it runs on the lane's node.
#[derive(Debug, Clone)]
pub struct NodeClient {
    /// The lane's Slurm node, and its address (`NodeAddr`: where the engine serves).
    pub node: String,
    pub node_addr: String,
    /// The arm's job: the client runs as a step of it.
    pub job: SlurmJob,
    /// The lane's folder of the bundle (the order and the output go there).
    pub dir: PathBuf,
    pub arm: String,
}

/// Where the timed loads of `arm`, running as `running`, go from: the lane's node when the
/// campaign puts the lane's client there (`Campaign::client_on_node`) and the arm is a Slurm job
/// (an endpoint arm serves elsewhere: it is measured from this process). `dir`: the lane folder.
pub fn for_arm(c: &Campaign, running: &Running, dir: &Path, arm: &str) -> Option<NodeClient> {
    if !c.client_on_node(&c.lane) {
        return None;
    }
    let job = running.slurm_job()?;
    Some(NodeClient {
        node: c.lane.slurm_node.clone()?,
        node_addr: c.lane.host.clone(),
        job: job.clone(),
        dir: dir.to_path_buf(),
        arm: arm.to_string(),
    })
}

/// Runs `order` (the load of the step whose first request index is `first_index`) on the lane's
/// node: its load and the step evidence's `client` record. Err: why the step failed (the files
/// written so far stay).
pub async fn run(
    nc: &NodeClient,
    order: &Order,
    first_index: u64,
) -> Result<(LoadOut, Value), String> {
    let order_name = bundle::client_order(&nc.arm, first_index);
    let out_name = bundle::client_output(&nc.arm, first_index);
    let (order_file, out_file) = (nc.dir.join(&order_name), nc.dir.join(&out_name));
    let text = serde_json::to_vec(order).map_err(|e| e.to_string())?;
    crate::evidence::write_atomic(&order_file, &text).map_err(|e| {
        format!(
            "cannot write the client order {}: {e:#}",
            order_file.display()
        )
    })?;
    let exe = std::env::current_exe()
        .map_err(|e| format!("cannot name this bakeoff's executable for the client step: {e}"))?;
    let argv = vec![
        exe.display().to_string(),
        "client-step".into(),
        order_file.display().to_string(),
        out_file.display().to_string(),
    ];
    let name = format!("{}-client", nc.job.job_name);
    let step = crate::lane::slurm_step::run(&nc.job, &nc.node, &name, &argv).await?;
    let said = step.stderr.trim();
    if !step.success {
        return Err(format!(
            "the client step on node {} (`{}`) ended with {}: {}; the order is {order_name}",
            nc.node,
            step.argv.join(" "),
            step.status,
            if said.is_empty() {
                "it said nothing"
            } else {
                said
            }
        ));
    }
    let bytes = std::fs::read(&out_file).map_err(|e| {
        format!(
            "the client step on node {} ended well but wrote no {out_name} ({e}): is the bundle's folder on a filesystem the node shares?",
            nc.node
        )
    })?;
    let out: LoadOut = serde_json::from_slice(&bytes)
        .map_err(|e| format!("{out_name}: not a client step's output: {e}"))?;
    if out.format != OUT_FORMAT {
        return Err(format!(
            "{out_name}: format `{}`, expected `{OUT_FORMAT}`",
            out.format
        ));
    }
    let ran_on = out.ran_on.clone().unwrap_or_default();
    check_place(nc, &ran_on)?;
    if out.past_order > 0 {
        return Err(format!(
            "the client step on node {} asked for {} request(s) past the {} ordered ({out_name}): the step's warm-up ran longer than its order allowed for",
            nc.node,
            out.past_order,
            order.requests.len()
        ));
    }
    let record = json!({
        "mode": crate::evidence::client_path::NODE,
        "node": nc.node,
        "node_address": nc.node_addr,
        "slurm_job": ran_on.slurm_job_id,
        "slurm_step": ran_on.slurm_step_id,
        "slurmd_nodename": ran_on.slurmd_nodename,
        "hostname": ran_on.hostname,
        "local_address": ran_on.local_address,
        "srun": step.argv,
        "order": order_name,
        "output": out_name,
    });
    Ok((out, record))
}

/// The step ran on the lane's node, in the arm's job, sending from the node's address (when the
/// lane's address is an IP address: a name is not compared).
fn check_place(nc: &NodeClient, r: &super::client_step::RanOn) -> Result<(), String> {
    if r.slurmd_nodename.as_deref() != Some(nc.node.as_str()) {
        return Err(format!(
            "the client step ran on {} (SLURMD_NODENAME {:?}), not on the lane's node {}",
            r.hostname, r.slurmd_nodename, nc.node
        ));
    }
    if r.slurm_job_id.as_deref() != Some(nc.job.job_id.as_str()) {
        return Err(format!(
            "the client step ran in Slurm job {:?}, not in the arm's job {}",
            r.slurm_job_id, nc.job.job_id
        ));
    }
    let is_ip = nc.node_addr.parse::<std::net::IpAddr>().is_ok();
    if is_ip && r.local_address.as_deref() != Some(nc.node_addr.as_str()) {
        return Err(format!(
            "the client step on node {} sent from {:?}, not from the node's address {}",
            nc.node, r.local_address, nc.node_addr
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::super::client_step::RanOn;
    use super::*;

    #[test]
    fn a_step_that_ran_elsewhere_is_refused() {
        let nc = NodeClient {
            node: "node2".into(),
            node_addr: "10.9.0.12".into(),
            job: {
                let mut j = SlurmJob::default();
                j.job_id = "41".into();
                j
            },
            dir: PathBuf::new(),
            arm: "a".into(),
        };
        let mut r = RanOn {
            hostname: "h".into(),
            slurmd_nodename: Some("node2".into()),
            slurm_job_id: Some("41".into()),
            slurm_step_id: Some("0".into()),
            local_address: Some("10.9.0.12".into()),
        };
        assert!(check_place(&nc, &r).is_ok());
        r.local_address = Some("10.9.0.1".into());
        let e = check_place(&nc, &r).unwrap_err();
        assert!(
            e.contains("sent from Some(\"10.9.0.1\"), not from the node's address 10.9.0.12"),
            "{e}"
        );
        r.slurmd_nodename = Some("node3".into());
        let e = check_place(&nc, &r).unwrap_err();
        assert!(e.contains("not on the lane's node node2"), "{e}");
        r.slurmd_nodename = None;
        assert!(check_place(&nc, &r).is_err());
    }
}
