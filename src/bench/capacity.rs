//! The capacity search: the highest request rate at which every SLO holds and failures stay
//! under a share, found by open-loop probes. Pure: the caller runs each probe (a campaign's
//! capacity step runs it through `run/timed.rs`, the path every open-loop step takes) and judges
//! it with [`judge`]; [`next_rate`] says what to probe next and [`bracket`] what the probes
//! found.
//!
//! The search doubles the rate from `start_rate` while probes hold, then bisects between the
//! highest rate that held and the lowest that broke until the two are within `precision` of
//! each other; or it walks a given list of rates upwards until one breaks. It stops at
//! `max_steps` probes, at `max_rate`, and at the first probe the client itself could not keep
//! up with (its overload signals): a figure the client bounds is never the arm's.

use serde::Serialize;

/// How the search chooses its probes (plain data; a campaign's `[workload.capacity]`).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Search {
    /// Requests per second of the first probe (doubling search).
    pub start_rate: f64,
    /// A given list of rates, probed in increasing order (empty: doubling then bisection).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub rates: Vec<f64>,
    /// No probe above this rate.
    pub max_rate: f64,
    /// At most this many probes.
    pub max_steps: u32,
    /// Bisection stops when (broken − held) / held is at most this.
    pub precision: f64,
    /// A probe whose failed share of requests is above this broke.
    pub max_failure_share: f64,
}

/// What one probe showed.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "outcome", content = "because", rename_all = "kebab-case")]
pub enum Outcome {
    /// Every SLO held and failures stayed under the share.
    Held,
    /// The limits it broke, in words (`ttft p95 <= 100 ms: 230 ms`).
    Broken(String),
    /// The client's own overload signals fired: what the probe measured is the client's limit.
    ClientBound(String),
}

/// One finished probe: its rate and outcome.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Probe {
    pub rate: f64,
    pub outcome: Outcome,
}

/// What a probe measured, for [`judge`]: the SLO checks that failed (their sentences), the
/// requests that succeeded and failed, and the client's overload signals.
#[derive(Debug, Clone, Default)]
pub struct Measured {
    pub slo_broken: Vec<String>,
    pub ok: u64,
    pub failed: u64,
    pub client_signals: Vec<String>,
}

/// The probe's outcome: client-bound when the client's signals fired (whatever the latencies
/// say), else broken by each SLO check that failed and by a failed share over the limit.
pub fn judge(s: &Search, m: &Measured) -> Outcome {
    if !m.client_signals.is_empty() {
        return Outcome::ClientBound(m.client_signals.join("; "));
    }
    let mut why = m.slo_broken.clone();
    let n = m.ok + m.failed;
    if n == 0 {
        why.push("no request completed".into());
    } else if m.failed as f64 > s.max_failure_share * n as f64 {
        why.push(format!(
            "{} of {n} requests failed (over the {}% allowed by max_failure_share)",
            m.failed,
            s.max_failure_share * 100.0
        ));
    }
    match why.is_empty() {
        true => Outcome::Held,
        false => Outcome::Broken(why.join("; ")),
    }
}

/// What the probes found: the highest rate that held, the lowest that broke and why, the rate at
/// which the client was the limit, and why the search stopped.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Bracket {
    pub held_rate_per_s: Option<f64>,
    pub broken_rate_per_s: Option<f64>,
    /// The limits the lowest broken probe broke.
    pub broken_by: Option<String>,
    /// The client was the limit at this rate (no capacity figure above the held rate is the
    /// arm's).
    pub client_bound_rate_per_s: Option<f64>,
    pub client_bound_because: Option<String>,
    pub stopped_because: String,
}

/// The bracket of `done`.
pub fn bracket(s: &Search, done: &[Probe]) -> Bracket {
    let (held, _) = bracket_rates(done);
    // The lowest broken rate with what broke it.
    let broken = done
        .iter()
        .filter_map(|p| match &p.outcome {
            Outcome::Broken(w) => Some((p.rate, w.clone())),
            _ => None,
        })
        .reduce(|a, b| if b.0 < a.0 { b } else { a });
    let client = done.iter().find_map(|p| match &p.outcome {
        Outcome::ClientBound(w) => Some((p.rate, w.clone())),
        _ => None,
    });
    Bracket {
        held_rate_per_s: held,
        broken_rate_per_s: broken.as_ref().map(|b| b.0),
        broken_by: broken.map(|b| b.1),
        client_bound_rate_per_s: client.as_ref().map(|c| c.0),
        client_bound_because: client.map(|c| c.1),
        stopped_because: stop_reason(s, done).unwrap_or_else(|| "not finished".into()),
    }
}

/// The next rate to probe after `done`, or None when the search is over.
pub fn next_rate(s: &Search, done: &[Probe]) -> Option<f64> {
    match stop_reason(s, done) {
        Some(_) => None,
        None => candidate(s, done),
    }
}

/// The rate the search would probe next, bounds aside.
fn candidate(s: &Search, done: &[Probe]) -> Option<f64> {
    if !s.rates.is_empty() {
        let mut list = s.rates.clone();
        list.sort_by(f64::total_cmp);
        return list.get(done.len()).copied();
    }
    let b = bracket_rates(done);
    match b {
        (None, None) => Some(s.start_rate),
        // Only holds so far: double, and try the maximum itself once before stopping.
        (Some(h), None) => Some((h * 2.0).min(s.max_rate)).filter(|&r| r > h),
        // Nothing held yet: halve below the lowest broken rate.
        (None, Some(b)) => Some(b / 2.0),
        (Some(h), Some(b)) => Some((h + b) / 2.0),
    }
}

fn bracket_rates(done: &[Probe]) -> (Option<f64>, Option<f64>) {
    let held = done
        .iter()
        .filter(|p| p.outcome == Outcome::Held)
        .map(|p| p.rate)
        .reduce(f64::max);
    let broken = done
        .iter()
        .filter(|p| matches!(p.outcome, Outcome::Broken(_)))
        .map(|p| p.rate)
        .reduce(f64::min);
    (held, broken)
}

/// Why the search stops after `done` (None: it goes on).
pub fn stop_reason(s: &Search, done: &[Probe]) -> Option<String> {
    if let Some(p) = done
        .iter()
        .find(|p| matches!(p.outcome, Outcome::ClientBound(_)))
    {
        return Some(format!(
            "the client was the limit at {} req/s (its overload signals fired)",
            p.rate
        ));
    }
    let (held, broken) = bracket_rates(done);
    if !s.rates.is_empty() {
        if broken.is_some() {
            return Some("a rate of the list broke".into());
        }
        if done.len() >= s.rates.len() {
            return Some("every rate of the list held".into());
        }
    } else {
        match (held, broken) {
            (Some(h), Some(b)) if (b - h) / h <= s.precision => {
                return Some(format!(
                    "held and broken rates within the precision {} of each other",
                    s.precision
                ))
            }
            (Some(h), None) if h >= s.max_rate => {
                return Some(format!("held up to max_rate {} req/s", s.max_rate))
            }
            _ => {}
        }
    }
    if done.len() >= s.max_steps as usize {
        return Some(format!("max_steps {} probes reached", s.max_steps));
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn search() -> Search {
        Search {
            start_rate: 1.0,
            rates: vec![],
            max_rate: 64.0,
            max_steps: 12,
            precision: 0.1,
            max_failure_share: 0.05,
        }
    }

    /// Runs the search against a synthetic arm that holds below `capacity` req/s (and a client
    /// that gives up above `client`), returning the probed rates and the bracket.
    fn walk(s: &Search, capacity: f64, client: f64) -> (Vec<f64>, Bracket) {
        let mut done: Vec<Probe> = Vec::new();
        while let Some(rate) = next_rate(s, &done) {
            let m = Measured {
                slo_broken: match rate > capacity {
                    true => vec![format!("ttft p95 <= 100 ms: {} ms", rate * 10.0)],
                    false => vec![],
                },
                ok: 10,
                failed: 0,
                client_signals: match rate > client {
                    true => vec!["the open loop sent requests late".into()],
                    false => vec![],
                },
            };
            done.push(Probe {
                rate,
                outcome: judge(s, &m),
            });
            assert!(done.len() <= 64, "the search ends");
        }
        (done.iter().map(|p| p.rate).collect(), bracket(s, &done))
    }

    #[test]
    fn the_search_doubles_until_a_probe_breaks_then_bisects_to_the_precision() {
        let (rates, b) = walk(&search(), 5.0, f64::INFINITY);
        // 1, 2, 4 hold, 8 breaks; then 6 (broke), 5 (held), 5.5 (broke): within 10 %.
        assert_eq!(rates, vec![1.0, 2.0, 4.0, 8.0, 6.0, 5.0, 5.5]);
        assert_eq!(b.held_rate_per_s, Some(5.0));
        assert_eq!(b.broken_rate_per_s, Some(5.5));
        assert_eq!(b.broken_by.as_deref(), Some("ttft p95 <= 100 ms: 55 ms"));
        assert!(b.stopped_because.contains("precision 0.1"), "{b:?}");
        assert_eq!(b.client_bound_rate_per_s, None);
    }

    #[test]
    fn the_search_stops_at_max_rate_max_steps_and_halves_when_the_first_probe_breaks() {
        let (rates, b) = walk(&search(), 1000.0, f64::INFINITY);
        assert_eq!(rates, vec![1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0]);
        assert_eq!((b.held_rate_per_s, b.broken_rate_per_s), (Some(64.0), None));
        assert_eq!(b.stopped_because, "held up to max_rate 64 req/s");
        let s = Search {
            max_rate: 10.0,
            max_steps: 3,
            ..search()
        };
        let (rates, b) = walk(&s, 1000.0, f64::INFINITY);
        assert_eq!(rates, vec![1.0, 2.0, 4.0]);
        assert_eq!(b.stopped_because, "max_steps 3 probes reached");
        let s = Search {
            max_rate: 10.0,
            ..search()
        };
        // The maximum itself is probed once after the last doubling below it.
        assert_eq!(
            walk(&s, 1000.0, f64::INFINITY).0,
            vec![1.0, 2.0, 4.0, 8.0, 10.0]
        );
        let (rates, b) = walk(&search(), 0.3, f64::INFINITY);
        assert_eq!(&rates[..3], &[1.0, 0.5, 0.25]);
        let (h, x) = (b.held_rate_per_s.unwrap(), b.broken_rate_per_s.unwrap());
        assert!(h <= 0.3 && x > 0.3 && (x - h) / h <= 0.1, "{b:?}");
    }

    #[test]
    fn a_client_bound_probe_ends_the_search_and_is_never_the_arms_figure() {
        let (rates, b) = walk(&search(), 1000.0, 5.0);
        assert_eq!(rates, vec![1.0, 2.0, 4.0, 8.0]);
        assert_eq!(b.held_rate_per_s, Some(4.0));
        assert_eq!(b.broken_rate_per_s, None);
        assert_eq!(b.client_bound_rate_per_s, Some(8.0));
        assert!(b.stopped_because.contains("client was the limit at 8"));
    }

    #[test]
    fn a_given_list_is_walked_upwards_until_a_rate_breaks_and_failures_count() {
        let s = Search {
            rates: vec![8.0, 2.0, 4.0, 16.0],
            ..search()
        };
        let (rates, b) = walk(&s, 5.0, f64::INFINITY);
        assert_eq!(rates, vec![2.0, 4.0, 8.0]);
        assert_eq!(
            (b.held_rate_per_s, b.broken_rate_per_s),
            (Some(4.0), Some(8.0))
        );
        let m = Measured {
            ok: 18,
            failed: 2,
            ..Default::default()
        };
        assert_eq!(
            judge(&s, &m),
            Outcome::Broken(
                "2 of 20 requests failed (over the 5% allowed by max_failure_share)".into()
            )
        );
        let m = Measured {
            ok: 19,
            failed: 1,
            ..Default::default()
        };
        assert_eq!(judge(&s, &m), Outcome::Held);
    }
}
