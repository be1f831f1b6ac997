//! `report.html`: one self-contained file (inline CSS and SVG, no network access): the verdict,
//! the headline table and four plots — TTFT against decode per arm with the medians' intervals, latency CDFs
//! per arm, aggregate throughput against concurrency, GPU memory over the run where measured.
//!
//! A small inline script sets `document.title` to `ok` once the page has rendered its charts
//! with no script error, so a headless browser can check it (`tests/it/report/html.rs`).

use super::markdown::{interval_cell, intervals_sentence};
use super::series::Series;
use super::summary::{headline_levels, level_key, ranked_level};
use super::svg::{color, esc, nice, Chart};
use crate::decide::metric::{CONCURRENCY, DECODE, E2E, TTFT};
use crate::decide::Verdict;
use crate::evidence::result::CampaignResult;
use serde_json::Value;
use std::fmt::Write as _;

const STYLE: &str = "body{font-family:sans-serif;margin:24px;color:#222;max-width:1180px}\
table{border-collapse:collapse;margin:8px 0 16px}td,th{border:1px solid #ccc;padding:4px 8px;font-size:13px;text-align:left}\
th{background:#f0f0f0}td.n{text-align:right}.charts{display:flex;flex-wrap:wrap;gap:16px}\
figure{margin:0}figcaption{font-size:12px;color:#555;max-width:560px}.ok{color:#186a1d}.bad{color:#a11}";

fn arm_colors(r: &CampaignResult) -> impl Fn(&str) -> &'static str + '_ {
    move |id: &str| color(r.arms.iter().position(|a| a.id == id).unwrap_or(0))
}

fn label(r: &CampaignResult, id: &str) -> String {
    r.arm(id)
        .map(|a| {
            if a.label.is_empty() {
                a.id.clone()
            } else {
                a.label.clone()
            }
        })
        .unwrap_or_else(|| id.to_string())
}

fn scatter(r: &CampaignResult) -> Option<String> {
    let col = arm_colors(r);
    let pts: Vec<_> = r
        .arms
        .iter()
        .filter_map(|a| {
            let w = a.warm.as_ref()?;
            Some((a, TTFT.stat(w)?, DECODE.stat(w)?))
        })
        .collect();
    if pts.is_empty() {
        return None;
    }
    let xs = pts
        .iter()
        .flat_map(|(_, t, _)| [t.ci95[0], t.ci95[1], t.p50]);
    let ys = pts
        .iter()
        .flat_map(|(_, _, d)| [d.ci95[0], d.ci95[1], d.p50]);
    let (xl, xh) = xs.fold((f64::MAX, f64::MIN), |(l, h), v| (l.min(v), h.max(v)));
    let (yl, yh) = ys.fold((f64::MAX, f64::MIN), |(l, h), v| (l.min(v), h.max(v)));
    let mut c = Chart::new(nice(xl, xh, true), nice(yl, yh, true));
    let mut legend = Vec::new();
    for (a, t, d) in &pts {
        let k = col(&a.id);
        c.line(t.ci95[0], d.p50, t.ci95[1], d.p50, k);
        c.line(t.p50, d.ci95[0], t.p50, d.ci95[1], k);
        c.point(
            t.p50,
            d.p50,
            k,
            &format!(
                "{}: {} {:.1} {} [{:.1}, {:.1}], {} {:.1} {} [{:.1}, {:.1}]",
                label(r, &a.id),
                TTFT.short,
                t.p50,
                TTFT.unit,
                t.ci95[0],
                t.ci95[1],
                DECODE.short,
                d.p50,
                DECODE.unit,
                d.ci95[0],
                d.ci95[1]
            ),
        );
        legend.push((label(r, &a.id), k));
    }
    Some(c.finish(
        &format!("warm median {}, {} (interval)", TTFT.short, TTFT.unit),
        &format!("warm median {}, {} (interval)", DECODE.short, DECODE.unit),
        &legend,
        "TTFT against decode per arm",
    ))
}

fn cdfs(r: &CampaignResult, s: &Series) -> Option<(String, bool)> {
    let col = arm_colors(r);
    let list: Vec<_> = s
        .cdfs
        .iter()
        .filter(|c| c.metric == E2E.metric && !c.points.is_empty())
        .collect();
    if list.is_empty() {
        return None;
    }
    let (xl, xh) = list
        .iter()
        .flat_map(|c| c.points.iter().map(|p| p.0))
        .fold((f64::MAX, f64::MIN), |(l, h), v| (l.min(v), h.max(v)));
    let mut ch = Chart::new(nice(xl, xh, true), (0.0, 1.0));
    let mut legend = Vec::new();
    let mut exact = true;
    for c in &list {
        exact &= c.exact;
        // A step function: each sample raises the CDF.
        let mut pts = vec![(c.points[0].0, 0.0)];
        let mut prev = 0.0;
        for (x, p) in &c.points {
            pts.push((*x, prev));
            pts.push((*x, *p));
            prev = *p;
        }
        let k = col(&c.arm);
        ch.polyline(
            &pts,
            k,
            &format!(
                "{} ({} points from {})",
                c.label,
                c.points.len(),
                c.evidence
            ),
        );
        legend.push((c.label.clone(), k));
    }
    Some((
        ch.finish(
            "end-to-end latency, ms (warm, c1)",
            "fraction of requests",
            &legend,
            "latency CDF per arm",
        ),
        exact,
    ))
}

fn throughput(r: &CampaignResult) -> Option<String> {
    let col = arm_colors(r);
    let series: Vec<(String, Vec<(f64, f64)>)> = r
        .arms
        .iter()
        .filter_map(|a| {
            let mut v: Vec<(f64, f64)> = Vec::new();
            if let Some(x) = a.warm.as_ref().and_then(|w| w.aggregate_output_tok_s) {
                v.push((1.0, x));
            }
            for (k, t) in &a.concurrency {
                if let (Ok(c), Some(x)) = (k.parse::<f64>(), t.aggregate_output_tok_s) {
                    v.push((c, x));
                }
            }
            v.sort_by(|a, b| a.0.total_cmp(&b.0));
            (!v.is_empty()).then(|| (a.id.clone(), v))
        })
        .collect();
    if series.is_empty() {
        return None;
    }
    let xh = series
        .iter()
        .flat_map(|s| s.1.iter().map(|p| p.0))
        .fold(1.0, f64::max);
    let yh = series
        .iter()
        .flat_map(|s| s.1.iter().map(|p| p.1))
        .fold(0.0, f64::max);
    let mut ch = Chart::new((0.0, xh + 1.0), nice(0.0, yh, true));
    let mut legend = Vec::new();
    for (id, pts) in &series {
        let k = col(id);
        ch.polyline(pts, k, &label(r, id));
        for (x, y) in pts {
            ch.point(
                *x,
                *y,
                k,
                &format!("{} at C{}: {:.1} {}", label(r, id), x, y, CONCURRENCY.unit),
            );
        }
        legend.push((label(r, id), k));
    }
    Some(ch.finish(
        "concurrency (streams)",
        &format!("aggregate output {}", CONCURRENCY.unit),
        &legend,
        "aggregate throughput against concurrency",
    ))
}

fn gpu(r: &CampaignResult, s: &Series) -> Option<String> {
    let col = arm_colors(r);
    let mut pts: Vec<(String, String, f64)> = s
        .gpu
        .iter()
        .map(|g| (g.arm.clone(), g.step.clone(), g.used_mib))
        .collect();
    if pts.is_empty() {
        pts = r
            .arms
            .iter()
            .filter_map(|a| {
                Some((
                    a.id.clone(),
                    format!("{} peak", a.id),
                    a.gpu_peak_used_mib? as f64,
                ))
            })
            .collect();
    }
    if pts.is_empty() {
        return None;
    }
    let yh = pts.iter().map(|p| p.2).fold(0.0, f64::max);
    let mut ch = Chart::new((0.0, pts.len() as f64), nice(0.0, yh, true));
    let mut legend: Vec<(String, &str)> = Vec::new();
    for (i, (arm, step, used)) in pts.iter().enumerate() {
        let k = col(arm);
        ch.rect(
            i as f64 + 0.1,
            i as f64 + 0.9,
            *used,
            k,
            &format!("{step}: {used:.0} MiB"),
        );
        if !legend.iter().any(|(l, _)| *l == label(r, arm)) {
            legend.push((label(r, arm), k));
        }
    }
    Some(ch.finish(
        "timed steps in run order",
        "GPU memory used, MiB (max over the step)",
        &legend,
        "GPU memory over the run",
    ))
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
    o.push_str("</table><h2>Plots</h2><div class=\"charts\">");
    let mut n = 0;
    let mut fig = |o: &mut String, svg: Option<String>, cap: &str, missing: &str| match svg {
        Some(svg) => {
            n += 1;
            let _ = write!(
                o,
                "<figure>{svg}<figcaption>{}</figcaption></figure>",
                esc(cap)
            );
        }
        None => {
            let _ = write!(o, "<figure><p>{}</p></figure>", esc(missing));
        }
    };
    fig(&mut o, scatter(r), "Warm median TTFT against warm median decode speed per arm; bars are the intervals of the medians (order-statistic CIs from 6 requests, ranges [min, max] below; the table gives each one's coverage).", "No arm has warm TTFT and decode measurements.");
    let (c, exact) = match cdfs(r, s) {
        Some((svg, e)) => (Some(svg), e),
        None => (None, true),
    };
    fig(
        &mut o,
        c,
        if exact {
            "End-to-end latency CDF per arm, from every warm request's own value."
        } else {
            "End-to-end latency CDF per arm; some arms are drawn from percentiles only (their timing files carry no per-request values)."
        },
        "No per-arm latency samples were recorded.",
    );
    fig(
        &mut o,
        throughput(r),
        "Aggregate output throughput at each concurrency level (C1 is the warm run).",
        "No aggregate throughput was recorded.",
    );
    fig(
        &mut o,
        gpu(r, s),
        "GPU memory used during each timed step, in run order.",
        "GPU memory was not measured in this campaign (no GPU in the lane, or no telemetry).",
    );
    o.push_str("</div>");
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
        "<script>(function(){{var n=document.querySelectorAll('svg').length;\
         document.title=(window.__errs.length===0&&n>={n})?'ok':'error: '+window.__errs.join('; ')+' svg='+n;}})();</script></body></html>"
    );
    o
}
