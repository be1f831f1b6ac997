//! The bake's traffic: the campaign's own workload, sized on the winner once when the bake starts
//! and sent open loop at the declared rate for one interval at a time. The sizing and the request
//! source are the ones a campaign's timing steps use (`run::steps::timing_work::size`,
//! `run::timed::source`): the matched prompt counted against the winner's tokenizer, a dataset's
//! items (or its conversations replayed), synthetic lengths, conversations or shared prefixes,
//! so an interval sends what the bake-off measured the arm's figures with. Each interval takes
//! its own request numbers (and the next work items), so no interval repeats another's prompts.

use crate::campaign::{plan, ApiKind, Arm, Campaign};
use crate::client::{StreamOpts, Target, Trace};
use crate::load::session::{self, Session, Sink, Telemetry};
use crate::load::{Arrival, Mode, Plan, Source};
use crate::metrics::stats::Distribution;
use crate::metrics::summary::Collector;
use crate::run::steps::timing_work::{size, SizeInput};
use crate::run::timed::{self, StepWork, TimingInput};
use crate::workload::prompt::MatchedPrompt;
use crate::workload::request::BodySpec;
use crate::workload::Endpoint;
use serde_json::{json, Map, Value};
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

/// What one interval measured.
#[derive(Debug, Default)]
pub struct Measured {
    pub ok: u64,
    pub failed: u64,
    /// The first failures, in words.
    pub errors: Vec<String>,
    /// Distributions keyed as `RunStats::metrics` (`ttft_ms`, `decode_tok_s`, …) for the SLO check.
    pub metrics: BTreeMap<String, Distribution>,
}

/// Request numbers of interval k start at `FIRST + k * STRIDE` (an interval sends far fewer).
const FIRST: u64 = 1_000_000_000;
const STRIDE: u64 = 10_000_000;

/// The bake's workload, sized on the winner (built once).
pub struct Work {
    target: Target,
    base: Map<String, Value>,
    prompt: Arc<MatchedPrompt>,
    work: StepWork,
    api_key: Option<String>,
    nonce_base: u64,
    seed: u64,
    /// What it sends, for `promotion.json`.
    pub record: Value,
}

/// What the bake sends, in words (the dry run and the plan): the campaign's workload source.
pub fn sends(c: &Campaign) -> String {
    match &plan(c).request.source {
        Some(src) => format!(
            "the campaign's workload ({})",
            crate::campaign::source_line(src)
        ),
        None => format!(
            "the campaign's matched prompt ({} tokens, sized on the winner)",
            c.workload.matched_prompt_tokens
        ),
    }
}

/// Sizes the campaign's workload on the winner at `target`, as its timing steps did in the
/// bake-off. Err: why it cannot be sent (the bake fails: nothing unmeasured is sent instead).
pub async fn prepare(c: &Campaign, arm: &Arm, target: &Target) -> Result<Work, String> {
    let req = plan(c).request;
    let s = &req.sampling;
    let endpoint = match req.api {
        ApiKind::Chat => Endpoint::Chat,
        ApiKind::Completions => Endpoint::Completions,
    };
    let api_key = arm.api_key_env.as_ref().and_then(|k| std::env::var(k).ok());
    let nonce_base = crate::workload::filler::random_nonce_base();
    let (prompt, work) = size(SizeInput {
        target: target.clone(),
        model: arm.served_model.clone(),
        endpoint,
        tokenizer: arm.tokenizer.clone(),
        api_key: api_key.clone(),
        nonce: req.defeat_prefix_cache,
        timeout: Duration::from_secs(req.sizing_timeout_s),
        matched_tokens: c.workload.matched_prompt_tokens.into(),
        max_tokens: c.workload.max_tokens.into(),
        source: req.source.clone(),
        nonce_base,
    })
    .await?;
    let base = BodySpec {
        model: &arm.served_model,
        max_tokens: c.workload.max_tokens.into(),
        temperature: Some(s.temperature),
        top_p: s.top_p,
        seed: Some(s.seed),
        ignore_eos: s.ignore_eos,
        stream: Some(true),
    }
    .build();
    let mut record = json!({
        "sends": sends(c),
        "matched_prompt_tokens": prompt.target_tokens,
        "prefix_cache_nonce": prompt.nonce,
    });
    if let StepWork::Items { set, .. } = &work {
        record["items"] = set.record.clone();
    }
    Ok(Work {
        target: target.clone(),
        base,
        prompt: Arc::new(prompt),
        work,
        api_key,
        nonce_base,
        seed: s.seed,
        record,
    })
}

impl Work {
    /// The request source of interval `k` (from 1); `sent`: requests the intervals before it
    /// sent, so a work set goes on with its next item.
    pub fn source(&self, k: u64, sent: u64) -> Arc<dyn Source> {
        let mut work = self.work.clone();
        if let StepWork::Items { first_item, .. } = &mut work {
            *first_item = sent;
        }
        let inp = TimingInput {
            target: self.target.clone(),
            base: self.base.clone(),
            prompt: self.prompt.clone(),
            api_key: self.api_key.clone(),
            concurrency: 1,
            requests: 0,
            open_loop: None,
            first_index: FIRST + k * STRIDE,
            nonce_base: self.nonce_base,
            seed: self.seed,
            gpus: Vec::new(),
            idle_power_w: Default::default(),
            schedule: None,
            client: None,
        };
        timed::source(&inp, &work).0
    }
}

/// Keeps the first failures in words (the interval's detail quotes them).
struct FirstErrors(Vec<String>);

impl Sink for FirstErrors {
    fn trace(&mut self, t: Trace, _: &Collector) -> anyhow::Result<()> {
        if self.0.len() < 3 && !t.warmup {
            if let Some(e) = &t.error {
                self.0.push(e.to_string());
            }
        }
        Ok(())
    }
}

/// Sends the bake's traffic for `length` at `rate` requests per second, through the measurement
/// session every command that measures runs (`load::session`: traces folded off the runtime
/// thread, the statistics a campaign's timing steps compute).
pub async fn interval(
    target: &Target,
    src: Arc<dyn Source>,
    rate: f64,
    length: Duration,
) -> Measured {
    let s = Session {
        target: target.clone(),
        plan: Plan {
            mode: Mode::Open {
                rate,
                arrival: Arrival::Constant,
            },
            requests: None,
            duration: Some(length),
            warmup: 0,
            warmup_duration: None,
            max_in_flight: Some(64),
        },
        source: src,
        opts: StreamOpts {
            timeout: length.max(Duration::from_secs(30)),
            ..StreamOpts::default()
        },
        cancel: None,
        telemetry: Telemetry::None,
        seed: 0,
    };
    let out = match session::run(s, FirstErrors(Vec::new())).await {
        Ok(o) => o,
        Err(e) => {
            return Measured {
                errors: vec![format!("the load could not run: {e:#}")],
                ..Measured::default()
            }
        }
    };
    let stats = out.stats();
    let mut errors = out.sink.0;
    if let Err(e) = &out.window {
        errors.insert(0, format!("the load could not run: {e}"));
    }
    Measured {
        ok: stats.ok,
        failed: stats.failed,
        errors,
        metrics: stats.metrics,
    }
}
