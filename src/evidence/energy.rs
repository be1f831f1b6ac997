//! Energy of a timed step, from the GPU power readings the sampler took during it, and the price
//! of a lane's time. Plain data and pure functions: `run` computes a step's [`StepEnergy`] from
//! the step file it writes ([`from_step_file`]) and `verify` recomputes it from the same file, so
//! an edited figure in `campaign-result.json` cannot decide (`evidence::crosscheck`).
//!
//! The integral (docs/metrics.md, *Energy per token*): per GPU, the power readings joined by
//! straight lines (the trapezoid rule) over the step's measured window, first send to last
//! completion, the window its output throughput is measured over. A reading pair that straddles
//! an edge of the window is cut at the edge by interpolation. Before the first reading or after
//! the last one the nearest reading's power is held (that time is `held_s`); a gap between two
//! readings is bridged by the straight line (the longest is `longest_gap_s`). A GPU whose readings
//! cover less than half of the window, or that reported no power at all, is not measured, and
//! then neither is the step's total. The idle baseline's power is stated beside the figures,
//! never subtracted from them.

use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::collections::BTreeMap;

/// One GPU's energy over a step's window.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct GpuEnergy {
    pub uuid: String,
    /// Power readings taken inside the window.
    pub readings: u64,
    /// Joules over the window; None when not measured.
    pub energy_j: Option<f64>,
    pub mean_power_w: Option<f64>,
    /// This GPU's draw in the idle baseline, W (stated, never subtracted); None without a reading.
    pub idle_power_w: Option<f64>,
    /// Seconds of the window before the first or after the last reading (the nearest reading's
    /// power held there).
    pub held_s: f64,
    /// The longest stretch of the window between two readings (or a reading and an edge), s.
    pub longest_gap_s: f64,
}

/// A timed step's energy: per GPU and in total, per request and per million output tokens.
/// Figures are None (JSON `null`) when not measured, never 0; `not_measured` then says why.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct StepEnergy {
    /// The measured window (first send to last completion of the measured requests), seconds.
    pub window_s: f64,
    /// Successful measured requests, and the completion tokens they reported.
    pub requests: u64,
    pub output_tokens: u64,
    /// Per GPU, in the order first read.
    pub gpus: Vec<GpuEnergy>,
    /// The sum over the GPUs, J.
    pub energy_j: Option<f64>,
    /// `energy_j / window_s`, W.
    pub mean_power_w: Option<f64>,
    /// `energy_j / requests`, J.
    pub per_request_j: Option<f64>,
    /// `energy_j / output_tokens × 10⁶`, J per million output tokens (the ranked figure).
    pub per_mtok_j: Option<f64>,
    /// The GPUs' idle-baseline draw summed, W; None unless every GPU has one.
    pub idle_power_w: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub not_measured: Option<String>,
}

/// A GPU whose readings cover less of the window than this share is not measured.
pub const MIN_COVERED_SHARE: f64 = 0.5;

/// The integral of one GPU's power over `[from_ns, to_ns]`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Integral {
    pub energy_j: f64,
    pub readings_inside: u64,
    pub held_s: f64,
    pub longest_gap_s: f64,
}

/// Integrates `readings` (CLOCK_MONOTONIC ns, W; any order) over the window by the trapezoid
/// rule, cut at the window's edges, the end readings' power held beyond them (see the module
/// docs). None without readings or with an empty window.
pub fn integrate(readings: &[(u64, f64)], from_ns: u64, to_ns: u64) -> Option<Integral> {
    if readings.is_empty() || to_ns <= from_ns {
        return None;
    }
    let mut r = readings.to_vec();
    r.sort_by_key(|x| x.0);
    let s = |ns: u64| ns as f64 / 1e9;
    let (a, b) = (s(from_ns), s(to_ns));
    // The power at time t (s) on the line through the readings, held beyond its ends.
    let at = |t: f64| -> f64 {
        let (first, last) = (r[0], r[r.len() - 1]);
        if t <= s(first.0) {
            return first.1;
        }
        if t >= s(last.0) {
            return last.1;
        }
        let i = r.partition_point(|x| s(x.0) <= t);
        let (p, q) = (r[i - 1], r[i]);
        let f = (t - s(p.0)) / (s(q.0) - s(p.0));
        p.1 + f * (q.1 - p.1)
    };
    // The window's breakpoints: its edges and every reading inside it.
    let mut ts: Vec<f64> = vec![a];
    ts.extend(r.iter().map(|x| s(x.0)).filter(|t| *t > a && *t < b));
    ts.push(b);
    let energy_j = ts
        .windows(2)
        .map(|w| (w[1] - w[0]) * (at(w[0]) + at(w[1])) / 2.0)
        .sum();
    let (t0, t1) = (s(r[0].0), s(r[r.len() - 1].0));
    let held_s = (t0.min(b) - a).max(0.0) + (b - t1.max(a)).max(0.0);
    let longest_gap_s = ts.windows(2).map(|w| w[1] - w[0]).fold(0.0, f64::max);
    Some(Integral {
        energy_j,
        readings_inside: r.iter().filter(|x| x.0 >= from_ns && x.0 <= to_ns).count() as u64,
        held_s,
        longest_gap_s,
    })
}

/// One power reading of one GPU.
#[derive(Debug, Clone, PartialEq)]
pub struct PowerReading {
    pub uuid: String,
    pub mono_ns: u64,
    pub power_w: Option<f64>,
}

/// What a step's energy rests on besides the readings.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct StepCounts {
    /// The measured window, CLOCK_MONOTONIC ns.
    pub window_ns: (u64, u64),
    pub requests: u64,
    pub output_tokens: u64,
    /// Successful requests that reported no usage (their tokens cannot be counted).
    pub without_usage: u64,
}

/// The step's energy from its readings, the idle baseline's draw per GPU UUID and its counts.
pub fn step_energy(
    readings: &[PowerReading],
    idle: &BTreeMap<String, f64>,
    c: &StepCounts,
) -> StepEnergy {
    let (from, to) = c.window_ns;
    let window_s = to.saturating_sub(from) as f64 / 1e9;
    let mut uuids: Vec<&str> = Vec::new();
    for x in readings {
        if !uuids.contains(&x.uuid.as_str()) {
            uuids.push(&x.uuid);
        }
    }
    let mut why: Vec<String> = Vec::new();
    let gpus: Vec<GpuEnergy> = uuids
        .iter()
        .map(|u| {
            let mine: Vec<(u64, f64)> = readings
                .iter()
                .filter(|x| x.uuid == *u)
                .filter_map(|x| Some((x.mono_ns, x.power_w.filter(|p| p.is_finite())?)))
                .collect();
            let mut g = GpuEnergy {
                uuid: u.to_string(),
                idle_power_w: idle.get(*u).copied(),
                ..Default::default()
            };
            match integrate(&mine, from, to) {
                None if mine.is_empty() => why.push(format!("GPU {u} reported no power draw")),
                None => why.push("the step has no measured window".into()),
                Some(i) => {
                    g.readings = i.readings_inside;
                    g.held_s = i.held_s;
                    g.longest_gap_s = i.longest_gap_s;
                    if i.held_s > (1.0 - MIN_COVERED_SHARE) * window_s {
                        why.push(format!(
                            "GPU {u}'s power readings cover {:.0} % of the {window_s:.3} s window (at least {:.0} % needed)",
                            100.0 * (1.0 - i.held_s / window_s),
                            100.0 * MIN_COVERED_SHARE
                        ));
                    } else {
                        g.energy_j = Some(i.energy_j);
                        g.mean_power_w = Some(i.energy_j / window_s);
                    }
                }
            }
            g
        })
        .collect();
    if gpus.is_empty() {
        why.push("no GPU power reading was taken".into());
    }
    let energy_j = why
        .is_empty()
        .then(|| gpus.iter().filter_map(|g| g.energy_j).sum::<f64>());
    let idle_power_w = (!gpus.is_empty())
        .then(|| gpus.iter().map(|g| g.idle_power_w).sum::<Option<f64>>())
        .flatten();
    let per_mtok_j = match energy_j {
        Some(_) if c.without_usage > 0 => {
            why.push(format!(
                "{} successful request(s) reported no usage, so the output tokens cannot be counted",
                c.without_usage
            ));
            None
        }
        Some(_) if c.output_tokens == 0 => {
            why.push("no output token was reported".into());
            None
        }
        Some(e) => Some(e / c.output_tokens as f64 * 1e6),
        None => None,
    };
    StepEnergy {
        window_s,
        requests: c.requests,
        output_tokens: c.output_tokens,
        energy_j,
        mean_power_w: energy_j.map(|e| e / window_s),
        per_request_j: energy_j
            .filter(|_| c.requests > 0)
            .map(|e| e / c.requests as f64),
        per_mtok_j,
        idle_power_w,
        not_measured: (!why.is_empty()).then(|| why.join("; ")),
        gpus,
    }
}

/// The step's energy from its step file: its GPU readings (`gpu.samples`), the idle baseline
/// beside them (`gpu.idle_power_w`), its measured window (`window_mono_ns`) and counts
/// (`stats`). None for a step file written before energy was recorded (no `window_mono_ns`
/// key); a step whose lane sampled no GPU is Some, not measured, with the reason.
pub fn from_step_file(v: &Value) -> Option<StepEnergy> {
    let window = v.get("window_mono_ns")?;
    let stats = &v["stats"];
    let n = |k: &str| stats[k].as_u64().unwrap_or(0);
    let window_ns = match (window[0].as_u64(), window[1].as_u64()) {
        (Some(a), Some(b)) => Some((a, b)),
        _ => None,
    };
    let c = StepCounts {
        window_ns: window_ns.unwrap_or_default(),
        requests: n("ok"),
        output_tokens: n("completion_tokens_total"),
        without_usage: n("requests_without_usage"),
    };
    let gpu = &v["gpu"];
    let not = |why: String| StepEnergy {
        window_s: c.window_ns.1.saturating_sub(c.window_ns.0) as f64 / 1e9,
        requests: c.requests,
        output_tokens: c.output_tokens,
        not_measured: Some(why),
        ..Default::default()
    };
    if window_ns.is_none() {
        return Some(not(
            "no measured request completed, so the step has no window".into(),
        ));
    }
    if gpu["status"] == "not-applicable" {
        return Some(not(format!(
            "no GPU power was sampled: {} (the lane names no GPU in `gpus`)",
            gpu["reason"].as_str().unwrap_or("not applicable")
        )));
    }
    let readings: Vec<PowerReading> = gpu["samples"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|s| {
                    Some(PowerReading {
                        uuid: s["uuid"].as_str()?.to_string(),
                        mono_ns: s["mono_ns"].as_u64()?,
                        power_w: s["power_w"].as_f64(),
                    })
                })
                .collect()
        })
        .unwrap_or_default();
    let idle: BTreeMap<String, f64> = gpu["idle_power_w"]
        .as_object()
        .map(|m| {
            m.iter()
                .filter_map(|(k, v)| Some((k.clone(), v.as_f64()?)))
                .collect()
        })
        .unwrap_or_default();
    let mut e = step_energy(&readings, &idle, &c);
    if readings.is_empty() {
        if let Some(note) = gpu["note"].as_str() {
            e.not_measured = Some(format!("no GPU power reading was taken: {note}"));
        }
    }
    Some(e)
}

/// Each GPU's idle draw, W, from a GPU probe as JSON (`devices[].uuid` and `power_w`, the shape
/// `telemetry::gpu::GpuProbe` serializes to).
pub fn idle_power(probe: &Value) -> BTreeMap<String, f64> {
    probe["devices"]
        .as_array()
        .map(|d| {
            d.iter()
                .filter_map(|x| Some((x["uuid"].as_str()?.to_string(), x["power_w"].as_f64()?)))
                .collect()
        })
        .unwrap_or_default()
}

/// A lane's price (`[lane] cost_per_hour`, `currency`), as the arm that ran there records it.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct Price {
    pub cost_per_hour: f64,
    /// A free-text label, e.g. `USD`.
    pub currency: String,
}

impl Price {
    /// The cost of a million output tokens produced at `output_tok_s` (the lane's price for the
    /// time they take): `cost_per_hour / 3600 / output_tok_s × 10⁶`. None without throughput.
    pub fn per_mtok(&self, output_tok_s: f64) -> Option<f64> {
        (output_tok_s.is_finite() && output_tok_s > 0.0)
            .then(|| self.cost_per_hour / 3600.0 / output_tok_s * 1e6)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const S: u64 = 1_000_000_000;

    fn r(uuid: &str, t_ms: u64, w: f64) -> PowerReading {
        PowerReading {
            uuid: uuid.into(),
            mono_ns: 10 * S + t_ms * 1_000_000,
            power_w: Some(w),
        }
    }

    #[test]
    fn the_trapezoid_is_cut_at_the_window_and_held_beyond_the_readings() {
        // Readings at 0, 200, 400 ms: 100, 300, 200 W. Window 100..400 ms:
        // 100..200: (200 + 300) / 2 × 0.1 = 25 J (200 W interpolated at 100 ms);
        // 200..400: (300 + 200) / 2 × 0.2 = 50 J. Total 75 J.
        let pts = [
            (10 * S, 100.0),
            (10 * S + S / 5, 300.0),
            (10 * S + 2 * S / 5, 200.0),
        ];
        let i = integrate(&pts, 10 * S + S / 10, 10 * S + 2 * S / 5).unwrap();
        assert!((i.energy_j - 75.0).abs() < 1e-9, "{i:?}");
        assert_eq!(i.readings_inside, 2);
        assert_eq!(i.held_s, 0.0);
        assert!((i.longest_gap_s - 0.2).abs() < 1e-9);
        // A window reaching 100 ms past the last reading holds its 200 W there: +20 J.
        let i = integrate(&pts, 10 * S + S / 10, 10 * S + S / 2).unwrap();
        assert!((i.energy_j - 95.0).abs() < 1e-9, "{i:?}");
        assert!((i.held_s - 0.1).abs() < 1e-9);
        // A window between two readings: the line through them (100 → 300 W over 0..200 ms),
        // 50..150 ms: mean 200 W × 0.1 s.
        let i = integrate(&pts, 10 * S + S / 20, 10 * S + 3 * S / 20).unwrap();
        assert!((i.energy_j - 20.0).abs() < 1e-9, "{i:?}");
        assert_eq!(i.readings_inside, 0);
        assert!(integrate(&[], 0, 1).is_none());
        assert!(integrate(&pts, 5, 5).is_none());
    }

    #[test]
    fn a_step_with_two_gpus_per_request_and_per_million_tokens_and_the_idle_beside() {
        // The H200 fixture's two GPUs, read every 250 ms over a 1 s window (0..1000 ms):
        // A: 74.83 W flat → 74.83 J; B: 600 → 650 → 700 → 650 → 600 W: trapezoids of 0.25 s:
        // (600+650)/2 + (650+700)/2 + (700+650)/2 + (650+600)/2 = 2600 × 0.25 = 650 J.
        // Total 724.83 J, 724.83 W mean; 4 requests → 181.2075 J each; 800 output tokens →
        // 724.83 / 800 × 10⁶ = 906,037.5 J per million.
        let mut v = Vec::new();
        for (k, b) in [600.0, 650.0, 700.0, 650.0, 600.0].iter().enumerate() {
            v.push(r("GPU-a", k as u64 * 250, 74.83));
            v.push(r("GPU-b", k as u64 * 250, *b));
        }
        let idle = BTreeMap::from([("GPU-a".to_string(), 74.83), ("GPU-b".to_string(), 60.5)]);
        let c = StepCounts {
            window_ns: (10 * S, 11 * S),
            requests: 4,
            output_tokens: 800,
            without_usage: 0,
        };
        let e = step_energy(&v, &idle, &c);
        assert_eq!(e.not_measured, None);
        assert_eq!(e.gpus.len(), 2);
        assert!((e.gpus[0].energy_j.unwrap() - 74.83).abs() < 1e-9);
        assert!((e.gpus[1].energy_j.unwrap() - 650.0).abs() < 1e-9);
        assert_eq!(e.gpus[1].readings, 5);
        assert!((e.energy_j.unwrap() - 724.83).abs() < 1e-9);
        assert!((e.mean_power_w.unwrap() - 724.83).abs() < 1e-9);
        assert!((e.per_request_j.unwrap() - 181.2075).abs() < 1e-9);
        assert!((e.per_mtok_j.unwrap() - 906_037.5).abs() < 1e-6);
        // Stated beside, not subtracted.
        assert!((e.idle_power_w.unwrap() - 135.33).abs() < 1e-9);

        // Tokens not countable: energy measured, the per-token figure not, with the reason.
        let e2 = step_energy(
            &v,
            &idle,
            &StepCounts {
                without_usage: 1,
                ..c.clone()
            },
        );
        assert!(e2.energy_j.is_some() && e2.per_mtok_j.is_none());
        assert!(e2.not_measured.unwrap().contains("reported no usage"));
        // A GPU without power readings leaves the total not measured (never a partial sum).
        let mut v3 = v.clone();
        v3.iter_mut()
            .filter(|x| x.uuid == "GPU-b")
            .for_each(|x| x.power_w = None);
        let e3 = step_energy(&v3, &idle, &c);
        assert_eq!((e3.energy_j, e3.per_mtok_j), (None, None));
        assert_eq!(
            e3.not_measured.as_deref(),
            Some("GPU GPU-b reported no power draw")
        );
        // Readings covering under half the window: not measured.
        let late: Vec<PowerReading> = v
            .iter()
            .filter(|x| x.mono_ns >= 10 * S + 3 * S / 4)
            .cloned()
            .collect();
        let e4 = step_energy(&late, &idle, &c);
        assert!(e4
            .not_measured
            .unwrap()
            .contains("cover 25 % of the 1.000 s window"));
        // No readings at all.
        let e5 = step_energy(&[], &idle, &c);
        assert_eq!(
            e5.not_measured.as_deref(),
            Some("no GPU power reading was taken")
        );
        assert_eq!(e5.idle_power_w, None);
    }

    #[test]
    fn a_step_file_gives_its_energy_or_says_why_not() {
        let file = json!({
            "window_mono_ns": [10 * S, 12 * S],
            "stats": {"ok": 5, "completion_tokens_total": 400, "requests_without_usage": 0},
            "gpu": {"source": "nvidia-smi", "idle_power_w": {"GPU-a": 70.0},
                    "samples": [{"uuid": "GPU-a", "mono_ns": 9 * S, "power_w": 100.0},
                                {"uuid": "GPU-a", "mono_ns": 13 * S, "power_w": 100.0}]}
        });
        let e = from_step_file(&file).unwrap();
        // 100 W over 2 s; 200 J / 400 tokens.
        assert_eq!(e.energy_j, Some(200.0));
        assert_eq!(e.per_mtok_j, Some(500_000.0));
        assert_eq!(e.per_request_j, Some(40.0));
        assert_eq!(e.idle_power_w, Some(70.0));
        let none = json!({"window_mono_ns": [10 * S, 12 * S], "stats": {"ok": 5},
                          "gpu": {"status": "not-applicable", "reason": "the lane owns no GPU"}});
        let e = from_step_file(&none).unwrap();
        assert_eq!((e.energy_j, e.per_mtok_j), (None, None));
        assert!(e.not_measured.unwrap().contains("the lane owns no GPU"));
        let smi_missing = json!({"window_mono_ns": [10 * S, 12 * S], "stats": {"ok": 5},
                          "gpu": {"source": null, "samples": [], "note": "not applicable: no GPU sampled (nvidia-smi: not found)"}});
        let e = from_step_file(&smi_missing).unwrap();
        assert!(e
            .not_measured
            .as_deref()
            .unwrap()
            .contains("nvidia-smi: not found"));
        // JSON null, never 0, for what was not measured.
        let j = serde_json::to_value(&e).unwrap();
        assert!(j["per_mtok_j"].is_null() && j["energy_j"].is_null());
        // Older step files record no window: no energy record at all.
        assert_eq!(from_step_file(&json!({"stats": {}})), None);
    }

    #[test]
    fn cost_per_million_tokens_is_the_price_of_their_time() {
        let p = Price {
            cost_per_hour: 2.5,
            currency: "USD".into(),
        };
        // 2.5 / 3600 per second; 500 tok/s → 2000 s per million tokens → 1.3888… USD.
        assert!((p.per_mtok(500.0).unwrap() - 2.5 / 3600.0 * 2000.0).abs() < 1e-12);
        assert!((p.per_mtok(500.0).unwrap() - 1.388_888_888_888_889).abs() < 1e-12);
        assert_eq!(p.per_mtok(0.0), None);
        assert_eq!(p.per_mtok(f64::NAN), None);
    }
}
