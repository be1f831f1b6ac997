//! Multi-turn conversations and shared-prefix groups: the conversations replayed from a
//! dataset, the sizing of a shared prefix, and the request source of each level (the
//! structured sources of `load::conversation`).

use super::observe::Observer;
use super::spec::{BenchSpec, ConvSpec, Labels, SourceSpec};
use crate::client::Target;
use crate::load::conversation::{ConversationSource, PrefixSource};
use crate::load::source::PromptText;
use crate::load::Source;
use crate::workload::conversation::{scripts, GroupOrder, ScriptOpts, Scripts, SharedPrefix};
use crate::workload::prompt::{MatchedPrompt, PromptSpec};
use crate::workload::Endpoint;
use anyhow::{bail, Result};
use serde_json::{json, Map, Value};
use std::sync::Arc;
use std::time::Duration;

/// The dataset conversations of a multi-turn run with a dataset (None otherwise). `nonce`: a
/// nonce line before each conversation's first turn.
pub fn load_script(
    c: &ConvSpec,
    src: &SourceSpec,
    labels: &Labels,
    seed: u64,
    max_tokens: u64,
    nonce: bool,
    obs: &dyn Observer,
) -> Result<Option<Arc<Scripts>>> {
    let (Some(turns), Some(d)) = (c.multi_turn, &src.dataset) else {
        return Ok(None);
    };
    let ds = crate::workload::dataset::load(&d.path, d.format)
        .map_err(|e| anyhow::anyhow!("{} {e}", labels.dataset))?;
    let s = scripts(
        &ds,
        &ScriptOpts {
            turns,
            sample: d.sample,
            seed,
            default_max_tokens: max_tokens,
            nonce,
        },
    )
    .map_err(|e| anyhow::anyhow!("{} with {} {turns}: {e}", labels.dataset, labels.multi_turn))?;
    obs.note(&format!(
        "replaying {} conversations of {turns} user turns from {}",
        s.conversations.len(),
        d.path.display()
    ));
    for n in s.record["notes"].as_array().into_iter().flatten() {
        obs.note(&format!("note: {}", n.as_str().unwrap_or_default()));
    }
    Ok(Some(Arc::new(s)))
}

/// Prompt tokens of the matched prompt to size: the whole prompt, or with a shared prefix the
/// request's own part.
pub fn sized_tokens(c: &ConvSpec, prompt_tokens: u64) -> u64 {
    prompt_tokens - c.shared_prefix_tokens.unwrap_or(0)
}

/// The shared prefix of a run: its prompt sized once, its groups' numbers per level.
pub struct PrefixPlan {
    pub prefix: Arc<crate::workload::prefix::PrefixPrompt>,
    pub groups: u32,
    pub order: GroupOrder,
    pub total_tokens: u64,
}

/// Sizes the shared prefix when one is asked for (`workload::prefix`). `rest` is the request's
/// own part, sized first. Also fills the prompt record.
pub async fn size_prefix(
    bench: &BenchSpec,
    spec: &PromptSpec<'_>,
    rest: &MatchedPrompt,
    nonce_base: u64,
    record: &mut Value,
    obs: &dyn Observer,
) -> Result<Option<PrefixPlan>> {
    let (c, labels, prompt_tokens) = (&bench.conv, &bench.labels, bench.prompt_tokens);
    let Some(p) = c.shared_prefix_tokens else {
        return Ok(None);
    };
    obs.note(&format!(
        "sizing the {p}-token shared prefix of {} group(s) ...",
        c.prefix_groups
    ));
    let prefix = crate::workload::prefix::size(p, spec, rest, nonce_base)
        .await
        .map_err(|e| anyhow::anyhow!("{} {p}: {e}", labels.shared_prefix))?;
    let order = if c.prefix_random {
        GroupOrder::Random {
            seed: bench.seed.unwrap_or(0),
        }
    } else {
        GroupOrder::RoundRobin
    };
    record["target_tokens"] = json!(prompt_tokens);
    record["shared_prefix"] = json!({
        "tokens": p,
        "groups": c.prefix_groups,
        "order": order_name(order),
        "what": "each prompt is its group's shared prefix (a group nonce line and filler, ending with a newline: exactly `tokens` of content), then the request's own part (the matched prompt below: its nonce line and filler)",
        "prompt": serde_json::to_value(&prefix.prompt)?,
        "rest_target_tokens": rest.target_tokens,
    });
    Ok(Some(PrefixPlan {
        groups: c.prefix_groups,
        order,
        total_tokens: prompt_tokens,
        prefix: Arc::new(prefix),
    }))
}

/// How a prefix group is chosen, as records name it.
pub fn order_name(o: GroupOrder) -> &'static str {
    match o {
        GroupOrder::RoundRobin => "round-robin",
        GroupOrder::Random { .. } => "random",
    }
}

/// What every level's source is made of.
pub struct SourceParts<'a> {
    pub target: &'a Target,
    pub endpoint: Endpoint,
    pub base: &'a Map<String, Value>,
    pub prompt: PromptText,
    pub api_key: Option<String>,
    /// The first request's index (and nonce number offset).
    pub offset: u64,
    pub nonce_base: u64,
    /// Numbers the groups' prefixes: each level (or campaign step) gets fresh ones.
    pub prefix_number: u64,
    /// Replayed dataset conversations, and whether their first turns carry a nonce line.
    pub script: Option<(Arc<Scripts>, bool)>,
}

/// The level's request source: conversations (with their prefixes), prefix groups, or
/// independent requests.
pub fn source(
    multi_turn: Option<(u32, f64)>,
    prefix: Option<&PrefixPlan>,
    p: SourceParts<'_>,
) -> Arc<dyn Source> {
    let prefixes = |plan: &PrefixPlan| SharedPrefix {
        prefixes: plan.prefix.texts(plan.groups, p.prefix_number),
        order: plan.order,
    };
    if let Some((turns, think_time_ms)) = multi_turn {
        let conv = ConversationSource::new(
            p.target.clone(),
            p.endpoint,
            p.base.clone(),
            Arc::new(p.prompt),
            p.api_key,
            p.offset,
            p.nonce_base,
            turns,
            Duration::from_secs_f64(think_time_ms / 1e3),
        );
        let conv = match p.script {
            Some((s, nonce)) => conv.with_script(s, nonce),
            None => conv,
        };
        return Arc::new(match prefix {
            Some(plan) => conv.with_prefix(prefixes(plan), Some(plan.total_tokens)),
            None => conv,
        });
    }
    match prefix {
        Some(plan) => Arc::new(PrefixSource {
            target: p.target.clone(),
            endpoint: p.endpoint,
            base: p.base.clone(),
            prefix: prefixes(plan),
            rest: Arc::new(p.prompt),
            prompt_tokens: Some(plan.total_tokens),
            api_key: p.api_key,
            offset: p.offset,
            nonce_base: p.nonce_base,
        }),
        None => Arc::new(crate::load::source::RequestSource {
            target: p.target.clone(),
            endpoint: p.endpoint,
            base: p.base.clone(),
            prompt: p.prompt,
            api_key: p.api_key,
            offset: p.offset,
            nonce_base: p.nonce_base,
        }),
    }
}

/// Refuses a shared prefix without a sized prompt (a literal one cannot be split).
pub fn check_literal(c: &ConvSpec, literal: bool, labels: &Labels) -> Result<()> {
    if literal && c.shared_prefix_tokens.is_some() {
        bail!(
            "{} needs a sized prompt (drop --prompt)",
            labels.shared_prefix
        );
    }
    Ok(())
}
