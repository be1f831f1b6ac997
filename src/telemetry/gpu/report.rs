//! The human-readable report of `bakeoff gpu` (telemetry/cli.rs).

use super::device::GpuProbe;
use super::verdict::{idle_baseline, procs_text, Status};

fn opt<T: std::fmt::Display>(v: Option<T>, unit: &str) -> String {
    match v {
        Some(v) => format!("{v}{unit}"),
        None => "n/a".into(),
    }
}

/// A human-readable report: the facts bakeoff sees and the idle-baseline verdict for `gpus`
/// (every GPU when empty). Starts with `no NVIDIA GPU on this host: …` when there is none.
pub fn report_text(probe: &GpuProbe, gpus: &[String], threshold_mib: u64) -> String {
    let mut s = format!("bakeoff {} GPU check\n", crate::VERSION);
    match probe {
        GpuProbe::NotApplicable { reason } => {
            s.push_str(&format!("no NVIDIA GPU on this host: {reason}\n"));
        }
        GpuProbe::Available {
            source,
            driver_version,
            devices,
            notes,
        } => {
            s.push_str(&format!(
                "source: {source}; driver {driver_version}; {} GPU(s)\n",
                devices.len()
            ));
            for n in notes {
                s.push_str(&format!("note: {n}\n"));
            }
            for d in devices {
                s.push_str(&format!("GPU {}  {}  {}\n", d.index, d.uuid, d.name));
                s.push_str(&format!(
                    "  memory {} / {} MiB used; utilization {}; power {}; clocks SM {}, memory {}\n",
                    d.memory_used_mib,
                    d.memory_total_mib,
                    opt(d.utilization_pct, " %"),
                    opt(d.power_w.map(|w| format!("{w:.1}")), " W"),
                    opt(d.sm_clock_mhz, " MHz"),
                    opt(d.mem_clock_mhz, " MHz"),
                ));
                let procs = if !d.processes_known {
                    "unavailable".to_string()
                } else if d.processes.is_empty() {
                    "none".to_string()
                } else {
                    procs_text(&d.processes)
                };
                s.push_str(&format!("  compute processes: {procs}\n"));
            }
        }
    }
    let v = idle_baseline(probe, gpus, threshold_mib);
    let detail = match v.status {
        // The reason is printed above.
        Status::NotApplicable => {
            "there is no GPU to check; recorded as not applicable, never faked"
        }
        _ => v.detail.as_str(),
    };
    s.push_str(&format!(
        "idle baseline (threshold {threshold_mib} MiB): {}: {detail}\n",
        v.status.as_str(),
    ));
    for d in &v.per_device {
        s.push_str(&format!(
            "  GPU {} {}: {}: {}\n",
            d.index,
            d.uuid,
            d.status.as_str(),
            d.detail
        ));
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::telemetry::gpu::fixtures::{available, H200};

    #[test]
    fn report_says_plainly_when_there_is_no_gpu() {
        let na = GpuProbe::NotApplicable {
            reason: "NVML init failed: could not load".into(),
        };
        let t = report_text(&na, &[], 1024);
        assert!(
            t.contains("no NVIDIA GPU on this host: NVML init failed"),
            "{t}"
        );
        assert!(
            t.contains("idle baseline (threshold 1024 MiB): not-applicable"),
            "{t}"
        );
        let t = report_text(&available(H200, ""), &[], 1024);
        assert!(
            t.contains("GPU 0  GPU-5c1b7f0e-1111-2222-3333-444455556666  NVIDIA H200"),
            "{t}"
        );
        assert!(t.contains("power 74.8 W"), "{t}");
        assert!(
            t.contains("idle baseline (threshold 1024 MiB): failed"),
            "{t}"
        );
    }
}
