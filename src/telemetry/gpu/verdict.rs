//! The checks built on a probe, as pure functions: the idle baseline before a campaign, the memory
//! reserve once an arm is ready, and the release of GPU memory after a stop.

use super::device::{select, GpuDevice, GpuProbe, GpuProcess};
use super::probe::probe;
use serde::Serialize;
use std::time::{Duration, Instant};

/// A check's status.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Status {
    Passed,
    Failed,
    /// No GPU on this host: recorded as such, never faked.
    NotApplicable,
}

impl Status {
    pub fn as_str(self) -> &'static str {
        match self {
            Status::Passed => "passed",
            Status::Failed => "failed",
            Status::NotApplicable => "not-applicable",
        }
    }
}

/// A GPU check's outcome as `campaign-result.json` records it.
impl From<Status> for crate::evidence::GateStatus {
    fn from(s: Status) -> crate::evidence::GateStatus {
        use crate::evidence::GateStatus;
        match s {
            Status::Passed => GateStatus::Passed,
            Status::Failed => GateStatus::Failed,
            Status::NotApplicable => GateStatus::NotApplicable,
        }
    }
}

/// One GPU's part of a check.
#[derive(Debug, Clone, Serialize)]
pub struct DeviceVerdict {
    pub index: u32,
    pub uuid: String,
    pub name: String,
    pub status: Status,
    pub memory_used_mib: u64,
    pub memory_total_mib: u64,
    pub processes: Vec<GpuProcess>,
    pub detail: String,
}

/// A GPU check: `idle-baseline`, `memory-reserve` or `memory-released`.
#[derive(Debug, Clone, Serialize)]
pub struct Verdict {
    pub check: &'static str,
    pub status: Status,
    pub detail: String,
    /// The check's limit in MiB (idle threshold, reserve, release tolerance).
    pub limit_mib: u64,
    pub per_device: Vec<DeviceVerdict>,
}

/// The idle-baseline gate's verdict.
pub type BaselineVerdict = Verdict;

impl Verdict {
    /// Passed, or not applicable (no GPU): nothing to stop the campaign for.
    pub fn ok(&self) -> bool {
        self.status != Status::Failed
    }

    fn not_applicable(check: &'static str, limit_mib: u64, reason: &str) -> Verdict {
        Verdict {
            check,
            status: Status::NotApplicable,
            detail: format!("no NVIDIA GPU on this host: {reason}"),
            limit_mib,
            per_device: Vec::new(),
        }
    }

    fn failed(check: &'static str, limit_mib: u64, detail: String) -> Verdict {
        Verdict {
            check,
            status: Status::Failed,
            detail,
            limit_mib,
            per_device: Vec::new(),
        }
    }
}

fn device_verdict(d: &GpuDevice, problems: Vec<String>, fine: String) -> DeviceVerdict {
    DeviceVerdict {
        index: d.index,
        uuid: d.uuid.clone(),
        name: d.name.clone(),
        status: if problems.is_empty() {
            Status::Passed
        } else {
            Status::Failed
        },
        memory_used_mib: d.memory_used_mib,
        memory_total_mib: d.memory_total_mib,
        processes: d.processes.clone(),
        detail: if problems.is_empty() {
            fine
        } else {
            problems.join("; ")
        },
    }
}

fn combine(
    check: &'static str,
    limit_mib: u64,
    per_device: Vec<DeviceVerdict>,
    what: &str,
) -> Verdict {
    let failed: Vec<String> = per_device
        .iter()
        .filter(|d| d.status == Status::Failed)
        .map(|d| format!("GPU {} ({}): {}", d.index, d.uuid, d.detail))
        .collect();
    let (status, detail) = if failed.is_empty() {
        (
            Status::Passed,
            format!("{} GPU(s) {what}", per_device.len()),
        )
    } else {
        (Status::Failed, failed.join("; "))
    };
    Verdict {
        check,
        status,
        detail,
        limit_mib,
        per_device,
    }
}

pub(super) fn procs_text(p: &[GpuProcess]) -> String {
    p.iter()
        .map(|p| match p.used_mib {
            Some(m) => format!("pid {} ({m} MiB)", p.pid),
            None => format!("pid {}", p.pid),
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// The idle GPU baseline: each lane GPU (every GPU when `lane_gpu_uuids` is empty) must use at
/// most `threshold_mib` and have no compute process. No GPU → not applicable.
pub fn idle_baseline(probe: &GpuProbe, lane_gpu_uuids: &[String], threshold_mib: u64) -> Verdict {
    const CHECK: &str = "idle-baseline";
    let devices = match probe {
        GpuProbe::NotApplicable { reason } => {
            return Verdict::not_applicable(CHECK, threshold_mib, reason)
        }
        GpuProbe::Available { devices, .. } => devices,
    };
    let chosen = match select(devices, lane_gpu_uuids) {
        Ok(c) => c,
        Err(e) => return Verdict::failed(CHECK, threshold_mib, e),
    };
    let per = chosen
        .into_iter()
        .map(|d| {
            let mut problems = Vec::new();
            if d.memory_used_mib > threshold_mib {
                problems.push(format!(
                    "{} MiB used, above the {threshold_mib} MiB idle threshold",
                    d.memory_used_mib
                ));
            }
            if !d.processes.is_empty() {
                problems.push(format!(
                    "compute process(es) present: {}",
                    procs_text(&d.processes)
                ));
            }
            let procs = if d.processes_known {
                "no compute process"
            } else {
                "process list unavailable"
            };
            let fine = format!(
                "{} MiB used (threshold {threshold_mib} MiB), {procs}",
                d.memory_used_mib
            );
            device_verdict(d, problems, fine)
        })
        .collect();
    combine(CHECK, threshold_mib, per, "idle")
}

/// The memory reserve once an arm is ready: each lane GPU keeps at least `reserve_mib` free.
pub fn reserve_ok(probe: &GpuProbe, uuids: &[String], reserve_mib: u64) -> Verdict {
    const CHECK: &str = "memory-reserve";
    let devices = match probe {
        GpuProbe::NotApplicable { reason } => {
            return Verdict::not_applicable(CHECK, reserve_mib, reason)
        }
        GpuProbe::Available { devices, .. } => devices,
    };
    let chosen = match select(devices, uuids) {
        Ok(c) => c,
        Err(e) => return Verdict::failed(CHECK, reserve_mib, e),
    };
    let per = chosen
        .into_iter()
        .map(|d| {
            let free = d.memory_total_mib.saturating_sub(d.memory_used_mib);
            let problems = if free < reserve_mib {
                vec![format!(
                    "only {free} MiB free of {} MiB, below the {reserve_mib} MiB reserve",
                    d.memory_total_mib
                )]
            } else {
                vec![]
            };
            let fine = format!(
                "{free} MiB free of {} MiB (reserve {reserve_mib} MiB)",
                d.memory_total_mib
            );
            device_verdict(d, problems, fine)
        })
        .collect();
    combine(CHECK, reserve_mib, per, "keep the reserve free")
}

/// After a stop: each lane GPU is back to its baseline memory (within `tolerance_mib`) and holds
/// no compute process that was not there at the baseline.
pub fn released(
    baseline: &GpuProbe,
    now: &GpuProbe,
    uuids: &[String],
    tolerance_mib: u64,
) -> Verdict {
    const CHECK: &str = "memory-released";
    let (base, cur) = match (baseline, now) {
        (GpuProbe::NotApplicable { reason }, _) | (_, GpuProbe::NotApplicable { reason }) => {
            return Verdict::not_applicable(CHECK, tolerance_mib, reason)
        }
        (GpuProbe::Available { devices: b, .. }, GpuProbe::Available { devices: c, .. }) => (b, c),
    };
    let chosen = match select(cur, uuids) {
        Ok(c) => c,
        Err(e) => return Verdict::failed(CHECK, tolerance_mib, e),
    };
    let per = chosen
        .into_iter()
        .map(|d| {
            let mut problems = Vec::new();
            let b = base.iter().find(|b| b.uuid == d.uuid);
            let base_used = b.map(|b| b.memory_used_mib).unwrap_or(0);
            if d.memory_used_mib > base_used + tolerance_mib {
                problems.push(format!(
                    "{} MiB used, baseline {base_used} MiB (+{tolerance_mib} MiB tolerance)",
                    d.memory_used_mib
                ));
            }
            let new: Vec<GpuProcess> = d
                .processes
                .iter()
                .filter(|p| !b.is_some_and(|b| b.processes.iter().any(|q| q.pid == p.pid)))
                .cloned()
                .collect();
            if !new.is_empty() {
                problems.push(format!(
                    "compute process(es) not in the baseline: {}",
                    procs_text(&new)
                ));
            }
            let fine = format!(
                "{} MiB used, baseline {base_used} MiB (tolerance {tolerance_mib} MiB)",
                d.memory_used_mib
            );
            device_verdict(d, problems, fine)
        })
        .collect();
    combine(CHECK, tolerance_mib, per, "back to the baseline")
}

/// Probes every 250 ms until [`released`] passes or `timeout` passes; the last verdict.
/// Blocking: call it from `spawn_blocking` in async code.
pub fn wait_released(
    baseline: &GpuProbe,
    uuids: &[String],
    tolerance_mib: u64,
    timeout: Duration,
) -> Verdict {
    let start = Instant::now();
    loop {
        let v = released(baseline, &probe(), uuids, tolerance_mib);
        if v.status != Status::Failed || start.elapsed() >= timeout {
            return v;
        }
        std::thread::sleep(Duration::from_millis(250));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::telemetry::gpu::fixtures::{available, H200};

    #[test]
    fn idle_baseline_rules() {
        let p = available(
            H200,
            "GPU-aaaaaaaa-1111-2222-3333-444455556666, 4242, 80000\n",
        );
        let v = idle_baseline(
            &p,
            &["GPU-5c1b7f0e-1111-2222-3333-444455556666".into()],
            1024,
        );
        assert_eq!(v.status, Status::Passed, "{v:?}");
        assert!(v.ok());
        // By index, and the busy GPU fails on memory and on its process.
        let v = idle_baseline(&p, &["1".into()], 1024);
        assert_eq!(v.status, Status::Failed);
        assert!(v.detail.contains("80123 MiB used"), "{}", v.detail);
        assert!(v.detail.contains("pid 4242"), "{}", v.detail);
        // Every GPU when the lane names none.
        let v = idle_baseline(&p, &[], 1024);
        assert_eq!((v.status, v.per_device.len()), (Status::Failed, 2));
        // A process alone fails even under the memory threshold.
        let p2 = available(H200, "GPU-5c1b7f0e-1111-2222-3333-444455556666, 9, 100\n");
        assert_eq!(
            idle_baseline(&p2, &["0".into()], 1024).status,
            Status::Failed
        );
        // An unknown GPU fails with the list of what is there.
        let v = idle_baseline(&p, &["GPU-nope".into()], 1024);
        assert_eq!(v.status, Status::Failed);
        assert!(v.detail.contains("0 GPU-5c1b7f0e"), "{}", v.detail);
        // No GPU: not applicable, with the reason.
        let na = GpuProbe::NotApplicable {
            reason: "NVML init failed: x; nvidia-smi: not found (not on PATH)".into(),
        };
        let v = idle_baseline(&na, &[], 1024);
        assert_eq!(v.status, Status::NotApplicable);
        assert!(v.ok());
        assert!(v.detail.contains("nvidia-smi: not found"));
    }

    #[test]
    fn reserve_and_release() {
        let p = available(H200, "");
        assert_eq!(reserve_ok(&p, &["1".into()], 70_000).status, Status::Failed);
        assert_eq!(
            reserve_ok(&p, &["1".into()], 70_000).per_device[0].detail,
            "only 63648 MiB free of 143771 MiB, below the 70000 MiB reserve"
        );
        assert_eq!(reserve_ok(&p, &["0".into()], 70_000).status, Status::Passed);
        let busy = available(H200, "GPU-5c1b7f0e-1111-2222-3333-444455556666, 77, 9000\n");
        let v = released(&p, &busy, &["0".into()], 256);
        assert_eq!(v.status, Status::Failed);
        assert!(v.detail.contains("pid 77"));
        assert_eq!(released(&p, &p, &[], 256).status, Status::Passed);
    }
}
