//! `report.html`'s timeline of a multi-lane bundle's lanes (docs/fleet.md "report.html: the
//! per-lane view"), one per invocation that recorded its schedule: a row per lane, each lane run
//! placed at its `start_ms` on the invocation's clock (`campaign-result.json` →
//! `schedule_timing`), its steps laid end to end from there by their wall times (the run folder's
//! checkpoint), consecutive steps of one arm one bar, coloured by outcome; the stretches in which
//! no lane was busy shaded. Drawn as inline SVG rather than with Chart.js: the section sits
//! outside the page's plots (`#chart-specs`), labelled bars on a time axis are a few rectangles,
//! and the page still loads nothing.

use super::chartkit::esc;
use crate::evidence::bundle;
use crate::evidence::result::{CampaignResult, RunSpan, ScheduleTiming};
use serde_json::Value;
use std::collections::BTreeMap;
use std::fmt::Write as _;

/// How a bar's steps ended, in the arm statuses' words (`evidence::result::ArmStatus`); ordered
/// so that a bar takes its worst step's.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Outcome {
    Completed,
    Interrupted,
    Failed,
}

impl Outcome {
    pub fn as_str(self) -> &'static str {
        match self {
            Outcome::Completed => "completed",
            Outcome::Interrupted => "interrupted",
            Outcome::Failed => "failed",
        }
    }

    fn color(self) -> &'static str {
        match self {
            Outcome::Completed => "#2ca02c",
            Outcome::Interrupted => "#ff7f0e",
            Outcome::Failed => "#d62728",
        }
    }
}

/// The fill of steps of no arm (the incumbent's stop, the idle baseline, the restoration).
const NO_ARM: &str = "#b0b0b0";

/// One bar of the lanes' timeline: consecutive steps of one arm (or of no arm) in one lane run,
/// in ms on its invocation's clock (from the moment the invocation began taking its lanes).
#[derive(Debug, Clone, PartialEq)]
pub struct Bar {
    pub lane: String,
    /// The run's folder (`lanes/<id>`, `lanes/<id>.moved-<n>`).
    pub folder: String,
    /// None: steps of no arm; the label names the first of them.
    pub arm: Option<String>,
    pub label: String,
    pub start_ms: f64,
    pub end_ms: f64,
    pub steps: usize,
    pub outcome: Outcome,
    /// The control's copy on a lane that does not run the control arm: `<arm>.control`, a name
    /// no arm id can have (src/campaign/lane_plan.rs `control_copy_id`).
    pub control: bool,
}

/// One lane run of an invocation, as `schedule_timing` measured it.
#[derive(Debug, Clone, PartialEq)]
pub struct RunBox {
    pub span: RunSpan,
    /// A run of arms moved here from this drained lane.
    pub moved_from: Option<String>,
    /// Why its steps are not drawn, when they are not.
    pub unplaced: Option<String>,
}

/// The lanes' timeline of one invocation.
#[derive(Debug, Clone, PartialEq)]
pub struct Timeline {
    pub timing: ScheduleTiming,
    /// One row per lane, in the bundle's lane order (a moved run sits on its lane's row).
    pub rows: Vec<String>,
    pub runs: Vec<RunBox>,
    pub bars: Vec<Bar>,
    /// The stretches of the invocation's wall time in which no lane run was running.
    pub idle: Vec<(f64, f64)>,
}

/// A step of a run with a wall time (done, failed or interrupted), as its checkpoint has it.
#[derive(Debug, Clone, PartialEq)]
struct Step {
    number: u64,
    arm: Option<String>,
    name: String,
    wall_ms: f64,
    outcome: Outcome,
}

/// The timeline of every invocation `schedule_timing` recorded, in its order; `checkpoints`:
/// each run folder's checkpoint by folder.
pub fn timelines(r: &CampaignResult, checkpoints: &BTreeMap<String, Value>) -> Vec<Timeline> {
    let mut lanes: Vec<String> = Vec::new();
    for l in &r.lanes {
        if !lanes.contains(&l.id) {
            lanes.push(l.id.clone());
        }
    }
    let mut out = Vec::new();
    for t in &r.schedule_timing {
        let mut rows = lanes.clone();
        let (mut runs, mut bars) = (Vec::new(), Vec::new());
        for s in &t.runs {
            if !rows.contains(&s.lane) {
                rows.push(s.lane.clone());
            }
            let moved_from = r
                .lanes
                .iter()
                .find(|l| l.folder == s.folder)
                .and_then(|l| l.moved_from.clone());
            let local = local_invocation(r, &s.folder, moved_from.is_some(), t.invocation);
            let placed = match checkpoints.get(&s.folder) {
                Some(ck) => place(s, &run_steps(ck, local)),
                None => Err(format!(
                    "{} has no readable {}",
                    s.folder,
                    bundle::CHECKPOINT
                )),
            };
            let unplaced = match placed {
                Ok(b) => {
                    bars.extend(b);
                    None
                }
                Err(why) => Some(why),
            };
            runs.push(RunBox {
                span: s.clone(),
                moved_from,
                unplaced,
            });
        }
        out.push(Timeline {
            idle: idle(t),
            timing: t.clone(),
            rows,
            runs,
            bars,
        });
    }
    out
}

/// A run folder's own number for the bundle's invocation `inv`. A lane's own folder counts the
/// bundle's invocations (each run, recovery and resume takes every lane); a moved run's folder
/// starts at 1 in the invocation that made it, the first whose schedule lists it.
fn local_invocation(r: &CampaignResult, folder: &str, moved: bool, inv: u32) -> u32 {
    if !moved {
        return inv;
    }
    let first = r
        .schedule_timing
        .iter()
        .filter(|t| t.runs.iter().any(|s| s.folder == folder))
        .map(|t| t.invocation)
        .min()
        .unwrap_or(inv);
    inv.saturating_sub(first) + 1
}

/// The steps invocation `inv` ran in a run folder, in the order they ran (the runner takes its
/// plan's steps in order, so by number). Skipped and pending steps took no time.
fn run_steps(ck: &Value, inv: u32) -> Vec<Step> {
    let mut out: Vec<Step> = ck["steps"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|s| s["invocation"].as_u64() == Some(u64::from(inv)))
        .filter_map(|s| {
            let outcome = match s["status"].as_str()? {
                "done" => Outcome::Completed,
                "interrupted" => Outcome::Interrupted,
                "failed" => Outcome::Failed,
                _ => return None,
            };
            Some(Step {
                number: s["number"].as_u64().unwrap_or(0),
                arm: s["arm"].as_str().map(str::to_string),
                name: s["step"].as_str().unwrap_or("step").to_string(),
                wall_ms: s["wall_ms"].as_f64()?,
                outcome,
            })
        })
        .collect();
    out.sort_by_key(|s| s.number);
    out
}

/// A run's steps laid end to end from its start, consecutive steps of one arm one bar. Refused
/// when their wall times add up to more than the run's span: each is measured inside it, so they
/// are not all this run's.
fn place(s: &RunSpan, steps: &[Step]) -> Result<Vec<Bar>, String> {
    let sum: f64 = steps.iter().map(|x| x.wall_ms).sum();
    let span = s.end_ms - s.start_ms;
    if sum > span * 1.005 + 5.0 {
        return Err(format!(
            "its steps' wall times add up to {}, more than its span of {}: not all of them are this invocation's, so none is drawn",
            secs(sum),
            secs(span)
        ));
    }
    let mut bars: Vec<Bar> = Vec::new();
    let mut at = s.start_ms;
    for st in steps {
        let end = at + st.wall_ms;
        match bars.last_mut().filter(|b| b.arm == st.arm) {
            Some(b) => {
                b.end_ms = end;
                b.steps += 1;
                b.outcome = b.outcome.max(st.outcome);
            }
            None => bars.push(Bar {
                lane: s.lane.clone(),
                folder: s.folder.clone(),
                arm: st.arm.clone(),
                label: st.arm.clone().unwrap_or_else(|| st.name.clone()),
                start_ms: at,
                end_ms: end,
                steps: 1,
                outcome: st.outcome,
                control: st.arm.as_deref().is_some_and(|a| a.ends_with(".control")),
            }),
        }
        at = end;
    }
    Ok(bars)
}

/// The stretches of `[0, wall_ms]` in which no run of `t` was running.
fn idle(t: &ScheduleTiming) -> Vec<(f64, f64)> {
    let mut spans: Vec<(f64, f64)> = t.runs.iter().map(|s| (s.start_ms, s.end_ms)).collect();
    spans.sort_by(|a, b| a.0.total_cmp(&b.0));
    let (mut out, mut at) = (Vec::new(), 0.0_f64);
    for (s, e) in spans {
        if s > at {
            out.push((at, s));
        }
        at = at.max(e);
    }
    if t.wall_ms > at {
        out.push((at, t.wall_ms));
    }
    out
}

fn secs(ms: f64) -> String {
    format!("{:.2} s", ms / 1e3)
}

/// The drawing's geometry (SVG user units; the drawing scales to the page's width).
const W: f64 = 1000.0;
const LEFT: f64 = 90.0;
const RIGHT: f64 = 16.0;
const TOP: f64 = 6.0;
const ROW: f64 = 30.0;
const BAR: f64 = 18.0;
const AXIS: f64 = 36.0;
/// About one character's width at the drawing's 11-unit font.
const CHAR: f64 = 6.2;

/// A time axis step giving at most 10 ticks.
fn tick_ms(end_ms: f64) -> f64 {
    const STEPS: [f64; 16] = [
        100.0, 200.0, 500.0, 1e3, 2e3, 5e3, 1e4, 15e3, 3e4, 6e4, 12e4, 3e5, 6e5, 9e5, 18e5, 36e5,
    ];
    STEPS
        .into_iter()
        .find(|s| end_ms / s <= 10.0)
        .unwrap_or(end_ms / 10.0)
}

/// A bar's label cut to what fits in `px` units (nothing when not even two characters do).
fn fit(label: &str, px: f64) -> Option<String> {
    let room = ((px - 6.0) / CHAR).floor().max(0.0) as usize;
    let n = label.chars().count();
    if n <= room {
        Some(label.to_string())
    } else if room >= 3 {
        Some(label.chars().take(room - 1).collect::<String>() + "…")
    } else {
        None
    }
}

/// One invocation's timeline as inline SVG: a row per lane, each run outlined over its span
/// (dashed: a moved run), its bars inside, the stretches no lane was busy shaded, a time axis.
fn svg(t: &Timeline) -> String {
    let inv = t.timing.invocation;
    let end = t
        .runs
        .iter()
        .map(|r| r.span.end_ms)
        .chain(t.bars.iter().map(|b| b.end_ms))
        .fold(t.timing.wall_ms, f64::max)
        .max(1.0);
    let x = |ms: f64| LEFT + ms / end * (W - LEFT - RIGHT);
    let rows_h = ROW * t.rows.len() as f64;
    let row_y = |lane: &str| TOP + ROW * t.rows.iter().position(|r| r == lane).unwrap_or(0) as f64;
    let mut o = format!(
        "<svg id=\"lane-timeline-{inv}\" class=\"lane-timeline\" viewBox=\"0 0 {W} {h}\" width=\"100%\" role=\"img\" aria-label=\"The lanes' timeline, invocation {inv}\" font-family=\"sans-serif\" font-size=\"11\" data-wall-ms=\"{:.3}\"><defs><pattern id=\"tl-hatch-{inv}\" width=\"6\" height=\"6\" patternUnits=\"userSpaceOnUse\" patternTransform=\"rotate(45)\"><rect width=\"3\" height=\"6\" fill=\"#fff\" fill-opacity=\"0.6\"/></pattern></defs>",
        t.timing.wall_ms,
        h = TOP + rows_h + AXIS
    );
    for (a, b) in &t.idle {
        let _ = write!(
            o,
            "<rect class=\"tl-idle\" x=\"{:.1}\" y=\"{TOP}\" width=\"{:.1}\" height=\"{rows_h}\" fill=\"#e6e6e6\"><title>no lane busy: {} (from {} to {})</title></rect>",
            x(*a),
            x(*b) - x(*a),
            secs(b - a),
            secs(*a),
            secs(*b)
        );
    }
    for (i, lane) in t.rows.iter().enumerate() {
        let y = TOP + ROW * i as f64;
        let _ = write!(
            o,
            "<text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"end\">{}</text><line x1=\"{LEFT}\" x2=\"{:.1}\" y1=\"{:.1}\" y2=\"{4:.1}\" stroke=\"#ddd\"/>",
            LEFT - 6.0,
            y + ROW / 2.0 + 4.0,
            esc(lane),
            W - RIGHT,
            y + ROW
        );
    }
    for rb in &t.runs {
        o += &run_box(
            rb,
            x(rb.span.start_ms),
            x(rb.span.end_ms),
            row_y(&rb.span.lane),
        );
    }
    for b in &t.bars {
        o += &bar(b, inv, (x(b.start_ms), x(b.end_ms)), row_y(&b.lane));
    }
    let base = TOP + rows_h;
    let _ = write!(
        o,
        "<line x1=\"{LEFT}\" x2=\"{:.1}\" y1=\"{base}\" y2=\"{base}\" stroke=\"#555\"/>",
        W - RIGHT
    );
    let step = tick_ms(end);
    let mut k = 0.0;
    while k * step <= end + 1e-9 {
        let (ms, px) = (k * step, x(k * step));
        let words = if step >= 1e3 {
            format!("{:.0} s", ms / 1e3)
        } else {
            format!("{:.1} s", ms / 1e3)
        };
        let _ = write!(
            o,
            "<line x1=\"{px:.1}\" x2=\"{px:.1}\" y1=\"{base}\" y2=\"{:.1}\" stroke=\"#555\"/><text x=\"{px:.1}\" y=\"{:.1}\" text-anchor=\"middle\">{words}</text>",
            base + 4.0,
            base + 15.0
        );
        k += 1.0;
    }
    let _ = write!(
        o,
        "<text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"middle\">time since invocation {inv} began taking its lanes</text></svg>",
        LEFT + (W - LEFT - RIGHT) / 2.0,
        base + 30.0
    );
    o
}

/// A lane run's outline over its measured span, and why its steps are not drawn if so.
fn run_box(rb: &RunBox, x0: f64, x1: f64, y: f64) -> String {
    let s = &rb.span;
    let moved = rb
        .moved_from
        .as_deref()
        .map(|f| format!("; arms moved here from lane {}", esc(f)))
        .unwrap_or_default();
    let mut o = format!(
        "<rect class=\"tl-run\" data-lane=\"{}\" data-folder=\"{}\" data-start-ms=\"{:.3}\" data-end-ms=\"{:.3}\" x=\"{x0:.1}\" y=\"{:.1}\" width=\"{:.1}\" height=\"{:.1}\" fill=\"#fafafa\" stroke=\"#666\"{}><title>lane {0}, run {1}: from {} to {} ({}){moved}</title></rect>",
        esc(&s.lane),
        esc(&s.folder),
        s.start_ms,
        s.end_ms,
        y + (ROW - BAR) / 2.0 - 3.0,
        (x1 - x0).max(1.0),
        BAR + 6.0,
        if rb.moved_from.is_some() { " stroke-dasharray=\"5 3\"" } else { "" },
        secs(s.start_ms),
        secs(s.end_ms),
        secs(s.end_ms - s.start_ms),
    );
    if let Some(why) = &rb.unplaced {
        let _ = write!(
            o,
            "<text class=\"tl-unplaced\" x=\"{:.1}\" y=\"{:.1}\" fill=\"#a11\">steps not drawn: {}</text>",
            x0 + 3.0,
            y + ROW / 2.0 + 4.0,
            esc(why)
        );
    }
    o
}

/// A bar: its data (`data-*`: what the tests and a reader's script read), its tooltip, its fill
/// by outcome (grey for steps of no arm, edged by outcome when not completed), the control's
/// copy hatched with a dashed edge, its label where it fits.
fn bar(b: &Bar, inv: u32, (x0, x1): (f64, f64), y: f64) -> String {
    let (w, y) = ((x1 - x0).max(1.0), y + (ROW - BAR) / 2.0);
    let fill = if b.arm.is_some() {
        b.outcome.color()
    } else {
        NO_ARM
    };
    let edge = if b.control {
        " stroke=\"#222\" stroke-width=\"1.5\" stroke-dasharray=\"4 2\"".to_string()
    } else if b.arm.is_none() && b.outcome != Outcome::Completed {
        format!(" stroke=\"{}\" stroke-width=\"2\"", b.outcome.color())
    } else {
        String::new()
    };
    let name = if b.control {
        format!("{} (control)", b.label)
    } else {
        b.label.clone()
    };
    let mut o = format!(
        "<g class=\"tl-bar\" data-lane=\"{}\" data-folder=\"{}\" data-arm=\"{}\" data-start-ms=\"{:.3}\" data-end-ms=\"{:.3}\" data-outcome=\"{}\" data-control=\"{}\"><title>{} on lane {0} ({1}): {} step(s), {}, from {} to {} into invocation {inv}; {5}</title><rect x=\"{x0:.1}\" y=\"{y:.1}\" width=\"{w:.1}\" height=\"{BAR}\" fill=\"{fill}\"{edge}/>",
        esc(&b.lane),
        esc(&b.folder),
        esc(b.arm.as_deref().unwrap_or("")),
        b.start_ms,
        b.end_ms,
        b.outcome.as_str(),
        b.control,
        esc(&name),
        b.steps,
        secs(b.end_ms - b.start_ms),
        secs(b.start_ms),
        secs(b.end_ms),
    );
    if b.control {
        let _ = write!(
            o,
            "<rect x=\"{x0:.1}\" y=\"{y:.1}\" width=\"{w:.1}\" height=\"{BAR}\" fill=\"url(#tl-hatch-{inv})\"/>"
        );
    }
    if let Some(text) = fit(&name, w) {
        let ink = if b.arm.is_some() { "#fff" } else { "#222" };
        let _ = write!(
            o,
            "<text x=\"{:.1}\" y=\"{:.1}\" fill=\"{ink}\">{}</text>",
            x0 + 3.0,
            y + 13.0,
            esc(&text)
        );
    }
    o + "</g>"
}

/// A colour key's swatch.
fn swatch(fill: &str, edge: &str, words: &str) -> String {
    format!("<span style=\"display:inline-block;width:14px;height:10px;background:{fill};border:1px {edge};vertical-align:middle\"></span> {words} &nbsp;")
}

/// The lanes' timelines, one per invocation that recorded its schedule, or why there are none.
pub fn html(r: &CampaignResult, cks: &BTreeMap<String, Value>) -> String {
    let mut o = String::from("<h3 id=\"lane-timeline\">Timeline of the lanes</h3>");
    if r.schedule_timing.is_empty() {
        let _ = write!(
            o,
            "<p id=\"lane-timeline-none\">Not drawn: this bundle's {} has no <code>schedule_timing</code> (it was made before bakeoff recorded when each lane ran), so the lanes' runs have no common clock. The table above gives each arm's span from its lane's {}.</p>",
            bundle::RESULT,
            bundle::CHECKPOINT
        );
        return o;
    }
    let _ = write!(
        o,
        "<p>One timeline per invocation (a resume is an invocation of its own, on its own clock from the moment it began taking its lanes). Each lane run is outlined over its span as the run measured it ({} <code>schedule_timing</code>); inside it, the run's steps are laid end to end from its start by their wall times ({}), consecutive steps of one arm one bar. The time between steps and the work outside the plan's steps (a relaunch, the incumbent stopped again on a resume) is the lane's own bookkeeping and is not drawn, so a bar can sit earlier than it ran by up to that much: the outline's end is where the run really ended. Hover a bar for its times.</p><p>{}{}{}{}{}{}</p>",
        bundle::RESULT,
        bundle::CHECKPOINT,
        swatch(Outcome::Completed.color(), "solid transparent", "completed"),
        swatch(Outcome::Failed.color(), "solid transparent", "failed"),
        swatch(Outcome::Interrupted.color(), "solid transparent", "interrupted"),
        swatch(Outcome::Completed.color(), "dashed #222", "the control's copy (<code>&lt;arm&gt;.control</code>, hatched)"),
        swatch(NO_ARM, "solid transparent", "steps of no arm (the incumbent's stop, the restoration)"),
        swatch("#e6e6e6", "solid transparent", "no lane busy"),
    );
    for t in timelines(r, cks) {
        let s = &t.timing;
        let _ = write!(
            o,
            "<figure id=\"fig-lane-timeline-{}\">{}<figcaption>Invocation {0}: {} from taking the lanes to the merged result; some lane busy {}, no lane busy {} ({:.1} %).{}</figcaption></figure>",
            s.invocation,
            svg(&t),
            secs(s.wall_ms),
            secs(s.busy_ms),
            secs(s.no_lane_busy_ms),
            s.no_lane_busy_fraction * 100.0,
            t.runs
                .iter()
                .filter_map(|rb| rb.unplaced.as_ref().map(|w| format!(
                    " Run {}: steps not drawn: {}.",
                    esc(&rb.span.folder),
                    esc(w)
                )))
                .collect::<String>()
        );
    }
    let missing = unrecorded(r, cks);
    if !missing.is_empty() {
        let list: Vec<String> = missing.iter().map(u32::to_string).collect();
        let _ = write!(
            o,
            "<p id=\"lane-timeline-unrecorded\" data-invocations=\"{}\">Invocation(s) {} ran steps but recorded no schedule timing (a run killed before it sealed the bundle, a recovery, or a run made before it was recorded): their steps are in the table above only.</p>",
            list.join(","),
            list.join(", ")
        );
    }
    o
}

/// The invocations whose steps a lane's own checkpoint holds but `schedule_timing` does not
/// (a lane's own folder counts the bundle's invocations).
fn unrecorded(r: &CampaignResult, cks: &BTreeMap<String, Value>) -> Vec<u32> {
    let recorded: Vec<u32> = r.schedule_timing.iter().map(|t| t.invocation).collect();
    let mut out: Vec<u32> = r
        .lanes
        .iter()
        .filter(|l| l.moved_from.is_none())
        .filter_map(|l| cks.get(&l.folder))
        .flat_map(|ck| ck["steps"].as_array().into_iter().flatten())
        .filter(|s| s["wall_ms"].is_number())
        .filter_map(|s| u32::try_from(s["invocation"].as_u64()?).ok())
        .filter(|i| !recorded.contains(i))
        .collect();
    out.sort_unstable();
    out.dedup();
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::evidence::result::LaneRun;
    use serde_json::json;

    fn lane(id: &str, folder: &str, moved_from: Option<&str>) -> LaneRun {
        LaneRun {
            id: id.into(),
            folder: folder.into(),
            moved_from: moved_from.map(str::to_string),
            ..Default::default()
        }
    }

    fn run(lane: &str, folder: &str, start_ms: f64, end_ms: f64) -> RunSpan {
        RunSpan {
            lane: lane.into(),
            folder: folder.into(),
            start_ms,
            end_ms,
        }
    }

    fn step(n: u64, arm: Option<&str>, name: &str, status: &str, wall: f64, inv: u64) -> Value {
        json!({"number": n, "arm": arm, "step": name, "status": status, "wall_ms": wall,
               "finished_at": "2026-12-02T10:00:00Z", "invocation": inv})
    }

    /// Two lanes of one invocation: the incumbent's lane (its stop, inc, b failing, the
    /// restoration) and a qualification lane (the control's copy, then a interrupted).
    fn two_lanes() -> (CampaignResult, BTreeMap<String, Value>) {
        let r = CampaignResult {
            lanes: vec![lane("g0", "lanes/g0", None), lane("g1", "lanes/g1", None)],
            schedule_timing: vec![ScheduleTiming::of(
                1,
                10_000.0,
                vec![
                    run("g0", "lanes/g0", 200.0, 6000.0),
                    run("g1", "lanes/g1", 250.0, 5000.0),
                ],
            )],
            ..Default::default()
        };
        let g0 = json!({"steps": [
            step(1, None, "stop-incumbent", "done", 300.0, 1),
            step(2, Some("inc"), "launch", "done", 1000.0, 1),
            step(3, Some("inc"), "timing", "done", 500.0, 1),
            step(5, Some("b"), "ready", "skipped", 0.0, 1),
            step(4, Some("b"), "launch", "failed", 2000.0, 1),
            step(6, None, "restore-incumbent", "done", 400.0, 1),
            // Another invocation's step is not this one's.
            step(7, None, "restoration-identity", "done", 50.0, 2),
            {"number": 8, "arm": "b", "step": "stop", "status": "pending"},
        ]});
        let g1 = json!({"steps": [
            step(1, Some("inc.control"), "launch", "done", 700.0, 1),
            step(2, Some("inc.control"), "timing", "done", 300.0, 1),
            step(3, Some("a"), "launch", "done", 500.0, 1),
            step(4, Some("a"), "timing", "interrupted", 1000.0, 1),
        ]});
        let cks = [("lanes/g0".to_string(), g0), ("lanes/g1".to_string(), g1)].into();
        (r, cks)
    }

    fn placed(b: &Bar) -> (&str, &str, f64, f64, usize, Outcome, bool) {
        (
            b.lane.as_str(),
            b.label.as_str(),
            b.start_ms,
            b.end_ms,
            b.steps,
            b.outcome,
            b.control,
        )
    }

    #[test]
    fn each_runs_steps_are_laid_end_to_end_from_its_start() {
        let (r, cks) = two_lanes();
        let t = timelines(&r, &cks);
        assert_eq!(t.len(), 1);
        let t = &t[0];
        assert_eq!(t.rows, vec!["g0", "g1"]);
        let bars: Vec<_> = t.bars.iter().map(placed).collect();
        use Outcome::*;
        assert_eq!(
            bars,
            vec![
                ("g0", "stop-incumbent", 200.0, 500.0, 1, Completed, false),
                ("g0", "inc", 500.0, 2000.0, 2, Completed, false),
                ("g0", "b", 2000.0, 4000.0, 1, Failed, false),
                (
                    "g0",
                    "restore-incumbent",
                    4000.0,
                    4400.0,
                    1,
                    Completed,
                    false
                ),
                ("g1", "inc.control", 250.0, 1250.0, 2, Completed, true),
                ("g1", "a", 1250.0, 2750.0, 2, Interrupted, false),
            ]
        );
        assert_eq!(t.bars[0].arm, None);
        assert_eq!(t.bars[1].arm.as_deref(), Some("inc"));
        assert!(t.runs.iter().all(|r| r.unplaced.is_none()), "{:?}", t.runs);
        // Before the first run began, and after the last ended: no lane busy.
        assert_eq!(t.idle, vec![(0.0, 200.0), (6000.0, 10_000.0)]);
    }

    #[test]
    fn a_moved_run_sits_on_its_lanes_row_and_counts_its_own_invocations() {
        // g1 drained in invocation 2: its arms ran on g0 in lanes/g0.moved-1, made then (its own
        // invocation 1); the resume (invocation 3) went on there (its own invocation 2).
        let r = CampaignResult {
            lanes: vec![
                lane("g0", "lanes/g0", None),
                lane("g1", "lanes/g1", None),
                lane("g0", "lanes/g0.moved-1", Some("g1")),
            ],
            schedule_timing: vec![
                ScheduleTiming::of(
                    2,
                    4000.0,
                    vec![
                        run("g0", "lanes/g0", 0.0, 1000.0),
                        run("g1", "lanes/g1", 0.0, 400.0),
                        run("g0", "lanes/g0.moved-1", 1500.0, 3000.0),
                    ],
                ),
                ScheduleTiming::of(3, 1000.0, vec![run("g0", "lanes/g0.moved-1", 100.0, 900.0)]),
            ],
            ..Default::default()
        };
        let moved = json!({"steps": [
            step(1, Some("a"), "launch", "done", 1000.0, 1),
            step(2, Some("d"), "launch", "done", 500.0, 2),
        ]});
        let own = json!({"steps": [step(1, Some("inc"), "launch", "done", 800.0, 2)]});
        let cks: BTreeMap<String, Value> = [
            ("lanes/g0".to_string(), own),
            ("lanes/g1".to_string(), json!({"steps": []})),
            ("lanes/g0.moved-1".to_string(), moved),
        ]
        .into();
        let t = timelines(&r, &cks);
        assert_eq!(t.len(), 2);
        assert_eq!(t[0].rows, vec!["g0", "g1"]);
        let bars: Vec<_> = t[0].bars.iter().map(placed).collect();
        use Outcome::Completed;
        assert_eq!(
            bars,
            vec![
                ("g0", "inc", 0.0, 800.0, 1, Completed, false),
                ("g0", "a", 1500.0, 2500.0, 1, Completed, false),
            ]
        );
        assert_eq!(t[0].runs[2].moved_from.as_deref(), Some("g1"));
        // The gap while g1's arms waited for a free lane shows.
        assert_eq!(t[0].idle, vec![(1000.0, 1500.0), (3000.0, 4000.0)]);
        let bars: Vec<_> = t[1].bars.iter().map(placed).collect();
        assert_eq!(bars, vec![("g0", "d", 100.0, 600.0, 1, Completed, false)]);
        assert_eq!(t[1].idle, vec![(0.0, 100.0), (900.0, 1000.0)]);
    }

    #[test]
    fn steps_that_do_not_fit_their_run_or_a_missing_checkpoint_are_not_drawn() {
        let (mut r, mut cks) = two_lanes();
        // g0's steps add up to 4.2 s: a span of 1 s cannot hold them.
        r.schedule_timing[0].runs[0].end_ms = 1200.0;
        cks.remove("lanes/g1");
        let t = &timelines(&r, &cks)[0];
        assert!(t.bars.is_empty(), "{:?}", t.bars);
        let why = t.runs[0].unplaced.as_deref().unwrap();
        assert!(
            why.contains("add up to 4.20 s, more than its span of 1.00 s"),
            "{why}"
        );
        let why = t.runs[1].unplaced.as_deref().unwrap();
        assert!(why.contains("lanes/g1 has no readable"), "{why}");
    }

    #[test]
    fn the_page_draws_each_bar_with_its_data_or_says_why_there_is_none() {
        let (mut r, mut cks) = two_lanes();
        let page = html(&r, &cks);
        assert!(page.contains("<svg id=\"lane-timeline-1\""), "{page}");
        assert!(
            page.contains("<g class=\"tl-bar\" data-lane=\"g1\" data-folder=\"lanes/g1\" data-arm=\"inc.control\" data-start-ms=\"250.000\" data-end-ms=\"1250.000\" data-outcome=\"completed\" data-control=\"true\">"),
            "{page}"
        );
        assert!(page.contains("data-arm=\"b\" data-start-ms=\"2000.000\" data-end-ms=\"4000.000\" data-outcome=\"failed\""));
        assert!(page.contains("fill=\"url(#tl-hatch-1)\""));
        assert_eq!(page.matches("class=\"tl-idle\"").count(), 2);
        assert_eq!(page.matches("class=\"tl-run\"").count(), 2);
        // Invocation 2 ran a step in g0 but recorded no schedule: said.
        assert!(
            page.contains("<p id=\"lane-timeline-unrecorded\" data-invocations=\"2\">"),
            "{page}"
        );
        let g0 = cks.get_mut("lanes/g0").unwrap();
        g0["steps"].as_array_mut().unwrap().remove(6);
        let page = html(&r, &cks);
        assert!(!page.contains("lane-timeline-unrecorded"), "{page}");
        // A bundle made before the schedule was recorded: a note, no drawing.
        r.schedule_timing.clear();
        let page = html(&r, &cks);
        assert!(page.contains("id=\"lane-timeline-none\""), "{page}");
        assert!(!page.contains("<svg"), "{page}");
    }

    #[test]
    fn labels_fit_their_bar_and_the_axis_has_at_most_ten_ticks() {
        assert_eq!(fit("inc", 40.0).as_deref(), Some("inc"));
        assert_eq!(fit("inc.control (control)", 40.0).as_deref(), Some("inc.…"));
        assert_eq!(fit("inc", 10.0), None);
        for end in [50.0, 999.0, 8_500.0, 62_000.0, 3_600_000.0, 1e8] {
            let n = (end / tick_ms(end)).floor();
            assert!((1.0..=10.0).contains(&n) || end < 100.0, "{end}: {n}");
        }
    }
}
