//! What `bakeoff bench` shows: the printed summary of a level and the sweep table. Split from
//! `bench.rs` so each stays one concept.

use crate::bench::{BenchReport, LoadMode};
use crate::workload::Endpoint;
use clap::ValueEnum;
use serde::Serialize;

#[derive(Debug, Clone, Copy, ValueEnum, PartialEq)]
pub enum EndpointArg {
    Chat,
    Completions,
}

impl EndpointArg {
    pub fn endpoint(self) -> Endpoint {
        match self {
            EndpointArg::Chat => Endpoint::Chat,
            EndpointArg::Completions => Endpoint::Completions,
        }
    }
}

/// One line per level of a `--concurrency` or `--rate` sweep (with `--slo`: goodput and the
/// verdict).
pub fn sweep_table(reports: &[BenchReport]) -> String {
    let by_rate = reports.first().is_some_and(|r| r.load.rate_per_s.is_some());
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
            match by_rate {
                true => num(r.load.rate_per_s),
                false => num(r.load.concurrency),
            },
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
            let good = r.goodput.as_ref().and_then(|g| g.goodput_req_s);
            let met = r.slo.as_ref().map(|v| v.met);
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

pub fn print_report(r: &BenchReport) {
    let s = &r.stats;
    let load = match r.load.mode {
        LoadMode::OpenLoop => format!(
            "open loop at {} req/s ({}){}",
            num(r.load.rate_per_s),
            match r.load.arrival {
                Some(crate::bench::ArrivalKind::Poisson) => "poisson",
                Some(crate::bench::ArrivalKind::Trace) => "trace replay: the mean rate",
                _ => "constant",
            },
            match r.load.max_concurrency {
                Some(c) => format!(", at most {c} in flight"),
                None => String::new(),
            }
        ),
        LoadMode::ClosedLoop => format!("closed loop at concurrency {}", num(r.load.concurrency)),
    };
    let prompt = match r.prompt["strategy"].as_str() {
        Some("literal") => "literal prompt".to_string(),
        Some("dataset" | "synthetic" | "trace") => {
            r.prompt["describe"].as_str().unwrap_or("").to_string()
        }
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
            Endpoint::Chat => "chat",
            Endpoint::Completions => "completions",
        },
        r.sampling.get("max_tokens").cloned().unwrap_or_default()
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
    if let Some(t) = &r.trace {
        print_trace(t);
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

/// A number as JSON writes it (`null` when absent).
fn num<T: Serialize>(x: Option<T>) -> String {
    serde_json::to_string(&x).unwrap_or_default()
}

/// The replay's line: what was replayed, and the arrival error against the trace's schedule.
fn print_trace(t: &crate::bench::trace::TraceRecord) {
    let err = match &t.arrival_error_ms {
        Some(e) => format!(
            "arrival error (actual send - trace's schedule) p50 {:.3} ms, p99 {:.3} ms, max {:.3} ms over {} requests",
            e.p50, e.p99, e.max, e.n
        ),
        None => "arrival error not measured (no measured request)".into(),
    };
    println!(
        "trace: {} of {} requests of {} over {:.2} s (speedup {}); {} of {} prompt tokens shared by hash_ids; {err}",
        t.replayed, t.requests_in_file, t.file, t.span_s, t.speedup, t.shared_tokens, t.prompt_tokens
    );
}
