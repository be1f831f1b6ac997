//! `bakeoff selftest --dataset` and `--input-tokens-dist` / `--output-tokens-dist`: the
//! selftest's client driven with a dataset or synthetic-length workload instead of its one short
//! literal prompt, so the client's added delay and CPU per chunk can be compared between the two
//! (docs/benchmarks.md). The work set is bench's (`workload::items`, sized by
//! `bench::source::prepare` against the selftest's own reference engine, whose `/tokenize`
//! counts exactly), and each level reports which item every request sent and what the engine
//! reported for it.

use super::bench_source::DatasetFormatArg;
use crate::bench::source::RunShape;
use crate::bench::{DatasetSpec, Labels, SourceSpec};
use crate::client::{Target, Trace};
use crate::metrics::stats::Distribution;
use crate::workload::items::{SizeCtx, WorkSet};
use crate::workload::Endpoint;
use anyhow::Result;
use clap::Args;
use serde_json::{json, Value};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

/// The prompt tokens of `--output-tokens-dist` alone (no `--input-tokens-dist`): each request is
/// a matched prompt of this many tokens.
pub const SYNTHETIC_PROMPT_TOKENS: u64 = 32;

#[derive(Args, Debug, Clone, Default)]
pub struct SelftestSourceArgs {
    /// Send the prompts of this dataset file instead of the short literal prompt: JSONL (`prompt`
    /// or `messages`, optional `output_tokens`) or ShareGPT JSON, as `bench --dataset`. Each item's
    /// output length is its request's max_tokens (items without one use --max-tokens); the engine
    /// generates exactly that many (the selftest sends ignore_eos).
    #[arg(long, value_name = "PATH", conflicts_with = "input_tokens_dist")]
    pub dataset: Option<PathBuf>,
    /// The dataset's format (default: detected: `[` ShareGPT, `{` JSONL).
    #[arg(long, value_enum, requires = "dataset")]
    pub dataset_format: Option<DatasetFormatArg>,
    /// Use this many dataset items, drawn in an order fixed by --seed (default: all, file order).
    #[arg(long, value_name = "N", requires = "dataset")]
    pub dataset_sample: Option<usize>,
    /// Synthetic prompt lengths (fixed:N, uniform:LO:HI, normal:MEAN:STD, lognormal:MEAN:STD
    /// tokens, seeded by --seed), each prompt sized exactly against the engine.
    #[arg(long, value_name = "DIST")]
    pub input_tokens_dist: Option<String>,
    /// Synthetic output lengths (each request's max_tokens), same forms; without
    /// --input-tokens-dist the prompts are 32-token matched prompts.
    #[arg(long, value_name = "DIST", conflicts_with = "dataset")]
    pub output_tokens_dist: Option<String>,
    /// Seed of the dataset sample and of the synthetic draws.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
}

impl SelftestSourceArgs {
    pub fn active(&self) -> bool {
        self.dataset.is_some()
            || self.input_tokens_dist.is_some()
            || self.output_tokens_dist.is_some()
    }

    /// The typed source (`bench::SourceSpec`); errors name the flag.
    fn spec(&self) -> Result<SourceSpec> {
        if self.dataset_sample == Some(0) {
            anyhow::bail!("--dataset-sample must be at least 1");
        }
        let dataset = self.dataset.as_ref().map(|path| DatasetSpec {
            path: path.clone(),
            format: self.dataset_format.map(DatasetFormatArg::format),
            sample: self.dataset_sample,
            min_prompt_tokens: None,
            max_prompt_tokens: None,
            max_output_tokens: None,
        });
        super::bench_source::source_spec(dataset, &self.input_tokens_dist, &self.output_tokens_dist)
    }
}

/// Sizes the work set against the selftest's engine (None: the literal prompt). `requests`: the
/// most requests one level sends (synthetic draws are made for that many).
pub async fn prepare(
    a: &SelftestSourceArgs,
    target: &Target,
    model: &str,
    max_tokens: u64,
    requests: u64,
) -> Result<Option<Arc<WorkSet>>> {
    if !a.active() {
        return Ok(None);
    }
    let run = RunShape {
        prompt_tokens: SYNTHETIC_PROMPT_TOKENS,
        max_tokens,
        requests: Some(requests),
        warmup: 0,
        seed: a.seed,
    };
    let ctx = SizeCtx {
        target,
        model,
        endpoint: Endpoint::Chat,
        tokenizer: None,
        api_key: None,
        nonce: true,
        timeout: Duration::from_secs(60),
        extra_body: None,
    };
    let console = super::bench::Console { progress: false };
    crate::bench::source::prepare(&a.spec()?, &Labels::FLAGS, &run, &ctx, &console).await
}

/// What a level records of its workload: per request, the item it sent (its source), the prompt
/// tokens expected and reported, the output length asked and generated; and the counts that
/// show the workload's shape.
pub fn level_record(work: &WorkSet, traces: &[Trace]) -> Value {
    let mut requests = Vec::with_capacity(traces.len());
    let (mut mismatches, mut outputs, mut prompts) = (0u64, Vec::new(), Vec::new());
    let mut items = std::collections::BTreeSet::new();
    for t in traces {
        let item = work.item(t.index);
        let usage = t.usage.as_ref();
        let reported = usage.and_then(|u| u.prompt_tokens);
        let generated = usage.and_then(|u| u.completion_tokens);
        if t.error.is_none() {
            if let (Some(e), Some(r)) = (item.expected_tokens, reported) {
                mismatches += u64::from(e != r);
            }
            outputs.extend(generated.map(|g| g as f64));
            prompts.extend(reported.map(|p| p as f64));
        }
        items.insert(t.index % work.items.len() as u64);
        requests.push(json!({
            "index": t.index,
            "source": item.source,
            "expected_prompt_tokens": item.expected_tokens,
            "reported_prompt_tokens": reported,
            "sent_max_tokens": item.max_tokens,
            "completion_tokens": generated,
            "ok": t.error.is_none(),
        }));
    }
    json!({
        "distinct_items": items.len(),
        "prompt_token_mismatches": mismatches,
        "prompt_tokens": Distribution::from_samples(&prompts, 1),
        "completion_tokens": Distribution::from_samples(&outputs, 1),
        "requests": requests,
    })
}

/// The printed line of a level's workload.
pub fn print_level(w: &Value) {
    let d = |k: &str, f: &str| {
        w[k][f]
            .as_f64()
            .map(|x| format!("{x:.0}"))
            .unwrap_or_else(|| "-".into())
    };
    println!(
        "{:>6} workload: {} items; prompt tokens p50 {} (min {}, max {}); output tokens p50 {} (min {}, max {}); {} prompt-token mismatches",
        "",
        w["distinct_items"],
        d("prompt_tokens", "p50"),
        d("prompt_tokens", "min"),
        d("prompt_tokens", "max"),
        d("completion_tokens", "p50"),
        d("completion_tokens", "min"),
        d("completion_tokens", "max"),
        w["prompt_token_mismatches"],
    );
}
