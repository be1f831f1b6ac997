//! The card-to-card spread in the ranking (docs/fleet.md, docs/verdict.md "Ties"): two arms that
//! ran on different lanes of a multi-lane campaign, both lanes with control figures
//! (`CampaignResult::lane_spread`), tie on a metric when their margin is within the spread the
//! control measured on that metric: `|a − b| / min(a, b) ≤ spread`, the spread's own measure.
//! Arms of one lane, and every one-lane campaign, compare by the tie rule alone.

use crate::evidence::lane_spread::LaneSpread;
use crate::evidence::result::CampaignResult;
use crate::evidence::RankingMetric;

/// Which lane each arm ran on, and the spread between them (none: nothing changes).
#[derive(Default)]
pub struct Cross<'a> {
    spread: Option<&'a LaneSpread>,
    /// (arm, lane)
    lanes: Vec<(&'a str, &'a str)>,
}

impl<'a> Cross<'a> {
    /// No spread: the tie rule alone.
    pub fn none() -> Cross<'a> {
        Cross::default()
    }

    pub fn of(r: &'a CampaignResult) -> Cross<'a> {
        Cross {
            spread: r.lane_spread.as_ref(),
            lanes: r
                .lanes
                .iter()
                .flat_map(|l| l.arms.iter().map(move |a| (a.as_str(), l.id.as_str())))
                .collect(),
        }
    }

    fn lane(&self, arm: &str) -> Option<&'a str> {
        self.lanes.iter().find(|(a, _)| *a == arm).map(|(_, l)| *l)
    }

    /// Whether arms `a` (value `x`) and `b` (value `y`) ran on two lanes that both have control
    /// figures and their margin on `m` is within the spread measured on `m`.
    pub fn within(&self, m: RankingMetric, a: &str, b: &str, x: f64, y: f64) -> bool {
        let (Some(s), Some(la), Some(lb)) = (self.spread, self.lane(a), self.lane(b)) else {
            return false;
        };
        let Some(ms) = s.spread.get(&m) else {
            return false;
        };
        la != lb && s.has_lane(la) && s.has_lane(lb) && margin_within(x, y, ms.spread)
    }
}

/// The spread's own measure: `|x − y| / min(|x|, |y|) ≤ spread` (never for a zero value).
pub fn margin_within(x: f64, y: f64, spread: f64) -> bool {
    let lo = x.abs().min(y.abs());
    lo > 0.0 && (x - y).abs() / lo <= spread
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::evidence::lane_spread::{LaneControl, LaneSpread};
    use crate::evidence::result::{ArmResult, ArmStatus, LaneRun, Stat, TimingRecord};

    fn stat(p50: f64) -> Stat {
        Stat {
            p50,
            ci95: [p50 * 0.999, p50 * 1.001],
            p95: p50,
            n: 6,
            ..Default::default()
        }
    }

    fn arm(id: &str, ttft: f64) -> ArmResult {
        ArmResult {
            id: id.into(),
            status: ArmStatus::Completed,
            warm: Some(TimingRecord {
                ttft_ms: Some(stat(ttft)),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    fn result(spread: bool) -> CampaignResult {
        let mut r = CampaignResult::new("c");
        r.workload.ranking_priority = vec![RankingMetric::Ttft];
        r.arms = vec![arm("fast", 42.0), arm("slow", 43.2), arm("near", 44.0)];
        let lane = |id: &str, arms: &[&str]| LaneRun {
            id: id.into(),
            arms: arms.iter().map(|a| a.to_string()).collect(),
            ..Default::default()
        };
        r.lanes = vec![lane("g0", &["fast", "near"]), lane("g1", &["slow"])];
        if spread {
            let c = |l: &str, v: f64| LaneControl {
                lane: l.into(),
                arm: "inc".into(),
                ttft_ms: Some(stat(v)),
                ..Default::default()
            };
            r.lane_spread = Some(LaneSpread::of(
                "inc",
                vec![c("g0", 60.0), c("g1", 64.8)],
                vec![],
            ));
        }
        r
    }

    #[test]
    fn arms_of_different_lanes_tie_within_the_spread_and_arms_of_one_lane_do_not() {
        let r = result(true);
        let x = Cross::of(&r);
        let m = RankingMetric::Ttft;
        assert!(x.within(m, "fast", "slow", 42.0, 43.2));
        // One lane: the tie rule alone.
        assert!(!x.within(m, "fast", "near", 42.0, 44.0));
        // Beyond the spread (8 %): 42 against 46 is 9.5 %.
        assert!(!x.within(m, "fast", "slow", 42.0, 46.0));
        let policy = crate::evidence::Policy::default();
        let v = super::super::decide(&r, &policy);
        assert_eq!(v.ranking[0], "fast");
        assert!(
            v.reason
                .contains("within card-to-card spread (8.0 % across 2 lanes)"),
            "{}",
            v.reason
        );
        assert_eq!(
            super::super::rank::spread_words(&r, m, "fast", &["fast".into(), "slow".into()], 0.0),
            Some((
                "within card-to-card spread (8.0 % across 2 lanes)".into(),
                true
            ))
        );
        // With a tolerance that ties them too, the spread's words are added, not alone.
        let both = super::super::rank::with_spread(
            "within 5% tolerance".into(),
            &r,
            m,
            "fast",
            &["fast".into(), "slow".into()],
            0.05,
        );
        assert_eq!(
            both,
            "within 5% tolerance; within card-to-card spread (8.0 % across 2 lanes)"
        );
        // Without a control nothing changes: fast wins on TTFT outright.
        let r = result(false);
        assert!(!Cross::of(&r).within(m, "fast", "slow", 42.0, 43.2));
        let v = super::super::decide(&r, &policy);
        assert!(!v.reason.contains("card-to-card"), "{}", v.reason);
        assert_eq!(v.decided_by, Some(0));
    }
}
