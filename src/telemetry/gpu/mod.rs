//! GPU facts: NVML through `nvml-wrapper`, `nvidia-smi` as the fallback, and on a host without an
//! NVIDIA GPU a `not-applicable` record that says why (never made-up numbers).
//!
//! The checks built on a probe are pure functions: the idle baseline before a campaign, the
//! memory reserve once an arm is ready, and the release of GPU memory after a stop.
//!
//! One file per concern: the data (device.rs), NVML (nvml.rs), nvidia-smi (smi.rs), the probe that
//! tries them in turn (probe.rs), the checks (verdict.rs) and the text report (report.rs).

mod device;
#[cfg(test)]
pub(crate) mod fixtures;
mod nvml;
mod probe;
mod report;
mod smi;
mod verdict;

pub use device::{select, GpuDevice, GpuProbe, GpuProcess, ProbeOpts};
pub(crate) use nvml::{nvml, nvml_device};
pub use probe::{probe, probe_with};
pub use report::report_text;
pub(crate) use smi::smi_probe;
pub use smi::{parse_compute_apps, parse_query_gpu, CSV_FORMAT, QUERY_APPS, QUERY_GPU};
pub use verdict::{
    idle_baseline, released, reserve_ok, wait_released, BaselineVerdict, DeviceVerdict, Status,
    Verdict,
};
