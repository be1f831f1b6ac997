//! `[workload.open_loop]` and replayed conversations in a campaign, on reference-engine arms:
//! open-loop rate steps with a cap, a rate sweep, a warm-up by time and a dataset's conversations
//! replayed run, verify, are reported per rate and shown by `--dry-run`; a campaign's open-loop
//! step and `bakeoff bench` at the same rate on the same engine write the same per-request line
//! and agree on the figures; bad tables are one-line errors naming the file, field and fix.

use crate::support::campaign::*;
use crate::support::exclusive as serial;
use serde_json::Value;
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

fn multiturn() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/datasets/sample-multiturn.jsonl")
}

/// A two-arm campaign (reference engines of `profile`, the incumbent started by the test) with
/// the smoke preflight only; `workload` goes after `[workload]`'s keys, `tables` after it.
fn write(t: &Camp, profile: &str, workload: &str, tables: &str) -> PathBuf {
    t.profile("inc", profile);
    t.profile("cand", profile);
    let small = Small {
        max_tokens: 16,
        reps: 2,
        workload,
        ignore_eos: true,
        tables,
        ..Small::default()
    };
    t.write_small(
        "open-loop",
        &small,
        &[("inc", "incumbent"), ("cand", "candidate")],
    )
}

fn keys(v: &Value) -> BTreeSet<String> {
    v.as_object().unwrap().keys().cloned().collect()
}

const PROFILE: &str =
    "ttft_ms = 5\nprefill_tok_s = 50000\ndecode_tok_s = 400\ncontext_tokens = 8192\nprefix_cache = true";

#[test]
fn a_campaign_runs_a_capped_rate_step_a_rate_sweep_and_replayed_conversations() {
    let _g = serial();
    let t = Camp::new();
    let data = t.path("multiturn.jsonl");
    std::fs::copy(multiturn(), &data).unwrap();
    let file = write(
        &t,
        PROFILE,
        "",
        "[workload.open_loop]\nrates = [4.0, 8.0]\narrival = \"poisson\"\nmax_concurrency = 2\nrequests = 8\nwarmup_secs = 0.5\n[workload.conversation]\nturns = 2\n[workload.dataset]\npath = \"multiturn.jsonl\"\n",
    );
    // The dry run prints each: the sweep, the capped rate steps and the replayed conversations.
    let o = Command::new(BIN)
        .args(["run", "--dry-run"])
        .arg(&file)
        .output()
        .unwrap();
    let dry = text(&o);
    assert!(o.status.success(), "{dry}");
    for want in [
        "open loop  a rate sweep at rates 4, 8 req/s (poisson arrivals), at most 2 in flight, 8 measured request(s) per rate",
        "warm 8 request(s) open loop at 4 req/s (poisson), cap 2 in flight, warm-up 0.5 s",
        "warm 8 request(s) open loop at 8 req/s (poisson), cap 2 in flight, warm-up 0.5 s",
        "inc-timing-dataset-r4-cap2-warm.json",
        "multi-turn conversations of 2 turns (history resent, think time 0 ms), replayed from dataset",
    ] {
        assert!(dry.contains(want), "missing {want:?} in:\n{dry}");
    }
    let b = t.run_ok("inc", &file);
    verify(&b);
    let r = json(&b.join("campaign-result.json"));
    assert_eq!(r["workload"]["source"]["kind"], "conversation", "{r:#}");
    for arm_id in ["inc", "cand"] {
        let a = arm(&r, arm_id);
        let rates = a["rates"].as_object().unwrap();
        assert_eq!(
            rates.keys().cloned().collect::<Vec<_>>(),
            ["r4-cap2", "r8-cap2"],
            "{a:#}"
        );
        for (key, rate) in [("r4-cap2", 4.0), ("r8-cap2", 8.0)] {
            let rec = &rates[key];
            assert_eq!(rec["rate_per_s"], rate, "{rec:#}");
            assert_eq!(rec["max_concurrency"], 2);
            assert_eq!(rec["arrival"], "poisson");
            assert_eq!(rec["requests_ok"], 8, "{rec:#}");
            assert!(
                rec["achieved_rate_per_s"].as_f64().unwrap() > 0.0,
                "{rec:#}"
            );
            assert!(rec["ttft_ms"]["p50"].as_f64().unwrap() > 0.0, "{rec:#}");
            let ev = json(&b.join(rec["evidence"].as_str().unwrap()));
            let load = &ev["load"];
            assert_eq!(load["mode"], "open-loop", "{load:#}");
            assert_eq!(load["rate_per_s"], rate);
            assert_eq!(load["max_concurrency"], 2);
            assert_eq!(load["arrival"], "poisson");
            assert_eq!(load["warmup_duration_s"], 0.5);
            assert!(load["peak_in_flight"].as_u64().unwrap() <= 2, "{load:#}");
            let lines = ev["requests"].as_array().unwrap();
            let warm = lines.iter().filter(|l| l["warmup"] == true).count() as u64;
            assert_eq!(warm, load["warmup_requests"].as_u64().unwrap(), "{load:#}");
            assert_eq!(lines.len() as u64, 8 + warm);
            // Each open-loop arrival replays one of the dataset's conversations.
            for l in lines {
                assert_eq!(l["ok"], true, "{l}");
                assert!(l["turn"].as_u64().is_some(), "{l}");
                assert!(l["source"]["id"].as_str().is_some(), "{l}");
            }
            assert_eq!(ev["stats"]["ok"], 8);
        }
        // The closed-loop warm step replays them too: one stream, turns 1 and 2 of conv-00.
        let warm = json(&b.join(a["warm"]["evidence"].as_str().unwrap()));
        let turns: Vec<(u64, String)> = warm["requests"]
            .as_array()
            .unwrap()
            .iter()
            .map(|l| {
                (
                    l["turn"].as_u64().unwrap(),
                    l["source"]["id"].as_str().unwrap().to_string(),
                )
            })
            .collect();
        assert_eq!(
            turns,
            [(1, "conv-00".to_string()), (2, "conv-00".to_string())],
            "{warm:#}"
        );
        assert!(
            warm["prompt"]["conversation"]["dataset"].is_object(),
            "{warm:#}"
        );
    }
    // arm-stats.csv has a row per arm and rate, named by its key.
    let csv = std::fs::read_to_string(b.join("arm-stats.csv")).unwrap();
    for arm_id in ["inc", "cand"] {
        for key in ["r4-cap2", "r8-cap2"] {
            let row = format!("{arm_id},");
            assert!(
                csv.lines()
                    .any(|l| l.starts_with(&row) && l.contains(&format!(",{key},2,"))),
                "no {arm_id} {key} row in:\n{csv}"
            );
        }
    }
    // The report has a row per arm and rate.
    let md = std::fs::read_to_string(b.join("publication-summary.md")).unwrap();
    assert!(md.contains("## Open-loop steps"), "{md}");
    assert!(md.contains("| inc | 4.0 | poisson | 2 |"), "{md}");
    assert!(md.contains("| cand | 8.0 | poisson | 2 |"), "{md}");
}

/// The reference engine's declared timing: a fixed 20 ms TTFT, 250 tok/s decode (4 ms a token),
/// no slowdown with concurrency, so the campaign's step and bench face the same figures.
const SAME: &str =
    "ttft_ms = 20\nprefill_tok_s = 1000000\ndecode_tok_s = 250\ncontext_tokens = 8192";

fn p50(stats: &Value, metric: &str) -> f64 {
    stats["metrics"][metric]["p50"]
        .as_f64()
        .unwrap_or_else(|| panic!("no {metric} p50 in {stats:#}"))
}

#[test]
fn a_campaign_open_loop_step_and_bench_at_the_same_rate_write_the_same_lines_and_agree() {
    let _g = serial();
    let t = Camp::new();
    let file = write(
        &t,
        SAME,
        "",
        "[workload.open_loop]\nrates = [5.0]\nmax_concurrency = 3\nrequests = 24\n",
    );
    let b = t.run_ok("inc", &file);
    verify(&b);
    let r = json(&b.join("campaign-result.json"));
    let rec = &arm(&r, "cand")["rates"]["r5-cap3"];
    let step = json(&b.join(rec["evidence"].as_str().unwrap()));
    // The same spec through `bakeoff bench`, on an engine of the same profile.
    let port = free_port();
    let mut engine = Command::new(BIN)
        .args(["engine", "--profile"])
        .arg(t.path("cand.toml"))
        .args(["--host", "127.0.0.1", "--port", &port.to_string()])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    wait_serving(port, std::time::Duration::from_secs(20));
    let (jsonl, summary) = (t.path("bench.jsonl"), t.path("bench.json"));
    let o = Command::new(BIN)
        .arg("bench")
        .arg(format!("http://127.0.0.1:{port}"))
        .args(["--rate", "5", "--max-concurrency", "3", "--requests", "24"])
        .args([
            "--prompt-tokens",
            "64",
            "--max-tokens",
            "16",
            "--ignore-eos",
        ])
        .args(["--seed", "0", "--no-progress"])
        .arg("--requests-jsonl")
        .arg(&jsonl)
        .arg("--json")
        .arg(&summary)
        .output()
        .unwrap();
    let _ = engine.kill();
    let _ = engine.wait();
    assert!(o.status.success(), "{}", text(&o));
    let bench = json(&summary);
    // The load records have the same keys (bench's `LoadRecord`), and say the same load.
    let (bl, sl) = (&bench["load"], &step["load"]);
    let mut step_keys = keys(sl);
    step_keys.remove("first_index");
    assert_eq!(keys(bl), step_keys, "bench {bl:#}\nstep {sl:#}");
    for k in [
        "mode",
        "rate_per_s",
        "max_concurrency",
        "arrival",
        "requests",
    ] {
        assert_eq!(bl[k], sl[k], "{k}");
    }
    // One per-request line writer: the same key set on every line both ways.
    let bench_lines: Vec<Value> = std::fs::read_to_string(&jsonl)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let step_lines = step["requests"].as_array().unwrap();
    assert_eq!((bench_lines.len(), step_lines.len()), (24, 24));
    let want = keys(&bench_lines[0]);
    for l in bench_lines.iter().chain(step_lines) {
        assert_eq!(keys(l), want, "{l}");
        assert_eq!(keys(&l["metrics"]), keys(&bench_lines[0]["metrics"]));
    }
    // The figures agree within noise. TTFT is the declared 20 ms plus the client's and the
    // loopback's overhead (well under a millisecond each side): within 3 ms or 15 %. Decode is
    // the declared 250 tok/s, paced by the engine's timer: within 10 %. The achieved rate is
    // 24 requests over ~4.6 s of constant arrivals at 5/s on both sides: within 15 %.
    // Bench's report flattens its stats into the top level; the step keeps them in `stats`.
    let (bs, ss) = (&bench, &step["stats"]);
    let (bt, st) = (p50(bs, "ttft_ms"), p50(ss, "ttft_ms"));
    let (bd, sd) = (p50(bs, "decode_tok_s"), p50(ss, "decode_tok_s"));
    let (br, sr) = (
        bs["request_rate_per_s"].as_f64().unwrap(),
        ss["request_rate_per_s"].as_f64().unwrap(),
    );
    eprintln!(
        "open-loop 5/s cap 3, 24 requests: TTFT p50 bench {bt:.2} ms, campaign {st:.2} ms; decode p50 bench {bd:.1} tok/s, campaign {sd:.1} tok/s; achieved rate bench {br:.3}/s, campaign {sr:.3}/s"
    );
    assert!(
        (bt - st).abs() <= f64::max(3.0, 0.15 * bt),
        "TTFT {bt} vs {st}"
    );
    assert!((bd - sd).abs() <= 0.10 * bd, "decode {bd} vs {sd}");
    assert!((br - sr).abs() <= 0.15 * br, "rate {br} vs {sr}");
    assert_eq!(rec["ttft_ms"]["p50"].as_f64().unwrap(), st);
}

fn load_error(open_loop: &str) -> String {
    let t = Camp::new();
    let p = write(
        &t,
        PROFILE,
        "",
        &format!("[workload.open_loop]\n{open_loop}"),
    );
    match bakeoff::campaign::load(&p) {
        Ok(_) => String::new(),
        Err(e) => {
            let msg = e.to_string();
            assert_eq!(e.diagnostics.len(), 1, "one error: {msg}");
            let text = std::fs::read_to_string(&p).unwrap();
            let field = msg.split(": ").nth(1).unwrap().rsplit('.').next().unwrap();
            let line = line_of(&text, &format!("{field} ="), 0);
            msg.replace(&format!("{}:{line}:", p.display()), "FILE:LINE:")
        }
    }
}

#[test]
fn bad_open_loop_tables_are_one_line_errors_naming_the_file_field_and_fix() {
    assert_eq!(
        load_error("rates = [2.0, 4.5]\nmax_concurrency = 4\nwarmup_secs = 2\n"),
        ""
    );
    for (table, want) in [
        (
            "rates = [0.0]\n",
            "FILE:LINE: workload.open_loop.rates: rate 0 is not a positive number of requests per second; give rates above 0, e.g. rates = [2.0, 4.0]",
        ),
        (
            "rates = [2.0, -1.0]\n",
            "FILE:LINE: workload.open_loop.rates: rate -1 is not a positive number of requests per second; give rates above 0",
        ),
        (
            "rates = []\n",
            "FILE:LINE: workload.open_loop.rates: rates = [] gives no point to run: an open-loop step (or a rate sweep) needs at least one rate; give one rate or more in requests per second, e.g. rates = [2.0, 4.0], or remove [workload.open_loop]",
        ),
        (
            "rates = [2.0]\nmax_concurrency = 0\n",
            "FILE:LINE: workload.open_loop.max_concurrency: max_concurrency = 0 lets no request start; give max_concurrency = 1 or more, or leave it out for an open loop without a cap",
        ),
        (
            "rates = [2.0, 2.0]\n",
            "FILE:LINE: workload.open_loop.rates: rate 2 is listed twice; each rate is one step with one evidence file; list each rate once",
        ),
        (
            "rates = [2.0]\nwarmup_secs = -1\n",
            "FILE:LINE: workload.open_loop.warmup_secs: warmup_secs -1 is not a positive number of seconds; give the warm-up's length in seconds",
        ),
        (
            "rates = [2.0]\nrequests = 0\n",
            "FILE:LINE: workload.open_loop.requests: 0 is outside the range 1..=100000 (measured requests per rate); give a value from 1 to 100000",
        ),
    ] {
        let e = load_error(table);
        assert!(e.starts_with(want), "{table}\nwant {want}\n got {e}");
    }
}

#[test]
fn conversations_opened_with_a_shared_prefix_run_on_every_arm() {
    let _g = serial();
    let t = Camp::new();
    let file = write(
        &t,
        PROFILE,
        "",
        "[workload.conversation]\nturns = 2\n[workload.shared_prefix]\ntokens = 32\ngroups = 2\n[workload.open_loop]\nrates = [6.0]\nrequests = 4\n",
    );
    let b = t.run_ok("inc", &file);
    verify(&b);
    let r = json(&b.join("campaign-result.json"));
    for arm_id in ["inc", "cand"] {
        let a = arm(&r, arm_id);
        for rec in [&a["warm"], &a["rates"]["r6"]] {
            let ev = json(&b.join(rec["evidence"].as_str().unwrap()));
            let lines = ev["requests"].as_array().unwrap();
            assert_eq!(lines.len(), if rec == &a["warm"] { 2 } else { 4 }, "{ev:#}");
            for l in lines {
                assert_eq!(l["ok"], true, "{l}");
                assert!(l["prefix_group"].as_u64().is_some(), "{l}");
                if l["turn"] == 1 {
                    // The first turn: the group's 32-token prefix and the 32-token user turn.
                    assert_eq!(l["usage"]["prompt_tokens"], 64, "{l}");
                } else {
                    assert_eq!(l["turn"], 2, "{l}");
                    assert!(l["usage"]["prompt_tokens"].as_u64().unwrap() > 64, "{l}");
                }
            }
            // Both the per-turn and the per-group rows.
            assert!(
                ev["workload"]["multi_turn"]["per_turn"].is_array(),
                "{ev:#}"
            );
            assert!(
                ev["workload"]["shared_prefix"]["per_group"].is_array(),
                "{ev:#}"
            );
            assert_eq!(ev["prompt"]["shared_prefix"]["tokens"], 32, "{ev:#}");
            assert_eq!(ev["prompt"]["conversation"]["turns"], 2, "{ev:#}");
        }
    }
}
