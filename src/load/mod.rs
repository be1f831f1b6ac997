//! Load generation: closed loop at a fixed concurrency, or open loop at a request rate.
//!
//! Connections are opened before the clock starts so the first wave measures the engine, not
//! TCP setup. Each finished request's trace goes to a channel; the caller aggregates.

pub mod conversation;
pub mod pace;
pub mod session;
pub mod source;

use crate::client::{Conn, ErrorClass, Place, RequestError, StreamOpts, Target, Trace};
use crate::clock::mono_ns;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::mpsc::UnboundedSender;
use tokio::sync::watch;

#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Arrival {
    Constant,
    Poisson { seed: u64 },
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Mode {
    Closed { concurrency: usize },
    Open { rate: f64, arrival: Arrival },
}

#[derive(Debug, Clone)]
pub struct Plan {
    pub mode: Mode,
    /// Measured requests (after warmup). With a duration, an upper bound.
    pub requests: Option<u64>,
    pub duration: Option<Duration>,
    pub warmup: u64,
}

/// One request ready to send.
pub struct Prepared {
    pub bytes: Vec<u8>,
    pub prompt_tokens: Option<u64>,
}

/// Builds request `index` (called by the workers, before the request's clock starts).
pub trait Source: Send + Sync + 'static {
    fn prepare(&self, index: u64) -> Prepared;

    /// Where request `index` sits in a structured workload (a shared-prefix group), recorded on
    /// its trace. Independent requests have none.
    fn place(&self, _index: u64) -> Option<Place> {
        None
    }

    /// A multi-turn source: in a closed loop each stream then runs conversations, each turn
    /// built from the stream's history (`conversation`). Independent requests: `None`.
    fn conversations(&self) -> Option<&conversation::ConversationSource> {
        None
    }
}

/// What one closed-loop stream keeps between its requests (a multi-turn conversation's history).
#[derive(Debug, Default)]
pub struct StreamState {
    conversation: conversation::Conversation,
}

/// Times of the measured phase (CLOCK_MONOTONIC ns).
#[derive(Debug, Clone, Copy, Default)]
pub struct RunWindow {
    pub start_ns: u64,
    pub end_ns: u64,
}

/// Runs the plan; sends every trace (warmup ones flagged) to `out`.
pub async fn run(
    target: Target,
    plan: Plan,
    source: Arc<dyn Source>,
    opts: StreamOpts,
    out: UnboundedSender<Trace>,
) -> Result<RunWindow, RequestError> {
    let (_keep, never) = watch::channel(false);
    run_cancellable(target, plan, source, opts, out, never).await
}

/// Like [`run`], but stops when `cancel` turns true: no new request starts, requests in flight
/// are dropped (they send no trace: a cancelled request is neither a sample nor a failure).
pub async fn run_cancellable(
    target: Target,
    plan: Plan,
    source: Arc<dyn Source>,
    opts: StreamOpts,
    out: UnboundedSender<Trace>,
    cancel: watch::Receiver<bool>,
) -> Result<RunWindow, RequestError> {
    match plan.mode {
        Mode::Closed { concurrency } => {
            closed(target, plan, concurrency, source, opts, out, cancel).await
        }
        Mode::Open { rate, arrival } => {
            open(target, plan, rate, arrival, source, opts, out, cancel).await
        }
    }
}

/// Resolves once `rx` holds true (never, if its sender is gone while false).
pub async fn cancelled(rx: &mut watch::Receiver<bool>) {
    loop {
        if *rx.borrow_and_update() {
            return;
        }
        if rx.changed().await.is_err() {
            std::future::pending::<()>().await;
        }
    }
}

async fn open_conns(
    target: &Target,
    n: usize,
    timeout: Duration,
) -> Result<Vec<Conn>, RequestError> {
    let mut set = tokio::task::JoinSet::new();
    // Bounded parallel connects: a burst of 1024 SYNs can overflow the listen backlog.
    let sem = Arc::new(tokio::sync::Semaphore::new(64));
    for _ in 0..n {
        let t = target.clone();
        let sem = sem.clone();
        set.spawn(async move {
            let _p = sem.acquire().await;
            Conn::connect(&t, timeout).await
        });
    }
    let mut conns = Vec::with_capacity(n);
    while let Some(r) = set.join_next().await {
        conns.push(r.expect("connect task")?);
    }
    Ok(conns)
}

async fn one(
    conn: &mut Option<Conn>,
    target: &Target,
    source: &dyn Source,
    index: u64,
    warmup: bool,
    intended_ns: Option<u64>,
    opts: &StreamOpts,
) -> Trace {
    let prepared = source.prepare(index);
    let mut trace = send(conn, target, prepared, index, warmup, intended_ns, opts).await;
    trace.place = source.place(index);
    trace
}

/// Sends one prepared request on `conn` (a fresh connection when it has none or can't be reused).
async fn send(
    conn: &mut Option<Conn>,
    target: &Target,
    prepared: Prepared,
    index: u64,
    warmup: bool,
    intended_ns: Option<u64>,
    opts: &StreamOpts,
) -> Trace {
    let mut trace = Trace {
        index,
        warmup,
        intended_ns,
        client_prompt_tokens: prepared.prompt_tokens,
        ..Default::default()
    };
    // A keep-alive connection the server has silently closed (idle timeout, restart) fails
    // before any byte comes back; that request never reached the engine, so it is retried once
    // on a fresh connection. A fresh connection that fails the same way is a real failure.
    for attempt in 0..2 {
        let fresh = conn.as_ref().map(|c| !c.reusable).unwrap_or(true) || attempt > 0;
        if fresh {
            let t0 = mono_ns();
            match Conn::connect(target, opts.stall.min(Duration::from_secs(30))).await {
                Ok(c) => {
                    *conn = Some(c);
                    trace.connect_ns = Some(mono_ns() - t0);
                }
                Err(e) => {
                    trace.send_ns = mono_ns();
                    trace.error = Some(e);
                    return trace;
                }
            }
        }
        let c = conn.as_mut().expect("connected above");
        c.stream(&prepared.bytes, opts, &mut trace).await;
        let stale = !fresh
            && trace.first_byte_ns.is_none()
            && matches!(&trace.error, Some(e) if e.class == ErrorClass::Io);
        if !stale {
            break;
        }
        trace.error = None;
        trace.events.clear();
        trace.end_ns = None;
    }
    trace
}

#[allow(clippy::too_many_arguments)]
async fn closed(
    target: Target,
    plan: Plan,
    concurrency: usize,
    source: Arc<dyn Source>,
    opts: StreamOpts,
    out: UnboundedSender<Trace>,
    cancel: watch::Receiver<bool>,
) -> Result<RunWindow, RequestError> {
    let concurrency = concurrency.max(1);
    let conns = open_conns(&target, concurrency, Duration::from_secs(30)).await?;
    let mut slots: Vec<Option<Conn>> = conns.into_iter().map(Some).collect();
    if plan.warmup > 0 {
        slots = closed_phase(
            &target,
            slots,
            0,
            plan.warmup,
            None,
            true,
            &source,
            &opts,
            &out,
            &cancel,
        )
        .await;
    }
    let start = mono_ns();
    let deadline = plan.duration.map(|d| start + d.as_nanos() as u64);
    let end_index = plan.requests.map(|r| plan.warmup + r).unwrap_or(u64::MAX);
    closed_phase(
        &target,
        slots,
        plan.warmup,
        end_index,
        deadline,
        false,
        &source,
        &opts,
        &out,
        &cancel,
    )
    .await;
    Ok(RunWindow {
        start_ns: start,
        end_ns: mono_ns(),
    })
}

#[allow(clippy::too_many_arguments)]
async fn closed_phase(
    target: &Target,
    slots: Vec<Option<Conn>>,
    from: u64,
    to: u64,
    deadline: Option<u64>,
    warmup: bool,
    source: &Arc<dyn Source>,
    opts: &StreamOpts,
    out: &UnboundedSender<Trace>,
    cancel: &watch::Receiver<bool>,
) -> Vec<Option<Conn>> {
    let next = Arc::new(AtomicU64::new(from));
    let mut set = tokio::task::JoinSet::new();
    for mut conn in slots {
        let next = next.clone();
        let source = source.clone();
        let opts = opts.clone();
        let out = out.clone();
        let target = target.clone();
        let cancel = cancel.clone();
        set.spawn(async move {
            let mut state = StreamState::default();
            loop {
                if deadline.is_some_and(|d| mono_ns() >= d) || *cancel.borrow() {
                    break;
                }
                let i = next.fetch_add(1, Ordering::Relaxed);
                if i >= to {
                    break;
                }
                let t = match source.conversations() {
                    None => one(&mut conn, &target, &*source, i, warmup, None, &opts).await,
                    Some(c) => {
                        // The pause before a conversation's next turn, then the same checks
                        // as before any request.
                        conversation::think(c, &mut state).await;
                        if deadline.is_some_and(|d| mono_ns() >= d) || *cancel.borrow() {
                            break;
                        }
                        conversation::turn(c, &mut state, &mut conn, &target, i, warmup, &opts)
                            .await
                    }
                };
                if out.send(t).is_err() {
                    break;
                }
            }
            conn
        });
    }
    collect_workers(set, cancel.clone()).await
}

/// Waits for the closed-loop workers and hands back their connections. On cancellation the
/// workers are aborted where they stand: a request in flight sends no trace, and its connection,
/// mid-response, can't carry another request. (Watching the cancel flag here rather than in each
/// worker keeps it off the per-chunk path: a `select!` there is polled at every chunk.)
async fn collect_workers(
    mut set: tokio::task::JoinSet<Option<Conn>>,
    mut cancel: watch::Receiver<bool>,
) -> Vec<Option<Conn>> {
    // An aborted worker hands back no connection; a worker that panicked passes the panic on.
    fn conn_of(r: Result<Option<Conn>, tokio::task::JoinError>) -> Option<Conn> {
        match r {
            Ok(c) => c,
            Err(e) if e.is_cancelled() => None,
            Err(e) => std::panic::resume_unwind(e.into_panic()),
        }
    }
    let mut back = Vec::new();
    loop {
        tokio::select! {
            biased;
            r = set.join_next() => match r {
                Some(r) => back.push(conn_of(r)),
                None => return back,
            },
            _ = cancelled(&mut cancel) => {
                set.abort_all();
                while let Some(r) = set.join_next().await {
                    back.push(conn_of(r));
                }
                return back;
            }
        }
    }
}

/// Intended send offsets (ns after start) for an open-loop run.
pub fn schedule(rate: f64, arrival: Arrival, n: u64) -> Vec<u64> {
    let mut v = Vec::with_capacity(n as usize);
    match arrival {
        Arrival::Constant => {
            for i in 0..n {
                v.push((i as f64 / rate * 1e9) as u64);
            }
        }
        Arrival::Poisson { seed } => {
            let mut rng = ChaCha8Rng::seed_from_u64(seed);
            let mut t = 0.0f64;
            for _ in 0..n {
                v.push((t * 1e9) as u64);
                // Exponential inter-arrival gaps: -ln(U)/rate.
                let u: f64 = 1.0 - rng.gen::<f64>();
                t += -u.ln() / rate;
            }
        }
    }
    v
}

#[allow(clippy::too_many_arguments)]
async fn open(
    target: Target,
    plan: Plan,
    rate: f64,
    arrival: Arrival,
    source: Arc<dyn Source>,
    opts: StreamOpts,
    out: UnboundedSender<Trace>,
    mut cancel: watch::Receiver<bool>,
) -> Result<RunWindow, RequestError> {
    // Enough warm connections for about a second of arrivals; more are opened on demand.
    let warm = (rate.ceil() as usize).clamp(1, 256);
    let pool: Arc<Mutex<Vec<Conn>>> = Arc::new(Mutex::new(
        open_conns(&target, warm, Duration::from_secs(30)).await?,
    ));
    let total = match (plan.requests, plan.duration) {
        (Some(r), _) => plan.warmup + r,
        (None, Some(d)) => plan.warmup + (d.as_secs_f64() * rate * 3.0).ceil() as u64 + 16,
        (None, None) => plan.warmup + 1,
    };
    let offsets = schedule(rate, arrival, total);
    let start = mono_ns();
    let measured_start = start + offsets.get(plan.warmup as usize).copied().unwrap_or(0);
    let deadline = plan.duration.map(|d| measured_start + d.as_nanos() as u64);
    let mut set = tokio::task::JoinSet::new();
    let base = tokio::time::Instant::now();
    for (i, off) in offsets.into_iter().enumerate() {
        let intended = start + off;
        if deadline.is_some_and(|d| intended >= d) {
            break;
        }
        tokio::select! {
            biased;
            _ = cancelled(&mut cancel) => break,
            _ = tokio::time::sleep_until(base + Duration::from_nanos(off)) => {}
        }
        let pool = pool.clone();
        let source = source.clone();
        let opts = opts.clone();
        let out = out.clone();
        let target = target.clone();
        let warmup = (i as u64) < plan.warmup;
        set.spawn(async move {
            let mut conn = pool.lock().expect("pool lock").pop();
            let t = one(
                &mut conn,
                &target,
                &*source,
                i as u64,
                warmup,
                Some(intended),
                &opts,
            )
            .await;
            if let Some(c) = conn {
                if c.reusable {
                    pool.lock().expect("pool lock").push(c);
                }
            }
            let _ = out.send(t);
        });
        // Reap finished tasks so a long run doesn't accumulate handles.
        while set.try_join_next().is_some() {}
    }
    loop {
        tokio::select! {
            biased;
            r = set.join_next() => if r.is_none() { break },
            // Requests in flight when the run is cancelled are dropped: they send no trace.
            _ = cancelled(&mut cancel) => {
                set.abort_all();
                while set.join_next().await.is_some() {}
                break;
            }
        }
    }
    Ok(RunWindow {
        start_ns: measured_start,
        end_ns: mono_ns(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn constant_schedule() {
        let s = schedule(4.0, Arrival::Constant, 3);
        assert_eq!(s, vec![0, 250_000_000, 500_000_000]);
    }

    #[test]
    fn poisson_schedule_is_seeded_and_has_the_rate() {
        let a = schedule(50.0, Arrival::Poisson { seed: 3 }, 5000);
        assert_eq!(a, schedule(50.0, Arrival::Poisson { seed: 3 }, 5000));
        assert_ne!(a, schedule(50.0, Arrival::Poisson { seed: 4 }, 5000));
        let secs = *a.last().unwrap() as f64 / 1e9;
        let rate = 4999.0 / secs;
        assert!((rate - 50.0).abs() < 3.0, "rate {rate}");
        assert!(a.windows(2).all(|w| w[0] <= w[1]));
    }
}
