//! One descriptor per ranking metric: what it is called, its unit, which direction is better and
//! how it is measured from an arm's evidence. The ranking, the tie rule and the verdict's words
//! (`decide/`) and the documents' headline, labels and comparison (`report/`) all read these, so
//! a metric's facts live in one place.

use crate::evidence::result::{ArmResult, Stat, TimingRecord};
use crate::evidence::RankingMetric;

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
    measured: "median time to first token of the warm requests at concurrency 1, with the 95% CI of the median",
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
        "median decode speed of the warm requests at concurrency 1, with the 95% CI of the median",
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
    measured: "median end-to-end latency of the warm requests at concurrency 1, with the 95% CI of the median",
};

/// The descriptor of `m`.
pub fn descriptor(m: RankingMetric) -> &'static Descriptor {
    match m {
        RankingMetric::Ttft => &TTFT,
        RankingMetric::DecodeTokensPerSecond => &DECODE,
        RankingMetric::UsableContextAndKv => &USABLE_CONTEXT,
        RankingMetric::Concurrency => &CONCURRENCY,
        RankingMetric::E2e => &E2E,
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

    /// The headline key of its median's 95% CI: `ttft_p50_ci95_ms`.
    pub fn ci95_key(&self) -> String {
        format!("{}_p50_ci95_{}", self.key, self.unit_key)
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
            RankingMetric::UsableContextAndKv | RankingMetric::Concurrency => None,
        }
    }
}

/// One arm's value on one ranking metric.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Measure {
    pub value: f64,
    pub ci95: Option<[f64; 2]>,
}

/// The arm's value on `m`, from its evidence; None when it was not measured.
pub fn measure(arm: &ArmResult, m: RankingMetric) -> Option<Measure> {
    match m {
        RankingMetric::Ttft | RankingMetric::DecodeTokensPerSecond | RankingMetric::E2e => {
            descriptor(m).stat(arm.warm.as_ref()?).map(|s| Measure {
                value: s.p50,
                ci95: Some(s.ci95),
            })
        }
        RankingMetric::UsableContextAndKv => (arm.served_context > 0).then(|| Measure {
            value: arm
                .served_context
                .min(arm.reported_context.unwrap_or(u64::MAX)) as f64,
            ci95: None,
        }),
        RankingMetric::Concurrency => {
            let (_, t) = arm
                .concurrency
                .iter()
                .filter_map(|(k, t)| Some((k.parse::<u64>().ok()?, t)))
                .max_by_key(|(k, _)| *k)?;
            t.aggregate_output_tok_s.map(|v| Measure {
                value: v,
                ci95: None,
            })
        }
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
