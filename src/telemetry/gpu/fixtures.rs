//! Probes built from nvidia-smi text, for the unit tests of this module.

use super::device::GpuProbe;
pub(crate) use super::smi::H200;
use super::smi::{parse_compute_apps, parse_query_gpu};

pub(crate) fn available(text: &str, apps: &str) -> GpuProbe {
    let rows = parse_query_gpu(text).unwrap();
    let driver = rows[0].1.clone();
    let apps = parse_compute_apps(apps);
    let devices = rows
        .into_iter()
        .map(|(mut d, _)| {
            d.processes_known = true;
            d.processes = apps
                .iter()
                .filter(|(u, _)| *u == d.uuid)
                .map(|(_, p)| p.clone())
                .collect();
            d
        })
        .collect();
    GpuProbe::Available {
        source: "nvidia-smi".into(),
        driver_version: driver,
        devices,
        notes: vec![],
    }
}
