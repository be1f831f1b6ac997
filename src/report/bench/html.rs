//! `bakeoff bench --html FILE`: one self-contained page for a bench run or sweep, drawn with the
//! campaign report's chart kit (`report/chartkit.rs`: the same vendored Chart.js, embedded, and
//! the same page script, so the page loads nothing and writes the same `#chart-status`).
//!
//! Plots: TTFT, ITL and E2E p50/p95/p99 against the load (concurrency or offered rate, one tick
//! per level), throughput against the load (with the offered rate on a rate sweep), the
//! throughput-latency frontier, per-level TTFT and ITL CDFs, and the per-request TTFT timeline.
//! `--slo` limits are drawn as lines on the latency plots; `--find-saturation` marks the last
//! level that held. The per-request values are the report's `points` (`bench::BenchSpec::keep_points`:
//! each successful measured request's send time and latencies, kept only when `--html` is given).

use crate::bench::{sweep, BenchReport, LoadShape};
use crate::metrics::slo::{SloLimit, SloMetric};
use crate::metrics::stats::Distribution;
use crate::metrics::RequestMetrics;
use crate::report::chartkit::{
    self, axis, cdf_config, cdf_points, color_at, config, esc, fmt, level_axis, line, plot, pt,
    zero_axis, Plot,
};
use anyhow::{bail, Result};
use serde_json::{json, Value};
use std::fmt::Write as _;
use std::path::Path;

/// Refuses an `--html` path whose folder does not exist, before anything runs.
pub fn check_path(p: Option<&Path>) -> Result<()> {
    let Some(p) = p else { return Ok(()) };
    let dir = p.parent().filter(|d| !d.as_os_str().is_empty());
    if let Some(d) = dir {
        if !d.is_dir() {
            bail!(
                "--html {}: the folder {} does not exist (create it, or give another path)",
                p.display(),
                d.display()
            );
        }
    }
    if p.is_dir() {
        bail!(
            "--html {}: is a folder; give a file name, like {}/bench.html",
            p.display(),
            p.display()
        );
    }
    Ok(())
}

/// Writes the page (atomically); the caller says where.
pub fn write(
    p: &Path,
    reports: &[BenchReport],
    shape: &LoadShape,
    limits: &[SloLimit],
) -> Result<()> {
    let page = render(reports, shape, limits)?;
    crate::evidence::write_atomic(p, page.as_bytes())?;
    Ok(())
}

/// How the page names the load axis and each level.
struct Load {
    by_rate: bool,
    /// One tick label per level ("4", "0.5").
    labels: Vec<String>,
}

impl Load {
    fn of(reports: &[BenchReport]) -> Load {
        let by_rate = reports.first().is_some_and(|r| r.load.rate_per_s.is_some());
        let labels = reports
            .iter()
            .map(|r| {
                let l = r.level();
                match l.rate {
                    Some(v) => level_text(v),
                    None => l.concurrency.to_string(),
                }
            })
            .collect();
        Load { by_rate, labels }
    }

    fn title(&self) -> &'static str {
        if self.by_rate {
            "offered rate, requests/s"
        } else {
            "concurrency (streams)"
        }
    }

    /// The load axis in words: `offered rate` or `concurrency`.
    fn short(&self) -> &'static str {
        if self.by_rate {
            "offered rate"
        } else {
            "concurrency"
        }
    }

    /// A level as words: `rate 4/s` or `C4`.
    fn name(&self, i: usize) -> String {
        if self.by_rate {
            format!("rate {}/s", self.labels[i])
        } else {
            format!("C{}", self.labels[i])
        }
    }
}

/// A level value without trailing zeros (4, 0.5, 2.25).
fn level_text(v: f64) -> String {
    let s = format!("{v:.3}");
    s.trim_end_matches('0').trim_end_matches('.').to_string()
}

fn stat(r: &BenchReport, key: &str, q: fn(&Distribution) -> f64) -> Option<f64> {
    r.stats.metrics.get(key).map(q)
}

/// A dashed horizontal line across every level at `y` (an SLO limit).
fn level_hline(load: &Load, label: &str, y: f64, color: &str) -> Value {
    let data = [load.labels.first(), load.labels.last()]
        .into_iter()
        .flatten()
        .map(|x| json!({"x": x, "y": y, "t": label}))
        .collect();
    let mut d = line(label, color, data);
    d["borderDash"] = json!([8, 4]);
    d["pointRadius"] = json!(0);
    d
}

/// The `--find-saturation` marker: a vertical line at the last level that held, from 0 to `top`.
fn saturation_marker(load: &Load, held: Option<usize>, top: f64, y_axis: &str) -> Option<Value> {
    let i = held?;
    let x = &load.labels[i];
    let label = format!("last level that held ({})", load.name(i));
    let tip = format!("--find-saturation: {label}");
    let mut d = line(
        &label,
        "#2e7d32",
        vec![
            json!({"x": x, "y": 0, "t": tip}),
            json!({"x": x, "y": top, "t": tip}),
        ],
    );
    d["borderDash"] = json!([2, 3]);
    d["pointRadius"] = json!(0);
    d["yAxisID"] = json!(y_axis);
    Some(d)
}

/// A percentile drawn on the latency plots: name, how to read it, colour, dash pattern.
type Pct = (
    &'static str,
    fn(&Distribution) -> f64,
    &'static str,
    &'static [u32],
);

const PCT: [Pct; 3] = [
    ("p50", |d| d.p50, "#1f77b4", &[]),
    ("p95", |d| d.p95, "#ff7f0e", &[6, 4]),
    ("p99", |d| d.p99, "#d62728", &[2, 3]),
];

/// p50, p95 and p99 of one metric at each level, with the metric's SLO limits.
fn latency_vs_load(
    reports: &[BenchReport],
    load: &Load,
    metric: SloMetric,
    name: &str,
    limits: &[SloLimit],
    held: Option<usize>,
) -> Option<Value> {
    let key = metric.key();
    let mut ds = Vec::new();
    let mut top: f64 = 0.0;
    for (p, q, color, dash) in PCT {
        let data: Vec<Value> = reports
            .iter()
            .enumerate()
            .filter_map(|(i, r)| {
                let y = stat(r, key, q)?;
                top = top.max(y);
                Some(json!({"x": load.labels[i], "y": y,
                    "t": format!("{} {name} {p}: {} ms", load.name(i), fmt(y))}))
            })
            .collect();
        if data.is_empty() {
            continue;
        }
        let mut d = line(p, color, data);
        d["borderDash"] = json!(dash);
        ds.push(d);
    }
    if ds.is_empty() {
        return None;
    }
    for l in limits.iter().filter(|l| l.metric == metric) {
        top = top.max(l.limit_ms);
        ds.push(level_hline(
            load,
            &format!("SLO {l}"),
            l.limit_ms,
            "#6a1b9a",
        ));
    }
    ds.extend(saturation_marker(load, held, top, "y"));
    Some(config(
        "line",
        &format!("{name} against {}", load.short()),
        ds,
        level_axis(load.title(), &load.labels),
        zero_axis(&format!("{name}, ms")),
    ))
}

/// Output throughput (left) and completed requests per second (right; the offered rate beside
/// it on a rate sweep, goodput with `--slo`) at each level.
fn throughput_vs_load(reports: &[BenchReport], load: &Load, held: Option<usize>) -> Option<Value> {
    let at = |f: &dyn Fn(&BenchReport) -> Option<f64>, what: &str, unit: &str| -> Vec<Value> {
        reports
            .iter()
            .enumerate()
            .filter_map(|(i, r)| {
                let y = f(r)?;
                Some(json!({"x": load.labels[i], "y": y,
                    "t": format!("{}: {what} {} {unit}", load.name(i), fmt(y))}))
            })
            .collect()
    };
    let tok = at(&|r| r.stats.aggregate_output_tok_s, "output", "tok/s");
    if tok.is_empty() {
        return None;
    }
    let mut req_top: f64 = 0.0;
    let mut ds = vec![line("output tok/s (left)", "#1f77b4", tok)];
    let mut right = |label: &str, color: &str, data: Vec<Value>, dash: bool| {
        for v in &data {
            req_top = req_top.max(v["y"].as_f64().unwrap_or(0.0));
        }
        if data.is_empty() {
            return;
        }
        let mut d = line(label, color, data);
        d["yAxisID"] = json!("y2");
        if dash {
            d["borderDash"] = json!([6, 4]);
        }
        ds.push(d);
    };
    right(
        "completed requests/s (right)",
        "#2ca02c",
        at(&|r| r.stats.request_rate_per_s, "completed", "requests/s"),
        false,
    );
    if load.by_rate {
        right(
            "offered requests/s (right)",
            "#7f7f7f",
            at(&|r| r.load.rate_per_s, "offered", "requests/s"),
            true,
        );
    }
    right(
        "goodput requests/s (right)",
        "#9467bd",
        at(
            &|r| r.goodput.as_ref()?.goodput_req_s,
            "goodput",
            "requests/s",
        ),
        false,
    );
    ds.extend(saturation_marker(load, held, req_top, "y2"));
    let mut c = config(
        "line",
        &format!("Throughput against {}", load.short()),
        ds,
        level_axis(load.title(), &load.labels),
        zero_axis("output throughput, tok/s"),
    );
    let mut y2 = zero_axis("requests per second, requests/s");
    y2["position"] = json!("right");
    y2["grid"] = json!({"drawOnChartArea": false});
    c["options"]["scales"]["y2"] = y2;
    Some(c)
}

/// Output throughput against p95 E2E latency, one labelled point per level.
fn frontier(reports: &[BenchReport], load: &Load) -> Option<Value> {
    let mut data = Vec::new();
    let mut names = Vec::new();
    for (i, r) in reports.iter().enumerate() {
        let (Some(x), Some(e)) = (
            r.stats.aggregate_output_tok_s,
            stat(r, SloMetric::E2e.key(), |d| d.p95),
        ) else {
            continue;
        };
        data.push(pt(
            x,
            e,
            format!("{}: {} tok/s, p95 E2E {} ms", load.name(i), fmt(x), fmt(e)),
        ));
        names.push(load.name(i));
    }
    if data.is_empty() {
        return None;
    }
    let mut d = line("levels (labelled)", "#1f77b4", data);
    d["levelLabels"] = json!(names);
    Some(chartkit::frontier_config(
        vec![d],
        "output throughput, tok/s",
    ))
}

fn sorted(v: impl Iterator<Item = f64>) -> Vec<f64> {
    let mut v: Vec<f64> = v.filter(|x| x.is_finite()).collect();
    v.sort_by(f64::total_cmp);
    v
}

/// One CDF per level of a per-request metric.
fn cdf(
    reports: &[BenchReport],
    load: &Load,
    name: &str,
    of: fn(&RequestMetrics) -> Option<f64>,
) -> Option<Value> {
    let mut ds = Vec::new();
    for (i, r) in reports.iter().enumerate() {
        let v = sorted(r.points.iter().filter_map(|(_, m)| of(m)));
        if v.is_empty() {
            continue;
        }
        let who = load.name(i);
        let mut d = line(
            &format!("{who} (n={})", v.len()),
            color_at(i),
            cdf_points(&who, &v),
        );
        d["pointRadius"] = json!(0);
        ds.push(d);
    }
    (!ds.is_empty()).then(|| cdf_config(&format!("{name} distribution per level"), name, ds))
}

/// Every request's TTFT at the moment it was sent, per level, over the whole run.
fn timeline(reports: &[BenchReport], load: &Load) -> Option<Value> {
    let t0 = reports
        .iter()
        .flat_map(|r| r.points.iter().map(|(sent, _)| *sent))
        .min()?;
    let mut ds = Vec::new();
    for (i, r) in reports.iter().enumerate() {
        let who = load.name(i);
        let data: Vec<Value> = r
            .points
            .iter()
            .filter_map(|(sent, m)| {
                let y = m.ttft_ms?;
                let x = (sent - t0) as f64 / 1e9;
                Some(pt(
                    x,
                    y,
                    format!("{who}: TTFT {} ms, sent at {} s", fmt(y), fmt(x)),
                ))
            })
            .collect();
        if data.is_empty() {
            continue;
        }
        let mut d = line(&who, color_at(i), data);
        d["showLine"] = json!(false);
        d["pointRadius"] = json!(2.5);
        ds.push(d);
    }
    if ds.is_empty() {
        return None;
    }
    let mut x = axis("linear", "time into the run, s");
    x["beginAtZero"] = json!(true);
    Some(config(
        "scatter",
        "Timeline of the run: TTFT per request",
        ds,
        x,
        zero_axis("TTFT, ms"),
    ))
}

/// Every plot of the page, in order.
fn plots(reports: &[BenchReport], shape: &LoadShape, limits: &[SloLimit]) -> Vec<Plot> {
    let load = Load::of(reports);
    let held = shape
        .find_saturation
        .then(|| sweep::held_and_broken(shape, reports).0)
        .flatten();
    let axis_name = load.short();
    let one = reports.len() < 2;
    let single = format!("One level was measured: a curve against {axis_name} needs a sweep (--rate 1,2,4 or --concurrency 1,2,4).");
    let slo_words = if limits.is_empty() {
        String::new()
    } else {
        " Dashed purple lines: the --slo limits on this metric.".to_string()
    };
    let sat_words = if held.is_some() {
        " The dotted green line marks the last level that held under --find-saturation."
    } else {
        ""
    };
    let mut out = Vec::new();
    for (id, metric, name, what) in [
        (
            "ttft-vs-load",
            SloMetric::Ttft,
            "TTFT",
            "time to the first token",
        ),
        (
            "itl-vs-load",
            SloMetric::Itl,
            "ITL",
            "inter-token latency (generation time per token after the first)",
        ),
        ("e2e-vs-load", SloMetric::E2e, "E2E", "end-to-end latency"),
    ] {
        let c = (!one)
            .then(|| latency_vs_load(reports, &load, metric, name, limits, held))
            .flatten();
        out.push(plot(
            id,
            &format!("{name} against {axis_name}"),
            &format!("p50 (solid), p95 (dashed) and p99 (dotted) {what} of each level's successful requests, one tick per level.{slo_words}{sat_words}"),
            c,
            if one { &single } else { "No level recorded this metric." },
        ));
    }
    let offered = if load.by_rate {
        " The grey dashed line is the offered rate: completed requests falling below it is the server falling behind."
    } else {
        ""
    };
    out.push(plot(
        "throughput-vs-load",
        &format!("Throughput against {axis_name}"),
        &format!("Output tokens per second (left axis) and completed requests per second (right axis) at each level.{offered}{sat_words}"),
        (!one).then(|| throughput_vs_load(reports, &load, held)).flatten(),
        if one { &single } else { "No level recorded its throughput." },
    ));
    out.push(plot(
        "frontier",
        "Throughput-latency frontier",
        "Each level's output throughput against its p95 end-to-end latency (points labelled with their level): further right serves more tokens per second, lower answers sooner.",
        (!one).then(|| frontier(reports, &load)).flatten(),
        if one { &single } else { "No level has both throughput and end-to-end latency." },
    ));
    for (id, name, of) in [
        (
            "ttft-cdf",
            "TTFT",
            (|m: &RequestMetrics| m.ttft_ms) as fn(&RequestMetrics) -> Option<f64>,
        ),
        ("itl-cdf", "ITL", |m: &RequestMetrics| m.itl_ms),
    ] {
        out.push(plot(
            id,
            &format!("{name} distribution"),
            &format!("Empirical CDF of {name} per level, from every successful measured request's own value (n in the legend). A curve further left is faster; a steep one is steady."),
            cdf(reports, &load, name, of),
            &format!("No request recorded its {name}."),
        ));
    }
    out.push(plot(
        "timeline",
        "Timeline of the run",
        "Every successful measured request's TTFT at the moment it was sent, per level, on the run's clock (warm-up requests and the time between levels, prompt sizing included, are not drawn as requests).",
        timeline(reports, &load),
        "No request recorded its TTFT.",
    ));
    out
}

fn cell(v: Option<f64>) -> String {
    v.map(fmt).unwrap_or_else(|| "—".into())
}

/// The page: what was measured, a table of the levels, the plots.
pub fn render(reports: &[BenchReport], shape: &LoadShape, limits: &[SloLimit]) -> Result<String> {
    let Some(first) = reports.first() else {
        bail!("--html: no level was measured, nothing to draw");
    };
    let load = Load::of(reports);
    let mut o = chartkit::head();
    let kind = if reports.len() > 1 {
        format!("{} sweep, {} levels", sweep::axis(shape), reports.len())
    } else {
        "one level".to_string()
    };
    let _ = write!(
        o,
        "<h1>bakeoff bench: {}</h1><p>{} · model {} · {} endpoint · {kind} · started {} · bakeoff {}</p>",
        esc(&first.model),
        esc(&first.url),
        esc(&first.model),
        esc(&serde_json::to_value(first.endpoint).ok().and_then(|v| v.as_str().map(str::to_string)).unwrap_or_default()),
        esc(&first.started_at),
        esc(first.bakeoff_version),
    );
    if !limits.is_empty() {
        let l: Vec<String> = limits.iter().map(|l| l.to_string()).collect();
        let _ = write!(o, "<p><b>SLO:</b> {}</p>", esc(&l.join(", ")));
    }
    if shape.find_saturation {
        let (held, broke) = sweep::held_and_broken(shape, reports);
        let name = |i: Option<usize>| i.map(|i| load.name(i)).unwrap_or_else(|| "none".into());
        let _ = write!(
            o,
            "<p><b>Saturation:</b> last level that held: {}; first that broke: {}{}</p>",
            esc(&name(held)),
            esc(&name(broke)),
            sweep::stop_reason(shape, reports)
                .map(|w| format!(" (stopped: {})", esc(&w)))
                .unwrap_or_default()
        );
    }
    let _ = write!(
        o,
        "<h2>Levels</h2><table><tr><th>{}</th><th>ok</th><th>failed</th><th>requests/s</th><th>output tok/s</th><th>total tok/s</th>",
        esc(load.title())
    );
    for m in ["TTFT", "ITL", "E2E"] {
        let _ = write!(
            o,
            "<th>{m} p50, ms</th><th>{m} p95, ms</th><th>{m} p99, ms</th>"
        );
    }
    if !limits.is_empty() {
        o.push_str("<th>goodput, requests/s</th><th>SLO</th>");
    }
    o.push_str("</tr>");
    for (i, r) in reports.iter().enumerate() {
        let _ = write!(
            o,
            "<tr><td>{}</td><td class=n>{}</td><td class=n>{}</td><td class=n>{}</td><td class=n>{}</td><td class=n>{}</td>",
            esc(&load.labels[i]),
            r.stats.ok,
            r.stats.failed,
            cell(r.stats.request_rate_per_s),
            cell(r.stats.aggregate_output_tok_s),
            cell(r.stats.aggregate_total_tok_s),
        );
        for k in ["ttft_ms", "itl_ms", "e2e_ms"] {
            for (_, q, _, _) in PCT {
                let _ = write!(o, "<td class=n>{}</td>", cell(stat(r, k, q)));
            }
        }
        if !limits.is_empty() {
            let met = r.slo.as_ref().map(|s| s.met);
            let _ = write!(
                o,
                "<td class=n>{}</td><td class=\"{}\">{}</td>",
                cell(r.goodput.as_ref().and_then(|g| g.goodput_req_s)),
                if met == Some(true) { "ok" } else { "bad" },
                match met {
                    Some(true) => "met",
                    Some(false) => "BROKEN",
                    None => "—",
                }
            );
        }
        o.push_str("</tr>");
    }
    o.push_str("</table>");
    let warnings: Vec<(usize, &String)> = reports
        .iter()
        .enumerate()
        .flat_map(|(i, r)| r.warnings.iter().map(move |w| (i, w)))
        .collect();
    if !warnings.is_empty() {
        o.push_str("<h2>Warnings</h2><ul>");
        for (i, w) in warnings {
            let _ = write!(o, "<li><b>{}:</b> {}</li>", esc(&load.name(i)), esc(w));
        }
        o.push_str("</ul>");
    }
    if reports.iter().any(|r| r.interrupted) {
        o.push_str("<p class=\"bad\">Interrupted: the last level covers only the requests that completed before the signal.</p>");
    }
    o.push_str(&chartkit::plots_section(
        "Plots",
        &plots(reports, shape, limits),
    ));
    o.push_str("<p>Written by <code>bakeoff bench --html</code>; the numbers are those of <code>--json</code>.</p>");
    o.push_str(&chartkit::tail());
    Ok(o)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn levels_read_without_trailing_zeros() {
        assert_eq!(level_text(4.0), "4");
        assert_eq!(level_text(0.5), "0.5");
        assert_eq!(level_text(2.25), "2.25");
    }

    #[test]
    fn an_html_path_in_a_missing_folder_is_refused_before_the_run() {
        let e = check_path(Some(Path::new("/no/such/folder/bench.html")))
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("/no/such/folder") && e.contains("does not exist"),
            "{e}"
        );
        let d = tempfile::tempdir().unwrap();
        assert!(check_path(Some(d.path())).is_err());
        assert!(check_path(Some(&d.path().join("b.html"))).is_ok());
        assert!(check_path(Some(Path::new("b.html"))).is_ok());
    }
}
