//! GPU sampling during a timed step, on a background thread, joined to the step afterwards by
//! CLOCK_MONOTONIC time.

use super::gpu::{self, GpuDevice, ProbeOpts};
use crate::clock::mono_ns;
use serde::Serialize;
use std::sync::mpsc;
use std::thread::JoinHandle;
use std::time::Duration;

/// One GPU at one moment.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct GpuSample {
    /// Since the sampler started.
    pub t_ms: f64,
    /// CLOCK_MONOTONIC ns (the clock request traces use), for joining to steps.
    pub mono_ns: u64,
    pub uuid: String,
    pub memory_used_mib: u64,
    pub utilization_pct: Option<f64>,
    pub power_w: Option<f64>,
    pub sm_clock_mhz: Option<u32>,
}

/// What a sampler collected.
#[derive(Debug, Clone, Serialize)]
pub struct SampleSet {
    /// `nvml` or `nvidia-smi`; `None` when nothing could be sampled.
    pub source: Option<String>,
    pub interval_ms: u64,
    pub started_ns: u64,
    pub stopped_ns: u64,
    pub samples: Vec<GpuSample>,
    /// Why the set is empty (`not applicable: …`) or what went wrong on the way.
    pub note: Option<String>,
    /// Sampling rounds that failed (their error is in `note`).
    pub errors: u32,
}

/// The longest [`Sampler::start`] waits for the first reading to be under way.
const FIRST_READING_WAIT: Duration = Duration::from_secs(2);

/// A background sampler; [`Sampler::stop`] returns what it collected. Without a GPU it samples
/// nothing and its set says why.
pub struct Sampler {
    stop_tx: mpsc::Sender<()>,
    handle: JoinHandle<SampleSet>,
}

enum Backend {
    Nvml(Vec<(u32, nvml_wrapper::Device<'static>)>),
    Smi(ProbeOpts, Vec<String>),
}

impl Backend {
    fn sample(&self) -> Result<Vec<GpuDevice>, String> {
        match self {
            Backend::Nvml(devs) => devs
                .iter()
                .map(|(i, d)| gpu::nvml_device(d, *i, false))
                .collect(),
            Backend::Smi(o, uuids) => {
                let (_, all) = gpu::smi_probe(o, false)?;
                Ok(gpu::select(&all, uuids)?.into_iter().cloned().collect())
            }
        }
    }
}

fn open_backend(o: &ProbeOpts, uuids: &[String]) -> Result<(Backend, &'static str), String> {
    let mut why = "NVML: not tried".to_string();
    if o.nvml {
        match gpu::nvml() {
            Ok(n) => {
                let mut all = Vec::new();
                let count = n.device_count().map_err(|e| format!("NVML: {e}"))?;
                for i in 0..count {
                    let d = n.device_by_index(i).map_err(|e| format!("NVML: {e}"))?;
                    all.push((i, d));
                }
                let facts: Vec<GpuDevice> = all
                    .iter()
                    .filter_map(|(i, d)| gpu::nvml_device(d, *i, false).ok())
                    .collect();
                if !facts.is_empty() && facts.len() == all.len() {
                    let chosen: Vec<u32> = gpu::select(&facts, uuids)?
                        .into_iter()
                        .map(|d| d.index)
                        .collect();
                    all.retain(|(i, _)| chosen.contains(i));
                    return Ok((Backend::Nvml(all), "nvml"));
                }
                why = "NVML: no GPU, or its memory cannot be read".into();
            }
            Err(e) => why = e,
        }
    }
    match gpu::smi_probe(o, false) {
        Ok((_, all)) if !all.is_empty() => {
            gpu::select(&all, uuids)?;
            Ok((Backend::Smi(o.clone(), uuids.to_vec()), "nvidia-smi"))
        }
        Ok(_) => Err(format!("{why}; nvidia-smi lists no GPU")),
        Err(e) => Err(format!("{why}; {e}")),
    }
}

impl Sampler {
    /// Samples the GPUs named by `uuids` (every GPU when empty) every `interval`.
    pub fn start(uuids: &[String], interval: Duration) -> Sampler {
        Sampler::start_with(ProbeOpts::default(), uuids, interval)
    }

    pub fn start_with(opts: ProbeOpts, uuids: &[String], interval: Duration) -> Sampler {
        let (stop_tx, stop_rx) = mpsc::channel::<()>();
        let (first_tx, first_rx) = mpsc::channel::<()>();
        let uuids = uuids.to_vec();
        let started_ns = mono_ns();
        let handle = std::thread::Builder::new()
            .name("bakeoff-gpu-sampler".into())
            .spawn(move || run(opts, uuids, interval, started_ns, stop_rx, first_tx))
            .expect("spawn the GPU sampler thread");
        // The first reading is taken before the caller's load starts (opening NVML or a first
        // nvidia-smi call takes a while), so a step's energy window is covered from its start; a
        // backend slower than this is not waited for.
        let _ = first_rx.recv_timeout(FIRST_READING_WAIT);
        Sampler { stop_tx, handle }
    }

    /// Stops sampling (after one last sample) and returns the set.
    pub fn stop(self) -> SampleSet {
        let _ = self.stop_tx.send(());
        self.handle.join().unwrap_or_else(|_| SampleSet {
            source: None,
            interval_ms: 0,
            started_ns: 0,
            stopped_ns: mono_ns(),
            samples: Vec::new(),
            note: Some("the GPU sampler thread panicked".into()),
            errors: 1,
        })
    }
}

fn run(
    opts: ProbeOpts,
    uuids: Vec<String>,
    interval: Duration,
    started_ns: u64,
    stop_rx: mpsc::Receiver<()>,
    first: mpsc::Sender<()>,
) -> SampleSet {
    let mut set = SampleSet {
        source: None,
        interval_ms: interval.as_millis() as u64,
        started_ns,
        stopped_ns: 0,
        samples: Vec::new(),
        note: None,
        errors: 0,
    };
    let backend = match open_backend(&opts, &uuids) {
        Ok((b, source)) => {
            set.source = Some(source.to_string());
            b
        }
        Err(e) => {
            set.note = Some(format!("not applicable: no GPU sampled ({e})"));
            // Nothing to wait for: the caller starts its load now.
            drop(first);
            let _ = stop_rx.recv();
            set.stopped_ns = mono_ns();
            return set;
        }
    };
    loop {
        let t = mono_ns();
        // The reading's time is taken: the caller may start its load (a no-op after the first).
        let _ = first.send(());
        match backend.sample() {
            Ok(devs) => set.samples.extend(to_samples(devs, t, started_ns)),
            Err(e) => {
                set.errors += 1;
                set.note = Some(format!("sampling failed {} time(s); last: {e}", set.errors));
            }
        }
        let spent = Duration::from_nanos(mono_ns().saturating_sub(t));
        match stop_rx.recv_timeout(interval.saturating_sub(spent)) {
            Err(mpsc::RecvTimeoutError::Timeout) => continue,
            _ => break,
        }
    }
    // One last sample so the end of the step is covered.
    let t = mono_ns();
    if let Ok(devs) = backend.sample() {
        set.samples.extend(to_samples(devs, t, started_ns));
    }
    set.stopped_ns = mono_ns();
    set
}

/// One reading of every device, taken at `t` (a step that started at `started_ns`).
fn to_samples(devs: Vec<GpuDevice>, t: u64, started_ns: u64) -> impl Iterator<Item = GpuSample> {
    devs.into_iter().map(move |d| GpuSample {
        t_ms: t.saturating_sub(started_ns) as f64 / 1e6,
        mono_ns: t,
        uuid: d.uuid,
        memory_used_mib: d.memory_used_mib,
        utilization_pct: d.utilization_pct,
        power_w: d.power_w,
        sm_clock_mhz: d.sm_clock_mhz,
    })
}

/// One GPU over one step.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct GpuStepSummary {
    pub uuid: String,
    pub samples: usize,
    pub memory_used_mib_max: u64,
    pub utilization_pct_mean: Option<f64>,
    pub power_w_mean: Option<f64>,
    pub power_w_max: Option<f64>,
    pub sm_clock_mhz_mean: Option<f64>,
}

fn mean(v: impl Iterator<Item = f64>) -> Option<f64> {
    let (n, s) = v.fold((0usize, 0.0), |(n, s), x| (n + 1, s + x));
    (n > 0).then(|| s / n as f64)
}

/// Joins samples to a step: those with `from_ns <= mono_ns <= to_ns`, summarised per GPU (in
/// order of first appearance).
pub fn summarize(samples: &[GpuSample], from_ns: u64, to_ns: u64) -> Vec<GpuStepSummary> {
    let inside: Vec<&GpuSample> = samples
        .iter()
        .filter(|s| s.mono_ns >= from_ns && s.mono_ns <= to_ns)
        .collect();
    let mut uuids: Vec<&str> = Vec::new();
    for s in &inside {
        if !uuids.contains(&s.uuid.as_str()) {
            uuids.push(&s.uuid);
        }
    }
    uuids
        .into_iter()
        .map(|u| {
            let mine: Vec<&&GpuSample> = inside.iter().filter(|s| s.uuid == u).collect();
            GpuStepSummary {
                uuid: u.to_string(),
                samples: mine.len(),
                memory_used_mib_max: mine.iter().map(|s| s.memory_used_mib).max().unwrap_or(0),
                utilization_pct_mean: mean(mine.iter().filter_map(|s| s.utilization_pct)),
                power_w_mean: mean(mine.iter().filter_map(|s| s.power_w)),
                power_w_max: mine
                    .iter()
                    .filter_map(|s| s.power_w)
                    .fold(None, |m: Option<f64>, x| Some(m.map_or(x, |m| m.max(x)))),
                sm_clock_mhz_mean: mean(mine.iter().filter_map(|s| s.sm_clock_mhz.map(f64::from))),
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(t: u64, uuid: &str, mem: u64, util: f64, power: f64) -> GpuSample {
        GpuSample {
            t_ms: t as f64,
            mono_ns: t * 1_000_000,
            uuid: uuid.into(),
            memory_used_mib: mem,
            utilization_pct: Some(util),
            power_w: Some(power),
            sm_clock_mhz: Some(1980),
        }
    }

    #[test]
    fn summarize_joins_by_time() {
        let v = vec![
            s(0, "A", 100, 0.0, 70.0),
            s(10, "A", 5000, 90.0, 600.0),
            s(10, "B", 10, 0.0, 60.0),
            s(20, "A", 6000, 100.0, 650.0),
            s(30, "A", 100, 0.0, 70.0),
        ];
        let out = summarize(&v, 10_000_000, 20_000_000);
        assert_eq!(out.len(), 2);
        assert_eq!(out[0].uuid, "A");
        assert_eq!(out[0].samples, 2);
        assert_eq!(out[0].memory_used_mib_max, 6000);
        assert_eq!(out[0].utilization_pct_mean, Some(95.0));
        assert_eq!(out[0].power_w_max, Some(650.0));
        assert_eq!(out[1].uuid, "B");
        assert!(summarize(&v, 40_000_000, 50_000_000).is_empty());
    }

    /// A step's energy from readings in the sampler's own fixture format (nvidia-smi's CSV of the
    /// two-H200 fixture, GPU 1's power changed per round), against a hand calculation.
    #[test]
    fn energy_of_a_step_from_fixture_samples_matches_the_hand_figures() {
        use crate::evidence::energy::{from_step_file, idle_power};
        use crate::telemetry::gpu::{fixtures, parse_query_gpu};
        const MS: u64 = 1_000_000;
        let start = 5_000 * MS;
        let mut samples = Vec::new();
        // Rounds at 0, 200, 400, 600 ms; GPU 0 stays at the fixture's 74.83 W.
        for (k, w) in ["650.12", "700.0", "690.0", "640.0"].iter().enumerate() {
            let text = fixtures::H200.replace("650.12", w);
            let devs = parse_query_gpu(&text).unwrap().into_iter().map(|(d, _)| d);
            samples.extend(to_samples(
                devs.collect(),
                start + k as u64 * 200 * MS,
                start,
            ));
        }
        // The idle baseline is the fixture's probe: 74.83 + 650.12 W.
        let probe = serde_json::to_value(fixtures::available(fixtures::H200, "")).unwrap();
        let idle = idle_power(&probe);
        let file = serde_json::json!({
            "window_mono_ns": [start + 100 * MS, start + 500 * MS],
            "stats": {"ok": 4, "completion_tokens_total": 320, "requests_without_usage": 0},
            "gpu": {"source": "nvidia-smi", "samples": samples, "idle_power_w": idle},
        });
        let e = from_step_file(&file).unwrap();
        // GPU 1 over 100..500 ms: 675.06 W interpolated at 100 ms;
        // (675.06 + 700) / 2 × 0.1 + (700 + 690) / 2 × 0.2 + (690 + 665) / 2 × 0.1
        // = 68.753 + 139.0 + 67.75 = 275.503 J. GPU 0: 74.83 W × 0.4 s = 29.932 J.
        let close = |a: Option<f64>, b: f64| a.is_some_and(|a| (a - b).abs() < 1e-6);
        assert!(close(e.gpus[0].energy_j, 29.932), "{e:?}");
        assert!(close(e.gpus[1].energy_j, 275.503), "{e:?}");
        assert_eq!((e.gpus[0].readings, e.gpus[1].readings), (2, 2));
        // Total 305.435 J over 0.4 s: 763.5875 W; 4 requests: 76.35875 J each;
        // 320 output tokens: 305.435 / 320 × 10⁶ = 954,484.375 J per million.
        assert!(close(e.energy_j, 305.435));
        assert!(close(e.mean_power_w, 763.5875));
        assert!(close(e.per_request_j, 76.35875));
        assert!(close(e.per_mtok_j, 954_484.375));
        assert!(close(e.idle_power_w, 724.95));
        assert_eq!(e.not_measured, None);
    }
}
