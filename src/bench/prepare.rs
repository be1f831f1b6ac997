//! One `prepare` for every source a bench run can send: it picks the model, builds the request
//! body, and sizes the prompts exactly once (a matched prompt, a literal one, dataset items,
//! synthetic lengths, replayed dataset conversations, a shared prefix); every level then reuses
//! them.

use super::conv::{self, PrefixPlan};
use super::observe::Observer;
use super::source::{self, RunShape};
use super::spec::BenchSpec;
use crate::client::control::{models_answer, ModelsAnswer};
use crate::load::source::PromptText;
use crate::workload::conversation::Scripts;
use crate::workload::items::{SizeCtx, WorkSet};
use crate::workload::prompt::{self, MatchedPrompt, PromptSpec};
use crate::workload::request::{merge_extra, BodySpec, Precedence};
use anyhow::{bail, Result};
use serde_json::{json, Map, Value};
use std::sync::Arc;
use std::time::Duration;

/// What every level of a run sends.
pub struct Prepared {
    pub model: String,
    /// A nonce line per request (no prefix-cache hits between requests).
    pub nonce: bool,
    pub seed: u64,
    pub nonce_base: u64,
    /// Replayed dataset conversations.
    pub script: Option<Arc<Scripts>>,
    /// Dataset items or synthetic lengths.
    pub work: Option<Arc<WorkSet>>,
    pub matched: Option<Arc<MatchedPrompt>>,
    pub prefix: Option<PrefixPlan>,
    /// `--trace`: the replay's schedule and record (its requests are `work`).
    pub trace: Option<super::trace::TraceLoad>,
    /// The report's `prompt` record.
    pub prompt_record: Value,
    /// The request body without its prompt.
    pub base: Map<String, Value>,
}

impl Prepared {
    /// What each request's prompt is made of.
    pub fn prompt_text(&self, spec: &BenchSpec) -> PromptText {
        match (&self.work, &self.matched) {
            (Some(w), _) => PromptText::Work(w.clone()),
            (None, Some(m)) => PromptText::Matched(m.clone()),
            (None, None) => PromptText::Literal {
                text: spec.prompt.clone().unwrap_or_default(),
                nonce: self.nonce,
            },
        }
    }
}

/// The model to request: the spec's (checked against `/v1/models` where it answers), else the
/// first one listed.
async fn pick_model(spec: &BenchSpec, obs: &dyn Observer) -> Result<String> {
    let control_timeout = Duration::from_secs(30);
    let models = match models_answer(&spec.target, spec.api_key.as_deref(), control_timeout).await {
        ModelsAnswer::Listed(ids) => ids,
        // With a model given the list is only a check: a server without one is still measured.
        ModelsAnswer::Unusable(e) if spec.model.is_some() => {
            obs.note(&format!(
                "note: no model list ({e}); using --model {}",
                spec.model.as_deref().unwrap_or_default()
            ));
            Vec::new()
        }
        ModelsAnswer::Unusable(e) | ModelsAnswer::NoAnswer(e) => bail!("{e}"),
    };
    Ok(match &spec.model {
        Some(m) => {
            if !models.is_empty() && !models.contains(m) {
                obs.note(&format!(
                    "warning: /v1/models does not list '{m}' (it lists {}); sending it anyway",
                    models.join(", ")
                ));
            }
            m.clone()
        }
        None => models[0].clone(),
    })
}

/// Picks the model, builds the body and sizes whatever the run sends.
pub async fn prepare(spec: &BenchSpec, obs: &dyn Observer) -> Result<Prepared> {
    conv::check_literal(&spec.conv, spec.prompt.is_some(), &spec.labels)?;
    check_trace(spec)?;
    let seed = spec.seed.unwrap_or(0);
    let opened = match &spec.trace {
        Some(t) => Some(super::trace::open(t, seed)?),
        None => None,
    };
    let model = pick_model(spec, obs).await?;
    // A trace's requests share exactly the blocks it says: no nonce line.
    let nonce = !spec.allow_prefix_cache && spec.trace.is_none();
    let nonce_base = match spec.seed {
        Some(s) => crate::workload::filler::nonce_base_from_seed(s),
        None => crate::workload::filler::random_nonce_base(),
    };
    let labels = &spec.labels;
    let script = conv::load_script(
        &spec.conv,
        &spec.source,
        labels,
        seed,
        spec.max_tokens,
        nonce,
        obs,
    )?;
    let ctx = SizeCtx {
        target: &spec.target,
        model: &model,
        endpoint: spec.endpoint,
        tokenizer: spec.tokenizer.as_deref(),
        api_key: spec.api_key.as_deref(),
        nonce,
        timeout: Duration::from_secs_f64(spec.timeout.min(300.0)),
        extra_body: spec.extra_body.as_ref(),
    };
    let trace = match (&spec.trace, opened) {
        (Some(t), Some(o)) => Some(super::trace::prepare(t, o, nonce_base, &ctx, obs).await?),
        _ => None,
    };
    let work = match (&script, &trace) {
        (Some(_), _) => None,
        (None, Some(t)) => Some(t.work.clone()),
        (None, None) => {
            let run = RunShape {
                prompt_tokens: spec.prompt_tokens,
                max_tokens: spec.max_tokens,
                requests: spec.requests(),
                warmup: spec.shape.warmup,
                seed,
            };
            source::prepare(&spec.source, labels, &run, &ctx, obs).await?
        }
    };
    let (mut matched, mut prefix) = (None, None);
    let prompt_record = if let Some(s) = &script {
        s.record.clone()
    } else if let Some(w) = &work {
        w.record.clone()
    } else if let Some(text) = &spec.prompt {
        json!({"strategy": "literal", "nonce": nonce, "chars": text.chars().count()})
    } else {
        let tokens = conv::sized_tokens(&spec.conv, spec.prompt_tokens);
        obs.note(&format!(
            "sizing a {tokens}-token matched prompt against {} ...",
            spec.target
        ));
        let pspec: PromptSpec = ctx.spec(tokens);
        let m = prompt::build(&pspec)
            .await
            .map_err(|e| anyhow::anyhow!("matched prompt: {e}"))?;
        let mut rec = serde_json::to_value(&m)?;
        prefix = conv::size_prefix(spec, &pspec, &m, nonce_base, &mut rec, obs).await?;
        matched = Some(Arc::new(m));
        rec
    };
    let mut base = BodySpec {
        model: &model,
        max_tokens: spec.max_tokens,
        temperature: Some(spec.temperature),
        top_p: None,
        seed: Some(seed),
        ignore_eos: spec.ignore_eos,
        stream: Some(true),
    }
    .build();
    if let Some(extra) = &spec.extra_body {
        merge_extra(&mut base, extra, Precedence::ExtraWins);
    }
    Ok(Prepared {
        model,
        nonce,
        seed,
        nonce_base,
        script,
        work,
        matched,
        prefix,
        trace,
        prompt_record,
        base,
    })
}

/// A trace replaces the prompt source and the load shape: refuse what it would silently drop.
fn check_trace(spec: &BenchSpec) -> Result<()> {
    let Some(t) = &spec.trace else {
        return Ok(());
    };
    let s = &spec.shape;
    let clash = [
        (spec.prompt.is_some(), "a literal prompt"),
        (spec.source.active(), "a dataset or synthetic lengths"),
        (spec.conv.active(), "multi-turn or shared-prefix workloads"),
        (
            !s.rate.is_empty() || !s.concurrency.is_empty(),
            "rates or concurrency levels",
        ),
        (
            s.requests.is_some() || s.duration.is_some(),
            "a request count or duration",
        ),
        (s.find_saturation, "the saturation search"),
        (s.warmup_duration.is_some(), "a warm-up by time"),
    ];
    if let Some((_, what)) = clash.iter().find(|(on, _)| *on) {
        bail!(
            "{}: a trace sets each request's prompt, output length and arrival time, so it cannot be combined with {what}; drop one (window or sample the trace with {} / {} / {}, and cap it with the concurrency cap)",
            t.label("file"), t.label("start"), t.label("duration"), t.label("sample")
        );
    }
    Ok(())
}
