//! A Slurm lane's node (`[[lanes]] slurm_node`, docs/fleet.md): where it is (`NodeAddr`) and
//! whether Slurm can run jobs there, asked of `scontrol show node` when the run starts.

use std::path::Path;

/// The node's address (`NodeAddr`, its name when Slurm gives none), or why the lane cannot use
/// it: Slurm does not know the node, or says it is down, drained or failing. `sbatch` is an
/// arm's sbatch (its directory holds scontrol).
pub fn node_addr(sbatch: &str, node: &str) -> Result<String, String> {
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
    let f = super::slurm::fields(out.lines().next().unwrap_or_default());
    if !o.status.success() || f.get("NodeName").map(String::as_str) != Some(node) {
        let said = String::from_utf8_lossy(&o.stderr).trim().to_string();
        return Err(format!(
            "Slurm does not know node {node} (scontrol show node said: {})",
            if said.is_empty() { out.trim() } else { &said }
        ));
    }
    let state = f.get("State").cloned().unwrap_or_default();
    if ["DOWN", "DRAIN", "FAIL", "NOT_RESPONDING", "FUTURE"]
        .iter()
        .any(|s| state.contains(s))
    {
        return Err(format!(
            "Slurm says node {node} is {state} (reason: {}): no job would start there",
            f.get("Reason").map_or("none given", String::as_str)
        ));
    }
    Ok(f.get("NodeAddr")
        .filter(|a| !a.is_empty())
        .cloned()
        .unwrap_or_else(|| node.to_string()))
}
