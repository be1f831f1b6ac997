//! The pieces every Chart.js page of bakeoff is built from: the campaign's `report.html`
//! (`charts.rs`, `timeline.rs`, `html.rs`) and `bakeoff bench --html` (`report/bench/html.rs`).
//!
//! Chart.js 4 (MIT) is vendored, pinned and embedded: `vendor/chart.js/` (version, licence and
//! SHA-256 in `vendor/README.md`), so a page stays one self-contained file that loads nothing.
//! Each plot is a [`Plot`]: a chart, or the reason it could not be drawn. [`page`] wraps plots
//! into that file; the page's script (`charts.js`) draws them and writes `#chart-status`.
//!
//! A dataset may carry `noLegend` (left out of the legend), `group` (clicking a legend entry
//! toggles its whole group) and `levelLabels` (text drawn beside each point); a point may carry
//! `t`, its tooltip.

use serde_json::{json, Value};
use std::fmt::Write as _;

/// Chart.js 4.6.1, `dist/chart.umd.min.js` of the npm package (see `vendor/README.md`).
pub const CHART_JS: &str = include_str!("../../vendor/chart.js/chart.umd.min.js");
/// The page's glue: builds each chart from its configuration and writes `#chart-status`.
pub const GLUE_JS: &str = include_str!("charts.js");

/// The vendored library without its source-map comment (the page has no map to load).
pub fn chart_js() -> &'static str {
    match CHART_JS.rfind("\n//# sourceMappingURL=") {
        Some(i) => &CHART_JS[..i],
        None => CHART_JS,
    }
}

pub const COLORS: &[&str] = &[
    "#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f",
    "#bcbd22", "#17becf", "#393b79", "#637939",
];

/// The colour of the i-th series (arm, level), cycling.
pub fn color_at(i: usize) -> &'static str {
    COLORS[i % COLORS.len()]
}

/// A plot of a page: its chart, or why there is none.
#[derive(Debug, Clone, PartialEq)]
pub struct Plot {
    /// Stable id: the canvas is `chart-<id>`, the status entry names it.
    pub id: &'static str,
    pub title: String,
    pub caption: String,
    /// The Chart.js configuration; None when there is no data for it.
    pub config: Option<Value>,
    /// Why the plot is missing (when `config` is None).
    pub missing: String,
}

pub fn plot(
    id: &'static str,
    title: &str,
    caption: &str,
    config: Option<Value>,
    missing: &str,
) -> Plot {
    Plot {
        id,
        title: title.to_string(),
        caption: caption.to_string(),
        config,
        missing: missing.to_string(),
    }
}

/// A titled axis (`linear`, `category`, ...).
pub fn axis(kind: &str, title: &str) -> Value {
    json!({"type": kind, "title": {"display": true, "text": title}, "grace": "5%"})
}

/// A category axis of load levels (concurrency or rate), labelled as given: evenly spaced,
/// one tick per level, never a fractional stream.
pub fn level_axis(title: &str, labels: &[String]) -> Value {
    let mut x = axis("category", title);
    x["labels"] = json!(labels);
    x.as_object_mut().unwrap().remove("grace");
    x
}

/// A linear axis that starts at zero.
pub fn zero_axis(title: &str) -> Value {
    let mut y = axis("linear", title);
    y["beginAtZero"] = json!(true);
    y
}

/// A chart configuration with x and y scales and a title.
pub fn config(kind: &str, title: &str, datasets: Vec<Value>, x: Value, y: Value) -> Value {
    json!({
        "type": kind,
        "data": {"datasets": datasets},
        "options": {
            "scales": {"x": x, "y": y},
            "plugins": {"title": {"display": true, "text": title}},
        },
    })
}

/// A dataset drawn as a line through its points.
pub fn line(label: &str, color: &str, data: Vec<Value>) -> Value {
    json!({
        "label": label, "data": data, "borderColor": color, "backgroundColor": color,
        "borderWidth": 2, "pointRadius": 3, "showLine": true, "fill": false,
    })
}

/// A point with its tooltip.
pub fn pt(x: f64, y: f64, t: String) -> Value {
    json!({"x": x, "y": y, "t": t})
}

/// A number as a short label: no more than 2 decimals, fewer for large values.
pub fn fmt(v: f64) -> String {
    if v.abs() >= 100.0 {
        format!("{v:.0}")
    } else if v.abs() >= 10.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.2}")
    }
}

/// An empirical CDF drawn as a step function through sorted values: each sample raises the
/// curve by 1/n (`who` names the series in the tooltips).
pub fn cdf_points(who: &str, sorted: &[f64]) -> Vec<Value> {
    let Some(first) = sorted.first() else {
        return Vec::new();
    };
    let mut pts = vec![pt(
        *first,
        0.0,
        format!("{who}: 0 % below {} ms", fmt(*first)),
    )];
    let mut prev = 0.0;
    for (x, p) in super::series::ecdf(sorted) {
        let tip = format!("{who}: {:.0} % at or below {} ms", p * 100.0, fmt(x));
        pts.push(pt(x, prev, tip.clone()));
        pts.push(pt(x, p, tip));
        prev = p;
    }
    pts
}

/// Widens a linear axis whose values span less than 0.1 (every request took about the same
/// time) to a 0.1 span around them, so its ticks need no more than 2 decimals.
pub fn readable_range(axis: &mut Value, values: impl Iterator<Item = f64>) {
    let (lo, hi) = values
        .filter(|v| v.is_finite())
        .fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), v| {
            (lo.min(v), hi.max(v))
        });
    if lo.is_finite() && hi - lo < 0.1 {
        let mid = (lo + hi) / 2.0;
        axis["min"] = json!(((mid - 0.05) * 100.0).floor() / 100.0);
        axis["max"] = json!(((mid + 0.05) * 100.0).ceil() / 100.0);
        axis["grace"] = json!(0);
    }
}

/// The x values of a chart's datasets.
pub fn xs(datasets: &[Value]) -> impl Iterator<Item = f64> + '_ {
    values(datasets, "x")
}

fn values<'a>(datasets: &'a [Value], key: &'a str) -> impl Iterator<Item = f64> + 'a {
    datasets
        .iter()
        .flat_map(|d| d["data"].as_array().into_iter().flatten())
        .filter_map(move |p| p[key].as_f64())
}

/// The throughput-latency frontier (x: output throughput, y: p95 end-to-end latency in ms, one
/// point per level), with both axes widened where every point sits at about the same value
/// (bench's and the campaign report's).
pub fn frontier_config(datasets: Vec<Value>, x_title: &str) -> Value {
    let mut x = axis("linear", x_title);
    readable_range(&mut x, values(&datasets, "x"));
    let mut y = axis("linear", "p95 end-to-end latency, ms");
    readable_range(&mut y, values(&datasets, "y"));
    config("scatter", "Throughput-latency frontier", datasets, x, y)
}

/// A CDF chart of one metric (x: the metric in ms; y: fraction of requests, 0 to 1).
pub fn cdf_config(title: &str, metric: &str, datasets: Vec<Value>) -> Value {
    let mut y = axis("linear", "fraction of requests");
    y["min"] = json!(0);
    y["max"] = json!(1);
    y["grace"] = json!(0);
    let mut x = axis("linear", &format!("{metric}, ms"));
    readable_range(&mut x, xs(&datasets));
    config("scatter", title, datasets, x, y)
}

const STYLE: &str = "body{font-family:sans-serif;margin:24px;color:#222;max-width:1240px}\
table{border-collapse:collapse;margin:8px 0 16px}td,th{border:1px solid #ccc;padding:4px 8px;font-size:13px;text-align:left}\
th{background:#f0f0f0}td.n{text-align:right}.charts{display:grid;grid-template-columns:repeat(auto-fill,minmax(580px,1fr));gap:20px}\
figure{margin:0}.box{position:relative;height:400px}figure.wide{grid-column:1/-1}figure.wide .box{height:460px}\
figcaption{font-size:12px;color:#555;margin-top:4px}\
p.missing{color:#a11;border:1px dashed #ccc;padding:12px}.ok{color:#186a1d}.bad{color:#a11}";

/// Escapes text for HTML.
pub fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// Plots drawn across the whole page width (a timeline reads better wide).
const WIDE: &[&str] = &["timeline"];

/// The plots' figures and their configurations (`#chart-specs`, JSON safe inside a script
/// element).
fn figures(plots: &[Plot]) -> (String, String) {
    let mut o = String::new();
    let mut specs = Vec::new();
    for p in plots {
        let class = if WIDE.contains(&p.id) {
            " class=\"wide\""
        } else {
            ""
        };
        match &p.config {
            Some(c) => {
                let _ = write!(
                    o,
                    "<figure id=\"fig-{id}\"{class}><div class=\"box\"><canvas id=\"chart-{id}\" role=\"img\" aria-label=\"{t}\"></canvas></div><figcaption>{c}</figcaption></figure>",
                    id = p.id,
                    t = esc(&p.title),
                    c = esc(&p.caption)
                );
                specs.push(json!({"id": p.id, "config": c}));
            }
            None => {
                let _ = write!(
                    o,
                    "<figure id=\"fig-{}\"><p class=\"missing\"><b>{}:</b> {}</p></figure>",
                    p.id,
                    esc(&p.title),
                    esc(&p.missing)
                );
            }
        }
    }
    let json = serde_json::to_string(&specs)
        .unwrap_or_else(|_| "[]".into())
        .replace('<', "\\u003c");
    (o, json)
}

/// The page's head: the style and the error catcher `charts.js` reports (the title stays
/// `pending` until the charts are drawn).
pub fn head() -> String {
    format!(
        "<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>pending</title>\
         <meta name=\"viewport\" content=\"width=device-width\"><style>{STYLE}</style>\
         <script>window.__errs=[];window.addEventListener('error',function(e){{window.__errs.push(String(e.message))}});\
         (function(){{var ce=console.error;console.error=function(){{window.__errs.push('console.error');ce.apply(console,arguments)}}}})();</script>\
         </head><body>"
    )
}

/// The plots section: a heading, every figure, `#chart-status` and `#chart-specs`.
pub fn plots_section(heading: &str, plots: &[Plot]) -> String {
    let (figs, specs) = figures(plots);
    format!(
        "<h2>{}</h2><div class=\"charts\">{figs}</div><pre id=\"chart-status\" hidden></pre>\
         <script type=\"application/json\" id=\"chart-specs\">{specs}</script>",
        esc(heading)
    )
}

/// The page's end: the vendored library and the glue, inline.
pub fn tail() -> String {
    format!(
        "<script>{}</script><script>{}</script></body></html>",
        chart_js(),
        GLUE_JS
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_vendored_library_is_embedded_without_its_source_map() {
        assert!(CHART_JS.starts_with("/*!\n * Chart.js v4.6.1"));
        assert!(!chart_js().contains("sourceMappingURL"));
        assert!(!chart_js().contains("</script"));
    }

    #[test]
    fn ticks_read_as_short_numbers() {
        assert_eq!(fmt(1234.5678), "1235");
        assert_eq!(fmt(50.04), "50.0");
        assert_eq!(fmt(0.75), "0.75");
    }

    #[test]
    fn a_cdf_steps_from_zero_to_one() {
        let p = cdf_points("a", &[1.0, 2.0]);
        let xy: Vec<(f64, f64)> = p
            .iter()
            .map(|v| (v["x"].as_f64().unwrap(), v["y"].as_f64().unwrap()))
            .collect();
        assert_eq!(
            xy,
            vec![(1.0, 0.0), (1.0, 0.0), (1.0, 0.5), (2.0, 0.5), (2.0, 1.0)]
        );
        assert!(cdf_points("a", &[]).is_empty());
    }

    #[test]
    fn the_frontier_widens_both_axes_when_every_point_is_alike() {
        let d = line("a", "#000", vec![pt(100.00001, 250.00002, String::new())]);
        let c = frontier_config(vec![d], "tok/s");
        for axis in ["x", "y"] {
            let a = &c["options"]["scales"][axis];
            let (lo, hi) = (a["min"].as_f64().unwrap(), a["max"].as_f64().unwrap());
            assert!(hi - lo >= 0.1 && hi - lo < 0.2, "{axis}: {a}");
        }
    }

    #[test]
    fn a_range_too_narrow_for_two_decimal_ticks_is_widened() {
        let mut x = axis("linear", "ITL, ms");
        readable_range(&mut x, [5.0001, 5.0003].into_iter());
        assert_eq!(
            (x["min"].as_f64(), x["max"].as_f64()),
            (Some(4.95), Some(5.06))
        );
        let mut wide = axis("linear", "ITL, ms");
        readable_range(&mut wide, [5.0, 6.0].into_iter());
        assert!(wide.get("min").is_none());
    }
}
