//! `[campaign]` (identity and output) and `[lane]` (the port and GPUs every arm runs on).

use serde::{Deserialize, Serialize};
use std::path::PathBuf;

/// `[campaign]`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Identity {
    /// Lowercase letters, digits and `-`; names the bundle and container names.
    pub id: String,
    /// A description of the hardware, or `"auto"` to detect it at run time (nvidia-smi / CPU).
    #[serde(default = "default_hardware")]
    pub hardware: String,
    /// A label for how arms are isolated, e.g. "isolated direct managed recipe lane".
    #[serde(default = "default_topology")]
    pub topology: String,
    /// Free text for the report.
    #[serde(default)]
    pub description: Option<String>,
    /// Bundle directory. Default `runs/<id>` next to the campaign file; absolute after load.
    #[serde(default)]
    pub output: PathBuf,
}

fn default_hardware() -> String {
    "auto".into()
}
fn default_topology() -> String {
    "isolated managed single lane".into()
}

impl Identity {
    /// Whether the hardware is detected at run time.
    pub fn hardware_is_auto(&self) -> bool {
        self.hardware == "auto"
    }
}

/// `[lane]`: a host port plus the GPUs it owns.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Lane {
    /// Address arms listen on and bakeoff connects to.
    #[serde(default = "default_host")]
    pub host: String,
    /// The lane port (1–65535).
    pub port: u16,
    /// GPU UUIDs the lane owns (`GPU-…` or `MIG-…`, as `nvidia-smi -L` prints). Empty: no GPU,
    /// and the GPU steps (idle baseline, memory reserve) are left out of the plan.
    #[serde(default)]
    pub gpus: Vec<String>,
    /// GPU memory (MiB) that must stay free after an arm is ready; an arm leaving less fails its
    /// memory-reserve check.
    #[serde(default)]
    pub memory_reserve_mib: u64,
    /// The idle baseline (with the incumbent stopped) fails when a lane GPU uses more than this.
    #[serde(default = "default_idle_max")]
    pub idle_baseline_max_mib: u64,
    /// Polled until it answers 200.
    #[serde(default = "default_health")]
    pub health_path: String,
    /// Launch → ready limit.
    #[serde(default = "default_ready_timeout")]
    pub ready_timeout_s: u64,
    /// SIGTERM (or `docker stop`) → SIGKILL grace.
    #[serde(default = "default_stop_grace")]
    pub stop_grace_s: u64,
    /// Variables given to every arm's start command on this lane (the arm's own `env` wins on
    /// the same name): what a lane needs that its arms do not say, e.g. a slower card's
    /// reference-engine slowdown (docs/fleet.md).
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub env: std::collections::BTreeMap<String, String>,
    /// What an hour of the lane costs (its GPUs, host, rent), in `currency`: the cost per
    /// million output tokens is this price over the arm's measured throughput
    /// (docs/metrics.md). Absent: no price, and cost is "not measured".
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cost_per_hour: Option<f64>,
    /// A free-text label of `cost_per_hour`'s currency, e.g. "USD" (required with it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub currency: Option<String>,
    /// A Slurm lane's node (`[[lanes]] slurm_node`; never written in `[lane]`): every Slurm
    /// arm's job on the lane is pinned there (`--nodelist`), the arm's own recipe unchanged.
    #[serde(skip)]
    pub slurm_node: Option<String>,
    /// A lane Slurm granted (`[fleet.slurm] gres`): the `--gres` of every Slurm arm's job there
    /// whose arm asks no `gpus` itself.
    #[serde(skip)]
    pub slurm_gres: Option<String>,
}

pub(super) fn default_host() -> String {
    "127.0.0.1".into()
}
pub(super) fn default_idle_max() -> u64 {
    1024
}
pub(super) fn default_health() -> String {
    "/health".into()
}
pub(super) fn default_ready_timeout() -> u64 {
    600
}
pub(super) fn default_stop_grace() -> u64 {
    30
}

impl Lane {
    /// The placeholder `[lane]` of a campaign that declares `[[lanes]]` instead (load replaces it
    /// with the incumbent's lane, and refuses a file with neither).
    pub fn unset() -> Lane {
        Lane {
            host: default_host(),
            port: 0,
            gpus: Vec::new(),
            memory_reserve_mib: 0,
            idle_baseline_max_mib: default_idle_max(),
            health_path: default_health(),
            ready_timeout_s: default_ready_timeout(),
            stop_grace_s: default_stop_grace(),
            env: Default::default(),
            cost_per_hour: None,
            currency: None,
            slurm_node: None,
            slurm_gres: None,
        }
    }

    /// The lane's price as the arms that run there record it; None without `cost_per_hour`.
    pub fn price(&self) -> Option<crate::evidence::energy::Price> {
        Some(crate::evidence::energy::Price {
            cost_per_hour: self.cost_per_hour?,
            currency: self.currency.clone().unwrap_or_default(),
        })
    }

    /// `host:port`.
    pub fn address(&self) -> String {
        format!("{}:{}", self.host, self.port)
    }

    /// `http://host:port`.
    pub fn base_url(&self) -> String {
        if self.host.contains(':') {
            format!("http://[{}]:{}", self.host, self.port)
        } else {
            format!("http://{}:{}", self.host, self.port)
        }
    }
}
