//! `bakeoff bench --multi-turn` and `--shared-prefix-tokens`: the flags, the prefix sizing, the
//! request source of each level, and the per-turn / per-group summary rows (the cache effect).

use crate::client::{Target, Trace};
use crate::load::conversation::{ConversationSource, PrefixSource};
use crate::load::places::{PlaceSummary, Shape};
use crate::load::session::Sink;
use crate::load::source::PromptText;
use crate::load::Source;
use crate::metrics::summary::Collector;
use crate::workload::conversation::{scripts, GroupOrder, ScriptOpts, Scripts, SharedPrefix};
use crate::workload::prompt::{MatchedPrompt, PromptSpec};
use crate::workload::Endpoint;
use anyhow::{bail, Result};
use clap::Args;
use serde_json::{json, Map, Value};
use std::sync::Arc;
use std::time::Duration;

#[derive(Args, Debug, Clone, Default)]
#[command(next_help_heading = "Workload")]
pub struct ConvArgs {
    /// Multi-turn conversations of this many turns: each concurrent stream runs conversations,
    /// turn k resending turns 1..k-1 with the model's actual replies plus a new user turn of
    /// --prompt-tokens. With --rate, conversations start on the open-loop schedule (R
    /// conversations/s) and each runs its turns after the think time; --requests counts turns
    /// (whole conversations). With --shared-prefix-tokens each conversation opens with its
    /// group's prefix. The summary shows prompt and cached tokens per turn.
    #[arg(long, value_name = "TURNS")]
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
    /// With --multi-turn: each conversation's first turn is its group's prefix and a new user
    /// turn (--prompt-tokens in all); later turns add user turns of --prompt-tokens minus P.
    #[arg(long, value_name = "P", conflicts_with = "prompt")]
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

/// Checks the flags (clap checked which go together) against `--prompt-tokens`; `rate`: the
/// run is open-loop, `requests` / `warmup`: its counts.
pub fn validate(
    c: &ConvArgs,
    prompt_tokens: u64,
    rate: bool,
    requests: Option<u64>,
    warmup: u64,
) -> Result<()> {
    if let Some(t) = c.multi_turn {
        if t == 0 {
            bail!("--multi-turn must be at least 1 turn per conversation (e.g. --multi-turn 4)");
        }
        let t = t as u64;
        if rate {
            // Each arrival is a whole conversation: a partial one would end early for a count.
            for (flag, n) in [("--requests", requests.unwrap_or(0)), ("--warmup", warmup)] {
                if n % t != 0 {
                    bail!(
                        "{flag} {n} is not a whole number of {t}-turn conversations: with --rate each scheduled arrival is a conversation of --multi-turn {t} requests; use {} or {}",
                        n / t * t,
                        n.div_ceil(t) * t
                    );
                }
            }
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

/// Which structured workloads combine with a dataset or synthetic source: `--multi-turn` with
/// `--dataset` replays the dataset's conversations; the rest are refused, naming why.
pub fn validate_sources(c: &ConvArgs, src: &super::bench_source::SourceArgs) -> Result<()> {
    if !c.active() || !src.active() {
        return Ok(());
    }
    if c.shared_prefix_tokens.is_some() {
        bail!("--shared-prefix-tokens sizes each request's own part as a matched prompt, so it can't take prompts from --dataset or --input-tokens-dist / --output-tokens-dist; to share a system prompt across dataset requests, put it first in each item's `messages` (with --allow-prefix-cache the engine can reuse it)");
    }
    if src.input_tokens_dist.is_some() || src.output_tokens_dist.is_some() {
        bail!("--multi-turn can't take --input-tokens-dist / --output-tokens-dist: a later turn's prompt is the history with the model's replies, not a drawn length; size the new user turns with --prompt-tokens (and --max-tokens), or replay real conversations with --dataset");
    }
    for (flag, set) in [
        (
            "--dataset-min-prompt-tokens",
            src.dataset_min_prompt_tokens.is_some(),
        ),
        (
            "--dataset-max-prompt-tokens",
            src.dataset_max_prompt_tokens.is_some(),
        ),
        (
            "--dataset-max-output-tokens",
            src.dataset_max_output_tokens.is_some(),
        ),
    ] {
        if set {
            bail!("{flag} can't be used with --multi-turn --dataset: a replayed conversation's prompts hold the model's replies, so they are not counted before sending (the server's usage is recorded per turn); drop the filter");
        }
    }
    Ok(())
}

/// The dataset conversations of `--multi-turn --dataset` (None otherwise). `seed`: `--seed`;
/// `nonce`: a nonce line before each conversation's first turn.
pub fn load_script(
    c: &ConvArgs,
    src: &super::bench_source::SourceArgs,
    seed: u64,
    max_tokens: u64,
    nonce: bool,
) -> Result<Option<Arc<Scripts>>> {
    let (Some(turns), Some(path)) = (c.multi_turn, &src.dataset) else {
        return Ok(None);
    };
    if src.dataset_sample == Some(0) {
        bail!("--dataset-sample must be at least 1");
    }
    let format = src.dataset_format.map(|f| match f {
        super::bench_source::DatasetFormatArg::Jsonl => crate::workload::dataset::Format::Jsonl,
        super::bench_source::DatasetFormatArg::Sharegpt => {
            crate::workload::dataset::Format::Sharegpt
        }
    });
    let ds = crate::workload::dataset::load(path, format)
        .map_err(|e| anyhow::anyhow!("--dataset {e}"))?;
    let s = scripts(
        &ds,
        &ScriptOpts {
            turns,
            sample: src.dataset_sample,
            seed,
            default_max_tokens: max_tokens,
            nonce,
        },
    )
    .map_err(|e| anyhow::anyhow!("--dataset with --multi-turn {turns}: {e}"))?;
    eprintln!(
        "replaying {} conversations of {turns} user turns from {}",
        s.conversations.len(),
        path.display()
    );
    for n in s.record["notes"].as_array().into_iter().flatten() {
        eprintln!("note: {}", n.as_str().unwrap_or_default());
    }
    Ok(Some(Arc::new(s)))
}

/// What a `--requests-jsonl` line of a replayed dataset conversation adds: its source item and
/// the turn's output length.
pub fn annotate_script(s: &Scripts, t: &Trace, line: &mut Value) {
    let Some(p) = t.place else { return };
    if let (Some(c), Some(k)) = (p.conversation, p.turn) {
        let script = s.of(c);
        line["source"] = script.source.clone();
        line["sent_max_tokens"] = json!(script.max_tokens.get(k as usize - 1).copied().flatten());
    }
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
    /// `--multi-turn --dataset`: the conversations replayed (`load_script`), and whether their
    /// first turns carry a nonce line.
    pub script: Option<(Arc<Scripts>, bool)>,
}

/// The source of a structured workload, or `None` for bench's independent requests.
pub fn source(
    c: &ConvArgs,
    prefix: Option<&PrefixPlan>,
    p: SourceParts<'_>,
) -> Option<Arc<dyn Source>> {
    let level = p.level as u64;
    let prefixes = |plan: &PrefixPlan| SharedPrefix {
        prefixes: plan.prefix.texts(plan.groups, level),
        order: plan.order,
    };
    if let Some(turns) = c.multi_turn {
        let conv = ConversationSource::new(
            p.target.clone(),
            p.endpoint,
            p.base.clone(),
            Arc::new(p.prompt),
            p.api_key,
            p.offset,
            p.nonce_base,
            turns,
            Duration::from_secs_f64(c.think_time / 1e3),
        );
        let conv = match p.script {
            Some((s, nonce)) => conv.with_script(s, nonce),
            None => conv,
        };
        return Some(Arc::new(match prefix {
            Some(plan) => conv.with_prefix(prefixes(plan), Some(plan.total_tokens)),
            None => conv,
        }));
    }
    let plan = prefix?;
    Some(Arc::new(PrefixSource {
        target: p.target.clone(),
        endpoint: p.endpoint,
        base: p.base.clone(),
        prefix: prefixes(plan),
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
