//! What an arm's timed steps send, sized once per launch by its first timing step: the matched
//! prompt, and the campaign's workload source beside it (`RequestContract::source`): a dataset
//! counted against the arm's endpoint, synthetic lengths sized as matched prompts, the user turn
//! of a conversation, or a shared prefix and the request's own part. The same code as
//! `bakeoff bench` (`workload::items`, `workload::prefix`).

use crate::bench::conv::load_script;
use crate::bench::{ConvSpec, DatasetSpec, Labels, Quiet, SourceSpec};
use crate::campaign::in_campaign_words;
use crate::campaign::{DatasetFormat, DatasetSource, OutputTokens, PrefixOrder, WorkSource};
use crate::client::Target;
use crate::run::timed::{PrefixWork, StepWork};
use crate::workload::conversation::{GroupOrder, Scripts};
use crate::workload::dataset::{self, Format};
use crate::workload::items::{self, DatasetOpts, SizeCtx};
use crate::workload::prompt::{self, MatchedPrompt};
use crate::workload::Endpoint;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

/// Everything the sizing needs (owned: it runs in its own task).
pub struct SizeInput {
    pub target: Target,
    pub model: String,
    pub endpoint: Endpoint,
    pub tokenizer: Option<PathBuf>,
    pub api_key: Option<String>,
    pub nonce: bool,
    pub timeout: Duration,
    /// `workload.matched_prompt_tokens`.
    pub matched_tokens: u64,
    /// `workload.max_tokens`: the output length of items that give none.
    pub max_tokens: u64,
    pub source: Option<WorkSource>,
    /// The campaign's nonce base (a shared prefix's group numbers are drawn apart from it).
    pub nonce_base: u64,
}

/// The matched prompt and the step work. The matched prompt is sized for every source: it is
/// the campaign's contract (`matched_prompt_tokens`), and its endpoint and nonce setting are the
/// steps'; with a shared prefix it is the request's own part (the matched tokens minus the
/// prefix).
pub async fn size(s: SizeInput) -> Result<(MatchedPrompt, StepWork), String> {
    let ctx = SizeCtx {
        target: &s.target,
        model: &s.model,
        endpoint: s.endpoint,
        tokenizer: s.tokenizer.as_deref(),
        api_key: s.api_key.as_deref(),
        nonce: s.nonce,
        timeout: s.timeout,
        extra_body: None,
    };
    let ctx = &ctx;
    let matched = |tokens| async move {
        prompt::build(&ctx.spec(tokens))
            .await
            .map_err(|e| format!("matched prompt: {e}"))
    };
    match &s.source {
        None => Ok((matched(s.matched_tokens).await?, StepWork::Matched)),
        Some(WorkSource::Dataset(d)) => {
            let ds = dataset::load(&d.path, format_of(d.format))
                .map_err(|e| format!("workload.dataset: {}", in_campaign_words(&e)))?;
            // Checked at load; a file changed since (a resume refuses that) is not sent.
            if !d.sha256.is_empty() && ds.sha256 != d.sha256 {
                return Err(format!(
                    "workload.dataset: {} changed since the campaign was loaded (sha256 {} then, {} now); every arm must send the same items",
                    d.path.display(),
                    d.sha256,
                    ds.sha256
                ));
            }
            let opts = DatasetOpts {
                sample: d.sample,
                seed: d.seed,
                min_prompt_tokens: d.min_prompt_tokens,
                max_prompt_tokens: d.max_prompt_tokens,
                max_output_tokens: d.max_output_tokens,
                default_max_tokens: s.max_tokens,
            };
            let mut set = items::size_dataset(&ds, &opts, ctx)
                .await
                .map_err(|e| format!("workload.dataset: {}", in_campaign_words(&e)))?;
            if d.output_tokens == OutputTokens::MaxTokens {
                for it in &mut set.items {
                    it.max_tokens = None;
                }
                set.record["output_tokens"] = "max_tokens".into();
            }
            Ok((
                matched(s.matched_tokens).await?,
                StepWork::Items {
                    set: Arc::new(set),
                    first_item: 0,
                },
            ))
        }
        Some(WorkSource::Synthetic {
            input_tokens,
            output_tokens,
            seed,
            pool,
        }) => {
            let set = items::size_synthetic(
                *input_tokens,
                *output_tokens,
                s.matched_tokens,
                *pool,
                *seed,
                ctx,
                |_, _, _| {},
            )
            .await
            .map_err(|e| format!("workload.synthetic: {}", in_campaign_words(&e)))?;
            Ok((
                matched(s.matched_tokens).await?,
                StepWork::Items {
                    set: Arc::new(set),
                    first_item: 0,
                },
            ))
        }
        Some(WorkSource::Conversation {
            turns,
            think_time_ms,
            dataset,
            shared_prefix,
        }) => {
            let script = match dataset {
                Some(d) => Some(replayed(d, *turns, &s)?),
                None => None,
            };
            let (rest, prefix) = match shared_prefix {
                None => (matched(s.matched_tokens).await?, None),
                Some(sp) => {
                    let rest = matched(s.matched_tokens - sp.tokens).await?;
                    let prefix = shared(sp.tokens, &ctx.spec(0), &rest, s.nonce_base).await?;
                    let work = PrefixWork {
                        prefix: Arc::new(prefix),
                        groups: sp.groups,
                        order: group_order(sp.order, sp.seed),
                    };
                    (rest, Some(work))
                }
            };
            Ok((
                rest,
                StepWork::Conversation {
                    turns: *turns,
                    think_time_ms: *think_time_ms,
                    script,
                    prefix,
                },
            ))
        }
        Some(WorkSource::SharedPrefix {
            tokens,
            groups,
            order,
            seed,
        }) => {
            let rest = matched(s.matched_tokens - tokens).await?;
            let prefix = shared(*tokens, &ctx.spec(0), &rest, s.nonce_base).await?;
            Ok((
                rest,
                StepWork::Prefix {
                    prefix: Arc::new(prefix),
                    groups: *groups,
                    order: group_order(*order, *seed),
                },
            ))
        }
    }
}

/// Sizes the shared prefix of `tokens` before `rest` (`workload::prefix`, as bench does).
async fn shared(
    tokens: u64,
    spec: &prompt::PromptSpec<'_>,
    rest: &MatchedPrompt,
    nonce_base: u64,
) -> Result<crate::workload::prefix::PrefixPrompt, String> {
    crate::workload::prefix::size(tokens, spec, rest, nonce_base)
        .await
        .map_err(|e| format!("workload.shared_prefix.tokens {tokens}: {e}"))
}

fn group_order(o: PrefixOrder, seed: u64) -> GroupOrder {
    match o {
        PrefixOrder::RoundRobin => GroupOrder::RoundRobin,
        PrefixOrder::Random => GroupOrder::Random { seed },
    }
}

/// The campaign's fields, as errors of bench's session name them.
const LABELS: Labels = Labels {
    dataset: "workload.dataset",
    synthetic: "workload.synthetic",
    multi_turn: "workload.conversation.turns",
    shared_prefix: "workload.shared_prefix.tokens",
    seed: "workload.sampling.seed",
};

/// The dataset's conversations to replay (`bench::conv::load_script`, what `bench --multi-turn
/// --dataset` replays), from the file checked at load.
fn replayed(d: &DatasetSource, turns: u32, s: &SizeInput) -> Result<Arc<Scripts>, String> {
    let conv = ConvSpec {
        multi_turn: Some(turns),
        ..Default::default()
    };
    let src = SourceSpec {
        dataset: Some(DatasetSpec {
            path: d.path.clone(),
            format: format_of(d.format),
            sample: d.sample,
            min_prompt_tokens: None,
            max_prompt_tokens: None,
            max_output_tokens: None,
        }),
        ..Default::default()
    };
    // Checked at load; a file changed since (a resume refuses that) is not replayed.
    let sha = dataset::load(&d.path, format_of(d.format))
        .map_err(|e| format!("workload.dataset: {}", in_campaign_words(&e)))?
        .sha256;
    if !d.sha256.is_empty() && sha != d.sha256 {
        return Err(format!(
            "workload.dataset: {} changed since the campaign was loaded (sha256 {} then, {sha} now); every arm must replay the same conversations",
            d.path.display(),
            d.sha256,
        ));
    }
    let script = load_script(&conv, &src, &LABELS, d.seed, s.max_tokens, s.nonce, &Quiet)
        .map_err(|e| in_campaign_words(&format!("{e:#}")))?;
    script.ok_or_else(|| "workload.dataset: no conversation to replay".to_string())
}

fn format_of(f: DatasetFormat) -> Option<Format> {
    match f {
        DatasetFormat::Auto => None,
        DatasetFormat::Jsonl => Some(Format::Jsonl),
        DatasetFormat::Sharegpt => Some(Format::Sharegpt),
    }
}

/// The identity of each work item, in order (dataset: item index and id; synthetic: the drawn
/// lengths): what must be equal on every arm.
pub fn item_list(work: &StepWork) -> Option<Vec<serde_json::Value>> {
    let StepWork::Items { set, .. } = work else {
        return None;
    };
    Some(
        set.items
            .iter()
            .map(|i| {
                let mut v = i.source.clone();
                if let Some(o) = v.as_object_mut() {
                    o.remove("dataset_sha256");
                    o.insert("max_tokens".into(), serde_json::json!(i.max_tokens));
                }
                v
            })
            .collect(),
    )
}
