//! `bakeoff bench --csv` and `--export-vllm` against the reference engine: every number in the
//! CSV row and in the vLLM-format document equals the `--json` summary's, for a single run and
//! for each level of a sweep; a bad output path is refused before any request.

use crate::support::reference;
use reference::{bench, metric, words, Benched, Engine, BENCH_PROFILE as BASE};
use serde_json::Value;
use std::path::{Path, PathBuf};

/// The CSV as (header, rows), split on commas (no field of these runs holds one).
fn read_csv(p: &Path) -> (Vec<String>, Vec<Vec<String>>) {
    let text = std::fs::read_to_string(p).unwrap();
    let mut lines = text.lines().map(|l| {
        assert!(!l.contains('"'), "unexpected quoting: {l}");
        l.split(',').map(String::from).collect::<Vec<_>>()
    });
    let header = lines.next().unwrap();
    let rows: Vec<Vec<String>> = lines.collect();
    for r in &rows {
        assert_eq!(r.len(), header.len());
    }
    (header, rows)
}

/// Every statistics column of `row` equals the summary `v`: the same double, empty where the
/// summary has none.
fn csv_row_equals_summary(header: &[String], row: &[String], v: &Value) {
    let same = |col: &str, want: &Value| {
        let i = header.iter().position(|h| h == col).unwrap();
        match want.as_f64() {
            None => assert_eq!(row[i], "", "{col}: summary has {want}, CSV {}", row[i]),
            Some(w) => assert_eq!(
                row[i].parse::<f64>().unwrap(),
                w,
                "{col}: CSV {} vs summary {w}",
                row[i]
            ),
        }
    };
    for (col, key) in bakeoff::report::csv::RUN_COLUMNS {
        same(col, &v[*key]);
    }
    for m in bakeoff::report::csv::METRICS {
        for s in bakeoff::report::csv::STATS {
            same(&format!("{m}_{s}"), &v["metrics"][*m][*s]);
        }
    }
}

/// The vLLM document's numbers are the summary's under vLLM's names.
fn vllm_equals_summary(x: &Value, v: &Value) {
    assert_eq!(x["completed"], v["ok"]);
    assert_eq!(x["failed"], v["failed"]);
    assert_eq!(x["total_input_tokens"], v["prompt_tokens_total"]);
    assert_eq!(x["total_output_tokens"], v["completion_tokens_total"]);
    assert_eq!(x["request_throughput"], v["request_rate_per_s"]);
    assert_eq!(x["output_throughput"], v["aggregate_output_tok_s"]);
    assert_eq!(x["total_token_throughput"], v["aggregate_total_tok_s"]);
    assert_eq!(x["duration"], v["window_s"]);
    assert_eq!(x["request_goodput"], Value::Null);
    assert_eq!(x["max_concurrency"], v["load"]["concurrency"]);
    for (name, ours) in [
        ("ttft", "ttft_ms"),
        ("tpot", "itl_ms"),
        ("itl", "chunk_gap_ms"),
        ("e2el", "e2e_ms"),
    ] {
        let d = &v["metrics"][ours];
        assert!(d.is_object(), "the run measured {ours}");
        assert_eq!(x[format!("mean_{name}_ms")], d["mean"], "{name}");
        assert_eq!(x[format!("median_{name}_ms")], d["p50"], "{name}");
        assert_eq!(x[format!("std_{name}_ms")], d["std"], "{name}");
        for (p, f) in [
            ("50", "p50"),
            ("90", "p90"),
            ("95", "p95"),
            ("99", "p99"),
            ("99.9", "p999"),
        ] {
            assert_eq!(x[format!("p{p}_{name}_ms")], d[f], "p{p} {name}");
        }
    }
}

/// A successful `bakeoff bench` with `--csv NAME.csv --export-vllm v.json --json NAME.json`.
struct Exported {
    run: Benched,
    csv: PathBuf,
    vllm: PathBuf,
}

/// Runs `bakeoff bench` against `e` with the `load` flags (one string), `--ignore-eos`, `--csv`
/// and `--export-vllm`, every output named after `name`; asserts it succeeded.
fn bench_exporting(e: &Engine, name: &str, load: &str) -> Exported {
    let (csv, vllm) = (e.path(&format!("{name}.csv")), e.path("v.json"));
    let mut args = words(load);
    args.push("--ignore-eos");
    args.extend(["--csv", csv.to_str().unwrap()]);
    args.extend(["--export-vllm", vllm.to_str().unwrap()]);
    let run = e.bench_ok(name, &args);
    Exported { run, csv, vllm }
}

#[test]
fn a_bench_run_writes_csv_and_vllm_json_equal_to_its_summary() {
    let _g = reference::serial();
    let e = Engine::start(BASE);
    let Exported { run, csv, vllm } = bench_exporting(
        &e,
        "b",
        "--requests 12 --concurrency 2 --max-tokens 40 --prompt-tokens 64",
    );
    // The summary itself carries p99.9, and the printed table shows it with mean and std.
    let stdout = run.stdout();
    let v = run.v;
    assert!(
        stdout.contains("p99.9") && stdout.contains("std") && stdout.contains("vLLM's TPOT"),
        "{stdout}"
    );
    assert!(metric(&v, "ttft_ms", "p999") >= metric(&v, "ttft_ms", "p99"));

    let (h, rows) = read_csv(&csv);
    assert_eq!(rows.len(), 1);
    csv_row_equals_summary(&h, &rows[0], &v);
    let at = |c: &str| rows[0][h.iter().position(|x| x == c).unwrap()].clone();
    assert_eq!(at("concurrency"), "2");
    assert_eq!(at("mode"), "closed-loop");
    assert_eq!(at("ok"), "12");

    let x: Value = serde_json::from_slice(&std::fs::read(&vllm).unwrap()).unwrap();
    vllm_equals_summary(&x, &v);
    // The declared decode speed, 80 tok/s: 12.5 ms per token after the first.
    let tpot = x["median_tpot_ms"].as_f64().unwrap();
    assert!((tpot - 12.5).abs() < 0.3, "TPOT {tpot}");
    assert_eq!(x["backend"], "openai-chat");
    assert_eq!(x["request_rate"], "inf");
    assert_eq!(x["total_input_tokens"], 12 * 64);
    assert_eq!(x["total_output_tokens"], 12 * 40);
}

#[test]
fn a_sweep_writes_one_csv_row_and_one_vllm_file_per_level() {
    let _g = reference::serial();
    let e = Engine::start(BASE);
    let Exported { run, csv, vllm } = bench_exporting(
        &e,
        "s",
        "--requests 6 --concurrency 1,3 --max-tokens 8 --prompt-tokens 32",
    );
    let v = run.v;
    let levels = v["levels"].as_array().unwrap();
    assert_eq!(levels.len(), 2);
    let (h, rows) = read_csv(&csv);
    assert_eq!(rows.len(), 2);
    for (i, (level, c)) in levels.iter().zip([1, 3]).enumerate() {
        csv_row_equals_summary(&h, &rows[i], level);
        let col = |n: &str| rows[i][h.iter().position(|x| x == n).unwrap()].clone();
        assert_eq!(col("sweep_level"), i.to_string());
        assert_eq!(col("concurrency"), c.to_string());
        let file = e.path(&format!("v-concurrency{c}.json"));
        let x: Value = serde_json::from_slice(&std::fs::read(&file).unwrap()).unwrap();
        vllm_equals_summary(&x, level);
        assert_eq!(x["max_concurrency"], c);
    }
    assert!(
        !vllm.exists(),
        "a sweep writes per-level files, not the bare path"
    );
}

#[test]
fn an_unwritable_export_path_is_refused_before_any_request() {
    let e = Engine::start(BASE);
    let missing = e.path("no-such-dir").join("b.csv");
    let (o, v) = bench(
        &e.url,
        &["--requests", "2", "--csv", missing.to_str().unwrap()],
        &e.path("b.json"),
    );
    assert!(!o.status.success());
    assert!(v.is_none(), "no run, no summary");
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("--csv") && err.contains("does not exist") && !err.contains("running"),
        "{err}"
    );
}

/// A campaign bundle's `arm-stats.csv`: one row per timed step of every arm, whose statistics
/// columns equal that step file's `stats` (the same columns as `bench --csv`). Returns the rows'
/// (arm, step) pairs. Called on the bundles the campaign tests run.
pub fn campaign_csv_equals_step_files(bundle: &Path) -> Vec<(String, String)> {
    let (h, rows) = read_csv(&bundle.join("arm-stats.csv"));
    let col = |r: &[String], n: &str| r[h.iter().position(|x| x == n).unwrap()].clone();
    assert_eq!(
        &h[..6],
        ["arm", "label", "role", "step", "concurrency", "evidence"]
    );
    let mut seen = Vec::new();
    for r in &rows {
        let f: Value =
            serde_json::from_slice(&std::fs::read(bundle.join(col(r, "evidence"))).unwrap())
                .unwrap();
        csv_row_equals_summary(&h, r, &f["stats"]);
        seen.push((col(r, "arm"), col(r, "step")));
    }
    seen
}

#[test]
fn a_rendered_bundle_has_arm_stats_csv_in_its_manifest() {
    use crate::support::decide_fixture as fixture;
    let d = tempfile::tempdir().unwrap();
    let r = fixture::seed();
    fixture::write_bundle(d.path(), &r);
    bakeoff::report::render_all(d.path()).unwrap();
    let rows = campaign_csv_equals_step_files(d.path());
    let want: usize = r
        .arms
        .iter()
        .map(|a| {
            a.cold.iter().count()
                + a.warm.iter().count()
                + a.concurrency.len()
                + a.long_context
                    .as_ref()
                    .and_then(|l| l.timing.as_ref())
                    .iter()
                    .count()
        })
        .sum();
    assert_eq!(rows.len(), want, "{rows:?}");
    assert!(rows.iter().any(|(_, s)| s == "warm"));
    assert!(rows.iter().any(|(_, s)| s.starts_with('c') && s != "cold"));
    let (m, problems) = bakeoff::evidence::manifest::verify(d.path(), None).unwrap();
    assert!(problems.is_empty(), "{problems:?}");
    assert!(m.files.iter().any(|f| f.path == "arm-stats.csv"));

    // A step file gone: its row stays, with the figures campaign-result.json holds.
    let a = r.arms.iter().find(|a| a.warm.is_some()).unwrap();
    let w = a.warm.as_ref().unwrap();
    std::fs::remove_file(d.path().join(&w.evidence)).unwrap();
    let text = bakeoff::report::csv::campaign(d.path(), &r);
    let (h, _) = (
        text.lines().next().unwrap().split(',').collect::<Vec<_>>(),
        (),
    );
    let row: Vec<&str> = text
        .lines()
        .find(|l| l.contains(&w.evidence))
        .unwrap()
        .split(',')
        .collect();
    let at = |n: &str| row[h.iter().position(|x| *x == n).unwrap()];
    assert_eq!(
        at("ttft_ms_p50").parse::<f64>().unwrap(),
        w.ttft_ms.unwrap().p50
    );
    assert_eq!(at("ok"), w.requests_ok.to_string());
    assert_eq!(at("ttft_ms_p999"), "");
}
