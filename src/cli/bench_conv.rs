//! `bakeoff bench --multi-turn` and `--shared-prefix-tokens`: the flags, their checks, the
//! typed spec they make (`bench::ConvSpec`; the conversations, prefix sizing and sources are
//! `bench::conv`'s) and the printed per-turn / per-group rows (the cache effect).

use crate::bench::ConvSpec;
use anyhow::{bail, Result};
use clap::Args;
use serde_json::Value;

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

/// The typed spec of the flags.
pub fn spec(c: &ConvArgs) -> ConvSpec {
    ConvSpec {
        multi_turn: c.multi_turn,
        think_time_ms: c.think_time,
        shared_prefix_tokens: c.shared_prefix_tokens,
        prefix_groups: c.prefix_groups,
        prefix_random: c.prefix_random,
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
