//! What the history says about a run just added: each arm's figures today against its own last
//! runs on the same GPU and lane. It informs the verdict's limitations, never its ranking.

use super::series::{higher_is_better, unit, Series};

/// How many earlier runs an arm's line compares against.
pub const LOOKBACK: usize = 8;
/// Fewer earlier runs than this: no line (a spread of two runs says little).
pub const MIN_HISTORY: usize = 3;

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
}

impl Line {
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
            "{} `{}` {} today {} {u}; its last {} runs on this GPU and lane {}–{} {u}: {:+.0} %, {}",
            self.role,
            self.arm,
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
        let beyond = today.value < lo || today.value > hi;
        let worse = if higher_is_better(&s.key.figure) {
            today.value < lo
        } else {
            today.value > hi
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
        });
    }
    out
}

/// The lanes whose control (the incumbent, or an arm with the `control` role) is beyond its own
/// history: every arm measured there that day shares the drift.
pub fn drifting_lanes(series: &[Series], lines: &[Line]) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for l in lines
        .iter()
        .filter(|l| l.beyond && (l.role == "incumbent" || l.role == "control"))
    {
        if let Some(s) = series
            .iter()
            .find(|s| s.key.arm() == l.arm && s.key.figure == l.figure)
        {
            let what = format!(
                "lane {}: its {} `{}` drifts from its own history ({} {:+.0} %)",
                s.key.lane, l.role, l.arm, l.figure, l.pct
            );
            if !out
                .iter()
                .any(|o| o.starts_with(&format!("lane {}:", s.key.lane)))
            {
                out.push(what);
            }
        }
    }
    out
}

/// The verdict's limitation lines: each `@c1` figure of an arm beyond its history's spread (the
/// figures the run prints), one line for an arm whose figures all lie within it, and each lane
/// whose control drifts. Arms without enough history get none.
pub fn verdict_lines(lines: &[Line], drifting: &[String]) -> Vec<String> {
    let mut out = Vec::new();
    let mut arms: Vec<(&str, &str)> = Vec::new();
    for l in lines {
        if !arms.iter().any(|(a, _)| *a == l.arm) {
            arms.push((&l.arm, &l.role));
        }
    }
    for (arm, role) in arms {
        let mine: Vec<&Line> = lines
            .iter()
            .filter(|l| l.arm == arm && l.figure.ends_with("@c1"))
            .collect();
        let beyond: Vec<&&Line> = mine.iter().filter(|l| l.beyond).collect();
        if beyond.is_empty() {
            if let Some(l) = mine.first() {
                out.push(format!(
                    "History: {role} `{arm}`: its {} single-stream figures today lie within its last {} runs on this GPU and lane.",
                    mine.len(),
                    l.runs
                ));
            }
        }
        out.extend(beyond.iter().map(|l| format!("History: {}.", l.text())));
    }
    out.extend(drifting.iter().map(|d| {
        format!("History: {d}; every arm measured there today shares the drift, so compare them with that in mind.")
    }));
    out
}
