//! `[[lanes]]`: several lanes, each with an id, where it is, and the incumbent that serves it
//! today (none on a qualification lane). `[lane]` stays the one-lane form; [`Campaign::lanes`]
//! (campaign.rs) gives both forms as one list.

use super::identity::{
    default_health, default_host, default_idle_max, default_ready_timeout, default_stop_grace, Lane,
};
use serde::{Deserialize, Serialize};

/// The id the one lane of a `[lane]` campaign has in the schedule (never in a file name: names
/// carry the lane only when there are several).
pub const SINGLE_LANE_ID: &str = "lane";

/// One `[[lanes]]` table: the keys of `[lane]`, plus `id` and `incumbent`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LaneEntry {
    /// Lowercase letters, digits and `-`; tags the lane's evidence and progress lines.
    pub id: String,
    /// The id of the `[[arms]]` incumbent that serves this lane today (stopped first, restored
    /// exactly afterwards); absent on a qualification lane.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub incumbent: Option<String>,
    #[serde(default = "default_host")]
    pub host: String,
    pub port: u16,
    #[serde(default)]
    pub gpus: Vec<String>,
    #[serde(default)]
    pub memory_reserve_mib: u64,
    #[serde(default = "default_idle_max")]
    pub idle_baseline_max_mib: u64,
    #[serde(default = "default_health")]
    pub health_path: String,
    #[serde(default = "default_ready_timeout")]
    pub ready_timeout_s: u64,
    #[serde(default = "default_stop_grace")]
    pub stop_grace_s: u64,
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub env: std::collections::BTreeMap<String, String>,
    /// The lane's price per hour and its currency label (as in `[lane]`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cost_per_hour: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub currency: Option<String>,
    /// A Slurm lane: the node (its Slurm `NodeName`) every arm's job on this lane is pinned to
    /// (`sbatch --nodelist`). Its address is the node's `NodeAddr`, resolved when the run starts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub slurm_node: Option<String>,
    /// A lane Slurm grants (`[fleet.slurm]`, the n-th of its `lanes`, from 1): made by load, never
    /// written in the file; its `slurm_node` is set when the run has its allocation.
    #[serde(skip)]
    pub granted: Option<u32>,
    /// A granted lane's `[fleet.slurm] gres` (made by load, never written).
    #[serde(skip)]
    pub slurm_gres: Option<String>,
}

impl LaneEntry {
    /// Whether the lane is a Slurm node: named in the file, or granted by Slurm at run time.
    pub fn is_slurm(&self) -> bool {
        self.slurm_node.is_some() || self.granted.is_some()
    }

    /// The lane's settings in `[lane]`'s shape.
    pub fn lane(&self) -> Lane {
        Lane {
            host: self.host.clone(),
            port: self.port,
            gpus: self.gpus.clone(),
            memory_reserve_mib: self.memory_reserve_mib,
            idle_baseline_max_mib: self.idle_baseline_max_mib,
            health_path: self.health_path.clone(),
            ready_timeout_s: self.ready_timeout_s,
            stop_grace_s: self.stop_grace_s,
            env: self.env.clone(),
            cost_per_hour: self.cost_per_hour,
            currency: self.currency.clone(),
            slurm_node: self.slurm_node.clone(),
            slurm_gres: self.slurm_gres.clone(),
        }
    }
}

/// `[fleet]`: settings of a multi-lane campaign as a whole (docs/fleet.md).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FleetTable {
    /// The arm whose recipe runs a short A/A timing on every lane to measure the card-to-card
    /// spread (default: the incumbent).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub control: Option<String>,
    /// `[fleet.slurm]`: K more lanes, obtained from Slurm when the run starts (named `grant`
    /// here: `.slurm` is how an arm's recipe table reads, which only lane/ may test).
    #[serde(rename = "slurm", default, skip_serializing_if = "Option::is_none")]
    pub grant: Option<FleetSlurm>,
    /// Where each lane's load client runs (docs/fleet.md "Where the client runs"): unset, on a
    /// Slurm lane's own node; `controller`, in the bakeoff process (over the network).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client: Option<ClientPlace>,
}

/// `[fleet] client`: where a lane's timed loads are sent from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ClientPlace {
    /// On the lane's Slurm node, a job step beside the arm (the default for Slurm lanes).
    Node,
    /// In the bakeoff process (the only place for a host:port lane).
    Controller,
}

/// `[fleet.slurm]` (docs/fleet.md "K lanes from Slurm"): bakeoff asks Slurm for `lanes` nodes of
/// `partition` with one holder job (`sbatch -N K`), and each node it grants becomes a lane
/// `slurm-<n>` that behaves exactly as a `slurm_node` lane; the holder is cancelled on every
/// path out.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FleetSlurm {
    /// The partition the nodes come from (every Slurm arm's `partition` must be it).
    pub partition: String,
    /// K, how many nodes (lanes) to ask for.
    pub lanes: u32,
    /// The lane port on every granted node.
    pub port: u16,
    /// `--constraint` of the request (node features, e.g. "h100").
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub constraint: Option<String>,
    /// `--gres` of every arm job on a granted lane whose arm asks no `gpus` itself (the holder
    /// asks none: it would hold the GPUs the arms need).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gres: Option<String>,
    /// `--time` of the holder (Slurm's forms: `MM`, `HH:MM:SS`, `D-HH:MM`, …): how long the
    /// nodes are held at most.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub time_limit: Option<String>,
    /// `--account` of the holder.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub account: Option<String>,
    /// Longest wait for Slurm to grant the nodes; past it the request is cancelled (exit 2,
    /// with squeue's reason).
    #[serde(default = "default_pending_timeout")]
    pub pending_timeout_s: u64,
    /// Each granted lane's settings, as `[[lanes]]` has them.
    #[serde(default = "default_health")]
    pub health_path: String,
    #[serde(default = "default_ready_timeout")]
    pub ready_timeout_s: u64,
    #[serde(default = "default_stop_grace")]
    pub stop_grace_s: u64,
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub env: std::collections::BTreeMap<String, String>,
}

fn default_pending_timeout() -> u64 {
    120
}

/// The id of the n-th lane Slurm grants (from 1).
pub fn granted_lane_id(n: u32) -> String {
    format!("slurm-{n}")
}

impl FleetSlurm {
    /// The holder job's name: how bakeoff, an operator and `squeue` find the allocation.
    pub fn job_name(campaign_id: &str) -> String {
        format!("bakeoff-fleet-{campaign_id}")
    }

    /// The request, whole: `sbatch` of a holder job asking K nodes of the partition, one task
    /// and no GPUs on each (the arms' jobs run beside it on the nodes it holds). `exclude`: the
    /// nodes the file's own lanes are on (two lanes on one node and port would collide).
    pub fn request(&self, campaign_id: &str, exclude: &[&str]) -> Vec<String> {
        let mut w = vec![
            "sbatch".to_string(),
            "--parsable".into(),
            format!("--job-name={}", Self::job_name(campaign_id)),
            format!("--nodes={}", self.lanes),
            "--ntasks-per-node=1".into(),
            "--cpus-per-task=1".into(),
            format!("--partition={}", self.partition),
        ];
        if !exclude.is_empty() {
            w.push(format!("--exclude={}", exclude.join(",")));
        }
        for (k, v) in [
            ("constraint", &self.constraint),
            ("time", &self.time_limit),
            ("account", &self.account),
        ] {
            if let Some(v) = v {
                w.push(format!("--{k}={v}"));
            }
        }
        w.push("--output=/dev/null".into());
        w.push("--wrap=exec sleep infinity".into());
        w
    }

    /// Its K lanes as `[[lanes]]` entries, each without its node until the run is granted one.
    pub fn entries(&self) -> Vec<LaneEntry> {
        (1..=self.lanes)
            .map(|n| LaneEntry {
                id: granted_lane_id(n),
                incumbent: None,
                host: default_host(),
                port: self.port,
                gpus: Vec::new(),
                memory_reserve_mib: 0,
                idle_baseline_max_mib: default_idle_max(),
                health_path: self.health_path.clone(),
                ready_timeout_s: self.ready_timeout_s,
                stop_grace_s: self.stop_grace_s,
                env: self.env.clone(),
                cost_per_hour: None,
                currency: None,
                slurm_node: None,
                granted: Some(n),
                slurm_gres: self.gres.clone(),
            })
            .collect()
    }
}

/// A lane of the campaign, either form.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct NamedLane {
    pub id: String,
    /// The incumbent arm serving it today; None on a qualification lane.
    pub incumbent: Option<String>,
    pub lane: Lane,
}

/// Whether an argument is the port, `NAME=PORT` (`--port=8001`) or `HOST:PORT` (`0.0.0.0:8001`).
/// A `HOST:PORT:CPORT` publish (a container's, whose host side follows the lane) is not.
pub(super) fn names_port(argv: &[String], port: u16) -> bool {
    let p = port.to_string();
    argv.iter().any(|a| {
        a == &p
            || a.strip_suffix(p.as_str()).is_some_and(|head| {
                head.ends_with('=') || (head.ends_with(':') && head.matches(':').count() == 1)
            })
    })
}

#[cfg(test)]
mod tests {
    use super::names_port;

    #[test]
    fn a_port_is_named_alone_after_equals_or_after_a_host() {
        let argv = |a: &[&str]| a.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        for named in [
            &["--port", "8001"][..],
            &["--port=8001"][..],
            &["--bind", "0.0.0.0:8001"][..],
        ] {
            assert!(names_port(&argv(named), 8001), "{named:?}");
        }
        for not in [
            &["--port", "18001"][..],
            &["--publish", "127.0.0.1:9000:8001"][..],
            &["--threads", "80010"][..],
        ] {
            assert!(!names_port(&argv(not), 8001), "{not:?}");
        }
    }
}
