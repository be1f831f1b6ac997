//! `bakeoff bench --multi-turn` and `--shared-prefix-tokens`: the flags, the prefix sizing, the
//! request source of each level, and the per-turn / per-group summary rows (the cache effect).

use crate::client::{Target, Trace};
use crate::load::conversation::{ConversationSource, PrefixSource};
use crate::load::places::{PlaceSummary, Shape};
use crate::load::session::Sink;
use crate::load::source::PromptText;
use crate::load::Source;
use crate::metrics::summary::Collector;
use crate::workload::conversation::{GroupOrder, SharedPrefix};
use crate::workload::prompt::{MatchedPrompt, PromptSpec};
use crate::workload::Endpoint;
use anyhow::{bail, Result};
use clap::Args;
use serde_json::{json, Map, Value};
use std::sync::Arc;
use std::time::Duration;

#[derive(Args, Debug, Clone, Default)]
pub struct ConvArgs {
    /// Multi-turn conversations of this many turns: each concurrent stream runs conversations,
    /// turn k resending turns 1..k-1 with the model's actual replies plus a new user turn of
    /// --prompt-tokens (closed loop only). The summary shows prompt and cached tokens per turn.
    #[arg(long, value_name = "TURNS", conflicts_with = "rate")]
    pub multi_turn: Option<u32>,
    /// With --multi-turn: pause between a reply and the conversation's next turn, milliseconds.
    #[arg(
        long,
        value_name = "MS",
        default_value_t = 0.0,
        requires = "multi_turn"
    )]
    pub think_time: f64,
    /// Every request starts with one of --prefix-groups shared prompts of exactly this many tokens,
    /// counted in --prompt-tokens (the request's own part, with its nonce line, fills the rest).
    #[arg(long, value_name = "P", conflicts_with_all = ["multi_turn", "prompt"])]
    pub shared_prefix_tokens: Option<u64>,
    /// With --shared-prefix-tokens: the number of distinct shared prompts; request i uses group
    /// i mod G.
    #[arg(
        long,
        value_name = "G",
        default_value_t = 1,
        requires = "shared_prefix_tokens"
    )]
    pub prefix_groups: u32,
    /// With --shared-prefix-tokens: draw each request's group at random (seeded by --seed)
    /// instead of i mod G.
    #[arg(long, requires = "shared_prefix_tokens")]
    pub prefix_random: bool,
}

impl ConvArgs {
    /// Any structured workload asked for.
    pub fn active(&self) -> bool {
        self.multi_turn.is_some() || self.shared_prefix_tokens.is_some()
    }
}

/// Checks the flags (clap checked which go together) against `--prompt-tokens`.
pub fn validate(c: &ConvArgs, prompt_tokens: u64) -> Result<()> {
    if let Some(t) = c.multi_turn {
        if t == 0 {
            bail!("--multi-turn must be at least 1 turn per conversation (e.g. --multi-turn 4)");
        }
    }
    if !(c.think_time >= 0.0 && c.think_time.is_finite()) {
        bail!(
            "--think-time must be zero or a positive number of milliseconds, got {}",
            c.think_time
        );
    }
    if let Some(p) = c.shared_prefix_tokens {
        if c.prefix_groups == 0 {
            bail!("--prefix-groups must be at least 1");
        }
        if p == 0 || p >= prompt_tokens {
            bail!(
                "--shared-prefix-tokens {p} must be at least 1 and less than --prompt-tokens {prompt_tokens} (the prefix is part of each prompt; the rest holds the request's own nonce line)"
            );
        }
    }
    Ok(())
}

/// Prompt tokens of the matched prompt bench sizes: the whole prompt, or with a shared prefix
/// the request's own part.
pub fn sized_tokens(c: &ConvArgs, prompt_tokens: u64) -> u64 {
    prompt_tokens - c.shared_prefix_tokens.unwrap_or(0)
}

/// The shared prefix of a run: its prompt sized once, its groups' numbers per level.
pub struct PrefixPlan {
    prefix: crate::workload::prefix::PrefixPrompt,
    groups: u32,
    order: GroupOrder,
    total_tokens: u64,
}

/// Sizes the shared prefix when one is asked for (`workload::prefix`). `rest` is the request's
/// own part, sized first. Also fills the prompt record. `seed`: `--seed` (the random group
/// order's).
pub async fn size_prefix(
    c: &ConvArgs,
    prompt_tokens: u64,
    seed: Option<u64>,
    spec: &PromptSpec<'_>,
    rest: Option<&MatchedPrompt>,
    nonce_base: u64,
    record: &mut Value,
) -> Result<Option<PrefixPlan>> {
    let Some(p) = c.shared_prefix_tokens else {
        return Ok(None);
    };
    let Some(rest) = rest else {
        bail!("--shared-prefix-tokens needs a sized prompt (drop --prompt)");
    };
    eprintln!(
        "sizing the {p}-token shared prefix of {} group(s) ...",
        c.prefix_groups
    );
    let prefix = crate::workload::prefix::size(p, spec, rest, nonce_base)
        .await
        .map_err(|e| anyhow::anyhow!("--shared-prefix-tokens {p}: {e}"))?;
    let order = if c.prefix_random {
        GroupOrder::Random {
            seed: seed.unwrap_or(0),
        }
    } else {
        GroupOrder::RoundRobin
    };
    record["target_tokens"] = json!(prompt_tokens);
    record["shared_prefix"] = json!({
        "tokens": p,
        "groups": c.prefix_groups,
        "order": if c.prefix_random { "random" } else { "round-robin" },
        "what": "each prompt is its group's shared prefix (a group nonce line and filler, ending with a newline: exactly `tokens` of content), then the request's own part (the matched prompt below: its nonce line and filler)",
        "prompt": serde_json::to_value(&prefix.prompt)?,
        "rest_target_tokens": rest.target_tokens,
    });
    Ok(Some(PrefixPlan {
        groups: c.prefix_groups,
        order,
        total_tokens: prompt_tokens,
        prefix,
    }))
}

/// What every level's source is made of.
pub struct SourceParts<'a> {
    pub target: &'a Target,
    pub endpoint: Endpoint,
    pub base: &'a Map<String, Value>,
    pub prompt: PromptText,
    pub api_key: Option<String>,
    pub offset: u64,
    pub nonce_base: u64,
    /// The sweep level (each level's groups get fresh prefixes).
    pub level: usize,
}

/// The source of a structured workload, or `None` for bench's independent requests.
pub fn source(
    c: &ConvArgs,
    prefix: Option<&PrefixPlan>,
    p: SourceParts<'_>,
) -> Option<Arc<dyn Source>> {
    if let Some(turns) = c.multi_turn {
        return Some(Arc::new(ConversationSource::new(
            p.target.clone(),
            p.endpoint,
            p.base.clone(),
            Arc::new(p.prompt),
            p.api_key,
            p.offset,
            p.nonce_base,
            turns,
            Duration::from_secs_f64(c.think_time / 1e3),
        )));
    }
    let plan = prefix?;
    let prefixes = plan.prefix.texts(plan.groups, p.level as u64);
    Some(Arc::new(PrefixSource {
        target: p.target.clone(),
        endpoint: p.endpoint,
        base: p.base.clone(),
        prefix: SharedPrefix {
            prefixes,
            order: plan.order,
        },
        rest: Arc::new(p.prompt),
        prompt_tokens: Some(plan.total_tokens),
        api_key: p.api_key,
        offset: p.offset,
        nonce_base: p.nonce_base,
    }))
}

/// The `load` record's fields of a structured workload.
pub fn load_fields(c: &ConvArgs, load: &mut Value) {
    if let Some(t) = c.multi_turn {
        load["multi_turn"] = json!(t);
        load["think_time_ms"] = json!(c.think_time);
    }
    if let Some(p) = c.shared_prefix_tokens {
        load["shared_prefix_tokens"] = json!(p);
        load["prefix_groups"] = json!(c.prefix_groups);
        load["prefix_order"] = json!(if c.prefix_random {
            "random"
        } else {
            "round-robin"
        });
    }
}

/// The `--requests-jsonl` fields of a request with a place (`load::places`, shared with
/// campaigns).
pub use crate::load::places::place_fields;

/// Wraps bench's sink and gathers the per-turn and per-group rows (measured requests only;
/// `load::places`).
pub struct ConvSink<S> {
    pub inner: S,
    places: PlaceSummary,
}

impl<S> ConvSink<S> {
    pub fn new(inner: S) -> ConvSink<S> {
        ConvSink {
            inner,
            places: PlaceSummary::default(),
        }
    }

    /// The report's `workload` record (`None` when no structured workload was asked for).
    pub fn summary(&self, c: &ConvArgs) -> Option<Value> {
        if !c.active() {
            return None;
        }
        Some(self.places.summary(Shape {
            multi_turn: c.multi_turn.map(|t| (t, c.think_time)),
            shared_prefix: c.shared_prefix_tokens.map(|p| (p, c.prefix_groups)),
        }))
    }
}

impl<S: Sink> Sink for ConvSink<S> {
    fn trace(&mut self, t: Trace, stats: &Collector) -> Result<()> {
        self.places.fold(&t);
        self.inner.trace(t, stats)
    }

    fn finish(&mut self) -> Result<()> {
        self.inner.finish()
    }
}

/// The printed rows: per turn (multi-turn) or per group (shared prefix), so the cache effect shows.
/// `workload`: the report's `workload` record.
pub fn print_rows(workload: Option<&Value>) {
    let Some(w) = workload else { return };
    let f = |v: &Value| match v.as_f64() {
        Some(x) => format!("{x:.1}"),
        None => "-".into(),
    };
    let share = match w["cached_tokens_share"].as_f64() {
        Some(s) => format!("{:.1} % of prompt tokens were cached", s * 100.0),
        None => "no request reported cached tokens".into(),
    };
    let head = |first: &str| {
        println!(
            "  {first:<8}{:>10}{:>6}{:>16}{:>16}{:>14}",
            "requests", "ok", "prompt tok p50", "cached tok p50", "ttft p50 ms"
        )
    };
    let row = |k: &Value, v: &Value| {
        println!(
            "  {:<8}{:>10}{:>6}{:>16}{:>16}{:>14}",
            k.to_string(),
            v["requests"].to_string(),
            v["ok"].to_string(),
            f(&v["prompt_tokens_p50"]),
            f(&v["cached_tokens_p50"]),
            f(&v["ttft_ms_p50"])
        )
    };
    if let Some(m) = w.get("multi_turn") {
        println!(
            "multi-turn: {} conversations of up to {} turns, think time {} ms; {share}",
            m["conversations"], m["turns"], m["think_time_ms"]
        );
        head("turn");
        for v in m["per_turn"].as_array().into_iter().flatten() {
            row(&v["turn"], v);
        }
    }
    if let Some(m) = w.get("shared_prefix") {
        println!(
            "shared prefix: {} group(s) of {} tokens; {share}",
            m["groups"], m["tokens"]
        );
        head("group");
        for v in m["per_group"].as_array().into_iter().flatten() {
            row(&v["group"], v);
        }
    }
}
