//! `bakeoff gate URL`: run pass/fail gates against an endpoint and write one artifact per gate.
//!
//! A thin wrapper over [`crate::gates`]: parse flags, load and validate suites (a bad suite is
//! refused before any request), run, write `gate-<name>.json`, print a table, and fail (non-zero
//! exit) unless every requested gate passed.

use crate::client::control::list_models;
use crate::client::Target;
use crate::gates::{
    self, retrieval, Check, GateContext, QualityCheck, RetrievalCheck, ToolVariant, ToolsCheck,
};
use anyhow::{bail, Context, Result};
use clap::Args;
use serde_json::Value;
use std::path::PathBuf;
use std::time::Duration;

const ALL_CHECKS: &[&str] = &[
    "smoke",
    "json",
    "streaming",
    "tools",
    "retrieval",
    "quality",
];

#[derive(Args, Debug, Clone)]
pub struct GateArgs {
    /// Base URL of the engine, e.g. http://127.0.0.1:8000 or https://gateway.example/openai (a
    /// trailing /v1 is accepted).
    pub url: String,
    /// Everything else (boxed: the CLI's command enum stays small).
    #[command(flatten)]
    pub opts: Box<GateOptions>,
}

#[derive(Args, Debug, Clone)]
pub struct GateOptions {
    /// Model to request (default: the first model /v1/models lists).
    #[arg(long)]
    pub model: Option<String>,
    /// Gates to run, comma-separated: smoke, json, streaming, tools, retrieval, quality.
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "smoke,json,streaming,tools,retrieval,quality"
    )]
    pub checks: Vec<String>,
    /// Tools suite file (TOML, or JSON ending in .json). Default: the built-in suites/tools.toml.
    /// Small models: suites/tools-fewshot.toml (also built in, under that name).
    #[arg(long)]
    pub tools_suite: Option<PathBuf>,
    /// Quality suite file. Default: the built-in suites/quality.toml.
    #[arg(long)]
    pub quality_suite: Option<PathBuf>,
    /// Tool requests per variant, all in flight at once (at least one per case).
    #[arg(long, default_value_t = gates::tools::DEFAULT_BATCH)]
    pub tool_batch: usize,
    /// Tool variants, comma-separated: plain, streaming, round-trip.
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "plain,streaming,round-trip"
    )]
    pub tool_variants: Vec<String>,
    /// Exact actual prompt tokens of each retrieval request.
    #[arg(long, default_value_t = 3000)]
    pub retrieval_tokens: u64,
    /// Needles planted in the haystack (one question each).
    #[arg(long, default_value_t = 2)]
    pub retrieval_needles: usize,
    /// Depth of each needle, comma-separated fractions (default: evenly spread).
    #[arg(long, value_delimiter = ',')]
    pub retrieval_depths: Vec<f64>,
    /// Answer budget (max_tokens) of each retrieval request.
    #[arg(long, default_value_t = retrieval::DEFAULT_MAX_TOKENS)]
    pub retrieval_max_tokens: u64,
    /// The served model's tokenizer.json, used to size the haystack (else /tokenize, else calibration).
    #[arg(long)]
    pub tokenizer: Option<PathBuf>,
    /// The served context in tokens (else read from /v1/models or /props).
    #[arg(long)]
    pub context_tokens: Option<u64>,
    /// Attempts per quality item.
    #[arg(long, default_value_t = gates::quality::DEFAULT_REPETITIONS)]
    pub repetitions: u32,
    /// Reasoning headroom for every quality item (tokens added to its visible-answer budget).
    #[arg(long)]
    pub reasoning_headroom: Option<u64>,
    /// Quality requests in flight at once.
    #[arg(long, default_value_t = gates::quality::DEFAULT_CONCURRENCY)]
    pub quality_concurrency: usize,
    /// Sampling temperature sent with every request.
    #[arg(long, default_value_t = 0.0)]
    pub temperature: f64,
    /// Sampling seed sent with every request; also seeds the retrieval needles.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// Directory for gate-<name>.json artifacts.
    #[arg(long, default_value = "gates")]
    pub out: PathBuf,
    /// Name of the environment variable holding the API key.
    #[arg(long)]
    pub api_key_env: Option<String>,
    /// JSON object merged into every request body, e.g. '{"top_p":0.9}'.
    #[arg(long)]
    pub extra_body: Option<String>,
    /// Per-request limit, seconds.
    #[arg(long, default_value_t = 300.0)]
    pub timeout: f64,
    /// Longest silence inside a stream, seconds.
    #[arg(long, default_value_t = 60.0)]
    pub stall_timeout: f64,
    /// https: trust only the CA certificate(s) in this PEM file (default: the system's CA store).
    #[arg(long, value_name = "PATH")]
    pub ca_file: Option<PathBuf>,
    /// https: do not verify the server's certificate (recorded in every artifact).
    #[arg(long, conflicts_with = "ca_file")]
    pub insecure: bool,
    /// Characters of each message's content kept in the artifacts.
    #[arg(long, default_value_t = gates::DEFAULT_EXCERPT_CHARS)]
    pub excerpt_chars: usize,
    /// Print one JSON document on stdout instead of the table (`bakeoff.gate/1`,
    /// docs/agents.md): each gate's status, counts and artifact. Progress stays on stderr.
    #[arg(long)]
    pub json: bool,
}

/// Everything that can be checked before any request: flags, suites.
fn prepare(url: &str, args: &GateOptions) -> Result<(Target, Vec<Check>)> {
    let target = crate::cli::bench::tls_target(url, args.ca_file.as_deref(), args.insecure)?;
    if args.timeout <= 0.0 || args.stall_timeout <= 0.0 {
        bail!("--timeout and --stall-timeout must be positive seconds");
    }
    let mut names: Vec<&str> = Vec::new();
    for c in &args.checks {
        let c = c.trim();
        if !ALL_CHECKS.contains(&c) {
            bail!(
                "--checks: unknown gate \"{c}\" (known: {})",
                ALL_CHECKS.join(", ")
            );
        }
        if !names.contains(&c) {
            names.push(c);
        }
    }
    if names.is_empty() {
        bail!("--checks lists no gates (known: {})", ALL_CHECKS.join(", "));
    }
    let mut checks = Vec::new();
    for name in names {
        checks.push(match name {
            "smoke" => Check::Smoke,
            "json" => Check::Json,
            "streaming" => Check::Streaming,
            "tools" => {
                let suite = gates::builtin::load_tools(args.tools_suite.as_deref())
                    .map_err(|e| anyhow::anyhow!("tools suite refused: {e}"))?;
                let variants = args
                    .tool_variants
                    .iter()
                    .map(|v| ToolVariant::parse(v.trim()))
                    .collect::<Result<Vec<_>, _>>()
                    .map_err(|e| anyhow::anyhow!("--tool-variants: {e}"))?;
                Check::Tools(
                    ToolsCheck::new(suite, args.tool_batch, variants)
                        .map_err(|e| anyhow::anyhow!(e))?,
                )
            }
            "retrieval" => {
                if let Some(t) = &args.tokenizer {
                    if !t.is_file() {
                        bail!(
                            "--tokenizer {}: no such file (give the served model's tokenizer.json)",
                            t.display()
                        );
                    }
                }
                Check::Retrieval(
                    RetrievalCheck::new(
                        args.retrieval_tokens,
                        args.retrieval_needles,
                        args.retrieval_depths.clone(),
                        args.seed,
                        args.retrieval_max_tokens,
                        args.tokenizer.clone(),
                    )
                    .map_err(|e| anyhow::anyhow!(e))?,
                )
            }
            "quality" => {
                let suite = gates::builtin::load_quality(args.quality_suite.as_deref())
                    .map_err(|e| anyhow::anyhow!("quality suite refused: {e}"))?;
                if args.repetitions == 0 {
                    bail!("--repetitions must be at least 1");
                }
                let mut q = QualityCheck::new(suite, args.repetitions);
                q.reasoning_headroom = args.reasoning_headroom;
                q.concurrency = args.quality_concurrency.max(1);
                Check::Quality(q)
            }
            _ => unreachable!("checked above"),
        });
    }
    Ok((target, checks))
}

pub fn run(args: GateArgs) -> Result<()> {
    let out = super::JsonOut::new("gate", args.opts.json);
    out.end(gate(args, &out))
}

fn gate(args: GateArgs, out: &super::JsonOut) -> Result<()> {
    crate::clock::raise_nofile_limit();
    // Flags, suites, the request body and the key are checked before any request: a problem
    // there is a refusal (exit 2).
    let refuse = |e: anyhow::Error| anyhow::Error::from(super::Exit::with(2, format!("{e:#}")));
    let (target, checks) = prepare(&args.url, &args.opts).map_err(refuse)?;
    let args = *args.opts;
    let extra_body = match &args.extra_body {
        None => serde_json::Map::new(),
        Some(s) => match serde_json::from_str::<Value>(s) {
            Ok(Value::Object(m)) => m,
            Ok(_) => {
                return Err(refuse(anyhow::anyhow!(
                    "--extra-body must be a JSON object, like '{{\"top_p\": 0.9}}'"
                )))
            }
            Err(e) => {
                return Err(refuse(anyhow::anyhow!(
                    "--extra-body is not valid JSON ({e})"
                )))
            }
        },
    };
    let api_key = crate::cli::bench::read_api_key(args.api_key_env.as_deref()).map_err(refuse)?;
    let rt = crate::load::pace::client_runtime().context("cannot start the async runtime")?;
    let results = rt.block_on(async {
        let model = match &args.model {
            Some(m) => m.clone(),
            None => list_models(&target, api_key.as_deref(), Duration::from_secs(30))
                .await
                .map_err(|e| anyhow::anyhow!(e))?
                .remove(0),
        };
        let mut ctx = GateContext::new(target.clone(), model);
        ctx.api_key = api_key.clone();
        ctx.extra_body = extra_body;
        ctx.temperature = args.temperature;
        ctx.seed = args.seed;
        ctx.timeout = Duration::from_secs_f64(args.timeout);
        ctx.stall = Duration::from_secs_f64(args.stall_timeout);
        ctx.excerpt_chars = args.excerpt_chars.max(16);
        ctx.context_tokens = args.context_tokens;
        let mut results = Vec::new();
        for c in &checks {
            eprintln!(
                "gate {}: running against {} (model {}) ...",
                c.name(),
                ctx.target,
                ctx.model
            );
            let r = gates::run_one(&ctx, c).await;
            eprintln!(
                "gate {}: {} {}/{} in {:.1} s",
                r.gate,
                r.status.as_str(),
                r.passed,
                r.total,
                r.duration_s
            );
            results.push(r);
        }
        Ok::<_, anyhow::Error>(results)
    })?;
    let paths = gates::write_artifacts(&args.out, &results)?;
    if out.on() {
        let paths: Vec<PathBuf> = paths.iter().map(|p| super::absolute(p)).collect();
        out.emit(&crate::output::gate::GateDoc::new(
            &target.to_string(),
            &results,
            &paths,
        ))?;
    } else {
        print!("{}", gates::table(&results));
        for p in &paths {
            println!("wrote {}", p.display());
        }
    }
    let failed: Vec<&str> = results
        .iter()
        .filter(|r| !r.passed())
        .map(|r| r.gate.as_str())
        .collect();
    if !failed.is_empty() {
        bail!(
            "{} of {} gates failed: {}",
            failed.len(),
            results.len(),
            failed.join(", ")
        );
    }
    Ok(())
}
