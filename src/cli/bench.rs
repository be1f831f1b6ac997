//! `bakeoff bench URL`: load an OpenAI-compatible endpoint and measure it.

use super::bench_output::{print_report, sweep_table, BenchSink};
pub use super::bench_output::{BenchReport, EndpointArg};
use super::bench_sweep;
use crate::client::control::{models_answer, ModelsAnswer};
use crate::client::{StreamOpts, Target};
use crate::load::session::{self, Session, Telemetry};
use crate::load::source::{PromptText, RequestSource};
use crate::load::{Arrival, Mode, Plan};
use crate::workload::prompt::{self, PromptSpec};
use crate::workload::request::{merge_extra, BodySpec, Precedence};
use crate::workload::Endpoint;
use anyhow::{bail, Context, Result};
use clap::{Args, ValueEnum};
use serde::Serialize;
use serde_json::{json, Value};
use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::watch;

#[derive(Debug, Clone, Copy, ValueEnum, Serialize, PartialEq)]
#[serde(rename_all = "kebab-case")]
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
    /// Load shapes and SLOs (cli/bench_sweep.rs).
    #[command(flatten)]
    pub shape: super::bench_sweep::LoadShapeArgs,
    /// Multi-turn conversations and shared-prefix groups (`bench_conv`).
    #[command(flatten)]
    pub conv: super::bench_conv::ConvArgs,
}

impl BenchArgs {
    /// The flags that decide the run's levels (cli/bench_sweep.rs).
    pub fn sweep(&self) -> bench_sweep::Sweep {
        bench_sweep::Sweep {
            concurrency: self.concurrency.clone(),
            rate: self.rate.clone(),
            flags: self.shape.clone(),
        }
    }
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

pub fn run(args: BenchArgs) -> Result<()> {
    super::bench_export::check_paths(args.csv.as_deref(), args.export_vllm.as_deref())?;
    super::bench_html::check_path(args.html.as_deref())?;
    crate::clock::raise_nofile_limit();
    // One thread: chunk wakeups never cross threads and the client leaves the other cores to
    // the engine under test.
    let rt = crate::load::pace::client_runtime().context("cannot start the async runtime")?;
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
        let r = bench_levels(args.clone(), stop_rx).await;
        signals.abort();
        r
    })?;
    for (i, report) in reports.iter().enumerate() {
        if i > 0 {
            println!();
        }
        print_report(report);
        bench_sweep::print_slo(report);
    }
    if reports.len() > 1 {
        println!();
        print!("{}", sweep_table(&reports));
    }
    bench_sweep::print_saturation(&args.sweep(), &reports);
    if let Some(p) = &args.json {
        let bytes = if !bench_sweep::is_sweep(&args.sweep()) {
            serde_json::to_vec_pretty(&reports[0])?
        } else {
            serde_json::to_vec_pretty(&json!({
                "bakeoff_version": crate::VERSION,
                "tool": "bakeoff bench",
                "sweep": bench_sweep::axis(&args.sweep()),
                "levels": reports,
                "saturation": bench_sweep::saturation(&args.sweep(), &reports),
            }))?
        };
        crate::evidence::write_atomic(p, &bytes)?;
        eprintln!("summary written to {}", p.display());
    }
    super::bench_export::write(&reports, args.csv.as_deref(), args.export_vllm.as_deref())?;
    if let Some(p) = &args.html {
        super::bench_html::write(p, &reports, &args.sweep())?;
    }
    for report in &reports {
        let level = bench_sweep::level_label(&reports, report);
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
    if let Some(e) = bench_sweep::strict_failure(&args.sweep(), &reports) {
        bail!("{e}");
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

fn validate(args: &BenchArgs) -> Result<(Target, Option<serde_json::Map<String, Value>>)> {
    let target = tls_target(&args.url, args.ca_file.as_deref(), args.insecure)?;
    bench_sweep::validate(&args.sweep())?;
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
    Ok((target, extra))
}

/// Runs the bench load (`run` adds the signal handling, the printing and the files); `stop`
/// turning true stops it, and the report says it was interrupted.
pub async fn bench(args: BenchArgs, stop: watch::Receiver<bool>) -> Result<BenchReport> {
    if bench_sweep::is_sweep(&args.sweep()) {
        bail!("bench() runs one level; use bench_levels for a sweep");
    }
    let mut reports = bench_levels(args, stop).await?;
    Ok(reports.remove(0))
}

/// Runs one bench load per level (`--concurrency` or `--rate` list, or the `--find-saturation`
/// walk: cli/bench_sweep.rs), sizing the prompt once; an interrupt ends the sweep after the
/// level it stopped.
pub async fn bench_levels(
    args: BenchArgs,
    stop: watch::Receiver<bool>,
) -> Result<Vec<BenchReport>> {
    let (target, extra) = validate(&args)?;
    let api_key = read_api_key(args.api_key_env.as_deref())?;
    let control_timeout = Duration::from_secs(30);
    let models = match models_answer(&target, api_key.as_deref(), control_timeout).await {
        ModelsAnswer::Listed(ids) => ids,
        // With --model given the list is only a check: a server without one is still measured.
        ModelsAnswer::Unusable(e) if args.model.is_some() => {
            eprintln!(
                "note: no model list ({e}); using --model {}",
                args.model.as_deref().unwrap_or_default()
            );
            Vec::new()
        }
        ModelsAnswer::Unusable(e) | ModelsAnswer::NoAnswer(e) => bail!("{e}"),
    };
    let model = match &args.model {
        Some(m) => {
            if !models.is_empty() && !models.contains(m) {
                eprintln!(
                    "warning: /v1/models does not list '{m}' (it lists {}); sending it anyway",
                    models.join(", ")
                );
            }
            m.clone()
        }
        None => models[0].clone(),
    };
    let endpoint = match args.endpoint {
        EndpointArg::Chat => Endpoint::Chat,
        EndpointArg::Completions => Endpoint::Completions,
    };
    let nonce = !args.allow_prefix_cache;
    let seed = args.seed.unwrap_or(0);
    let nonce_base = match args.seed {
        Some(s) => crate::workload::filler::nonce_base_from_seed(s),
        None => crate::workload::filler::random_nonce_base(),
    };
    let script =
        super::bench_conv::load_script(&args.conv, &args.source, seed, args.max_tokens, nonce)?;
    let work = if script.is_some() {
        None
    } else {
        super::bench_source::prepare(
            &args.source,
            &super::bench_source::RunShape {
                prompt_tokens: args.prompt_tokens,
                max_tokens: args.max_tokens,
                requests: args.requests.or(args.duration.is_none().then_some(32)),
                warmup: args.warmup,
                seed,
            },
            &crate::workload::items::SizeCtx {
                target: &target,
                model: &model,
                endpoint,
                tokenizer: args.tokenizer.as_deref(),
                api_key: api_key.as_deref(),
                nonce,
                timeout: Duration::from_secs_f64(args.timeout.min(300.0)),
                extra_body: extra.as_ref(),
            },
        )
        .await?
    };
    let (matched, prompt_record, prefix) = match &args.prompt {
        _ if script.is_some() => (None, script.as_ref().expect("checked").record.clone(), None),
        _ if work.is_some() => (
            None,
            work.as_ref().map(|w| w.record.clone()).unwrap_or_default(),
            None,
        ),
        Some(text) => (
            None,
            json!({"strategy": "literal", "nonce": nonce, "chars": text.chars().count()}),
            None,
        ),
        None => {
            let tokens = super::bench_conv::sized_tokens(&args.conv, args.prompt_tokens);
            eprintln!("sizing a {tokens}-token matched prompt against {target} ...");
            let spec = PromptSpec {
                target: &target,
                model: &model,
                endpoint,
                tokens,
                tokenizer: args.tokenizer.as_deref(),
                api_key: api_key.as_deref(),
                nonce,
                timeout: Duration::from_secs_f64(args.timeout.min(300.0)),
                extra_body: extra.as_ref(),
            };
            let m = prompt::build(&spec)
                .await
                .map_err(|e| anyhow::anyhow!("matched prompt: {e}"))?;
            let mut rec = serde_json::to_value(&m)?;
            let prefix = super::bench_conv::size_prefix(
                &args.conv,
                args.prompt_tokens,
                args.seed,
                &spec,
                Some(&m),
                nonce_base,
                &mut rec,
            )
            .await?;
            (Some(Arc::new(m)), rec, prefix)
        }
    };

    let mut base = BodySpec {
        model: &model,
        max_tokens: args.max_tokens,
        temperature: Some(args.temperature),
        top_p: None,
        seed: Some(seed),
        ignore_eos: args.ignore_eos,
        stream: Some(true),
    }
    .build();
    if let Some(extra) = &extra {
        merge_extra(&mut base, extra, Precedence::ExtraWins);
    }
    // Recorded sampling: what was actually sent, minus the prompt.
    let sampling = Value::Object(base.clone());

    let prompt_text = || match (&matched, &args.prompt) {
        _ if work.is_some() => PromptText::Work(work.clone().expect("checked")),
        (Some(m), _) => PromptText::Matched(m.clone()),
        (None, text) => PromptText::Literal {
            text: text.clone().unwrap_or_default(),
            nonce,
        },
    };
    let sweep = bench_sweep::is_sweep(&args.sweep());
    let mut reports = Vec::new();
    // Each level's nonce numbers follow the last level's, so no level meets an earlier one's
    // prompts in a prefix cache.
    let mut offset = 0u64;
    while let Some(lv) = bench_sweep::next_level(&args.sweep(), &reports) {
        let (level, concurrency) = (reports.len(), lv.concurrency);
        let mode = match lv.rate {
            Some(rate) => Mode::Open {
                rate,
                arrival: match args.arrival {
                    ArrivalArg::Constant => Arrival::Constant,
                    ArrivalArg::Poisson => Arrival::Poisson { seed },
                },
            },
            None => Mode::Closed { concurrency },
        };
        let requests = match (args.requests, args.duration) {
            (None, None) => Some(32),
            (r, _) => r,
        };
        let plan = Plan {
            mode,
            requests,
            duration: args.duration.map(Duration::from_secs_f64),
            warmup: args.warmup,
            warmup_duration: args.shape.warmup_duration.map(Duration::from_secs_f64),
            max_in_flight: lv.max_in_flight,
        };
        let mut load_record = json!({
            "mode": match mode { Mode::Closed{..} => "closed-loop", Mode::Open{..} => "open-loop" },
            "concurrency": if lv.rate.is_none() { Some(concurrency) } else { None },
            "rate_per_s": lv.rate,
            "max_concurrency": lv.max_in_flight,
            "arrival": lv.rate.map(|_| args.arrival),
            "warmup_duration_s": args.shape.warmup_duration,
            "requests": requests,
            "duration_s": args.duration,
            "warmup": args.warmup,
            "timeout_s": args.timeout,
            "stall_timeout_s": args.stall_timeout,
            "prefix_cache_nonce": nonce,
            "nonce_base": nonce.then_some(nonce_base),
            "nonce_base_from": if !nonce { None } else if args.seed.is_some() { Some("--seed") } else { Some("random") },
            "seed": args.seed,
            "api_key_env": args.api_key_env,
            "sweep_level": sweep.then_some(level),
            "sweep_concurrency": (sweep && lv.rate.is_none()).then(|| args.concurrency.clone()),
            "sweep_rate": (sweep && lv.rate.is_some()).then(|| args.rate.clone()),
            "find_saturation": args.shape.find_saturation,
        });
        super::bench_conv::load_fields(&args.conv, &mut load_record);

        let parts = super::bench_conv::SourceParts {
            target: &target,
            endpoint,
            base: &base,
            prompt: prompt_text(),
            api_key: api_key.clone(),
            offset,
            nonce_base,
            level,
            script: script.clone().map(|s| (s, nonce)),
        };
        let source: Arc<dyn crate::load::Source> =
            match super::bench_conv::source(&args.conv, prefix.as_ref(), parts) {
                Some(s) => s,
                None => Arc::new(RequestSource {
                    target: target.clone(),
                    endpoint,
                    base: base.clone(),
                    prompt: prompt_text(),
                    api_key: api_key.clone(),
                    offset,
                    nonce_base,
                }),
            };
        let opts = StreamOpts {
            timeout: Duration::from_secs_f64(args.timeout),
            stall: Duration::from_secs_f64(args.stall_timeout),
            collect: false,
        };
        let started_at = crate::clock::wall_rfc3339();
        let total = requests
            .map(|r| r + args.warmup)
            .filter(|_| args.shape.warmup_duration.is_none());
        let show_progress = !args.no_progress && std::io::stderr().is_terminal();
        let mut sink = BenchSink::new(
            args.requests_jsonl.as_deref(),
            total,
            show_progress,
            level > 0,
        )?;
        sink.level = sweep.then_some((level, concurrency));
        sink.annotate = work.clone().map(|w| {
            Box::new(move |t: &crate::client::Trace, line: &mut Value| {
                super::bench_source::annotate(&w, offset, t, line)
            }) as super::bench_output::Annotate
        });
        if let Some(s) = script.clone() {
            sink.annotate = Some(Box::new(
                move |t: &crate::client::Trace, line: &mut Value| {
                    super::bench_conv::annotate_script(&s, t, line)
                },
            ));
        }
        sink.level_rate = lv.rate.filter(|_| sweep);
        eprintln!(
            "running {} against {target} (model {model}) ...",
            match mode {
                Mode::Closed { concurrency } => format!("closed loop at concurrency {concurrency}"),
                Mode::Open { rate, .. } => match lv.max_in_flight {
                    Some(c) => format!("open loop at {rate} requests/s, at most {c} in flight"),
                    None => format!("open loop at {rate} requests/s"),
                },
            }
        );
        let mut out = session::run(
            Session {
                target: target.clone(),
                plan,
                source,
                opts,
                cancel: Some(stop.clone()),
                telemetry: Telemetry::None,
                seed,
            },
            super::bench_conv::ConvSink::new(bench_sweep::SloSink::new(
                super::bench_html::HtmlSink::new(sink, args.html.is_some()),
                args.shape.slo.is_some(),
            )),
        )
        .await?;
        let window = match &out.window {
            Ok(w) => *w,
            Err(e) => bail!("{e}"),
        };
        bench_sweep::record_window(&mut load_record, &window);
        let stats = out.stats();
        offset += stats.ok + stats.failed + stats.warmup_excluded;
        let mut warnings = Vec::new();
        // Multi-turn and shared-prefix loads are meant to hit the cache.
        if nonce && !args.conv.active() {
            if let Some(w) = stats.prefix_cache.defeated_cache_warning() {
                warnings.push(match args.seed {
                Some(s) => format!("{w}; --seed {s} repeats the nonce numbers of an earlier run with the same seed"),
                None => w,
            });
            }
        }
        warnings.extend(bench_sweep::limit_warnings(
            &stats,
            &out.reads,
            &window,
            lv.max_in_flight,
        ));
        warnings.extend(
            work.as_deref()
                .and_then(|w| super::bench_source::eos_note(w, args.ignore_eos)),
        );
        if target.tls == Some(crate::client::Trust::Insecure) {
            warnings.push(crate::client::tls::insecure_note(&target.to_string()));
        }
        if stats.arrival_resolution.unresolved_chunk_gaps > 0 {
            eprintln!(
            "note: {} chunk gaps were between chunks one read returned together; chunk_gap_ms leaves them out (see arrival_resolution)",
            stats.arrival_resolution.unresolved_chunk_gaps
        );
        }
        let interrupted = out.interrupted;
        let mut report = BenchReport {
            bakeoff_version: crate::VERSION,
            tool: "bakeoff bench",
            started_at,
            url: target.to_string(),
            model: model.clone(),
            endpoint: args.endpoint,
            sampling: sampling.clone(),
            load: load_record,
            prompt: prompt_record.clone(),
            interrupted,
            arrival_clock: out.reads.evidence(),
            warnings,
            tls: target.tls.as_ref().map(|t| t.record()),
            workload: out.sink.summary(&args.conv),
            stats,
            slo: None,
            goodput: None,
            points: std::mem::take(&mut out.sink.inner.inner.points),
        };
        bench_sweep::judge(&args.sweep(), &mut report, &out.sink.inner.ok)?;
        reports.push(report);
        if interrupted {
            break;
        }
    }
    Ok(reports)
}
