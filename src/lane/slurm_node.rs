//! A Slurm lane's node (`[[lanes]] slurm_node`, docs/fleet.md): where it is (`NodeAddr`) and
//! whether Slurm can run jobs there, asked of `scontrol show node` when the run starts and again
//! when an arm on the lane fails or a new arm's turn comes (a node that went down mid-run drains
//! its lane).

use std::collections::BTreeMap;
use std::path::Path;

/// The states in which Slurm starts no job on a node.
const UNUSABLE: [&str; 5] = ["DOWN", "DRAIN", "FAIL", "NOT_RESPONDING", "FUTURE"];

/// `scontrol show node -o NODE`'s fields, or why Slurm does not know the node. `sbatch` is an
/// arm's sbatch (its directory holds scontrol).
fn show(sbatch: &str, node: &str) -> Result<BTreeMap<String, String>, String> {
    let dir = Path::new(sbatch)
        .parent()
        .filter(|d| !d.as_os_str().is_empty());
    let scontrol = dir.map_or("scontrol".into(), |d| d.join("scontrol"));
    let o = std::process::Command::new(&scontrol)
        .args(["show", "node", "-o", node])
        .stdin(std::process::Stdio::null())
        .output()
        .map_err(|e| format!("cannot run {}: {e}", scontrol.display()))?;
    let out = String::from_utf8_lossy(&o.stdout);
    let line = out.lines().next().unwrap_or_default();
    let mut f = super::slurm::fields(line);
    // `Reason=` is the last field and may hold spaces (`Reason=node test [root@…]`).
    if let Some((_, r)) = line.split_once(" Reason=") {
        f.insert("Reason".into(), r.trim().to_string());
    }
    if !o.status.success() || f.get("NodeName").map(String::as_str) != Some(node) {
        let said = String::from_utf8_lossy(&o.stderr).trim().to_string();
        return Err(format!(
            "Slurm does not know node {node} (scontrol show node said: {})",
            if said.is_empty() { out.trim() } else { &said }
        ));
    }
    Ok(f)
}

/// Why no job would start on the node (`Slurm says node N is DOWN (reason: …)`), None when
/// Slurm can run jobs there.
fn unusable(node: &str, f: &BTreeMap<String, String>) -> Option<String> {
    let state = f.get("State").cloned().unwrap_or_default();
    UNUSABLE.iter().any(|s| state.contains(s)).then(|| {
        format!(
            "Slurm says node {node} is {state} (reason: {})",
            f.get("Reason").map_or("none given", String::as_str)
        )
    })
}

/// The node's address (`NodeAddr`, its name when Slurm gives none), or why the lane cannot use
/// it: Slurm does not know the node, or says it is down, drained or failing.
pub fn node_addr(sbatch: &str, node: &str) -> Result<String, String> {
    let f = show(sbatch, node)?;
    if let Some(why) = unusable(node, &f) {
        return Err(format!("{why}: no job would start there"));
    }
    node_addr_any(sbatch, node)
}

/// The node's address whatever its state (a recovery puts a lane back even on a node that went
/// down): Err only when Slurm does not know the node.
pub fn node_addr_any(sbatch: &str, node: &str) -> Result<String, String> {
    let f = show(sbatch, node)?;
    Ok(f.get("NodeAddr")
        .filter(|a| !a.is_empty())
        .cloned()
        .unwrap_or_else(|| node.to_string()))
}

/// Whether the node is dead for the run: Some(Slurm's words) when Slurm does not know it any
/// more or says it is down, drained or failing; None when it can run jobs, or when scontrol
/// itself cannot be run (the controller's trouble is not the node's).
pub fn dead(sbatch: &str, node: &str) -> Option<String> {
    match show(sbatch, node) {
        Ok(f) => unusable(node, &f),
        Err(e) if e.starts_with("cannot run") => None,
        Err(e) => Some(e),
    }
}
