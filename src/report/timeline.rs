//! The run's timeline: every timed request's TTFT at the moment it was sent, per arm, over the
//! whole run (cold, warm and every concurrency level), with the GPU memory each timed step used
//! on a second axis where the lane sampled a GPU. Drift during a step, a slow first request, or
//! an arm that degrades over its steps shows here.

use super::charts::{label, Plot, COLORS};
use super::series::{Series, TTFT_FIELD};
use crate::evidence::bundle;
use crate::evidence::result::CampaignResult;
use serde_json::{json, Value};

const GPU_COLOR: &str = "#555555";

fn gpu_dataset(r: &CampaignResult, s: &Series) -> Option<(Value, String)> {
    let mut data: Vec<Value> = Vec::new();
    for st in &s.steps {
        let (Some(g), Some(t0)) = (&st.gpu, st.load_start_s) else {
            continue;
        };
        let t1 = t0 + st.load_span_s.max(0.001);
        let mut tip = format!("{}: {:.0} MiB", st.evidence, g.used_mib);
        if let Some(u) = g.utilization_pct {
            tip.push_str(&format!(", {u:.0} % busy"));
        }
        if let Some(p) = g.power_w {
            tip.push_str(&format!(", {p:.0} W"));
        }
        data.push(json!({"x": t0, "y": g.used_mib, "t": tip}));
        data.push(json!({"x": t1, "y": g.used_mib, "t": tip}));
        data.push(json!({"x": t1, "y": null}));
    }
    let mut what = "GPU memory used (max per step)".to_string();
    if data.is_empty() {
        // Only the arms' peaks were recorded: each over the span of the arm's steps.
        what = "GPU memory used (peak per arm)".to_string();
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
    }
    if data.is_empty() {
        return None;
    }
    let d = json!({
        "label": what, "data": data, "borderColor": GPU_COLOR, "backgroundColor": GPU_COLOR,
        "borderWidth": 3, "pointRadius": 0, "showLine": true, "spanGaps": false, "fill": false,
        "yAxisID": "y2",
    });
    Some((d, what))
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
    let gpu = gpu_dataset(r, s);
    match &gpu {
        Some((_, what)) => {
            caption.push_str(&format!(" Right axis: {what}, drawn over each timed step."))
        }
        None => {
            caption.push_str(" GPU memory was not sampled in this campaign (no GPU in the lane, or no telemetry).");
            missing.push_str(" GPU memory was not sampled either.");
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
    if let Some((d, _)) = gpu {
        ds.push(d);
        scales["y2"] = json!({
            "type": "linear", "position": "right", "beginAtZero": true, "grace": "5%",
            "grid": {"drawOnChartArea": false},
            "title": {"display": true, "text": "GPU memory used, MiB"},
        });
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
