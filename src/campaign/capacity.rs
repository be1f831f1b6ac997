//! The capacity step of the plan (`[workload.capacity]`): everything its search and probes
//! need, resolved from the campaign (the SLO set parsed, the defaults filled), and its dry-run
//! words.

use super::spec::{ArrivalProcess, Workload, DEFAULT_PROBE_REQUESTS};
use crate::metrics::slo::SloLimit;
use serde::Serialize;

/// One arm's capacity search: open-loop probes of the matched workload, each judged against
/// `slo` and the failure share (`bench::capacity` chooses the rates).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CapacityStep {
    pub slo: Vec<SloLimit>,
    pub start_rate: f64,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub rates: Vec<f64>,
    pub max_rate: f64,
    pub max_steps: u32,
    pub precision: f64,
    /// Measured requests per probe, or None with `duration_secs`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub requests: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub duration_secs: Option<f64>,
    pub max_failure_share: f64,
    pub arrival: ArrivalProcess,
    pub prompt_tokens: u32,
    pub max_tokens: u32,
    pub ignore_eos: bool,
}

impl CapacityStep {
    /// The step of `[workload.capacity]`, None without the table.
    pub fn of(w: &Workload) -> Option<CapacityStep> {
        let k = w.capacity.as_ref()?;
        let mut rates = k.rates.clone();
        rates.sort_by(f64::total_cmp);
        Some(CapacityStep {
            slo: w.slo_capacity(),
            start_rate: k.start_rate,
            rates,
            max_rate: k.max_rate,
            max_steps: k.max_steps,
            precision: k.precision,
            requests: match k.duration_secs {
                Some(_) => k.requests,
                None => Some(k.requests.unwrap_or(DEFAULT_PROBE_REQUESTS)),
            },
            duration_secs: k.duration_secs,
            max_failure_share: k.max_failure_share,
            arrival: k.arrival,
            prompt_tokens: w.matched_prompt_tokens,
            max_tokens: w.max_tokens,
            ignore_eos: w.sampling.ignore_eos,
        })
    }

    /// Measured requests of a probe at `rate` (at least 1).
    pub fn requests_at(&self, rate: f64) -> u32 {
        match (self.requests, self.duration_secs) {
            (Some(n), _) => n,
            (None, Some(s)) => ((rate * s).ceil() as u32).max(1),
            (None, None) => DEFAULT_PROBE_REQUESTS,
        }
    }

    /// The dry run's words.
    pub fn describe(&self) -> String {
        let search = match self.rates.is_empty() {
            true => format!(
                "from {} req/s, doubling then bisecting to {} %",
                self.start_rate,
                self.precision * 100.0
            ),
            false => format!(
                "rates {} req/s upwards until one breaks",
                self.rates
                    .iter()
                    .map(|r| r.to_string())
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        };
        let per = match (self.requests, self.duration_secs) {
            (Some(n), _) => format!("{n} request(s) per probe"),
            (_, Some(s)) => format!("{s} s of arrivals per probe"),
            _ => String::new(),
        };
        format!(
            "capacity under SLO {}: open-loop probes ({} arrivals) {search}, at most {} probe(s) up to {} req/s, {per}, {} prompt + {} max tokens{}; a probe breaks above {} % failed; a probe the client itself could not drive ends the search (client-bound)",
            self.slo
                .iter()
                .map(|l| l.to_string())
                .collect::<Vec<_>>()
                .join(", "),
            self.arrival.as_str(),
            self.max_steps,
            self.max_rate,
            self.prompt_tokens,
            self.max_tokens,
            if self.ignore_eos { ", ignore_eos" } else { "" },
            self.max_failure_share * 100.0,
        )
    }
}
