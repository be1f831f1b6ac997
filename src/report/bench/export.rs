//! `bakeoff bench --csv PATH` and `--export-vllm PATH`: the summary as a spreadsheet row per
//! level, and as the flat result document of `vllm bench serve --save-result`, so dashboards
//! built for vLLM's results read bakeoff's. docs/metrics.md maps every name and states where the
//! definitions differ.

use crate::bench::{ArrivalKind, BenchReport};
use crate::report::csv;
use crate::workload::Endpoint;
use anyhow::{bail, Context, Result};
use serde_json::{json, Map, Value};
use std::path::{Path, PathBuf};

/// vLLM's metric names and the bakeoff metric each is filled from.
pub const VLLM_METRICS: &[(&str, &str)] = &[
    ("ttft", "ttft_ms"),
    ("tpot", "itl_ms"),
    ("itl", "chunk_gap_ms"),
    ("e2el", "e2e_ms"),
];

/// The percentiles exported, as vLLM names them (`p{p}_{metric}_ms`, `p99.9_ttft_ms`), with the
/// field of bakeoff's distribution that holds each.
pub const VLLM_PERCENTILES: &[(&str, &str)] = &[
    ("50", "p50"),
    ("90", "p90"),
    ("95", "p95"),
    ("99", "p99"),
    ("99.9", "p999"),
];

/// Refuses, before any request is sent, an output path whose directory does not exist (a run of
/// minutes must not end in "cannot write").
pub fn check_paths(csv: Option<&Path>, vllm: Option<&Path>) -> Result<()> {
    for (flag, p) in [("--csv", csv), ("--export-vllm", vllm)] {
        let Some(p) = p else { continue };
        if p.is_dir() {
            bail!(
                "{flag} {}: is a directory; give a file name, like {}",
                p.display(),
                p.join(if flag == "--csv" {
                    "bench.csv"
                } else {
                    "vllm-result.json"
                })
                .display()
            );
        }
        let dir = match p.parent() {
            Some(d) if !d.as_os_str().is_empty() => d,
            _ => Path::new("."),
        };
        if !dir.is_dir() {
            bail!(
                "{flag} {}: the directory {} does not exist (create it, or write elsewhere)",
                p.display(),
                dir.display()
            );
        }
    }
    Ok(())
}

/// The CSV: a header and one row per level (one row for a single run). The columns before the
/// statistics say which level the row is; the statistics are `report::csv`'s, the same a
/// campaign's `arm-stats.csv` has.
pub fn csv_document(reports: &[BenchReport]) -> Result<String> {
    let mut header: Vec<String> = [
        "sweep_level",
        "mode",
        "concurrency",
        "rate_per_s",
        "model",
        "url",
        "started_at",
        "interrupted",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    header.extend(csv::stats_header());
    let mut rows = Vec::with_capacity(reports.len());
    for (i, r) in reports.iter().enumerate() {
        let mut row = vec![
            i.to_string(),
            csv::cell(&json!(r.load.mode)),
            csv::cell(&json!(r.load.concurrency)),
            csv::cell(&json!(r.load.rate_per_s)),
            r.model.clone(),
            r.url.clone(),
            r.started_at.clone(),
            r.interrupted.to_string(),
        ];
        row.extend(csv::stats_cells(&serde_json::to_value(&r.stats)?));
        rows.push(row);
    }
    Ok(csv::document(&header, &rows))
}

/// One level as vLLM's `--save-result` document: its flat key names, the values of bakeoff's
/// summary (nearest-rank percentiles, sample standard deviation: see docs/metrics.md).
/// `request_goodput` is null unless a goodput (requests/s meeting the SLOs) is given, as vLLM
/// writes it without `--goodput`.
pub fn vllm_result(r: &BenchReport, request_goodput: Option<f64>) -> Value {
    let s = &r.stats;
    let mut m = Map::new();
    let mut put = |k: &str, v: Value| {
        m.insert(k.to_string(), v);
    };
    put("date", json!(vllm_date(&r.started_at)));
    let backend = match r.endpoint {
        Endpoint::Chat => "openai-chat",
        Endpoint::Completions => "openai",
    };
    put("endpoint_type", json!(backend));
    put("backend", json!(backend));
    put("label", json!("bakeoff"));
    put("model_id", json!(r.model));
    put("tokenizer_id", Value::Null);
    put("num_prompts", json!(r.load.requests));
    put(
        "request_rate",
        match r.load.rate_per_s {
            Some(rate) => json!(rate),
            None => json!("inf"),
        },
    );
    // vLLM's burstiness 1 is Poisson arrivals; constant spacing has no finite burstiness.
    put(
        "burstiness",
        match r.load.arrival {
            Some(ArrivalKind::Poisson) => json!(1.0),
            _ => Value::Null,
        },
    );
    put("max_concurrency", json!(r.load.concurrency));
    put("duration", json!(s.window_s));
    put("completed", json!(s.ok));
    put("failed", json!(s.failed));
    put("total_input_tokens", json!(s.prompt_tokens_total));
    put("total_output_tokens", json!(s.completion_tokens_total));
    put("request_throughput", json!(s.request_rate_per_s));
    put("request_goodput", json!(request_goodput));
    put("output_throughput", json!(s.aggregate_output_tok_s));
    put("total_token_throughput", json!(s.aggregate_total_tok_s));
    for (name, ours) in VLLM_METRICS {
        let d = s.metrics.get(*ours);
        let f = |pick: fn(&crate::metrics::stats::Distribution) -> f64| json!(d.map(pick));
        put(&format!("mean_{name}_ms"), f(|d| d.mean));
        put(&format!("median_{name}_ms"), f(|d| d.p50));
        put(&format!("std_{name}_ms"), f(|d| d.std));
        for (p, field) in VLLM_PERCENTILES {
            let v = d
                .and_then(|d| serde_json::to_value(d).ok())
                .map(|v| v[*field].clone())
                .unwrap_or(Value::Null);
            put(&format!("p{p}_{name}_ms"), v);
        }
    }
    put("bakeoff_version", json!(r.bakeoff_version));
    put("bakeoff_interrupted", json!(r.interrupted));
    put(
        "bakeoff_definitions",
        json!({
            "ttft": "bakeoff ttft_ms: send -> first chunk with visible content",
            "tpot": "bakeoff itl_ms: (e2e - ttfo) / (completion_tokens - 1), from the first output of any kind (reasoning included)",
            "itl": "bakeoff chunk_gap_ms: gaps between output chunks, pooled over requests; gaps between chunks one read returned together are left out",
            "e2el": "bakeoff e2e_ms: send -> end of stream",
            "percentiles": "nearest rank (vLLM interpolates); median is p50 by nearest rank",
            "std": "sample standard deviation, n - 1 (vLLM: population, n)",
            "duration": "first send -> last successful completion",
        }),
    );
    Value::Object(m)
}

/// vLLM's `date` (`%Y%m%d-%H%M%S`) from an RFC 3339 time.
fn vllm_date(rfc3339: &str) -> String {
    let digits = |s: &str| s.chars().filter(char::is_ascii_digit).collect::<String>();
    match rfc3339.split_once('T') {
        Some((d, t)) => format!("{}-{}", digits(d), digits(&t[..t.len().min(8)])),
        None => digits(rfc3339),
    }
}

/// Where each level's vLLM document goes: PATH for a single run; for a sweep one file per level,
/// `-concurrency<N>` inserted before the extension, as vLLM names its result files
/// (`out.json` → `out-concurrency4.json`).
pub fn vllm_paths(path: &Path, reports: &[BenchReport]) -> Vec<PathBuf> {
    if reports.len() <= 1 {
        return vec![path.to_path_buf()];
    }
    let stem = path
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    let ext = path
        .extension()
        .map(|e| format!(".{}", e.to_string_lossy()))
        .unwrap_or_default();
    reports
        .iter()
        .enumerate()
        .map(|(i, r)| {
            let level = match r.load.concurrency {
                Some(c) => format!("concurrency{c}"),
                None => format!("level{i}"),
            };
            path.with_file_name(format!("{stem}-{level}{ext}"))
        })
        .collect()
}

/// Writes `--csv` and `--export-vllm` (each atomically); returns what it wrote, in words, for
/// the caller to say.
pub fn write(
    reports: &[BenchReport],
    csv_path: Option<&Path>,
    vllm: Option<&Path>,
) -> Result<Vec<String>> {
    let mut said = Vec::new();
    if let Some(p) = csv_path {
        crate::evidence::write_atomic(p, csv_document(reports)?.as_bytes())
            .with_context(|| format!("cannot write --csv {}", p.display()))?;
        said.push(format!("CSV written to {}", p.display()));
    }
    if let Some(p) = vllm {
        for (r, path) in reports.iter().zip(vllm_paths(p, reports)) {
            // vLLM's request_goodput: the level's goodput under `--slo` (null without one).
            let goodput = r.goodput.as_ref().and_then(|g| g.goodput_req_s);
            let bytes = serde_json::to_vec_pretty(&vllm_result(r, goodput))?;
            crate::evidence::write_atomic(&path, &bytes)
                .with_context(|| format!("cannot write --export-vllm {}", path.display()))?;
            said.push(format!("vLLM-format result written to {}", path.display()));
        }
    }
    Ok(said)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metrics::stats::Distribution;
    use crate::metrics::summary::Collector;

    fn report(concurrency: Option<usize>) -> BenchReport {
        let mut stats = Collector::default().summarize(1);
        // Known distributions: TTFT 1..=1000 ms, E2E 10 ms apart, ITL constant, no chunk gaps.
        let ramp: Vec<f64> = (1..=1000).map(|x| x as f64).collect();
        stats.metrics.insert(
            "ttft_ms".into(),
            Distribution::from_samples(&ramp, 1).unwrap(),
        );
        let e2e: Vec<f64> = (1..=10).map(|x| 10.0 * x as f64).collect();
        stats.metrics.insert(
            "e2e_ms".into(),
            Distribution::from_samples(&e2e, 1).unwrap(),
        );
        stats.metrics.insert(
            "itl_ms".into(),
            Distribution::from_samples(&[12.5; 4], 1).unwrap(),
        );
        stats.ok = 1000;
        stats.failed = 2;
        stats.prompt_tokens_total = 64_000;
        stats.completion_tokens_total = 40_000;
        stats.window_s = Some(20.0);
        stats.request_rate_per_s = Some(50.0);
        stats.aggregate_output_tok_s = Some(2000.0);
        stats.aggregate_total_tok_s = Some(5200.0);
        BenchReport {
            bakeoff_version: crate::VERSION,
            tool: "bakeoff bench",
            started_at: "2026-12-01T00:17:08.123Z".into(),
            url: "http://127.0.0.1:8000".into(),
            model: "m".into(),
            endpoint: Endpoint::Chat,
            sampling: Map::new(),
            load: crate::bench::LoadRecord {
                concurrency,
                requests: Some(1000),
                ..Default::default()
            },
            prompt: json!({}),
            interrupted: false,
            arrival_clock: json!({}),
            warnings: vec![],
            tls: None,
            stats,
            slo: None,
            goodput: None,
            workload: None,
            trace: None,
            points: Vec::new(),
        }
    }

    #[test]
    fn vllm_keys_are_exact_and_values_come_from_the_distribution() {
        let v = vllm_result(&report(Some(4)), None);
        let keys: Vec<&str> = v.as_object().unwrap().keys().map(|k| k.as_str()).collect();
        for k in [
            "date",
            "backend",
            "model_id",
            "completed",
            "failed",
            "total_input_tokens",
            "total_output_tokens",
            "request_throughput",
            "request_goodput",
            "output_throughput",
            "total_token_throughput",
            "mean_ttft_ms",
            "median_ttft_ms",
            "std_ttft_ms",
            "p90_ttft_ms",
            "p95_ttft_ms",
            "p99_ttft_ms",
            "p99.9_ttft_ms",
            "mean_tpot_ms",
            "p99.9_tpot_ms",
            "median_itl_ms",
            "p99_itl_ms",
            "mean_e2el_ms",
            "std_e2el_ms",
            "p99.9_e2el_ms",
            "max_concurrency",
            "request_rate",
        ] {
            assert!(keys.contains(&k), "{k} missing from {keys:?}");
        }
        assert_eq!(v["date"], "20261201-001708");
        assert_eq!(v["backend"], "openai-chat");
        assert_eq!(v["completed"], 1000);
        assert_eq!(v["failed"], 2);
        assert_eq!(v["total_input_tokens"], 64_000);
        assert_eq!(v["total_output_tokens"], 40_000);
        assert_eq!(v["request_throughput"], 50.0);
        assert_eq!(v["output_throughput"], 2000.0);
        assert_eq!(v["total_token_throughput"], 5200.0);
        assert_eq!(v["request_goodput"], Value::Null, "no SLO: null, as vLLM");
        assert_eq!(v["request_rate"], "inf");
        assert_eq!(v["max_concurrency"], 4);
        // TTFT 1..=1000: nearest rank.
        assert_eq!(v["median_ttft_ms"], 500.0);
        assert_eq!(v["p50_ttft_ms"], 500.0);
        assert_eq!(v["p90_ttft_ms"], 900.0);
        assert_eq!(v["p99_ttft_ms"], 990.0);
        assert_eq!(v["p99.9_ttft_ms"], 999.0);
        assert_eq!(v["mean_ttft_ms"], 500.5);
        let std = v["std_ttft_ms"].as_f64().unwrap();
        assert!((std - 288.8194360957494).abs() < 1e-9, "{std}");
        assert_eq!(v["mean_e2el_ms"], 55.0);
        assert_eq!(v["p99.9_e2el_ms"], 100.0);
        assert_eq!(v["mean_tpot_ms"], 12.5);
        assert_eq!(v["std_tpot_ms"], 0.0);
        // No chunk gaps measured: null, not 0.
        assert_eq!(v["mean_itl_ms"], Value::Null);
        assert_eq!(v["p99.9_itl_ms"], Value::Null);
        // A goodput given is written.
        assert_eq!(
            vllm_result(&report(Some(4)), Some(7.5))["request_goodput"],
            7.5
        );
    }

    #[test]
    fn a_sweep_writes_one_vllm_file_per_level_and_one_csv_row_each() {
        let rs = vec![report(Some(1)), report(Some(4))];
        let p = vllm_paths(Path::new("/tmp/x/out.json"), &rs);
        assert_eq!(
            p,
            vec![
                PathBuf::from("/tmp/x/out-concurrency1.json"),
                PathBuf::from("/tmp/x/out-concurrency4.json")
            ]
        );
        assert_eq!(
            vllm_paths(Path::new("out.json"), &rs[..1]),
            vec![PathBuf::from("out.json")]
        );
        let doc = csv_document(&rs).unwrap();
        let lines: Vec<&str> = doc.lines().collect();
        assert_eq!(lines.len(), 3);
        let h: Vec<&str> = lines[0].split(',').collect();
        let row: Vec<&str> = lines[2].split(',').collect();
        assert_eq!(h.len(), row.len());
        let at = |n: &str| row[h.iter().position(|x| *x == n).unwrap()];
        assert_eq!(at("sweep_level"), "1");
        assert_eq!(at("concurrency"), "4");
        assert_eq!(at("ttft_ms_p999"), "999.0");
        assert_eq!(at("ttft_ms_mean"), "500.5");
        assert_eq!(at("total_tok_s"), "5200.0");
        assert_eq!(at("chunk_gap_ms_p50"), "");
    }

    #[test]
    fn output_paths_are_checked_before_the_run() {
        let d = tempfile::tempdir().unwrap();
        assert!(check_paths(Some(&d.path().join("a.csv")), None).is_ok());
        let e = check_paths(None, Some(&d.path().join("missing/v.json")))
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("--export-vllm") && e.contains("does not exist"),
            "{e}"
        );
        let e = check_paths(Some(d.path()), None).unwrap_err().to_string();
        assert!(e.contains("--csv") && e.contains("is a directory"), "{e}");
    }
}
