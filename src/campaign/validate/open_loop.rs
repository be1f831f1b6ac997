//! `[workload.open_loop]`: the rates of the open-loop steps (a rate sweep when two or more), the
//! concurrency cap, the measured requests and the warm-up by count or time. The checks are
//! `bench`'s for `--rate`, `--max-concurrency`, `--requests` and `--warmup-duration`, in the
//! table's words.

use super::common::{p, within};
use crate::campaign::diag::Reporter;
use crate::campaign::spec::Campaign;

/// Most open-loop steps one campaign plans per arm.
const MAX_RATES: usize = 64;
/// Most measured requests of one open-loop step.
const MAX_REQUESTS: u64 = 100_000;

pub(super) fn open_loop(c: &Campaign, r: &mut Reporter) {
    let Some(o) = &c.workload.open_loop else {
        return;
    };
    let at = p("workload.open_loop");
    if o.rates.is_empty() {
        r.error(
            &at.key("rates"),
            "rates = [] gives no point to run: an open-loop step (or a rate sweep) needs at least one rate",
            "give one rate or more in requests per second, e.g. rates = [2.0, 4.0], or remove [workload.open_loop]",
        );
    }
    if o.rates.len() > MAX_RATES {
        r.error(
            &at.key("rates"),
            format!(
                "{} rates is more than the {MAX_RATES} steps an arm may run",
                o.rates.len()
            ),
            format!("give at most {MAX_RATES} rates"),
        );
    }
    for (i, &rate) in o.rates.iter().enumerate() {
        if !(rate > 0.0 && rate.is_finite()) {
            r.error(
                &at.key("rates"),
                format!("rate {rate} is not a positive number of requests per second"),
                "give rates above 0, e.g. rates = [2.0, 4.0] (bakeoff bench --rate takes the same)",
            );
        } else if o.rates[..i].contains(&rate) {
            r.error(
                &at.key("rates"),
                format!(
                    "rate {rate} is listed twice; each rate is one step with one evidence file"
                ),
                "list each rate once",
            );
        }
    }
    if o.max_concurrency == Some(0) {
        r.error(
            &at.key("max_concurrency"),
            "max_concurrency = 0 lets no request start",
            "give max_concurrency = 1 or more, or leave it out for an open loop without a cap",
        );
    }
    within(
        r,
        &at.key("requests"),
        o.requests.into(),
        1,
        MAX_REQUESTS,
        "measured requests per rate",
    );
    if let Some(s) = o.warmup_secs {
        if !(s > 0.0 && s.is_finite()) {
            r.error(
                &at.key("warmup_secs"),
                format!("warmup_secs {s} is not a positive number of seconds"),
                "give the warm-up's length in seconds, e.g. warmup_secs = 5, or leave it out (warmup = N warms up by count)",
            );
        }
    }
}
