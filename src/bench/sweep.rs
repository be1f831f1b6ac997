//! The level planner: which levels a run measures (a concurrency or rate list, a rate with a
//! concurrency cap, the saturation walk), and the saturation finder's verdict: the last level
//! that held and the first that broke.

use super::report::BenchReport;
pub use super::spec::Level;
use super::spec::LoadShape;
use serde_json::{json, Value};

/// Steps the saturation walk tries at most unless `max_steps` says otherwise.
pub const DEFAULT_MAX_STEPS: usize = 10;
/// Share of failed requests above which the saturation walk counts a level as broken.
pub const DEFAULT_MAX_FAILURE_SHARE: f64 = 0.05;

/// The load axis: concurrency levels or rate levels.
pub fn axis(s: &LoadShape) -> &'static str {
    if s.rate.is_empty() {
        "concurrency"
    } else {
        "rate"
    }
}

/// The closed loop's levels (concurrency 1 when none is given).
pub fn concurrency_levels(s: &LoadShape) -> Vec<usize> {
    if s.concurrency.is_empty() {
        vec![1]
    } else {
        s.concurrency.clone()
    }
}

/// Whether this run measures (or may measure) more than one level.
pub fn is_sweep(s: &LoadShape) -> bool {
    s.find_saturation || s.rate.len() > 1 || concurrency_levels(s).len() > 1
}

fn level_value(l: &Level) -> f64 {
    l.rate.unwrap_or(l.concurrency as f64)
}

fn level_of(s: &LoadShape, value: f64) -> Level {
    match s.rate.is_empty() {
        true => Level {
            concurrency: value as usize,
            rate: None,
            max_in_flight: None,
        },
        false => Level {
            concurrency: 1,
            rate: Some(value),
            max_in_flight: s.max_concurrency,
        },
    }
}

fn given_values(s: &LoadShape) -> Vec<f64> {
    match s.rate.is_empty() {
        true => concurrency_levels(s)
            .into_iter()
            .map(|c| c as f64)
            .collect(),
        false => s.rate.clone(),
    }
}

/// Why a finished level counts as broken for the saturation walk (None: it held).
pub fn broken(s: &LoadShape, r: &BenchReport) -> Option<String> {
    let mut why = Vec::new();
    for c in r.slo.iter().flat_map(|v| &v.checks) {
        if !c.check.met {
            why.push(c.text.clone());
        }
    }
    let n = r.stats.ok + r.stats.failed;
    let share = s.max_failure_share.unwrap_or(DEFAULT_MAX_FAILURE_SHARE);
    if n == 0 {
        why.push("no request completed".into());
    } else if r.stats.failed as f64 > share * n as f64 {
        why.push(format!(
            "{} of {n} requests failed (over the {}% allowed by --max-failure-share)",
            r.stats.failed,
            share * 100.0
        ));
    }
    (!why.is_empty()).then(|| why.join("; "))
}

/// The next level to measure after `done`, or None when the run is over.
pub fn next_level(s: &LoadShape, done: &[BenchReport]) -> Option<Level> {
    let given = given_values(s);
    if done.last().is_some_and(|r| r.interrupted) {
        return None;
    }
    if !s.find_saturation {
        return given.get(done.len()).map(|&v| level_of(s, v));
    }
    if stop_reason(s, done).is_some() {
        return None;
    }
    next_value(s, done).map(|v| level_of(s, v))
}

fn next_value(s: &LoadShape, done: &[BenchReport]) -> Option<f64> {
    let given = given_values(s);
    if given.len() > 1 {
        return given.get(done.len()).copied();
    }
    match done.last() {
        None => Some(given[0]),
        Some(r) => Some(level_value(&r.level()) * 2.0),
    }
}

/// Why the saturation walk stops after `done` (None: it goes on).
pub fn stop_reason(s: &LoadShape, done: &[BenchReport]) -> Option<String> {
    let last = done.last()?;
    if last.interrupted {
        return Some("interrupted".into());
    }
    if let Some(why) = broken(s, last) {
        return Some(format!("broke: {why}"));
    }
    let steps = s.max_steps.unwrap_or(DEFAULT_MAX_STEPS);
    if done.len() >= steps {
        return Some(format!(
            "no level broke within --max-steps {steps} (raise it to go further)"
        ));
    }
    match next_value(s, done) {
        None => Some("no level of the list given broke".into()),
        Some(v) => match s.max_level {
            Some(m) if v > m => Some(format!(
                "no level broke up to --max-level {m} (the next, {v}, is above it)"
            )),
            _ => None,
        },
    }
}

/// `rate 2/s` or `concurrency 4`.
pub fn level_name(r: &BenchReport) -> String {
    let l = r.level();
    match l.rate {
        Some(rate) => format!("rate {rate}/s"),
        None => format!("concurrency {}", l.concurrency),
    }
}

/// The label of a level in messages (empty for a single level).
pub fn level_label(done: &[BenchReport], r: &BenchReport) -> String {
    match done.len() {
        1 => String::new(),
        _ => format!(" at {}", level_name(r)),
    }
}

/// The index of the last level that held and of the first that broke.
pub fn held_and_broken(s: &LoadShape, done: &[BenchReport]) -> (Option<usize>, Option<usize>) {
    let first_broken = done.iter().position(|r| broken(s, r).is_some());
    let held = match first_broken {
        Some(i) => i.checked_sub(1),
        None => done.len().checked_sub(1),
    };
    (held, first_broken)
}

/// The saturation walk's summary (`--json`'s `saturation`): the last level that held, the
/// first that broke, why the walk stopped; None without the walk.
pub fn saturation(s: &LoadShape, done: &[BenchReport]) -> Option<Value> {
    if !s.find_saturation {
        return None;
    }
    let (held, first_broken) = held_and_broken(s, done);
    let summary = |i: usize| {
        let r = &done[i];
        json!({
            "index": i,
            "level": level_value(&r.level()),
            "ok": r.stats.ok,
            "failed": r.stats.failed,
            "request_rate_per_s": r.stats.request_rate_per_s,
            "aggregate_output_tok_s": r.stats.aggregate_output_tok_s,
            "goodput": r.goodput,
            "slo": r.slo.as_ref().map(|v| &v.checks),
            "broken_because": broken(s, r),
        })
    };
    Some(json!({
        "axis": axis(s),
        "levels_tried": done.len(),
        "last_held": held.map(summary),
        "first_broken": first_broken.map(summary),
        "stopped_because": stop_reason(s, done),
        "max_steps": s.max_steps.unwrap_or(DEFAULT_MAX_STEPS),
        "max_level": s.max_level,
        "max_failure_share": s.max_failure_share.unwrap_or(DEFAULT_MAX_FAILURE_SHARE),
    }))
}

/// The levels at which an SLO broke (with the walk: only the first level counts).
pub fn slo_broken_levels(s: &LoadShape, done: &[BenchReport]) -> Vec<String> {
    let broke = |r: &&BenchReport| r.slo.as_ref().is_some_and(|v| !v.met);
    match s.find_saturation {
        true => done
            .first()
            .filter(broke)
            .map(level_name)
            .into_iter()
            .collect(),
        false => done.iter().filter(broke).map(level_name).collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bench::report::{LoadMode, LoadRecord};
    use crate::bench::slo::{CheckLine, SloVerdict};
    use crate::metrics::slo::{SloCheck, SloLimit};
    use crate::metrics::summary::Collector;

    /// A finished level at `rate` (open loop) whose SLO held or broke.
    fn level(rate: f64, met: bool) -> BenchReport {
        let mut stats = Collector::default().summarize(1);
        stats.ok = 10;
        let limit = SloLimit::parse("ttft_p95=100ms").unwrap();
        let check = SloCheck {
            limit,
            observed_ms: Some(if met { 50.0 } else { 150.0 }),
            met,
        };
        BenchReport {
            bakeoff_version: crate::VERSION,
            tool: "bakeoff bench",
            started_at: String::new(),
            url: String::new(),
            model: String::new(),
            endpoint: crate::workload::Endpoint::Chat,
            sampling: Default::default(),
            load: LoadRecord {
                mode: LoadMode::OpenLoop,
                rate_per_s: Some(rate),
                max_concurrency: Some(4),
                ..Default::default()
            },
            prompt: serde_json::Value::Null,
            interrupted: false,
            arrival_clock: serde_json::Value::Null,
            warnings: vec![],
            tls: None,
            workload: None,
            trace: None,
            stats,
            slo: Some(SloVerdict {
                met,
                checks: vec![CheckLine {
                    text: check.to_string(),
                    check,
                }],
            }),
            goodput: None,
            points: vec![],
        }
    }

    #[test]
    fn the_saturation_walk_doubles_the_rate_with_its_cap_until_an_slo_breaks() {
        let shape = LoadShape {
            rate: vec![1.0],
            max_concurrency: Some(4),
            find_saturation: true,
            ..Default::default()
        };
        assert!(is_sweep(&shape));
        let first = next_level(&shape, &[]).unwrap();
        assert_eq!(
            (first.rate, first.max_in_flight, first.concurrency),
            (Some(1.0), Some(4), 1)
        );
        let done = vec![level(1.0, true), level(2.0, true)];
        assert_eq!(next_level(&shape, &done).unwrap().rate, Some(4.0));
        let done = vec![level(1.0, true), level(2.0, true), level(4.0, false)];
        assert_eq!(next_level(&shape, &done), None);
        assert_eq!(held_and_broken(&shape, &done), (Some(1), Some(2)));
        let why = stop_reason(&shape, &done).unwrap();
        assert!(why.starts_with("broke: ttft p95 <= 100 ms"), "{why}");
        let s = saturation(&shape, &done).unwrap();
        assert_eq!(s["last_held"]["level"], 2.0);
        assert_eq!(s["first_broken"]["level"], 4.0);
        assert_eq!(slo_broken_levels(&shape, &done), Vec::<String>::new());
        // Without the walk, the list given is the plan, and every broken level counts.
        let list = LoadShape {
            rate: vec![1.0, 4.0],
            ..Default::default()
        };
        assert_eq!(next_level(&list, &done[..2]), None);
        assert_eq!(slo_broken_levels(&list, &done), vec!["rate 4/s"]);
        // A max_steps bound stops the walk before it breaks.
        let bounded = LoadShape {
            max_steps: Some(2),
            ..shape
        };
        assert_eq!(next_level(&bounded, &done[..2]), None);
    }
}
