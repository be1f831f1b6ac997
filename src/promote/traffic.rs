//! The bake's traffic, the one place a promotion calls the measurement core (`load::`,
//! `workload::`, `metrics::`): the campaign's request (model, sampling, `max_tokens`, API) with a
//! prompt of the matched prompt's length in filler words (not re-sized against the endpoint's
//! tokenizer), sent open loop at the declared rate for one interval through `load::session`.

use crate::campaign::{ApiKind, Arm, Campaign};
use crate::client::{StreamOpts, Target, Trace};
use crate::load::session::{self, Session, Sink, Telemetry};
use crate::load::source::{PromptText, RequestSource};
use crate::load::{Arrival, Mode, Plan};
use crate::metrics::stats::Distribution;
use crate::metrics::summary::Collector;
use crate::workload::request::BodySpec;
use crate::workload::Endpoint;
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

/// The request source of the bake (built once).
pub fn source(c: &Campaign, arm: &Arm, target: &Target, offset: u64) -> Arc<RequestSource> {
    let s = &c.workload.sampling;
    let endpoint = match c.workload.api {
        ApiKind::Chat => Endpoint::Chat,
        ApiKind::Completions => Endpoint::Completions,
    };
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
    Arc::new(RequestSource {
        target: target.clone(),
        endpoint,
        base,
        prompt: PromptText::Literal {
            text: crate::workload::filler::words(c.workload.matched_prompt_tokens.into()),
            nonce: true,
        },
        api_key: arm.api_key_env.as_ref().and_then(|k| std::env::var(k).ok()),
        offset,
        nonce_base: crate::workload::filler::random_nonce_base(),
    })
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
    src: Arc<RequestSource>,
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
