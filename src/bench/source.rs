//! The sizing of a dataset or synthetic-length source (`workload::items`): each prompt with its
//! expected tokens and output length, counted against the endpoint before the load. Shared by
//! `bakeoff bench` and `bakeoff selftest`.

use super::observe::Observer;
use super::spec::{Labels, SourceSpec};
use crate::workload::dataset;
use crate::workload::items::{self, DatasetOpts, SizeCtx, WorkSet};
use anyhow::Result;
use std::sync::Arc;

/// Draws of synthetic lengths when the run has no request count (a duration only): requests
/// cycle through this many.
pub const DURATION_POOL: usize = 256;
/// Most synthetic draws sized for one run.
pub const MAX_POOL: usize = 4096;

/// What the sizing needs to know about the run.
pub struct RunShape {
    pub prompt_tokens: u64,
    pub max_tokens: u64,
    pub requests: Option<u64>,
    pub warmup: u64,
    pub seed: u64,
}

/// Sizes the dataset or synthetic source, when one is given (None: the matched or literal
/// prompt).
pub async fn prepare(
    src: &SourceSpec,
    labels: &Labels,
    run: &RunShape,
    ctx: &SizeCtx<'_>,
    obs: &dyn Observer,
) -> Result<Option<Arc<WorkSet>>> {
    if let Some(d) = &src.dataset {
        let ds = dataset::load(&d.path, d.format)
            .map_err(|e| anyhow::anyhow!("{} {e}", labels.dataset))?;
        obs.note(&format!(
            "counting the prompt tokens of {} ({} {} items) against {} ...",
            d.path.display(),
            ds.items.len(),
            ds.format.as_str(),
            ctx.target
        ));
        let opts = DatasetOpts {
            sample: d.sample,
            seed: run.seed,
            min_prompt_tokens: d.min_prompt_tokens,
            max_prompt_tokens: d.max_prompt_tokens,
            max_output_tokens: d.max_output_tokens,
            default_max_tokens: run.max_tokens,
        };
        let w = items::size_dataset(&ds, &opts, ctx)
            .await
            .map_err(|e| anyhow::anyhow!("{} {e}", labels.dataset))?;
        for n in w.record["notes"].as_array().into_iter().flatten() {
            obs.note(&format!("note: {}", n.as_str().unwrap_or_default()));
        }
        return Ok(Some(Arc::new(w)));
    }
    if src.input_tokens.is_none() && src.output_tokens.is_none() {
        return Ok(None);
    }
    let pool = match run.requests {
        Some(r) => ((r + run.warmup) as usize).min(MAX_POOL),
        None => DURATION_POOL,
    };
    let w = items::size_synthetic(
        src.input_tokens,
        src.output_tokens,
        run.prompt_tokens,
        pool,
        run.seed,
        ctx,
        |i, n, len| {
            obs.note(&format!(
                "sizing synthetic prompt {}/{n} ({len} tokens) against {} ...",
                i + 1,
                ctx.target
            ));
        },
    )
    .await
    .map_err(|e| anyhow::anyhow!("{}: {e}", labels.synthetic))?;
    Ok(Some(Arc::new(w)))
}

/// A warning when output lengths come from the source but the engine may stop early.
pub fn eos_note(work: &WorkSet, ignore_eos: bool) -> Option<String> {
    let per_item = work.items.iter().any(|i| i.max_tokens.is_some());
    (per_item && !ignore_eos).then(|| {
        "each request's max_tokens is its item's output length, but without --ignore-eos the engine may stop earlier; add --ignore-eos for exact output lengths".to_string()
    })
}
