//! A probe: NVML, else nvidia-smi, else a `not-applicable` record that says why.

use super::device::{GpuProbe, ProbeOpts};
use super::nvml::nvml_probe;
use super::smi::smi_probe;

/// Probes with NVML, else nvidia-smi.
pub fn probe() -> GpuProbe {
    probe_with(&ProbeOpts::default())
}

pub fn probe_with(o: &ProbeOpts) -> GpuProbe {
    let nvml_note = if o.nvml {
        match nvml_probe() {
            Ok((driver_version, devices)) if !devices.is_empty() => {
                return GpuProbe::Available {
                    source: "nvml".into(),
                    driver_version,
                    devices,
                    notes: Vec::new(),
                }
            }
            Ok(_) => "NVML: the driver reports no GPU".to_string(),
            Err(e) => e,
        }
    } else {
        "NVML: not tried".to_string()
    };
    match smi_probe(o, true) {
        Ok((driver_version, devices)) if !devices.is_empty() => GpuProbe::Available {
            source: "nvidia-smi".into(),
            driver_version,
            devices,
            notes: vec![format!("{nvml_note}; used nvidia-smi instead")],
        },
        Ok(_) => GpuProbe::NotApplicable {
            reason: format!("{nvml_note}; nvidia-smi lists no GPU"),
        },
        Err(e) => GpuProbe::NotApplicable {
            reason: format!("{nvml_note}; {e}"),
        },
    }
}
