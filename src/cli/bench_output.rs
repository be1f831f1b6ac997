//! What `bakeoff bench` shows and writes: the printed summary, the sweep table, the progress bar and
//! the `--requests-jsonl` lines. Split from `bench.rs` so each stays one concept.

use crate::client::Trace;
use crate::load::session::Sink;
use crate::metrics::summary::Collector;
use crate::metrics::summary::RunStats;
use anyhow::{Context, Result};
use clap::ValueEnum;
use serde::Serialize;
use serde_json::{json, Value};
use std::io::Write;
use std::path::Path;

#[derive(Debug, Clone, Copy, ValueEnum, Serialize, PartialEq)]
#[serde(rename_all = "kebab-case")]
pub enum EndpointArg {
    Chat,
    Completions,
}

/// Everything `--json` writes.
#[derive(Debug, Serialize)]
pub struct BenchReport {
    pub bakeoff_version: &'static str,
    pub tool: &'static str,
    pub started_at: String,
    pub url: String,
    pub model: String,
    pub endpoint: EndpointArg,
    pub sampling: Value,
    pub load: Value,
    pub prompt: Value,
    /// True when Ctrl-C or SIGTERM stopped the run: the statistics cover the requests that
    /// completed before it; requests in flight were dropped, not counted as failures.
    pub interrupted: bool,
    /// Where arrival times came from: the kernel's receive stamps, or (where there were none)
    /// the time of the read; counted over the run's reads.
    pub arrival_clock: Value,
    /// What the reader of the numbers must know (also printed with the summary).
    pub warnings: Vec<String>,
    /// https only: how the server's certificate was checked (`{"verify": "system" | "ca-file" |
    /// "insecure"}`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tls: Option<Value>,
    /// Multi-turn / shared-prefix runs: per-turn and per-group rows and the cached tokens share
    /// (`bench_conv`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub workload: Option<Value>,
    #[serde(flatten)]
    pub stats: RunStats,
    /// `--slo`: `{"met", "checks": [{"limit", "observed_ms", "met", "text"}]}` (cli/bench_sweep.rs).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub slo: Option<Value>,
    /// `--slo`: successful requests whose own latencies met every limit, and per second.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub goodput: Option<Value>,
    /// `--html`: each successful measured request's send time and latencies (not in `--json`;
    /// `cli/bench_html.rs`).
    #[serde(skip)]
    pub points: Vec<SentRequest>,
}

/// A successful measured request kept for `--html`: its send time (CLOCK_MONOTONIC ns, shared by
/// every level) and its metrics.
pub type SentRequest = (u64, crate::metrics::RequestMetrics);

/// One line per level of a `--concurrency` or `--rate` sweep (with `--slo`: goodput and the
/// verdict).
pub fn sweep_table(reports: &[BenchReport]) -> String {
    let by_rate = reports
        .first()
        .is_some_and(|r| r.load["rate_per_s"].is_number());
    let slo = reports.iter().any(|r| r.slo.is_some());
    let f = |x: Option<f64>| x.map(|x| format!("{x:.1}")).unwrap_or("-".into());
    let p = |r: &BenchReport, m: &str, q: fn(&crate::metrics::stats::Distribution) -> f64| {
        f(r.stats.metrics.get(m).map(q))
    };
    let mut s = format!(
        "{:<12}{:>6}{:>8}{:>12}{:>12}{:>10}{:>12}{:>12}{:>12}",
        if by_rate { "rate/s" } else { "concurrency" },
        "ok",
        "failed",
        "out tok/s",
        "total tok/s",
        "req/s",
        "ttft p50",
        "ttft p95",
        "itl p50"
    );
    if slo {
        s.push_str(&format!("{:>10}{:>8}", "goodput", "slo"));
    }
    s.push('\n');
    for r in reports {
        s.push_str(&format!(
            "{:<12}{:>6}{:>8}{:>12}{:>12}{:>10}{:>12}{:>12}{:>12}",
            r.load[if by_rate { "rate_per_s" } else { "concurrency" }].to_string(),
            r.stats.ok,
            r.stats.failed,
            f(r.stats.aggregate_output_tok_s),
            f(r.stats.aggregate_total_tok_s),
            r.stats
                .request_rate_per_s
                .map(|x| format!("{x:.2}"))
                .unwrap_or("-".into()),
            p(r, "ttft_ms", |d| d.p50),
            p(r, "ttft_ms", |d| d.p95),
            p(r, "itl_ms", |d| d.p50),
        ));
        if slo {
            let good = r.goodput.as_ref().and_then(|g| g["goodput_req_s"].as_f64());
            let met = r.slo.as_ref().map(|v| v["met"] == true);
            s.push_str(&format!(
                "{:>10}{:>8}",
                good.map(|x| format!("{x:.2}")).unwrap_or("-".into()),
                match met {
                    Some(true) => "met",
                    Some(false) => "BROKEN",
                    None => "-",
                }
            ));
        }
        s.push('\n');
    }
    s
}

/// Adds fields to a `--requests-jsonl` line (a dataset's source item: `cli/bench_source.rs`).
pub type Annotate = Box<dyn Fn(&Trace, &mut Value) + Send>;

/// Bench's view of each trace: a `--requests-jsonl` line and the progress bar.
pub struct BenchSink {
    /// In a sweep: the level's number and concurrency, added to each `--requests-jsonl` line.
    pub level: Option<(usize, usize)>,
    /// Fields a workload source adds to each `--requests-jsonl` line.
    pub annotate: Option<Annotate>,
    /// In a `--rate` sweep: the level's rate, added to each `--requests-jsonl` line.
    pub level_rate: Option<f64>,
    out: Option<std::io::BufWriter<std::fs::File>>,
    bar: Option<indicatif::ProgressBar>,
    run_start: Option<u64>,
}

impl BenchSink {
    pub fn new(
        jsonl: Option<&Path>,
        total: Option<u64>,
        show_progress: bool,
        append: bool,
    ) -> Result<BenchSink> {
        let out = match jsonl {
            Some(p) => Some(std::io::BufWriter::new(std::fs::OpenOptions::new().write(true).create(true).append(append).truncate(!append).open(p).with_context(|| {
                format!("cannot create {} (--requests-jsonl); check the directory exists and is writable", p.display())
            })?)),
            None => None,
        };
        let bar = show_progress.then(|| {
            let b = match total {
                Some(n) => indicatif::ProgressBar::new(n),
                None => indicatif::ProgressBar::new_spinner(),
            };
            b.set_style(
                indicatif::ProgressStyle::with_template(
                    "{spinner} [{elapsed_precise}] {bar:30} {pos}/{len} requests  {msg}",
                )
                .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
            );
            b
        });
        Ok(BenchSink {
            level: None,
            annotate: None,
            level_rate: None,
            out,
            bar,
            run_start: None,
        })
    }
}

impl Sink for BenchSink {
    fn trace(&mut self, t: Trace, c: &Collector) -> Result<()> {
        if let Some(w) = self.out.as_mut() {
            let start = *self.run_start.get_or_insert(t.send_ns);
            let mut line = request_line(&t, start);
            if let Some((level, concurrency)) = self.level {
                line["sweep_level"] = json!(level);
                line["concurrency"] = json!(concurrency);
            }
            if let Some(f) = &self.annotate {
                f(&t, &mut line);
            }
            if let Some(rate) = self.level_rate {
                line["concurrency"] = Value::Null;
                line["rate_per_s"] = json!(rate);
            }
            serde_json::to_writer(&mut *w, &line)?;
            w.write_all(b"\n")
                .with_context(|| "cannot write --requests-jsonl (disk full?)".to_string())?;
        }
        if let Some(b) = &self.bar {
            b.inc(1);
            b.set_message(format!("{} ok, {} failed", c.ok(), c.failed));
        }
        Ok(())
    }

    fn finish(&mut self) -> Result<()> {
        if let Some(b) = self.bar.take() {
            b.finish_and_clear();
        }
        if let Some(w) = self.out.as_mut() {
            w.flush()
                .context("cannot finish --requests-jsonl (disk full?)")?;
        }
        Ok(())
    }
}

/// One line of `--requests-jsonl`: the metrics and the raw per-chunk arrival offsets.
pub fn request_line(t: &Trace, run_start: u64) -> Value {
    let m = crate::metrics::RequestMetrics::from_trace(t);
    let mut line = json!({
        "index": t.index,
        "warmup": t.warmup,
        "ok": t.ok(),
        "error": t.error,
        "status": t.status,
        "response_id": t.response_id,
        "send_offset_ms": (t.send_ns as i64 - run_start as i64) as f64 / 1e6,
        "schedule_lag_ms": t.intended_ns.map(|i| t.send_ns.saturating_sub(i) as f64 / 1e6),
        "connect_ms": t.connect_ns.map(|c| c as f64 / 1e6),
        "metrics": m,
        "usage": t.usage,
        "finish_reason": t.finish_reason,
        "client_prompt_tokens": t.client_prompt_tokens,
        "chunk_offsets_ns": t.events.iter().map(|e| e.t_ns).collect::<Vec<_>>(),
        "chunk_kinds": t.events.iter().map(|e| e.kind).collect::<Vec<_>>(),
    });
    super::bench_conv::place_fields(&mut line, t);
    line
}

pub fn print_report(r: &BenchReport) {
    let s = &r.stats;
    let load = match r.load["mode"].as_str() {
        Some("open-loop") => format!(
            "open loop at {} req/s ({}){}",
            r.load["rate_per_s"],
            r.load["arrival"].as_str().unwrap_or("constant"),
            match r.load["max_concurrency"].as_u64() {
                Some(c) => format!(", at most {c} in flight"),
                None => String::new(),
            }
        ),
        _ => format!("closed loop at concurrency {}", r.load["concurrency"]),
    };
    let prompt = match r.prompt["strategy"].as_str() {
        Some("literal") => "literal prompt".to_string(),
        Some("dataset" | "synthetic") => r.prompt["describe"].as_str().unwrap_or("").to_string(),
        Some(strategy) => format!(
            "{} prompt tokens, sized by {strategy}",
            r.prompt["target_tokens"]
        ),
        None => "prompt".to_string(),
    };
    println!(
        "bakeoff bench {}  model {}  {}  {load}  {prompt}  max_tokens {}",
        r.url,
        r.model,
        match r.endpoint {
            EndpointArg::Chat => "chat",
            EndpointArg::Completions => "completions",
        },
        r.sampling["max_tokens"]
    );
    println!(
        "requests: {} ok, {} failed, {} warmup excluded; window {}; output {} tok/s; total (input + output) {} tok/s; {} req/s",
        s.ok,
        s.failed,
        s.warmup_excluded,
        s.window_s
            .map(|w| format!("{w:.2} s"))
            .unwrap_or("-".into()),
        s.aggregate_output_tok_s
            .map(|x| format!("{x:.1}"))
            .unwrap_or("-".into()),
        s.aggregate_total_tok_s
            .map(|x| format!("{x:.1}"))
            .unwrap_or("-".into()),
        s.request_rate_per_s
            .map(|x| format!("{x:.2}"))
            .unwrap_or("-".into())
    );
    for (class, f) in &s.failures_by_class {
        println!("  failed: {} x {class}: {}", f.count, f.example);
    }
    if s.prompt_token_mismatches > 0 {
        println!(
            "  warning: {} requests' usage.prompt_tokens differ from the matched target ({})",
            s.prompt_token_mismatches,
            s.prompt_token_mismatch_example.as_deref().unwrap_or("")
        );
    }
    for w in &r.warnings {
        println!("  warning: {w}");
    }
    if s.requests_without_usage > 0 {
        println!(
            "  note: {} successful requests carried no usage; token metrics are null for them",
            s.requests_without_usage
        );
    }
    print!("{}", s.table());
    super::bench_conv::print_rows(r.workload.as_ref());
}
