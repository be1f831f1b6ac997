//! `bakeoff bench URL`: load an OpenAI-compatible endpoint and measure it.

pub use super::bench_output::EndpointArg;
use super::bench_output::{print_report, sweep_table};
use super::bench_sweep;
use crate::bench::{sweep, ArrivalKind, BenchReport, BenchSpec, LoadShape, Observer, Progress};
use crate::client::Target;
use crate::metrics::summary::Collector;
use crate::report::bench::{export, html};
use anyhow::{bail, Context, Result};
use clap::{Args, ValueEnum};
use serde_json::{json, Value};
use std::io::IsTerminal;
use std::path::{Path, PathBuf};

#[derive(Debug, Clone, Copy, ValueEnum, PartialEq)]
pub enum ArrivalArg {
    Constant,
    Poisson,
}

#[derive(Args, Debug, Clone)]
pub struct BenchArgs {
    /// Base URL of the engine, e.g. http://127.0.0.1:8000 or https://gateway.example/openai (a
    /// trailing /v1 is accepted).
    pub url: String,
    /// https: trust only the CA certificate(s) in this PEM file (default: the system's CA store).
    #[arg(long, value_name = "PATH", help_heading = "Endpoint")]
    pub ca_file: Option<PathBuf>,
    /// https: do not verify the server's certificate (recorded in the summary as a limitation).
    #[arg(long, conflicts_with = "ca_file", help_heading = "Endpoint")]
    pub insecure: bool,
    /// Model to request (default: the first model /v1/models lists).
    #[arg(long, help_heading = "Endpoint")]
    pub model: Option<String>,
    /// API flavour.
    #[arg(long, value_enum, default_value = "chat", help_heading = "Endpoint")]
    pub endpoint: EndpointArg,
    /// Build a matched prompt of exactly this many prompt tokens of the endpoint's tokenizer.
    #[arg(
        long,
        default_value_t = 128,
        conflicts_with = "prompt",
        help_heading = "Workload"
    )]
    pub prompt_tokens: u64,
    /// Send this literal prompt instead of a sized one.
    #[arg(long, help_heading = "Workload")]
    pub prompt: Option<String>,
    /// A local tokenizer.json used to size the prompt (else the server's /tokenize, else calibration).
    #[arg(long, help_heading = "Workload")]
    pub tokenizer: Option<PathBuf>,
    /// Let requests share a prefix (no per-request nonce), so prefix caches can hit.
    #[arg(long, help_heading = "Workload")]
    pub allow_prefix_cache: bool,
    /// Most tokens each request may generate (sent as max_tokens); with --ignore-eos, exactly this many.
    #[arg(long, default_value_t = 128, help_heading = "Workload")]
    pub max_tokens: u64,
    /// Sampling temperature sent with every request (0 = greedy).
    #[arg(long, default_value_t = 0.0, help_heading = "Workload")]
    pub temperature: f64,
    /// Reproduce a run: the sampling seed sent with every request (default 0), the Poisson
    /// arrivals and the prompts' nonce numbers. Without it the nonce numbers start
    /// at a random place, so a second run never meets the first run's prompts in a prefix cache.
    #[arg(long, help_heading = "Workload")]
    pub seed: Option<u64>,
    /// Send ignore_eos: true so every request generates exactly --max-tokens (vLLM, llama.cpp).
    #[arg(long, help_heading = "Workload")]
    pub ignore_eos: bool,
    /// Closed loop: this many requests in flight at all times; a comma list (1,2,4) sweeps the
    /// levels in turn with one prompt, one result per level [default: 1].
    #[arg(long, value_delimiter = ',', help_heading = "Load shape")]
    pub concurrency: Vec<usize>,
    /// Open loop: start requests at this rate (requests/second) regardless of completions; a
    /// comma list (1,2,4) sweeps the rates in turn, one result per rate.
    #[arg(long, value_delimiter = ',', help_heading = "Load shape")]
    pub rate: Vec<f64>,
    /// Open-loop arrival process.
    #[arg(
        long,
        value_enum,
        default_value = "constant",
        requires = "rate",
        help_heading = "Load shape"
    )]
    pub arrival: ArrivalArg,
    /// Measured requests (default 32 unless --duration is given).
    #[arg(long, help_heading = "Load shape")]
    pub requests: Option<u64>,
    /// Stop starting requests after this many seconds of the measured phase.
    #[arg(long, help_heading = "Load shape")]
    pub duration: Option<f64>,
    /// Requests sent first and excluded from statistics.
    #[arg(long, default_value_t = 0, help_heading = "Load shape")]
    pub warmup: u64,
    /// Name of the environment variable holding the API key (the key never goes on the command line).
    #[arg(long, help_heading = "Endpoint")]
    pub api_key_env: Option<String>,
    /// JSON object merged into every request body, e.g. '{"top_p":0.9}'.
    #[arg(long, help_heading = "Workload")]
    pub extra_body: Option<String>,
    /// Per-request limit, seconds.
    #[arg(long, default_value_t = 600.0, help_heading = "Endpoint")]
    pub timeout: f64,
    /// Longest silence inside a response before it counts as a stall, seconds.
    #[arg(long, default_value_t = 60.0, help_heading = "Endpoint")]
    pub stall_timeout: f64,
    /// Write the summary as JSON here.
    #[arg(long, help_heading = "Outputs")]
    pub json: Option<PathBuf>,
    /// Write one JSON line per request here (with raw per-chunk arrival offsets).
    #[arg(long, help_heading = "Outputs")]
    pub requests_jsonl: Option<PathBuf>,
    /// Write the summary as CSV here: a header and one row per level (flat columns: counts,
    /// throughputs, then mean/std/min/p50/p90/p95/p99/p99.9/max of each metric).
    #[arg(long, value_name = "PATH", help_heading = "Outputs")]
    pub csv: Option<PathBuf>,
    /// Write the summary with the flat key names of `vllm bench serve --save-result` here (a
    /// sweep writes one file per level, PATH with -concurrency<N> before the extension).
    #[arg(long, value_name = "PATH", help_heading = "Outputs")]
    pub export_vllm: Option<PathBuf>,
    /// Write a self-contained HTML page here: latency (p50/p95/p99) and throughput against the
    /// concurrency or rate levels, the throughput-latency frontier, TTFT/ITL distributions per
    /// level and the per-request TTFT timeline, with the --slo limits and the saturation level.
    #[arg(long, value_name = "PATH", help_heading = "Outputs")]
    pub html: Option<PathBuf>,
    /// Never show a progress bar.
    #[arg(long, help_heading = "Outputs")]
    pub no_progress: bool,
    /// Dataset and synthetic-length sources (`cli/bench_source.rs`).
    #[command(flatten)]
    pub source: super::bench_source::SourceArgs,
    /// `--trace` and its window, sample and speedup (`cli/bench_source.rs`).
    #[command(flatten)]
    pub trace: super::bench_source::TraceArgs,
    /// Load shapes and SLOs (cli/bench_sweep.rs).
    #[command(flatten)]
    pub shape: super::bench_sweep::LoadShapeArgs,
    /// Multi-turn conversations and shared-prefix groups (`bench_conv`).
    #[command(flatten)]
    pub conv: super::bench_conv::ConvArgs,
}

pub fn read_api_key(var: Option<&str>) -> Result<Option<String>> {
    match var {
        None => Ok(None),
        Some(name) => match std::env::var(name) {
            Ok(v) if !v.is_empty() => Ok(Some(v)),
            _ => bail!("--api-key-env {name}: the environment variable {name} is not set (export it, or drop the flag)"),
        },
    }
}

/// Prints the run's notes to stderr and (with `progress`) shows a progress bar per level.
pub struct Console {
    pub progress: bool,
}

impl Observer for Console {
    fn note(&self, line: &str) {
        eprintln!("{line}");
    }

    fn progress(&self, total: Option<u64>) -> Option<Box<dyn Progress>> {
        if !self.progress {
            return None;
        }
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
        Some(Box::new(Bar(b)))
    }
}

struct Bar(indicatif::ProgressBar);

impl Progress for Bar {
    fn tick(&mut self, c: &Collector) {
        self.0.inc(1);
        self.0
            .set_message(format!("{} ok, {} failed", c.ok(), c.failed));
    }

    fn done(&mut self) {
        self.0.finish_and_clear();
    }
}

pub fn run(args: BenchArgs) -> Result<()> {
    // Flags and output paths are checked before any request: a problem is a refusal (exit 2).
    let spec = super::refused((|| {
        export::check_paths(args.csv.as_deref(), args.export_vllm.as_deref())?;
        html::check_path(args.html.as_deref())?;
        spec(&args)
    })())?;
    crate::clock::raise_nofile_limit();
    // One thread: chunk wakeups never cross threads and the client leaves the other cores to
    // the engine under test.
    let rt = crate::load::pace::client_runtime().context("cannot start the async runtime")?;
    let console = Console {
        progress: !args.no_progress && std::io::stderr().is_terminal(),
    };
    let reports = rt.block_on(async {
        // Ctrl-C or SIGTERM stops the load; the summary covers what completed.
        let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
        let signals = tokio::spawn(async move {
            let mut term =
                tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()).ok();
            let name = tokio::select! {
                _ = tokio::signal::ctrl_c() => "Ctrl-C",
                _ = async { match term.as_mut() { Some(t) => { t.recv().await; } None => std::future::pending::<()>().await } } => "SIGTERM",
            };
            eprintln!("\n{name}: stopping; requests in flight are dropped, the summary covers those that completed");
            let _ = stop_tx.send(true);
        });
        let r = crate::bench::run_levels(&spec, stop_rx, &console).await;
        signals.abort();
        r
    })?;
    print_all(&spec.shape, &reports);
    write_outputs(&args, &spec, &reports)?;
    for report in &reports {
        let level = sweep::level_label(&reports, report);
        if report.interrupted {
            bail!(
                "interrupted{level}; the summary above covers the {} requests that completed",
                report.stats.ok + report.stats.failed
            );
        }
        if report.stats.ok == 0 {
            bail!(
                "no request succeeded{level} ({} failed); see the failures above",
                report.stats.failed
            );
        }
    }
    if let Some(e) = bench_sweep::strict_failure(args.shape.slo_strict, &spec.shape, &reports) {
        bail!("{e}");
    }
    Ok(())
}

fn print_all(shape: &LoadShape, reports: &[BenchReport]) {
    for (i, report) in reports.iter().enumerate() {
        if i > 0 {
            println!();
        }
        print_report(report);
        bench_sweep::print_slo(report);
    }
    if reports.len() > 1 {
        println!();
        print!("{}", sweep_table(reports));
    }
    bench_sweep::print_saturation(shape, reports);
}

/// `--json`, `--csv`, `--export-vllm`, `--html`.
fn write_outputs(args: &BenchArgs, spec: &BenchSpec, reports: &[BenchReport]) -> Result<()> {
    if let Some(p) = &args.json {
        let bytes = if !sweep::is_sweep(&spec.shape) {
            serde_json::to_vec_pretty(&reports[0])?
        } else {
            serde_json::to_vec_pretty(&json!({
                "bakeoff_version": crate::VERSION,
                "tool": "bakeoff bench",
                "sweep": sweep::axis(&spec.shape),
                "levels": reports,
                "saturation": sweep::saturation(&spec.shape, reports),
            }))?
        };
        crate::evidence::write_atomic(p, &bytes)?;
        eprintln!("summary written to {}", p.display());
    }
    for said in export::write(reports, args.csv.as_deref(), args.export_vllm.as_deref())? {
        eprintln!("{said}");
    }
    if let Some(p) = &args.html {
        html::write(p, reports, &spec.shape, &spec.slo)?;
        eprintln!("HTML report written to {}", p.display());
    }
    Ok(())
}

/// The target with the TLS settings of `--ca-file` / `--insecure`, checked before any request
/// (the CA file loads, the system store has certificates). Shared with `bakeoff gate`.
pub fn tls_target(url: &str, ca_file: Option<&Path>, insecure: bool) -> Result<Target> {
    let target = Target::parse(url).map_err(|e| anyhow::anyhow!(e))?;
    let Some(_) = &target.tls else {
        if ca_file.is_some() || insecure {
            bail!(
                "{} applies to https:// URLs only; {url} is plain http (drop the flag, or use the endpoint's https URL)",
                if insecure { "--insecure" } else { "--ca-file" }
            );
        }
        return Ok(target);
    };
    let target = target.with_trust(crate::client::Trust::from_settings(ca_file, insecure));
    if let Some(trust) = &target.tls {
        crate::client::tls::config(trust).map_err(|e| anyhow::anyhow!("--ca-file: {e}"))?;
        if insecure {
            eprintln!(
                "warning: {}",
                crate::client::tls::insecure_note(&target.to_string())
            );
        }
    }
    Ok(target)
}

/// Checks the flags together and makes the library's typed spec; every error names the flag.
pub fn spec(args: &BenchArgs) -> Result<BenchSpec> {
    let target = tls_target(&args.url, args.ca_file.as_deref(), args.insecure)?;
    bench_sweep::validate(
        &args.concurrency,
        &args.rate,
        args.trace.trace.is_some(),
        &args.shape,
    )?;
    if let Some(d) = args.duration {
        if !(d > 0.0 && d.is_finite()) {
            bail!("--duration must be a positive number of seconds, got {d}");
        }
    }
    if args.requests == Some(0) {
        bail!("--requests must be at least 1");
    }
    if args.max_tokens == 0 {
        bail!("--max-tokens must be at least 1");
    }
    if args.timeout <= 0.0 || args.stall_timeout <= 0.0 {
        bail!("--timeout and --stall-timeout must be positive seconds");
    }
    let extra = match &args.extra_body {
        None => None,
        Some(s) => match serde_json::from_str::<Value>(s) {
            Ok(Value::Object(m)) => Some(m),
            Ok(_) => bail!("--extra-body must be a JSON object, like '{{\"top_p\": 0.9}}'"),
            Err(e) => bail!("--extra-body is not valid JSON ({e}); quote it for the shell, like '{{\"top_p\": 0.9}}'"),
        },
    };
    super::bench_conv::validate(
        &args.conv,
        args.prompt_tokens,
        !args.rate.is_empty(),
        args.requests.or(args.duration.is_none().then_some(32)),
        args.warmup,
    )?;
    super::bench_conv::validate_sources(&args.conv, &args.source)?;
    if let Some(t) = &args.tokenizer {
        if !t.is_file() {
            bail!(
                "--tokenizer {}: no such file (give the path of a Hugging Face tokenizer.json)",
                t.display()
            );
        }
    }
    let f = &args.shape;
    Ok(BenchSpec {
        target,
        model: args.model.clone(),
        endpoint: args.endpoint.endpoint(),
        prompt_tokens: args.prompt_tokens,
        prompt: args.prompt.clone(),
        tokenizer: args.tokenizer.clone(),
        allow_prefix_cache: args.allow_prefix_cache,
        max_tokens: args.max_tokens,
        temperature: args.temperature,
        seed: args.seed,
        ignore_eos: args.ignore_eos,
        api_key: read_api_key(args.api_key_env.as_deref())?,
        api_key_env: args.api_key_env.clone(),
        extra_body: extra,
        timeout: args.timeout,
        stall_timeout: args.stall_timeout,
        shape: LoadShape {
            concurrency: args.concurrency.clone(),
            rate: args.rate.clone(),
            arrival: match args.arrival {
                ArrivalArg::Constant => ArrivalKind::Constant,
                ArrivalArg::Poisson => ArrivalKind::Poisson,
            },
            max_concurrency: f.max_concurrency,
            requests: args.requests,
            duration: args.duration,
            warmup: args.warmup,
            warmup_duration: f.warmup_duration,
            find_saturation: f.find_saturation,
            max_steps: f.max_steps,
            max_level: f.max_level,
            max_failure_share: f.max_failure_share,
        },
        slo: bench_sweep::limits(f)?,
        source: super::bench_source::spec(&args.source)?,
        conv: super::bench_conv::spec(&args.conv),
        requests_jsonl: args.requests_jsonl.clone(),
        keep_points: args.html.is_some(),
        labels: crate::bench::Labels::FLAGS,
        trace: super::bench_source::trace_spec(&args.trace),
    })
}
