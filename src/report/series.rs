//! Plot data read from the timing evidence files: every timed step's per-request values (TTFT,
//! ITL, E2E and when each request was sent), its GPU summary, and where the step lies on the
//! run's timeline.
//!
//! A timing file written by the orchestrator carries `requests[]` (each with `ok`,
//! `send_offset_ms` and `metrics.ttft_ms` / `itl_ms` / `e2e_ms`), `stats.metrics` (percentiles),
//! `gpu.per_gpu[]` (`memory_used_mib_max`, `utilization_pct_mean`, `power_w_mean`: one summary
//! per GPU over the step) and `gpu.samples[]` (every reading of `telemetry::sampler`: `t_ms` after
//! the sampler started, just before the load, `mono_ns`, `uuid`, `memory_used_mib`,
//! `utilization_pct`, `power_w`; older bundles have none). When a file has no per-request values
//! the distributions fall back to the percentiles of `stats.metrics` (marked approximate).
//! Missing or unreadable files leave gaps, never errors.
//!
//! The timeline: `checkpoint.json` records each finished step's wall time in run order; the steps
//! are laid end to end by those wall times and a timed step's load is placed at the end of its
//! step (prompt sizing comes first). Without a checkpoint the timed steps are laid end to end by
//! their own load spans, in the order the result lists them (marked approximate).

use crate::evidence::bundle;
use crate::evidence::result::{CampaignResult, TimingRecord};
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::Path;

/// The per-request metrics the plots read, by their field name in a timing file.
pub const TTFT_FIELD: &str = "ttft_ms";
pub const ITL_FIELD: &str = "itl_ms";
pub const E2E_FIELD: &str = "e2e_ms";
const FIELDS: [&str; 3] = [TTFT_FIELD, ITL_FIELD, E2E_FIELD];

/// One successful request of a timed step.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RequestPoint {
    /// When it was sent, ms after the step's load started.
    pub send_ms: f64,
    /// Its metrics by field name (`ttft_ms`, `itl_ms`, `e2e_ms`) where the file has them.
    pub metrics: BTreeMap<&'static str, f64>,
}

/// GPU use during one timed step, over the lane's GPUs: memory and power summed, utilisation the
/// mean of the GPUs'.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct GpuStep {
    /// The step's summary (`per_gpu`): the most memory used, the mean utilisation and power.
    pub used_mib: f64,
    pub utilization_pct: Option<f64>,
    pub power_w: Option<f64>,
    /// Every sampling round (`samples`), in time order; empty when the file has none.
    pub samples: Vec<GpuPoint>,
}

/// One sampling round of the lane's GPUs (memory and power summed, utilisation the mean).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct GpuPoint {
    /// Seconds after the step's load started.
    pub t_s: f64,
    pub used_mib: f64,
    pub utilization_pct: Option<f64>,
    pub power_w: Option<f64>,
    /// GPUs read in this round.
    pub gpus: usize,
}

/// One timed step of one arm.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct StepSeries {
    pub arm: String,
    pub evidence: String,
    /// `cold` or `warm`.
    pub state: String,
    pub concurrency: u64,
    /// Successful requests with their per-request values (empty when the file has none).
    pub requests: Vec<RequestPoint>,
    /// Approximate CDF points from the file's percentiles, by field, when it has no requests.
    pub approx: BTreeMap<&'static str, Vec<(f64, f64)>>,
    pub gpu: Option<GpuStep>,
    /// Where the step's load starts on the run timeline, seconds after the run started.
    pub load_start_s: Option<f64>,
    /// How long the load ran, seconds (last request's end after the first send).
    pub load_span_s: f64,
}

impl StepSeries {
    /// This step's values of one metric, sorted ascending (finite only).
    pub fn values(&self, field: &str) -> Vec<f64> {
        let mut v: Vec<f64> = self
            .requests
            .iter()
            .filter_map(|r| r.metrics.get(field).copied())
            .filter(|x| x.is_finite())
            .collect();
        v.sort_by(f64::total_cmp);
        v
    }
}

#[derive(Debug, Clone, Default, PartialEq)]
pub struct Series {
    pub steps: Vec<StepSeries>,
    /// True when the timeline comes from the checkpoint's wall times (false: laid end to end).
    pub timeline_from_checkpoint: bool,
    /// The medians of each arm's capacity probes (`rates.rs`).
    pub probe_medians: super::rates::ProbeMedians,
}

impl Series {
    /// The step of an arm at a state and level (`warm`, 1 is the headline measurement).
    pub fn step(&self, arm: &str, state: &str, concurrency: u64) -> Option<&StepSeries> {
        self.steps
            .iter()
            .find(|s| s.arm == arm && s.state == state && s.concurrency == concurrency)
    }
}

/// An empirical CDF: (value, cumulative fraction) per sample, ascending.
pub fn ecdf(sorted: &[f64]) -> Vec<(f64, f64)> {
    let n = sorted.len() as f64;
    sorted
        .iter()
        .enumerate()
        .map(|(i, x)| (*x, (i + 1) as f64 / n))
        .collect()
}

fn from_distribution(d: &Value) -> Vec<(f64, f64)> {
    [
        ("min", 0.0),
        ("p50", 0.5),
        ("p90", 0.9),
        ("p95", 0.95),
        ("p99", 0.99),
        ("max", 1.0),
    ]
    .iter()
    .filter_map(|(k, p)| Some((d.get(*k)?.as_f64()?, *p)))
    .collect()
}

fn mean(v: &[f64]) -> Option<f64> {
    (!v.is_empty()).then(|| v.iter().sum::<f64>() / v.len() as f64)
}

/// The sampling rounds of a timing file's `gpu.samples` (the readings of one round share their
/// `mono_ns`).
fn gpu_samples(g: &Value) -> Vec<GpuPoint> {
    let mut rounds: BTreeMap<u64, Vec<&Value>> = BTreeMap::new();
    for s in g
        .get("samples")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let key = match s.get("mono_ns").and_then(Value::as_u64) {
            Some(k) => k,
            None => match s.get("t_ms").and_then(Value::as_f64) {
                Some(t) => (t * 1e6) as u64,
                None => continue,
            },
        };
        rounds.entry(key).or_default().push(s);
    }
    rounds
        .values()
        .filter_map(|r| {
            let t_ms = r.iter().filter_map(|s| s.get("t_ms")?.as_f64()).next()?;
            let all =
                |k: &str| -> Vec<f64> { r.iter().filter_map(|s| s.get(k)?.as_f64()).collect() };
            let used = all("memory_used_mib");
            let power = all("power_w");
            Some(GpuPoint {
                t_s: t_ms / 1000.0,
                used_mib: used.iter().sum(),
                utilization_pct: mean(&all("utilization_pct")),
                power_w: (!power.is_empty()).then(|| power.iter().sum()),
                gpus: r.len(),
            })
        })
        .collect()
}

fn gpu_of(f: &Value) -> Option<GpuStep> {
    let g = f.get("gpu")?;
    let samples = gpu_samples(g);
    let per = g.get("per_gpu")?.as_array()?;
    let used: Vec<f64> = per
        .iter()
        .filter_map(|g| g.get("memory_used_mib_max")?.as_f64())
        .collect();
    if used.is_empty() {
        return None;
    }
    let all = |k: &str| -> Vec<f64> { per.iter().filter_map(|g| g.get(k)?.as_f64()).collect() };
    let power = all("power_w_mean");
    Some(GpuStep {
        used_mib: used.iter().sum(),
        utilization_pct: mean(&all("utilization_pct_mean")),
        power_w: (!power.is_empty()).then(|| power.iter().sum()),
        samples,
    })
}

fn step_of(dir: &Path, arm: &str, state: &str, t: &TimingRecord) -> StepSeries {
    let mut s = StepSeries {
        arm: arm.to_string(),
        evidence: t.evidence.clone(),
        state: state.to_string(),
        concurrency: t.concurrency.max(1),
        ..Default::default()
    };
    let Some(f) = std::fs::read(dir.join(&t.evidence))
        .ok()
        .and_then(|b| serde_json::from_slice::<Value>(&b).ok())
    else {
        return s;
    };
    let mut end_ms: f64 = 0.0;
    for r in f
        .get("requests")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let send_ms = r
            .get("send_offset_ms")
            .and_then(Value::as_f64)
            .unwrap_or(0.0);
        let e2e = r.pointer("/metrics/e2e_ms").and_then(Value::as_f64);
        end_ms = end_ms.max(send_ms + e2e.unwrap_or(0.0));
        if !r.get("ok").and_then(Value::as_bool).unwrap_or(true) {
            continue;
        }
        let metrics: BTreeMap<&'static str, f64> = FIELDS
            .iter()
            .filter_map(|k| Some((*k, r.get("metrics")?.get(*k)?.as_f64()?)))
            .collect();
        if !metrics.is_empty() {
            s.requests.push(RequestPoint { send_ms, metrics });
        }
    }
    s.load_span_s = end_ms / 1000.0;
    if s.requests.is_empty() {
        for k in FIELDS {
            if let Some(d) = f.pointer(&format!("/stats/metrics/{k}")) {
                let pts = from_distribution(d);
                if !pts.is_empty() {
                    s.approx.insert(k, pts);
                }
            }
        }
    }
    s.gpu = gpu_of(&f);
    s
}

/// Where each step's evidence file ends on the run timeline (seconds after the run started),
/// from the checkpoint's wall times laid end to end.
fn step_ends(dir: &Path) -> Option<BTreeMap<String, f64>> {
    let f: Value =
        serde_json::from_slice(&std::fs::read(dir.join(bundle::CHECKPOINT)).ok()?).ok()?;
    let mut steps: Vec<&Value> = f.get("steps")?.as_array()?.iter().collect();
    steps.sort_by_key(|s| {
        (
            s.get("invocation").and_then(Value::as_u64).unwrap_or(1),
            s.get("number").and_then(Value::as_u64).unwrap_or(0),
        )
    });
    let mut at = 0.0;
    let mut ends = BTreeMap::new();
    for s in steps {
        at += s.get("wall_ms").and_then(Value::as_f64).unwrap_or(0.0) / 1000.0;
        if let Some(e) = s.get("evidence").and_then(Value::as_str) {
            ends.insert(e.to_string(), at);
        }
    }
    (!ends.is_empty()).then_some(ends)
}

/// Reads the series of every arm's timing files.
pub fn read(dir: &Path, r: &CampaignResult) -> Series {
    let mut s = Series {
        probe_medians: super::rates::read(dir, r),
        ..Series::default()
    };
    for a in &r.arms {
        if let Some(t) = &a.cold {
            s.steps.push(step_of(dir, &a.id, "cold", t));
        }
        if let Some(t) = &a.warm {
            s.steps.push(step_of(dir, &a.id, "warm", t));
        }
        let mut levels: Vec<&TimingRecord> = a.concurrency.values().collect();
        levels.sort_by_key(|t| t.concurrency);
        for t in levels {
            s.steps.push(step_of(dir, &a.id, "warm", t));
        }
    }
    let ends = step_ends(dir);
    let placed = ends.as_ref().is_some_and(|e| {
        s.steps
            .iter()
            .filter(|st| st.load_span_s > 0.0)
            .all(|st| e.contains_key(&st.evidence))
    });
    if let (true, Some(ends)) = (placed, ends) {
        s.timeline_from_checkpoint = true;
        for st in s.steps.iter_mut() {
            st.load_start_s = ends.get(&st.evidence).map(|e| e - st.load_span_s);
        }
    } else {
        let mut at = 0.0;
        for st in s.steps.iter_mut() {
            st.load_start_s = Some(at);
            at += st.load_span_s;
        }
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ecdf_steps_to_one() {
        assert_eq!(
            ecdf(&[1.0, 2.0, 2.0, 4.0]),
            vec![(1.0, 0.25), (2.0, 0.5), (2.0, 0.75), (4.0, 1.0)]
        );
    }

    fn timing(evidence: &str, concurrency: u64) -> TimingRecord {
        TimingRecord {
            evidence: evidence.into(),
            concurrency,
            ..Default::default()
        }
    }

    fn requests(sends_ms: &[f64], e2e_ms: f64) -> Value {
        let r: Vec<Value> = sends_ms
            .iter()
            .map(|s| serde_json::json!({"ok": true, "send_offset_ms": s, "metrics": {"ttft_ms": 5.0, "itl_ms": 2.0, "e2e_ms": e2e_ms}}))
            .collect();
        serde_json::json!({"requests": r})
    }

    fn result() -> CampaignResult {
        let mut a = crate::evidence::result::ArmResult {
            id: "a".into(),
            warm: Some(timing("a-w.json", 1)),
            ..Default::default()
        };
        a.concurrency.insert("2".into(), timing("a-c2.json", 2));
        CampaignResult {
            arms: vec![a],
            ..Default::default()
        }
    }

    #[test]
    fn the_timeline_places_each_load_at_the_end_of_its_step() {
        let d = tempfile::tempdir().unwrap();
        std::fs::write(
            d.path().join("a-w.json"),
            requests(&[0.0, 500.0], 500.0).to_string(),
        )
        .unwrap();
        std::fs::write(
            d.path().join("a-c2.json"),
            requests(&[0.0, 0.0, 250.0], 750.0).to_string(),
        )
        .unwrap();
        // Steps: launch 2 s, warm 3 s (its load 1 s), c2 4 s (its load 1 s).
        let cp = serde_json::json!({"steps": [
            {"number": 1, "evidence": "a-launch.json", "wall_ms": 2000.0},
            {"number": 3, "evidence": "a-c2.json", "wall_ms": 4000.0},
            {"number": 2, "evidence": "a-w.json", "wall_ms": 3000.0},
        ]});
        std::fs::write(d.path().join(bundle::CHECKPOINT), cp.to_string()).unwrap();
        let s = read(d.path(), &result());
        assert!(s.timeline_from_checkpoint);
        let w = s.step("a", "warm", 1).unwrap();
        assert_eq!((w.load_start_s, w.load_span_s), (Some(4.0), 1.0));
        let c2 = s.step("a", "warm", 2).unwrap();
        assert_eq!((c2.load_start_s, c2.load_span_s), (Some(8.0), 1.0));
        assert_eq!(c2.values(ITL_FIELD), vec![2.0, 2.0, 2.0]);

        // Without a checkpoint: the loads laid end to end, said so.
        std::fs::remove_file(d.path().join(bundle::CHECKPOINT)).unwrap();
        let s = read(d.path(), &result());
        assert!(!s.timeline_from_checkpoint);
        assert_eq!(s.step("a", "warm", 2).unwrap().load_start_s, Some(1.0));
    }

    #[test]
    fn gpu_readings_are_summed_per_sampling_round() {
        // Two GPUs read at the same moment (one round, one mono_ns), then one GPU alone.
        let g = serde_json::json!({"samples": [
            {"t_ms": 0.5, "mono_ns": 1000, "uuid": "A", "memory_used_mib": 100, "utilization_pct": 50.0, "power_w": 200.0},
            {"t_ms": 0.5, "mono_ns": 1000, "uuid": "B", "memory_used_mib": 300, "utilization_pct": 100.0, "power_w": 300.0},
            {"t_ms": 200.5, "mono_ns": 200_001_000u64, "uuid": "A", "memory_used_mib": 150, "utilization_pct": null, "power_w": null},
        ]});
        let p = gpu_samples(&g);
        assert_eq!(p.len(), 2);
        assert_eq!(
            (
                p[0].t_s,
                p[0].used_mib,
                p[0].utilization_pct,
                p[0].power_w,
                p[0].gpus
            ),
            (0.0005, 400.0, Some(75.0), Some(500.0), 2)
        );
        assert_eq!(
            (p[1].used_mib, p[1].utilization_pct, p[1].power_w),
            (150.0, None, None)
        );
        assert!(gpu_samples(&serde_json::json!({"per_gpu": []})).is_empty());
    }

    #[test]
    fn percentiles_stand_in_for_missing_requests() {
        let d = serde_json::json!({"min": 1.0, "p50": 2.0, "p95": 3.0, "max": 4.0});
        assert_eq!(
            from_distribution(&d),
            vec![(1.0, 0.0), (2.0, 0.5), (3.0, 0.95), (4.0, 1.0)]
        );
    }
}
