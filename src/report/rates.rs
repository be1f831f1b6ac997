//! The capacity step's rate curves (`[workload.capacity]`) in `report.html`: for each metric the
//! SLO set limits, every arm's limited statistic at each probed rate (as the probe was judged)
//! with its median beside it, the limits as lines and each probe marked held, broken or
//! client-bound; and goodput against the offered rate. Drawn with the chart pieces `bench --html`
//! uses (`chartkit`); a campaign without a capacity step gets none of these plots.
//!
//! The judged statistic and the outcome come from the arm's `capacity` record in
//! `campaign-result.json`; the medians from the probes of its `<arm>-capacity.json` (a probe
//! whose file entry is missing or names another rate has no median drawn, never a guessed one).

use super::chartkit::{config, fmt, line, plot, pt, zero_axis, Plot};
use super::charts::{color, label};
use crate::evidence::result::{ArmResult, CampaignResult, CapacityProbeRecord};
use crate::metrics::slo::{SloLimit, SloMetric, SloStat};
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::path::Path;

/// Each arm's probe medians from its capacity file, by arm id: one entry per probe of its
/// record, in order (`metric key → p50 ms`; empty when the file does not have the probe).
pub type ProbeMedians = BTreeMap<String, Vec<BTreeMap<String, f64>>>;

/// Reads the medians of every arm's capacity probes (missing or unreadable files: none).
pub fn read(dir: &Path, r: &CampaignResult) -> ProbeMedians {
    let mut out = ProbeMedians::new();
    for a in &r.arms {
        let Some(c) = &a.capacity else { continue };
        let file: Option<Value> = std::fs::read(dir.join(&c.evidence))
            .ok()
            .and_then(|b| serde_json::from_slice(&b).ok());
        let probes = file.as_ref().and_then(|f| f["probes"].as_array());
        let medians = c
            .probes
            .iter()
            .enumerate()
            .map(|(i, p)| {
                probes
                    .and_then(|ps| ps.get(i))
                    .filter(|f| f["rate_per_s"].as_f64() == Some(p.rate_per_s))
                    .map(p50s)
                    .unwrap_or_default()
            })
            .collect();
        out.insert(a.id.clone(), medians);
    }
    out
}

fn p50s(probe: &Value) -> BTreeMap<String, f64> {
    let Some(m) = probe["stats"]["metrics"].as_object() else {
        return BTreeMap::new();
    };
    m.iter()
        .filter_map(|(k, d)| Some((k.clone(), d["p50"].as_f64()?)))
        .collect()
}

/// The limits the arms' probes were judged against, in first-seen order.
fn limits(r: &CampaignResult) -> Vec<SloLimit> {
    let mut out: Vec<SloLimit> = Vec::new();
    for p in r.arms.iter().filter_map(|a| a.capacity.as_ref()) {
        for c in p.probes.iter().flat_map(|p| &p.slo) {
            if let Some(l) = SloLimit::from_words(&c.limit) {
                if !out.contains(&l) {
                    out.push(l);
                }
            }
        }
    }
    out
}

/// An arm's probes by rate (the search probes out of order), with each one's index.
fn by_rate(a: &ArmResult) -> Vec<(usize, &CapacityProbeRecord)> {
    let mut v: Vec<_> = a
        .capacity
        .iter()
        .flat_map(|c| c.probes.iter().enumerate())
        .collect();
    v.sort_by(|x, y| x.1.rate_per_s.total_cmp(&y.1.rate_per_s));
    v
}

/// The Chart.js point style of a probe's outcome.
fn marker(outcome: &str) -> &'static str {
    match outcome {
        "held" => "circle",
        "broken" => "crossRot",
        _ => "triangle",
    }
}

/// Points (x: offered rate) with their outcome markers; probes without a value are left out.
fn probe_line(
    a: &ArmResult,
    r: &CampaignResult,
    name: String,
    value: impl Fn(usize, &CapacityProbeRecord) -> Option<(f64, String)>,
) -> Option<Value> {
    let mut data = Vec::new();
    let mut styles = Vec::new();
    for (i, p) in by_rate(a) {
        let Some((y, what)) = value(i, p) else {
            continue;
        };
        let tip = format!(
            "{} at {} req/s ({}): {what}",
            label(a),
            fmt(p.rate_per_s),
            p.outcome
        );
        data.push(pt(p.rate_per_s, y, tip));
        styles.push(marker(&p.outcome));
    }
    if data.is_empty() {
        return None;
    }
    let mut d = line(&name, color(r, &a.id), data);
    d["pointStyle"] = json!(styles);
    d["pointRadius"] = json!(5);
    d["group"] = json!(a.id);
    Some(d)
}

/// A dashed horizontal line from `x0` to `x1` at `y`.
fn hline(name: &str, x0: f64, x1: f64, y: f64) -> Value {
    let tip = name.to_string();
    let mut d = line(
        name,
        "#6a1b9a",
        vec![pt(x0, y, tip.clone()), pt(x1, y, tip)],
    );
    d["borderDash"] = json!([8, 4]);
    d["pointRadius"] = json!(0);
    d
}

fn rate_span(r: &CampaignResult) -> (f64, f64) {
    let rates = r
        .arms
        .iter()
        .flat_map(|a| a.capacity.iter().flat_map(|c| &c.probes))
        .map(|p| p.rate_per_s);
    let max = rates.fold(0.0_f64, f64::max);
    (0.0, max)
}

/// One metric's limited statistics against the offered rate, per arm, with its median dotted.
fn metric_vs_rate(
    r: &CampaignResult,
    m: &ProbeMedians,
    metric: SloMetric,
    limits: &[SloLimit],
) -> Option<Value> {
    let mine: Vec<&SloLimit> = limits.iter().filter(|l| l.metric == metric).collect();
    let mut ds = Vec::new();
    for a in &r.arms {
        for (k, l) in mine.iter().enumerate() {
            let words = l.to_string();
            // The first limit's line carries the arm's name in the legend; the others and the
            // median share its legend entry (its group).
            let name = match k {
                0 => label(a),
                _ => format!("{} {}", label(a), l.stat.name()),
            };
            let d = probe_line(a, r, name, |_, p| {
                let c = p.slo.iter().find(|c| c.limit == words)?;
                let y = c.observed_ms?;
                let met = if c.met { "met" } else { "missed" };
                Some((
                    y,
                    format!("{} {} {} ms ({met})", metric.name(), l.stat.name(), fmt(y)),
                ))
            });
            if let Some(mut d) = d {
                if k > 0 {
                    d["borderDash"] = json!([6, 4]);
                    d["noLegend"] = json!(true);
                }
                ds.push(d);
            }
        }
        if mine.iter().all(|l| l.stat != SloStat::P50) {
            let medians = m.get(&a.id);
            let name = format!("{} p50", label(a));
            let d = probe_line(a, r, name, |i, _| {
                let y = *medians?.get(i)?.get(metric.key())?;
                Some((y, format!("{} p50 {} ms", metric.name(), fmt(y))))
            });
            if let Some(mut d) = d {
                d["borderDash"] = json!([2, 3]);
                d["borderWidth"] = json!(1);
                d["noLegend"] = json!(true);
                ds.push(d);
            }
        }
    }
    if ds.is_empty() {
        return None;
    }
    let (x0, x1) = rate_span(r);
    for l in &mine {
        ds.push(hline(&format!("SLO {l}"), x0, x1, l.limit_ms));
    }
    let stats: Vec<&str> = mine.iter().map(|l| l.stat.name()).collect();
    Some(config(
        "scatter",
        &format!("{} against offered rate", metric.name().to_uppercase()),
        ds,
        zero_axis("offered rate, requests/s"),
        zero_axis(&format!(
            "{}, ms ({} as judged; dotted: p50)",
            metric.name().to_uppercase(),
            stats.join(", ")
        )),
    ))
}

/// Goodput (requests meeting every limit, per second) against the offered rate, per arm, with
/// the offered rate itself as the line goodput cannot exceed.
fn goodput_vs_rate(r: &CampaignResult) -> Option<Value> {
    let mut ds: Vec<Value> = r
        .arms
        .iter()
        .filter_map(|a| {
            probe_line(a, r, label(a), |_, p| {
                let g = p.goodput.as_ref()?.goodput_req_s?;
                Some((g, format!("goodput {} req/s", fmt(g))))
            })
        })
        .collect();
    if ds.is_empty() {
        return None;
    }
    let (x0, x1) = rate_span(r);
    let mut offered = line(
        "offered rate",
        "#7f7f7f",
        vec![
            pt(x0, x0, "goodput = offered rate".into()),
            pt(x1, x1, "goodput = offered rate".into()),
        ],
    );
    offered["borderDash"] = json!([6, 4]);
    offered["pointRadius"] = json!(0);
    ds.push(offered);
    Some(config(
        "scatter",
        "Goodput against offered rate",
        ds,
        zero_axis("offered rate, requests/s"),
        zero_axis("goodput, requests/s"),
    ))
}

/// The rate curves; empty when no arm ran a capacity step.
pub fn plots(r: &CampaignResult, m: &ProbeMedians) -> Vec<Plot> {
    if r.arms.iter().all(|a| a.capacity.is_none()) {
        return Vec::new();
    }
    let limits = limits(r);
    const MARKS: &str = "Circles held every limit, crosses broke one, triangles were bounded by the client (not the arm's figure).";
    let mut out = Vec::new();
    for (id, metric) in [
        ("rate-ttft", SloMetric::Ttft),
        ("rate-itl", SloMetric::Itl),
        ("rate-e2e", SloMetric::E2e),
    ] {
        if limits.iter().all(|l| l.metric != metric) {
            continue;
        }
        let name = metric.name().to_uppercase();
        out.push(plot(
            id,
            &format!("{name} against offered rate (capacity)"),
            &format!("Each arm's capacity probes: the {name} statistics the SLO set limits, as each probe was judged (solid; further limits dashed), its median dotted, and the limits as purple dashed lines. {MARKS}"),
            metric_vs_rate(r, m, metric, &limits),
            &format!("No capacity probe recorded a {name} statistic."),
        ));
    }
    out.push(plot(
        "rate-goodput",
        "Goodput against offered rate (capacity)",
        &format!("Requests per second that met every SLO limit at each probed rate, per arm; the grey dashed line is the offered rate (goodput cannot exceed it). {MARKS}"),
        goodput_vs_rate(r),
        "No capacity probe recorded goodput.",
    ));
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::evidence::result::{CapacityRecord, GoodputRecord, SloCheckRecord};

    fn probe(rate: f64, outcome: &str, p95: f64, met: bool, good: f64) -> CapacityProbeRecord {
        CapacityProbeRecord {
            rate_per_s: rate,
            outcome: outcome.into(),
            goodput: Some(GoodputRecord {
                requests_meeting: 1,
                requests_ok: 1,
                goodput_req_s: Some(good),
            }),
            slo: vec![SloCheckRecord {
                limit: "ttft p95 <= 100 ms".into(),
                observed_ms: Some(p95),
                met,
            }],
            ..Default::default()
        }
    }

    fn result() -> CampaignResult {
        let mut r = CampaignResult::default();
        let mut a = ArmResult {
            id: "quick".into(),
            ..Default::default()
        };
        // Probed out of order, as a doubling-then-bisection search does.
        a.capacity = Some(CapacityRecord {
            evidence: "quick-capacity.json".into(),
            probes: vec![
                probe(3.0, "held", 20.0, true, 3.0),
                probe(6.0, "broken", 400.0, false, 1.5),
                probe(4.5, "held", 60.0, true, 4.4),
            ],
            ..Default::default()
        });
        r.arms.push(a);
        r.arms.push(ArmResult {
            id: "plain".into(),
            ..Default::default()
        });
        r
    }

    #[test]
    fn each_probe_is_drawn_by_rate_with_its_outcome_and_the_limit_as_a_line() {
        let r = result();
        let mut m = ProbeMedians::new();
        m.insert(
            "quick".into(),
            vec![
                [("ttft_ms".to_string(), 10.0)].into(),
                BTreeMap::new(),
                [("ttft_ms".to_string(), 30.0)].into(),
            ],
        );
        let plots = plots(&r, &m);
        let ids: Vec<&str> = plots.iter().map(|p| p.id).collect();
        assert_eq!(ids, ["rate-ttft", "rate-goodput"]);
        let c = plots[0].config.as_ref().unwrap();
        let ds = c["data"]["datasets"].as_array().unwrap();
        let xs = |d: &Value| -> Vec<f64> {
            d["data"]
                .as_array()
                .unwrap()
                .iter()
                .map(|p| p["x"].as_f64().unwrap())
                .collect()
        };
        let ys = |d: &Value| -> Vec<f64> {
            d["data"]
                .as_array()
                .unwrap()
                .iter()
                .map(|p| p["y"].as_f64().unwrap())
                .collect()
        };
        // The judged p95 by rate, marked held, held, broken.
        assert_eq!(xs(&ds[0]), [3.0, 4.5, 6.0]);
        assert_eq!(ys(&ds[0]), [20.0, 60.0, 400.0]);
        assert_eq!(ds[0]["pointStyle"], json!(["circle", "circle", "crossRot"]));
        // The medians: the probe at 6 req/s has none in its file, so it is not drawn.
        assert_eq!(xs(&ds[1]), [3.0, 4.5]);
        assert_eq!(ys(&ds[1]), [10.0, 30.0]);
        // The SLO line across the probed rates.
        assert_eq!(ds[2]["label"], "SLO ttft p95 <= 100 ms");
        assert_eq!(ys(&ds[2]), [100.0, 100.0]);
        assert_eq!(xs(&ds[2]), [0.0, 6.0]);
        let g = plots[1].config.as_ref().unwrap();
        let gd = g["data"]["datasets"].as_array().unwrap();
        assert_eq!(ys(&gd[0]), [3.0, 4.4, 1.5]);
        assert_eq!(gd[1]["label"], "offered rate");
    }

    #[test]
    fn a_campaign_without_a_capacity_step_has_no_rate_curves() {
        let mut r = result();
        r.arms[0].capacity = None;
        assert!(plots(&r, &ProbeMedians::new()).is_empty());
    }

    #[test]
    fn medians_are_read_only_for_the_probe_the_file_names() {
        let dir = tempfile::tempdir().unwrap();
        let r = result();
        let file = json!({"probes": [
            {"rate_per_s": 3.0, "stats": {"metrics": {"ttft_ms": {"p50": 11.0}}}},
            {"rate_per_s": 5.0, "stats": {"metrics": {"ttft_ms": {"p50": 99.0}}}},
        ]});
        std::fs::write(
            dir.path().join("quick-capacity.json"),
            serde_json::to_vec(&file).unwrap(),
        )
        .unwrap();
        let m = read(dir.path(), &r);
        let q = &m["quick"];
        assert_eq!(q.len(), 3);
        assert_eq!(q[0]["ttft_ms"], 11.0);
        assert!(
            q[1].is_empty(),
            "the file's second probe is at another rate"
        );
        assert!(q[2].is_empty());
        assert!(!m.contains_key("plain"));
    }
}
