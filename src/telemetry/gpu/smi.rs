//! GPU facts through `nvidia-smi`, the fallback when NVML is not there: running it with a time
//! limit and parsing its CSV.

use super::device::{GpuDevice, GpuProcess, ProbeOpts};
use std::io::Read;
use std::time::{Duration, Instant};

/// The `nvidia-smi` query bakeoff runs (and parses with [`parse_query_gpu`]).
pub const QUERY_GPU: &str = "--query-gpu=index,uuid,name,memory.total,memory.used,utilization.gpu,power.draw,clocks.sm,clocks.mem,driver_version";
/// The `nvidia-smi` compute-process query (parsed by [`parse_compute_apps`]).
pub const QUERY_APPS: &str = "--query-compute-apps=gpu_uuid,pid,used_memory";
pub const CSV_FORMAT: &str = "--format=csv,noheader,nounits";

/// Runs a program with a time limit; its stdout on success.
fn run_with_timeout(
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

/// Two H200s as `nvidia-smi QUERY_GPU CSV_FORMAT` prints them, for unit tests.
#[cfg(test)]
pub(crate) const H200: &str = "0, GPU-5c1b7f0e-1111-2222-3333-444455556666, NVIDIA H200, 143771, 512, 0, 74.83, 345, 2619, 570.133.20\n\
1, GPU-aaaaaaaa-1111-2222-3333-444455556666, NVIDIA H200, 143771, 80123, 97, 650.12, 1980, 2619, 570.133.20\n";

#[cfg(test)]
mod tests {
    use super::*;

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
}
