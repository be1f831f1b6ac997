//! The bake's traffic, the one place a promotion calls the measurement core (`load::`,
//! `workload::`, `metrics::`): the campaign's request (model, sampling, `max_tokens`, API) with a
//! prompt of the matched prompt's length in filler words (not re-sized against the endpoint's
//! tokenizer), sent open loop at the declared rate for one interval.

use crate::campaign::{ApiKind, Arm, Campaign};
use crate::client::{StreamOpts, Target, Trace};
use crate::load::source::{PromptText, RequestSource};
use crate::load::{Arrival, Mode, Plan};
use crate::metrics::stats::Distribution;
use crate::metrics::RequestMetrics;
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

/// Sends the bake's traffic for `length` at `rate` requests per second.
pub async fn interval(
    target: &Target,
    src: Arc<RequestSource>,
    rate: f64,
    length: Duration,
) -> Measured {
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<Trace>();
    let plan = Plan {
        mode: Mode::Open {
            rate,
            arrival: Arrival::Constant,
        },
        requests: None,
        duration: Some(length),
        warmup: 0,
        warmup_duration: None,
        max_in_flight: Some(64),
    };
    let opts = StreamOpts {
        timeout: length.max(Duration::from_secs(30)),
        ..StreamOpts::default()
    };
    let run = crate::load::run(target.clone(), plan, src, opts, tx).await;
    let mut m = Measured::default();
    if let Err(e) = run {
        m.errors.push(format!("the load could not run: {e}"));
    }
    let mut samples: BTreeMap<&str, Vec<f64>> = BTreeMap::new();
    while let Ok(t) = rx.try_recv() {
        if t.warmup {
            continue;
        }
        if !t.ok() {
            m.failed += 1;
            if m.errors.len() < 3 {
                if let Some(e) = &t.error {
                    m.errors.push(e.to_string());
                }
            }
            continue;
        }
        m.ok += 1;
        let r = RequestMetrics::from_trace(&t);
        for (k, v) in [
            ("ttft_ms", r.ttft_ms),
            ("ttfo_ms", r.ttfo_ms),
            ("e2e_ms", r.e2e_ms),
            ("itl_ms", r.itl_ms),
            ("decode_tok_s", r.decode_tok_s),
        ] {
            if let Some(v) = v {
                samples.entry(k).or_default().push(v);
            }
        }
    }
    for (k, v) in samples {
        if let Some(d) = Distribution::from_samples(&v, 0) {
            m.metrics.insert(k.to_string(), d);
        }
    }
    m
}
