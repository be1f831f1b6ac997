//! What an arm's timed steps send, sized once per launch by its first timing step: the matched
//! prompt, and the campaign's workload source beside it (`RequestContract::source`): a dataset
//! counted against the arm's endpoint, synthetic lengths sized as matched prompts, the user turn
//! of a conversation, or a shared prefix and the request's own part. The same code as
//! `bakeoff bench` (`workload::items`, `workload::prefix`).

use crate::campaign::in_campaign_words;
use crate::campaign::{DatasetFormat, OutputTokens, PrefixOrder, WorkSource};
use crate::client::Target;
use crate::run::timed::StepWork;
use crate::workload::conversation::GroupOrder;
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
            let format = match d.format {
                DatasetFormat::Auto => None,
                DatasetFormat::Jsonl => Some(Format::Jsonl),
                DatasetFormat::Sharegpt => Some(Format::Sharegpt),
            };
            let ds = dataset::load(&d.path, format)
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
        }) => Ok((
            matched(s.matched_tokens).await?,
            StepWork::Conversation {
                turns: *turns,
                think_time_ms: *think_time_ms,
            },
        )),
        Some(WorkSource::SharedPrefix {
            tokens,
            groups,
            order,
            seed,
        }) => {
            let rest = matched(s.matched_tokens - tokens).await?;
            let prefix = crate::workload::prefix::size(*tokens, &ctx.spec(0), &rest, s.nonce_base)
                .await
                .map_err(|e| format!("workload.shared_prefix.tokens {tokens}: {e}"))?;
            Ok((
                rest,
                StepWork::Prefix {
                    prefix: Arc::new(prefix),
                    groups: *groups,
                    order: match order {
                        PrefixOrder::RoundRobin => GroupOrder::RoundRobin,
                        PrefixOrder::Random => GroupOrder::Random { seed: *seed },
                    },
                },
            ))
        }
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
