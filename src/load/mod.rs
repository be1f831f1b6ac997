//! Load generation: closed loop at a fixed concurrency, or open loop at a request rate.
//!
//! Connections are opened before the clock starts so the first wave measures the engine, not
//! TCP setup. Each finished request's trace goes to a channel; the caller aggregates.

pub mod conversation;
pub mod pace;
pub mod places;
pub mod session;
pub mod source;
pub mod timer;

use crate::client::{Conn, ErrorClass, Place, Reader, RequestError, StreamOpts, Target, Trace};
use crate::clock::mono_ns;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
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
    let reader = shared_reader();
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
/// timing and parsing.
fn shared_reader() -> Option<Reader> {
    Reader::start().ok()
}

/// Intended send offsets (ns after start) for an open-loop run.
pub fn schedule(rate: f64, arrival: &Arrival, n: u64) -> Vec<u64> {
    let mut v = Vec::with_capacity(n as usize);
    match arrival {
        Arrival::Constant => {
            for i in 0..n {
                v.push((i as f64 / rate * 1e9) as u64);
            }
        }
        Arrival::Given(offsets) => {
            v.extend(offsets.iter().take(n as usize));
        }
        Arrival::Poisson { seed } => {
            let mut rng = ChaCha8Rng::seed_from_u64(*seed);
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

/// How many of the first scheduled requests are warm-up: at least `count`, and every one whose
/// intended start falls within `duration` of the start (the offsets are sorted).
pub fn warmup_count(offsets: &[u64], count: u64, duration: Option<Duration>) -> u64 {
    let by_time = duration.map_or(0, |d| {
        let d = d.as_nanos() as u64;
        offsets.partition_point(|&o| o < d) as u64
    });
    count.max(by_time)
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
    // Enough warm connections for about a second of arrivals (or the cap); more are opened on
    // demand.
    let cap = plan.max_in_flight.map(|c| c.max(1));
    let warm = (rate.ceil() as usize)
        .min(cap.unwrap_or(usize::MAX))
        .clamp(1, 256);
    let pool: Arc<Mutex<Vec<Conn>>> = Arc::new(Mutex::new(
        open_conns(&target, warm, Duration::from_secs(30)).await?,
    ));
    // The schedule's prefix does not depend on its length, so the warm-up by time is counted
    // on a schedule long enough to hold it, then the measured requests follow. A multi-turn
    // source's arrivals are conversations of `per` requests each.
    let per = source
        .conversations()
        .map_or(1, |c| c.turns_per_conversation as u64);
    let warmup = match plan.warmup_duration {
        None => plan.warmup.div_ceil(per),
        Some(d) => {
            let n = plan.warmup + (d.as_secs_f64() * rate * 3.0).ceil() as u64 + 16;
            warmup_count(
                &schedule(rate, &arrival, n),
                plan.warmup.div_ceil(per),
                Some(d),
            )
        }
    };
    let total = match (plan.requests, plan.duration) {
        (Some(r), _) => warmup + r.div_ceil(per),
        (None, Some(d)) => warmup + (d.as_secs_f64() * rate * 3.0).ceil() as u64 + 16,
        (None, None) => warmup + 1,
    };
    let offsets = schedule(rate, &arrival, total);
    let reader = shared_reader();
    let start = mono_ns();
    let measured_start = start + offsets.get(warmup as usize).copied().unwrap_or(0);
    let deadline = plan.duration.map(|d| measured_start + d.as_nanos() as u64);
    let slots = cap.map(|c| Arc::new(tokio::sync::Semaphore::new(c)));
    let in_flight = Arc::new(AtomicU64::new(0));
    let peak = Arc::new(AtomicU64::new(0));
    let mut cap_delayed = 0u64;
    let mut set = tokio::task::JoinSet::new();
    let base = tokio::time::Instant::now();
    // Sends wait on a timerfd (ns resolution); tokio's millisecond timer only where none opens.
    let timer = timer::SendTimer::new().ok();
    'arrivals: for (i, off) in offsets.into_iter().enumerate() {
        let intended = start + off;
        if deadline.is_some_and(|d| intended >= d) {
            break;
        }
        tokio::select! {
            biased;
            _ = cancelled(&mut cancel) => break,
            _ = timer::wait_until(timer.as_ref(), intended, base + Duration::from_nanos(off)) => {}
        }
        let is_warmup = (i as u64) < warmup;
        // With a cap, the request waits here for a slot; requests behind it wait in order.
        let permit = match &slots {
            None => None,
            Some(sem) => match sem.clone().try_acquire_owned() {
                Ok(p) => Some(p),
                Err(_) => {
                    if !is_warmup {
                        cap_delayed += 1;
                    }
                    tokio::select! {
                        biased;
                        _ = cancelled(&mut cancel) => break 'arrivals,
                        p = sem.clone().acquire_owned() => Some(p.expect("the semaphore is never closed")),
                    }
                }
            },
        };
        let now = in_flight.fetch_add(1, Ordering::Relaxed) + 1;
        peak.fetch_max(now, Ordering::Relaxed);
        let pool = pool.clone();
        let source = source.clone();
        let opts = opts.clone();
        let out = out.clone();
        let target = target.clone();
        let in_flight = in_flight.clone();
        let reader = reader.clone();
        set.spawn(async move {
            let mut conn = pool.lock().expect("pool lock").pop();
            let t = conversation::arrival(
                &*source,
                &mut conn,
                &target,
                (i as u64, is_warmup, intended),
                &opts,
                &out,
                reader.as_ref(),
            )
            .await;
            if let Some(c) = conn {
                if c.reusable {
                    pool.lock().expect("pool lock").push(c);
                }
            }
            in_flight.fetch_sub(1, Ordering::Relaxed);
            // The slot frees before the trace is handed on: the request is over.
            drop(permit);
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
        warmup_requests: warmup * per,
        cap_delayed,
        peak_in_flight: peak.load(Ordering::Relaxed),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn constant_schedule() {
        let s = schedule(4.0, &Arrival::Constant, 3);
        assert_eq!(s, vec![0, 250_000_000, 500_000_000]);
    }

    #[test]
    fn poisson_schedule_is_seeded_and_has_the_rate() {
        let a = schedule(50.0, &Arrival::Poisson { seed: 3 }, 5000);
        assert_eq!(a, schedule(50.0, &Arrival::Poisson { seed: 3 }, 5000));
        assert_ne!(a, schedule(50.0, &Arrival::Poisson { seed: 4 }, 5000));
        let secs = *a.last().unwrap() as f64 / 1e9;
        let rate = 4999.0 / secs;
        assert!((rate - 50.0).abs() < 3.0, "rate {rate}");
        assert!(a.windows(2).all(|w| w[0] <= w[1]));
    }
    #[test]
    fn warmup_by_time_counts_the_scheduled_starts_within_it() {
        let s = schedule(10.0, &Arrival::Constant, 50);
        // Starts at 0, 100, ..., 900 ms fall within one second.
        assert_eq!(warmup_count(&s, 0, Some(Duration::from_secs(1))), 10);
        assert_eq!(warmup_count(&s, 12, Some(Duration::from_secs(1))), 12);
        assert_eq!(warmup_count(&s, 3, None), 3);
        assert_eq!(warmup_count(&s, 0, Some(Duration::from_millis(1))), 1);
    }

    /// A server that answers every request with a short SSE stream after `hold`, counting the
    /// requests it is serving at once (its own in-flight record).
    async fn slow_server(hold: Duration) -> (Target, Arc<AtomicU64>) {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = l.local_addr().unwrap().port();
        let now = Arc::new(AtomicU64::new(0));
        let peak = Arc::new(AtomicU64::new(0));
        let peak2 = peak.clone();
        tokio::spawn(async move {
            loop {
                let Ok((mut s, _)) = l.accept().await else {
                    return;
                };
                let (now, peak) = (now.clone(), peak2.clone());
                tokio::spawn(async move {
                    let mut buf = vec![0u8; 65536];
                    loop {
                        match s.read(&mut buf).await {
                            Ok(0) | Err(_) => return,
                            Ok(_) => {}
                        }
                        let n = now.fetch_add(1, Ordering::SeqCst) + 1;
                        peak.fetch_max(n, Ordering::SeqCst);
                        tokio::time::sleep(hold).await;
                        let mut body = String::new();
                        for e in [
                            "data: {\"choices\":[{\"delta\":{\"content\":\"x\"}}]}\n\n",
                            "data: [DONE]\n\n",
                        ] {
                            body.push_str(&format!("{:x}\r\n{e}\r\n", e.len()));
                        }
                        body.push_str("0\r\n\r\n");
                        now.fetch_sub(1, Ordering::SeqCst);
                        let head = "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n";
                        if s.write_all(format!("{head}{body}").as_bytes())
                            .await
                            .is_err()
                        {
                            return;
                        }
                    }
                });
            }
        });
        let t = Target::parse(&format!("http://127.0.0.1:{port}")).unwrap();
        (t, peak)
    }

    struct Req(Target);
    impl Source for Req {
        fn prepare(&self, _: u64) -> Prepared {
            Prepared {
                bytes: crate::client::post_request_bytes(
                    &self.0,
                    "/v1/chat/completions",
                    b"{}",
                    None,
                    true,
                ),
                prompt_tokens: None,
            }
        }
    }

    async fn capped(
        rate: f64,
        cap: Option<usize>,
        n: u64,
        hold: Duration,
    ) -> (RunWindow, Vec<Trace>, u64) {
        let (target, server_peak) = slow_server(hold).await;
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
        let plan = Plan {
            mode: Mode::Open {
                rate,
                arrival: Arrival::Constant,
            },
            requests: Some(n),
            duration: None,
            warmup: 0,
            warmup_duration: None,
            max_in_flight: cap,
        };
        let w = run(
            target.clone(),
            plan,
            Arc::new(Req(target)),
            StreamOpts::default(),
            tx,
        )
        .await
        .unwrap();
        let mut traces = Vec::new();
        while let Ok(t) = rx.try_recv() {
            traces.push(t);
        }
        (w, traces, server_peak.load(Ordering::SeqCst))
    }

    #[tokio::test]
    async fn the_cap_holds_and_its_wait_is_schedule_lag_not_latency() {
        // 100 arrivals/s for 12 requests, each served in 100 ms, at most 2 in flight: without the
        // cap about 10 would overlap.
        let hold = Duration::from_millis(100);
        let (w, traces, server_peak) = capped(100.0, Some(2), 12, hold).await;
        assert_eq!(traces.len(), 12);
        assert!(
            traces.iter().all(|t| t.error.is_none()),
            "{:?}",
            traces[0].error
        );
        assert!(
            server_peak <= 2,
            "the server saw {server_peak} requests at once"
        );
        assert!(w.peak_in_flight <= 2, "{w:?}");
        // Two start on time; most of the other ten come while the cap is full (how many exactly
        // depends on when slots free up against the 10 ms arrivals on a loaded host).
        assert!((6..=10).contains(&w.cap_delayed), "{w:?}");
        // TTFT runs from the actual send: about the server's 100 ms, never the queueing.
        for t in &traces {
            let ttft = RequestMetricsView::ttft_ms(t);
            assert!(
                (95.0..250.0).contains(&ttft),
                "request {}: TTFT {ttft} ms includes the wait for a slot",
                t.index
            );
        }
        // The wait is the schedule lag: the last requests waited about 5 rounds of 100 ms.
        let lag = |t: &Trace| t.send_ns.saturating_sub(t.intended_ns.unwrap()) as f64 / 1e6;
        let max_lag = traces.iter().map(lag).fold(0.0, f64::max);
        assert!(max_lag > 350.0, "max schedule lag {max_lag} ms");

        // The same load without the cap overlaps on the server.
        let (w, _, server_peak) = capped(100.0, None, 12, hold).await;
        assert!(server_peak >= 5, "uncapped peak {server_peak}");
        assert_eq!(w.cap_delayed, 0);
        assert!(w.peak_in_flight >= 5, "{w:?}");
    }

    struct RequestMetricsView;
    impl RequestMetricsView {
        fn ttft_ms(t: &Trace) -> f64 {
            crate::metrics::RequestMetrics::from_trace(t)
                .ttft_ms
                .expect("a first token")
        }
    }
}
