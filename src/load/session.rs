//! One timed load, run the same way by every command that measures (`bakeoff bench`, a campaign's
//! timing steps, `bakeoff selftest`): a request source and a [`Plan`] in; every trace folded into
//! the run's statistics and handed to the caller's [`Sink`]; the arrival-clock counts and, when
//! asked, the lane's telemetry (engine `/metrics` before and after, GPU samples) out.
//!
//! The traces are folded in on a thread of their own, as they arrive: aggregation and file I/O
//! stay off the runtime thread that timestamps chunks (see `load::pace::client_runtime`).

use super::{Plan, RunWindow, Source};
use crate::client::{RequestError, StreamOpts, Target, Trace};
use crate::metrics::summary::{Collector, RunStats};
use crate::netstamp::LAG_BUCKETS;
use crate::telemetry::{engine_metrics, sampler};
use anyhow::Result;
use serde_json::{json, Value};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::watch;

/// What a load needs besides its requests.
pub struct Session {
    pub target: Target,
    pub plan: Plan,
    pub source: Arc<dyn Source>,
    pub opts: StreamOpts,
    /// Stops the load when it turns true: no new request starts and requests in flight are
    /// dropped (neither samples nor failures). `None`: the load runs to its end.
    pub cancel: Option<watch::Receiver<bool>>,
    pub telemetry: Telemetry,
    /// Passed to the statistics (their intervals of the median are exact and use no randomness).
    pub seed: u64,
}

/// The lane evidence recorded around the load.
#[derive(Debug, Clone, Default)]
pub enum Telemetry {
    #[default]
    None,
    /// The engine's `/metrics` before and after, and samples of these GPUs (none: recorded as
    /// not applicable).
    Lane { gpus: Vec<String> },
}

/// Receives every trace on the collector thread, after the run's statistics took it in.
pub trait Sink: Send + 'static {
    fn trace(&mut self, t: Trace, stats: &Collector) -> Result<()>;
    /// Called once, after the last trace.
    fn finish(&mut self) -> Result<()> {
        Ok(())
    }
}

/// Keeps every trace (with its chunk offsets), in arrival order.
impl Sink for Vec<Trace> {
    fn trace(&mut self, t: Trace, _: &Collector) -> Result<()> {
        self.push(t);
        Ok(())
    }
}

/// Keeps no trace: the statistics are all the caller wants.
pub struct Discard;

impl Sink for Discard {
    fn trace(&mut self, _: Trace, _: &Collector) -> Result<()> {
        Ok(())
    }
}

/// Reads during the load by where their arrival time came from, and how late they came.
#[derive(Debug, Clone, Copy)]
pub struct Reads {
    pub kernel_stamped: u64,
    pub read_time: u64,
    /// Stamped reads by read lag (read time minus kernel arrival), power-of-two buckets
    /// (`netstamp::LAG_BUCKETS`).
    pub lag_hist: [u64; LAG_BUCKETS],
}

impl Default for Reads {
    fn default() -> Self {
        Reads {
            kernel_stamped: 0,
            read_time: 0,
            lag_hist: [0; LAG_BUCKETS],
        }
    }
}

/// Reads at least this late (2^21 ns, 2.1 ms) count as the client falling behind.
const LATE_BUCKET: usize = 21;

impl Reads {
    /// The read lag below which `p` % of stamped reads fell: the upper bound of its bucket, ms.
    pub fn lag_percentile_ms(&self, p: f64) -> Option<f64> {
        let n: u64 = self.lag_hist.iter().sum();
        if n == 0 {
            return None;
        }
        let rank = ((p / 100.0 * n as f64).ceil() as u64).max(1);
        let mut seen = 0;
        for (i, c) in self.lag_hist.iter().enumerate() {
            seen += c;
            if seen >= rank {
                return Some((1u64 << (i + 1)) as f64 / 1e6);
            }
        }
        None
    }

    /// Stamped reads that came 2.1 ms or more after the kernel received their bytes.
    pub fn late_reads(&self) -> u64 {
        self.lag_hist[LATE_BUCKET..].iter().sum()
    }

    /// The `arrival_clock` record.
    pub fn evidence(&self) -> Value {
        json!({
            "source": "kernel receive stamp (SO_TIMESTAMPNS) of the last segment each read returned, converted to CLOCK_MONOTONIC; the read time where the kernel gave none",
            "kernel_stamped_reads": self.kernel_stamped,
            "read_time_reads": self.read_time,
            "read_lag_ms": {
                "what": "read time minus kernel arrival of stamped reads: how long bytes waited for the client; upper bounds of power-of-two buckets",
                "p50": self.lag_percentile_ms(50.0),
                "p90": self.lag_percentile_ms(90.0),
                "p99": self.lag_percentile_ms(99.0),
                "max": self.lag_percentile_ms(100.0),
                "reads_over_2_1_ms": self.late_reads(),
            },
        })
    }
}

/// The warning for a load where the client, not the server, was the limit: its reads fell
/// behind (1 % or more of stamped reads, and at least 10, came 2.1 ms or more after the bytes
/// arrived) or, in an open loop, requests went out late (schedule lag p99 of 2 ms or more).
/// Arrival stamps stay the kernel's, but events one late read returned together cannot be told
/// apart, and a late send delays the whole request.
pub fn client_limit_warning(stats: &RunStats, reads: &Reads) -> Option<String> {
    let mut why = Vec::new();
    let late = reads.late_reads();
    if late >= 10 && late * 100 >= reads.kernel_stamped {
        why.push(format!(
            "{late} of {} reads came 2.1 ms or more after their bytes arrived (read lag p99 under {} ms)",
            reads.kernel_stamped,
            reads.lag_percentile_ms(99.0).unwrap_or(0.0)
        ));
    }
    if let Some(d) = stats
        .metrics
        .get("schedule_lag_ms")
        .filter(|d| d.p99 >= 2.0)
    {
        why.push(format!(
            "the open loop sent requests late (schedule lag p99 {:.1} ms)",
            d.p99
        ));
    }
    if why.is_empty() {
        return None;
    }
    let r = &stats.arrival_resolution;
    Some(format!(
        "the client, not the server, was the limit of this run: {}; {} of {} events shared a read and {} chunk gaps could not be resolved (left out of chunk_gap_ms). Use fewer streams or a less loaded client host",
        why.join("; "),
        r.shared_read_events,
        r.events,
        r.unresolved_chunk_gaps
    ))
}

/// The lane evidence of one load (see [`Telemetry::Lane`]).
#[derive(Debug, Clone)]
pub struct LaneEvidence {
    pub engine_metrics: Value,
    pub gpu: Value,
}

pub struct Outcome<S> {
    /// The measured phase's window, or why the load could not start (no connection).
    pub window: Result<RunWindow, RequestError>,
    /// Every trace folded in (warm-up ones counted apart).
    pub collector: Collector,
    pub seed: u64,
    pub sink: S,
    /// CLOCK_MONOTONIC ns just before the load started and just after it ended.
    pub started_ns: u64,
    pub ended_ns: u64,
    /// The cancel flag turned true.
    pub interrupted: bool,
    pub reads: Reads,
    /// Present with [`Telemetry::Lane`].
    pub lane: Option<LaneEvidence>,
}

impl<S> Outcome<S> {
    pub fn stats(&self) -> RunStats {
        self.collector.summarize(self.seed)
    }
}

static SESSIONS: AtomicU64 = AtomicU64::new(0);

/// Loads run through [`run`] so far in this process.
pub fn sessions() -> u64 {
    SESSIONS.load(Ordering::Relaxed)
}

/// Runs the load. `Err` only when the sink failed or the collector thread panicked; a load that
/// could not start is `Ok` with `window` holding the error.
pub async fn run<S: Sink>(s: Session, sink: S) -> Result<Outcome<S>> {
    SESSIONS.fetch_add(1, Ordering::Relaxed);
    let lane_gpus = match &s.telemetry {
        Telemetry::None => None,
        Telemetry::Lane { gpus } => Some(gpus.clone()),
    };
    let scrape = || engine_metrics::scrape(&s.target, "/metrics", Duration::from_secs(5));
    let before = match lane_gpus {
        Some(_) => Some(scrape().await),
        None => None,
    };
    let gpu = lane_gpus
        .as_ref()
        .filter(|g| !g.is_empty())
        .map(|g| sampler::Sampler::start(g, Duration::from_millis(200)));
    let (tx, rx) = tokio::sync::mpsc::unbounded_channel::<Trace>();
    let (done_tx, done_rx) = tokio::sync::oneshot::channel();
    let collector = std::thread::spawn(move || {
        let _ = done_tx.send(collect(rx, sink));
    });
    let cancel = s.cancel.clone();
    // Stamping on before the first timed read, not a moment after it (netstamp::prime).
    crate::netstamp::prime();
    let stamps0 = crate::netstamp::counts();
    let lags0 = crate::netstamp::lag_histogram();
    let started_ns = crate::clock::mono_ns();
    let window = match s.cancel {
        Some(c) => super::run_cancellable(s.target.clone(), s.plan, s.source, s.opts, tx, c).await,
        None => super::run(s.target.clone(), s.plan, s.source, s.opts, tx).await,
    };
    let ended_ns = crate::clock::mono_ns();
    // The load is over (every sender dropped): the collector finishes now, not after its nap.
    collector.thread().unpark();
    let stamps1 = crate::netstamp::counts();
    let lags1 = crate::netstamp::lag_histogram();
    let interrupted = cancel.is_some_and(|c| *c.borrow());
    let samples = gpu.map(|g| g.stop());
    let lane = match before {
        None => None,
        Some(before) => {
            let after = scrape().await;
            Some(lane_evidence(before, after, samples, started_ns, ended_ns))
        }
    };
    let (collector, sink) = done_rx
        .await
        .map_err(|_| anyhow::anyhow!("the collector thread panicked"))??;
    Ok(Outcome {
        window,
        collector,
        seed: s.seed,
        sink,
        started_ns,
        ended_ns,
        interrupted,
        reads: Reads {
            kernel_stamped: stamps1.0 - stamps0.0,
            read_time: stamps1.1 - stamps0.1,
            lag_hist: std::array::from_fn(|i| lags1[i].saturating_sub(lags0[i])),
        },
        lane,
    })
}

/// How often the collector thread looks for finished requests while they come.
const COLLECT_EVERY: Duration = Duration::from_millis(10);
/// The longest pause between two looks while none come (the progress bar's worst lag).
const COLLECT_IDLE_MAX: Duration = Duration::from_millis(160);

fn collect<S: Sink>(
    mut rx: tokio::sync::mpsc::UnboundedReceiver<Trace>,
    mut sink: S,
) -> Result<(Collector, S)> {
    use tokio::sync::mpsc::error::TryRecvError;
    let mut c = Collector::default();
    let mut idle = COLLECT_EVERY;
    loop {
        let t = match rx.try_recv() {
            Ok(t) => {
                idle = COLLECT_EVERY;
                t
            }
            // Polled, never parked on: a parked receiver is woken (a futex call and a context
            // switch on the runtime thread) for every finished request; polled, the sender only
            // queues, and the traces are folded in batches. The pause doubles while nothing
            // comes (a few streams finish a request every few hundred ms: polling every 10 ms
            // was a wakeup per chunk at one stream); the session unparks it at the load's end.
            Err(TryRecvError::Empty) => {
                std::thread::park_timeout(idle);
                idle = (idle * 2).min(COLLECT_IDLE_MAX);
                continue;
            }
            Err(TryRecvError::Disconnected) => break,
        };
        // The source's prompt size is the one every request should report.
        c.add(&t, t.client_prompt_tokens);
        sink.trace(t, &c)?;
    }
    sink.finish()?;
    Ok((c, sink))
}

fn lane_evidence(
    before: Result<engine_metrics::Snapshot, String>,
    after: Result<engine_metrics::Snapshot, String>,
    samples: Option<sampler::SampleSet>,
    t0: u64,
    t1: u64,
) -> LaneEvidence {
    let engine_metrics = match (&before, &after) {
        (Ok(b), Ok(a)) => json!({
            "url": a.url,
            "diff": engine_metrics::diff(&b.metrics, &a.metrics),
            "before_mono_ns": b.mono_ns, "after_mono_ns": a.mono_ns,
        }),
        (b, a) => json!({
            "not_available": true,
            "before_error": b.as_ref().err(),
            "after_error": a.as_ref().err(),
        }),
    };
    let gpu = match samples {
        None => json!({"status": "not-applicable", "reason": "the lane owns no GPU"}),
        Some(set) => json!({
            "source": set.source, "note": set.note, "interval_ms": set.interval_ms,
            "per_gpu": sampler::summarize(&set.samples, t0, t1),
            // Every reading, `t_ms` after the sampler started (just before the load): the
            // report draws them on the run's timeline.
            "samples": set.samples,
        }),
    };
    LaneEvidence {
        engine_metrics,
        gpu,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn read_lag_percentiles_and_the_client_limit() {
        let mut r = Reads {
            kernel_stamped: 1000,
            ..Default::default()
        };
        assert_eq!(r.lag_percentile_ms(50.0), None);
        r.lag_hist[14] = 985; // 16–33 µs
        r.lag_hist[22] = 15; // 4.2–8.4 ms
        assert_eq!(r.lag_percentile_ms(50.0), Some(32_768.0 / 1e6));
        assert_eq!(r.lag_percentile_ms(99.0), Some(8_388_608.0 / 1e6));
        assert_eq!(r.late_reads(), 15);
        let stats = Collector::default().summarize(1);
        let w = client_limit_warning(&stats, &r).expect("1.5 % of reads late");
        assert!(w.contains("15 of 1000 reads came 2.1 ms or more"), "{w}");
        // 5 late reads of 1000: the client kept up.
        r.lag_hist[22] = 5;
        assert!(client_limit_warning(&stats, &r).is_none());
    }
}
