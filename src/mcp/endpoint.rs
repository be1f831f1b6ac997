//! `bench` and `gate` of an endpoint with bounded sizes: the bounds are in each input's schema
//! and checked here before any request, so an agent cannot start an unbounded load. Both call
//! the library the CLI calls (`bench::run_levels`, `gates::run_one`); the key stays an
//! environment variable's name, its value is sent to the endpoint and never returned.

use super::paths::Root;
use crate::bench::{BenchSpec, LoadShape};
use crate::client::Target;
use crate::gates::{self, Check, GateContext, ToolVariant, ToolsCheck};
use crate::output::gate::GateDoc;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::time::Duration;

/// The bounds (also stated in the schemas below).
pub const MAX_REQUESTS: u64 = 200;
pub const MAX_CONCURRENCY: usize = 16;
pub const MAX_PROMPT_TOKENS: u64 = 8192;
pub const MAX_TOKENS: u64 = 1024;
pub const MAX_TIMEOUT_S: f64 = 300.0;
pub const MAX_TOOL_BATCH: usize = 20;

#[derive(Debug, Clone, Deserialize, JsonSchema)]
pub struct BenchInput {
    /// The endpoint's base URL (http:// or https://; a trailing /v1 is accepted).
    pub url: String,
    /// The model to request (default: the first one /v1/models lists).
    pub model: Option<String>,
    /// Measured requests, 1 to 200 (default 16).
    #[schemars(range(min = 1, max = 200))]
    pub requests: Option<u64>,
    /// Requests in flight (a closed loop), 1 to 16 (default 1).
    #[schemars(range(min = 1, max = 16))]
    pub concurrency: Option<usize>,
    /// Prompt tokens of the matched prompt, 1 to 8192 (default 128).
    #[schemars(range(min = 1, max = 8192))]
    pub prompt_tokens: Option<u64>,
    /// max_tokens of each request, 1 to 1024 (default 64).
    #[schemars(range(min = 1, max = 1024))]
    pub max_tokens: Option<u64>,
    /// Per-request limit in seconds, above 0 and at most 300 (default 60).
    #[schemars(range(min = 0.001, max = 300.0))]
    pub timeout_s: Option<f64>,
    /// The NAME of the environment variable holding the API key (never the key).
    pub api_key_env: Option<String>,
}

#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct BenchOutput {
    pub ok: u64,
    pub failed: u64,
    /// `bakeoff bench --json`'s report (figures, each failure's class, the load record).
    pub report: serde_json::Value,
}

#[derive(Debug, Clone, Deserialize, JsonSchema)]
pub struct GateInput {
    /// The endpoint's base URL.
    pub url: String,
    /// The model to request (default: the first one /v1/models lists).
    pub model: Option<String>,
    /// Gates to run, from smoke, json, streaming and tools (the built-in tools suite;
    /// default: smoke, json, streaming).
    pub checks: Option<Vec<String>>,
    /// Tool requests per variant, 1 to 20 (default 4).
    #[schemars(range(min = 1, max = 20))]
    pub tool_batch: Option<usize>,
    /// The folder for the `gate-<name>.json` artifacts, under the server's root.
    pub out: String,
    /// Per-request limit in seconds, above 0 and at most 300 (default 60).
    #[schemars(range(min = 0.001, max = 300.0))]
    pub timeout_s: Option<f64>,
    /// The NAME of the environment variable holding the API key (never the key).
    pub api_key_env: Option<String>,
}

fn bounded<T: PartialOrd + std::fmt::Display>(
    v: T,
    lo: T,
    hi: T,
    field: &str,
    hint: &str,
) -> Result<T, String> {
    if v < lo || v > hi {
        return Err(format!("{field} {v}: must be from {lo} to {hi}{hint}"));
    }
    Ok(v)
}

fn timeout(t: Option<f64>) -> Result<f64, String> {
    let t = t.unwrap_or(60.0);
    if !(t > 0.0 && t <= MAX_TIMEOUT_S) {
        return Err(format!(
            "timeout_s {t}: must be positive seconds, at most {MAX_TIMEOUT_S}"
        ));
    }
    Ok(t)
}

fn target(url: &str) -> Result<Target, String> {
    Target::parse(url).map_err(|e| format!("url: {e}"))
}

/// The key from the variable named, for the requests only.
fn api_key(var: Option<&str>) -> Result<Option<String>, String> {
    match var {
        None => Ok(None),
        Some(name) => match std::env::var(name) {
            Ok(v) if !v.is_empty() => Ok(Some(v)),
            _ => Err(format!(
                "api_key_env {name}: the environment variable {name} is not set in the server's environment (set it where `bakeoff mcp` starts, or drop the field)"
            )),
        },
    }
}

/// The spec of a bounded bench, every input checked before any request.
pub fn bench_spec(i: &BenchInput) -> Result<BenchSpec, String> {
    let mut spec = BenchSpec::new(target(&i.url)?);
    spec.model = i.model.clone();
    let requests = bounded(i.requests.unwrap_or(16), 1, MAX_REQUESTS, "requests", "")?;
    let c = bounded(
        i.concurrency.unwrap_or(1),
        1,
        MAX_CONCURRENCY,
        "concurrency",
        "",
    )?;
    spec.prompt_tokens = bounded(
        i.prompt_tokens.unwrap_or(128),
        1,
        MAX_PROMPT_TOKENS,
        "prompt_tokens",
        "",
    )?;
    spec.max_tokens = bounded(i.max_tokens.unwrap_or(64), 1, MAX_TOKENS, "max_tokens", "")?;
    spec.timeout = timeout(i.timeout_s)?;
    spec.api_key = api_key(i.api_key_env.as_deref())?;
    spec.api_key_env = i.api_key_env.clone();
    spec.shape = LoadShape {
        concurrency: vec![c],
        requests: Some(requests),
        ..LoadShape::default()
    };
    Ok(spec)
}

pub async fn bench(i: &BenchInput) -> Result<BenchOutput, String> {
    let spec = bench_spec(i)?;
    let (_stop, rx) = tokio::sync::watch::channel(false);
    let mut reports = crate::bench::run_levels(&spec, rx, &crate::bench::Quiet)
        .await
        .map_err(|e| format!("{e:#}"))?;
    let r = reports.remove(0);
    Ok(BenchOutput {
        ok: r.stats.ok,
        failed: r.stats.failed,
        report: serde_json::to_value(&r).map_err(|e| e.to_string())?,
    })
}

/// The gates to run, checked as `bakeoff gate --checks` checks them.
fn checks(i: &GateInput) -> Result<Vec<Check>, String> {
    const KNOWN: [&str; 4] = ["smoke", "json", "streaming", "tools"];
    let names = i
        .checks
        .clone()
        .unwrap_or_else(|| vec!["smoke".into(), "json".into(), "streaming".into()]);
    if names.is_empty() {
        return Err(format!(
            "checks lists no gates (known: {})",
            KNOWN.join(", ")
        ));
    }
    let batch = bounded(
        i.tool_batch.unwrap_or(4),
        1,
        MAX_TOOL_BATCH,
        "tool_batch",
        "",
    )?;
    let mut out = Vec::new();
    for n in &names {
        out.push(match n.trim() {
            "smoke" => Check::Smoke,
            "json" => Check::Json,
            "streaming" => Check::Streaming,
            "tools" => {
                let suite = gates::builtin::load_tools(None).map_err(|e| format!("tools suite refused: {e}"))?;
                Check::Tools(ToolsCheck::new(suite, batch, vec![ToolVariant::Plain])?)
            }
            other => {
                return Err(format!(
                    "checks: unknown gate \"{other}\" (known here: {}; retrieval and quality run from `bakeoff gate`)",
                    KNOWN.join(", ")
                ))
            }
        });
    }
    Ok(out)
}

pub async fn gate(root: &Root, i: &GateInput) -> Result<GateDoc, String> {
    let t = target(&i.url)?;
    let checks = checks(i)?;
    let out = root.inside(&i.out, "out")?;
    let timeout = timeout(i.timeout_s)?;
    let key = api_key(i.api_key_env.as_deref())?;
    let model = match &i.model {
        Some(m) => m.clone(),
        None => crate::client::control::list_models(&t, key.as_deref(), Duration::from_secs(30))
            .await
            .map_err(|e| e.to_string())?
            .remove(0),
    };
    let mut ctx = GateContext::new(t.clone(), model);
    ctx.api_key = key;
    ctx.timeout = Duration::from_secs_f64(timeout);
    let mut results = Vec::new();
    for c in &checks {
        results.push(gates::run_one(&ctx, c).await);
    }
    let paths = gates::write_artifacts(&out, &results).map_err(|e| format!("{e:#}"))?;
    Ok(GateDoc::new(&t.to_string(), &results, &paths))
}
