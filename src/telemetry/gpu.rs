//! GPU facts: NVML through `nvml-wrapper`, `nvidia-smi` as the fallback, and on a host without an
//! NVIDIA GPU a `not-applicable` record that says why (never made-up numbers).
//!
//! The checks built on a probe are pure functions: the idle baseline before a campaign, the
//! memory reserve once an arm is ready, and the release of GPU memory after a stop.

use serde::Serialize;
use std::io::Read;
use std::path::PathBuf;
use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// The `nvidia-smi` query bakeoff runs (and parses with [`parse_query_gpu`]).
pub const QUERY_GPU: &str = "--query-gpu=index,uuid,name,memory.total,memory.used,utilization.gpu,power.draw,clocks.sm,clocks.mem,driver_version";
/// The `nvidia-smi` compute-process query (parsed by [`parse_compute_apps`]).
pub const QUERY_APPS: &str = "--query-compute-apps=gpu_uuid,pid,used_memory";
pub const CSV_FORMAT: &str = "--format=csv,noheader,nounits";

const MIB: u64 = 1024 * 1024;

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

/// NVML, initialised once per process (the wrapper advises against repeated init).
pub(crate) fn nvml() -> Result<&'static nvml_wrapper::Nvml, String> {
    static NVML: OnceLock<Result<nvml_wrapper::Nvml, String>> = OnceLock::new();
    NVML.get_or_init(|| nvml_wrapper::Nvml::init().map_err(|e| format!("NVML init failed: {e}")))
        .as_ref()
        .map_err(|e| e.clone())
}

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

fn nvml_probe() -> Result<(String, Vec<GpuDevice>), String> {
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

/// Runs a program with a time limit; its stdout on success.
pub(crate) fn run_with_timeout(
    program: &std::path::Path,
    args: &[&str],
    timeout: Duration,
) -> Result<String, String> {
    let name = program.display();
    let mut child = std::process::Command::new(program)
        .args(args)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .map_err(|e| {
            if e.kind() == std::io::ErrorKind::NotFound {
                format!("{name}: not found (not on PATH)")
            } else {
                format!("{name}: cannot run it: {e}")
            }
        })?;
    let mut out = child.stdout.take().expect("piped");
    let mut err = child.stderr.take().expect("piped");
    let reader = std::thread::spawn(move || {
        let mut o = Vec::new();
        let _ = out.read_to_end(&mut o);
        o
    });
    let ereader = std::thread::spawn(move || {
        let mut e = Vec::new();
        let _ = err.read_to_end(&mut e);
        e
    });
    let start = Instant::now();
    let status = loop {
        match child.try_wait() {
            Ok(Some(s)) => break s,
            Ok(None) if start.elapsed() < timeout => std::thread::sleep(Duration::from_millis(5)),
            Ok(None) => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(format!(
                    "{name}: no answer within {:.0} s (killed)",
                    timeout.as_secs_f64()
                ));
            }
            Err(e) => return Err(format!("{name}: {e}")),
        }
    };
    let stdout = String::from_utf8_lossy(&reader.join().unwrap_or_default()).into_owned();
    let stderr = String::from_utf8_lossy(&ereader.join().unwrap_or_default()).into_owned();
    if !status.success() {
        let msg = if stderr.trim().is_empty() {
            stdout.trim()
        } else {
            stderr.trim()
        };
        let first = msg.lines().next().unwrap_or("");
        return Err(format!("{name} failed ({status}): {first}"));
    }
    Ok(stdout)
}

pub(crate) fn smi_probe(
    o: &ProbeOpts,
    with_processes: bool,
) -> Result<(String, Vec<GpuDevice>), String> {
    let text = run_with_timeout(&o.nvidia_smi, &[QUERY_GPU, CSV_FORMAT], o.timeout)?;
    let rows = parse_query_gpu(&text)?;
    let driver = rows.first().map(|r| r.1.clone()).unwrap_or_default();
    let mut devices: Vec<GpuDevice> = rows.into_iter().map(|r| r.0).collect();
    if with_processes {
        if let Ok(apps) = run_with_timeout(&o.nvidia_smi, &[QUERY_APPS, CSV_FORMAT], o.timeout) {
            let apps = parse_compute_apps(&apps);
            for d in devices.iter_mut() {
                d.processes_known = true;
                d.processes = apps
                    .iter()
                    .filter(|(u, _)| u.eq_ignore_ascii_case(&d.uuid))
                    .map(|(_, p)| p.clone())
                    .collect();
            }
        }
    }
    Ok((driver, devices))
}

/// A number from nvidia-smi's CSV, `None` for `[N/A]`, `[Not Supported]` and the like.
fn smi_num(s: &str) -> Option<f64> {
    let s = s.trim();
    if s.is_empty() || s.starts_with('[') || s.eq_ignore_ascii_case("n/a") {
        return None;
    }
    s.parse::<f64>().ok().filter(|v| v.is_finite())
}

/// Parses the output of `nvidia-smi QUERY_GPU CSV_FORMAT`: one device and the driver version per
/// line. A name containing commas is put back together.
pub fn parse_query_gpu(text: &str) -> Result<Vec<(GpuDevice, String)>, String> {
    let mut out = Vec::new();
    for line in text.lines().map(str::trim).filter(|l| !l.is_empty()) {
        let f: Vec<&str> = line.split(',').map(str::trim).collect();
        if f.len() < 10 {
            return Err(format!(
                "nvidia-smi: unexpected line (want 10 comma-separated fields): {line}"
            ));
        }
        let n = f.len();
        let num = |i: usize| smi_num(f[i]);
        let need = |i: usize, what: &str| {
            num(i).ok_or_else(|| format!("nvidia-smi: {what} is '{}' in: {line}", f[i]))
        };
        let dev = GpuDevice {
            index: need(0, "index")? as u32,
            uuid: f[1].to_string(),
            name: f[2..n - 7].join(","),
            memory_total_mib: need(n - 7, "memory.total")? as u64,
            memory_used_mib: need(n - 6, "memory.used")? as u64,
            utilization_pct: num(n - 5),
            power_w: num(n - 4),
            sm_clock_mhz: num(n - 3).map(|v| v as u32),
            mem_clock_mhz: num(n - 2).map(|v| v as u32),
            processes: Vec::new(),
            processes_known: false,
        };
        out.push((dev, f[n - 1].to_string()));
    }
    Ok(out)
}

/// Parses `nvidia-smi QUERY_APPS CSV_FORMAT`: (GPU uuid, process) per line; other lines are
/// skipped.
pub fn parse_compute_apps(text: &str) -> Vec<(String, GpuProcess)> {
    text.lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split(',').map(str::trim).collect();
            if f.len() != 3 || !f[0].starts_with("GPU-") {
                return None;
            }
            let pid = f[1].parse::<u32>().ok()?;
            Some((
                f[0].to_string(),
                GpuProcess {
                    pid,
                    used_mib: smi_num(f[2]).map(|v| v as u64),
                },
            ))
        })
        .collect()
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

fn procs_text(p: &[GpuProcess]) -> String {
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

    const H200: &str = "0, GPU-5c1b7f0e-1111-2222-3333-444455556666, NVIDIA H200, 143771, 512, 0, 74.83, 345, 2619, 570.133.20\n\
1, GPU-aaaaaaaa-1111-2222-3333-444455556666, NVIDIA H200, 143771, 80123, 97, 650.12, 1980, 2619, 570.133.20\n";

    fn available(text: &str, apps: &str) -> GpuProbe {
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

    #[test]
    fn parses_query_gpu() {
        let rows = parse_query_gpu(H200).unwrap();
        assert_eq!(rows.len(), 2);
        let (d, drv) = &rows[0];
        assert_eq!(drv, "570.133.20");
        assert_eq!(d.index, 0);
        assert_eq!(d.uuid, "GPU-5c1b7f0e-1111-2222-3333-444455556666");
        assert_eq!(d.name, "NVIDIA H200");
        assert_eq!((d.memory_total_mib, d.memory_used_mib), (143771, 512));
        assert_eq!(d.utilization_pct, Some(0.0));
        assert_eq!(d.power_w, Some(74.83));
        assert_eq!((d.sm_clock_mhz, d.mem_clock_mhz), (Some(345), Some(2619)));
    }

    #[test]
    fn parses_not_supported_and_commas_in_names() {
        let rows = parse_query_gpu(
            "0, GPU-abc, NVIDIA A100-SXM4-40GB, MIG 1g.5gb, 40960, 0, [N/A], [Not Supported], 1410, 1215, 535.54.03\n",
        )
        .unwrap();
        let d = &rows[0].0;
        assert_eq!(d.name, "NVIDIA A100-SXM4-40GB,MIG 1g.5gb");
        assert_eq!(d.utilization_pct, None);
        assert_eq!(d.power_w, None);
        assert!(parse_query_gpu("garbage line").is_err());
        assert!(parse_query_gpu("0, GPU-x, n, [N/A], 1, 2, 3, 4, 5, 6").is_err());
        assert!(parse_query_gpu("").unwrap().is_empty());
    }

    #[test]
    fn parses_compute_apps() {
        let a = parse_compute_apps(
            "GPU-aaaaaaaa-1111-2222-3333-444455556666, 4242, 80000\nNo running processes found\nGPU-x, 7, [N/A]\n",
        );
        assert_eq!(a.len(), 2);
        assert_eq!(
            a[0].1,
            GpuProcess {
                pid: 4242,
                used_mib: Some(80000)
            }
        );
        assert_eq!(a[1].1.used_mib, None);
    }

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
