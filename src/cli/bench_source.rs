//! `bakeoff bench`'s workload sources beside the matched prompt: a dataset file (`--dataset`)
//! and synthetic lengths (`--input-tokens-dist`, `--output-tokens-dist`): the flags, their
//! checks and the typed source they make (`bench::SourceSpec`, sized by `bench::source`).

use crate::bench::{DatasetSpec, SourceSpec};
use crate::workload::dataset::Format;
use crate::workload::synthetic::Dist;
use anyhow::{bail, Result};
use clap::{Args, ValueEnum};
use std::path::PathBuf;

#[derive(Debug, Clone, Copy, ValueEnum, PartialEq)]
pub enum DatasetFormatArg {
    Jsonl,
    Sharegpt,
}

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

impl DatasetFormatArg {
    pub fn format(self) -> Format {
        match self {
            DatasetFormatArg::Jsonl => Format::Jsonl,
            DatasetFormatArg::Sharegpt => Format::Sharegpt,
        }
    }
}

/// Checks the source flags together and makes the typed source.
pub fn spec(a: &SourceArgs) -> Result<SourceSpec> {
    if a.dataset.is_some() {
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
    }
    let dataset = a.dataset.as_ref().map(|path| DatasetSpec {
        path: path.clone(),
        format: a.dataset_format.map(DatasetFormatArg::format),
        sample: a.dataset_sample,
        min_prompt_tokens: a.dataset_min_prompt_tokens,
        max_prompt_tokens: a.dataset_max_prompt_tokens,
        max_output_tokens: a.dataset_max_output_tokens,
    });
    source_spec(dataset, &a.input_tokens_dist, &a.output_tokens_dist)
}

/// The typed source from a dataset and the two length-distribution flags (`bench` and
/// `selftest` name them alike); a distribution that does not parse is named by its flag.
pub fn source_spec(
    dataset: Option<DatasetSpec>,
    input_tokens_dist: &Option<String>,
    output_tokens_dist: &Option<String>,
) -> Result<SourceSpec> {
    let parse = |flag: &str, s: &Option<String>| {
        s.as_deref()
            .map(|s| Dist::parse(flag, s))
            .transpose()
            .map_err(|e| anyhow::anyhow!(e))
    };
    Ok(SourceSpec {
        dataset,
        input_tokens: parse("--input-tokens-dist", input_tokens_dist)?,
        output_tokens: parse("--output-tokens-dist", output_tokens_dist)?,
    })
}

/// `--trace`: replay a request trace at its arrival times (`bench::trace`).
#[derive(Args, Debug, Clone, Default)]
#[command(next_help_heading = "Trace replay")]
pub struct TraceArgs {
    /// Replay this JSONL trace: one request a line with `timestamp` (arrival, ms from the
    /// trace's start), `input_length` and `output_length` (tokens) and optional `hash_ids`
    /// (prompt blocks shared between requests, Mooncake style). Replaces the prompt and the
    /// load shape; --max-concurrency caps it, --warmup counts its first requests as warm-up.
    #[arg(long, value_name = "PATH", conflicts_with_all = ["prompt", "dataset", "input_tokens_dist", "output_tokens_dist", "rate", "concurrency", "requests", "duration"])]
    pub trace: Option<PathBuf>,
    /// Replay the trace this many times faster (2: half the gaps, twice the rate).
    #[arg(long, value_name = "FACTOR", default_value_t = 1.0, requires = "trace")]
    pub trace_speedup: f64,
    /// Replay from this point of the trace (seconds of trace time); the schedule starts there.
    #[arg(long, value_name = "SECONDS", requires = "trace")]
    pub trace_start: Option<f64>,
    /// Replay this long a window of the trace (seconds of trace time, before the speedup).
    #[arg(long, value_name = "SECONDS", requires = "trace")]
    pub trace_duration: Option<f64>,
    /// Replay this many requests of the window, drawn with --seed and kept in arrival order.
    #[arg(long, value_name = "N", requires = "trace")]
    pub trace_sample: Option<usize>,
    /// Tokens per hash_ids block (the Mooncake traces use 512).
    #[arg(long, value_name = "TOKENS", default_value_t = crate::workload::trace::DEFAULT_BLOCK_TOKENS, requires = "trace")]
    pub trace_block_tokens: u64,
}

/// The typed trace replay of the `--trace` flags (None without `--trace`).
pub fn trace_spec(a: &TraceArgs) -> Option<crate::bench::TraceSpec> {
    a.trace.as_ref().map(|path| crate::bench::TraceSpec {
        path: path.clone(),
        select: crate::workload::trace::Select {
            speedup: a.trace_speedup,
            start_s: a.trace_start,
            duration_s: a.trace_duration,
            sample: a.trace_sample,
            seed: 0,
        },
        block_tokens: a.trace_block_tokens,
        file_label: "--trace",
        label: "--trace-",
    })
}
