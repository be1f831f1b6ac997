//! `[workload.trace]` on reference-engine arms: each arm replays the same trace at its arrival
//! times (warm-up first, every request with its own input and output length, shared `hash_ids`
//! blocks hitting the engine's prefix cache), the arrival error is measured and reported in the
//! result and the publication summary, the bundle verifies; the dry run prints the step; a bad
//! line or a warm-up that leaves nothing is a one-line error naming file, field and fix.

use crate::support::campaign::*;
use serde_json::json;
use std::process::Command;

const BLOCK: u64 = 16;
const N: usize = 12;

/// 12 requests 15 ms apart; each starts with the same 2-block system prompt and ends with a
/// part of its own; output lengths 3..=6.
fn trace() -> String {
    (0..N)
        .map(|i| {
            json!({
                "timestamp": i as f64 * 15.0,
                "input_length": 2 * BLOCK + 5 + i as u64,
                "output_length": 3 + (i as u64 % 4),
                "hash_ids": [7, 8, 100 + i],
            })
            .to_string()
                + "\n"
        })
        .collect()
}

fn write(t: &Camp, trace_table: &str) -> std::path::PathBuf {
    let fast = "ttft_ms = 4\nprefill_tok_s = 0\ndecode_tok_s = 800\ncontext_tokens = 4096\nprefix_cache = true";
    t.profile("inc", fast);
    t.profile("cand", fast);
    let tables = format!("[workload.trace]\n{trace_table}");
    let small = Small {
        reps: 2,
        tables: &tables,
        ..Small::default()
    };
    t.write_small(
        "trace",
        &small,
        &[("inc", "incumbent"), ("cand", "candidate")],
    )
}

#[test]
fn every_arm_replays_the_trace_at_its_arrival_times_and_the_arrival_error_is_reported() {
    // Counts, lengths and the presence of figures; no timing figure is asserted.
    let _g = crate::support::shared();
    let t = Camp::new();
    std::fs::write(t.path("trace.jsonl"), trace()).unwrap();
    let file = write(
        &t,
        &format!("path = \"trace.jsonl\"\nspeedup = 1.5\nwarmup = 2\nblock_tokens = {BLOCK}\n"),
    );
    let o = Command::new(BIN)
        .args(["run", "--dry-run"])
        .arg(&file)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", text(&o));
    assert!(
        text(&o).contains("replay ") && text(&o).contains("speedup 1.5, the first 2 as warm-up"),
        "{}",
        text(&o)
    );
    let (b, out) = t.run_ok_text("inc", &file);
    let r = json(&b.join("campaign-result.json"));
    for id in ["inc", "cand"] {
        let a = r["arms"]
            .as_array()
            .unwrap()
            .iter()
            .find(|a| a["id"] == id)
            .unwrap();
        let tr = &a["trace"];
        assert_eq!(tr["replayed"], N, "{tr:#}\n{out}");
        assert_eq!(tr["warmup"], 2, "{tr:#}");
        assert_eq!(tr["timing"]["requests_ok"], N - 2, "{tr:#}");
        assert_eq!(tr["timing"]["requests_failed"], 0, "{tr:#}");
        assert_eq!(tr["arrival_error_ms"]["n"], N - 2, "{tr:#}");
        assert!(
            tr["arrival_error_ms"]["p99"].as_f64().unwrap() >= 0.0,
            "{tr:#}"
        );
        assert_eq!(tr["shared_tokens"], (N as u64 - 1) * 2 * BLOCK, "{tr:#}");
        let ev = json(&b.join(format!("{id}-trace.json")));
        assert_eq!(ev["load"]["mode"], "trace-replay", "{:#}", ev["load"]);
        let all = ev["requests"].as_array().unwrap();
        assert_eq!(all.len(), N, "every replayed request has its line");
        let lines: Vec<_> = all.iter().filter(|l| l["warmup"] == false).collect();
        assert_eq!(lines.len(), N - 2, "the first 2 are the warm-up");
        for l in &lines {
            let src = &l["source"];
            let line = src["trace_line"].as_u64().unwrap() as usize;
            let i = line - 1;
            // Every prompt is the trace's length (plus the template), every output its own.
            assert_eq!(src["input_length"], 2 * BLOCK + 5 + i as u64, "{l:#}");
            assert_eq!(l["sent_max_tokens"], 3 + (i as u64 % 4), "{l:#}");
        }
        // After the first request, the shared system blocks come from the prefix cache.
        let cached: u64 = lines
            .iter()
            .filter_map(|l| l["usage"]["cached_tokens"].as_u64())
            .sum();
        assert!(
            cached >= (N as u64 - 2) * BLOCK,
            "cached {cached}: {lines:#?}"
        );
        // The validity block judges the replay apart: its requests and arrival error from the
        // step file, its (intended) prefix-cache hits not in the arm's cached share.
        let v = &json(&b.join("artifact-manifest.json"))["validity"][id];
        assert_eq!(v["trace"]["requests_sent"], N - 2, "{v:#}");
        assert_eq!(v["trace"]["requests_failed"], 0, "{v:#}");
        assert_eq!(
            v["trace"]["arrival_error_p99_ms"], tr["arrival_error_ms"]["p99"],
            "{v:#}"
        );
        assert!(
            v["cache"]["cached_tokens"].as_u64().unwrap() < cached,
            "{v:#}"
        );
    }
    let md = std::fs::read_to_string(b.join("publication-summary.md")).unwrap();
    assert!(
        md.contains("## Trace replay") && md.contains("arrival error p50 / p99 / max ms"),
        "{md}"
    );
    verify(&b);
}

/// `bakeoff run --dry-run` of a campaign with `trace_table`: refused (exit 2); its words.
fn refused(t: &Camp, trace_table: &str) -> String {
    let file = write(t, &format!("{trace_table}block_tokens = {BLOCK}\n"));
    let o = Command::new(BIN)
        .args(["run", "--dry-run"])
        .arg(&file)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    text(&o)
}

#[test]
fn a_bad_trace_line_and_a_warmup_that_leaves_nothing_are_refused_at_load() {
    let t = Camp::new();
    let bad = trace().replacen("\"input_length\":38", "\"input_len\":38", 1);
    std::fs::write(t.path("bad.jsonl"), &bad).unwrap();
    let e = refused(&t, "path = \"bad.jsonl\"\n");
    assert!(
        e.contains("workload.trace.path")
            && e.contains("bad.jsonl:2")
            && e.contains("input_length"),
        "{e}"
    );
    std::fs::write(t.path("trace.jsonl"), trace()).unwrap();
    let e = refused(&t, "path = \"trace.jsonl\"\nwarmup = 12\n");
    assert!(
        e.contains("workload.trace.warmup")
            && e.contains("leaves none of the 12 replayed requests"),
        "{e}"
    );
}
