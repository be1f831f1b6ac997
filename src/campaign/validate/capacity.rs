//! `[workload.capacity]`: its SLO set (the grammar of `[[workload.slo]]`), the search, its
//! bounds and the failure-share limit; and the `capacity` priority's need of the table.

use super::common::{p, within};
use crate::campaign::diag::Reporter;
use crate::campaign::spec::Campaign;
use crate::evidence::RankingMetric;
use crate::metrics::slo::SloLimit;

/// Most probes of one arm's capacity search.
const MAX_STEPS: u64 = 64;
/// Most measured requests of one probe.
const MAX_REQUESTS: u64 = 100_000;

pub(super) fn capacity(c: &Campaign, r: &mut Reporter) {
    let w = &c.workload;
    let Some(k) = &w.capacity else {
        if w.ranking_priority.contains(&RankingMetric::Capacity) {
            r.error(
                &p("workload.ranking_priority"),
                "`capacity` ranks by the highest request rate every SLO held at, but no capacity search is declared",
                "add [workload.capacity] with its SLOs, e.g. slo = [\"ttft_p95=500ms\"], or remove \"capacity\"",
            );
        }
        return;
    };
    let at = p("workload.capacity");
    for (i, e) in k.slo.iter().enumerate() {
        if let Err(msg) = SloLimit::parse_list(e) {
            r.error(
                &at.key("slo").index(i),
                format!("SLO limit {msg}"),
                "give each limit as in [[workload.slo]], e.g. slo = [\"ttft_p95=500ms\", \"itl_p95=50ms\"]",
            );
        }
    }
    if k.slo.is_empty() && w.slo_open_loop().is_empty() {
        r.error(
            &at.key("slo"),
            "no SLO to search under: capacity is the highest rate at which every SLO holds",
            "give slo = [\"ttft_p95=500ms\"] (the grammar of [[workload.slo]]), or a [[workload.slo]] entry without concurrency",
        );
    }
    positive_rate(r, &at.key("start_rate"), k.start_rate, "start_rate = 1.0");
    positive_rate(r, &at.key("max_rate"), k.max_rate, "max_rate = 64.0");
    if k.rates.is_empty() && k.start_rate > k.max_rate {
        r.error(
            &at.key("start_rate"),
            format!(
                "start_rate {} is above max_rate {}: no probe could run",
                k.start_rate, k.max_rate
            ),
            "give a start_rate at or below max_rate",
        );
    }
    for (i, &rate) in k.rates.iter().enumerate() {
        let path = at.key("rates").index(i);
        if !(rate > 0.0 && rate.is_finite()) {
            positive_rate(r, &path, rate, "rates = [2.0, 4.0, 8.0]");
        } else if k.rates[..i].contains(&rate) {
            r.error(
                &path,
                format!("rate {rate} is listed twice"),
                "list each rate once",
            );
        } else if rate > k.max_rate {
            r.error(
                &path,
                format!("rate {rate} is above max_rate {}", k.max_rate),
                "raise max_rate or leave the rate out",
            );
        }
    }
    within(
        r,
        &at.key("max_steps"),
        k.max_steps.into(),
        1,
        MAX_STEPS,
        "probes per arm",
    );
    if !(k.precision > 0.0 && k.precision <= 1.0) {
        r.error(
            &at.key("precision"),
            format!("precision {} is not in (0, 1]", k.precision),
            "give the relative gap between held and broken rates at which bisection stops, e.g. precision = 0.1",
        );
    }
    if !(0.0..1.0).contains(&k.max_failure_share) {
        r.error(
            &at.key("max_failure_share"),
            format!("max_failure_share {} is not in [0, 1)", k.max_failure_share),
            "give the share of failed requests above which a probe broke, e.g. max_failure_share = 0.05",
        );
    }
    match (k.requests, k.duration_secs) {
        (Some(_), Some(_)) => r.error(
            &at.key("duration_secs"),
            "both requests and duration_secs size a probe",
            "give one: requests = 32 (per probe) or duration_secs = 10 (rate × seconds requests)",
        ),
        (Some(n), None) => within(
            r,
            &at.key("requests"),
            n.into(),
            1,
            MAX_REQUESTS,
            "measured requests per probe",
        ),
        (None, Some(s)) if !(s > 0.0 && s.is_finite()) => r.error(
            &at.key("duration_secs"),
            format!("duration_secs {s} is not a positive number of seconds"),
            "give each probe's seconds of arrivals, e.g. duration_secs = 10",
        ),
        (None, Some(s)) if s * k.max_rate > MAX_REQUESTS as f64 => r.error(
            &at.key("duration_secs"),
            format!(
                "duration_secs {s} at max_rate {} is more than {MAX_REQUESTS} requests per probe",
                k.max_rate
            ),
            "give a shorter duration_secs or a lower max_rate",
        ),
        _ => {}
    }
}

fn positive_rate(r: &mut Reporter, path: &crate::campaign::diag::FieldPath, v: f64, eg: &str) {
    if !(v > 0.0 && v.is_finite()) {
        r.error(
            path,
            format!("{v} is not a positive number of requests per second"),
            format!("give a rate above 0, e.g. {eg}"),
        );
    }
}
