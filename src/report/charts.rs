//! The report's plots as Chart.js configurations (data and axes only; the page's script,
//! `charts.js`, adds the behaviour every chart shares and writes the render status).
//!
//! The pieces shared with `bench --html` (the vendored Chart.js, [`Plot`], axes, datasets, the
//! CDF steps) are in `chartkit.rs`. Each plot is a [`Plot`]: a chart, or the reason it could not
//! be drawn.
//!
//! Every arm keeps one colour in every chart (its position in the campaign). A dataset may carry
//! `noLegend` (left out of the legend: an arm's p95 curve or interval bars), `group` (clicking an
//! arm's legend entry toggles its whole group) and `levelLabels` (text drawn beside each point);
//! a point may carry `t`, its tooltip.

use super::chartkit::{axis, cdf_config, cdf_points, config, level_axis, line, pt, zero_axis};
pub use super::chartkit::{chart_js, fmt, plot, Plot, CHART_JS, COLORS, GLUE_JS};
use super::series::{Series, E2E_FIELD, ITL_FIELD, TTFT_FIELD};
use crate::decide::metric::{DECODE, TTFT};
use crate::evidence::result::{ArmResult, CampaignResult, Stat, TimingRecord};
use serde_json::{json, Value};

/// The arm's label as the documents show it (its id when it has none).
pub fn label(a: &ArmResult) -> String {
    if a.label.is_empty() {
        a.id.clone()
    } else {
        a.label.clone()
    }
}

pub(super) fn color(r: &CampaignResult, arm: &str) -> &'static str {
    COLORS[r.arms.iter().position(|a| a.id == arm).unwrap_or(0) % COLORS.len()]
}

/// An arm's timing record at a level (1: the warm run).
fn at_level(a: &ArmResult, c: u64) -> Option<&TimingRecord> {
    if c == 1 {
        if let Some(w) = &a.warm {
            return Some(w);
        }
    }
    a.concurrency
        .get(&c.to_string())
        .or_else(|| a.concurrency.values().find(|t| t.concurrency == c))
}

/// Every level measured by any arm, ascending (1 when an arm has a warm run).
pub fn levels(r: &CampaignResult) -> Vec<u64> {
    let mut l: Vec<u64> = Vec::new();
    for a in &r.arms {
        if a.warm.is_some() {
            l.push(1);
        }
        l.extend(a.concurrency.values().map(|t| t.concurrency));
        l.extend(a.concurrency.keys().filter_map(|k| k.parse::<u64>().ok()));
    }
    l.sort();
    l.dedup();
    l
}

/// Warm median TTFT against warm median decode speed per arm, with each median's interval.
fn ttft_vs_decode(r: &CampaignResult) -> Option<Value> {
    let mut ds = Vec::new();
    for a in &r.arms {
        let Some(w) = &a.warm else { continue };
        let (Some(t), Some(d)) = (TTFT.stat(w), DECODE.stat(w)) else {
            continue;
        };
        let (l, k) = (label(a), color(r, &a.id));
        let tip = format!(
            "{l}: TTFT {} ms [{}, {}], decode {} tok/s [{}, {}]",
            fmt(t.p50),
            fmt(t.ci95[0]),
            fmt(t.ci95[1]),
            fmt(d.p50),
            fmt(d.ci95[0]),
            fmt(d.ci95[1])
        );
        let mut p = line(&l, k, vec![pt(t.p50, d.p50, tip)]);
        p["showLine"] = json!(false);
        p["pointRadius"] = json!(6);
        p["group"] = json!(a.id);
        ds.push(p);
        for (x0, y0, x1, y1) in [
            (t.ci95[0], d.p50, t.ci95[1], d.p50),
            (t.p50, d.ci95[0], t.p50, d.ci95[1]),
        ] {
            let mut bar = line(
                &format!("{l} interval"),
                k,
                vec![
                    pt(x0, y0, format!("{l}: interval of the median")),
                    pt(x1, y1, format!("{l}: interval of the median")),
                ],
            );
            bar["pointRadius"] = json!(0);
            bar["borderWidth"] = json!(1.5);
            bar["noLegend"] = json!(true);
            bar["group"] = json!(a.id);
            ds.push(bar);
        }
    }
    (!ds.is_empty()).then(|| {
        config(
            "scatter",
            "TTFT against decode speed (warm, C1)",
            ds,
            axis("linear", "warm median TTFT, ms"),
            axis("linear", "warm median decode speed, tok/s"),
        )
    })
}

/// The empirical CDF of one per-request metric per arm (warm requests at C1). Returns the
/// config and whether every arm's curve came from per-request values.
fn cdf(r: &CampaignResult, s: &Series, field: &str, name: &str) -> Option<(Value, bool)> {
    let mut ds = Vec::new();
    let mut exact = true;
    for a in &r.arms {
        let Some(st) = s.step(&a.id, "warm", 1) else {
            continue;
        };
        let (l, k) = (label(a), color(r, &a.id));
        let v = st.values(field);
        let (name_n, pts) = if !v.is_empty() {
            (format!("{l} (n={})", v.len()), cdf_points(&l, &v))
        } else if let Some(a_pts) = st.approx.get(field) {
            exact = false;
            let pts = a_pts
                .iter()
                .map(|(x, p)| pt(*x, *p, format!("{l}: p{:.0} {} ms", p * 100.0, fmt(*x))))
                .collect();
            (format!("{l} (percentiles only)"), pts)
        } else {
            continue;
        };
        let mut d = line(&name_n, k, pts);
        d["pointRadius"] = json!(0);
        d["group"] = json!(a.id);
        ds.push(d);
    }
    if ds.is_empty() {
        return None;
    }
    Some((
        cdf_config(&format!("{name} distribution per arm (warm, C1)"), name, ds),
        exact,
    ))
}

/// A latency statistic per level per arm: p50 solid, p95 dashed, on an integer concurrency axis.
fn latency_vs_concurrency(
    r: &CampaignResult,
    name: &str,
    stat: fn(&TimingRecord) -> Option<Stat>,
) -> Option<Value> {
    let lv = levels(r);
    let mut ds = Vec::new();
    for a in &r.arms {
        let (l, k) = (label(a), color(r, &a.id));
        let per: Vec<(u64, Stat)> = lv
            .iter()
            .filter_map(|c| Some((*c, stat(at_level(a, *c)?)?)))
            .collect();
        if per.is_empty() {
            continue;
        }
        for (p, dash) in [("p50", false), ("p95", true)] {
            let data: Vec<Value> = per
                .iter()
                .map(|(c, s)| {
                    let y = if dash { s.p95 } else { s.p50 };
                    json!({"x": c.to_string(), "y": y, "t": format!("{l} at C{c}: {name} {p} {} ms", fmt(y))})
                })
                .collect();
            let mut d = line(&format!("{l} {p}"), k, data);
            d["group"] = json!(a.id);
            if dash {
                d["borderDash"] = json!([6, 4]);
                d["noLegend"] = json!(true);
            } else {
                d["label"] = json!(l);
            }
            ds.push(d);
        }
    }
    if ds.is_empty() {
        return None;
    }
    let x = level_axis(
        "concurrency (streams)",
        &lv.iter().map(|c| c.to_string()).collect::<Vec<_>>(),
    );
    let y = zero_axis(&format!("{name}, ms (solid p50, dashed p95)"));
    Some(config(
        "line",
        &format!("{name} against concurrency"),
        ds,
        x,
        y,
    ))
}

/// Aggregate output throughput per level per arm.
fn throughput(r: &CampaignResult) -> Option<Value> {
    let lv = levels(r);
    let mut ds = Vec::new();
    for a in &r.arms {
        let (l, k) = (label(a), color(r, &a.id));
        let data: Vec<Value> = lv
            .iter()
            .filter_map(|c| {
                let y = at_level(a, *c)?.aggregate_output_tok_s?;
                Some(json!({"x": c.to_string(), "y": y, "t": format!("{l} at C{c}: {} tok/s", fmt(y))}))
            })
            .collect();
        if !data.is_empty() {
            ds.push(line(&l, k, data));
        }
    }
    if ds.is_empty() {
        return None;
    }
    let x = level_axis(
        "concurrency (streams)",
        &lv.iter().map(|c| c.to_string()).collect::<Vec<_>>(),
    );
    let y = zero_axis("aggregate output throughput, tok/s");
    Some(config(
        "line",
        "Aggregate throughput against concurrency",
        ds,
        x,
        y,
    ))
}

/// Throughput against p95 end-to-end latency, one point per level, joined per arm.
fn frontier(r: &CampaignResult) -> Option<Value> {
    let mut ds = Vec::new();
    for a in &r.arms {
        let (l, k) = (label(a), color(r, &a.id));
        let mut data = Vec::new();
        let mut names = Vec::new();
        for c in levels(r) {
            let Some(t) = at_level(a, c) else { continue };
            let (Some(x), Some(e)) = (t.aggregate_output_tok_s, t.e2e_ms) else {
                continue;
            };
            data.push(pt(
                x,
                e.p95,
                format!("{l} at C{c}: {} tok/s, p95 E2E {} ms", fmt(x), fmt(e.p95)),
            ));
            names.push(format!("C{c}"));
        }
        if !data.is_empty() {
            let mut d = line(&l, k, data);
            d["levelLabels"] = json!(names);
            ds.push(d);
        }
    }
    (!ds.is_empty())
        .then(|| super::chartkit::frontier_config(ds, "aggregate output throughput, tok/s"))
}

/// Every plot of this file, in page order (`timeline.rs` adds the run's timeline after them).
pub fn plots(r: &CampaignResult, s: &Series) -> Vec<Plot> {
    let mut out = vec![plot(
        "ttft-vs-decode",
        "TTFT against decode speed",
        "Warm median TTFT against warm median decode speed per arm (C1); the bars are the intervals of the medians (the table gives each one's method and coverage). Lower left is faster to answer, higher is faster to decode.",
        ttft_vs_decode(r),
        "No arm has warm TTFT and decode measurements.",
    )];
    for (id, field, name) in [
        ("ttft-cdf", TTFT_FIELD, "TTFT"),
        ("itl-cdf", ITL_FIELD, "ITL"),
    ] {
        let (c, exact) = match cdf(r, s, field, name) {
            Some((c, e)) => (Some(c), e),
            None => (None, true),
        };
        let how = if exact {
            "from every warm request's own value (n requests per arm, in the legend)"
        } else {
            "from every warm request's own value where the timing file has them; arms marked \"percentiles only\" are drawn through their file's min/p50/p90/p95/p99/max"
        };
        out.push(plot(
            id,
            &format!("{name} distribution"),
            &format!("Empirical CDF of {name} per arm at concurrency 1, {how}. A curve further left is faster; a steep curve is a steady arm (a vertical one: every request took the same time)."),
            c,
            &format!("No per-arm {name} values were recorded."),
        ));
    }
    out.push(plot(
        "ttft-vs-concurrency",
        "TTFT against concurrency",
        "Median (solid) and p95 (dashed) TTFT at each concurrency level per arm (C1 is the warm run): how the wait for the first token grows with load.",
        latency_vs_concurrency(r, "TTFT", |t| t.ttft_ms),
        "No TTFT was recorded at any concurrency level.",
    ));
    out.push(plot(
        "itl-vs-concurrency",
        "ITL against concurrency",
        "Median (solid) and p95 (dashed) inter-token latency (generation time per token after the first) at each concurrency level per arm: how decoding slows under load.",
        latency_vs_concurrency(r, "ITL", |t| t.itl_ms),
        "No ITL was recorded at any concurrency level.",
    ));
    out.push(plot(
        "throughput-vs-concurrency",
        "Throughput against concurrency",
        "Aggregate output throughput (completion tokens of the step over its wall time) at each concurrency level per arm (C1 is the warm run).",
        throughput(r),
        "No aggregate throughput was recorded.",
    ));
    out.push(plot(
        "frontier",
        "Throughput-latency frontier",
        &format!("Each arm's aggregate output throughput against its p95 end-to-end latency ({E2E_FIELD}), one point per concurrency level (labelled): further right serves more tokens per second, lower answers sooner; the frontier is the lower right."),
        frontier(r),
        "No arm has both throughput and end-to-end latency at a concurrency level.",
    ));
    out
}
