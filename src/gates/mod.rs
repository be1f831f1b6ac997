//! Gates: pass/fail checks of an endpoint (preflight, strict tool calls, exact long-context
//! retrieval, bounded quality suites).
//!
//! The same code runs from `bakeoff gate` and from a campaign: callers build a [`GateContext`]
//! (where and how to send) and a list of [`Check`]s (suites already loaded and validated, so a bad
//! suite is refused before any request), call [`run`], and get one [`GateResult`] per check:
//! plain data holding every observation. [`write_artifacts`] writes each as `gate-<name>.json`.
//!
//! One file per gate: [`preflight`], [`tools`], [`retrieval`], [`quality`]. Shared parts: sending
//! and recording requests ([`exchange`]), suite files ([`suite`]), tool definitions and the strict
//! call check ([`tooldef`]), answer validators ([`expect`]), served context
//! ([`context`]).

pub mod builtin;
pub mod context;
pub mod exchange;
pub mod expect;
pub mod preflight;
pub mod quality;
pub mod retrieval;
pub mod schema_words;
pub mod suite;
pub mod tooldef;
pub mod tools;

use crate::client::Target;
use crate::evidence::{GateName, GateStatus};
use exchange::ExchangeRecord;
use serde::Serialize;
use serde_json::{Map, Value};
use std::future::Future;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::task::Poll;
use std::time::Duration;

pub use quality::{QualityCheck, QualitySuite};
pub use retrieval::RetrievalCheck;
pub use suite::SuiteError;
pub use tools::{ToolSuite, ToolVariant, ToolsCheck};

/// Characters of each message's content kept in artifacts (head and tail; the rest is replaced by
/// a marker with its length and SHA-256).
pub const DEFAULT_EXCERPT_CHARS: usize = 2000;

/// Where and how gate requests are sent. Sampling is always sent explicitly and recorded.
#[derive(Debug, Clone)]
pub struct GateContext {
    pub target: Target,
    /// The `model` field of every request.
    pub model: String,
    pub api_key: Option<String>,
    /// Merged into every request body last (it can override sampling; what was sent is recorded).
    pub extra_body: Map<String, Value>,
    pub temperature: f64,
    /// The `seed` of every request (repetitions add their attempt number).
    pub seed: u64,
    /// Whole-request limit.
    pub timeout: Duration,
    /// Longest silence inside a stream.
    pub stall: Duration,
    /// Characters of each message kept in artifacts.
    pub excerpt_chars: usize,
    /// The served context in tokens, when the caller knows it (else it is asked of the endpoint).
    pub context_tokens: Option<u64>,
}

impl GateContext {
    /// Defaults: temperature 0, seed 0, 300 s timeout, 60 s stall limit.
    pub fn new(target: Target, model: impl Into<String>) -> GateContext {
        GateContext {
            target,
            model: model.into(),
            api_key: None,
            extra_body: Map::new(),
            temperature: 0.0,
            seed: 0,
            timeout: Duration::from_secs(300),
            stall: Duration::from_secs(60),
            excerpt_chars: DEFAULT_EXCERPT_CHARS,
            context_tokens: None,
        }
    }
}

/// One gate to run, with its configuration.
#[derive(Debug, Clone)]
pub enum Check {
    /// A short answer containing an expected marker.
    Smoke,
    /// A structured (`response_format` json_schema) answer that parses and has the required keys.
    Json,
    /// An SSE stream that ends with `[DONE]` and carries usage.
    Streaming,
    Tools(ToolsCheck),
    Retrieval(RetrievalCheck),
    Quality(QualityCheck),
}

impl Check {
    pub fn name(&self) -> &'static str {
        self.gate().as_str()
    }

    pub fn gate(&self) -> GateName {
        match self {
            Check::Smoke => GateName::Smoke,
            Check::Json => GateName::Json,
            Check::Streaming => GateName::Streaming,
            Check::Tools(_) => GateName::Tools,
            Check::Retrieval(_) => GateName::Retrieval,
            Check::Quality(_) => GateName::Quality,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Status {
    Passed,
    Failed,
}

impl Status {
    pub fn as_str(self) -> &'static str {
        match self {
            Status::Passed => "passed",
            Status::Failed => "failed",
        }
    }
}

/// A gate's outcome as `campaign-result.json` records it.
impl From<Status> for GateStatus {
    fn from(s: Status) -> GateStatus {
        match s {
            Status::Passed => GateStatus::Passed,
            Status::Failed => GateStatus::Failed,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Verdict {
    Pass,
    Fail,
}

/// One observation: one case, item or needle attempt, with every request it took.
#[derive(Debug, Clone, Serialize)]
pub struct Observation {
    /// Unique inside the gate: `<item>/<variant>#<n>`.
    pub id: String,
    pub item: Option<String>,
    pub variant: Option<String>,
    pub attempt: Option<u32>,
    pub verdict: Verdict,
    /// The failure class (quality: `wrong-answer`, `truncated-after-visible-output`, ...; others:
    /// `request-error`, `tool-call`, `under-filled`, ...); null when it passed.
    pub class: Option<String>,
    /// The verdict in words.
    pub reason: String,
    /// The requests sent and what came back (a round trip has two).
    pub exchanges: Vec<ExchangeRecord>,
    /// Gate-specific facts (expected values, actual prompt tokens, ...).
    #[serde(skip_serializing_if = "Value::is_null")]
    pub details: Value,
}

impl Observation {
    pub fn passed(&self) -> bool {
        self.verdict == Verdict::Pass
    }
}

/// The suite a gate ran.
#[derive(Debug, Clone, Serialize)]
pub struct SuiteRef {
    pub path: String,
    pub name: Option<String>,
    pub sha256: String,
    /// How many cases (tools) or items (quality) the suite holds: a vanished case shows.
    pub cases: usize,
}

/// The outcome of one gate: what `gate-<name>.json` holds.
#[derive(Debug, Clone, Serialize)]
pub struct GateResult {
    pub gate: GateName,
    pub status: Status,
    /// Observations that passed (`passed`/`total` is the gate's k/N).
    pub passed: u64,
    pub total: u64,
    /// The verdict in words.
    pub reason: String,
    pub url: String,
    /// https only: how the server's certificate was checked (`{"verify": "insecure"}` when it
    /// was not: the gate then did not authenticate the server it judged).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tls: Option<Value>,
    pub model: String,
    /// Wall-clock label of the start (UTC).
    pub started_at: String,
    pub duration_s: f64,
    pub suite: Option<SuiteRef>,
    pub suite_sha256: Option<String>,
    /// The sampling sent with every request (per-request `seed` and `max_tokens` are in each
    /// exchange's request).
    pub sampling: Value,
    /// Characters of each message kept in the recorded requests.
    pub message_excerpt_chars: usize,
    /// Gate-specific summary (per-variant counts, actual prompt tokens, stable items, ...).
    pub details: Value,
    pub observations: Vec<Observation>,
    pub bakeoff_version: String,
}

impl GateResult {
    /// An empty result for `gate`, started now.
    pub fn start(gate: GateName, ctx: &GateContext) -> GateResult {
        GateResult {
            gate,
            status: Status::Failed,
            passed: 0,
            total: 0,
            reason: String::new(),
            url: ctx.target.to_string(),
            tls: ctx.target.tls.as_ref().map(|t| t.record()),
            model: ctx.model.clone(),
            started_at: crate::clock::wall_rfc3339(),
            duration_s: 0.0,
            suite: None,
            suite_sha256: None,
            sampling: exchange::sampling_record(ctx),
            message_excerpt_chars: ctx.excerpt_chars,
            details: Value::Null,
            observations: Vec::new(),
            bakeoff_version: crate::VERSION.to_string(),
        }
    }

    pub fn passed(&self) -> bool {
        self.status == Status::Passed
    }

    /// Sets `passed` and `total` from the observations.
    fn count(&mut self) {
        self.total = self.observations.len() as u64;
        self.passed = self.observations.iter().filter(|o| o.passed()).count() as u64;
    }
}

/// Runs every check in order and returns one result each. Never fails as a whole: a gate that
/// cannot run is a failed result with its reason.
pub async fn run(ctx: &GateContext, checks: &[Check]) -> Vec<GateResult> {
    let mut out = Vec::with_capacity(checks.len());
    for c in checks {
        out.push(run_one(ctx, c).await);
    }
    out
}

/// Runs one check.
pub async fn run_one(ctx: &GateContext, check: &Check) -> GateResult {
    let t0 = crate::clock::mono_ns();
    let mut r = match check {
        Check::Smoke => preflight::smoke(ctx).await,
        Check::Json => preflight::json(ctx).await,
        Check::Streaming => preflight::streaming(ctx).await,
        Check::Tools(t) => tools::run(ctx, t).await,
        Check::Retrieval(r) => retrieval::run(ctx, r).await,
        Check::Quality(q) => quality::run(ctx, q).await,
    };
    r.duration_s = (crate::clock::mono_ns() - t0) as f64 / 1e9;
    r
}

/// [`run`] on a fresh single-threaded runtime, for callers without one.
pub fn run_blocking(ctx: &GateContext, checks: &[Check]) -> anyhow::Result<Vec<GateResult>> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| anyhow::anyhow!("cannot start the async runtime: {e}"))?;
    Ok(rt.block_on(run(ctx, checks)))
}

/// `gate-<name>.json`.
pub fn artifact_name(gate: &str) -> String {
    format!("gate-{gate}.json")
}

/// Writes each result as `dir/gate-<name>.json` (atomically; the directory is created) and
/// returns the paths.
pub fn write_artifacts(dir: &Path, results: &[GateResult]) -> anyhow::Result<Vec<PathBuf>> {
    std::fs::create_dir_all(dir).map_err(|e| {
        anyhow::anyhow!("cannot create the output directory {}: {e}", dir.display())
    })?;
    let mut paths = Vec::new();
    for r in results {
        let p = dir.join(artifact_name(r.gate.as_str()));
        let mut bytes = serde_json::to_vec_pretty(r)?;
        bytes.push(b'\n');
        crate::evidence::write_atomic(&p, &bytes)?;
        paths.push(p);
    }
    Ok(paths)
}

/// A plain-text table: gate, status, k/N, reason.
pub fn table(results: &[GateResult]) -> String {
    let rows: Vec<[String; 4]> = results
        .iter()
        .map(|r| {
            [
                r.gate.to_string(),
                r.status.as_str().to_string(),
                format!("{}/{}", r.passed, r.total),
                r.reason.clone(),
            ]
        })
        .collect();
    let head = ["gate", "status", "k/N", "reason"];
    let mut w = head.map(str::len);
    for row in &rows {
        for i in 0..3 {
            w[i] = w[i].max(row[i].chars().count());
        }
    }
    let mut s = String::new();
    let line = |s: &mut String, c: [&str; 4]| {
        s.push_str(&format!(
            "{:<w0$}  {:<w1$}  {:>w2$}  {}\n",
            c[0],
            c[1],
            c[2],
            c[3],
            w0 = w[0],
            w1 = w[1],
            w2 = w[2]
        ));
    };
    line(&mut s, head);
    for row in &rows {
        line(&mut s, [&row[0], &row[1], &row[2], &row[3]]);
    }
    s
}

/// Runs futures concurrently on the current task (no spawning, so they may borrow) and returns
/// their outputs in order.
pub(crate) async fn join_all<F: Future>(futs: Vec<F>) -> Vec<F::Output> {
    let mut futs: Vec<Pin<Box<F>>> = futs.into_iter().map(Box::pin).collect();
    let mut out: Vec<Option<F::Output>> = futs.iter().map(|_| None).collect();
    std::future::poll_fn(|cx| {
        let mut pending = false;
        for (i, f) in futs.iter_mut().enumerate() {
            if out[i].is_none() {
                match f.as_mut().poll(cx) {
                    Poll::Ready(v) => out[i] = Some(v),
                    Poll::Pending => pending = true,
                }
            }
        }
        if pending {
            Poll::Pending
        } else {
            Poll::Ready(())
        }
    })
    .await;
    out.into_iter()
        .map(|o| o.expect("every future completed"))
        .collect()
}

/// The most common failure reasons, `reason (×n)`, at most `max`, most frequent first.
pub(crate) fn top_reasons<'a>(reasons: impl Iterator<Item = &'a str>, max: usize) -> String {
    let mut counts: Vec<(&str, usize)> = Vec::new();
    for r in reasons {
        match counts.iter_mut().find(|(x, _)| *x == r) {
            Some((_, n)) => *n += 1,
            None => counts.push((r, 1)),
        }
    }
    counts.sort_by_key(|c| std::cmp::Reverse(c.1));
    let more = counts.len().saturating_sub(max);
    let mut parts: Vec<String> = counts
        .iter()
        .take(max)
        .map(|(r, n)| {
            if *n > 1 {
                format!("{r} (×{n})")
            } else {
                r.to_string()
            }
        })
        .collect();
    if more > 0 {
        parts.push(format!("and {more} other reason(s)"));
    }
    parts.join("; ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn join_all_keeps_order() {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let out = rt.block_on(join_all(
            (0..5u64)
                .map(|i| async move {
                    tokio::time::sleep(Duration::from_millis(10 * (5 - i))).await;
                    i
                })
                .collect(),
        ));
        assert_eq!(out, vec![0, 1, 2, 3, 4]);
    }

    #[test]
    fn reasons_are_grouped() {
        let r = top_reasons(["a", "b", "a", "c", "d"].into_iter(), 2);
        assert_eq!(r, "a (×2); b; and 2 other reason(s)");
    }
}
