//! The *Energy and cost* section of `publication-summary.md` and `report.html`: per arm, the GPU
//! energy per million output tokens and per request, the mean and idle-baseline power, and the
//! lane's price per million output tokens at the measured throughput and at the capacity rate
//! (`decide::energy`, carried in `decision-summary.json` as `energy_cost`). A figure not measured
//! says so, with why, never 0.

use super::chartkit::esc;
use super::summary::DecisionSummary;
use crate::decide::energy::{money, EnergyCost};
use crate::decide::metric::num;
use std::fmt::Write as _;

const HEAD: [&str; 9] = [
    "arm",
    "step",
    "energy J/Mtok",
    "energy J/request",
    "mean power W",
    "idle baseline W (not subtracted)",
    "price per hour",
    "cost per Mtok",
    "cost per Mtok at capacity",
];

const INTRO: &str = "GPU energy is the lane GPUs' power readings integrated over the step's measured window (first send to last completion), per million output tokens and per successful request; the idle baseline's power is stated beside it, never subtracted. Cost per million output tokens is the lane's `cost_per_hour` over the step's aggregate output throughput (cost_per_hour / 3600 / output tok/s × 10⁶), and at the capacity rate over the held rate × the mean output tokens of its requests. Both are read at the priority level (docs/metrics.md).";

fn opt(x: Option<f64>, f: fn(f64) -> String) -> String {
    x.map(f).unwrap_or_else(|| "not measured".into())
}

/// One arm's cells, in [`HEAD`]'s order.
fn cells(e: &EnergyCost) -> [String; 9] {
    let cur = e.currency.clone().unwrap_or_default();
    let with_cur = |x: String| format!("{x} {cur}");
    [
        e.arm.clone(),
        e.step.clone().unwrap_or_else(|| "—".into()),
        opt(e.energy_per_mtok_j, num),
        opt(e.energy_per_request_j, num),
        opt(e.mean_power_w, num),
        opt(e.idle_power_w, num),
        e.cost_per_hour
            .map(|c| with_cur(num(c)))
            .unwrap_or_else(|| "no price".into()),
        e.cost_per_mtok
            .map(|c| with_cur(money(c)))
            .unwrap_or_else(|| "not measured".into()),
        match (&e.cost_per_mtok_at_capacity, &e.capacity_cost_not_measured) {
            (Some(c), _) => with_cur(money(*c)),
            (None, Some(_)) => "not measured".into(),
            (None, None) => "no capacity step".into(),
        },
    ]
}

/// Why each figure was not measured, one line per arm and figure.
fn reasons(s: &DecisionSummary) -> Vec<String> {
    let mut out = Vec::new();
    for e in &s.energy_cost {
        for (what, why) in [
            ("energy", &e.energy_not_measured),
            ("cost", &e.cost_not_measured),
            ("cost at capacity", &e.capacity_cost_not_measured),
        ] {
            if let Some(w) = why {
                out.push(format!("{}: {what} not measured: {w}.", e.arm));
            }
        }
    }
    out
}

/// The Markdown section.
pub fn markdown(s: &DecisionSummary) -> String {
    let mut o = format!(
        "\n## Energy and cost\n\n{INTRO}\n\n| {} |\n|",
        HEAD.join(" | ")
    );
    o.push_str(&"---|".repeat(HEAD.len()));
    o.push('\n');
    for e in &s.energy_cost {
        let row: Vec<String> = cells(e).iter().map(|c| c.replace('|', "\\|")).collect();
        let _ = writeln!(o, "| {} |", row.join(" | "));
    }
    let why = reasons(s);
    if !why.is_empty() {
        o.push('\n');
    }
    for w in why {
        let _ = writeln!(o, "- {w}");
    }
    o
}

/// The HTML section.
pub fn html(s: &DecisionSummary) -> String {
    let mut o = format!(
        "<h2 id=\"energy-cost\">Energy and cost</h2><p>{}</p><table><tr>",
        esc(INTRO)
    );
    for h in HEAD {
        let _ = write!(o, "<th>{}</th>", esc(h));
    }
    o.push_str("</tr>");
    for e in &s.energy_cost {
        o.push_str("<tr>");
        for (i, c) in cells(e).iter().enumerate() {
            let class = if i >= 2 { " class=n" } else { "" };
            let _ = write!(o, "<td{class}>{}</td>", esc(c));
        }
        o.push_str("</tr>");
    }
    o.push_str("</table>");
    let why = reasons(s);
    if !why.is_empty() {
        o.push_str("<ul>");
        for w in why {
            let _ = write!(o, "<li>{}</li>", esc(&w));
        }
        o.push_str("</ul>");
    }
    o
}
