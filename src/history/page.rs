//! `bakeoff history report --html FILE`: one trend chart per series (each run's median with its
//! interval, change points marked), drawn with `report::chartkit` like `report.html`, and a
//! table per series whose rows link each run to its bundle's report.

use super::regressions::Found;
use super::series::{unit, Series};
use crate::report::chartkit::{self, esc, Plot};
use serde_json::{json, Value};
use std::fmt::Write as _;

/// The page for `series`, with the change points `found` (whose `series` index into it).
pub fn render(series: &[Series], found: &[Found], db: &str) -> String {
    let plots: Vec<Plot> = series
        .iter()
        .enumerate()
        .map(|(i, s)| plot(i, s, found))
        .collect();
    let mut o = chartkit::head();
    let _ = write!(
        o,
        "<h1>bakeoff history</h1><p>{} series from <code>{}</code>; {} change point(s), {} of them regressions. Each point is one run's median with its interval; a triangle marks the first run after a change.</p>",
        series.len(),
        esc(db),
        found.len(),
        found.iter().filter(|f| f.regression).count()
    );
    o.push_str(&changes_table(series, found));
    o.push_str(&chartkit::plots_section("Trends", &plots));
    for (i, s) in series.iter().enumerate() {
        o.push_str(&runs_table(i, s));
    }
    o.push_str(&chartkit::tail());
    o
}

/// A plot id per series. Chart ids are `&'static str` in `chartkit`; a page is rendered once per
/// process, so the few bytes per series are leaked rather than widening that type for all pages.
fn id(i: usize) -> &'static str {
    Box::leak(format!("series-{i}").into_boxed_str())
}

fn plot(i: usize, s: &Series, found: &[Found]) -> Plot {
    let u = unit(&s.key.figure);
    let tip = |j: usize| {
        let p = &s.points[j];
        format!(
            "run {} ({}, {}…): {} {u} [{}–{}], n {}",
            j + 1,
            p.started_at,
            &p.digest[..12.min(p.digest.len())],
            chartkit::fmt(p.value),
            p.lo.map(chartkit::fmt).unwrap_or_default(),
            p.hi.map(chartkit::fmt).unwrap_or_default(),
            p.n
        )
    };
    let mut med = chartkit::line(
        "median",
        chartkit::color_at(0),
        (0..s.points.len())
            .map(|j| chartkit::pt(j as f64 + 1.0, s.points[j].value, tip(j)))
            .collect(),
    );
    med["group"] = json!("m");
    let band = |label: &str, get: fn(&super::series::Point) -> Option<f64>| -> Value {
        let mut d = chartkit::line(
            label,
            "#9ecae1",
            s.points
                .iter()
                .enumerate()
                .filter_map(|(j, p)| get(p).map(|v| chartkit::pt(j as f64 + 1.0, v, tip(j))))
                .collect(),
        );
        d["borderWidth"] = json!(1);
        d["pointRadius"] = json!(0);
        d["borderDash"] = json!([4, 3]);
        d["group"] = json!("m");
        d
    };
    let mut datasets = vec![med, band("interval", |p| p.lo), {
        let mut d = band("interval high", |p| p.hi);
        d["noLegend"] = json!(true);
        d
    }];
    let marks: Vec<Value> = found
        .iter()
        .filter(|f| f.series == i)
        .map(|f| {
            let j = f.change.index;
            chartkit::pt(
                j as f64 + 1.0,
                s.points[j].value,
                format!(
                    "change at run {}: {} → {} {u} ({:+.1} %){}",
                    j + 1,
                    chartkit::fmt(f.change.before.median),
                    chartkit::fmt(f.change.after.median),
                    f.change.relative * 100.0,
                    if f.changed.is_empty() {
                        String::new()
                    } else {
                        format!("; {}", f.changed.join("; "))
                    }
                ),
            )
        })
        .collect();
    if !marks.is_empty() {
        let mut d = chartkit::line("change point", chartkit::color_at(1), marks);
        d["showLine"] = json!(false);
        d["pointRadius"] = json!(9);
        d["pointStyle"] = json!("triangle");
        datasets.push(d);
    }
    let cfg = chartkit::config(
        "scatter",
        &s.key.describe(),
        datasets,
        chartkit::axis("linear", "run, oldest first"),
        chartkit::axis("linear", &format!("{}, {u}", s.key.figure)),
    );
    chartkit::plot(
        id(i),
        &s.key.describe(),
        &format!(
            "{} runs; the runs are listed in the table “{}” below, each linked to its bundle.",
            s.points.len(),
            s.key.describe()
        ),
        Some(cfg),
        "",
    )
}

fn changes_table(series: &[Series], found: &[Found]) -> String {
    if found.is_empty() {
        return "<p>No change point in any series.</p>".into();
    }
    let mut o = String::from(
        "<h2>Change points</h2><table><tr><th>series</th><th>before</th><th>after</th><th>change</th><th>first run after</th><th>what changed</th></tr>",
    );
    for f in found {
        let s = &series[f.series];
        let u = unit(&s.key.figure);
        let lvl = |l: &super::changepoint::Level| {
            format!(
                "{} {u} [{}–{}], {} runs",
                chartkit::fmt(l.median),
                chartkit::fmt(l.lo),
                chartkit::fmt(l.hi),
                l.points
            )
        };
        let _ = write!(
            o,
            "<tr><td>{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n {}\">{:+.1} %</td><td><a href=\"{}\">run {} ({})</a></td><td>{}</td></tr>",
            esc(&s.key.describe()),
            lvl(&f.change.before),
            lvl(&f.change.after),
            if f.regression { "bad" } else { "ok" },
            f.change.relative * 100.0,
            esc(&link(&f.path)),
            f.change.index + 1,
            esc(&f.started_at),
            esc(&if f.changed.is_empty() { "nothing recorded".to_string() } else { f.changed.join("; ") })
        );
    }
    o.push_str("</table>");
    o
}

fn runs_table(i: usize, s: &Series) -> String {
    let u = unit(&s.key.figure);
    let mut o = format!(
        "<h3 id=\"runs-{i}\">{}</h3><table><tr><th>run</th><th>started</th><th>{}, {u}</th><th>interval</th><th>n</th><th>bundle</th></tr>",
        esc(&s.key.describe()),
        esc(&s.key.figure)
    );
    for (j, p) in s.points.iter().enumerate() {
        let _ = write!(
            o,
            "<tr><td class=\"n\">{}</td><td>{}</td><td class=\"n\">{}</td><td class=\"n\">{}–{}</td><td class=\"n\">{}</td><td><a class=\"bundle\" href=\"{}\">{}…</a></td></tr>",
            j + 1,
            esc(&p.started_at),
            chartkit::fmt(p.value),
            p.lo.map(chartkit::fmt).unwrap_or_default(),
            p.hi.map(chartkit::fmt).unwrap_or_default(),
            p.n,
            esc(&link(&p.path)),
            esc(&p.digest[..16.min(p.digest.len())])
        );
    }
    o.push_str("</table>");
    o
}

/// The bundle's own report (a local file URL; the path is a hint, the bundle may have moved).
fn link(path: &str) -> String {
    format!("file://{path}/{}", crate::evidence::bundle::REPORT_HTML)
}
