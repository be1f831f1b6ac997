//! `bakeoff bench` load shapes against the reference engine: rate sweeps, a rate with a
//! concurrency cap, warm-up by time, SLO verdicts and goodput, and the saturation finder. The
//! engine's declared timing (docs/reference-engine.md) is the ground truth: decode at 80 tok/s
//! gives a 12.5 ms ITL alone, and `concurrency_slowdown` stretches it by that share per extra
//! running request.

use crate::support::reference;
use reference::{bench, metric, text, words, Benched, Engine, BENCH_PROFILE as BASE};
use serde_json::Value;

#[test]
fn a_rate_sweep_gives_one_result_per_rate() {
    let _g = reference::serial();
    let e = Engine::start(BASE);
    let b = e.bench_ok_jsonl(
        "rates",
        &words("--rate 5,10 --requests 6 --max-tokens 4 --prompt-tokens 32"),
    );
    let (v, lines) = (&b.v, &b.lines);
    assert_eq!(v["sweep"], "rate");
    let levels = v["levels"].as_array().unwrap();
    assert_eq!(levels.len(), 2);
    for (l, rate) in levels.iter().zip([5.0, 10.0]) {
        assert_eq!(l["load"]["mode"], "open-loop");
        assert_eq!(l["load"]["rate_per_s"], rate, "{}", l["load"]);
        assert!(l["load"]["concurrency"].is_null());
        assert_eq!(l["ok"], 6);
    }
    // Each level's requests went out at its own rate (intended starts 1/rate apart; the sends
    // follow them within the schedule lag).
    assert_eq!(lines.len(), 12);
    for rate in [5.0, 10.0] {
        let mut sends: Vec<f64> = lines
            .iter()
            .filter(|l| l["rate_per_s"] == rate)
            .map(|l| l["send_offset_ms"].as_f64().unwrap())
            .collect();
        assert_eq!(sends.len(), 6, "rate {rate}");
        sends.sort_by(f64::total_cmp);
        let span = sends[5] - sends[0];
        let want = 5.0 * 1000.0 / rate;
        assert!(
            (span - want).abs() < 30.0,
            "rate {rate}: 6 sends over {span} ms, want {want}"
        );
    }
    let s = b.stdout();
    assert!(s.contains("rate/s"), "{s}");
    assert_eq!(s.matches("open loop at").count(), 2, "{s}");
}

/// The most intervals [send, send + e2e] of these JSONL lines that overlap at one moment.
fn max_overlap(lines: &[Value]) -> usize {
    let mut edges: Vec<(f64, i32)> = Vec::new();
    for l in lines {
        let s = l["send_offset_ms"].as_f64().unwrap();
        let e = s + l["metrics"]["e2e_ms"].as_f64().unwrap();
        edges.push((s, 1));
        edges.push((e, -1));
    }
    // Ends before starts at the same instant: a slot freed is a slot taken.
    edges.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
    let (mut now, mut peak) = (0i32, 0i32);
    for (_, d) in edges {
        now += d;
        peak = peak.max(now);
    }
    peak as usize
}

#[test]
fn a_rate_with_a_concurrency_cap_never_has_more_in_flight() {
    let _g = reference::serial();
    let e = Engine::start(BASE);
    // 50 arrivals/s, each request about 50 + 7 × 12.5 = 137 ms: uncapped, about 7 overlap.
    let b = e.bench_ok_jsonl(
        "cap",
        &words("--rate 50 --max-concurrency 2 --requests 12 --max-tokens 8 --ignore-eos --prompt-tokens 32"),
    );
    let (v, lines) = (&b.v, &b.lines);
    assert_eq!(v["ok"], 12);
    assert_eq!(v["load"]["max_concurrency"], 2);
    assert!(
        v["load"]["peak_in_flight"].as_u64().unwrap() <= 2,
        "{}",
        v["load"]
    );
    let delayed = v["load"]["cap_delayed_requests"].as_u64().unwrap();
    assert!((6..=10).contains(&delayed), "{}", v["load"]);
    // The client's own record of each request: never more than 2 at once.
    assert_eq!(lines.len(), 12);
    assert!(max_overlap(lines) <= 2, "{lines:?}");
    // TTFT runs from the actual send: the declared 50 ms, not the wait for a slot, which is
    // the schedule lag (the last requests wait several rounds of 137 ms).
    let ttft = metric(v, "ttft_ms", "max");
    assert!(ttft < 80.0, "TTFT max {ttft} ms includes the queueing");
    let lag = metric(v, "schedule_lag_ms", "max");
    assert!(lag > 300.0, "schedule lag max {lag} ms");
    let w = v["warnings"].as_array().unwrap();
    assert!(
        w.iter()
            .any(|w| w.as_str().unwrap().contains("waited for a slot")),
        "{w:?}"
    );
    // The client-limit warning is not raised for a lag the cap made.
    assert!(
        !w.iter()
            .any(|w| w.as_str().unwrap().contains("sent requests late")),
        "{w:?}"
    );
    assert!(b.stdout().contains("at most 2 in flight"), "{}", b.stdout());

    // --concurrency with --rate stays ambiguous, and the error names the fix.
    for (args, words) in [
        (
            &["--rate", "5", "--concurrency", "2"][..],
            "--max-concurrency C",
        ),
        (&["--max-concurrency", "2"][..], "give --rate R"),
        (&["--find-saturation"][..], "give --slo"),
        (&["--slo", "ttft_p97=1s"][..], "unknown statistic"),
    ] {
        let (o, _) = bench(&e.url, args, &e.path("bad.json"));
        assert!(!o.status.success(), "{args:?}");
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(err.contains(words), "{args:?}: {err}");
    }
}

#[test]
fn warmup_by_time_excludes_the_requests_started_within_it() {
    let _g = reference::serial();
    let e = Engine::start(BASE);
    // Open loop at 10/s: the starts at 0, 100, ..., 400 ms fall in the first half second.
    let v = e
        .bench_ok(
            "w",
            &words(
                "--rate 10 --warmup-duration 0.5 --requests 4 --max-tokens 4 --prompt-tokens 32",
            ),
        )
        .v;
    assert_eq!(v["warmup_excluded"], 5);
    assert_eq!(v["load"]["warmup_requests"], 5);
    assert_eq!(v["load"]["warmup_duration_s"], 0.5);
    assert_eq!(v["ok"], 4);
    // Closed loop, one at a time, each about 50 + 3 × 12.5 = 88 ms: starts at about 0, 88, 176
    // and 264 ms fall within 0.3 s.
    let Benched { v, lines, .. } = e.bench_ok_jsonl(
        "w2",
        &words("--warmup-duration 0.3 --requests 3 --max-tokens 4 --ignore-eos --prompt-tokens 32"),
    );
    let warm = v["warmup_excluded"].as_u64().unwrap();
    assert!((3..=4).contains(&warm), "{warm}");
    assert_eq!(v["load"]["warmup_requests"], warm);
    assert_eq!(v["metrics"]["ttft_ms"]["n"], 3);
    assert_eq!(lines.len() as u64, warm + 3);
    let first = lines[0]["send_offset_ms"].as_f64().unwrap();
    for l in &lines {
        let at = l["send_offset_ms"].as_f64().unwrap() - first;
        assert_eq!(l["warmup"] == true, at < 300.0, "{l}");
    }
}

#[test]
fn slo_verdicts_goodput_and_the_strict_exit() {
    let _g = reference::serial();
    let e = Engine::start(BASE);
    let common = words("--requests 6 --max-tokens 8 --ignore-eos --prompt-tokens 32");
    // TTFT 50 ms meets 200 ms; ITL 12.5 ms breaks 5 ms: printed, in the JSON, exit 0.
    let mut args = common.to_vec();
    args.extend(["--slo", "ttft_p95=200ms,itl_p50=5ms"]);
    let b = e.bench_ok("s", &args);
    let v = &b.v;
    assert_eq!(v["slo"]["met"], false);
    let checks = v["slo"]["checks"].as_array().unwrap();
    assert_eq!(checks[0]["met"], true);
    assert!((checks[0]["observed_ms"].as_f64().unwrap() - 50.0).abs() < 5.0);
    assert_eq!(checks[1]["met"], false);
    assert!((checks[1]["observed_ms"].as_f64().unwrap() - 12.5).abs() < 1.0);
    assert_eq!(v["goodput"]["requests_meeting"], 0);
    assert_eq!(v["goodput"]["requests_ok"], 6);
    let s = b.stdout();
    assert!(s.contains("SLO BROKEN"), "{s}");
    assert!(s.contains("itl p50 <= 5 ms") && s.contains("BROKEN"), "{s}");
    assert!(
        s.contains("ttft p95 <= 200 ms") && s.contains(", met"),
        "{s}"
    );

    // --slo-strict: the same break exits 1, naming it.
    args.push("--slo-strict");
    let (o, v) = bench(&e.url, &args, &e.path("s2.json"));
    assert!(!o.status.success());
    assert!(v.is_some(), "the summary is still written");
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("--slo-strict: the SLO broke"),
        "{}",
        text(&o)
    );

    // Every request meets both limits: goodput is the request rate.
    let mut args = common.to_vec();
    args.extend(["--slo", "ttft_p95=200ms,e2e_max=2s", "--slo-strict"]);
    let b = e.bench_ok("s3", &args);
    let v = &b.v;
    assert_eq!(v["slo"]["met"], true);
    assert_eq!(v["goodput"]["requests_meeting"], 6);
    let good = v["goodput"]["goodput_req_s"].as_f64().unwrap();
    let rate = v["request_rate_per_s"].as_f64().unwrap();
    assert!((good - rate).abs() < 1e-9, "{good} vs {rate}");
    assert!(b.stdout().contains("goodput:"), "{}", b.stdout());
}

#[test]
fn the_saturation_finder_stops_where_the_slo_breaks() {
    let _g = reference::serial();
    // ITL = 12.5 ms × (1 + 0.5 × (running − 1)): 12.5, 18.75, 31.25 and 56.25 ms at 1, 2, 4
    // and 8 in flight. A 40 ms limit holds up to 4 and breaks at 8.
    let e = Engine::start(&format!("{BASE}concurrency_slowdown = 0.5\n"));
    let args = words("--concurrency 1 --find-saturation --slo itl_p50=40ms --requests 8 --max-tokens 12 --ignore-eos --prompt-tokens 32");
    let b = e.bench_ok("sat", &args);
    let v = &b.v;
    assert_eq!(v["sweep"], "concurrency");
    let levels = v["levels"].as_array().unwrap();
    let tried: Vec<u64> = levels
        .iter()
        .map(|l| l["load"]["concurrency"].as_u64().unwrap())
        .collect();
    assert_eq!(tried, [1, 2, 4, 8]);
    // Every tried level is a full result.
    for l in levels {
        assert_eq!(l["ok"], 8);
        assert!(l["metrics"]["ttft_ms"]["p50"].is_number());
        assert!(l["slo"]["checks"].is_array() && l["goodput"].is_object());
    }
    let sat = &v["saturation"];
    assert_eq!(sat["last_held"]["level"], 4.0, "{sat}");
    assert_eq!(sat["first_broken"]["level"], 8.0, "{sat}");
    let itl8 = sat["first_broken"]["slo"][0]["observed_ms"]
        .as_f64()
        .unwrap();
    assert!((itl8 - 56.25).abs() < 4.0, "ITL at 8: {itl8}");
    assert!(
        sat["stopped_because"]
            .as_str()
            .unwrap()
            .starts_with("broke"),
        "{sat}"
    );
    let s = b.stdout();
    assert!(
        s.contains("last level that held: concurrency 4; first that broke: concurrency 8"),
        "{s}"
    );

    // Bounded: two steps end the walk before anything breaks, and it says so.
    let mut bounded = args.to_vec();
    bounded.extend(["--max-steps", "2"]);
    let b = e.bench_ok("sat2", &bounded);
    let sat = &b.v["saturation"];
    assert_eq!(sat["levels_tried"], 2);
    assert_eq!(sat["last_held"]["level"], 2.0);
    assert!(sat["first_broken"].is_null());
    assert!(
        sat["stopped_because"]
            .as_str()
            .unwrap()
            .contains("--max-steps 2"),
        "{sat}"
    );
}
