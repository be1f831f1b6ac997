//! The statistics as CSV, one row per run or level with flat columns, for spreadsheets:
//! `bakeoff bench --csv` (one row per sweep level) and, in a campaign bundle, one row per arm and
//! timed step ([`campaign`], written by [`super::render_all`]).
//!
//! Both read the same `stats` document (the `RunStats` a bench summary and every timing step file
//! carry), so their statistics columns are the same: the run's counts and throughputs
//! ([`RUN_COLUMNS`]), then `<metric>_<statistic>` for every metric of [`METRICS`] and statistic of
//! [`STATS`] (`ttft_ms_p50`, `ttft_ms_p999`, `e2e_ms_std`, ...). A value the run did not produce
//! (no usage, no chunk gaps, no requests) is an empty cell, never 0. Numbers are written with the
//! shortest text that reads back as the same double, so the CSV equals the JSON exactly.

use crate::evidence::bundle;
use crate::evidence::energy::Price;
use crate::evidence::manifest::Problem;
use crate::evidence::result::{CampaignResult, CapacityRecord, TimingRecord};
use serde_json::Value;
use std::path::Path;

/// Run-level columns: (column, key of the `stats` document).
pub const RUN_COLUMNS: &[(&str, &str)] = &[
    ("ok", "ok"),
    ("failed", "failed"),
    ("warmup_excluded", "warmup_excluded"),
    ("window_s", "window_s"),
    ("request_rate_per_s", "request_rate_per_s"),
    ("output_tok_s", "aggregate_output_tok_s"),
    ("total_tok_s", "aggregate_total_tok_s"),
    ("prompt_tokens_total", "prompt_tokens_total"),
    ("completion_tokens_total", "completion_tokens_total"),
];

/// The per-request metrics with a column group each, in this order.
pub const METRICS: &[&str] = &[
    "ttft_ms",
    "ttfo_ms",
    "itl_ms",
    "chunk_gap_ms",
    "e2e_ms",
    "decode_tok_s",
    "prompt_tokens",
    "completion_tokens",
];

/// The statistics of each metric (the field names of a distribution in the JSON).
pub const STATS: &[&str] = &[
    "n", "mean", "std", "min", "p50", "p90", "p95", "p99", "p999", "max",
];

/// The statistics columns: [`RUN_COLUMNS`], then `<metric>_<stat>`.
pub fn stats_header() -> Vec<String> {
    let mut h: Vec<String> = RUN_COLUMNS.iter().map(|(c, _)| c.to_string()).collect();
    for m in METRICS {
        for s in STATS {
            h.push(format!("{m}_{s}"));
        }
    }
    h
}

/// The statistics cells of one `stats` document, in [`stats_header`]'s order.
pub fn stats_cells(stats: &Value) -> Vec<String> {
    let mut row: Vec<String> = RUN_COLUMNS.iter().map(|(_, k)| cell(&stats[*k])).collect();
    for m in METRICS {
        let d = &stats["metrics"][*m];
        for s in STATS {
            row.push(cell(&d[*s]));
        }
    }
    row
}

/// One JSON value as a cell: numbers as the shortest text that reads back exactly, strings as
/// they are, null or missing as empty.
pub fn cell(v: &Value) -> String {
    match v {
        Value::Null => String::new(),
        Value::Number(n) => match (n.as_u64(), n.as_i64(), n.as_f64()) {
            (Some(u), _, _) => u.to_string(),
            (_, Some(i), _) => i.to_string(),
            (_, _, Some(f)) => format!("{f:?}"),
            _ => n.to_string(),
        },
        Value::String(s) => s.clone(),
        Value::Bool(b) => b.to_string(),
        other => other.to_string(),
    }
}

/// A CSV document (RFC 4180: comma-separated, CRLF-free `\n` line ends, a field quoted when it
/// holds a comma, quote or line break, quotes doubled).
pub fn document(header: &[String], rows: &[Vec<String>]) -> String {
    let mut out = String::new();
    for r in std::iter::once(header).chain(rows.iter().map(|r| r.as_slice())) {
        let line: Vec<String> = r.iter().map(|f| quote(f)).collect();
        out.push_str(&line.join(","));
        out.push('\n');
    }
    out
}

/// Reads a [`document`] back: its lines, each as its fields (quoted fields unquoted).
pub fn parse(doc: &str) -> Vec<Vec<String>> {
    let (mut rows, mut row, mut field) = (Vec::new(), Vec::new(), String::new());
    let (mut quoted, mut chars) = (false, doc.chars().peekable());
    while let Some(c) = chars.next() {
        match (quoted, c) {
            (true, '"') if chars.peek() == Some(&'"') => {
                field.push('"');
                chars.next();
            }
            (true, '"') => quoted = false,
            (true, c) => field.push(c),
            (false, '"') => quoted = true,
            (false, ',') => row.push(std::mem::take(&mut field)),
            (false, '\n') => {
                row.push(std::mem::take(&mut field));
                rows.push(std::mem::take(&mut row));
            }
            (false, c) => field.push(c),
        }
    }
    if !field.is_empty() || !row.is_empty() {
        row.push(field);
        rows.push(row);
    }
    rows
}

fn quote(f: &str) -> String {
    if f.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", f.replace('"', "\"\""))
    } else {
        f.to_string()
    }
}

/// The columns before the statistics in a campaign's CSV.
pub const CAMPAIGN_COLUMNS: &[&str] = &["arm", "label", "role", "step", "concurrency", "evidence"];

/// The campaign's per-arm, per-step statistics: one row per timed step of every arm (cold,
/// warm, each concurrency level, each open-loop rate, the long-context timing), read from the step files' `stats`.
/// A step whose file is missing or unreadable keeps its row with the figures the campaign
/// result holds (requests, p50/p95 of TTFT, ITL and E2E) and empty cells elsewhere.
pub fn campaign(dir: &Path, r: &CampaignResult) -> String {
    let mut header: Vec<String> = CAMPAIGN_COLUMNS.iter().map(|c| c.to_string()).collect();
    header.extend(stats_header());
    header.extend(ENERGY_COLUMNS.iter().map(|c| c.to_string()));
    header.extend(CAPACITY_COLUMNS.iter().map(|c| c.to_string()));
    let mut rows = Vec::new();
    for a in &r.arms {
        let mut steps: Vec<(String, &TimingRecord)> = Vec::new();
        if let Some(t) = &a.cold {
            steps.push(("cold".into(), t));
        }
        if let Some(t) = &a.warm {
            steps.push(("warm".into(), t));
        }
        let mut levels: Vec<(&String, &TimingRecord)> = a.concurrency.iter().collect();
        levels.sort_by_key(|(k, t)| (k.parse::<u64>().unwrap_or(t.concurrency), k.to_string()));
        for (k, t) in levels {
            steps.push((format!("c{k}"), t));
        }
        // Open-loop steps by rate (`r4`, `r2.5-cap8`; their `concurrency` is the cap, 0: none).
        let mut rates: Vec<(&String, &TimingRecord)> = a.rates.iter().collect();
        rates.sort_by(|x, y| {
            x.1.rate_per_s
                .partial_cmp(&y.1.rate_per_s)
                .unwrap_or(std::cmp::Ordering::Equal)
        });
        for (k, t) in rates {
            steps.push((k.clone(), t));
        }
        if let Some(t) = a.long_context.as_ref().and_then(|l| l.timing.as_ref()) {
            steps.push(("long-context".into(), t));
        }
        for (step, t) in steps {
            let mut row = vec![
                a.id.clone(),
                a.label.clone(),
                a.role.clone(),
                step,
                t.concurrency.to_string(),
                t.evidence.clone(),
            ];
            let stats = std::fs::read(dir.join(&t.evidence))
                .ok()
                .and_then(|b| serde_json::from_slice::<Value>(&b).ok())
                .map(|f| f["stats"].clone())
                .filter(Value::is_object)
                .unwrap_or_else(|| fallback_stats(t));
            row.extend(stats_cells(&stats));
            row.extend(energy_cells(a.price.as_ref(), t));
            row.extend(capacity_cells(a.capacity.as_ref()));
            rows.push(row);
        }
    }
    document(&header, &rows)
}

/// `bakeoff verify`'s check of a campaign bundle's `arm-stats.csv`: every cell against the one
/// [`campaign`] writes from `campaign-result.json` and the step files (the step files' figures
/// winning, as `bakeoff report` renders), so a cell edited and the manifest sealed again is still
/// named. Rows are matched by arm and step; a column the file lacks is left out (an older
/// bakeoff wrote fewer). Nothing to check without the CSV or a readable result (the manifest
/// check names a missing file).
pub fn check(dir: &Path) -> Vec<Problem> {
    let Ok(doc) = std::fs::read_to_string(dir.join(bundle::STATS_CSV)) else {
        return Vec::new();
    };
    let Some(mut r) = std::fs::read(dir.join(bundle::RESULT))
        .ok()
        .and_then(|b| serde_json::from_slice::<CampaignResult>(&b).ok())
    else {
        return Vec::new();
    };
    crate::evidence::crosscheck::check(dir, &mut r, true);
    let (got, want) = (parse(&doc), parse(&campaign(dir, &r)));
    let problem = |detail: String| Problem::Disagrees {
        path: bundle::STATS_CSV.into(),
        detail,
    };
    let (Some(gh), Some(wh)) = (got.first(), want.first()) else {
        return vec![problem("it has no header line".into())];
    };
    let key = |h: &[String], row: &[String]| -> (String, String) {
        let at = |name: &str| {
            h.iter()
                .position(|c| c == name)
                .and_then(|i| row.get(i))
                .cloned()
                .unwrap_or_default()
        };
        (at("arm"), at("step"))
    };
    let mut out = Vec::new();
    for c in gh.iter().filter(|c| !wh.contains(c)) {
        out.push(problem(format!(
            "it has a column `{c}` bakeoff does not write"
        )));
    }
    let mut seen = Vec::new();
    for row in &got[1..] {
        let (arm, step) = key(gh, row);
        let Some(w) = want[1..]
            .iter()
            .find(|w| key(wh, w) == (arm.clone(), step.clone()))
        else {
            out.push(problem(format!(
                "its row for arm {arm} step {step} is not a timed step of {}",
                bundle::RESULT
            )));
            continue;
        };
        seen.push((arm.clone(), step.clone()));
        for (i, c) in gh.iter().enumerate() {
            let Some(j) = wh.iter().position(|x| x == c) else {
                continue;
            };
            let (a, b) = (row.get(i).map_or("", String::as_str), w[j].as_str());
            if a != b {
                out.push(problem(format!(
                    "arm {arm} step {step} column {c} says {a:?}, but {} and its step files give {b:?}",
                    bundle::RESULT
                )));
            }
        }
    }
    for w in &want[1..] {
        let (arm, step) = key(wh, w);
        if !seen.contains(&(arm.clone(), step.clone())) {
            out.push(problem(format!(
                "it lacks the row for arm {arm} step {step}"
            )));
        }
    }
    out
}

/// The energy and cost columns after the statistics (docs/metrics.md): the step's GPU energy
/// (J), mean and idle-baseline power (W), energy per request and per million output tokens (J),
/// the lane's price and its cost per million output tokens at the step's output throughput.
pub const ENERGY_COLUMNS: &[&str] = &[
    "energy_j",
    "mean_power_w",
    "idle_power_w",
    "energy_per_request_j",
    "energy_per_mtok_j",
    "cost_per_hour",
    "currency",
    "cost_per_mtok",
];

/// One step's [`ENERGY_COLUMNS`] cells: empty where not measured, never 0.
fn energy_cells(price: Option<&Price>, t: &TimingRecord) -> Vec<String> {
    let e = t.energy.as_ref();
    let f = |x: Option<f64>| cell(&serde_json::json!(x));
    vec![
        f(e.and_then(|e| e.energy_j)),
        f(e.and_then(|e| e.mean_power_w)),
        f(e.and_then(|e| e.idle_power_w)),
        f(e.and_then(|e| e.per_request_j)),
        f(e.and_then(|e| e.per_mtok_j)),
        f(price.map(|p| p.cost_per_hour)),
        price.map(|p| p.currency.clone()).unwrap_or_default(),
        f(price.and_then(|p| p.per_mtok(t.aggregate_output_tok_s?))),
    ]
}

/// The arm's capacity under SLOs after the energy columns, on each of its rows (docs/metrics.md,
/// *Capacity under SLOs*): the highest probed rate that held and the lowest that broke
/// (requests/s), what broke it, and whether the client's own limit ended the search (`true`: the
/// figures above the held rate are the client's, not the arm's). Every cell is empty when the
/// arm had no capacity step; a rate that no probe reached is empty, never 0.
pub const CAPACITY_COLUMNS: &[&str] = &[
    "capacity_held_rate_per_s",
    "capacity_broken_rate_per_s",
    "capacity_broken_by",
    "capacity_client_bound",
];

/// One arm's [`CAPACITY_COLUMNS`] cells.
fn capacity_cells(c: Option<&CapacityRecord>) -> Vec<String> {
    let Some(c) = c else {
        return vec![String::new(); CAPACITY_COLUMNS.len()];
    };
    let f = |x: Option<f64>| cell(&serde_json::json!(x));
    vec![
        f(c.held_rate_per_s),
        f(c.broken_rate_per_s),
        c.broken_by.clone().unwrap_or_default(),
        c.client_bound_rate_per_s.is_some().to_string(),
    ]
}

/// What the campaign result alone holds of a step, as a `stats` document.
fn fallback_stats(t: &TimingRecord) -> Value {
    let mut metrics = serde_json::Map::new();
    for (name, s) in [
        ("ttft_ms", &t.ttft_ms),
        ("itl_ms", &t.itl_ms),
        ("e2e_ms", &t.e2e_ms),
        ("decode_tok_s", &t.decode_tok_s),
    ] {
        if let Some(s) = s {
            metrics.insert(
                name.into(),
                serde_json::json!({"n": s.n, "p50": s.p50, "p95": s.p95}),
            );
        }
    }
    serde_json::json!({
        "ok": t.requests_ok,
        "failed": t.requests_failed,
        "aggregate_output_tok_s": t.aggregate_output_tok_s,
        "metrics": metrics,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn dist(base: f64) -> Value {
        json!({"n": 10, "mean": base + 0.5, "std": 0.25, "min": base, "p50": base + 1.0,
               "p90": base + 2.0, "p95": base + 3.0, "p99": base + 4.0, "p999": base + 5.0,
               "max": base + 6.0, "median_ci": [base, base + 2.0]})
    }

    #[test]
    fn header_and_cells_line_up_and_keep_exact_numbers() {
        let stats = json!({
            "ok": 10, "failed": 1, "warmup_excluded": 2, "window_s": 1.2345678901234567,
            "request_rate_per_s": 8.1, "aggregate_output_tok_s": 0.1 + 0.2,
            "aggregate_total_tok_s": null, "prompt_tokens_total": 1280, "completion_tokens_total": 320,
            "metrics": {"ttft_ms": dist(100.0), "e2e_ms": dist(900.0)}
        });
        let h = stats_header();
        let c = stats_cells(&stats);
        assert_eq!(h.len(), c.len());
        assert_eq!(h.len(), RUN_COLUMNS.len() + METRICS.len() * STATS.len());
        let at = |name: &str| c[h.iter().position(|x| x == name).unwrap()].clone();
        assert_eq!(at("ok"), "10");
        assert_eq!(at("window_s"), "1.2345678901234567");
        // 0.1 + 0.2 is written so it reads back as the same double.
        assert_eq!(at("output_tok_s").parse::<f64>().unwrap(), 0.1 + 0.2);
        assert_eq!(at("total_tok_s"), "", "null is an empty cell, not 0");
        assert_eq!(at("ttft_ms_p50"), "101.0");
        assert_eq!(at("ttft_ms_p999"), "105.0");
        assert_eq!(at("ttft_ms_std"), "0.25");
        assert_eq!(at("e2e_ms_max"), "906.0");
        assert_eq!(at("itl_ms_p50"), "", "a metric the run lacks is empty");
        assert!(h.contains(&"itl_ms_p99".to_string()));
        assert!(h.contains(&"chunk_gap_ms_mean".to_string()));
    }

    #[test]
    fn fields_with_commas_and_quotes_are_quoted() {
        let doc = document(
            &["a".into(), "b".into()],
            &[
                vec!["x,y".into(), "say \"hi\"".into()],
                vec!["1".into(), "".into()],
            ],
        );
        assert_eq!(doc, "a,b\n\"x,y\",\"say \"\"hi\"\"\"\n1,\n");
    }
}
