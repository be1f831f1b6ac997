//! `publication-summary.md`: identity, workload, gates, headline results (with CIs), failures,
//! limitations, decision, and how to re-check.

use super::summary::{headline_levels, level_key, ranked_level};
use crate::decide::metric::{pct, CONCURRENCY, DECODE, TTFT};
use crate::decide::Verdict;
use crate::evidence::result::CampaignResult;
use serde_json::Value;
use std::fmt::Write as _;

fn s(v: &Value) -> String {
    match v {
        Value::String(x) => x.clone(),
        Value::Null => "—".into(),
        other => other.to_string(),
    }
}

fn cell(x: &str) -> String {
    x.replace('|', "\\|").replace('\n', " ")
}

/// A headline interval in short: " (49.9–51.9, 96.88 % CI)", " (49.9–51.9, range 93.75 %)".
pub fn interval_cell(h: &Value, ci95_key: &str, ci_key: &str) -> String {
    let Some(a) = h[ci95_key].as_array() else {
        return String::new();
    };
    let i = &h[ci_key];
    let what = match (i["method"].as_str(), i["coverage"].as_f64()) {
        (Some("order-statistic"), Some(c)) => format!("{} % CI", pct(c)),
        (Some("range"), Some(c)) => format!("range {} %", pct(c)),
        _ => "bootstrap".into(),
    };
    format!(" ({}–{}, {what})", s(&a[0]), s(&a[1]))
}

/// The sentence above the headline table: what the intervals are.
pub fn intervals_sentence(summary: &Value) -> String {
    let mut range_n: Vec<u64> = Vec::new();
    let mut boot = false;
    for h in summary["headline_results"].as_array().into_iter().flatten() {
        for k in [TTFT.ci_key(), DECODE.ci_key()] {
            match h[&k]["method"].as_str() {
                Some("range") => range_n.extend(h[&k]["n"].as_u64()),
                Some("order-statistic") => {}
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

pub fn render(v: &Verdict, r: &CampaignResult, summary: &Value) -> String {
    let mut o = String::new();
    let _ = writeln!(o, "# Bake-off verdict: {}\n", r.campaign_id);
    let d = &summary["decision"];
    let _ = writeln!(
        o,
        "**Winner:** {}  \n**Promotion authorized:** {}  \n**Decision labels:** {}  \n**Complete:** {}\n",
        s(&d["winner"]),
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
    let w = &summary["workload"];
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
        s(&w["matched_prompt_tokens"]),
        r.workload.max_tokens
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
        w["long_context_actual_prompt_tokens"]
    );
    let _ = writeln!(
        o,
        "- measurement path: {}; {}\n",
        r.measurement_path,
        s(&summary["measurement"]["warm_cold_state"])
    );
    let _ = writeln!(
        o,
        "## Gates\n\n| gate | status | detail | evidence |\n|---|---|---|---|"
    );
    for g in summary["gates"].as_array().into_iter().flatten() {
        let _ = writeln!(
            o,
            "| {} | {} | {} | {} |",
            cell(&s(&g["name"])),
            cell(&s(&g["status"])),
            cell(g.get("detail").map(s).as_deref().unwrap_or("")),
            cell(g.get("evidence").map(s).as_deref().unwrap_or(""))
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
    for h in summary["headline_results"].as_array().into_iter().flatten() {
        let level_cells: String = levels
            .iter()
            .map(|c| {
                format!(
                    " {} |",
                    h.get(level_key(*c)).map(s).unwrap_or_else(|| "—".into())
                )
            })
            .collect();
        let _ = writeln!(
            o,
            "| {} | {} | {}{} | {}{} |{level_cells} {} |",
            cell(&s(&h["candidate"])),
            s(&h["context_tokens"]),
            s(&h[TTFT.p50_key()]),
            interval_cell(h, &TTFT.ci95_key(), &TTFT.ci_key()),
            s(&h[DECODE.p50_key()]),
            interval_cell(h, &DECODE.ci95_key(), &DECODE.ci_key()),
            cell(&s(&h["decision"]))
        );
    }
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
    let _ = writeln!(o, "\n## Decision\n");
    let _ = writeln!(o, "- evidence labels: {}", v.evidence_labels.join(", "));
    let _ = writeln!(o, "- decision labels: {}", v.decision_labels.join(", "));
    let _ = writeln!(o, "- promotion authorized: {}", v.promotion_authorized);
    let _ = writeln!(o, "- winner: {}", s(&d["winner"]));
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
    let _ = writeln!(o, "Every number above is copied from `campaign-result.json`, which names the evidence file of each step. Evidence: {}.", summary["evidence"].as_array().into_iter().flatten().map(s).collect::<Vec<_>>().join(", "));
    o
}
