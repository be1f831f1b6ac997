//! `publication-summary.md`: identity, workload, gates, headline results (with CIs), failures,
//! limitations, decision, and how to re-check.

use super::summary::{
    headline_levels, ranked_level, DecisionSummary, Headline, Interval, IntervalMethod,
};
use crate::decide::metric::{pct, CONCURRENCY, DECODE, TTFT};
use crate::decide::Verdict;
use crate::evidence::result::CampaignResult;
use std::fmt::Write as _;

/// A number as `decision-summary.json` writes it (`50.0`, where Rust's `{}` writes `50`); "—"
/// for none.
pub fn num(x: f64) -> String {
    match serde_json::Value::from(x) {
        serde_json::Value::Null => "—".into(),
        v => v.to_string(),
    }
}

/// An optional text, "—" for none.
pub fn or_dash(x: Option<&str>) -> String {
    x.unwrap_or("—").to_string()
}

fn cell(x: &str) -> String {
    x.replace('|', "\\|").replace('\n', " ")
}

/// A headline interval in short: " (49.9–51.9, 96.88 % CI)", " (49.9–51.9, range 93.75 %)".
pub fn interval_cell(ci95: Option<[f64; 2]>, interval: Option<&Interval>) -> String {
    let Some(a) = ci95 else {
        return String::new();
    };
    let what = match interval.map(|i| (i.method, i.coverage)) {
        Some((IntervalMethod::OrderStatistic, Some(c))) => format!("{} % CI", pct(c)),
        Some((IntervalMethod::Range, Some(c))) => format!("range {} %", pct(c)),
        _ => "bootstrap".into(),
    };
    format!(" ({}–{}, {what})", num(a[0]), num(a[1]))
}

/// A headline row's TTFT and decode intervals, in short ([`interval_cell`]).
pub fn interval_cells(h: &Headline) -> [String; 2] {
    [
        interval_cell(h.ttft_p50_ci95_ms, h.ttft_p50_ci.as_ref()),
        interval_cell(h.decode_p50_ci95_tok_s, h.decode_p50_ci.as_ref()),
    ]
}

/// A headline row's aggregate throughput at level `c`, "—" when it did not run it.
pub fn level_cell(h: &Headline, c: u64) -> String {
    h.aggregate_at(c).map(num).unwrap_or_else(|| "—".into())
}

/// The sentence above the headline table: what the intervals are.
pub fn intervals_sentence(summary: &DecisionSummary) -> String {
    let mut range_n: Vec<u64> = Vec::new();
    let mut boot = false;
    for h in &summary.headline_results {
        for i in [&h.ttft_p50_ci, &h.decode_p50_ci] {
            match i {
                Some(i) if i.method == IntervalMethod::Range => range_n.push(i.n),
                Some(i) if i.method == IntervalMethod::OrderStatistic => {}
                _ => boot = true,
            }
        }
    }
    range_n.sort();
    range_n.dedup();
    let mut parts = vec!["Warm medians at concurrency 1, each with the interval of the median and its exact coverage: an order-statistic CI (95 % or more) from 6 requests on.".to_string()];
    if !range_n.is_empty() {
        let ns: Vec<String> = range_n.iter().map(|n| n.to_string()).collect();
        parts.push(format!(
            "Medians of {} requests have no 95 % interval (none is possible below 6): their cells show the range [min, max] with its coverage, and ties were decided on those ranges.",
            ns.join(", ")
        ));
    }
    if boot {
        parts.push("\"bootstrap\" marks an interval an older bakeoff computed by percentile bootstrap; its coverage was not recorded.".into());
    }
    parts.join(" ")
}

pub fn render(v: &Verdict, r: &CampaignResult, summary: &DecisionSummary) -> String {
    let mut o = String::new();
    let _ = writeln!(o, "# Bake-off verdict: {}\n", r.campaign_id);
    let _ = writeln!(
        o,
        "**Winner:** {}  \n**Promotion authorized:** {}  \n**Decision labels:** {}  \n**Complete:** {}\n",
        or_dash(summary.decision.winner.as_deref()),
        if v.promotion_authorized { "yes" } else { "no" },
        v.decision_labels.join(", "),
        if v.complete { "yes" } else { "no" }
    );
    let _ = writeln!(o, "{}\n", v.reason);
    let _ = writeln!(o, "## Identity\n");
    let _ = writeln!(o, "| | |\n|---|---|");
    let _ = writeln!(o, "| hardware | {} |", cell(&r.identity.hardware));
    let _ = writeln!(o, "| topology | {} |", cell(&r.identity.topology));
    let _ = writeln!(o, "| incumbent | {} |", cell(&r.identity.incumbent));
    let _ = writeln!(o, "| bakeoff | {} |", cell(&r.bakeoff_version));
    let _ = writeln!(
        o,
        "| run | {} → {} |\n",
        cell(&r.started_at),
        cell(&r.updated_at)
    );
    let w = &summary.workload;
    let _ = writeln!(o, "## Workload\n");
    let _ = writeln!(
        o,
        "- ranking priority: {}",
        v.priorities
            .iter()
            .map(|p| p.as_str())
            .collect::<Vec<_>>()
            .join(" > ")
    );
    let _ = writeln!(
        o,
        "- matched prompt: {} tokens (endpoint-reported), max_tokens {}",
        w.matched_prompt_tokens, r.workload.max_tokens
    );
    if let Some(src) = &r.workload.source {
        let _ = writeln!(
            o,
            "- workload source: {} (docs/campaign.md, Workload sources{})",
            src["kind"].as_str().unwrap_or("?"),
            src["sha256"]
                .as_str()
                .map(|h| format!("; dataset sha256 {h}"))
                .unwrap_or_default()
        );
    }
    let _ = writeln!(
        o,
        "- warm repetitions per arm: {}; concurrency levels: {:?}",
        r.workload.warm_repetitions_per_arm, r.workload.concurrency
    );
    let _ = writeln!(
        o,
        "- long-context actual prompt tokens: {}",
        serde_json::to_string(&w.long_context_actual_prompt_tokens).unwrap_or_default()
    );
    let _ = writeln!(
        o,
        "- measurement path: {}; {}\n",
        r.measurement_path, summary.measurement.warm_cold_state
    );
    let _ = writeln!(
        o,
        "## Gates\n\n| gate | status | detail | evidence |\n|---|---|---|---|"
    );
    for g in &summary.gates {
        let _ = writeln!(
            o,
            "| {} | {} | {} | {} |",
            cell(&g.name),
            cell(&g.status),
            cell(g.detail.as_deref().unwrap_or("")),
            cell(g.evidence.as_deref().unwrap_or(""))
        );
    }
    let _ = writeln!(
        o,
        "\n## Headline results\n\n{}\n",
        intervals_sentence(summary)
    );
    let levels = headline_levels(r);
    let ranked = ranked_level(v, r);
    let level_heads: String = levels
        .iter()
        .map(|c| {
            let tag = if Some(*c) == ranked { " (ranked)" } else { "" };
            format!(" C{c} aggregate {}{tag} |", CONCURRENCY.unit)
        })
        .collect();
    let _ = writeln!(
        o,
        "| candidate | context | {} (interval) | {} (interval) |{level_heads} decision |\n|---|---:|---:|---:|{}---|",
        TTFT.p50_header(),
        DECODE.p50_header(),
        "---:|".repeat(levels.len())
    );
    for h in &summary.headline_results {
        let level_cells: String = levels
            .iter()
            .map(|c| format!(" {} |", level_cell(h, *c)))
            .collect();
        let [ttft_ci, decode_ci] = interval_cells(h);
        let _ = writeln!(
            o,
            "| {} | {} | {}{ttft_ci} | {}{decode_ci} |{level_cells} {} |",
            cell(&h.candidate),
            h.context_tokens,
            num(h.ttft_p50_ms),
            num(h.decode_p50_tok_s),
            cell(&h.decision)
        );
    }
    o.push_str(&open_loop_rows(r));
    o.push_str(&capacity_rows(r));
    o.push_str(&trace_rows(r));
    o.push_str(&super::energy::markdown(summary));
    let _ = writeln!(o, "\n## Failures\n");
    if v.failures.is_empty() {
        let _ = writeln!(o, "None.");
    } else {
        let _ = writeln!(
            o,
            "| candidate | class | detail | evidence |\n|---|---|---|---|"
        );
        for f in &v.failures {
            let _ = writeln!(
                o,
                "| {} | {} | {} | {} |",
                cell(&f.candidate),
                f.class,
                cell(&f.detail),
                f.evidence.as_deref().unwrap_or("")
            );
        }
    }
    let _ = writeln!(o, "\n## Limitations\n");
    if v.limitations.is_empty() {
        let _ = writeln!(o, "None recorded.");
    }
    for l in &v.limitations {
        let _ = writeln!(o, "- {l}");
    }
    let _ = writeln!(o, "\n## Measurement validity\n");
    for l in &summary.validity {
        let _ = writeln!(o, "- {l}");
    }
    let _ = writeln!(o, "\n## Decision\n");
    let _ = writeln!(o, "- evidence labels: {}", v.evidence_labels.join(", "));
    let _ = writeln!(o, "- decision labels: {}", v.decision_labels.join(", "));
    let _ = writeln!(o, "- promotion authorized: {}", v.promotion_authorized);
    let _ = writeln!(
        o,
        "- winner: {}",
        or_dash(summary.decision.winner.as_deref())
    );
    let _ = writeln!(o, "- reason: {}", v.reason);
    let _ = writeln!(o, "- next gate: {}\n", v.next_gate);
    let _ = writeln!(
        o,
        "| arm | role | rank | label | decision |\n|---|---|---:|---|---|"
    );
    for a in &v.arms {
        let _ = writeln!(
            o,
            "| {} | {} | {} | {} | {} |",
            cell(&a.label),
            a.role,
            a.rank.map(|x| x.to_string()).unwrap_or_else(|| "—".into()),
            a.decision_label,
            cell(&a.decision)
        );
    }
    let _ = writeln!(o, "\n## How to re-check\n");
    let _ = writeln!(o, "```sh\nbakeoff verify DIR    # every file against artifact-manifest.json (SHA-256 and size)\nbakeoff report DIR    # re-derive this summary, decision-summary.json and report.html from the evidence\n```\n");
    let _ = writeln!(o, "Every number above is copied from `campaign-result.json`, which names the evidence file of each step. Evidence: {}.", summary.evidence.join(", "));
    o
}

/// The `## Open-loop steps` section: one row per arm and rate (`[workload.open_loop]`), with the
/// rate asked for and achieved, TTFT and ITL percentiles, decode speed and goodput; empty when
/// no arm ran one. The ranking does not read these rows.
pub fn open_loop_rows(r: &CampaignResult) -> String {
    let mut o = String::new();
    if r.arms.iter().all(|a| a.rates.is_empty()) {
        return o;
    }
    let _ = writeln!(
        o,
        "\n## Open-loop steps\n\nRequests started at a rate regardless of completions (`[workload.open_loop]`); recorded beside the ranking, which does not read them. With conversations each arrival is one conversation, so the rate is conversations per second and the achieved rate counts requests (turns).\n\n| arm | rate req/s | arrivals | cap | achieved req/s | ok / failed | TTFT p50 / p95 ms | ITL p50 / p95 ms | decode p50 tok/s | goodput req/s | evidence |\n|---|---:|---|---:|---:|---:|---:|---:|---:|---:|---|"
    );
    // Two decimals: the exact figures are in campaign-result.json and the step file.
    let short = |x: f64| format!("{x:.2}");
    let pair = |s: &Option<crate::evidence::result::Stat>| match s {
        Some(s) => format!("{} / {}", short(s.p50), short(s.p95)),
        None => "—".into(),
    };
    for a in &r.arms {
        for t in a.rates.values() {
            let _ = writeln!(
                o,
                "| {} | {} | {} | {} | {} | {} / {} | {} | {} | {} | {} | {} |",
                cell(&a.id),
                t.rate_per_s.map(num).unwrap_or_else(|| "—".into()),
                or_dash(t.arrival.as_deref()),
                t.max_concurrency
                    .map(|c| c.to_string())
                    .unwrap_or_else(|| "none".into()),
                t.achieved_rate_per_s
                    .map(short)
                    .unwrap_or_else(|| "—".into()),
                t.requests_ok,
                t.requests_failed,
                pair(&t.ttft_ms),
                pair(&t.itl_ms),
                t.decode_tok_s
                    .map(|s| short(s.p50))
                    .unwrap_or_else(|| "—".into()),
                t.goodput
                    .as_ref()
                    .and_then(|g| g.goodput_req_s)
                    .map(short)
                    .unwrap_or_else(|| "—".into()),
                cell(&t.evidence)
            );
        }
    }
    o
}

/// The `## Capacity under SLOs` section (`[workload.capacity]`): per arm, the highest probed
/// rate that held, the lowest that broke and the limit that broke it, the rate at which the
/// client was the limit (that figure is the client's, not the arm's), and every probe with its
/// goodput; empty when no arm ran the step.
pub fn capacity_rows(r: &CampaignResult) -> String {
    let mut o = String::new();
    if r.arms.iter().all(|a| a.capacity.is_none()) {
        return o;
    }
    let _ = writeln!(
        o,
        "\n## Capacity under SLOs\n\nThe highest open-loop request rate at which every capacity SLO held and failures stayed under the share, and the lowest rate that broke (`[workload.capacity]`); an arm's capacity lies between the two. A rate at which the client's own overload signals fired is the client's limit, never the arm's capacity.\n\n| arm | held req/s | broken req/s | broken by | client-bound at req/s | probes (rate: outcome, goodput req/s) | evidence |\n|---|---:|---:|---|---:|---|---|"
    );
    let dash = |x: Option<f64>| x.map(num).unwrap_or_else(|| "—".into());
    for a in &r.arms {
        let Some(c) = &a.capacity else { continue };
        let probes: Vec<String> = c
            .probes
            .iter()
            .map(|p| {
                let g = p.goodput.and_then(|g| g.goodput_req_s);
                format!("{}: {}, {}", num(p.rate_per_s), p.outcome, dash(g))
            })
            .collect();
        let _ = writeln!(
            o,
            "| {} | {} | {} | {} | {} | {} | {} |",
            cell(&a.id),
            dash(c.held_rate_per_s),
            dash(c.broken_rate_per_s),
            cell(c.broken_by.as_deref().unwrap_or("—")),
            dash(c.client_bound_rate_per_s),
            cell(&probes.join("; ")),
            cell(&c.evidence)
        );
    }
    o
}

/// The `## Trace replay` section (`[workload.trace]`): per arm, the measured requests' TTFT and
/// E2E at the trace's own arrival times, the failures, and how closely the schedule was kept
/// (arrival error: a request held back by a cap is late here, never slow in its TTFT); empty
/// when no arm ran the step.
pub fn trace_rows(r: &CampaignResult) -> String {
    let mut o = String::new();
    let Some(first) = r.arms.iter().find_map(|a| a.trace.as_ref()) else {
        return o;
    };
    let _ = writeln!(
        o,
        "\n## Trace replay\n\nEach arm replayed {} ({} requests, the first {} as warm-up, speedup {}, {} requests/s on average; {} of {} prompt tokens shared by `hash_ids` blocks). Arrival error is the actual send minus the trace's intended send over the measured requests.\n\n| arm | ok | failed | TTFT p50 ms | TTFT p95 ms | E2E p50 ms | E2E p95 ms | arrival error p50 / p99 / max ms | evidence |\n|---|---:|---:|---:|---:|---:|---:|---|---|",
        cell(&first.file),
        first.replayed,
        first.warmup,
        num(first.speedup),
        num(first.mean_rate_per_s),
        first.shared_tokens,
        first.prompt_tokens
    );
    let dash = |x: Option<f64>| x.map(num).unwrap_or_else(|| "—".into());
    for a in &r.arms {
        let Some(t) = &a.trace else { continue };
        let m = &t.timing;
        let lag = t
            .arrival_error_ms
            .map(|e| format!("{} / {} / {}", num(e.p50), num(e.p99), num(e.max)))
            .unwrap_or_else(|| "not measured".into());
        let _ = writeln!(
            o,
            "| {} | {} | {} | {} | {} | {} | {} | {} | {} |",
            cell(&a.id),
            m.requests_ok,
            m.requests_failed,
            dash(m.ttft_ms.map(|s| s.p50)),
            dash(m.ttft_ms.map(|s| s.p95)),
            dash(m.e2e_ms.map(|s| s.p50)),
            dash(m.e2e_ms.map(|s| s.p95)),
            lag,
            cell(&m.evidence)
        );
    }
    o
}
