//! What the history says about a run just added: each arm's figures today against its own last
//! runs on the same GPU and lane. It informs the verdict's limitations, never its ranking.

use super::series::{higher_is_better, unit, Series};

/// How many earlier runs an arm's line compares against.
pub const LOOKBACK: usize = 8;
/// Fewer earlier runs than this: no line (a spread of two runs says little).
pub const MIN_HISTORY: usize = 3;
/// How far outside its history's range (a fraction of the history's median) a figure must lie
/// to be "beyond its history's spread".
pub const MARGIN: f64 = 0.02;

/// One arm's figure today against its history.
#[derive(Debug, Clone, PartialEq)]
pub struct Line {
    pub arm: String,
    pub role: String,
    pub figure: String,
    pub today: f64,
    pub runs: usize,
    pub lo: f64,
    pub hi: f64,
    /// Today against the history's median, percent.
    pub pct: f64,
    /// Today lies outside the history's range of values.
    pub beyond: bool,
    /// Outside it in the worse direction.
    pub worse: bool,
    /// The series' lane.
    pub lane: String,
    /// Name the lane in the text: the run's arms ran on several lanes (a multi-lane bundle,
    /// where each lane's control copy has the same name).
    pub name_lane: bool,
}

impl Line {
    /// ` on lane HOST:PORT` when the lane is named, else nothing.
    fn on(&self) -> String {
        if self.name_lane {
            format!(" on lane {}", self.lane)
        } else {
            String::new()
        }
    }

    /// `incumbent `inc` ttft_p50@c1 today 51 ms; its last 8 runs on this GPU and lane 47–48 ms:
    /// +7 %, beyond its history's spread`
    pub fn text(&self) -> String {
        let u = unit(&self.figure);
        let f = |v: f64| {
            if v.abs() >= 100.0 {
                format!("{v:.0}")
            } else {
                format!("{v:.1}")
            }
        };
        format!(
            "{} `{}`{} {} today {} {u}; its last {} runs on this GPU and lane {}–{} {u}: {:+.0} %, {}",
            self.role,
            self.arm,
            self.on(),
            self.figure,
            f(self.today),
            self.runs,
            f(self.lo),
            f(self.hi),
            self.pct,
            if self.beyond {
                "beyond its history's spread"
            } else {
                "within its history's spread"
            }
        )
    }
}

/// The lines for the run `digest` over the series it is in (each oldest first).
pub fn lines(series: &[Series], digest: &str) -> Vec<Line> {
    let mut out = Vec::new();
    for s in series {
        let Some(i) = s.points.iter().position(|p| p.digest == digest) else {
            continue;
        };
        let earlier = &s.points[i.saturating_sub(LOOKBACK)..i];
        if earlier.len() < MIN_HISTORY {
            continue;
        }
        let today = &s.points[i];
        let mut v: Vec<f64> = earlier.iter().map(|p| p.value).collect();
        v.sort_by(|a, b| a.total_cmp(b));
        let (lo, hi) = (v[0], v[v.len() - 1]);
        let med = v[v.len() / 2];
        let pct = (today.value - med) / med.abs().max(f64::MIN_POSITIVE) * 100.0;
        // Beyond the range by more than MARGIN of the median: a tight history (a reference
        // engine's runs agree to 0.1 %) must not turn a 0.1 % wobble into a limitation. A
        // figure with an interval today is beyond only when the whole interval is; one without
        // (aggregate throughput) has no noise of its own to show, so it must also lie outside by
        // more than the range's own width (CI once saw a 12-token step's -5 % called beyond).
        let m = MARGIN * med.abs();
        let (t_lo, t_hi, m) = match (today.lo, today.hi) {
            (Some(a), Some(b)) if a.is_finite() && b.is_finite() => (a.min(b), a.max(b), m),
            _ => (today.value, today.value, m + (hi - lo)),
        };
        let (below, above) = (t_hi < lo - m, t_lo > hi + m);
        let beyond = below || above;
        let worse = if higher_is_better(&s.key.figure) {
            below
        } else {
            above
        };
        out.push(Line {
            arm: s.key.arm().to_string(),
            role: today.role.clone(),
            figure: s.key.figure.clone(),
            today: today.value,
            runs: earlier.len(),
            lo,
            hi,
            pct,
            beyond,
            worse,
            lane: s.key.lane.clone(),
            name_lane: false,
        });
    }
    out
}

/// The lanes whose control (the incumbent, an arm with the `control` role, or a lane's control
/// copy) is beyond its own history: every arm measured there that day shares the drift.
pub fn drifting_lanes(lines: &[Line]) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for l in lines
        .iter()
        .filter(|l| l.beyond && (l.role == "incumbent" || l.role == "control"))
    {
        let what = format!(
            "lane {}: its {} `{}` drifts from its own history ({} {:+.0} %)",
            l.lane, l.role, l.arm, l.figure, l.pct
        );
        if !out
            .iter()
            .any(|o| o.starts_with(&format!("lane {}:", l.lane)))
        {
            out.push(what);
        }
    }
    out
}

/// The verdict's limitation lines: each `@c1` figure of an arm beyond its history's spread (the
/// figures the run prints), then each lane whose control drifts. A figure within its spread is
/// no limitation: it says the run looks like its history ([`informational_lines`]). Arms without
/// enough history get none.
pub fn verdict_lines(lines: &[Line], drifting: &[String]) -> Vec<String> {
    let mut out: Vec<String> = lines
        .iter()
        .filter(|l| l.beyond && l.figure.ends_with("@c1"))
        .map(|l| format!("History: {}.", l.text()))
        .collect();
    out.extend(drifting.iter().map(|d| {
        format!("History: {d}; every arm measured there today shares the drift, so compare them with that in mind.")
    }));
    out
}

/// One line per arm whose `@c1` figures lie (some or all) within its history's spread: shown
/// beside the trend link and printed, never a limitation of the verdict.
pub fn informational_lines(lines: &[Line]) -> Vec<String> {
    // One per arm and lane (a lane's control copy has the same name on every lane).
    let mut arms: Vec<&Line> = Vec::new();
    for l in lines {
        if !arms.iter().any(|a| a.arm == l.arm && a.lane == l.lane) {
            arms.push(l);
        }
    }
    let mut out = Vec::new();
    for first in arms {
        let (arm, role) = (&first.arm, &first.role);
        let mine: Vec<&Line> = lines
            .iter()
            .filter(|l| l.arm == *arm && l.lane == first.lane && l.figure.ends_with("@c1"))
            .collect();
        let within: Vec<&&Line> = mine.iter().filter(|l| !l.beyond).collect();
        let Some(l) = within.first() else { continue };
        let names: Vec<&str> = within.iter().map(|l| l.figure.as_str()).collect();
        let which = match (within.len() == mine.len(), within.len()) {
            (true, 1) => format!("its single-stream figure ({}) today lies", names[0]),
            (true, n) => format!("its {n} single-stream figures today lie"),
            (false, 1) => format!("its other single-stream figure ({}) today lies", names[0]),
            (false, _) => format!(
                "its other single-stream figures ({}) today lie",
                names.join(", ")
            ),
        };
        out.push(format!(
            "History: {role} `{arm}`{}: {which} within its last {} runs on this GPU and lane.",
            first.on(),
            l.runs
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::history::series::{Key, Point};

    /// A series of `arm`'s `figure` on one lane: the earlier runs' values, then today's (`d-now`).
    fn series(arm: &str, role: &str, figure: &str, earlier: &[f64], today: f64) -> Series {
        let point = |i: usize, v: f64| Point {
            digest: if i == earlier.len() {
                "d-now".into()
            } else {
                format!("d-{i}")
            },
            campaign_id: "c".into(),
            started_at: format!("2026-11-{:02}T00:00:00Z", i + 1),
            path: String::new(),
            role: role.into(),
            value: v,
            lo: None,
            hi: None,
            n: 8,
            facts: Default::default(),
        };
        let mut points: Vec<Point> = earlier
            .iter()
            .enumerate()
            .map(|(i, v)| point(i, *v))
            .collect();
        points.push(point(earlier.len(), today));
        Series {
            key: Key {
                figure: figure.into(),
                recipe: format!("{arm}|vllm|m||"),
                gpu_model: "NVIDIA H200".into(),
                lane: "10.0.0.5:8000".into(),
            },
            points,
        }
    }

    const LAST8: [f64; 10] = [30.0, 30.0, 47.0, 47.5, 48.0, 47.2, 47.8, 47.4, 47.6, 47.3];

    #[test]
    fn a_figure_beyond_its_spread_is_a_limitation_in_the_issues_words() {
        let s = [
            series("inc", "incumbent", "ttft_p50@c1", &LAST8, 51.0),
            series(
                "inc",
                "incumbent",
                "decode_tok_s_p50@c1",
                &[400.0, 401.0, 399.0],
                400.5,
            ),
            series(
                "cand",
                "candidate",
                "ttft_p50@c1",
                &[40.0, 41.0, 40.5],
                40.7,
            ),
            // A concurrency level beyond its spread is printed in the store's terms, not a limitation.
            series(
                "cand",
                "candidate",
                "ttft_p50@c4",
                &[60.0, 61.0, 60.5],
                90.0,
            ),
        ];
        let ls = lines(&s, "d-now");
        let inc = &ls[0];
        // Only the last 8 runs count: the two 30 ms runs before them are not its spread.
        assert_eq!((inc.runs, inc.lo, inc.hi), (8, 47.0, 48.0));
        assert!(inc.beyond && inc.worse);
        assert_eq!(
            inc.text(),
            "incumbent `inc` ttft_p50@c1 today 51.0 ms; its last 8 runs on this GPU and lane 47.0–48.0 ms: +7 %, beyond its history's spread"
        );
        let drift = drifting_lanes(&ls);
        assert_eq!(
            drift,
            ["lane 10.0.0.5:8000: its incumbent `inc` drifts from its own history (ttft_p50@c1 +7 %)"]
        );
        let v = verdict_lines(&ls, &drift);
        assert_eq!(
            v,
            [
                "History: incumbent `inc` ttft_p50@c1 today 51.0 ms; its last 8 runs on this GPU and lane 47.0–48.0 ms: +7 %, beyond its history's spread.",
                "History: lane 10.0.0.5:8000: its incumbent `inc` drifts from its own history (ttft_p50@c1 +7 %); every arm measured there today shares the drift, so compare them with that in mind.",
            ]
        );
        // Within the spread: informational only, never in the verdict.
        assert_eq!(
            informational_lines(&ls),
            [
                "History: incumbent `inc`: its other single-stream figure (decode_tok_s_p50@c1) today lies within its last 3 runs on this GPU and lane.",
                "History: candidate `cand`: its single-stream figure (ttft_p50@c1) today lies within its last 3 runs on this GPU and lane.",
            ]
        );
        assert!(v.iter().all(|l| !l.contains("within")));
    }

    #[test]
    fn a_figure_just_outside_a_tight_range_is_within_the_margin() {
        // A reference engine's runs agree to 0.1 %: 60.2 against 60.25–60.3 is not a change.
        let s = [series(
            "cand",
            "candidate",
            "ttft_p50@c1",
            &[60.25, 60.3, 60.28],
            60.2,
        )];
        let ls = lines(&s, "d-now");
        assert_eq!(ls.len(), 1);
        assert!(!ls[0].beyond && !ls[0].worse, "{:?}", ls[0]);
        assert!(verdict_lines(&ls, &[]).is_empty());
        // 2 % of the median past the range is beyond it.
        let s = [series(
            "cand",
            "candidate",
            "ttft_p50@c1",
            &[60.25, 60.3, 60.28],
            61.6,
        )];
        assert!(lines(&s, "d-now")[0].beyond);
    }

    #[test]
    fn an_interval_today_must_clear_the_range_and_a_figure_without_one_the_range_width() {
        let with = |today: f64, lo: f64, hi: f64| {
            let mut s = series("c", "candidate", "ttft_p50@c1", &[50.0, 51.0, 50.5], today);
            let p = s.points.last_mut().unwrap();
            (p.lo, p.hi) = (Some(lo), Some(hi));
            lines(&[s], "d-now")[0].beyond
        };
        // 54 ms is beyond 50–51 (+ 1 ms margin) but its interval reaches back into it.
        assert!(!with(54.0, 51.5, 56.0));
        assert!(with(54.0, 52.5, 56.0));
        // No interval (aggregate throughput): outside by the margin plus the range's width.
        let agg = |today: f64| {
            let s = series(
                "c",
                "candidate",
                "aggregate_tok_s@c1",
                &[95.0, 100.0, 98.0],
                today,
            );
            lines(&[s], "d-now")[0].clone()
        };
        // 98 ± 2 % margin is 93.04; the range is 5 wide: 89 is not beyond, 87 is (and worse).
        assert!(!agg(89.0).beyond);
        let l = agg(87.0);
        assert!(l.beyond && l.worse);
    }

    #[test]
    fn a_candidate_beyond_its_spread_names_no_lane_and_short_histories_say_nothing() {
        let s = [
            series(
                "cand",
                "candidate",
                "ttft_p50@c1",
                &[40.0, 41.0, 40.5],
                35.0,
            ),
            // Two earlier runs: below MIN_HISTORY, no line at all.
            series("inc", "incumbent", "ttft_p50@c1", &[47.0, 48.0], 90.0),
        ];
        let ls = lines(&s, "d-now");
        assert_eq!(ls.len(), 1);
        // Faster than ever is beyond its spread too (not worse): still a limitation, no drift.
        assert!(ls[0].beyond && !ls[0].worse);
        let drift = drifting_lanes(&ls);
        assert!(drift.is_empty());
        let v = verdict_lines(&ls, &drift);
        assert_eq!(v.len(), 1);
        assert!(
            v[0].starts_with(
                "History: candidate `cand` ttft_p50@c1 today 35.0 ms; its last 3 runs"
            ),
            "{v:?}"
        );
        assert!(
            v[0].ends_with("-14 %, beyond its history's spread."),
            "{v:?}"
        );
        assert!(informational_lines(&ls).is_empty());
        // A run not in the series has no line.
        assert!(lines(&s, "d-other").is_empty());
    }

    /// A multi-lane run: the control's copy `inc.control` on two lanes under one name. The lane
    /// whose copy drifts is the one named, each line names its lane, and each lane's copy has
    /// its own informational line.
    #[test]
    fn copies_on_two_lanes_are_told_apart_by_their_lane() {
        let on = |lane: &str, today: f64| {
            let mut s = series(
                "inc.control",
                "control",
                "ttft_p50@c1",
                &[60.0, 60.1, 60.05],
                today,
            );
            s.key.lane = lane.into();
            s
        };
        let s = [on("127.0.0.1:9001", 60.02), on("127.0.0.1:9002", 75.0)];
        let mut ls = lines(&s, "d-now");
        for l in ls.iter_mut() {
            l.name_lane = true;
        }
        assert_eq!(ls.len(), 2);
        assert!(!ls[0].beyond && ls[1].beyond);
        assert!(
            ls[1].text().starts_with(
                "control `inc.control` on lane 127.0.0.1:9002 ttft_p50@c1 today 75.0 ms;"
            ),
            "{}",
            ls[1].text()
        );
        assert_eq!(
            drifting_lanes(&ls),
            ["lane 127.0.0.1:9002: its control `inc.control` drifts from its own history (ttft_p50@c1 +25 %)"]
        );
        assert_eq!(
            informational_lines(&ls),
            ["History: control `inc.control` on lane 127.0.0.1:9001: its single-stream figure (ttft_p50@c1) today lies within its last 3 runs on this GPU and lane."]
        );
    }
}
