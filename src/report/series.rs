//! Plot data read from the timing evidence files: per-request latencies for the CDFs and the
//! GPU memory sampled during each timed step.
//!
//! A timing file written by the orchestrator carries `requests[]` (each with `ok` and
//! `metrics.e2e_ms` / `metrics.ttft_ms`) and `gpu.per_gpu[].memory_used_mib_max`. When a file has
//! no per-request values the CDF falls back to the percentiles of `stats.metrics` (marked
//! approximate), then to the p50/p95 the campaign result holds.

use crate::decide::metric::{Descriptor, E2E, TTFT};
use crate::evidence::result::{CampaignResult, Stat, TimingRecord};
use crate::evidence::RankingMetric;
use serde_json::Value;
use std::path::Path;

/// One arm's latency CDF: (value, cumulative probability) points, ascending.
#[derive(Debug, Clone, PartialEq)]
pub struct Cdf {
    pub arm: String,
    pub label: String,
    pub metric: RankingMetric,
    pub points: Vec<(f64, f64)>,
    /// True when the points are the per-request samples themselves.
    pub exact: bool,
    pub evidence: String,
}

/// GPU memory used (max over the step, summed over the lane's GPUs) during one timed step.
#[derive(Debug, Clone, PartialEq)]
pub struct GpuPoint {
    pub arm: String,
    pub step: String,
    pub used_mib: f64,
}

#[derive(Debug, Clone, Default, PartialEq)]
pub struct Series {
    pub cdfs: Vec<Cdf>,
    pub gpu: Vec<GpuPoint>,
}

fn ecdf(mut v: Vec<f64>) -> Vec<(f64, f64)> {
    v.retain(|x| x.is_finite());
    v.sort_by(f64::total_cmp);
    let n = v.len() as f64;
    v.into_iter()
        .enumerate()
        .map(|(i, x)| (x, (i + 1) as f64 / n))
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

fn from_stat(s: &Stat) -> Vec<(f64, f64)> {
    vec![(s.p50, 0.5), (s.p95, 0.95)]
}

fn cdf_of(
    dir: &Path,
    t: &TimingRecord,
    metric: &Descriptor,
    stat: Option<&Stat>,
) -> Option<(Vec<(f64, f64)>, bool)> {
    // The timing file names the metric by its field name (`metrics.e2e_ms`).
    let metric = metric.field();
    let metric = metric.as_str();
    let file: Option<Value> = std::fs::read(dir.join(&t.evidence))
        .ok()
        .and_then(|b| serde_json::from_slice(&b).ok());
    if let Some(f) = &file {
        if let Some(reqs) = f.get("requests").and_then(Value::as_array) {
            let v: Vec<f64> = reqs
                .iter()
                .filter(|r| r.get("ok").and_then(Value::as_bool).unwrap_or(true))
                .filter_map(|r| r.get("metrics")?.get(metric)?.as_f64())
                .collect();
            if !v.is_empty() {
                return Some((ecdf(v), true));
            }
        }
        if let Some(d) = f
            .get("stats")
            .and_then(|s| s.get("metrics"))
            .and_then(|m| m.get(metric))
        {
            let pts = from_distribution(d);
            if !pts.is_empty() {
                return Some((pts, false));
            }
        }
    }
    stat.map(|s| (from_stat(s), false))
}

fn gpu_used(dir: &Path, evidence: &str) -> Option<f64> {
    let f: Value = serde_json::from_slice(&std::fs::read(dir.join(evidence)).ok()?).ok()?;
    let per = f.get("gpu")?.get("per_gpu")?.as_array()?;
    let v: Vec<f64> = per
        .iter()
        .filter_map(|g| g.get("memory_used_mib_max")?.as_f64())
        .collect();
    (!v.is_empty()).then(|| v.iter().sum())
}

/// Reads the series of every arm's timing files (missing files leave gaps, never errors).
pub fn read(dir: &Path, r: &CampaignResult) -> Series {
    let mut s = Series::default();
    for a in &r.arms {
        let label = if a.label.is_empty() {
            a.id.clone()
        } else {
            a.label.clone()
        };
        if let Some(w) = &a.warm {
            for d in [&E2E, &TTFT] {
                let stat = d.stat(w);
                if let Some((points, exact)) = cdf_of(dir, w, d, stat.as_ref()) {
                    s.cdfs.push(Cdf {
                        arm: a.id.clone(),
                        label: label.clone(),
                        metric: d.metric,
                        points,
                        exact,
                        evidence: w.evidence.clone(),
                    });
                }
            }
        }
        let mut steps: Vec<&TimingRecord> = a.cold.iter().chain(a.warm.iter()).collect();
        steps.extend(a.concurrency.values());
        for t in steps {
            if let Some(used) = gpu_used(dir, &t.evidence) {
                s.gpu.push(GpuPoint {
                    arm: a.id.clone(),
                    step: t.evidence.clone(),
                    used_mib: used,
                });
            }
        }
    }
    s
}
