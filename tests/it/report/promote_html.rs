//! A promotion folder's `report.html` in headless Chromium, like report.html (`browser.rs`): each
//! analysed bake figure charts its intervals against its threshold, the failed interval marked,
//! and the page loads nothing. The record is written here (three intervals: pass, inconclusive,
//! fail), so no promotion runs.

use super::browser::{check_chart, check_page, check_self_contained, load};
use serde_json::json;

fn interval(index: u32, outcome: &str, ok: u64, failed: u64, ttft: f64) -> serde_json::Value {
    let checks = if outcome == "inconclusive" {
        json!([{"check": "error_budget", "failed_pct": 0.0, "limit_pct": 10.0, "met": true}])
    } else {
        json!([
            {"check": "error_budget", "failed_pct": failed as f64 * 100.0 / (ok + failed) as f64, "limit_pct": 10.0, "met": true},
            {"check": "ttft_p95_ms", "observed": ttft, "bake_off": 20.0, "limit": 24.0, "met": ttft <= 24.0},
            {"check": "decode_tok_s_p50", "observed": 390.0, "bake_off": 400.0, "limit": 320.0, "met": true},
        ])
    };
    json!({"index": index, "started_at": format!("2026-12-02T10:00:0{index}Z"), "seconds": 1.0,
        "requests_ok": ok, "requests_failed": failed, "ttft_p95_ms": ttft, "decode_tok_s_p50": 390.0,
        "outcome": outcome, "checks": checks, "detail": format!("interval {index} <{outcome}>")})
}

#[test]
fn a_promotion_page_charts_every_bake_figure_against_its_threshold() {
    // Chromium takes both cores for a moment: never beside a timing test.
    let _g = crate::support::shared();
    let t = tempfile::tempdir().unwrap();
    let rec = json!({
        "schema": "bakeoff.promotion/1", "phase": "rolled-back",
        "campaign_bundle": "/srv/runs/q", "campaign_root_digest": "ab12", "campaign_id": "q",
        "arm": "q4", "incumbent": "fp16", "authorization": "--confirm", "lane": "127.0.0.1:8000",
        "bake": {"bake_s": 3.0, "table": {"interval_s": 1.0, "ttft_p95_within_pct": 20.0,
            "decode_tok_s_within_pct": 20.0, "error_budget_pct": 10.0},
            "baseline": {"ttft_p95_ms": 20.0, "decode_tok_s_p50": 400.0}},
        "steps": [{"name": "stop-incumbent", "status": "ok", "at": "2026-12-02T10:00:00Z", "detail": "stopped"}],
        "intervals": [interval(1, "pass", 30, 1, 21.0), interval(2, "inconclusive", 2, 0, 22.0),
            interval(3, "fail", 30, 2, 40.0)],
        "decision": "rolled-back", "why": "1 failed bake interval(s) of 3 reached the failure limit 1",
        "restart": [], "started_at": "2026-12-02T10:00:00Z", "ended_at": "2026-12-02T10:00:05Z",
    });
    let rec: bakeoff::promote::record::Record = serde_json::from_value(rec).unwrap();
    let html = bakeoff::promote::page::render(&rec);
    check_self_contained(&html);
    assert!(html.contains("interval 3 &lt;fail&gt;"), "details escaped");
    let page = t.path().join("report.html");
    std::fs::write(&page, &html).unwrap();
    let shown = load(&page, &t.path().join("chromium"));
    check_page(&shown, &["bake-ttft", "bake-decode", "bake-errors"]);
    let names = vec!["observed".to_string(), "limit".to_string()];
    for c in shown.status["charts"].as_array().unwrap() {
        check_chart(c, &names);
        let legend = c["legend"].to_string();
        assert!(
            legend.contains("failed interval") && legend.contains("inconclusive"),
            "{c:#}"
        );
    }
}
