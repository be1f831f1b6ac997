//! The measurement session: the prepared workload run once per level (closed loop at C, open
//! loop at a rate, a rate with a concurrency cap, warm-up by count or by time), each level
//! judged against the SLO limits; an interrupt ends the run after the level it stopped.

use super::line::{LevelTag, LineWriter};
use super::observe::{Observer, Progress};
use super::prepare::{prepare, Prepared};
use super::report::{BenchReport, LoadMode, LoadRecord, SentRequest};
use super::spec::{ArrivalKind, BenchSpec, LoadShape};
use super::sweep::{self, Level};
use crate::client::{StreamOpts, Trace};
use crate::load::places::{PlaceSummary, Shape};
use crate::load::session::{self, Reads, Session, Sink, Telemetry};
use crate::load::{Arrival, Mode, Plan, RunWindow};
use crate::metrics::summary::{Collector, RunStats};
use anyhow::{bail, Context, Result};
use std::io::Write;
use std::path::Path;
use std::time::Duration;
use tokio::sync::watch;

/// Runs one level (a spec that sweeps is refused: use [`run_levels`]).
pub async fn run_one(
    spec: &BenchSpec,
    stop: watch::Receiver<bool>,
    obs: &dyn Observer,
) -> Result<BenchReport> {
    if sweep::is_sweep(&spec.shape) {
        bail!("run_one runs one level; use run_levels for a sweep");
    }
    let mut reports = run_levels(spec, stop, obs).await?;
    Ok(reports.remove(0))
}

/// Runs every level of the spec (`bench::sweep`), sizing the workload once; `stop` turning true
/// stops the level running, and the run ends after it.
pub async fn run_levels(
    spec: &BenchSpec,
    stop: watch::Receiver<bool>,
    obs: &dyn Observer,
) -> Result<Vec<BenchReport>> {
    let p = prepare(spec, obs).await?;
    let mut reports = Vec::new();
    // Each level's nonce numbers follow the last level's, so no level meets an earlier one's
    // prompts in a prefix cache.
    let mut offset = 0u64;
    if let Some(t) = &p.trace {
        // A replay is one level: the trace's schedule, under the cap if one is given.
        t.measured(spec.shape.warmup, "--warmup")?;
        let lv = Level {
            concurrency: 1,
            rate: Some(t.record.mean_rate_per_s),
            max_in_flight: spec.shape.max_concurrency,
        };
        reports.push(run_level(spec, &p, lv, 0, 0, stop, obs).await?);
        return Ok(reports);
    }
    while let Some(lv) = sweep::next_level(&spec.shape, &reports) {
        let r = run_level(spec, &p, lv, reports.len(), offset, stop.clone(), obs).await?;
        offset += r.stats.ok + r.stats.failed + r.stats.warmup_excluded;
        let interrupted = r.interrupted;
        reports.push(r);
        if interrupted {
            break;
        }
    }
    Ok(reports)
}

/// The level's `load` record before the run.
fn load_record(spec: &BenchSpec, p: &Prepared, lv: Level, level: usize) -> LoadRecord {
    let (s, c, sweep) = (&spec.shape, &spec.conv, sweep::is_sweep(&spec.shape));
    LoadRecord {
        mode: match lv.rate {
            Some(_) => LoadMode::OpenLoop,
            None => LoadMode::ClosedLoop,
        },
        concurrency: lv.rate.is_none().then_some(lv.concurrency),
        rate_per_s: lv.rate,
        max_concurrency: lv.max_in_flight,
        arrival: match &p.trace {
            Some(_) => Some(ArrivalKind::Trace),
            None => lv.rate.map(|_| s.arrival),
        },
        warmup_duration_s: s.warmup_duration,
        requests: measured(spec, p),
        duration_s: s.duration,
        warmup: s.warmup,
        timeout_s: spec.timeout,
        stall_timeout_s: spec.stall_timeout,
        prefix_cache_nonce: p.nonce,
        nonce_base: p.nonce.then_some(p.nonce_base),
        nonce_base_from: match (p.nonce, spec.seed) {
            (false, _) => None,
            (true, Some(_)) => Some(spec.labels.seed),
            (true, None) => Some("random"),
        },
        seed: spec.seed,
        api_key_env: spec.api_key_env.clone(),
        sweep_level: sweep.then_some(level),
        sweep_concurrency: (sweep && lv.rate.is_none()).then(|| s.concurrency.clone()),
        sweep_rate: (sweep && lv.rate.is_some()).then(|| s.rate.clone()),
        find_saturation: s.find_saturation,
        multi_turn: c.multi_turn,
        think_time_ms: c.multi_turn.map(|_| c.think_time_ms),
        shared_prefix_tokens: c.shared_prefix_tokens,
        prefix_groups: c.shared_prefix_tokens.map(|_| c.prefix_groups),
        prefix_order: c.shared_prefix_tokens.map(|_| match c.prefix_random {
            true => "random",
            false => "round-robin",
        }),
        warmup_requests: 0,
        peak_in_flight: None,
        cap_delayed_requests: None,
        send_thread: None,
    }
}

/// Measured requests of a level: a replay's (after its warm-up), else the spec's.
fn measured(spec: &BenchSpec, p: &Prepared) -> Option<u64> {
    match &p.trace {
        Some(t) => Some((t.offsets.len() as u64).saturating_sub(spec.shape.warmup)),
        None => spec.requests(),
    }
}

/// The load plan of a level (a replay's: the trace's schedule).
pub fn plan(spec: &BenchSpec, p: &Prepared, lv: Level) -> Plan {
    match &p.trace {
        Some(t) => t.plan(spec.shape.warmup, lv.max_in_flight),
        None => level_plan(&spec.shape, spec.requests(), lv, p.seed),
    }
}

/// The load plan of a level of `s` with `requests` measured requests: bench's levels and a
/// campaign's open-loop steps (`run/timed.rs`) are planned here.
pub fn level_plan(s: &LoadShape, requests: Option<u64>, lv: Level, seed: u64) -> Plan {
    Plan {
        mode: match lv.rate {
            Some(rate) => Mode::Open {
                rate,
                arrival: match s.arrival {
                    ArrivalKind::Constant => Arrival::Constant,
                    ArrivalKind::Poisson => Arrival::Poisson { seed },
                    // A trace's schedule is its own (`TraceLoad::plan`, which bench uses for a
                    // replay); a shape that names it without one is spaced at the rate.
                    ArrivalKind::Trace => Arrival::Constant,
                },
            },
            None => Mode::Closed {
                concurrency: lv.concurrency,
            },
        },
        requests,
        duration: s.duration.map(Duration::from_secs_f64),
        warmup: s.warmup,
        warmup_duration: s.warmup_duration.map(Duration::from_secs_f64),
        max_in_flight: lv.max_in_flight,
    }
}

fn running_note(spec: &BenchSpec, model: &str, lv: Level) -> String {
    let what = match (lv.rate, lv.max_in_flight) {
        (None, _) => format!("closed loop at concurrency {}", lv.concurrency),
        (Some(rate), Some(c)) => format!("open loop at {rate} requests/s, at most {c} in flight"),
        (Some(rate), None) => format!("open loop at {rate} requests/s"),
    };
    format!("running {what} against {} (model {model}) ...", spec.target)
}

async fn run_level(
    spec: &BenchSpec,
    p: &Prepared,
    lv: Level,
    level: usize,
    offset: u64,
    stop: watch::Receiver<bool>,
    obs: &dyn Observer,
) -> Result<BenchReport> {
    let is_sweep = sweep::is_sweep(&spec.shape);
    let mut load = load_record(spec, p, lv, level);
    let source = super::conv::source(
        spec.conv.multi_turn.map(|t| (t, spec.conv.think_time_ms)),
        p.prefix.as_ref(),
        super::conv::SourceParts {
            target: &spec.target,
            endpoint: spec.endpoint,
            base: &p.base,
            prompt: p.prompt_text(spec),
            api_key: spec.api_key.clone(),
            offset,
            nonce_base: p.nonce_base,
            prefix_number: level as u64,
            script: p.script.clone().map(|s| (s, p.nonce)),
        },
    );
    let started_at = crate::clock::wall_rfc3339();
    let total = measured(spec, p)
        .map(|r| r + spec.shape.warmup)
        .filter(|_| spec.shape.warmup_duration.is_none());
    let lines = LineWriter {
        start: None,
        items: p.work.clone().map(|w| (w, offset)),
        script: p.script.clone(),
        level: is_sweep.then_some(LevelTag {
            index: level,
            concurrency: lv.rate.is_none().then_some(lv.concurrency),
            rate_per_s: lv.rate,
        }),
    };
    let keep_ok = spec.keep_points || !spec.slo.is_empty();
    let sink = LevelSink::new(spec.requests_jsonl.as_deref(), level > 0, lines, keep_ok)?
        .with_progress(obs.progress(total));
    obs.note(&running_note(spec, &p.model, lv));
    let mut out = session::run(
        Session {
            target: spec.target.clone(),
            plan: plan(spec, p, lv),
            source,
            opts: StreamOpts {
                timeout: Duration::from_secs_f64(spec.timeout),
                stall: Duration::from_secs_f64(spec.stall_timeout),
                collect: false,
            },
            cancel: Some(stop),
            telemetry: Telemetry::None,
            seed: p.seed,
        },
        sink,
    )
    .await?;
    let window = match &out.window {
        Ok(w) => *w,
        Err(e) => bail!("{e}"),
    };
    load.record_window(&window);
    let stats = out.stats();
    let warnings = warnings(spec, p, &stats, &out.reads, &window, lv);
    if stats.arrival_resolution.unresolved_chunk_gaps > 0 {
        obs.note(&format!(
            "note: {} chunk gaps were between chunks one read returned together; chunk_gap_ms leaves them out (see arrival_resolution)",
            stats.arrival_resolution.unresolved_chunk_gaps
        ));
    }
    let ok = std::mem::take(&mut out.sink.ok);
    let judged = super::slo::judge(&spec.slo, &stats, ok.iter().map(|(_, m)| m));
    let workload = spec.conv.active().then(|| {
        out.sink.places.summary(Shape {
            multi_turn: spec.conv.multi_turn.map(|t| (t, spec.conv.think_time_ms)),
            shared_prefix: spec
                .conv
                .shared_prefix_tokens
                .map(|t| (t, spec.conv.prefix_groups)),
        })
    });
    let trace = p.trace.as_ref().map(|t| t.record.with_error(&stats));
    Ok(BenchReport {
        bakeoff_version: crate::VERSION,
        tool: "bakeoff bench",
        started_at,
        url: spec.target.to_string(),
        model: p.model.clone(),
        endpoint: spec.endpoint,
        sampling: p.base.clone(),
        load,
        prompt: p.prompt_record.clone(),
        interrupted: out.interrupted,
        arrival_clock: out.reads.evidence(),
        warnings,
        tls: spec.target.tls.as_ref().map(|t| t.record()),
        workload,
        stats,
        trace,
        slo: judged.as_ref().map(|j| j.slo.clone()),
        goodput: judged.map(|j| j.goodput),
        points: if spec.keep_points { ok } else { Vec::new() },
    })
}

/// What the reader of a level's numbers must know.
fn warnings(
    spec: &BenchSpec,
    p: &Prepared,
    stats: &RunStats,
    reads: &Reads,
    window: &RunWindow,
    lv: Level,
) -> Vec<String> {
    let mut out = Vec::new();
    // Multi-turn and shared-prefix loads are meant to hit the cache.
    if p.nonce && !spec.conv.active() {
        if let Some(w) = stats.prefix_cache.defeated_cache_warning() {
            out.push(match spec.seed {
                Some(s) => format!("{w}; --seed {s} repeats the nonce numbers of an earlier run with the same seed"),
                None => w,
            });
        }
    }
    out.extend(limit_warnings(stats, reads, window, lv.max_in_flight));
    out.extend(
        p.work
            .as_deref()
            .and_then(|w| super::source::eos_note(w, spec.ignore_eos)),
    );
    if spec.target.tls == Some(crate::client::Trust::Insecure) {
        out.push(crate::client::tls::insecure_note(&spec.target.to_string()));
    }
    out
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
            out.extend(session::client_limit_warning(&s, reads));
        }
        _ => out.extend(session::client_limit_warning(stats, reads)),
    }
    out
}

/// A level's view of each trace: its per-request line, its progress, the per-turn / per-group
/// rows, and (for goodput and the points) the successful measured requests.
struct LevelSink {
    out: Option<std::io::BufWriter<std::fs::File>>,
    lines: LineWriter,
    progress: Option<Box<dyn Progress>>,
    keep_ok: bool,
    ok: Vec<SentRequest>,
    places: PlaceSummary,
}

impl LevelSink {
    /// `append`: a later level adds to the file the first one created.
    fn new(jsonl: Option<&Path>, append: bool, lines: LineWriter, keep_ok: bool) -> Result<Self> {
        let out = match jsonl {
            Some(p) => Some(std::io::BufWriter::new(
                std::fs::OpenOptions::new()
                    .write(true)
                    .create(true)
                    .append(append)
                    .truncate(!append)
                    .open(p)
                    .with_context(|| {
                        format!("cannot create {} (--requests-jsonl); check the directory exists and is writable", p.display())
                    })?,
            )),
            None => None,
        };
        Ok(LevelSink {
            out,
            lines,
            progress: None,
            keep_ok,
            ok: Vec::new(),
            places: PlaceSummary::default(),
        })
    }

    fn with_progress(mut self, p: Option<Box<dyn Progress>>) -> Self {
        self.progress = p;
        self
    }
}

impl Sink for LevelSink {
    fn trace(&mut self, t: Trace, c: &Collector) -> Result<()> {
        self.places.fold(&t);
        if let Some(w) = self.out.as_mut() {
            serde_json::to_writer(&mut *w, &self.lines.line(&t))?;
            w.write_all(b"\n")
                .context("cannot write --requests-jsonl (disk full?)")?;
        }
        if let Some(p) = self.progress.as_mut() {
            p.tick(c);
        }
        if self.keep_ok && !t.warmup && t.ok() {
            self.ok
                .push((t.send_ns, crate::metrics::RequestMetrics::from_trace(&t)));
        }
        Ok(())
    }

    fn finish(&mut self) -> Result<()> {
        if let Some(mut p) = self.progress.take() {
            p.done();
        }
        if let Some(w) = self.out.as_mut() {
            w.flush()
                .context("cannot finish --requests-jsonl (disk full?)")?;
        }
        Ok(())
    }
}
