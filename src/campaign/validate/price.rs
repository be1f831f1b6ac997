//! A lane's price (`cost_per_hour`, `currency`, in `[lane]` or each `[[lanes]]` table), and what
//! the `energy_per_mtok` and `cost_per_mtok` priorities need: GPUs the lane samples, a price on
//! every lane in one currency. Refused at load when the figure could never be measured.

use super::common::p;
use crate::campaign::diag::{FieldPath, Reporter};
use crate::campaign::spec::{Campaign, Lane};
use crate::evidence::RankingMetric;

/// The highest price per hour taken (a typo guard: 10⁹ of any currency an hour).
const MAX_COST_PER_HOUR: f64 = 1e9;
/// The longest currency label.
const MAX_CURRENCY: usize = 32;

/// The checks of one lane's price (`at` = `lane` or `lanes[i]`).
pub(super) fn lane_price(l: &Lane, at: &FieldPath, r: &mut Reporter) {
    if let Some(c) = l.cost_per_hour {
        if !c.is_finite() || c <= 0.0 || c > MAX_COST_PER_HOUR {
            r.error(
                &at.key("cost_per_hour"),
                format!("{c} is not a price per hour (it must be above 0 and at most {MAX_COST_PER_HOUR:e})"),
                "give what an hour of the lane costs, e.g. cost_per_hour = 2.5, or leave it out when the lane has no price",
            );
        }
        if l.currency.is_none() {
            r.error(
                &at.key("cost_per_hour"),
                "a price without its currency",
                "add currency = \"USD\" (any label) beside cost_per_hour",
            );
        }
    }
    if let Some(cur) = &l.currency {
        if cur.trim().is_empty() || cur.len() > MAX_CURRENCY || cur.chars().any(char::is_control) {
            r.error(
                &at.key("currency"),
                format!("`{cur}` is not a currency label"),
                format!("give a label of 1 to {MAX_CURRENCY} characters, e.g. \"USD\""),
            );
        }
        if l.cost_per_hour.is_none() {
            r.error(
                &at.key("currency"),
                "a currency without a price",
                "add cost_per_hour = <price of an hour> beside it, or remove currency",
            );
        }
    }
}

/// `energy_per_mtok` needs the lanes' GPUs (only GPUs a lane names are sampled); `cost_per_mtok`
/// a price on every lane, all in one currency (prices in two currencies do not compare).
pub(super) fn ranking(c: &Campaign, r: &mut Reporter) {
    let at = p("workload.ranking_priority");
    let prios = &c.workload.ranking_priority;
    let lanes = c.lanes();
    let table = |id: &str| {
        if c.fleet.is_empty() {
            "[lane]".to_string()
        } else {
            format!("the [[lanes]] table `{id}`")
        }
    };
    if prios.contains(&RankingMetric::EnergyPerMtok) {
        if let Some(l) = lanes.iter().find(|l| l.lane.gpus.is_empty()) {
            r.error(
                &at,
                format!(
                    "`energy_per_mtok` ranks by GPU energy, but {} names no GPU, and only the GPUs a lane names are sampled",
                    table(&l.id)
                ),
                "list the lane's GPU UUIDs in `gpus` (as `nvidia-smi -L` prints them), or remove \"energy_per_mtok\"",
            );
        }
    }
    if prios.contains(&RankingMetric::CostPerMtok) {
        if let Some(l) = lanes.iter().find(|l| l.lane.cost_per_hour.is_none()) {
            r.error(
                &at,
                format!(
                    "`cost_per_mtok` ranks by the lane's price per million output tokens, but {} has no cost_per_hour",
                    table(&l.id)
                ),
                "add cost_per_hour = <price of an hour> and currency = \"USD\" to every lane, or remove \"cost_per_mtok\"",
            );
        } else {
            let mut cur: Vec<&str> = lanes
                .iter()
                .filter_map(|l| l.lane.currency.as_deref())
                .collect();
            cur.sort();
            cur.dedup();
            if cur.len() > 1 {
                r.error(
                    &at,
                    format!(
                        "`cost_per_mtok` compares prices, but the lanes' currencies differ ({})",
                        cur.join(", ")
                    ),
                    "give every lane's cost_per_hour in one currency",
                );
            }
        }
    }
}
