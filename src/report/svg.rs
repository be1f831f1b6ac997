//! Minimal hand-written SVG charts: linear axes, points with error bars, step lines, bars.
//! Every chart is a self-contained `<svg>` element (no scripts, no external references).

use std::fmt::Write as _;

pub const COLORS: &[&str] = &[
    "#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f",
    "#bcbd22", "#17becf", "#393b79", "#637939",
];

pub fn color(i: usize) -> &'static str {
    COLORS[i % COLORS.len()]
}

pub fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// A chart frame: plot area, axis ranges and labels.
pub struct Chart {
    pub w: f64,
    pub h: f64,
    pub left: f64,
    pub right: f64,
    pub top: f64,
    pub bottom: f64,
    pub x: (f64, f64),
    pub y: (f64, f64),
    pub body: String,
}

/// A "nice" range covering [lo, hi] with some headroom.
pub fn nice(lo: f64, hi: f64, from_zero: bool) -> (f64, f64) {
    let (mut lo, mut hi) = if lo.is_finite() && hi.is_finite() {
        (lo, hi)
    } else {
        (0.0, 1.0)
    };
    if from_zero {
        lo = lo.min(0.0);
    }
    if hi <= lo {
        hi = lo + 1.0;
    }
    let pad = (hi - lo) * 0.08;
    (if from_zero { lo } else { lo - pad }, hi + pad)
}

impl Chart {
    pub fn new(x: (f64, f64), y: (f64, f64)) -> Chart {
        Chart {
            w: 560.0,
            h: 340.0,
            left: 64.0,
            right: 180.0,
            top: 20.0,
            bottom: 48.0,
            x,
            y,
            body: String::new(),
        }
    }
    pub fn px(&self, x: f64) -> f64 {
        let span = (self.x.1 - self.x.0).max(f64::EPSILON);
        self.left + (x - self.x.0) / span * (self.w - self.left - self.right)
    }
    pub fn py(&self, y: f64) -> f64 {
        let span = (self.y.1 - self.y.0).max(f64::EPSILON);
        self.h - self.bottom - (y - self.y.0) / span * (self.h - self.top - self.bottom)
    }
    pub fn point(&mut self, x: f64, y: f64, c: &str, title: &str) {
        let _ = write!(
            self.body,
            r#"<circle class="pt" cx="{:.1}" cy="{:.1}" r="4.5" fill="{c}"><title>{}</title></circle>"#,
            self.px(x),
            self.py(y),
            esc(title)
        );
    }
    pub fn line(&mut self, x1: f64, y1: f64, x2: f64, y2: f64, c: &str) {
        let _ = write!(
            self.body,
            r#"<line x1="{:.1}" y1="{:.1}" x2="{:.1}" y2="{:.1}" stroke="{c}" stroke-width="1.5"/>"#,
            self.px(x1),
            self.py(y1),
            self.px(x2),
            self.py(y2)
        );
    }
    pub fn polyline(&mut self, pts: &[(f64, f64)], c: &str, title: &str) {
        let p: Vec<String> = pts
            .iter()
            .map(|(x, y)| format!("{:.1},{:.1}", self.px(*x), self.py(*y)))
            .collect();
        let _ = write!(
            self.body,
            r#"<polyline class="series" fill="none" stroke="{c}" stroke-width="2" points="{}"><title>{}</title></polyline>"#,
            p.join(" "),
            esc(title)
        );
    }
    pub fn rect(&mut self, x0: f64, x1: f64, y: f64, c: &str, title: &str) {
        let (a, b) = (self.px(x0), self.px(x1));
        let (top, base) = (self.py(y), self.py(self.y.0.max(0.0)));
        let _ = write!(
            self.body,
            r#"<rect class="bar" x="{:.1}" y="{:.1}" width="{:.1}" height="{:.1}" fill="{c}"><title>{}</title></rect>"#,
            a.min(b),
            top.min(base),
            (b - a).abs(),
            (base - top).abs(),
            esc(title)
        );
    }
    /// Axes, ticks, labels and a legend; returns the whole `<svg>`.
    pub fn finish(
        &self,
        xlabel: &str,
        ylabel: &str,
        legend: &[(String, &str)],
        aria: &str,
    ) -> String {
        let mut s = format!(
            r#"<svg xmlns="http://www.w3.org/2000/svg" role="img" aria-label="{}" width="{}" height="{}" viewBox="0 0 {} {}" font-family="sans-serif" font-size="11">"#,
            esc(aria),
            self.w,
            self.h,
            self.w,
            self.h
        );
        let (x0, x1, y0, y1) = (
            self.left,
            self.w - self.right,
            self.top,
            self.h - self.bottom,
        );
        let _ = write!(
            s,
            r##"<rect x="{x0}" y="{y0}" width="{}" height="{}" fill="#fafafa" stroke="#999"/>"##,
            x1 - x0,
            y1 - y0
        );
        for i in 0..=4 {
            let f = i as f64 / 4.0;
            let xv = self.x.0 + f * (self.x.1 - self.x.0);
            let yv = self.y.0 + f * (self.y.1 - self.y.0);
            let (xp, yp) = (self.px(xv), self.py(yv));
            let _ = write!(
                s,
                r##"<line x1="{xp:.1}" y1="{y0}" x2="{xp:.1}" y2="{y1}" stroke="#e4e4e4"/><text x="{xp:.1}" y="{:.1}" text-anchor="middle">{}</text>"##,
                y1 + 14.0,
                tick(xv)
            );
            let _ = write!(
                s,
                r##"<line x1="{x0}" y1="{yp:.1}" x2="{x1}" y2="{yp:.1}" stroke="#e4e4e4"/><text x="{:.1}" y="{:.1}" text-anchor="end">{}</text>"##,
                x0 - 4.0,
                yp + 4.0,
                tick(yv)
            );
        }
        let _ = write!(
            s,
            r#"<text x="{:.1}" y="{:.1}" text-anchor="middle">{}</text><text transform="translate(14 {:.1}) rotate(-90)" text-anchor="middle">{}</text>"#,
            (x0 + x1) / 2.0,
            self.h - 10.0,
            esc(xlabel),
            (y0 + y1) / 2.0,
            esc(ylabel)
        );
        s.push_str(&self.body);
        for (i, (name, c)) in legend.iter().enumerate() {
            let ly = y0 + 8.0 + i as f64 * 15.0;
            let short: String = name.chars().take(28).collect();
            let _ = write!(
                s,
                r#"<rect x="{:.1}" y="{:.1}" width="10" height="10" fill="{c}"/><text x="{:.1}" y="{:.1}">{}</text>"#,
                x1 + 8.0,
                ly - 8.0,
                x1 + 22.0,
                ly + 1.0,
                esc(&short)
            );
        }
        s.push_str("</svg>");
        s
    }
}

fn tick(v: f64) -> String {
    if v.abs() >= 100.0 || v == v.round() {
        format!("{v:.0}")
    } else if v.abs() >= 1.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.2}")
    }
}
