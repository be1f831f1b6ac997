//! What a probe returns: GPUs, their processes, and where to look; and picking a lane's GPUs.

use serde::Serialize;
use std::path::PathBuf;
use std::time::Duration;

/// A process holding a GPU context.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct GpuProcess {
    pub pid: u32,
    /// GPU memory it uses; `None` when the driver does not say.
    pub used_mib: Option<u64>,
}

/// One GPU as the driver reports it. Optional fields are `None` where the GPU or driver does not
/// report them.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct GpuDevice {
    pub index: u32,
    pub uuid: String,
    pub name: String,
    pub memory_total_mib: u64,
    pub memory_used_mib: u64,
    pub utilization_pct: Option<f64>,
    pub power_w: Option<f64>,
    pub sm_clock_mhz: Option<u32>,
    pub mem_clock_mhz: Option<u32>,
    /// Compute processes on this GPU.
    pub processes: Vec<GpuProcess>,
    /// False when the process list could not be read (then `processes` is empty, not "none").
    pub processes_known: bool,
}

/// The outcome of a probe.
#[derive(Debug, Clone, Serialize)]
#[serde(tag = "status", rename_all = "kebab-case")]
pub enum GpuProbe {
    Available {
        /// `nvml` or `nvidia-smi`.
        source: String,
        driver_version: String,
        devices: Vec<GpuDevice>,
        /// Why NVML was not used, when the source is nvidia-smi.
        notes: Vec<String>,
    },
    /// No NVIDIA GPU can be seen: NVML failed (which way) and nvidia-smi is absent or failed.
    NotApplicable { reason: String },
}

impl GpuProbe {
    pub fn devices(&self) -> &[GpuDevice] {
        match self {
            GpuProbe::Available { devices, .. } => devices,
            GpuProbe::NotApplicable { .. } => &[],
        }
    }

    pub fn is_available(&self) -> bool {
        matches!(self, GpuProbe::Available { .. })
    }
}

/// Where a probe looks.
#[derive(Debug, Clone)]
pub struct ProbeOpts {
    /// Try NVML first.
    pub nvml: bool,
    /// The `nvidia-smi` program (a name on PATH or a path).
    pub nvidia_smi: PathBuf,
    /// Limit for one nvidia-smi call (a wedged driver can hang it).
    pub timeout: Duration,
}

impl Default for ProbeOpts {
    fn default() -> Self {
        ProbeOpts {
            nvml: true,
            nvidia_smi: PathBuf::from("nvidia-smi"),
            timeout: Duration::from_secs(15),
        }
    }
}

/// The devices named by `ids` (a UUID, a UUID without `GPU-`, or an index); all when empty.
pub fn select<'a>(devices: &'a [GpuDevice], ids: &[String]) -> Result<Vec<&'a GpuDevice>, String> {
    if ids.is_empty() {
        return Ok(devices.iter().collect());
    }
    ids.iter()
        .map(|id| {
            let id = id.trim();
            devices
                .iter()
                .find(|d| {
                    d.uuid.eq_ignore_ascii_case(id)
                        || d.uuid
                            .strip_prefix("GPU-")
                            .is_some_and(|u| u.eq_ignore_ascii_case(id))
                        || id.parse::<u32>().ok() == Some(d.index)
                })
                .ok_or_else(|| {
                    let have: Vec<String> = devices
                        .iter()
                        .map(|d| format!("{} {}", d.index, d.uuid))
                        .collect();
                    format!("GPU {id} is not on this host (it has: {})", have.join(", "))
                })
        })
        .collect()
}
