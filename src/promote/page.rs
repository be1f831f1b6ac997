//! A promotion folder's `report.html`: the decision, then the bake's figures against their
//! thresholds over time, one chart per analysed figure (TTFT p95, decode tok/s, failed requests),
//! one point per interval, the limit as a dashed line, failed and inconclusive intervals marked;
//! then the intervals and the transaction as tables. Drawn with `report::chartkit` (the same
//! embedded Chart.js and page script as a campaign's `report.html`).

use super::record::{Interval, Record};
use crate::report::chartkit::{self, esc, Plot};
use serde_json::{json, Value};
use std::fmt::Write as _;

/// One analysed figure: where it sits in an interval and where its limit sits in its checks.
struct Figure {
    id: &'static str,
    title: &'static str,
    axis: &'static str,
    check: &'static str,
    /// Higher is better (the limit is a floor).
    floor: bool,
    value: fn(&Interval) -> Option<f64>,
    /// The limit at an interval, from its check, else from the record's `bake` (table and
    /// baseline: an inconclusive interval checked no latency).
    limit: fn(&Interval, &Value) -> Option<f64>,
}

fn check_limit(i: &Interval, name: &str, key: &str) -> Option<f64> {
    i.checks
        .iter()
        .find(|c| c["check"] == name)
        .and_then(|c| c[key].as_f64())
}

const FIGURES: &[Figure] = &[
    Figure {
        id: "bake-ttft",
        title: "TTFT p95 per bake interval",
        axis: "TTFT p95, ms",
        check: "ttft_p95_ms",
        floor: false,
        value: |i| i.ttft_p95_ms,
        limit: |i, bake| {
            check_limit(i, "ttft_p95_ms", "limit").or_else(|| {
                let b = bake["baseline"]["ttft_p95_ms"].as_f64()?;
                Some(b * (1.0 + bake["table"]["ttft_p95_within_pct"].as_f64()? / 100.0))
            })
        },
    },
    Figure {
        id: "bake-decode",
        title: "Median decode tok/s per bake interval",
        axis: "decode tok/s, median",
        check: "decode_tok_s_p50",
        floor: true,
        value: |i| i.decode_tok_s_p50,
        limit: |i, bake| {
            check_limit(i, "decode_tok_s_p50", "limit").or_else(|| {
                let b = bake["baseline"]["decode_tok_s_p50"].as_f64()?;
                Some(b * (1.0 - bake["table"]["decode_tok_s_within_pct"].as_f64()? / 100.0))
            })
        },
    },
    Figure {
        id: "bake-errors",
        title: "Failed requests per bake interval",
        axis: "failed requests, %",
        check: "error_budget",
        floor: false,
        value: |i| {
            let n = i.requests_ok + i.requests_failed;
            (n > 0).then(|| i.requests_failed as f64 * 100.0 / n as f64)
        },
        limit: |i, bake| {
            check_limit(i, "error_budget", "limit_pct")
                .or(bake["table"]["error_budget_pct"].as_f64())
        },
    },
];

/// The chart of one figure, or why there is none.
fn plot(f: &Figure, r: &Record) -> Plot {
    let tip = |i: &Interval, v: f64| {
        format!(
            "interval {} ({}): {} {}; {}",
            i.index,
            i.outcome,
            chartkit::fmt(v),
            f.axis,
            i.detail
        )
    };
    let (mut seen, mut failed, mut inconclusive, mut limit) = (vec![], vec![], vec![], vec![]);
    for i in &r.intervals {
        let x = i.index as f64;
        if let Some(v) = (f.value)(i) {
            let p = chartkit::pt(x, v, tip(i, v));
            match i.outcome.as_str() {
                "fail" => failed.push(p.clone()),
                "inconclusive" => inconclusive.push(p.clone()),
                _ => {}
            }
            seen.push(p);
        }
        if let Some(l) = (f.limit)(i, &r.bake) {
            let bound = if f.floor { "floor" } else { "limit" };
            limit.push(chartkit::pt(
                x,
                l,
                format!("interval {}: {bound} {}", i.index, chartkit::fmt(l)),
            ));
        }
    }
    let caption = format!(
        "One point per interval of {} s; the dashed line is the {} ({}); red: failed intervals, grey: inconclusive ones (too few requests).",
        r.bake["table"]["interval_s"].as_f64().unwrap_or(0.0),
        if f.floor { "floor" } else { "limit" },
        f.check
    );
    if seen.is_empty() {
        let why = if r.intervals.is_empty() {
            "no bake interval ran"
        } else {
            "no interval measured this figure"
        };
        return chartkit::plot(f.id, f.title, &caption, None, why);
    }
    let mut lim = chartkit::line("limit", "#555", limit);
    lim["borderDash"] = json!([6, 4]);
    lim["pointRadius"] = json!(0);
    let mut bad = chartkit::line("failed interval", "#d62728", failed);
    bad["showLine"] = json!(false);
    bad["pointRadius"] = json!(7);
    bad["pointStyle"] = json!("crossRot");
    let mut gray = chartkit::line("inconclusive", "#999999", inconclusive);
    gray["showLine"] = json!(false);
    gray["pointRadius"] = json!(6);
    let mut datasets = vec![chartkit::line("observed", chartkit::color_at(0), seen), lim];
    for d in [bad, gray] {
        if d["data"].as_array().is_some_and(|a| !a.is_empty()) {
            datasets.push(d);
        }
    }
    let mut x = chartkit::axis("linear", "bake interval, number");
    x["ticks"] = json!({"stepSize": 1, "precision": 0});
    let y = chartkit::zero_axis(f.axis);
    let config = chartkit::config("scatter", f.title, datasets, x, y);
    chartkit::plot(f.id, f.title, &caption, Some(config), "")
}

/// The page.
pub fn render(r: &Record) -> String {
    let mut o = chartkit::head();
    let _ = write!(
        o,
        "<h1>Promotion of {} on lane {}</h1><p><b>Decision:</b> <span class=\"{}\">{}</span></p><p>{}</p><p>authority: {} · campaign {} (root digest {}) · incumbent, the way back: {} · started {}, ended {}</p>",
        esc(&r.arm),
        esc(&r.lane),
        if r.phase == super::Phase::Promoted { "ok" } else { "bad" },
        esc(r.decision.as_deref().unwrap_or(r.phase.as_str())),
        esc(&r.why),
        esc(&r.authorization),
        esc(&r.campaign_id),
        esc(&r.campaign_root_digest),
        esc(&r.incumbent),
        esc(&r.started_at),
        esc(r.ended_at.as_deref().unwrap_or("(not ended)"))
    );
    if let Some(l) = &r.lanes {
        let _ = write!(o, "<p>lanes: {} {}</p>", esc(&r.arm), esc(&l.words));
    }
    for c in &r.restart {
        let _ = write!(
            o,
            "<p class=\"bad\"><b>CRITICAL: the rollback failed.</b> Start the incumbent by hand: <code>{}</code></p>",
            esc(c)
        );
    }
    let plots: Vec<Plot> = FIGURES.iter().map(|f| plot(f, r)).collect();
    o.push_str(&chartkit::plots_section(
        "The bake against its thresholds",
        &plots,
    ));
    o.push_str("<h2>Bake intervals</h2><table><tr><th>#</th><th>started</th><th>ok</th><th>failed</th><th>TTFT p95 ms</th><th>decode tok/s p50</th><th>outcome</th><th>detail</th></tr>");
    let f = |v: Option<f64>| v.map(chartkit::fmt).unwrap_or_else(|| "–".into());
    for i in &r.intervals {
        let class = match i.outcome.as_str() {
            "fail" => " class=\"bad\"",
            "pass" => " class=\"ok\"",
            _ => "",
        };
        let _ = write!(
            o,
            "<tr><td class=n>{}</td><td>{}</td><td class=n>{}</td><td class=n>{}</td><td class=n>{}</td><td class=n>{}</td><td{class}>{}</td><td>{}</td></tr>",
            i.index,
            esc(&i.started_at),
            i.requests_ok,
            i.requests_failed,
            f(i.ttft_p95_ms),
            f(i.decode_tok_s_p50),
            esc(&i.outcome),
            esc(&i.detail)
        );
    }
    o.push_str("</table><h2>Transaction</h2><table><tr><th>step</th><th>status</th><th>at</th><th>detail</th></tr>");
    for s in &r.steps {
        let _ = write!(
            o,
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            esc(&s.name),
            esc(&s.status),
            esc(&s.at),
            esc(&s.detail)
        );
    }
    o.push_str("</table>");
    for n in &r.notes {
        let _ = write!(o, "<p>note: {}</p>", esc(n));
    }
    o.push_str(
        "<p>Re-check: <code>bakeoff verify DIR</code> re-hashes every file of the folder.</p>",
    );
    o.push_str(&chartkit::tail());
    o
}
