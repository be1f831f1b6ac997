//! `[workload.dataset]`, `[workload.synthetic]`, `[workload.conversation]` and
//! `[workload.shared_prefix]`: the workload sources beside the matched prompt. The dataset file
//! is read now (its SHA-256 and item count go into the plan), the distributions parsed, so a
//! campaign that cannot run its workload is refused before anything starts.

use super::common::{limits, p, within};
use crate::campaign::diag::Reporter;
use crate::campaign::paths::resolve;
use crate::campaign::spec::{in_campaign_words, DatasetFormat, OutputTokens};
use crate::campaign::spec::{ApiKind, Campaign};
use crate::workload::dataset::{self, ItemInput, OutputLen};
use crate::workload::synthetic::Dist;
use std::path::Path;

/// Most turns per conversation.
const MAX_TURNS: u64 = 64;
/// Most shared-prefix groups.
const MAX_GROUPS: u64 = 4096;

pub(super) fn sources(c: &mut Campaign, dir: &Path, r: &mut Reporter) {
    exclusive(c, r);
    if c.workload.dataset.is_some() {
        dataset(c, dir, r);
    }
    synthetic(c, r);
    conversation(c, r);
    shared_prefix(c, r);
    // The label needs warm requests that all report the matched prompt's tokens.
    let items = c.workload.dataset.is_some() || c.workload.synthetic.is_some();
    if items
        && c.policy
            .required_evidence_labels
            .iter()
            .any(|l| l == "matched-performance")
    {
        r.error(
            &p("policy.required_evidence_labels"),
            format!(
                "`matched-performance` can never be claimed: the timed requests send [workload.{}] prompts, not the matched prompt, so promotion would always be withheld",
                if c.workload.dataset.is_some() { "dataset" } else { "synthetic" }
            ),
            "remove \"matched-performance\" from required_evidence_labels (every request's prompt tokens are checked against the server's usage in the timing files)",
        );
    }
    // Evidence file names say what was sent: `dataset-c1-warm`, not the matched prompt's size.
    let w = &mut c.workload;
    if w.prompt_label.is_empty() {
        if w.dataset.is_some() {
            w.prompt_label = "dataset".into();
        } else if w.synthetic.is_some() {
            w.prompt_label = "synthetic".into();
        }
    }
}

/// At most one source, except conversations, which replay a dataset's conversations
/// (`[workload.dataset]`) and may open each with a shared prefix (`[workload.shared_prefix]`),
/// as `bakeoff bench --multi-turn` does with `--dataset` or `--shared-prefix-tokens`. The pairs
/// `bakeoff bench` refuses are refused for the same reason (a dataset with synthetic lengths; a
/// shared prefix or drawn lengths with conversations or a dataset).
fn exclusive(c: &Campaign, r: &mut Reporter) {
    let w = &c.workload;
    let given: Vec<&str> = [
        ("dataset", w.dataset.is_some()),
        ("synthetic", w.synthetic.is_some()),
        ("conversation", w.conversation.is_some()),
        ("shared_prefix", w.shared_prefix.is_some()),
    ]
    .into_iter()
    .filter(|x| x.1)
    .map(|x| x.0)
    .collect();
    let why = |a: &str, b: &str| {
        match (a, b) {
            ("dataset", "conversation") | ("conversation", "shared_prefix") => None,
            ("dataset", "synthetic") => Some("a dataset gives each request's prompt and output length, synthetic lengths draw them; bakeoff bench refuses --dataset with --input-tokens-dist / --output-tokens-dist the same way"),
            ("synthetic", "conversation") => Some("a later turn's prompt is the history with the model's replies, not a drawn length; bakeoff bench refuses --multi-turn with --input-tokens-dist the same way"),
            _ => Some("a shared prefix sizes each request's own part as a matched prompt, so it can't take a dataset's prompts or drawn lengths; bakeoff bench refuses --shared-prefix-tokens with --dataset or --input-tokens-dist the same way"),
        }
    };
    for (i, later) in given.iter().enumerate() {
        let Some((first, why)) = given[..i]
            .iter()
            .find_map(|first| why(first, later).map(|w| (first, w)))
        else {
            continue;
        };
        r.error(
            &p(&format!("workload.{later}")),
            format!("[workload.{first}] and [workload.{later}] cannot be combined: {why}"),
            format!(
                "keep one workload source: remove [workload.{later}] or [workload.{first}] (run the other in a campaign of its own)"
            ),
        );
    }
    if w.conversation.is_some() {
        replayed_filters(c, r);
    }
}

/// A replayed conversation's prompts hold the model's replies, so they are not counted before
/// sending: the dataset's length filters cannot apply (`bakeoff bench` refuses them with
/// `--multi-turn --dataset` the same way).
fn replayed_filters(c: &Campaign, r: &mut Reporter) {
    let Some(d) = &c.workload.dataset else {
        return;
    };
    for (field, set) in [
        ("min_prompt_tokens", d.min_prompt_tokens.is_some()),
        ("max_prompt_tokens", d.max_prompt_tokens.is_some()),
        ("max_output_tokens", d.max_output_tokens.is_some()),
    ] {
        if set {
            r.error(
                &p("workload.dataset").key(field),
                format!("{field} can't filter a replayed conversation: its prompts hold the model's replies, so they are not counted before sending (the server's usage is recorded per turn)"),
                format!("remove {field} (or [workload.conversation] to send the dataset's items one request each)"),
            );
        }
    }
}

fn dataset(c: &mut Campaign, dir: &Path, r: &mut Reporter) {
    let api = c.workload.api;
    let max_tokens = u64::from(c.workload.max_tokens);
    let turns = c.workload.conversation.as_ref().map(|v| v.turns);
    let Some(d) = c.workload.dataset.as_mut() else {
        return;
    };
    let at = p("workload.dataset");
    d.path = resolve(dir, &d.path);
    for (field, v) in [
        ("sample", d.sample.map(|x| x as u64)),
        ("min_prompt_tokens", d.min_prompt_tokens),
        ("max_prompt_tokens", d.max_prompt_tokens),
        ("max_output_tokens", d.max_output_tokens),
    ] {
        if v == Some(0) {
            r.error(
                &at.key(field),
                format!("{field} = 0 leaves no item"),
                format!("give {field} = 1 or more, or leave it out"),
            );
        }
    }
    if let (Some(lo), Some(hi)) = (d.min_prompt_tokens, d.max_prompt_tokens) {
        if lo > hi {
            r.error(
                &at.key("min_prompt_tokens"),
                format!(
                    "min_prompt_tokens {lo} is above max_prompt_tokens {hi}; no item could pass"
                ),
                "lower min_prompt_tokens or raise max_prompt_tokens",
            );
        }
    }
    if d.max_output_tokens.is_some() && d.output_tokens == OutputTokens::MaxTokens {
        r.error(
            &at.key("max_output_tokens"),
            "max_output_tokens filters by each item's output length, but output_tokens = \"max_tokens\" sends workload.max_tokens for every item",
            "remove max_output_tokens, or set output_tokens = \"dataset\"",
        );
    }
    if !d.path.is_file() {
        r.error(
            &at.key("path"),
            format!("dataset file {} does not exist", d.path.display()),
            "give the path of a JSONL or ShareGPT JSON file, relative to the campaign file's directory (e.g. \"../datasets/sample.jsonl\")",
        );
        return;
    }
    let format = match d.format {
        DatasetFormat::Auto => None,
        DatasetFormat::Jsonl => Some(dataset::Format::Jsonl),
        DatasetFormat::Sharegpt => Some(dataset::Format::Sharegpt),
    };
    let ds = match dataset::load(&d.path, format) {
        Ok(ds) => ds,
        Err(e) => {
            r.error(
                &at.key("path"),
                format!("the dataset is refused: {}", in_campaign_words(&e)),
                "fix the file (JSONL: one object a line with `prompt` or `messages`; ShareGPT: a JSON list of conversations), or set format",
            );
            return;
        }
    };
    d.sha256 = ds.sha256.clone();
    d.items_in_file = ds.items.len();
    if let Some(turns) = turns {
        let opts = crate::workload::conversation::ScriptOpts {
            turns,
            sample: d.sample,
            seed: d.seed,
            default_max_tokens: max_tokens,
            nonce: false,
        };
        if let Err(e) = crate::workload::conversation::scripts(&ds, &opts) {
            r.error(
                &at.key("path"),
                format!("its conversations cannot be replayed with workload.conversation.turns = {turns}: {}", in_campaign_words(&e)),
                "give a dataset of `messages` conversations with that many user turns, or lower workload.conversation.turns",
            );
        }
    }
    if api == ApiKind::Completions {
        if let Some(bad) = ds
            .items
            .iter()
            .find(|i| matches!(i.input, ItemInput::Messages(_)))
        {
            r.error(
                &at.key("path"),
                format!(
                    "{}: a `messages` item cannot go to api = \"completions\" (it takes one prompt text)",
                    bad.at
                ),
                "set workload.api = \"chat\", or give the items a `prompt` instead",
            );
        }
    }
    if let Some(n) = d.sample {
        if n > ds.items.len() {
            r.warn(
                &at.key("sample"),
                format!(
                    "sample = {n} asks for more items than the file's {}; requests will cycle through the items there are",
                    ds.items.len()
                ),
                format!("give sample = {} or less", ds.items.len()),
            );
        }
    }
    // The output-length filter is exact for items that give their length (JSONL) or use
    // max_tokens; only ShareGPT replies need the endpoint's tokenizer to count.
    if let (Some(max), OutputTokens::Dataset) = (d.max_output_tokens, d.output_tokens) {
        let passes = ds.items.iter().any(|i| match &i.output {
            OutputLen::Unset => max_tokens <= max,
            OutputLen::Tokens(n) => *n <= max,
            OutputLen::Reply(_) => true,
        });
        if !passes {
            let least = ds
                .items
                .iter()
                .filter_map(|i| match &i.output {
                    OutputLen::Unset => Some(max_tokens),
                    OutputLen::Tokens(n) => Some(*n),
                    OutputLen::Reply(_) => None,
                })
                .min()
                .unwrap_or(0);
            r.error(
                &at.key("max_output_tokens"),
                format!(
                    "no item of {} passes max_output_tokens = {max} (the shortest output is {least} tokens); the sample would be empty",
                    d.path.display()
                ),
                format!("raise max_output_tokens to at least {least}, or leave it out"),
            );
        }
    }
}

fn synthetic(c: &mut Campaign, r: &mut Reporter) {
    let Some(s) = &c.workload.synthetic else {
        return;
    };
    let at = p("workload.synthetic");
    if s.input_tokens.is_none() && s.output_tokens.is_none() {
        r.error(
            &at,
            "[workload.synthetic] gives neither input_tokens nor output_tokens",
            "add input_tokens = \"uniform:128:512\" and/or output_tokens = \"lognormal:128:64\", or remove the table",
        );
    }
    for (field, v) in [
        ("input_tokens", &s.input_tokens),
        ("output_tokens", &s.output_tokens),
    ] {
        let Some(v) = v else { continue };
        let name = format!("workload.synthetic.{field}");
        match Dist::parse(&name, v) {
            Err(e) => r.error(
                &at.key(field),
                e,
                format!("write {field} = \"fixed:N\", \"uniform:LO:HI\", \"normal:MEAN:STD\" or \"lognormal:MEAN:STD\" (tokens), e.g. \"uniform:128:512\""),
            ),
            Ok(d) => {
                let hi = match d {
                    Dist::Fixed { tokens } => tokens as f64,
                    Dist::Uniform { hi, .. } => hi as f64,
                    Dist::Normal { mean, .. } | Dist::Lognormal { mean, .. } => mean,
                };
                let (lim, what) = if field == "input_tokens" {
                    (limits::TOKENS, "prompt tokens")
                } else {
                    (limits::MAX_TOKENS, "tokens per completion")
                };
                if hi > lim as f64 {
                    within(r, &at.key(field), hi as u64, 1, lim, what);
                }
            }
        }
    }
}

fn conversation(c: &mut Campaign, r: &mut Reporter) {
    let w = &c.workload;
    let Some(conv) = &w.conversation else {
        return;
    };
    let at = p("workload.conversation");
    within(
        r,
        &at.key("turns"),
        conv.turns.into(),
        1,
        MAX_TURNS,
        "turns per conversation",
    );
    if !(conv.think_time_ms.is_finite() && conv.think_time_ms >= 0.0) {
        r.error(
            &at.key("think_time_ms"),
            format!("think_time_ms {} is not a duration", conv.think_time_ms),
            "give zero or a positive number of milliseconds, e.g. 500",
        );
    }
    if conv.turns > 1 && w.warm_repetitions < conv.turns {
        r.warn(
            &at.key("turns"),
            format!(
                "the warm c1 run sends {} request(s), so it never reaches turn {} of a conversation",
                w.warm_repetitions, conv.turns
            ),
            format!(
                "set workload.warm_repetitions = {} or more to measure whole conversations",
                conv.turns
            ),
        );
    }
}

fn shared_prefix(c: &mut Campaign, r: &mut Reporter) {
    let w = &c.workload;
    let Some(sp) = &w.shared_prefix else {
        return;
    };
    let at = p("workload.shared_prefix");
    within(
        r,
        &at.key("groups"),
        sp.groups.into(),
        1,
        MAX_GROUPS,
        "shared prefixes",
    );
    let total = u64::from(w.matched_prompt_tokens);
    if sp.tokens == 0 || sp.tokens >= total {
        r.error(
            &at.key("tokens"),
            format!(
                "a shared prefix of {} tokens does not fit in matched_prompt_tokens = {total} (the prefix is part of each prompt; the rest holds the request's own nonce line)",
                sp.tokens
            ),
            format!(
                "give tokens from 1 to {}, or raise workload.matched_prompt_tokens",
                total.saturating_sub(1).max(1)
            ),
        );
    }
}
