//! `bakeoff bench`'s load-shape and SLO flags, their checks, and the printed SLO verdict and
//! `--find-saturation` summary. Which levels run, the saturation finder and the SLO judge are
//! the library's (`bench::sweep`, `bench::slo`).

use crate::bench::{sweep, BenchReport, LoadShape};
use crate::metrics::slo::SloLimit;
use anyhow::{bail, Result};
use clap::Args;

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

/// The parsed `--slo` limits (none without the flag).
pub fn limits(flags: &LoadShapeArgs) -> Result<Vec<SloLimit>> {
    match &flags.slo {
        None => Ok(Vec::new()),
        Some(s) => SloLimit::parse_list(s).map_err(|e| anyhow::anyhow!("--slo {e}")),
    }
}

/// Checks the load-shape flags together (`concurrency` and `rate`: `--concurrency`, `--rate`;
/// `trace`: `--trace` given, an open loop of its own); every error names the flag and the fix.
pub fn validate(concurrency: &[usize], rate: &[f64], trace: bool, s: &LoadShapeArgs) -> Result<()> {
    if !rate.is_empty() && !concurrency.is_empty() {
        bail!("--concurrency and --rate together are ambiguous: for open-loop arrivals with at most C requests in flight use --rate R --max-concurrency C; for a closed loop drop --rate");
    }
    if concurrency.contains(&0) {
        bail!("--concurrency must be at least 1 (or a comma list of levels, each at least 1, like 1,2,4)");
    }
    for r in rate {
        if !(*r > 0.0 && r.is_finite()) {
            bail!("--rate must be a positive number of requests per second (or a comma list like 1,2,4), got {r}");
        }
    }
    match s.max_concurrency {
        Some(_) if rate.is_empty() && !trace => bail!("--max-concurrency caps an open loop: give --rate R (or --trace) with it (a closed loop's --concurrency already is its number in flight)"),
        Some(0) => bail!("--max-concurrency must be at least 1"),
        _ => {}
    }
    if let Some(w) = s.warmup_duration {
        if !(w > 0.0 && w.is_finite()) {
            bail!("--warmup-duration must be a positive number of seconds, got {w}");
        }
    }
    limits(s)?;
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
            let first = rate
                .first()
                .copied()
                .unwrap_or(concurrency.first().copied().unwrap_or(1) as f64);
            if !(m.is_finite() && m >= first) {
                bail!("--max-level {m} is below the first level {first}; give a higher one or drop it");
            }
        }
    } else if s.max_steps.is_some() || s.max_level.is_some() || s.max_failure_share.is_some() {
        bail!("--max-steps, --max-level and --max-failure-share bound --find-saturation: add --find-saturation, or drop them");
    }
    Ok(())
}

/// The SLO lines printed under a level's summary.
pub fn print_slo(r: &BenchReport) {
    let Some(s) = &r.slo else { return };
    println!("SLO {}:", if s.met { "met" } else { "BROKEN" });
    for c in &s.checks {
        println!("  {}", c.text);
    }
    if let Some(g) = &r.goodput {
        println!(
            "  goodput: {} req/s ({} of {} successful requests met every limit)",
            g.goodput_req_s
                .map(|x| format!("{x:.2}"))
                .unwrap_or("-".into()),
            g.requests_meeting,
            g.requests_ok
        );
    }
}

/// The printed `--find-saturation` verdict.
pub fn print_saturation(shape: &LoadShape, done: &[BenchReport]) {
    if !shape.find_saturation {
        return;
    }
    let (held, broke) = sweep::held_and_broken(shape, done);
    println!();
    println!(
        "saturation ({} levels tried): last level that held: {}; first that broke: {}",
        done.len(),
        match held {
            Some(i) => sweep::level_name(&done[i]),
            None => "none (the first level already broke)".to_string(),
        },
        match broke {
            Some(i) => sweep::level_name(&done[i]),
            None => "none".to_string(),
        },
    );
    if let Some(why) = sweep::stop_reason(shape, done) {
        println!("  stopped: {why}");
    }
}

/// The error for `--slo-strict` when an SLO broke (None: exit 0).
pub fn strict_failure(strict: bool, shape: &LoadShape, done: &[BenchReport]) -> Option<String> {
    if !strict {
        return None;
    }
    let names = sweep::slo_broken_levels(shape, done);
    match (shape.find_saturation, names.is_empty()) {
        (_, true) => None,
        (true, false) => Some(format!(
            "--slo-strict: the SLO broke already at the first level ({})",
            names[0]
        )),
        (false, false) => Some(format!(
            "--slo-strict: the SLO broke at {}",
            names.join(", ")
        )),
    }
}
