//! `[workload.trace]` on reference-engine arms: each arm replays the same trace at its arrival
//! times (warm-up first, every request with its own input and output length, shared `hash_ids`
//! blocks hitting the engine's prefix cache), the arrival error is measured and reported in the
//! result and the publication summary, the bundle verifies; the dry run prints the step; a bad
//! line or a warm-up that leaves nothing is a one-line error naming file, field and fix.

use crate::support::campaign::*;
use serde_json::json;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

const BLOCK: u64 = 16;
const N: usize = 12;

/// 12 requests 15 ms apart; each starts with the same 2-block system prompt and ends with a
/// part of its own; output lengths 3..=6.
fn trace() -> String {
    trace_every(15.0)
}

/// [`trace`] with its requests `gap_ms` apart.
fn trace_every(gap_ms: f64) -> String {
    (0..N)
        .map(|i| {
            json!({
                "timestamp": i as f64 * gap_ms,
                "input_length": 2 * BLOCK + 5 + i as u64,
                "output_length": 3 + (i as u64 % 4),
                "hash_ids": [7, 8, 100 + i],
            })
            .to_string()
                + "\n"
        })
        .collect()
}

const FAST: &str =
    "ttft_ms = 4\nprefill_tok_s = 0\ndecode_tok_s = 800\ncontext_tokens = 4096\nprefix_cache = true";

fn write(t: &Camp, trace_table: &str) -> std::path::PathBuf {
    write_with(t, trace_table, FAST)
}

/// [`write`] with the candidate's reference profile `cand`.
fn write_with(t: &Camp, trace_table: &str, cand: &str) -> std::path::PathBuf {
    t.profile("inc", FAST);
    t.profile("cand", cand);
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

fn sha256_hex(p: &Path) -> String {
    use sha2::{Digest, Sha256};
    Sha256::digest(std::fs::read(p).unwrap())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// The checkpoint's status of arm `arm`'s step `step`.
fn step_status(b: &Path, arm: &str, step: &str) -> String {
    let ck = json(&b.join("checkpoint.json"));
    let s = ck["steps"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["arm"] == arm && s["step"] == step)
        .unwrap_or_else(|| panic!("no step {arm}/{step}: {ck:#}"));
    s["status"].as_str().unwrap().to_string()
}

#[test]
fn a_trace_file_changed_under_a_run_stops_it_and_a_resume_is_refused_until_it_is_back() {
    let _g = crate::support::shared();
    let t = Camp::new();
    let path = t.path("trace.jsonl");
    std::fs::write(&path, trace()).unwrap();
    let file = write(
        &t,
        &format!("path = \"trace.jsonl\"\nblock_tokens = {BLOCK}\n"),
    );
    let was = sha256_hex(&path);
    // The file is edited while the incumbent's replay is recorded and the candidate not yet
    // started: the candidate's replay would not be the incumbent's.
    let marker = t.path("paused");
    let pause = format!("arm-start@cand:{}", marker.display());
    let mut run = t.spawn_run_env("inc", &file, None, &[("BAKEOFF_TEST_PAUSE_AT", pause)]);
    let b = run.bundle.clone();
    wait_for_file(&marker, Duration::from_secs(120));
    std::fs::write(&path, trace_every(20.0)).unwrap();
    let now = sha256_hex(&path);
    std::fs::remove_file(&marker).unwrap();
    let (_, r) = run.end_with(1);
    assert_eq!(r["complete"], false, "{r:#}");
    let why = r["incomplete_reason"].as_str().unwrap();
    for want in [
        format!(
            "stopped: the trace file {} (workload.trace.path) changed since the campaign was loaded (sha256 {was} then, {now} now)",
            path.display()
        ),
        format!(
            "put the original file back, then `bakeoff run --resume {}`",
            b.display()
        ),
    ] {
        assert!(why.contains(&want), "missing {want:?} in {why}");
    }
    // Nothing of the candidate's replay ran; the incumbent's stays; the lane is restored.
    assert_eq!(step_status(&b, "cand", "trace"), "interrupted");
    assert_eq!(arm(&r, "inc")["trace"]["replayed"], N, "{r:#}");
    assert!(arm(&r, "cand")["trace"].is_null(), "{r:#}");
    assert!(!b.join("cand-trace.json").exists());
    verify(&b);
    assert_eq!(listener_model(t.port).as_deref(), Some("inc"));

    // A resume with the file still changed is refused before anything starts, naming both.
    let locks = t.path("locks");
    let o = run_command(&locks, &["--resume", b.to_str().unwrap()])
        .output()
        .unwrap();
    let out = text(&o);
    assert_eq!(o.status.code(), Some(2), "{out}");
    for want in [
        format!(
            "the trace file {} changed since the run started (sha256 {was} then, {now} now)",
            path.display()
        ),
        "put the original file back to resume, or start a new campaign".to_string(),
    ] {
        assert!(out.contains(&want), "missing {want:?} in {out}");
    }
    // With the original back, the resume replays it on the candidate and completes.
    std::fs::write(&path, trace()).unwrap();
    let o = run_command(&locks, &["--resume", b.to_str().unwrap()])
        .output()
        .unwrap();
    run.cleanup();
    assert!(o.status.success(), "{}", text(&o));
    let r = json(&b.join("campaign-result.json"));
    assert_eq!(r["complete"], true, "{r:#}");
    assert_eq!(arm(&r, "cand")["trace"]["replayed"], N, "{r:#}");
    verify(&b);
}

#[test]
fn sigint_during_a_trace_replay_restores_and_keeps_what_was_measured() {
    let _g = crate::support::shared();
    let t = Camp::new();
    std::fs::write(t.path("trace.jsonl"), trace()).unwrap();
    // The candidate answers after 150 ms: its replay lasts about 0.3 s, the signal lands in it.
    let slow = FAST.replace("ttft_ms = 4", "ttft_ms = 150");
    let file = write_with(
        &t,
        &format!("path = \"trace.jsonl\"\nblock_tokens = {BLOCK}\n"),
        &slow,
    );
    let marker = t.path("paused");
    let pause = format!("trace-replay@cand:{}", marker.display());
    let mut run = t.spawn_run_env("inc", &file, None, &[("BAKEOFF_TEST_PAUSE_AT", pause)]);
    let b = run.bundle.clone();
    wait_for_file(&marker, Duration::from_secs(120));
    std::fs::remove_file(&marker).unwrap();
    std::thread::sleep(Duration::from_millis(100));
    // SAFETY: signals the bakeoff process this test spawned.
    unsafe { libc::kill(run.pid() as i32, libc::SIGINT) };
    let (_, r) = run.end_with(130);
    assert_eq!(r["complete"], false, "{r:#}");
    assert_eq!(
        r["incomplete_reason"], "interrupted by SIGINT during cand/trace",
        "{r:#}"
    );
    assert_eq!(step_status(&b, "cand", "trace"), "interrupted");
    assert_eq!(r["restoration"]["status"], "passed", "{r:#}");
    // What was measured before the signal is all there: the incumbent's replay, the
    // candidate's timed steps and their files.
    assert_eq!(arm(&r, "inc")["trace"]["replayed"], N, "{r:#}");
    let warm = &arm(&r, "cand")["warm"];
    assert_eq!(warm["requests_ok"], 2, "{r:#}");
    assert!(b.join(warm["evidence"].as_str().unwrap()).exists());
    assert!(arm(&r, "cand")["trace"].is_null(), "{r:#}");
    verify(&b);
    assert_eq!(listener_model(t.port).as_deref(), Some("inc"));
    run.cleanup();
}
