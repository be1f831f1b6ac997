//! The run's timeline: every timed request's TTFT at the moment it was sent, per arm, over the
//! whole run (cold, warm and every concurrency level), with the GPU readings of each timed step
//! on axes of their own where the lane sampled a GPU: memory used (MiB), utilisation (%) and
//! power (W), each only when some step has it. A step's readings are drawn as they were sampled
//! (`gpu.samples`), or, in bundles that kept only the step's summary (`gpu.per_gpu`), as one
//! level over the step. Drift during a step, a slow first request, or an arm that degrades over
//! its steps shows here.

use super::charts::{label, Plot, COLORS};
use super::series::{GpuPoint, Series, StepSeries, TTFT_FIELD};
use crate::evidence::bundle;
use crate::evidence::result::CampaignResult;
use serde_json::{json, Value};

const KEY_COLOR: &str = "#555555";

/// One GPU quantity drawn on the timeline.
struct Quantity {
    /// The axis id, its title and the legend key's words.
    axis: &'static str,
    title: &'static str,
    key: &'static str,
    unit: &'static str,
    dash: &'static [u32],
    of: fn(&GpuPoint) -> Option<f64>,
}

const QUANTITIES: [Quantity; 3] = [
    Quantity {
        axis: "y2",
        title: "GPU memory used, MiB",
        key: "GPU memory used, MiB (right)",
        unit: "MiB",
        dash: &[],
        of: |p| Some(p.used_mib),
    },
    Quantity {
        axis: "y3",
        title: "GPU utilization, %",
        key: "GPU utilization, % (right)",
        unit: "% busy",
        dash: &[6, 3],
        of: |p| p.utilization_pct,
    },
    Quantity {
        axis: "y4",
        title: "GPU power, W",
        key: "GPU power, W (right)",
        unit: "W",
        dash: &[2, 2],
        of: |p| p.power_w,
    },
];

/// A step's GPU readings on the run's clock: its samples, or its summary held over its load.
fn step_points(st: &StepSeries) -> (Vec<(f64, GpuPoint)>, bool) {
    let (Some(g), Some(t0)) = (&st.gpu, st.load_start_s) else {
        return (Vec::new(), false);
    };
    if !g.samples.is_empty() {
        let pts = g.samples.iter().map(|p| (t0 + p.t_s, p.clone())).collect();
        return (pts, true);
    }
    let p = GpuPoint {
        t_s: 0.0,
        used_mib: g.used_mib,
        utilization_pct: g.utilization_pct,
        power_w: g.power_w,
        gpus: 0,
    };
    let t1 = t0 + st.load_span_s.max(0.001);
    (vec![(t0, p.clone()), (t1, p)], false)
}

/// The GPU datasets (per arm and quantity, in the arm's colour, with a grey legend key per
/// quantity that toggles it for every arm), the axes they use, and the caption's words; None
/// when no step of any arm has a GPU reading.
fn gpu_datasets(r: &CampaignResult, s: &Series) -> Option<(Vec<Value>, Value, String)> {
    let mut ds = Vec::new();
    let mut used = [false; 3];
    let (mut sampled, mut summarised) = (false, false);
    for (i, a) in r.arms.iter().enumerate() {
        let (l, k) = (label(a), COLORS[i % COLORS.len()]);
        for (qi, q) in QUANTITIES.iter().enumerate() {
            let mut data: Vec<Value> = Vec::new();
            for st in s.steps.iter().filter(|st| st.arm == a.id) {
                let (pts, from_samples) = step_points(st);
                let mut any = false;
                for (x, p) in &pts {
                    let Some(y) = (q.of)(p) else { continue };
                    let how = if from_samples {
                        format!("at {x:.1} s")
                    } else {
                        "step summary".into()
                    };
                    data.push(json!({"x": x, "y": y, "t": format!(
                        "{l}, {} C{} ({how}): {}", st.state, st.concurrency, fmt_q(y, q.unit)
                    )}));
                    any = true;
                }
                if any {
                    sampled |= from_samples;
                    summarised |= !from_samples;
                    // A gap between steps: the line does not join them.
                    let end = pts.last().map(|(x, _)| *x).unwrap_or(0.0);
                    data.push(json!({"x": end, "y": null}));
                }
            }
            if data.is_empty() {
                continue;
            }
            used[qi] = true;
            ds.push(json!({
                "label": format!("{l}: {}", q.title), "data": data, "borderColor": k,
                "backgroundColor": k, "borderWidth": 1.5, "borderDash": q.dash, "pointRadius": 0,
                "showLine": true, "spanGaps": false, "fill": false, "yAxisID": q.axis,
                "noLegend": true, "group": q.axis,
            }));
        }
    }
    if ds.is_empty() {
        return peak_dataset(r, s);
    }
    let mut scales = json!({});
    let mut names = Vec::new();
    for (qi, q) in QUANTITIES.iter().enumerate() {
        if !used[qi] {
            continue;
        }
        // The legend key: no points of its own; clicking it toggles the quantity for every arm.
        ds.push(json!({
            "label": q.key, "data": [], "borderColor": KEY_COLOR, "backgroundColor": KEY_COLOR,
            "borderWidth": 1.5, "borderDash": q.dash, "showLine": true, "yAxisID": q.axis,
            "group": q.axis,
        }));
        scales[q.axis] = right_axis(q.title);
        if q.axis == "y3" {
            // A share: the whole 0-100 % range, so a busy GPU reads as busy.
            scales[q.axis]["max"] = json!(100);
            scales[q.axis]["grace"] = json!(0);
        }
        names.push(q.title.split(',').next().unwrap_or(q.title).to_lowercase());
    }
    let how = match (sampled, summarised) {
        (true, false) => "every reading the sampler took during each timed step",
        (false, true) => "each timed step's summary (the most memory used, the mean utilization and power), held over the step",
        _ => "every reading where the step kept them, else the step's summary held over the step",
    };
    let what = format!(
        "{} of the lane's GPUs (memory and power summed over them, utilization their mean), {how}, in each arm's colour",
        names.join(", ").replace("gpu ", "")
    );
    Some((ds, scales, what))
}

fn fmt_q(y: f64, unit: &str) -> String {
    format!("{y:.0} {unit}")
}

fn right_axis(title: &str) -> Value {
    json!({
        "type": "linear", "position": "right", "beginAtZero": true, "grace": "5%",
        "grid": {"drawOnChartArea": false},
        "title": {"display": true, "text": title},
    })
}

/// Only the arms' peaks were recorded: each over the span of the arm's steps.
fn peak_dataset(r: &CampaignResult, s: &Series) -> Option<(Vec<Value>, Value, String)> {
    let mut data: Vec<Value> = Vec::new();
    for a in &r.arms {
        let Some(peak) = a.gpu_peak_used_mib else {
            continue;
        };
        let spans: Vec<(f64, f64)> = s
            .steps
            .iter()
            .filter(|st| st.arm == a.id)
            .filter_map(|st| Some((st.load_start_s?, st.load_start_s? + st.load_span_s)))
            .collect();
        let (Some(t0), Some(t1)) = (
            spans.iter().map(|x| x.0).reduce(f64::min),
            spans.iter().map(|x| x.1).reduce(f64::max),
        ) else {
            continue;
        };
        let tip = format!("{}: peak {peak} MiB", label(a));
        data.push(json!({"x": t0, "y": peak, "t": tip}));
        data.push(json!({"x": t1, "y": peak, "t": tip}));
        data.push(json!({"x": t1, "y": null}));
    }
    if data.is_empty() {
        return None;
    }
    let what = "GPU memory used (peak per arm)".to_string();
    let d = json!({
        "label": what, "data": data, "borderColor": KEY_COLOR, "backgroundColor": KEY_COLOR,
        "borderWidth": 3, "pointRadius": 0, "showLine": true, "spanGaps": false, "fill": false,
        "yAxisID": "y2",
    });
    Some((
        vec![d],
        json!({"y2": right_axis("GPU memory used, MiB")}),
        what,
    ))
}

/// The timeline plot (see the module's words).
pub fn plot(r: &CampaignResult, s: &Series) -> Plot {
    let mut ds = Vec::new();
    for (i, a) in r.arms.iter().enumerate() {
        let l = label(a);
        let k = COLORS[i % COLORS.len()];
        let mut data = Vec::new();
        for st in s.steps.iter().filter(|st| st.arm == a.id) {
            let Some(t0) = st.load_start_s else { continue };
            for q in &st.requests {
                let Some(y) = q.metrics.get(TTFT_FIELD) else {
                    continue;
                };
                let x = t0 + q.send_ms / 1000.0;
                data.push(json!({"x": x, "y": y, "t": format!(
                    "{l}, {} C{}: TTFT {:.1} ms, sent at {:.1} s",
                    st.state, st.concurrency, y, x
                )}));
            }
        }
        if !data.is_empty() {
            ds.push(json!({
                "label": l, "data": data, "borderColor": k, "backgroundColor": k,
                "pointRadius": 2.5, "showLine": false,
            }));
        }
    }
    let when = if s.timeline_from_checkpoint {
        format!(
            "the steps laid end to end by the wall times {} records, each step's load at its end",
            bundle::CHECKPOINT
        )
    } else {
        format!(
            "the timed steps laid end to end by their load spans (the bundle has no {} with step wall times: gaps between steps are not shown)",
            bundle::CHECKPOINT
        )
    };
    let mut caption = format!(
        "Every timed request's TTFT at the moment it was sent, per arm, over the run (cold, warm and every concurrency level; time is {when})."
    );
    let mut missing =
        "No timed request carries its own TTFT (the timing files hold no per-request values)."
            .to_string();
    let gpu = gpu_datasets(r, s);
    match &gpu {
        Some((_, _, what)) => caption.push_str(&format!(" Right axes: {what}.")),
        None => {
            caption.push_str(" The GPUs were not sampled in this campaign (no GPU in the lane, or no telemetry).");
            missing.push_str(" The GPUs were not sampled either.");
        }
    }
    if ds.is_empty() {
        return Plot {
            id: "timeline",
            title: "Timeline of the run".into(),
            caption,
            config: None,
            missing,
        };
    }
    let mut scales = json!({
        "x": {"type": "linear", "title": {"display": true, "text": "time into the run, s"}},
        "y": {"type": "linear", "beginAtZero": true, "grace": "5%", "title": {"display": true, "text": "TTFT, ms"}},
    });
    if let Some((d, axes, _)) = gpu {
        ds.extend(d);
        for (k, v) in axes.as_object().into_iter().flatten() {
            scales[k] = v.clone();
        }
    }
    Plot {
        id: "timeline",
        title: "Timeline of the run".into(),
        caption,
        config: Some(json!({
            "type": "scatter",
            "data": {"datasets": ds},
            "options": {
                "scales": scales,
                "plugins": {"title": {"display": true, "text": "Timeline of the run: TTFT per request"}},
            },
        })),
        missing,
    }
}
