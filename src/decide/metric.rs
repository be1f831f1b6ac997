//! One descriptor per ranking metric: what it is called, its unit, which direction is better and
//! how it is measured from an arm's evidence. The ranking, the tie rule and the verdict's words
//! (`decide/`) and the documents' headline, labels and comparison (`report/`) all read these, so
//! a metric's facts live in one place.

use crate::evidence::result::{ArmResult, CiMethod, Stat, StepReuse, TimingRecord};
use crate::evidence::RankingMetric;
use crate::metrics::stats::Distribution;

/// Which way a metric improves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Direction {
    HigherIsBetter,
    LowerIsBetter,
}

/// What the verdict and the reports know about one ranking metric.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Descriptor {
    pub metric: RankingMetric,
    /// The unit as printed: `ms`, `tok/s`, `tokens`.
    pub unit: &'static str,
    /// The unit as it ends field names and JSON keys: `ms`, `tok_s`, `tokens`.
    pub unit_key: &'static str,
    pub direction: Direction,
    /// Words for the reason and the reports: "warm median TTFT".
    pub words: &'static str,
    /// Short name for per-arm decision text and table headers ("TTFT winner", "TTFT p50 ms").
    pub short: &'static str,
    /// Stem of its field names and JSON keys: `ttft` as in `ttft_ms` and `ttft_p50_ms`.
    pub key: &'static str,
    /// How it is measured, in words.
    pub measured: &'static str,
}

pub const TTFT: Descriptor = Descriptor {
    metric: RankingMetric::Ttft,
    unit: "ms",
    unit_key: "ms",
    direction: Direction::LowerIsBetter,
    words: "warm median TTFT",
    short: "TTFT",
    key: "ttft",
    measured: "median time to first token of the warm requests at concurrency 1, with the interval of the median its sample supports",
};

pub const DECODE: Descriptor = Descriptor {
    metric: RankingMetric::DecodeTokensPerSecond,
    unit: "tok/s",
    unit_key: "tok_s",
    direction: Direction::HigherIsBetter,
    words: "warm median decode speed",
    short: "decode",
    key: "decode",
    measured:
        "median decode speed of the warm requests at concurrency 1, with the interval of the median its sample supports",
};

pub const USABLE_CONTEXT: Descriptor = Descriptor {
    metric: RankingMetric::UsableContextAndKv,
    unit: "tokens",
    unit_key: "tokens",
    direction: Direction::HigherIsBetter,
    words: "usable context",
    short: "usable-context",
    key: "usable_context",
    measured: "the served context, capped by the context the endpoint reported when ready",
};

pub const CONCURRENCY: Descriptor = Descriptor {
    metric: RankingMetric::Concurrency,
    unit: "tok/s",
    unit_key: "tok_s",
    direction: Direction::HigherIsBetter,
    words: "aggregate throughput at the highest concurrency",
    short: "concurrency",
    key: "aggregate_output",
    measured: "aggregate output tokens per second at the highest concurrency level that ran",
};

pub const E2E: Descriptor = Descriptor {
    metric: RankingMetric::E2e,
    unit: "ms",
    unit_key: "ms",
    direction: Direction::LowerIsBetter,
    words: "warm median end-to-end latency",
    short: "E2E",
    key: "e2e",
    measured: "median end-to-end latency of the warm requests at concurrency 1, with the interval of the median its sample supports",
};

pub const GOODPUT: Descriptor = Descriptor {
    metric: RankingMetric::Goodput,
    unit: "req/s",
    unit_key: "req_s",
    direction: Direction::HigherIsBetter,
    words: "goodput under the SLOs",
    short: "goodput",
    key: "goodput",
    measured: "successful requests per second whose own TTFT, ITL and E2E met every SLO limit of the level (vLLM's goodput), at the priority concurrency level",
};

pub const CAPACITY: Descriptor = Descriptor {
    metric: RankingMetric::Capacity,
    unit: "req/s",
    unit_key: "req_s",
    direction: Direction::HigherIsBetter,
    words: "capacity under the SLOs",
    short: "capacity",
    key: "capacity",
    measured: "the highest open-loop request rate at which every capacity SLO held and failures stayed under the share (`[workload.capacity]`), bracketed by the lowest rate that broke; a rate at which the client was the limit is never the arm's",
};

pub const TTFT_FIRST_TURN: Descriptor = Descriptor {
    metric: RankingMetric::TtftFirstTurn,
    unit: "ms",
    unit_key: "ms",
    direction: Direction::LowerIsBetter,
    words: "warm median first-turn TTFT",
    short: "first-turn TTFT",
    key: "ttft_first_turn",
    measured: "median time to first token of the warm run's first conversation turns (each opens with a fresh nonce, so no earlier request's tokens could be cached), with the interval of the median its sample supports; later turns resend the history a prefix cache may serve",
};

pub const ENERGY_PER_MTOK: Descriptor = Descriptor {
    metric: RankingMetric::EnergyPerMtok,
    unit: "J/Mtok",
    unit_key: "j",
    direction: Direction::LowerIsBetter,
    words: "GPU energy per million output tokens",
    short: "energy",
    key: "energy_per_mtok",
    measured: "the lane GPUs' energy over the step's measured window (their power readings integrated by the trapezoid rule) per million output tokens, at the priority level (`concurrency_priority_level`, else the highest level that ran); the idle baseline's power is stated beside it, never subtracted",
};

pub const COST_PER_MTOK: Descriptor = Descriptor {
    metric: RankingMetric::CostPerMtok,
    unit: "per Mtok",
    unit_key: "per_mtok",
    direction: Direction::LowerIsBetter,
    words: "cost per million output tokens",
    short: "cost",
    key: "cost",
    measured: "the lane's `cost_per_hour` over the aggregate output throughput (cost_per_hour / 3600 / output tok/s × 10⁶), at the priority level (`concurrency_priority_level`, else the highest level that ran)",
};

/// The descriptor of `m`.
pub fn descriptor(m: RankingMetric) -> &'static Descriptor {
    match m {
        RankingMetric::Ttft => &TTFT,
        RankingMetric::DecodeTokensPerSecond => &DECODE,
        RankingMetric::UsableContextAndKv => &USABLE_CONTEXT,
        RankingMetric::Concurrency => &CONCURRENCY,
        RankingMetric::E2e => &E2E,
        RankingMetric::Goodput => &GOODPUT,
        RankingMetric::Capacity => &CAPACITY,
        RankingMetric::TtftFirstTurn => &TTFT_FIRST_TURN,
        RankingMetric::EnergyPerMtok => &ENERGY_PER_MTOK,
        RankingMetric::CostPerMtok => &COST_PER_MTOK,
    }
}

/// The metrics whose warm timing holds a median with a CI (TTFT, decode, E2E), in that order:
/// the headline and the comparison of two campaigns show these.
pub const WARM_STATS: [&Descriptor; 3] = [&TTFT, &DECODE, &E2E];

impl Descriptor {
    pub fn higher_is_better(&self) -> bool {
        self.direction == Direction::HigherIsBetter
    }

    /// Whether `a` is strictly better than `b` (ignoring ties).
    pub fn better(&self, a: f64, b: f64) -> bool {
        match self.direction {
            Direction::HigherIsBetter => a > b,
            Direction::LowerIsBetter => a < b,
        }
    }

    /// Its field name in timing records and comparisons: `ttft_ms`, `decode_tok_s`, `e2e_ms`.
    pub fn field(&self) -> String {
        format!("{}_{}", self.key, self.unit_key)
    }

    /// The headline key of its median: `ttft_p50_ms`.
    pub fn p50_key(&self) -> String {
        format!("{}_p50_{}", self.key, self.unit_key)
    }

    /// The headline key of its median's interval: `ttft_p50_ci95_ms` (named for the 95 % it aims
    /// at; its coverage and method are under [`Descriptor::ci_key`]).
    pub fn ci95_key(&self) -> String {
        format!("{}_p50_ci95_{}", self.key, self.unit_key)
    }

    /// The headline key of its interval's coverage and method: `ttft_p50_ci`.
    pub fn ci_key(&self) -> String {
        format!("{}_p50_ci", self.key)
    }

    /// A table header of its median: `TTFT p50 ms`.
    pub fn p50_header(&self) -> String {
        format!("{} p50 {}", self.short, self.unit)
    }

    /// Its statistic in a timing record, for the metrics measured per request (TTFT, decode,
    /// E2E); None for the others and when it was not measured.
    pub fn stat(&self, t: &TimingRecord) -> Option<Stat> {
        match self.metric {
            RankingMetric::Ttft => t.ttft_ms,
            RankingMetric::DecodeTokensPerSecond => t.decode_tok_s,
            RankingMetric::E2e => t.e2e_ms,
            RankingMetric::UsableContextAndKv
            | RankingMetric::Concurrency
            | RankingMetric::Goodput
            | RankingMetric::Capacity
            | RankingMetric::TtftFirstTurn
            | RankingMetric::EnergyPerMtok
            | RankingMetric::CostPerMtok => None,
        }
    }
}

/// One arm's value on one ranking metric.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Measure {
    pub value: f64,
    /// The interval of the median (see `Stat::ci95`: 95 % only when its coverage says so); for
    /// capacity (no `stat`), the bracket [held, broken) its true value lies in (`decide::capacity`).
    pub ci95: Option<[f64; 2]>,
    /// The median's statistic, for the metrics measured per request: what the interval is.
    pub stat: Option<Stat>,
}

impl Measure {
    /// A median with its interval.
    pub fn of(s: Stat) -> Measure {
        Measure {
            value: s.p50,
            ci95: Some(s.ci95),
            stat: Some(s),
        }
    }

    /// A figure without an interval (usable context, aggregate throughput).
    pub fn plain(value: f64) -> Measure {
        Measure {
            value,
            ci95: None,
            stat: None,
        }
    }
}

/// A coverage as a percentage, without trailing zeros: 0.96875 → "96.88", 0.9375 → "93.75",
/// 0.5 → "50".
pub fn pct(c: f64) -> String {
    let s = format!("{:.2}", c * 100.0);
    s.trim_end_matches('0').trim_end_matches('.').to_string()
}

/// What kind of interval a median carries, as the documents name it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum IntervalKind {
    /// An order-statistic CI with its exact coverage (>= 95 %).
    Ci(f64),
    /// The range of fewer than 6 samples, with its coverage (< 95 %).
    Range(f64),
    /// A percentile bootstrap from an older bundle: coverage not recorded.
    Bootstrap,
}

/// The kind of `s`'s interval.
pub fn interval_kind(s: &Stat) -> IntervalKind {
    match (s.ci_method, s.ci_coverage) {
        (Some(CiMethod::Bootstrap), _) | (None, _) | (_, None) => IntervalKind::Bootstrap,
        (Some(_), Some(c)) if c >= crate::metrics::stats::TARGET_COVERAGE => IntervalKind::Ci(c),
        (Some(_), Some(c)) => IntervalKind::Range(c),
    }
}

/// The interval of `s` in words, with its unit: "96.88 % CI 49.9–51.9 ms (order statistics of
/// 6)", "range 49.9–51.9 ms (too few requests for a 95 % interval, which needs 6; the range of
/// 5 covers the median 93.75 %)", "bootstrap CI 49.9–51.9 ms (an older bundle; coverage not
/// recorded)".
pub fn interval_text(s: &Stat, unit: &str, num: impl Fn(f64) -> String) -> String {
    let (lo, hi) = (num(s.ci95[0]), num(s.ci95[1]));
    match interval_kind(s) {
        IntervalKind::Ci(c) => format!(
            "{} % CI {lo}–{hi} {unit} (order statistics of {})",
            pct(c),
            s.n
        ),
        IntervalKind::Range(c) => format!(
            "range {lo}–{hi} {unit} (too few requests for a 95 % interval, which needs {}; the range of {} covers the median {} %)",
            crate::metrics::stats::MIN_N_FOR_95,
            s.n,
            pct(c)
        ),
        IntervalKind::Bootstrap => {
            format!("bootstrap CI {lo}–{hi} {unit} (an older bundle; coverage not recorded)")
        }
    }
}

/// Why a set of medians tie by their intervals, in words: "96.88 % order-statistic CIs
/// overlap", "ranges overlap: n=2, no 95 % interval possible", "bootstrap CIs overlap
/// (coverage not recorded)".
pub fn overlap_text(stats: &[Stat]) -> String {
    let kinds: Vec<IntervalKind> = stats.iter().map(interval_kind).collect();
    let mut range_n: Vec<u64> = stats
        .iter()
        .zip(&kinds)
        .filter(|(_, k)| matches!(k, IntervalKind::Range(_)))
        .map(|(s, _)| s.n)
        .collect();
    range_n.sort();
    range_n.dedup();
    if !range_n.is_empty() {
        let ns = range_n
            .iter()
            .map(|n| n.to_string())
            .collect::<Vec<_>>()
            .join(" and ");
        let what = if kinds.iter().all(|k| matches!(k, IntervalKind::Range(_))) {
            "ranges overlap"
        } else {
            "intervals overlap"
        };
        return format!("{what}: n={ns}, no 95 % interval possible");
    }
    if kinds.contains(&IntervalKind::Bootstrap) {
        return "bootstrap CIs overlap (coverage not recorded)".into();
    }
    let cov: Vec<f64> = kinds
        .iter()
        .filter_map(|k| match k {
            IntervalKind::Ci(c) => Some(*c),
            _ => None,
        })
        .collect();
    let lo = cov.iter().copied().fold(f64::INFINITY, f64::min);
    let hi = cov.iter().copied().fold(0.0, f64::max);
    if lo == hi {
        format!("{} % order-statistic CIs overlap", pct(lo))
    } else {
        format!("order-statistic CIs ({}–{} %) overlap", pct(lo), pct(hi))
    }
}

/// The arm's timing record at concurrency `level` (1 is the warm run).
pub fn level_record(arm: &ArmResult, level: u64) -> Option<&TimingRecord> {
    if level == 1 {
        arm.warm.as_ref()
    } else {
        arm.concurrency.get(&level.to_string())
    }
}

/// The level and record the `concurrency` or `goodput` priority reads: the named `level`
/// (`concurrency_priority_level`), else the highest level the arm ran (above 1 for
/// `concurrency`, as before levels could be named; any level with goodput for `goodput`).
/// None for the other metrics.
pub fn priority_record(
    arm: &ArmResult,
    m: RankingMetric,
    level: Option<u64>,
) -> Option<(u64, &TimingRecord)> {
    if !matches!(m, RankingMetric::Concurrency | RankingMetric::Goodput) {
        return None;
    }
    if let Some(n) = level {
        return level_record(arm, n).map(|t| (n, t));
    }
    match m {
        RankingMetric::Goodput => levels(arm)
            .filter(|(_, t)| t.goodput.is_some())
            .max_by_key(|(k, _)| *k),
        _ => levels(arm).filter(|(k, _)| *k > 1).max_by_key(|(k, _)| *k),
    }
}

/// The arm's closed-loop levels with their records: the warm run as level 1, then each
/// concurrency level.
fn levels(arm: &ArmResult) -> impl Iterator<Item = (u64, &TimingRecord)> {
    let above_1 = arm
        .concurrency
        .iter()
        .filter_map(|(k, t)| Some((k.parse::<u64>().ok()?, t)));
    arm.warm.iter().map(|t| (1, t)).chain(above_1)
}

/// The metric's words with the level it is compared at, when named: "aggregate throughput at
/// C4", "goodput under the SLOs at C4".
pub fn words_at(m: RankingMetric, level: Option<u64>) -> String {
    match (m, level) {
        (RankingMetric::Concurrency, Some(n)) => format!("aggregate throughput at C{n}"),
        (RankingMetric::Goodput, Some(n)) => format!("goodput under the SLOs at C{n}"),
        (RankingMetric::EnergyPerMtok | RankingMetric::CostPerMtok, Some(n)) => {
            format!("{} at C{n}", descriptor(m).words)
        }
        _ => descriptor(m).words.to_string(),
    }
}

/// The arm's value on `m`, from its evidence, the `concurrency` and `goodput` priorities at the
/// highest level that ran (see [`measure_at`]); None when it was not measured.
pub fn measure(arm: &ArmResult, m: RankingMetric) -> Option<Measure> {
    measure_at(arm, m, None)
}

/// The arm's value on `m`, the `concurrency` and `goodput` priorities at `level` when named
/// ([`priority_record`]); None when it was not measured.
pub fn measure_at(arm: &ArmResult, m: RankingMetric, level: Option<u64>) -> Option<Measure> {
    match m {
        RankingMetric::Ttft | RankingMetric::DecodeTokensPerSecond | RankingMetric::E2e => {
            descriptor(m).stat(arm.warm.as_ref()?).map(Measure::of)
        }
        RankingMetric::UsableContextAndKv => (arm.served_context > 0).then(|| {
            Measure::plain(
                arm.served_context
                    .min(arm.reported_context.unwrap_or(u64::MAX)) as f64,
            )
        }),
        RankingMetric::Concurrency => priority_record(arm, m, level)?
            .1
            .aggregate_output_tok_s
            .map(Measure::plain),
        RankingMetric::Goodput => priority_record(arm, m, level)?
            .1
            .goodput?
            .goodput_req_s
            .map(Measure::plain),
        RankingMetric::Capacity => capacity_measure(arm),
        RankingMetric::TtftFirstTurn => first_turn_ttft(arm).map(Measure::of),
        RankingMetric::EnergyPerMtok => energy_per_mtok(arm, level).ok().map(Measure::plain),
        RankingMetric::CostPerMtok => cost_per_mtok(arm, level).ok().map(Measure::plain),
    }
}

/// The arm's capacity: the held rate (0 when no probe held), in the bracket [held, broken)
/// (unbounded above when nothing broke or the client was the limit). None without a capacity
/// step, or when the client was the limit before any probe held.
pub fn capacity_measure(arm: &ArmResult) -> Option<Measure> {
    let c = arm.capacity.as_ref()?;
    if c.held_rate_per_s.is_none() && c.client_bound_rate_per_s.is_some() {
        return None;
    }
    if c.held_rate_per_s.is_none() && c.broken_rate_per_s.is_none() {
        return None;
    }
    let held = c.held_rate_per_s.unwrap_or(0.0);
    let upper = match c.client_bound_rate_per_s {
        Some(_) => f64::INFINITY,
        None => c.broken_rate_per_s.unwrap_or(f64::INFINITY),
    };
    Some(Measure {
        value: held,
        ci95: Some([held, upper]),
        stat: None,
    })
}

/// The level and record the energy and cost priorities read: `level` when named, else the
/// highest level the arm ran (1: the warm run).
pub fn energy_record(arm: &ArmResult, level: Option<u64>) -> Option<(u64, &TimingRecord)> {
    match level {
        Some(n) => level_record(arm, n).map(|t| (n, t)),
        None => levels(arm).max_by_key(|(k, _)| *k),
    }
}

/// The step's name in the words: `warm` (level 1) or `C4`.
pub fn step_name(level: u64) -> String {
    if level == 1 {
        "warm".into()
    } else {
        format!("C{level}")
    }
}

/// J per million output tokens at the priority level; Err: why not measured.
pub fn energy_per_mtok(arm: &ArmResult, level: Option<u64>) -> Result<f64, String> {
    let (k, t) = energy_record(arm, level).ok_or("the arm ran no timed step at that level")?;
    let e = t.energy.as_ref().ok_or_else(|| {
        format!(
            "{}'s step file records no energy (an older bundle)",
            step_name(k)
        )
    })?;
    e.per_mtok_j.ok_or_else(|| {
        e.not_measured
            .clone()
            .unwrap_or_else(|| "no energy figure".into())
    })
}

/// The lane's price per million output tokens at the priority level; Err: why not measured.
pub fn cost_per_mtok(arm: &ArmResult, level: Option<u64>) -> Result<f64, String> {
    let p = arm.price.as_ref().ok_or("its lane has no cost_per_hour")?;
    let (k, t) = energy_record(arm, level).ok_or("the arm ran no timed step at that level")?;
    t.aggregate_output_tok_s
        .and_then(|x| p.per_mtok(x))
        .ok_or_else(|| format!("no output throughput was measured at {}", step_name(k)))
}

/// The warm run's cache reuse and turns, when the bundle was read with them.
pub fn warm_reuse(arm: &ArmResult) -> Option<&StepReuse> {
    arm.reuse.iter().find(|s| s.step == "warm")
}

/// The median TTFT of the warm run's first conversation turns, with its interval; None without
/// turns in the warm run.
pub fn first_turn_ttft(arm: &ArmResult) -> Option<Stat> {
    Some(Distribution::from_samples(&warm_reuse(arm)?.turn(1)?.ttft_ms, 0)?.median_stat())
}

/// A number the way the reports print it: one decimal below 10,000, none above.
pub fn num(x: f64) -> String {
    if x.abs() >= 10_000.0 {
        format!("{x:.0}")
    } else {
        format!("{x:.1}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_metric_has_its_descriptor_and_the_keys_the_documents_use() {
        for m in RankingMetric::ALL {
            assert_eq!(descriptor(m).metric, m);
        }
        assert_eq!(TTFT.field(), "ttft_ms");
        assert_eq!(DECODE.field(), "decode_tok_s");
        assert_eq!(E2E.field(), "e2e_ms");
        assert_eq!(TTFT.p50_key(), "ttft_p50_ms");
        assert_eq!(DECODE.ci95_key(), "decode_p50_ci95_tok_s");
        assert_eq!(DECODE.p50_header(), "decode p50 tok/s");
        assert!(TTFT.better(1.0, 2.0) && DECODE.better(2.0, 1.0));
    }
}
