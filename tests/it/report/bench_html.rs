//! `bakeoff bench --html` against the reference engine, checked in headless Chromium like
//! report.html (`browser.rs`): every plot renders with its axes titled, readable ticks and every
//! series name in its legend; the page loads nothing.

use super::browser::{check_chart, check_page, check_self_contained, load};
use crate::support::reference::{self, bench, text, Engine};

/// One stream at a time (the KV cache holds one request: 64 prompt + 24 output tokens), each
/// about 30 + 24 × 5 = 150 ms: 2 and 4 requests/s are served at once, 16/s queue (TTFT grows).
const PROFILE: &str = "model = \"ref\"\nttft_ms = 30\nprefill_tok_s = 0\ndecode_tok_s = 200\ncontext_tokens = 8192\nkv_tokens = 100\n";

fn names(v: &[&str]) -> Vec<String> {
    v.iter().map(|s| s.to_string()).collect()
}

#[test]
fn a_rate_sweep_page_draws_every_plot_with_its_slo_and_saturation() {
    let _g = reference::serial();
    let e = Engine::start(PROFILE);
    let page = e.path("bench.html");
    let (o, v) = bench(
        &e.url,
        &[
            "--rate",
            "2,4,16",
            "--requests",
            "12",
            "--max-tokens",
            "24",
            "--prompt-tokens",
            "64",
            "--ignore-eos",
            "--seed",
            "1",
            "--slo",
            "ttft_p95=100ms",
            "--find-saturation",
            "--html",
            page.to_str().unwrap(),
        ],
        &e.path("bench.json"),
    );
    assert!(o.status.success(), "{}", text(&o));
    let v = v.unwrap();
    assert_eq!(v["sweep"], "rate");
    let levels = v["levels"].as_array().unwrap();
    assert_eq!(levels.len(), 3, "{v:#}");
    assert_eq!(v["saturation"]["last_held"]["level"], 4.0, "{v:#}");
    assert_eq!(v["saturation"]["first_broken"]["level"], 16.0, "{v:#}");

    let html = std::fs::read_to_string(&page).unwrap();
    check_self_contained(&html);
    assert!(
        html.contains("last level that held: rate 4/s; first that broke: rate 16/s"),
        "the saturation is not stated"
    );
    assert!(
        html.contains("ttft p95 &lt;= 100 ms"),
        "the SLO is not stated"
    );
    let s = load(&page, &e.path("chromium"));
    check_page(
        &s,
        &[
            "ttft-vs-load",
            "itl-vs-load",
            "e2e-vs-load",
            "throughput-vs-load",
            "frontier",
            "ttft-cdf",
            "itl-cdf",
            "timeline",
        ],
    );
    let charts = s.status["charts"].as_array().unwrap();
    let held = "last level that held (rate 4/s)";
    let per_level = names(&["rate 2/s", "rate 4/s", "rate 16/s"]);
    for c in charts {
        let id = c["id"].as_str().unwrap();
        let want = match id {
            "ttft-vs-load" => names(&["p50", "p95", "p99", "SLO ttft p95 <= 100 ms", held]),
            "itl-vs-load" | "e2e-vs-load" => names(&["p50", "p95", "p99", held]),
            "throughput-vs-load" => names(&[
                "output tok/s (left)",
                "completed requests/s (right)",
                "offered requests/s (right)",
                "goodput requests/s (right)",
                held,
            ]),
            "frontier" => names(&["levels (labelled)"]),
            _ => per_level.clone(),
        };
        check_chart(c, &want);
        if id.ends_with("-vs-load") {
            // One tick per level, named as given, on an axis named after the sweep.
            assert_eq!(c["axes"]["x"]["title"], "offered rate, requests/s", "{c:#}");
            assert_eq!(
                c["axes"]["x"]["ticks"],
                serde_json::json!(["2", "4", "16"]),
                "{c:#}"
            );
        }
    }
    // The SLO line is on the TTFT plot only (the other metrics have no limit).
    assert!(!charts[1]["legend"].to_string().contains("SLO"));
    // Every measured request of every level is on the timeline and in the CDFs.
    assert_eq!(charts[7]["points"], 3 * 12, "{:#}", charts[7]);
    assert_eq!(
        charts[5]["legend"],
        serde_json::json!(["rate 2/s (n=12)", "rate 4/s (n=12)", "rate 16/s (n=12)"])
    );
    // The throughput plot has its right axis for requests per second.
    assert_eq!(
        charts[3]["axes"]["y2"]["title"],
        "requests per second, requests/s"
    );
}

#[test]
fn a_single_level_page_says_why_the_curves_are_missing() {
    let _g = reference::serial();
    let e = Engine::start(PROFILE);
    let page = e.path("one.html");
    let (o, _) = bench(
        &e.url,
        &[
            "--concurrency",
            "1",
            "--requests",
            "4",
            "--max-tokens",
            "8",
            "--html",
            page.to_str().unwrap(),
        ],
        &e.path("one.json"),
    );
    assert!(o.status.success(), "{}", text(&o));
    let html = std::fs::read_to_string(&page).unwrap();
    assert_eq!(
        html.matches("One level was measured: a curve against concurrency needs a sweep")
            .count(),
        5,
        "each of the five load plots says why it is missing"
    );
    let s = load(&page, &e.path("chromium"));
    check_page(&s, &["ttft-cdf", "itl-cdf", "timeline"]);
    for c in s.status["charts"].as_array().unwrap() {
        check_chart(c, &names(&["C1"]));
    }

    // A missing folder is refused before anything runs.
    let (o, _) = bench(
        &e.url,
        &["--html", "/no/such/folder/b.html", "--requests", "1"],
        &e.path("x.json"),
    );
    assert!(!o.status.success());
    assert!(
        text(&o)
            .contains("--html /no/such/folder/b.html: the folder /no/such/folder does not exist"),
        "{}",
        text(&o)
    );
}
