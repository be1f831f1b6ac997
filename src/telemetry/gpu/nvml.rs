//! GPU facts through NVML (`nvml-wrapper`), the first choice.

use super::device::{GpuDevice, GpuProcess};
use std::sync::OnceLock;

const MIB: u64 = 1024 * 1024;

/// NVML, initialised once per process (the wrapper advises against repeated init).
pub(crate) fn nvml() -> Result<&'static nvml_wrapper::Nvml, String> {
    static NVML: OnceLock<Result<nvml_wrapper::Nvml, String>> = OnceLock::new();
    NVML.get_or_init(|| nvml_wrapper::Nvml::init().map_err(|e| format!("NVML init failed: {e}")))
        .as_ref()
        .map_err(|e| e.clone())
}

pub(super) fn nvml_probe() -> Result<(String, Vec<GpuDevice>), String> {
    let n = nvml()?;
    let driver = n
        .sys_driver_version()
        .map_err(|e| format!("NVML driver version: {e}"))?;
    let count = n
        .device_count()
        .map_err(|e| format!("NVML device count: {e}"))?;
    let mut devices = Vec::new();
    for i in 0..count {
        let d = n
            .device_by_index(i)
            .map_err(|e| format!("NVML device {i}: {e}"))?;
        devices.push(nvml_device(&d, i, true)?);
    }
    Ok((driver, devices))
}

pub(crate) fn nvml_device(
    d: &nvml_wrapper::Device<'_>,
    index: u32,
    with_processes: bool,
) -> Result<GpuDevice, String> {
    use nvml_wrapper::enum_wrappers::device::Clock;
    use nvml_wrapper::enums::device::UsedGpuMemory;
    let uuid = d
        .uuid()
        .map_err(|e| format!("NVML uuid of GPU {index}: {e}"))?;
    let mem = d
        .memory_info()
        .map_err(|e| format!("NVML memory of GPU {index}: {e}"))?;
    let procs = if with_processes {
        d.running_compute_processes().ok()
    } else {
        None
    };
    Ok(GpuDevice {
        index,
        name: d.name().unwrap_or_default(),
        memory_total_mib: mem.total / MIB,
        memory_used_mib: mem.used / MIB,
        utilization_pct: d.utilization_rates().ok().map(|u| u.gpu as f64),
        power_w: d.power_usage().ok().map(|mw| mw as f64 / 1000.0),
        sm_clock_mhz: d.clock_info(Clock::SM).ok(),
        mem_clock_mhz: d.clock_info(Clock::Memory).ok(),
        processes_known: procs.is_some(),
        processes: procs
            .unwrap_or_default()
            .into_iter()
            .map(|p| GpuProcess {
                pid: p.pid,
                used_mib: match p.used_gpu_memory {
                    UsedGpuMemory::Used(b) => Some(b / MIB),
                    UsedGpuMemory::Unavailable => None,
                },
            })
            .collect(),
        uuid,
    })
}
