//! `bakeoff bench`'s workload sources beside the matched prompt: a dataset file (`--dataset`)
//! and synthetic lengths (`--input-tokens-dist`, `--output-tokens-dist`). The flags, their
//! checks, the sizing call and what each `--requests-jsonl` line adds (the source item, the
//! expected and the reported prompt tokens).

use crate::workload::dataset::{self, Format};
use crate::workload::items::{self, DatasetOpts, SizeCtx, WorkSet};
use crate::workload::synthetic::Dist;
use anyhow::{bail, Result};
use clap::{Args, ValueEnum};

use std::path::PathBuf;
use std::sync::Arc;

#[derive(Debug, Clone, Copy, ValueEnum, PartialEq)]
pub enum DatasetFormatArg {
    Jsonl,
    Sharegpt,
}

/// Draws of `--input-tokens-dist` / `--output-tokens-dist` when the run has no request count
/// (`--duration` only): requests cycle through this many.
pub const DURATION_POOL: usize = 256;
/// Most synthetic draws sized for one run.
pub const MAX_POOL: usize = 4096;

#[derive(Args, Debug, Clone, Default)]
#[command(next_help_heading = "Workload")]
pub struct SourceArgs {
    /// Send prompts from this dataset file: JSONL (one object a line with `prompt` or `messages`,
    /// optional `output_tokens`/`max_tokens` and `id`) or ShareGPT JSON (first human turn; the
    /// first gpt reply's length is the output length). Each request's expected prompt tokens are
    /// counted first (--tokenizer or the server's /tokenize).
    #[arg(long, value_name = "PATH", conflicts_with_all = ["prompt", "prompt_tokens", "input_tokens_dist"])]
    pub dataset: Option<PathBuf>,
    /// The dataset's format (default: detected from the content: `[` ShareGPT, `{` JSONL).
    #[arg(long, value_enum, requires = "dataset")]
    pub dataset_format: Option<DatasetFormatArg>,
    /// Use this many items, drawn in an order fixed by --seed (default: every item, in file order).
    #[arg(long, value_name = "N", requires = "dataset")]
    pub dataset_sample: Option<usize>,
    /// Leave out items with fewer prompt tokens (as the endpoint counts them, template included).
    #[arg(long, value_name = "TOKENS", requires = "dataset")]
    pub dataset_min_prompt_tokens: Option<u64>,
    /// Leave out items with more prompt tokens.
    #[arg(long, value_name = "TOKENS", requires = "dataset")]
    pub dataset_max_prompt_tokens: Option<u64>,
    /// Leave out items whose output length is above this.
    #[arg(long, value_name = "TOKENS", requires = "dataset")]
    pub dataset_max_output_tokens: Option<u64>,
    /// Synthetic prompt lengths: fixed:N, uniform:LO:HI, normal:MEAN:STD or lognormal:MEAN:STD
    /// (tokens, seeded by --seed); each prompt is sized to exactly its drawn length.
    #[arg(long, value_name = "DIST", conflicts_with_all = ["prompt", "prompt_tokens"])]
    pub input_tokens_dist: Option<String>,
    /// Synthetic output lengths (sent as each request's max_tokens; add --ignore-eos to make them
    /// exact), same forms as --input-tokens-dist.
    #[arg(long, value_name = "DIST", conflicts_with = "prompt")]
    pub output_tokens_dist: Option<String>,
}

impl SourceArgs {
    /// Whether a dataset or synthetic source replaces the single prompt.
    pub fn active(&self) -> bool {
        self.dataset.is_some()
            || self.input_tokens_dist.is_some()
            || self.output_tokens_dist.is_some()
    }
}

/// What the bench loop needs to know about the run to size a source.
pub struct RunShape {
    pub prompt_tokens: u64,
    pub max_tokens: u64,
    pub requests: Option<u64>,
    pub warmup: u64,
    pub seed: u64,
}

/// Sizes the dataset or synthetic source, when one is given (None: the matched or literal
/// prompt, as before). Prints what it does to stderr.
pub async fn prepare(
    a: &SourceArgs,
    run: &RunShape,
    ctx: &SizeCtx<'_>,
) -> Result<Option<Arc<WorkSet>>> {
    if let Some(path) = &a.dataset {
        for (flag, v) in [
            ("--dataset-sample", a.dataset_sample.map(|x| x as u64)),
            ("--dataset-min-prompt-tokens", a.dataset_min_prompt_tokens),
            ("--dataset-max-prompt-tokens", a.dataset_max_prompt_tokens),
            ("--dataset-max-output-tokens", a.dataset_max_output_tokens),
        ] {
            if v == Some(0) {
                bail!("{flag} must be at least 1");
            }
        }
        if let (Some(lo), Some(hi)) = (a.dataset_min_prompt_tokens, a.dataset_max_prompt_tokens) {
            if lo > hi {
                bail!("--dataset-min-prompt-tokens {lo} is above --dataset-max-prompt-tokens {hi}; no item could pass");
            }
        }
        if a.output_tokens_dist.is_some() {
            bail!("--output-tokens-dist cannot be combined with --dataset (the dataset gives each item's output length; items without one use --max-tokens)");
        }
        let format = a.dataset_format.map(|f| match f {
            DatasetFormatArg::Jsonl => Format::Jsonl,
            DatasetFormatArg::Sharegpt => Format::Sharegpt,
        });
        let ds = dataset::load(path, format).map_err(|e| anyhow::anyhow!("--dataset {e}"))?;
        eprintln!(
            "counting the prompt tokens of {} ({} {} items) against {} ...",
            path.display(),
            ds.items.len(),
            ds.format.as_str(),
            ctx.target
        );
        let opts = DatasetOpts {
            sample: a.dataset_sample,
            seed: run.seed,
            min_prompt_tokens: a.dataset_min_prompt_tokens,
            max_prompt_tokens: a.dataset_max_prompt_tokens,
            max_output_tokens: a.dataset_max_output_tokens,
            default_max_tokens: run.max_tokens,
        };
        let w = items::size_dataset(&ds, &opts, ctx)
            .await
            .map_err(|e| anyhow::anyhow!("--dataset {e}"))?;
        for n in w.record["notes"].as_array().into_iter().flatten() {
            eprintln!("note: {}", n.as_str().unwrap_or_default());
        }
        return Ok(Some(Arc::new(w)));
    }
    let parse = |flag: &str, s: &Option<String>| {
        s.as_deref()
            .map(|s| Dist::parse(flag, s))
            .transpose()
            .map_err(|e| anyhow::anyhow!(e))
    };
    let input = parse("--input-tokens-dist", &a.input_tokens_dist)?;
    let output = parse("--output-tokens-dist", &a.output_tokens_dist)?;
    if input.is_none() && output.is_none() {
        return Ok(None);
    }
    let pool = match run.requests {
        Some(r) => ((r + run.warmup) as usize).min(MAX_POOL),
        None => DURATION_POOL,
    };
    let w = items::size_synthetic(
        input,
        output,
        run.prompt_tokens,
        pool,
        run.seed,
        ctx,
        |i, n, len| {
            eprintln!(
                "sizing synthetic prompt {}/{n} ({len} tokens) against {} ...",
                i + 1,
                ctx.target
            );
        },
    )
    .await
    .map_err(|e| anyhow::anyhow!("synthetic lengths: {e}"))?;
    Ok(Some(Arc::new(w)))
}

/// What a `--requests-jsonl` line adds (`workload::items::annotate`, shared with campaigns).
pub use crate::workload::items::annotate;

/// A warning when output lengths come from the source but the engine may stop early.
pub fn eos_note(work: &WorkSet, ignore_eos: bool) -> Option<String> {
    let per_item = work.items.iter().any(|i| i.max_tokens.is_some());
    (per_item && !ignore_eos).then(|| {
        "each request's max_tokens is its item's output length, but without --ignore-eos the engine may stop earlier; add --ignore-eos for exact output lengths".to_string()
    })
}
