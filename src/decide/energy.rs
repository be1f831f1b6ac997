//! Energy and cost per million output tokens as ranking figures, and their words for the reason,
//! the arm decisions and the reports. Both are read at the priority level (the named
//! `concurrency_priority_level`, else the highest level the arm ran, the warm run being level 1):
//! energy from the step's GPU readings (`evidence::energy`), cost from the lane's price over the
//! step's aggregate output throughput. Not measured is None with its reason, never 0: such an arm
//! is unranked on the metric (`decide::rank` compares the arms that have it). The figures are
//! read in `decide::metric` (beside the other measures); this file has their words.

pub use super::metric::{
    cost_per_mtok as cost, energy_per_mtok as energy, energy_record as record,
};
use super::metric::{descriptor, num, step_name};
use crate::evidence::result::{ArmResult, ArmStatus, CampaignResult};
use crate::evidence::RankingMetric;
use serde::{Deserialize, Serialize};

/// The price per million output tokens at the capacity rate: the held rate × the held probe's
/// mean output tokens per request, priced by the lane; Err: why not measured (None without a
/// capacity step).
pub fn capacity_cost(arm: &ArmResult) -> Option<Result<f64, String>> {
    let c = arm.capacity.as_ref()?;
    Some((|| {
        let p = arm.price.as_ref().ok_or("its lane has no cost_per_hour")?;
        let held = c.held_rate_per_s.ok_or("no probed rate held")?;
        let probe = c
            .probes
            .iter()
            .rev()
            .find(|x| x.outcome == "held" && x.rate_per_s == held)
            .ok_or("the held probe is not recorded")?;
        let tokens = probe
            .output_tokens
            .filter(|_| probe.requests_ok > 0)
            .ok_or("the held probe's output tokens were not counted")?;
        let tok_s = held * tokens as f64 / probe.requests_ok as f64;
        p.per_mtok(tok_s)
            .ok_or_else(|| "the held probe produced no output token".to_string())
    })())
}

/// A price the way the reports print it: three decimals (cents and below matter per Mtok).
pub fn money(x: f64) -> String {
    format!("{x:.3}")
}

/// [`value_text`] for the energy and cost metrics; None for the others.
pub fn text_of(arm: &ArmResult, m: RankingMetric, level: Option<u64>) -> Option<String> {
    matches!(m, RankingMetric::EnergyPerMtok | RankingMetric::CostPerMtok)
        .then(|| value_text(arm, m, level))
}

/// The arm's figure in words, with what it rests on: "906038 J/Mtok at C4 (724.8 W mean over
/// 1.000 s; idle baseline 135.3 W, not subtracted)", "1.389 USD/Mtok at C4 (2.5 USD/h at 500.0
/// tok/s)", "not measured (GPU GPU-b reported no power draw)".
pub fn value_text(arm: &ArmResult, m: RankingMetric, level: Option<u64>) -> String {
    let at = record(arm, level)
        .map(|(k, _)| format!(" at {}", step_name(k)))
        .unwrap_or_default();
    match m {
        RankingMetric::EnergyPerMtok => match energy(arm, level) {
            Ok(v) => {
                let e = record(arm, level).and_then(|(_, t)| t.energy.as_ref());
                let power = e.and_then(|e| e.mean_power_w).map(num).unwrap_or_default();
                let window = e.map(|e| format!("{:.3}", e.window_s)).unwrap_or_default();
                let idle = match e.and_then(|e| e.idle_power_w) {
                    Some(w) => format!("idle baseline {} W, not subtracted", num(w)),
                    None => "idle baseline power not measured".into(),
                };
                format!(
                    "{} {}{at} ({power} W mean over {window} s; {idle})",
                    num(v),
                    descriptor(m).unit
                )
            }
            Err(why) => format!("not measured ({why})"),
        },
        RankingMetric::CostPerMtok => match cost(arm, level) {
            Ok(v) => {
                let p = arm.price.clone().unwrap_or_default();
                let tok_s = record(arm, level)
                    .and_then(|(_, t)| t.aggregate_output_tok_s)
                    .unwrap_or(0.0);
                format!(
                    "{} {}/Mtok{at} ({} {}/h at {} tok/s)",
                    money(v),
                    p.currency,
                    num(p.cost_per_hour),
                    p.currency,
                    num(tok_s)
                )
            }
            Err(why) => format!("not measured ({why})"),
        },
        _ => String::new(),
    }
}

/// A limitation per arm not measured on a ranked energy or cost priority: it was not ranked on
/// it ("cand's GPU energy per million output tokens was not measured (…), so it was not ranked
/// on it.").
pub fn limitations(r: &CampaignResult, prios: &[RankingMetric]) -> Vec<String> {
    let lvl = r.workload.concurrency_priority_level;
    let mut out = Vec::new();
    for &m in prios {
        let why = |a: &ArmResult| match m {
            RankingMetric::EnergyPerMtok => energy(a, lvl).err(),
            RankingMetric::CostPerMtok => cost(a, lvl).err(),
            _ => None,
        };
        for a in r.arms.iter().filter(|a| a.status == ArmStatus::Completed) {
            if let Some(w) = why(a) {
                out.push(format!(
                    "{}'s {} was not measured ({w}), so it was not ranked on it.",
                    a.id,
                    descriptor(m).words
                ));
            }
        }
    }
    out
}

/// One arm's energy and cost figures, as `decision-summary.json` (`energy_cost`) and the reports
/// carry them: `null` and a reason where not measured, never 0.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EnergyCost {
    pub arm: String,
    /// The step the figures are read at (`warm`, `C4`); None when the arm ran none.
    pub step: Option<String>,
    pub energy_per_mtok_j: Option<f64>,
    pub energy_per_request_j: Option<f64>,
    pub mean_power_w: Option<f64>,
    /// The idle baseline's draw of the same GPUs, stated beside (never subtracted).
    pub idle_power_w: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub energy_not_measured: Option<String>,
    pub cost_per_hour: Option<f64>,
    pub currency: Option<String>,
    pub cost_per_mtok: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cost_not_measured: Option<String>,
    /// At the capacity rate (held rate × mean output tokens); absent without a capacity step.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cost_per_mtok_at_capacity: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub capacity_cost_not_measured: Option<String>,
}

/// The arm's figures at the priority level.
pub fn figures(arm: &ArmResult, level: Option<u64>) -> EnergyCost {
    let rec = record(arm, level);
    let e = rec.and_then(|(_, t)| t.energy.as_ref());
    let (energy, cost) = (energy(arm, level), cost(arm, level));
    let cap = capacity_cost(arm);
    EnergyCost {
        arm: arm.id.clone(),
        step: rec.map(|(k, _)| step_name(k)),
        energy_per_mtok_j: energy.as_ref().ok().copied(),
        energy_per_request_j: e.and_then(|e| e.per_request_j),
        mean_power_w: e.and_then(|e| e.mean_power_w),
        idle_power_w: e.and_then(|e| e.idle_power_w),
        energy_not_measured: energy.err(),
        cost_per_hour: arm.price.as_ref().map(|p| p.cost_per_hour),
        currency: arm.price.as_ref().map(|p| p.currency.clone()),
        cost_per_mtok: cost.as_ref().ok().copied(),
        cost_not_measured: cost.err(),
        cost_per_mtok_at_capacity: cap.as_ref().and_then(|c| c.as_ref().ok().copied()),
        capacity_cost_not_measured: cap.and_then(|c| c.err()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::decide::metric::measure_at as measure;
    use crate::evidence::energy::{Price, StepEnergy};
    use crate::evidence::result::TimingRecord;
    use crate::evidence::result::{CapacityProbeRecord, CapacityRecord};

    fn arm(per_mtok: Option<f64>, tok_s: f64, price: bool) -> ArmResult {
        let mut a = ArmResult {
            id: "a".into(),
            warm: Some(TimingRecord {
                aggregate_output_tok_s: Some(tok_s / 2.0),
                ..Default::default()
            }),
            price: price.then(|| Price {
                cost_per_hour: 2.5,
                currency: "USD".into(),
            }),
            ..Default::default()
        };
        a.concurrency.insert(
            "4".into(),
            TimingRecord {
                concurrency: 4,
                aggregate_output_tok_s: Some(tok_s),
                energy: Some(StepEnergy {
                    window_s: 2.0,
                    energy_j: per_mtok.map(|_| 1449.66),
                    mean_power_w: per_mtok.map(|_| 724.83),
                    per_mtok_j: per_mtok,
                    idle_power_w: Some(135.33),
                    not_measured: per_mtok
                        .is_none()
                        .then(|| "GPU GPU-b reported no power draw".into()),
                    ..Default::default()
                }),
                ..Default::default()
            },
        );
        a
    }

    #[test]
    fn energy_and_cost_are_read_at_the_priority_level_and_say_why_when_not_measured() {
        let a = arm(Some(906_037.5), 500.0, true);
        // The highest level it ran: C4.
        assert_eq!(energy(&a, None), Ok(906_037.5));
        assert!((cost(&a, None).unwrap() - 1.388_888_888_888_889).abs() < 1e-12);
        // At the warm run (named level 1) no energy was recorded; its throughput is 250 tok/s.
        assert!(energy(&a, Some(1))
            .unwrap_err()
            .contains("records no energy"));
        assert!((cost(&a, Some(1)).unwrap() - 2.777_777_777_777_778).abs() < 1e-12);
        let t = value_text(&a, RankingMetric::EnergyPerMtok, None);
        assert_eq!(
            t,
            "906038 J/Mtok at C4 (724.8 W mean over 2.000 s; idle baseline 135.3 W, not subtracted)"
        );
        let t = value_text(&a, RankingMetric::CostPerMtok, None);
        assert_eq!(t, "1.389 USD/Mtok at C4 (2.5 USD/h at 500.0 tok/s)");

        let b = arm(None, 500.0, false);
        assert_eq!(measure(&b, RankingMetric::EnergyPerMtok, None), None);
        assert_eq!(measure(&b, RankingMetric::CostPerMtok, None), None);
        assert_eq!(
            value_text(&b, RankingMetric::EnergyPerMtok, None),
            "not measured (GPU GPU-b reported no power draw)"
        );
        assert_eq!(
            value_text(&b, RankingMetric::CostPerMtok, None),
            "not measured (its lane has no cost_per_hour)"
        );
        let f = figures(&b, None);
        let j = serde_json::to_value(&f).unwrap();
        assert!(j["energy_per_mtok_j"].is_null() && j["cost_per_mtok"].is_null());
        assert_eq!(j["step"], "C4");
        assert!(j.get("cost_per_mtok_at_capacity").is_none());
    }

    #[test]
    fn cost_at_the_capacity_rate_is_the_held_rate_times_the_mean_output() {
        let mut a = arm(Some(1.0), 500.0, true);
        let probe = |rate: f64, outcome: &str, ok: u64, tokens: Option<u64>| CapacityProbeRecord {
            rate_per_s: rate,
            outcome: outcome.into(),
            requests_ok: ok,
            output_tokens: tokens,
            ..Default::default()
        };
        a.capacity = Some(CapacityRecord {
            held_rate_per_s: Some(4.0),
            broken_rate_per_s: Some(8.0),
            probes: vec![
                probe(2.0, "held", 10, Some(1000)),
                probe(4.0, "held", 20, Some(2400)),
                probe(8.0, "broken", 20, Some(2400)),
            ],
            ..Default::default()
        });
        // 4 req/s × 120 tokens = 480 tok/s; 2.5 / 3600 / 480 × 10⁶ = 1.4467… USD.
        let c = capacity_cost(&a).unwrap().unwrap();
        assert!((c - 2.5 / 3600.0 / 480.0 * 1e6).abs() < 1e-12, "{c}");
        assert_eq!(figures(&a, None).cost_per_mtok_at_capacity, Some(c));
        a.capacity.as_mut().unwrap().probes[1].output_tokens = None;
        assert_eq!(
            capacity_cost(&a).unwrap().unwrap_err(),
            "the held probe's output tokens were not counted"
        );
        a.price = None;
        assert!(figures(&a, None)
            .capacity_cost_not_measured
            .unwrap()
            .contains("no cost_per_hour"));
    }
}
