//! `bakeoff bench`'s load shapes: which levels a run measures (a `--concurrency` or `--rate`
//! sweep, a rate with a `--max-concurrency` cap, the `--find-saturation` walk), warm-up by time,
//! and the `--slo` verdict and goodput of each level.
//!
//! `bench.rs` keeps the flags of one load and runs each level; this module decides the levels,
//! judges each finished level and sums a sweep up.

use super::bench_output::BenchReport;
use crate::client::Trace;
use crate::load::session::{Reads, Sink};
use crate::load::RunWindow;
use crate::metrics::slo::{self, SloLimit};
use crate::metrics::summary::{Collector, RunStats};
use crate::metrics::RequestMetrics;
use anyhow::{bail, Result};
use clap::Args;
use serde_json::{json, Value};

/// Steps `--find-saturation` tries at most unless `--max-steps` says otherwise.
pub const DEFAULT_MAX_STEPS: usize = 10;
/// Share of failed requests above which `--find-saturation` counts a level as broken.
pub const DEFAULT_MAX_FAILURE_SHARE: f64 = 0.05;

#[derive(Args, Debug, Clone, Default)]
pub struct LoadShapeArgs {
    /// With --rate: open-loop arrivals, but at most this many requests in flight. A request
    /// whose start time comes while the cap is full waits for a slot; the wait is reported as
    /// schedule lag (and counted), never as server latency: TTFT runs from the actual send.
    #[arg(long, value_name = "C", help_heading = "Load shape")]
    pub max_concurrency: Option<usize>,
    /// Warm-up by time: requests started within the first SECONDS are excluded from the
    /// statistics (with --warmup N too, the warm-up lasts until both are done).
    #[arg(long, value_name = "SECONDS", help_heading = "Load shape")]
    pub warmup_duration: Option<f64>,
    /// Service-level objectives checked at every level, e.g. ttft_p95=500ms,itl_p99=50ms
    /// (metrics ttft, itl (= tpot), e2e; stats p50, p90, p95, p99, p99.9, mean, max). Each
    /// level prints met/BROKEN with the observed values and its goodput (requests/s whose own
    /// latencies meet every limit). A broken SLO alone exits 0 unless --slo-strict.
    #[arg(long, value_name = "LIMITS", help_heading = "SLOs")]
    pub slo: Option<String>,
    /// Exit with status 1 when an SLO broke at any level (with --find-saturation: when not
    /// even the first level held).
    #[arg(long, help_heading = "SLOs")]
    pub slo_strict: bool,
    /// Raise the load until an SLO (--slo, required) breaks: doubling from the one
    /// --concurrency or --rate given, or walking the list given; reports the last level that
    /// held and the first that broke.
    #[arg(long, help_heading = "Load shape")]
    pub find_saturation: bool,
    /// --find-saturation: most levels to try [default: 10].
    #[arg(long, value_name = "N", help_heading = "Load shape")]
    pub max_steps: Option<usize>,
    /// --find-saturation: highest level to try (a concurrency, or requests/s with --rate).
    #[arg(long, value_name = "LEVEL", help_heading = "Load shape")]
    pub max_level: Option<f64>,
    /// --find-saturation: a level whose failed requests exceed this share of its requests
    /// counts as broken [default: 0.05].
    #[arg(long, value_name = "SHARE", help_heading = "Load shape")]
    pub max_failure_share: Option<f64>,
}

/// The load flags of a bench run that decide its levels (`BenchArgs`' `--concurrency`,
/// `--rate` and load-shape flags).
#[derive(Debug, Clone)]
pub struct Sweep {
    pub concurrency: Vec<usize>,
    pub rate: Vec<f64>,
    pub flags: LoadShapeArgs,
}

/// One level of a run: a closed loop at `concurrency`, or an open loop at `rate` (with its cap).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Level {
    pub concurrency: usize,
    pub rate: Option<f64>,
    pub max_in_flight: Option<usize>,
}

/// The load axis: `--concurrency` levels or `--rate` levels.
pub fn axis(args: &Sweep) -> &'static str {
    if args.rate.is_empty() {
        "concurrency"
    } else {
        "rate"
    }
}

fn concurrency_levels(args: &Sweep) -> Vec<usize> {
    if args.concurrency.is_empty() {
        vec![1]
    } else {
        args.concurrency.clone()
    }
}

/// The parsed `--slo` limits (none without the flag).
pub fn limits(args: &Sweep) -> Result<Vec<SloLimit>> {
    match &args.flags.slo {
        None => Ok(Vec::new()),
        Some(s) => SloLimit::parse_list(s).map_err(|e| anyhow::anyhow!("--slo {e}")),
    }
}

/// Checks the load-shape flags together; every error names the flag and the fix.
pub fn validate(args: &Sweep) -> Result<()> {
    let s = &args.flags;
    if !args.rate.is_empty() && !args.concurrency.is_empty() {
        bail!("--concurrency and --rate together are ambiguous: for open-loop arrivals with at most C requests in flight use --rate R --max-concurrency C; for a closed loop drop --rate");
    }
    if args.concurrency.contains(&0) {
        bail!("--concurrency must be at least 1 (or a comma list of levels, each at least 1, like 1,2,4)");
    }
    for r in &args.rate {
        if !(*r > 0.0 && r.is_finite()) {
            bail!("--rate must be a positive number of requests per second (or a comma list like 1,2,4), got {r}");
        }
    }
    match s.max_concurrency {
        Some(_) if args.rate.is_empty() => bail!("--max-concurrency caps an open loop: give --rate R with it (a closed loop's --concurrency already is its number in flight)"),
        Some(0) => bail!("--max-concurrency must be at least 1"),
        _ => {}
    }
    if let Some(w) = s.warmup_duration {
        if !(w > 0.0 && w.is_finite()) {
            bail!("--warmup-duration must be a positive number of seconds, got {w}");
        }
    }
    limits(args)?;
    if s.slo_strict && s.slo.is_none() {
        bail!("--slo-strict needs --slo LIMITS (e.g. --slo ttft_p95=500ms)");
    }
    if s.find_saturation {
        if s.slo.is_none() {
            bail!("--find-saturation raises the load until an SLO breaks: give --slo, e.g. --slo ttft_p95=500ms,itl_p99=50ms");
        }
        if s.max_steps == Some(0) {
            bail!("--max-steps must be at least 1");
        }
        if let Some(f) = s.max_failure_share {
            if !(0.0..1.0).contains(&f) {
                bail!("--max-failure-share must be a share from 0 up to (not including) 1, like 0.05; got {f}");
            }
        }
        if let Some(m) = s.max_level {
            let first = args
                .rate
                .first()
                .copied()
                .unwrap_or(concurrency_levels(args)[0] as f64);
            if !(m.is_finite() && m >= first) {
                bail!("--max-level {m} is below the first level {first}; give a higher one or drop it");
            }
        }
    } else if s.max_steps.is_some() || s.max_level.is_some() || s.max_failure_share.is_some() {
        bail!("--max-steps, --max-level and --max-failure-share bound --find-saturation: add --find-saturation, or drop them");
    }
    Ok(())
}

/// Whether this run measures (or may measure) more than one level.
pub fn is_sweep(args: &Sweep) -> bool {
    args.flags.find_saturation || args.rate.len() > 1 || concurrency_levels(args).len() > 1
}

fn level_value(l: &Level) -> f64 {
    l.rate.unwrap_or(l.concurrency as f64)
}

fn level_of(args: &Sweep, value: f64) -> Level {
    match args.rate.is_empty() {
        true => Level {
            concurrency: value as usize,
            rate: None,
            max_in_flight: None,
        },
        false => Level {
            concurrency: 1,
            rate: Some(value),
            max_in_flight: args.flags.max_concurrency,
        },
    }
}

fn given_values(args: &Sweep) -> Vec<f64> {
    match args.rate.is_empty() {
        true => concurrency_levels(args)
            .into_iter()
            .map(|c| c as f64)
            .collect(),
        false => args.rate.clone(),
    }
}

/// Why a finished level counts as broken for `--find-saturation` (None: it held).
pub fn broken(args: &Sweep, r: &BenchReport) -> Option<String> {
    let mut why = Vec::new();
    if let Some(checks) = r.slo.as_ref().and_then(|s| s["checks"].as_array()) {
        for c in checks {
            if c["met"] != true {
                why.push(c["text"].as_str().unwrap_or("an SLO broke").to_string());
            }
        }
    }
    let n = r.stats.ok + r.stats.failed;
    let share = args
        .flags
        .max_failure_share
        .unwrap_or(DEFAULT_MAX_FAILURE_SHARE);
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
pub fn next_level(args: &Sweep, done: &[BenchReport]) -> Option<Level> {
    let given = given_values(args);
    if done.last().is_some_and(|r| r.interrupted) {
        return None;
    }
    if !args.flags.find_saturation {
        return given.get(done.len()).map(|&v| level_of(args, v));
    }
    finder_step(args, done).map(|v| level_of(args, v))
}

/// The finder's next value, or None (with `stop_reason` saying why).
fn finder_step(args: &Sweep, done: &[BenchReport]) -> Option<f64> {
    if stop_reason(args, done).is_some() {
        return None;
    }
    next_value(args, done)
}

fn next_value(args: &Sweep, done: &[BenchReport]) -> Option<f64> {
    let given = given_values(args);
    if given.len() > 1 {
        return given.get(done.len()).copied();
    }
    match done.last() {
        None => Some(given[0]),
        Some(r) => Some(level_value(&report_level(r)) * 2.0),
    }
}

/// Why the finder stops after `done` (None: it goes on).
pub fn stop_reason(args: &Sweep, done: &[BenchReport]) -> Option<String> {
    let last = done.last()?;
    if last.interrupted {
        return Some("interrupted".into());
    }
    if let Some(why) = broken(args, last) {
        return Some(format!("broke: {why}"));
    }
    let steps = args.flags.max_steps.unwrap_or(DEFAULT_MAX_STEPS);
    if done.len() >= steps {
        return Some(format!(
            "no level broke within --max-steps {steps} (raise it to go further)"
        ));
    }
    match next_value(args, done) {
        None => Some("no level of the list given broke".into()),
        Some(v) => match args.flags.max_level {
            Some(m) if v > m => Some(format!(
                "no level broke up to --max-level {m} (the next, {v}, is above it)"
            )),
            _ => None,
        },
    }
}

/// The level a report measured (from its `load` record).
pub fn report_level(r: &BenchReport) -> Level {
    Level {
        concurrency: r.load["concurrency"].as_u64().unwrap_or(1) as usize,
        rate: r.load["rate_per_s"].as_f64(),
        max_in_flight: r.load["max_concurrency"].as_u64().map(|c| c as usize),
    }
}

fn level_name(r: &BenchReport) -> String {
    let l = report_level(r);
    match l.rate {
        Some(rate) => format!("rate {rate}/s"),
        None => format!("concurrency {}", l.concurrency),
    }
}

/// The `--find-saturation` summary: the last level that held, the first that broke, why the
/// walk stopped; None without the flag.
pub fn saturation(args: &Sweep, done: &[BenchReport]) -> Option<Value> {
    if !args.flags.find_saturation {
        return None;
    }
    let first_broken = done.iter().position(|r| broken(args, r).is_some());
    let held = match first_broken {
        Some(i) => i.checked_sub(1),
        None => done.len().checked_sub(1),
    };
    let summary = |i: usize| {
        let r = &done[i];
        json!({
            "index": i,
            "level": level_value(&report_level(r)),
            "ok": r.stats.ok,
            "failed": r.stats.failed,
            "request_rate_per_s": r.stats.request_rate_per_s,
            "aggregate_output_tok_s": r.stats.aggregate_output_tok_s,
            "goodput": r.goodput,
            "slo": r.slo.as_ref().map(|s| s["checks"].clone()),
            "broken_because": broken(args, r),
        })
    };
    Some(json!({
        "axis": axis(args),
        "levels_tried": done.len(),
        "last_held": held.map(summary),
        "first_broken": first_broken.map(summary),
        "stopped_because": stop_reason(args, done),
        "max_steps": args.flags.max_steps.unwrap_or(DEFAULT_MAX_STEPS),
        "max_level": args.flags.max_level,
        "max_failure_share": args.flags.max_failure_share.unwrap_or(DEFAULT_MAX_FAILURE_SHARE),
    }))
}

/// Keeps the metrics of the successful measured requests (for goodput) and passes every trace
/// on to the bench sink.
pub struct SloSink<S> {
    pub inner: S,
    keep: bool,
    pub ok: Vec<RequestMetrics>,
}

impl<S: Sink> SloSink<S> {
    pub fn new(inner: S, keep: bool) -> SloSink<S> {
        SloSink {
            inner,
            keep,
            ok: Vec::new(),
        }
    }
}

impl<S: Sink> Sink for SloSink<S> {
    fn trace(&mut self, t: Trace, c: &Collector) -> Result<()> {
        if self.keep && !t.warmup && t.ok() {
            self.ok.push(RequestMetrics::from_trace(&t));
        }
        self.inner.trace(t, c)
    }

    fn finish(&mut self) -> Result<()> {
        self.inner.finish()
    }
}

/// Sets a finished level's `slo` checks and `goodput` (nothing without `--slo`).
pub fn judge(args: &Sweep, r: &mut BenchReport, ok: &[RequestMetrics]) -> Result<()> {
    let limits = limits(args)?;
    if limits.is_empty() {
        return Ok(());
    }
    let checks = slo::check(&limits, &r.stats.metrics);
    let met = checks.iter().all(|c| c.met);
    let g = slo::goodput(&limits, ok.iter(), r.stats.window_s);
    r.slo = Some(json!({
        "met": met,
        "checks": checks.iter().map(|c| {
            let mut v = serde_json::to_value(c).unwrap_or(Value::Null);
            v["text"] = json!(c.to_string());
            v
        }).collect::<Vec<_>>(),
    }));
    r.goodput = Some(serde_json::to_value(g)?);
    Ok(())
}

/// The level's load-shape numbers, added to its `load` record after the run.
pub fn record_window(load: &mut Value, w: &RunWindow) {
    load["warmup_requests"] = json!(w.warmup_requests);
    if load["mode"] == "open-loop" {
        load["peak_in_flight"] = json!(w.peak_in_flight);
    }
    if !load["max_concurrency"].is_null() {
        load["cap_delayed_requests"] = json!(w.cap_delayed);
    }
}

/// The warnings about who limited the run. With a cap that delayed requests, the schedule lag
/// is the cap's doing, not the client's, so it is said as such and left out of the
/// client-limit test.
pub fn limit_warnings(
    stats: &RunStats,
    reads: &Reads,
    w: &RunWindow,
    cap: Option<usize>,
) -> Vec<String> {
    let mut out = Vec::new();
    match cap {
        Some(c) if w.cap_delayed > 0 => {
            let lag = stats.metrics.get("schedule_lag_ms");
            out.push(format!(
                "{} of {} measured requests waited for a slot under --max-concurrency {c} (schedule lag p50 {} ms, p99 {} ms); their latencies run from the actual send, the wait is only in schedule_lag_ms",
                w.cap_delayed,
                stats.ok + stats.failed,
                lag.map(|d| format!("{:.1}", d.p50)).unwrap_or("-".into()),
                lag.map(|d| format!("{:.1}", d.p99)).unwrap_or("-".into()),
            ));
            let mut s = stats.clone();
            s.metrics.remove("schedule_lag_ms");
            out.extend(crate::load::session::client_limit_warning(&s, reads));
        }
        _ => out.extend(crate::load::session::client_limit_warning(stats, reads)),
    }
    out
}

/// The SLO lines printed under a level's summary.
pub fn print_slo(r: &BenchReport) {
    let Some(s) = &r.slo else { return };
    println!("SLO {}:", if s["met"] == true { "met" } else { "BROKEN" });
    for c in s["checks"].as_array().into_iter().flatten() {
        println!("  {}", c["text"].as_str().unwrap_or(""));
    }
    if let Some(g) = &r.goodput {
        println!(
            "  goodput: {} req/s ({} of {} successful requests met every limit)",
            g["goodput_req_s"]
                .as_f64()
                .map(|x| format!("{x:.2}"))
                .unwrap_or("-".into()),
            g["requests_meeting"],
            g["requests_ok"]
        );
    }
}

/// The printed `--find-saturation` verdict.
pub fn print_saturation(args: &Sweep, done: &[BenchReport]) {
    let Some(s) = saturation(args, done) else {
        return;
    };
    let name = |v: &Value| match v["index"].as_u64() {
        Some(i) => level_name(&done[i as usize]),
        None => "-".into(),
    };
    println!();
    println!(
        "saturation ({} levels tried): last level that held: {}; first that broke: {}",
        done.len(),
        if s["last_held"].is_null() {
            "none (the first level already broke)".to_string()
        } else {
            name(&s["last_held"])
        },
        if s["first_broken"].is_null() {
            "none".to_string()
        } else {
            name(&s["first_broken"])
        },
    );
    if let Some(why) = s["stopped_because"].as_str() {
        println!("  stopped: {why}");
    }
}

/// The error for `--slo-strict` when an SLO broke (None: exit 0).
pub fn strict_failure(args: &Sweep, done: &[BenchReport]) -> Option<String> {
    if !args.flags.slo_strict {
        return None;
    }
    let broke = |r: &BenchReport| r.slo.as_ref().is_some_and(|s| s["met"] != true);
    if args.flags.find_saturation {
        return done.first().filter(|r| broke(r)).map(|r| {
            format!(
                "--slo-strict: the SLO broke already at the first level ({})",
                level_name(r)
            )
        });
    }
    let names: Vec<String> = done.iter().filter(|r| broke(r)).map(level_name).collect();
    (!names.is_empty()).then(|| format!("--slo-strict: the SLO broke at {}", names.join(", ")))
}

/// The label of a level in messages (empty for a single level).
pub fn level_label(done: &[BenchReport], r: &BenchReport) -> String {
    match done.len() {
        1 => String::new(),
        _ => format!(" at {}", level_name(r)),
    }
}
