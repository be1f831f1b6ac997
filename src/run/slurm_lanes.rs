//! Slurm lanes at run start (docs/fleet.md): each lane's address becomes its node's `NodeAddr`,
//! so the lane's checks (the port free before an arm, free again after its stop) look at the
//! node, where its jobs serve. A node Slurm does not know, or calls down, refuses the run before
//! anything starts.

use crate::campaign::Campaign;

/// `c` with every Slurm lane's `host` set to its node's address (the campaign's `[lane]`, the
/// incumbent's lane, follows). Err: `lane <id>: slurm_node <node>: <why>; <fix>`.
pub fn resolve(c: Campaign) -> Result<Campaign, String> {
    resolve_with(c, crate::lane::slurm_node::node_addr)
}

/// [`resolve`] for `bakeoff recover`: a node Slurm calls down still gives its address (each
/// lane is put back wherever it is); only a node Slurm does not know refuses.
pub fn resolve_any(c: Campaign) -> Result<Campaign, String> {
    resolve_with(c, crate::lane::slurm_node::node_addr_any)
}

fn resolve_with(
    mut c: Campaign,
    addr: fn(&str, &str) -> Result<String, String>,
) -> Result<Campaign, String> {
    if c.fleet.iter().all(|e| !e.is_slurm()) {
        return Ok(c);
    }
    for e in c.fleet.iter_mut() {
        let Some(node) = &e.slurm_node else {
            if e.granted.is_some() {
                return Err(format!(
                    "lane {}: no node: Slurm has not granted the campaign's lanes yet (bakeoff asks for them when the run starts)",
                    e.id
                ));
            }
            continue;
        };
        e.host = addr("sbatch", node).map_err(|why| {
            format!(
                "lane {}: slurm_node {node}: {why}; name a node `sinfo -N` lists as usable, or bring it back (`scontrol update nodename={node} state=resume`)",
                e.id
            )
        })?;
    }
    // The campaign's lane is the incumbent's, or the only one (one `[[lanes]]` table runs as
    // `[lane]`: without this its checks and its client would look at the unresolved host).
    let pick = c.fleet.iter().position(|e| e.incumbent.is_some());
    if let Some(i) = pick.or((c.fleet.len() == 1).then_some(0)) {
        c.lane = c.fleet[i].lane();
    }
    Ok(c)
}
