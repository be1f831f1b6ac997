//! Facts about the host a run measures on: its name, OS, kernel, CPU, memory and GPUs (probed
//! once per process), for `campaign-result.json`'s identity and `environment.json`.

use super::gpu;

/// One GPU probe per process for the identity and environment records (NVML init is slow).
pub fn gpu_probe() -> gpu::GpuProbe {
    static P: std::sync::OnceLock<gpu::GpuProbe> = std::sync::OnceLock::new();
    P.get_or_init(gpu::probe).clone()
}

/// The kernel's host name, `unknown` when unreadable.
pub fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|s| s.trim().to_string())
        .unwrap_or_else(|_| "unknown".into())
}

/// The CPU's model name and how many logical CPUs the process may use.
pub fn cpu_model() -> (String, usize) {
    let text = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let model = text
        .lines()
        .find(|l| l.starts_with("model name"))
        .and_then(|l| l.split_once(':'))
        .map(|(_, v)| v.trim().to_string())
        .unwrap_or_else(|| "unknown CPU".into());
    let n = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1);
    (model, n)
}

/// The measured hardware in words: `1 GPU(s): NVIDIA …, 32607 MiB`, else `CPU only: 16 x …`.
pub fn hardware() -> String {
    let p = gpu_probe();
    let d = p.devices();
    if d.is_empty() {
        let (m, n) = cpu_model();
        format!("CPU only: {n} x {m}")
    } else {
        let names: Vec<String> = d
            .iter()
            .map(|g| format!("{}, {} MiB", g.name, g.memory_total_mib))
            .collect();
        format!("{} GPU(s): {}", d.len(), names.join("; "))
    }
}

/// The OS's `PRETTY_NAME` from `/etc/os-release`.
pub fn os_name() -> Option<String> {
    std::fs::read_to_string("/etc/os-release")
        .ok()
        .and_then(|t| {
            t.lines()
                .find(|l| l.starts_with("PRETTY_NAME="))
                .map(|l| l["PRETTY_NAME=".len()..].trim_matches('"').to_string())
        })
}

/// The kernel release.
pub fn kernel() -> Option<String> {
    read_trimmed("/proc/sys/kernel/osrelease")
}

/// The first line of `/proc/meminfo` (`MemTotal: … kB`).
pub fn memory() -> Option<String> {
    read_trimmed("/proc/meminfo").and_then(|m| m.lines().next().map(str::to_string))
}

fn read_trimmed(p: &str) -> Option<String> {
    std::fs::read_to_string(p)
        .ok()
        .map(|s| s.trim().to_string())
}
