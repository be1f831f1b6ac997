//! The open loop: requests started at scheduled times (constant, Poisson or given offsets),
//! whatever the server's pace, optionally capped in flight. Where the load allows, a send
//! thread writes each request at its time (`client::Reader::start_paced`); its task starts
//! [`SEND_LEAD`] early to build the body and take a connection, so neither delays the send.

use super::{cancelled, conversation, open_conns, shared_reader, timer};
use super::{Arrival, Plan, RunWindow, Source};
use crate::client::{Conn, Reader, RequestError, StreamOpts, Target, Trace};
use crate::clock::mono_ns;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::mpsc::UnboundedSender;
use tokio::sync::watch;

/// How long before its time an open-loop request's task starts when a send thread writes it:
/// time for the task to build the body, take or open a connection and queue the write, however
/// late the client's runtime gets to it, so none of that delays the send.
pub const SEND_LEAD: Duration = Duration::from_millis(20);

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
pub(super) async fn open(
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
    // A multi-turn source's arrivals are conversations of `per` requests each.
    let per = source
        .conversations()
        .map_or(1, |c| c.turns_per_conversation as u64);
    let (warmup, total) = arrivals(&plan, rate, &arrival, per);
    let offsets = schedule(rate, &arrival, total);
    // Requests go out from the send thread (`client::Reader::start_paced`) where the load allows:
    // plain HTTP, nothing kept, single requests (a conversation's later turns have no time to
    // keep) and no cap (a capped request waits for its slot at its time, in the runtime).
    let pace =
        cap.is_none() && source.conversations().is_none() && target.tls.is_none() && !opts.collect;
    let reader = shared_reader(pace);
    let lead = match reader.as_ref().is_some_and(Reader::is_paced) {
        true => SEND_LEAD.as_nanos() as u64,
        false => 0,
    };
    // The first sends get their lead too: the schedule starts `lead` from now.
    let start = mono_ns() + lead;
    let measured_start = start + offsets.get(warmup as usize).copied().unwrap_or(0);
    let deadline = plan.duration.map(|d| measured_start + d.as_nanos() as u64);
    let slots = cap.map(|c| Arc::new(tokio::sync::Semaphore::new(c)));
    // Each request's span in flight, from its intended start (or its task's, when later) to
    // its end: paced requests' tasks start `lead` early, waiting is not being in flight.
    let spans: Arc<Mutex<Vec<(u64, u64)>>> = Arc::default();
    let mut cap_delayed = 0u64;
    let mut set = tokio::task::JoinSet::new();
    let (base, base_ns) = (tokio::time::Instant::now(), mono_ns());
    // Sends wait on a timerfd (ns resolution); tokio's millisecond timer only where none opens.
    let timer = timer::SendTimer::new().ok();
    'arrivals: for (i, off) in offsets.into_iter().enumerate() {
        let intended = start + off;
        if deadline.is_some_and(|d| intended >= d) {
            break;
        }
        // Paced, the task starts `lead` early and the send thread writes at `intended`.
        let wake = intended - lead;
        let fallback = base + Duration::from_nanos(wake.saturating_sub(base_ns));
        tokio::select! {
            biased;
            _ = cancelled(&mut cancel) => break,
            _ = timer::wait_until(timer.as_ref(), wake, fallback) => {}
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
        let pool = pool.clone();
        let source = source.clone();
        let opts = opts.clone();
        let out = out.clone();
        let target = target.clone();
        let spans = spans.clone();
        let reader = reader.clone();
        set.spawn(async move {
            let from = mono_ns().max(intended);
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
            spans.lock().expect("spans lock").push((from, mono_ns()));
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
    let peak_in_flight = peak(&spans.lock().expect("spans lock"));
    Ok(RunWindow {
        start_ns: measured_start,
        end_ns: mono_ns(),
        warmup_requests: warmup * per,
        cap_delayed,
        peak_in_flight,
        send_thread: reader.as_ref().and_then(Reader::send_thread),
    })
}

/// How many arrivals are warm-up, and how many to schedule. The schedule's prefix does not
/// depend on its length, so the warm-up by time is counted on a schedule long enough to hold
/// it, then the measured arrivals follow.
fn arrivals(plan: &Plan, rate: f64, arrival: &Arrival, per: u64) -> (u64, u64) {
    let warmup = match plan.warmup_duration {
        None => plan.warmup.div_ceil(per),
        Some(d) => {
            let n = plan.warmup + (d.as_secs_f64() * rate * 3.0).ceil() as u64 + 16;
            warmup_count(
                &schedule(rate, arrival, n),
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
    (warmup, total)
}

/// The most spans `(from, to)` that overlap at one time (one ending as another starts do not).
fn peak(spans: &[(u64, u64)]) -> u64 {
    let mut edges: Vec<(u64, i64)> = spans
        .iter()
        .flat_map(|&(a, b)| [(a, 1), (b.max(a), -1)])
        .collect();
    edges.sort_unstable();
    let (mut now, mut most) = (0i64, 0i64);
    for (_, d) in edges {
        now += d;
        most = most.max(now);
    }
    most as u64
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::load::{run, Mode, Prepared};
    use std::sync::atomic::{AtomicU64, Ordering};

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
    fn the_peak_counts_overlapping_spans_only() {
        assert_eq!(peak(&[]), 0);
        assert_eq!(peak(&[(0, 10), (10, 20), (20, 30)]), 1);
        assert_eq!(peak(&[(0, 10), (5, 15), (6, 7), (14, 30)]), 3);
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
