//! `report.html`: one self-contained file (inline CSS, the vendored Chart.js and the charts'
//! data, no network access): the verdict, the headline table and the plots of `charts.rs` — TTFT
//! against decode per arm, TTFT and ITL distributions, latency and throughput against
//! concurrency, the throughput-latency frontier, the capacity step's rate curves (`rates.rs`)
//! and the run's timeline.
//!
//! The page's script (`charts.js`) writes each chart's render status into `#chart-status` and sets
//! `document.title` to `ok` once every chart rendered with no script error, so a headless browser
//! can check it (`tests/it/report/browser.rs`).

use super::chartkit::{self, esc};
use super::charts;
use super::markdown::{interval_cells, intervals_sentence, level_cell, num, or_dash};
use super::rates;
use super::series::Series;
use super::summary::{headline_levels, ranked_level, DecisionSummary};
use super::timeline;
use crate::decide::metric::{CONCURRENCY, DECODE, TTFT};
use crate::decide::Verdict;
use crate::evidence::result::CampaignResult;
use std::fmt::Write as _;

pub fn render(v: &Verdict, r: &CampaignResult, s: &Series, summary: &DecisionSummary) -> String {
    let mut o = String::new();
    o.push_str(&chartkit::head());
    let _ = write!(o, "<h1>Bake-off verdict: {}</h1>", esc(&r.campaign_id));
    let _ = write!(
        o,
        "<p><b>Winner:</b> {} &nbsp; <b>Promotion authorized:</b> <span class=\"{}\">{}</span> &nbsp; <b>Labels:</b> {} &nbsp; <b>Complete:</b> {}</p><p>{}</p><p><b>Next gate:</b> {}</p>",
        esc(&or_dash(summary.decision.winner.as_deref())),
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
        summary.workload.matched_prompt_tokens,
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
    for h in &summary.headline_results {
        let [ttft_ci, decode_ci] =
            interval_cells(h).map(|c| esc(c.trim().trim_start_matches('(').trim_end_matches(')')));
        let level_cells: String = levels
            .iter()
            .map(|c| format!("<td class=n>{}</td>", level_cell(h, *c)))
            .collect();
        let _ = write!(
            o,
            "<tr><td>{}</td><td class=n>{}</td><td class=n>{}</td><td class=n>{}</td><td class=n>{}</td><td class=n>{}</td>{level_cells}<td>{}</td></tr>",
            esc(&h.candidate),
            h.context_tokens,
            num(h.ttft_p50_ms),
            ttft_ci,
            num(h.decode_p50_tok_s),
            decode_ci,
            esc(&h.decision)
        );
    }
    let mut plots = charts::plots(r, s);
    plots.extend(rates::plots(r, &s.probe_medians));
    plots.push(timeline::plot(r, s));
    o.push_str("</table>");
    o.push_str(&super::energy::html(summary));
    o.push_str(&chartkit::plots_section("Plots", &plots));
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
    o.push_str(&chartkit::tail());
    o
}
