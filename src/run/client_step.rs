//! One timed load, and where it runs (docs/fleet.md "Where the client runs"): in this process,
//! or on a Slurm lane's own node as a job step beside the arm (`srun --jobid=<the arm's job>
//! --overlap -w <node> bakeoff client-step ORDER OUT`).
//!
//! ```text
//! controller: timed::run_work ─▶ order (the load plan, every request's bytes) ─▶ ORDER file
//!             ─▶ srun … client-step ─▶ node: load() ─▶ OUT file (raw traces, never figures)
//!             ─▶ LoadOut ─▶ timed's figures, as for an in-process load
//! ```
//!
//! Both places run the one [`load`] (`load::session`, as `bakeoff bench` does) and hand back the
//! same [`LoadOut`]: the raw per-request traces and what the session measured around them. The
//! figures are computed from it by the controller in one way (`timed`), wherever the load ran.

use crate::client::{Place, RequestError, StreamOpts, Target, Trace};
use crate::load::session::{self, Reads, Session, Telemetry};
use crate::load::{Arrival, Mode, Plan, Prepared, RunWindow, Source};
use crate::metrics::summary::Collector;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// The order file's format tag.
pub const ORDER_FORMAT: &str = "bakeoff.client-order/1";
/// The client step's output's format tag.
pub const OUT_FORMAT: &str = "bakeoff.client-load/1";

/// One timed load, serialized for the client step on a lane's node: everything the load needs,
/// each request already built (so the node sends exactly the bytes the controller would have).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Order {
    pub format: String,
    /// The engine as the node reaches it (`http://ADDR:PORT`).
    pub target: String,
    pub plan: PlanOrder,
    /// Request `i` of the load sends `requests[i]` (the load numbers its requests from 0).
    pub requests: Vec<RequestOrder>,
    pub timeout_ns: u64,
    pub stall_ns: u64,
    /// The lane's GPUs sampled around the load (none on a Slurm lane: `gpus` is refused there).
    pub gpus: Vec<String>,
    pub seed: u64,
}

/// `load::Plan` as data.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PlanOrder {
    pub mode: ModeOrder,
    pub requests: Option<u64>,
    pub duration_ns: Option<u64>,
    pub warmup: u64,
    pub warmup_duration_ns: Option<u64>,
    pub max_in_flight: Option<usize>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "loop", rename_all = "kebab-case")]
pub enum ModeOrder {
    Closed { concurrency: usize },
    Open { rate: f64, arrival: ArrivalOrder },
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum ArrivalOrder {
    Constant,
    Poisson { seed: u64 },
    Given { offsets_ns: Vec<u64> },
}

/// One prepared request: its HTTP bytes (text: a request line, headers and a JSON body).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RequestOrder {
    pub bytes: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prompt_tokens: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub place: Option<Place>,
}

impl PlanOrder {
    pub fn of(p: &Plan) -> PlanOrder {
        let ns = |d: Duration| d.as_nanos() as u64;
        PlanOrder {
            mode: match &p.mode {
                Mode::Closed { concurrency } => ModeOrder::Closed {
                    concurrency: *concurrency,
                },
                Mode::Open { rate, arrival } => ModeOrder::Open {
                    rate: *rate,
                    arrival: match arrival {
                        Arrival::Constant => ArrivalOrder::Constant,
                        Arrival::Poisson { seed } => ArrivalOrder::Poisson { seed: *seed },
                        Arrival::Given(o) => ArrivalOrder::Given {
                            offsets_ns: o.to_vec(),
                        },
                    },
                },
            },
            requests: p.requests,
            duration_ns: p.duration.map(ns),
            warmup: p.warmup,
            warmup_duration_ns: p.warmup_duration.map(ns),
            max_in_flight: p.max_in_flight,
        }
    }

    pub fn plan(&self) -> Plan {
        Plan {
            mode: match &self.mode {
                ModeOrder::Closed { concurrency } => Mode::Closed {
                    concurrency: *concurrency,
                },
                ModeOrder::Open { rate, arrival } => Mode::Open {
                    rate: *rate,
                    arrival: match arrival {
                        ArrivalOrder::Constant => Arrival::Constant,
                        ArrivalOrder::Poisson { seed } => Arrival::Poisson { seed: *seed },
                        ArrivalOrder::Given { offsets_ns } => {
                            Arrival::Given(offsets_ns.clone().into())
                        }
                    },
                },
            },
            requests: self.requests,
            duration: self.duration_ns.map(Duration::from_nanos),
            warmup: self.warmup,
            warmup_duration: self.warmup_duration_ns.map(Duration::from_nanos),
            max_in_flight: self.max_in_flight,
        }
    }
}

/// The order for a load of `plan` from `source` to `target`: requests `0..n` built here (`n`:
/// every index the load may ask for). Err: a source this cannot carry (a multi-turn one builds
/// each turn from the replies before it, on the client).
pub fn order(
    target: &Target,
    plan: &Plan,
    source: &dyn Source,
    n: u64,
    opts: &StreamOpts,
    gpus: &[String],
    seed: u64,
) -> Result<Order, String> {
    if source.conversations().is_some() {
        return Err("a multi-turn workload builds each turn from the replies before it, so it cannot be ordered ahead to a client on the lane's node; set `[fleet] client = \"controller\"`".into());
    }
    let requests = (0..n)
        .map(|i| {
            let p = source.prepare(i);
            let bytes =
                String::from_utf8(p.bytes).map_err(|_| format!("request {i} is not UTF-8 text"))?;
            Ok(RequestOrder {
                bytes,
                prompt_tokens: p.prompt_tokens,
                place: source.place(i),
            })
        })
        .collect::<Result<Vec<_>, String>>()?;
    Ok(Order {
        format: ORDER_FORMAT.into(),
        target: target.to_string(),
        plan: PlanOrder::of(plan),
        requests,
        timeout_ns: opts.timeout.as_nanos() as u64,
        stall_ns: opts.stall.as_nanos() as u64,
        gpus: gpus.to_vec(),
        seed,
    })
}

/// The requests of an order as the load's source. An index past the order (a warm-up by time
/// that ran longer than the order allowed for) sends the last ordered request again and is
/// counted (`LoadOut::past_order`): the controller fails such a step, never uses it.
struct OrderSource {
    requests: Vec<RequestOrder>,
    past: AtomicU64,
}

impl Source for OrderSource {
    fn prepare(&self, index: u64) -> Prepared {
        let r = match self.requests.get(index as usize) {
            Some(r) => r,
            None => {
                self.past.fetch_add(1, Ordering::Relaxed);
                self.requests.last().expect("an order has requests")
            }
        };
        Prepared {
            bytes: r.bytes.clone().into_bytes(),
            prompt_tokens: r.prompt_tokens,
        }
    }

    fn place(&self, index: u64) -> Option<Place> {
        self.requests.get(index as usize).and_then(|r| r.place)
    }
}

/// What one timed load hands back, in this process or from the client step on a lane's node:
/// the raw per-request traces (in arrival order) and what the session measured around them.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct LoadOut {
    pub format: String,
    pub traces: Vec<Trace>,
    /// The measured phase's window, or why the load could not start.
    pub window: Option<WindowOut>,
    pub window_error: Option<RequestError>,
    /// CLOCK_MONOTONIC ns (of the host the load ran on) just before and after the load.
    pub started_ns: u64,
    pub ended_ns: u64,
    pub reads: ReadsOut,
    /// The engine's `/metrics` before and after, and the GPU samples (`load::session`).
    pub engine_metrics: Value,
    pub gpu: Value,
    /// Requests asked for past the order (a client step only; a step with any is failed).
    #[serde(default)]
    pub past_order: u64,
    /// Where the client step ran (None: in this process).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ran_on: Option<RanOn>,
}

/// `load::RunWindow` as data.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct WindowOut {
    pub start_ns: u64,
    pub end_ns: u64,
    pub warmup_requests: u64,
    pub cap_delayed: u64,
    pub peak_in_flight: u64,
    /// How the send thread was scheduled (`load::RunWindow::send_thread`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub send_thread: Option<String>,
}

/// `load::session::Reads` as data.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct ReadsOut {
    pub kernel_stamped: u64,
    pub read_time: u64,
    pub lag_hist: Vec<u64>,
}

impl LoadOut {
    pub fn window(&self) -> Result<RunWindow, RequestError> {
        match (&self.window, &self.window_error) {
            (Some(w), _) => Ok(RunWindow {
                start_ns: w.start_ns,
                end_ns: w.end_ns,
                warmup_requests: w.warmup_requests,
                cap_delayed: w.cap_delayed,
                peak_in_flight: w.peak_in_flight,
                send_thread: w
                    .send_thread
                    .as_deref()
                    .and_then(crate::client::SendThread::named)
                    .map(crate::client::SendThread::name),
            }),
            (None, Some(e)) => Err(e.clone()),
            (None, None) => Err(RequestError::new(
                crate::client::ErrorClass::Io,
                "the client step recorded no window and no error",
            )),
        }
    }

    pub fn reads(&self) -> Reads {
        Reads {
            kernel_stamped: self.reads.kernel_stamped,
            read_time: self.reads.read_time,
            lag_hist: std::array::from_fn(|i| self.reads.lag_hist.get(i).copied().unwrap_or(0)),
        }
    }

    /// Every trace folded into the run's statistics, in arrival order, as the session folds
    /// them (`load::session`): the one way figures come from a load, wherever it ran.
    pub fn collector(&self) -> Collector {
        let mut c = Collector::default();
        for t in &self.traces {
            c.add(t, t.client_prompt_tokens);
        }
        c
    }
}

/// Runs one timed load here (`load::session`, with the lane's telemetry): the one load both a
/// step in this process and the client step on a node run.
pub async fn load(
    target: Target,
    plan: Plan,
    source: Arc<dyn Source>,
    opts: StreamOpts,
    gpus: Vec<String>,
    seed: u64,
) -> Result<LoadOut, String> {
    let s = Session {
        target,
        plan,
        source,
        opts,
        cancel: None,
        telemetry: Telemetry::Lane { gpus },
        seed,
    };
    let out = session::run(s, Vec::<Trace>::new())
        .await
        .map_err(|e| format!("{e:#}"))?;
    let lane = out.lane.expect("asked for lane telemetry");
    let (window, window_error) = match out.window {
        Ok(w) => (
            Some(WindowOut {
                start_ns: w.start_ns,
                end_ns: w.end_ns,
                warmup_requests: w.warmup_requests,
                cap_delayed: w.cap_delayed,
                peak_in_flight: w.peak_in_flight,
                send_thread: w.send_thread.map(str::to_string),
            }),
            None,
        ),
        Err(e) => (None, Some(e)),
    };
    Ok(LoadOut {
        format: OUT_FORMAT.into(),
        traces: out.sink,
        window,
        window_error,
        started_ns: out.started_ns,
        ended_ns: out.ended_ns,
        reads: ReadsOut {
            kernel_stamped: out.reads.kernel_stamped,
            read_time: out.reads.read_time,
            lag_hist: out.reads.lag_hist.to_vec(),
        },
        engine_metrics: lane.engine_metrics,
        gpu: lane.gpu,
        past_order: 0,
        ran_on: None,
    })
}

/// Where a client step ran, as it saw itself: the controller checks it against the lane's node.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct RanOn {
    /// The host's name (a node in a network namespace of the test cluster shares the host's).
    pub hostname: String,
    /// `SLURMD_NODENAME`, `SLURM_JOB_ID`, `SLURM_STEP_ID` as srun gave them to the step.
    pub slurmd_nodename: Option<String>,
    pub slurm_job_id: Option<String>,
    pub slurm_step_id: Option<String>,
    /// The address this host sends from to reach the engine (the route's source address): on
    /// the lane's node, the node's own.
    pub local_address: Option<String>,
}

impl RanOn {
    fn here(target: &Target) -> RanOn {
        let var = |k: &str| std::env::var(k).ok().filter(|v| !v.is_empty());
        // A UDP connect sends nothing: it only picks the route and so the source address.
        let local_address = std::net::UdpSocket::bind(("0.0.0.0", 0))
            .and_then(|s| {
                s.connect((target.host.as_str(), target.port))?;
                s.local_addr()
            })
            .ok()
            .map(|a| a.ip().to_string());
        RanOn {
            hostname: crate::telemetry::host::hostname(),
            slurmd_nodename: var("SLURMD_NODENAME"),
            slurm_job_id: var("SLURM_JOB_ID"),
            slurm_step_id: var("SLURM_STEP_ID"),
            local_address,
        }
    }
}

/// `bakeoff client-step ORDER OUT` on the lane's node: reads the order, runs its load, and
/// writes the raw load with where it ran. Err: the message for the step's stderr (srun hands it
/// to the controller).
pub async fn serve(order_file: &Path, out_file: &Path) -> Result<(), String> {
    let text = std::fs::read(order_file)
        .map_err(|e| format!("cannot read the order {}: {e}", order_file.display()))?;
    let o: Order = serde_json::from_slice(&text)
        .map_err(|e| format!("{}: not a client order: {e}", order_file.display()))?;
    if o.format != ORDER_FORMAT {
        return Err(format!(
            "{}: format `{}`, this bakeoff reads `{ORDER_FORMAT}`; run the same bakeoff build on the controller and the nodes",
            order_file.display(),
            o.format
        ));
    }
    if o.requests.is_empty() {
        return Err(format!(
            "{}: the order has no requests",
            order_file.display()
        ));
    }
    let target = Target::parse(&o.target)?;
    let source = Arc::new(OrderSource {
        requests: o.requests,
        past: AtomicU64::new(0),
    });
    let opts = StreamOpts {
        timeout: Duration::from_nanos(o.timeout_ns),
        stall: Duration::from_nanos(o.stall_ns),
        collect: false,
    };
    let mut out = load(
        target.clone(),
        o.plan.plan(),
        source.clone(),
        opts,
        o.gpus,
        o.seed,
    )
    .await?;
    out.past_order = source.past.load(Ordering::Relaxed);
    out.ran_on = Some(RanOn::here(&target));
    let text = serde_json::to_vec(&out).map_err(|e| e.to_string())?;
    crate::evidence::write_atomic(out_file, &text)
        .map_err(|e| format!("cannot write {}: {e:#}", out_file.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Numbered;
    impl Source for Numbered {
        fn prepare(&self, index: u64) -> Prepared {
            Prepared {
                bytes: format!("POST /v1/x HTTP/1.1\r\n\r\n{{\"i\":{index}}}").into_bytes(),
                prompt_tokens: Some(64),
            }
        }
        fn place(&self, index: u64) -> Option<Place> {
            Some(Place {
                prefix_group: Some(index as u32 % 2),
                ..Default::default()
            })
        }
    }

    fn plans() -> Vec<Plan> {
        let base = Plan {
            mode: Mode::Closed { concurrency: 4 },
            requests: Some(6),
            duration: None,
            warmup: 1,
            warmup_duration: Some(Duration::from_millis(250)),
            max_in_flight: None,
        };
        let open = |arrival| Plan {
            mode: Mode::Open { rate: 2.5, arrival },
            max_in_flight: Some(3),
            ..base.clone()
        };
        vec![
            base.clone(),
            open(Arrival::Constant),
            open(Arrival::Poisson { seed: 7 }),
            open(Arrival::Given(vec![0, 10, 250_000_000].into())),
        ]
    }

    #[test]
    fn an_order_round_trips_through_its_file_with_every_request_and_plan() {
        let opts = StreamOpts {
            timeout: Duration::from_secs(600),
            stall: Duration::from_secs(120),
            collect: false,
        };
        let target = Target::parse("http://10.9.0.3:8000").unwrap();
        for plan in plans() {
            let o = order(&target, &plan, &Numbered, 8, &opts, &[], 3).unwrap();
            let back: Order = serde_json::from_str(&serde_json::to_string(&o).unwrap()).unwrap();
            assert_eq!(back, o);
            let p = back.plan.plan();
            assert_eq!(
                (p.mode, p.requests, p.duration, p.warmup),
                (plan.mode.clone(), plan.requests, plan.duration, plan.warmup)
            );
            assert_eq!(
                (p.warmup_duration, p.max_in_flight),
                (plan.warmup_duration, plan.max_in_flight)
            );
            assert_eq!(Target::parse(&back.target).unwrap(), target);
            let src = OrderSource {
                requests: back.requests,
                past: AtomicU64::new(0),
            };
            for i in 0..8 {
                assert_eq!(src.prepare(i).bytes, Numbered.prepare(i).bytes);
                assert_eq!(src.place(i), Numbered.place(i));
            }
            assert_eq!(src.past.load(Ordering::Relaxed), 0);
            // Past the order: sent again and counted, so the step fails.
            assert_eq!(src.prepare(9).bytes, Numbered.prepare(7).bytes);
            assert_eq!(src.past.load(Ordering::Relaxed), 1);
        }
    }

    #[test]
    fn a_load_out_gives_back_its_window_reads_and_figures() {
        let t = |i: u64, ok: bool| Trace {
            index: i,
            send_ns: 1_000 + i,
            error: (!ok).then(|| RequestError::new(crate::client::ErrorClass::Io, "x")),
            ..Default::default()
        };
        let out = LoadOut {
            format: OUT_FORMAT.into(),
            traces: vec![t(0, true), t(1, false)],
            window: Some(WindowOut {
                start_ns: 5,
                end_ns: 9,
                warmup_requests: 1,
                cap_delayed: 0,
                peak_in_flight: 2,
                send_thread: Some("realtime".into()),
            }),
            window_error: None,
            started_ns: 1,
            ended_ns: 10,
            reads: ReadsOut {
                kernel_stamped: 3,
                read_time: 1,
                lag_hist: vec![0, 2, 1],
            },
            engine_metrics: Value::Null,
            gpu: Value::Null,
            past_order: 0,
            ran_on: None,
        };
        let back: LoadOut = serde_json::from_slice(&serde_json::to_vec(&out).unwrap()).unwrap();
        let w = back.window().unwrap();
        assert_eq!((w.start_ns, w.end_ns, w.peak_in_flight), (5, 9, 2));
        assert_eq!(w.send_thread, Some("realtime"));
        let r = back.reads();
        assert_eq!((r.kernel_stamped, r.lag_hist[1], r.lag_hist[20]), (3, 2, 0));
        assert_eq!(back.collector().failed, 1);
        assert_eq!(back.traces.len(), 2);
    }
}
