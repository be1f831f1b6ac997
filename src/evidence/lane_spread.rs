//! `lane-spread.json`: the card-to-card spread of a multi-lane campaign (docs/fleet.md), measured
//! by one control recipe timed on every lane. Pure: the figures are copied from each control's
//! warm c1 timing record, and the spread is computed from them here (the types are in
//! `result.rs`, beside the result that holds them).
//!
//! Per ranking metric measured per request (TTFT, decode, E2E), a lane's control figure is the
//! median of its warm c1 step with that median's interval; the spread is `(max − min) / min` of
//! the lanes' medians (a lane 8 % slower on every delay gives 8 %). A lane is named when the
//! median of all lanes' medians lies outside its own interval and 1 % or more from its median.

pub use super::result::{LaneControl, LaneSpread, MetricSpread};
use super::result::{Stat, TimingRecord};
use super::RankingMetric;
use std::collections::BTreeMap;

/// The file, at the top of a multi-lane bundle.
pub const FILE: &str = "lane-spread.json";
pub const SCHEMA: &str = "bakeoff.lane-spread/v1";

/// The least difference from the lanes' median that names a lane: beyond its interval alone is
/// not enough where intervals are microseconds wide (a reference engine's; a seed replay over
/// four lanes had lanes 0.03 % apart, each outside the others' intervals), and a difference under
/// 1 % decides no verdict.
pub const MIN_OUTLIER: f64 = 0.01;

/// The metrics a control measures (a warm c1 step's per-request medians).
pub const METRICS: [RankingMetric; 3] = [
    RankingMetric::Ttft,
    RankingMetric::DecodeTokensPerSecond,
    RankingMetric::E2e,
];

impl LaneControl {
    /// From a control's warm c1 record.
    pub fn of(lane: &str, arm: &str, warm: &TimingRecord) -> LaneControl {
        LaneControl {
            lane: lane.into(),
            arm: arm.into(),
            evidence: warm.evidence.clone(),
            ttft_ms: warm.ttft_ms,
            decode_tok_s: warm.decode_tok_s,
            e2e_ms: warm.e2e_ms,
        }
    }

    pub fn stat(&self, m: RankingMetric) -> Option<Stat> {
        match m {
            RankingMetric::Ttft => self.ttft_ms,
            RankingMetric::DecodeTokensPerSecond => self.decode_tok_s,
            RankingMetric::E2e => self.e2e_ms,
            _ => None,
        }
    }
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

fn unit(m: RankingMetric) -> &'static str {
    match m {
        RankingMetric::DecodeTokensPerSecond => "tok/s",
        _ => "ms",
    }
}

impl LaneSpread {
    /// The spread of `lanes`' controls of arm `control`; `missing`: lanes without figures.
    pub fn of(control: &str, lanes: Vec<LaneControl>, missing: Vec<String>) -> LaneSpread {
        let mut spread = BTreeMap::new();
        let mut beyond: Vec<(String, Vec<String>)> = Vec::new();
        for m in METRICS {
            let vals: Vec<(&str, Stat)> = lanes
                .iter()
                .filter_map(|l| Some((l.lane.as_str(), l.stat(m)?)))
                .filter(|(_, s)| s.p50 > 0.0)
                .collect();
            if vals.len() < 2 {
                continue;
            }
            let lo = vals.iter().min_by(|a, b| a.1.p50.total_cmp(&b.1.p50));
            let hi = vals.iter().max_by(|a, b| a.1.p50.total_cmp(&b.1.p50));
            let (Some(lo), Some(hi)) = (lo, hi) else {
                continue;
            };
            spread.insert(
                m,
                MetricSpread {
                    spread: (hi.1.p50 - lo.1.p50) / lo.1.p50,
                    lanes: vals.len(),
                    lowest: lo.0.into(),
                    highest: hi.0.into(),
                },
            );
            // The lanes' median: with three lanes or more, one odd lane stands out against it;
            // with two, it lies between them and names both (which one is odd cannot be told).
            let others = median(vals.iter().map(|(_, x)| x.p50).collect());
            for (lane, s) in &vals {
                let beyond_interval = others < s.ci95[0] || others > s.ci95[1];
                if beyond_interval && ((s.p50 - others) / others).abs() >= MIN_OUTLIER {
                    let line = format!(
                        "{} {:.2} {u} (interval {:.2}–{:.2}) against the lanes' median {:.2} {u}, {:+.1} %",
                        m.as_str(),
                        s.p50,
                        s.ci95[0],
                        s.ci95[1],
                        others,
                        (s.p50 - others) / others * 100.0,
                        u = unit(m)
                    );
                    match beyond.iter_mut().find(|(l, _)| l == lane) {
                        Some((_, v)) => v.push(line),
                        None => beyond.push((lane.to_string(), vec![line])),
                    }
                }
            }
        }
        let outliers = beyond
            .into_iter()
            .map(|(lane, v)| {
                format!(
                    "Lane {lane}'s control ({control}) differs from the other lanes beyond its own interval: {}.",
                    v.join("; ")
                )
            })
            .collect();
        LaneSpread {
            schema: SCHEMA.into(),
            control: control.into(),
            lanes,
            spread,
            outliers,
            missing,
        }
    }

    /// The lane of `arm`'s control figures, when it has some.
    pub fn has_lane(&self, lane: &str) -> bool {
        self.lanes.iter().any(|l| l.lane == lane)
    }

    /// "within card-to-card spread (8.0 % across 2 lanes)" for `m`, when measured.
    pub fn words(&self, m: RankingMetric) -> Option<String> {
        let s = self.spread.get(&m)?;
        Some(format!(
            "within card-to-card spread ({:.1} % across {} lanes)",
            s.spread * 100.0,
            s.lanes
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stat(p50: f64) -> Stat {
        Stat {
            p50,
            ci95: [p50 * 0.995, p50 * 1.005],
            p95: p50,
            n: 6,
            ..Default::default()
        }
    }

    fn control(lane: &str, ttft: f64, decode: f64) -> LaneControl {
        LaneControl {
            lane: lane.into(),
            arm: "inc".into(),
            evidence: format!("lanes/{lane}/inc-timing-64-c1-warm.json"),
            ttft_ms: Some(stat(ttft)),
            decode_tok_s: Some(stat(decode)),
            e2e_ms: None,
        }
    }

    #[test]
    fn a_lane_eight_percent_slower_is_an_eight_percent_spread_and_named() {
        let s = LaneSpread::of(
            "inc",
            vec![
                control("g0", 60.0, 100.0),
                control("g1", 64.8, 100.0 / 1.08),
                control("g2", 60.1, 99.9),
            ],
            vec![],
        );
        let t = &s.spread[&RankingMetric::Ttft];
        assert!((t.spread - 0.08).abs() < 1e-9, "{t:?}");
        assert_eq!(
            (t.lanes, t.lowest.as_str(), t.highest.as_str()),
            (3, "g0", "g1")
        );
        let d = &s.spread[&RankingMetric::DecodeTokensPerSecond];
        assert!((d.spread - 0.08).abs() < 1e-9, "{d:?}");
        assert!(!s.spread.contains_key(&RankingMetric::E2e));
        assert_eq!(s.outliers.len(), 1, "{:?}", s.outliers);
        assert!(s.outliers[0].starts_with("Lane g1's control (inc) differs"));
        assert!(s.outliers[0].contains("ttft 64.80 ms"), "{}", s.outliers[0]);
        assert_eq!(
            s.words(RankingMetric::Ttft).unwrap(),
            "within card-to-card spread (8.0 % across 3 lanes)"
        );
        assert!(s.words(RankingMetric::E2e).is_none());
    }

    #[test]
    fn lanes_within_their_intervals_are_not_named() {
        let s = LaneSpread::of(
            "inc",
            vec![control("g0", 60.0, 100.0), control("g1", 60.2, 100.1)],
            vec![],
        );
        assert!(s.outliers.is_empty(), "{:?}", s.outliers);
        assert!(s.spread[&RankingMetric::Ttft].spread < 0.004);
    }

    #[test]
    fn a_lane_beyond_a_narrow_interval_but_under_one_percent_is_not_named() {
        // Intervals of ±0.001 %: g1 is 0.5 % off the lanes' median, outside its interval, and
        // still not named; g2 at 2 % is.
        let narrow = |lane: &str, ttft: f64| {
            let mut c = control(lane, ttft, 100.0);
            c.ttft_ms = Some(Stat {
                ci95: [ttft * 0.99999, ttft * 1.00001],
                ..stat(ttft)
            });
            c.decode_tok_s = None;
            c
        };
        let s = LaneSpread::of(
            "inc",
            vec![
                narrow("g0", 100.0),
                narrow("g1", 100.5),
                narrow("g2", 102.0),
                narrow("g3", 100.0),
            ],
            vec![],
        );
        assert_eq!(s.outliers.len(), 1, "{:?}", s.outliers);
        assert!(s.outliers[0].starts_with("Lane g2's"), "{:?}", s.outliers);
    }
}
