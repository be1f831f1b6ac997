//! `report.html`: one self-contained file (inline CSS, the vendored Chart.js and the charts'
//! data, no network access): the verdict, the headline table and the plots of `charts.rs` — TTFT
//! against decode per arm, TTFT and ITL distributions, latency and throughput against
//! concurrency, the throughput-latency frontier and the run's timeline.
//!
//! The page's script (`charts.js`) writes each chart's render status into `#chart-status` and sets
//! `document.title` to `ok` once every chart rendered with no script error, so a headless browser
//! can check it (`tests/it/report/browser.rs`).

use super::charts::{self, Plot};
use super::markdown::{interval_cell, intervals_sentence};
use super::series::Series;
use super::summary::{headline_levels, level_key, ranked_level};
use super::timeline;
use crate::decide::metric::{CONCURRENCY, DECODE, TTFT};
use crate::decide::Verdict;
use crate::evidence::result::CampaignResult;
use serde_json::Value;
use std::fmt::Write as _;

const STYLE: &str = "body{font-family:sans-serif;margin:24px;color:#222;max-width:1240px}\
table{border-collapse:collapse;margin:8px 0 16px}td,th{border:1px solid #ccc;padding:4px 8px;font-size:13px;text-align:left}\
th{background:#f0f0f0}td.n{text-align:right}.charts{display:grid;grid-template-columns:repeat(auto-fill,minmax(580px,1fr));gap:20px}\
figure{margin:0}.box{position:relative;height:400px}figcaption{font-size:12px;color:#555;margin-top:4px}\
p.missing{color:#a11;border:1px dashed #ccc;padding:12px}.ok{color:#186a1d}.bad{color:#a11}";

pub fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// The plots' figures and their configurations (`#chart-specs`, JSON safe inside a script
/// element).
fn figures(plots: &[Plot]) -> (String, String) {
    let mut o = String::new();
    let mut specs = Vec::new();
    for p in plots {
        match &p.config {
            Some(c) => {
                let _ = write!(
                    o,
                    "<figure id=\"fig-{id}\"><div class=\"box\"><canvas id=\"chart-{id}\" role=\"img\" aria-label=\"{t}\"></canvas></div><figcaption>{c}</figcaption></figure>",
                    id = p.id,
                    t = esc(&p.title),
                    c = esc(&p.caption)
                );
                specs.push(serde_json::json!({"id": p.id, "config": c}));
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

fn v2s(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Null => "—".into(),
        o => o.to_string(),
    }
}

pub fn render(v: &Verdict, r: &CampaignResult, s: &Series, summary: &Value) -> String {
    let mut o = String::new();
    let _ = write!(
        o,
        "<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>pending</title>\
         <meta name=\"viewport\" content=\"width=device-width\"><style>{STYLE}</style>\
         <script>window.__errs=[];window.addEventListener('error',function(e){{window.__errs.push(String(e.message))}});\
         (function(){{var ce=console.error;console.error=function(){{window.__errs.push('console.error');ce.apply(console,arguments)}}}})();</script>\
         </head><body>"
    );
    let _ = write!(o, "<h1>Bake-off verdict: {}</h1>", esc(&r.campaign_id));
    let d = &summary["decision"];
    let _ = write!(
        o,
        "<p><b>Winner:</b> {} &nbsp; <b>Promotion authorized:</b> <span class=\"{}\">{}</span> &nbsp; <b>Labels:</b> {} &nbsp; <b>Complete:</b> {}</p><p>{}</p><p><b>Next gate:</b> {}</p>",
        esc(&v2s(&d["winner"])),
        if v.promotion_authorized { "ok" } else { "bad" },
        if v.promotion_authorized { "yes" } else { "no" },
        esc(&v.decision_labels.join(", ")),
        if v.complete { "yes" } else { "no" },
        esc(&v.reason),
        esc(&v.next_gate)
    );
    let _ = write!(
        o,
        "<p>{} · {} · incumbent {} · matched prompt {} tokens · priority {}</p>",
        esc(&r.identity.hardware),
        esc(&r.identity.topology),
        esc(&r.identity.incumbent),
        v2s(&summary["workload"]["matched_prompt_tokens"]),
        esc(&v
            .priorities
            .iter()
            .map(|p| p.as_str())
            .collect::<Vec<_>>()
            .join(" > "))
    );
    let levels = headline_levels(r);
    let ranked = ranked_level(v, r);
    let level_heads: String = levels
        .iter()
        .map(|c| {
            let tag = if Some(*c) == ranked { " (ranked)" } else { "" };
            format!("<th>C{c} {}{tag}</th>", CONCURRENCY.unit)
        })
        .collect();
    let _ = write!(
        o,
        "<h2>Headline results</h2><p>{}</p><table><tr><th>candidate</th><th>context</th><th>{}</th><th>interval</th><th>{}</th><th>interval</th>{level_heads}<th>decision</th></tr>",
        esc(&intervals_sentence(summary)),
        TTFT.p50_header(),
        DECODE.p50_header(),
    );
    for h in summary["headline_results"].as_array().into_iter().flatten() {
        let ci = |m: &crate::decide::metric::Descriptor| {
            let c = interval_cell(h, &m.ci95_key(), &m.ci_key());
            esc(c.trim().trim_start_matches('(').trim_end_matches(')'))
        };
        let level_cells: String = levels
            .iter()
            .map(|c| {
                format!(
                    "<td class=n>{}</td>",
                    h.get(level_key(*c)).map(v2s).unwrap_or_else(|| "—".into())
                )
            })
            .collect();
        let _ = write!(
            o,
            "<tr><td>{}</td><td class=n>{}</td><td class=n>{}</td><td class=n>{}</td><td class=n>{}</td><td class=n>{}</td>{level_cells}<td>{}</td></tr>",
            esc(&v2s(&h["candidate"])),
            v2s(&h["context_tokens"]),
            v2s(&h[TTFT.p50_key()]),
            ci(&TTFT),
            v2s(&h[DECODE.p50_key()]),
            ci(&DECODE),
            esc(&v2s(&h["decision"]))
        );
    }
    let mut plots = charts::plots(r, s);
    plots.push(timeline::plot(r, s));
    let (figs, specs) = figures(&plots);
    let _ = write!(
        o,
        "</table><h2>Plots</h2><div class=\"charts\">{figs}</div><pre id=\"chart-status\" hidden></pre>\
         <script type=\"application/json\" id=\"chart-specs\">{specs}</script>"
    );
    o.push_str("<h2>Failures</h2>");
    if v.failures.is_empty() {
        o.push_str("<p>None.</p>");
    } else {
        o.push_str(
            "<table><tr><th>candidate</th><th>class</th><th>detail</th><th>evidence</th></tr>",
        );
        for f in &v.failures {
            let _ = write!(
                o,
                "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
                esc(&f.candidate),
                esc(f.class.as_str()),
                esc(&f.detail),
                esc(f.evidence.as_deref().unwrap_or(""))
            );
        }
        o.push_str("</table>");
    }
    o.push_str("<h2>Limitations</h2><ul>");
    for l in &v.limitations {
        let _ = write!(o, "<li>{}</li>", esc(l));
    }
    o.push_str("</ul><h2>Arms</h2><table><tr><th>arm</th><th>role</th><th>rank</th><th>label</th><th>decision</th></tr>");
    for a in &v.arms {
        let _ = write!(
            o,
            "<tr><td>{}</td><td>{}</td><td class=n>{}</td><td>{}</td><td>{}</td></tr>",
            esc(&a.label),
            esc(&a.role),
            a.rank.map(|x| x.to_string()).unwrap_or_else(|| "—".into()),
            esc(&a.decision_label),
            esc(&a.decision)
        );
    }
    o.push_str("</table><p>Re-check: <code>bakeoff verify DIR</code> re-hashes every evidence file; <code>bakeoff report DIR</code> re-derives this page.</p>");
    let _ = write!(
        o,
        "<script>{}</script><script>{}</script></body></html>",
        charts::chart_js(),
        charts::GLUE_JS
    );
    o
}
