//! Load generation: closed loop at a fixed concurrency, or open loop at a request rate.
//!
//! Connections are opened before the clock starts so the first wave measures the engine, not
//! TCP setup. Each finished request's trace goes to a channel; the caller aggregates.

pub mod conversation;
mod open_loop;
pub mod pace;
pub mod places;
pub mod session;
pub mod source;
pub mod timer;

pub use open_loop::{schedule, warmup_count, SEND_LEAD};

use crate::client::{Conn, ErrorClass, Place, Reader, RequestError, StreamOpts, Target, Trace};
use crate::clock::mono_ns;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::mpsc::UnboundedSender;
use tokio::sync::watch;

#[derive(Debug, Clone, PartialEq)]
pub enum Arrival {
    Constant,
    Poisson {
        seed: u64,
    },
    /// Given send offsets (ns after the start, sorted): a replayed trace (`workload::trace`).
    /// The rate is then only the warm connection pool's size and the warm-up-by-time estimate.
    Given(Arc<[u64]>),
}

#[derive(Debug, Clone, PartialEq)]
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
    /// Warm-up by time: every request started within this long of the load's start is also
    /// warm-up (with `warmup`, the warm-up lasts until both are done). Open loop: by intended
    /// start.
    pub warmup_duration: Option<Duration>,
    /// Open loop only: at most this many requests in flight. A request whose start time comes
    /// while the cap is full waits for a slot; its wait shows as schedule lag (intended start to
    /// actual send), never in its latencies, which run from the actual send.
    pub max_in_flight: Option<usize>,
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
    /// Requests of the warm-up (by count and by time).
    pub warmup_requests: u64,
    /// Open loop with `max_in_flight`: measured requests whose start time came while the cap
    /// was full, so they waited for a slot.
    pub cap_delayed: u64,
    /// The most requests the client had in flight at once (open loop; the closed loop's is its
    /// concurrency).
    pub peak_in_flight: u64,
    /// Open loop whose sends a send thread wrote: how that thread was scheduled
    /// (`realtime`, `short-slice` or `default`; `client::Reader::send_thread`).
    pub send_thread: Option<&'static str>,
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
    match plan.mode.clone() {
        Mode::Closed { concurrency } => {
            closed(target, plan, concurrency, source, opts, out, cancel).await
        }
        Mode::Open { rate, arrival } => {
            open_loop::open(target, plan, rate, arrival, source, opts, out, cancel).await
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

#[allow(clippy::too_many_arguments)]
async fn one(
    conn: &mut Option<Conn>,
    target: &Target,
    source: &dyn Source,
    index: u64,
    warmup: bool,
    intended_ns: Option<u64>,
    opts: &StreamOpts,
    reader: Option<&Reader>,
) -> Trace {
    let prepared = source.prepare(index);
    let mut trace = send(
        conn,
        target,
        prepared,
        index,
        warmup,
        intended_ns,
        opts,
        reader,
    )
    .await;
    trace.place = source.place(index);
    trace
}

/// Sends one prepared request on `conn` (a fresh connection when it has none or can't be reused);
/// with `reader`, the load's shared reader reads the response.
#[allow(clippy::too_many_arguments)]
async fn send(
    conn: &mut Option<Conn>,
    target: &Target,
    prepared: Prepared,
    index: u64,
    warmup: bool,
    intended_ns: Option<u64>,
    opts: &StreamOpts,
    reader: Option<&Reader>,
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
        c.stream_via(&prepared.bytes, opts, &mut trace, reader)
            .await;
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
    let reader = shared_reader(false);
    let mut slots: Vec<Option<Conn>> = conns.into_iter().map(Some).collect();
    let load_start = mono_ns();
    let mut next = 0u64;
    if plan.warmup > 0 {
        (slots, next) = closed_phase(
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
            reader.as_ref(),
        )
        .await;
    }
    if let Some(w) = plan.warmup_duration {
        // Requests started within the warm-up time are warm-up too (none if the count
        // warm-up already outlasted it).
        let until = load_start + w.as_nanos() as u64;
        if mono_ns() < until {
            (slots, next) = closed_phase(
                &target,
                slots,
                next,
                u64::MAX,
                Some(until),
                true,
                &source,
                &opts,
                &out,
                &cancel,
                reader.as_ref(),
            )
            .await;
        }
    }
    let start = mono_ns();
    let deadline = plan.duration.map(|d| start + d.as_nanos() as u64);
    let end_index = plan.requests.map(|r| next + r).unwrap_or(u64::MAX);
    closed_phase(
        &target,
        slots,
        next,
        end_index,
        deadline,
        false,
        &source,
        &opts,
        &out,
        &cancel,
        reader.as_ref(),
    )
    .await;
    Ok(RunWindow {
        start_ns: start,
        end_ns: mono_ns(),
        warmup_requests: next,
        cap_delayed: 0,
        peak_in_flight: concurrency as u64,
        send_thread: None,
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
    reader: Option<&Reader>,
) -> (Vec<Option<Conn>>, u64) {
    let next = Arc::new(AtomicU64::new(from));
    let mut set = tokio::task::JoinSet::new();
    for mut conn in slots {
        let next = next.clone();
        let source = source.clone();
        let opts = opts.clone();
        let out = out.clone();
        let target = target.clone();
        let cancel = cancel.clone();
        let reader = reader.cloned();
        set.spawn(async move {
            let mut state = StreamState::default();
            loop {
                if deadline.is_some_and(|d| mono_ns() >= d) || *cancel.borrow() {
                    break;
                }
                // Only indices that run are taken, so the next phase starts right after them.
                let Ok(i) = next.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |i| {
                    (i < to).then_some(i + 1)
                }) else {
                    break;
                };
                let t = match source.conversations() {
                    None => {
                        one(
                            &mut conn,
                            &target,
                            &*source,
                            i,
                            warmup,
                            None,
                            &opts,
                            reader.as_ref(),
                        )
                        .await
                    }
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
    let conns = collect_workers(set, cancel.clone()).await;
    let next = next.load(Ordering::Relaxed);
    (conns, next)
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

/// The load's shared reader (`client::Reader`): one task reads every streaming response. Where
/// it cannot start, each request's task reads its own response, as before, with the same
/// timing and parsing. `paced`: with its send thread (`Reader::start_paced`), or without one
/// where that cannot start.
fn shared_reader(paced: bool) -> Option<Reader> {
    match paced {
        true => Reader::start_paced().or_else(|_| Reader::start()).ok(),
        false => Reader::start().ok(),
    }
}
