//! `[workload]`: the matched workload every arm gets, its sampling, and the ranking order.

use crate::evidence::RankingMetric;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// Which OpenAI API the timed requests use.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ApiKind {
    #[default]
    Chat,
    Completions,
}

/// `[workload]`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Workload {
    /// Ranking order, most important first.
    pub ranking_priority: Vec<RankingMetric>,
    /// Exact prompt tokens of the matched prompt (checked against `usage.prompt_tokens`).
    pub matched_prompt_tokens: u32,
    /// `max_tokens` of every timed request.
    pub max_tokens: u32,
    /// Warm requests at concurrency 1 after the cold one; also requests per stream at Cn.
    #[serde(default = "default_warm")]
    pub warm_repetitions: u32,
    /// Concurrency levels (1 is the warm run itself; each level above 1 is its own step).
    #[serde(default = "default_concurrency")]
    pub concurrency: Vec<u32>,
    /// Long-context profile name → target prompt tokens for retrieval.
    #[serde(default)]
    pub long_context_targets: BTreeMap<String, u64>,
    /// Shape label of the matched prompt in file names; default from the token count
    /// (`256`, `4k`, …; filled by load).
    #[serde(default)]
    pub prompt_label: String,
    #[serde(default)]
    pub api: ApiKind,
    /// Let the engine's prefix cache see identical prompts (default: a nonce defeats it).
    #[serde(default)]
    pub allow_prefix_cache: bool,
    #[serde(default)]
    pub sampling: Sampling,
    /// SLO gates (`[[workload.slo]]`): an arm that breaks one at a level it measured is
    /// ineligible (`slo-violated`); with any, each timed level records goodput.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub slo: Vec<SloEntry>,
    /// The level the `concurrency` and `goodput` priorities compare (one of `concurrency`);
    /// default: the highest level listed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub concurrency_priority_level: Option<u32>,
    /// `[workload.dataset]`: prompts from a dataset file instead of the matched prompt.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dataset: Option<DatasetSource>,
    /// `[workload.synthetic]`: prompt and output lengths drawn from distributions.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub synthetic: Option<SyntheticSource>,
    /// `[workload.conversation]`: multi-turn conversations resending their history.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub conversation: Option<ConversationSource>,
    /// `[workload.shared_prefix]`: every prompt starts with one of G shared prefixes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shared_prefix: Option<SharedPrefixSource>,
    /// `[workload.open_loop]`: open-loop timed steps, one per rate, after the concurrency levels.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub open_loop: Option<OpenLoop>,
    /// `[workload.capacity]`: a capacity step per arm, after its timing steps.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub capacity: Option<super::Capacity>,
    /// `[workload.trace]`: a trace-replay step per arm, after its capacity step.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trace: Option<super::Trace>,
}

/// `[workload.open_loop]`: warm timed steps whose requests start at a rate regardless of
/// completions (bench's `--rate`, `--arrival`, `--max-concurrency`, `--requests`, `--warmup`,
/// `--warmup-duration`); two rates or more are a rate sweep, one step per rate in the order given.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OpenLoop {
    /// Requests per second, one step each.
    pub rates: Vec<f64>,
    #[serde(default)]
    pub arrival: ArrivalProcess,
    /// At most this many requests in flight (a request due while the cap is full waits for a
    /// slot; its latencies run from the actual send, the wait is its schedule lag).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_concurrency: Option<u32>,
    /// Measured requests per rate.
    #[serde(default = "default_open_requests")]
    pub requests: u32,
    /// Warm-up requests sent first at the step's rate and left out of the statistics.
    #[serde(default)]
    pub warmup: u32,
    /// Warm-up by time: requests started in the first this-many seconds are left out (with
    /// `warmup` too, the warm-up lasts until both are done).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub warmup_secs: Option<f64>,
}

/// `[workload.open_loop] arrival`: evenly spaced starts, or a Poisson process seeded by
/// `workload.sampling.seed`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ArrivalProcess {
    #[default]
    Constant,
    Poisson,
}

impl ArrivalProcess {
    pub fn as_str(self) -> &'static str {
        match self {
            ArrivalProcess::Constant => "constant",
            ArrivalProcess::Poisson => "poisson",
        }
    }
}

fn default_open_requests() -> u32 {
    32
}

/// `[workload.dataset]`: the timed requests send a dataset's items (bench's `--dataset`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DatasetSource {
    /// The file, relative to the campaign file (made absolute at load).
    pub path: std::path::PathBuf,
    #[serde(default)]
    pub format: DatasetFormat,
    /// Use this many items, drawn in an order fixed by `seed` (default: every item, file order).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sample: Option<usize>,
    #[serde(default)]
    pub seed: u64,
    /// Leave out items with fewer prompt tokens (as each arm's endpoint counts them).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_prompt_tokens: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_prompt_tokens: Option<u64>,
    /// Leave out items whose output length is above this.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_output_tokens: Option<u64>,
    /// Where each request's `max_tokens` comes from.
    #[serde(default)]
    pub output_tokens: OutputTokens,
    /// SHA-256 of the file's bytes and its item count, read at load (never from the campaign).
    #[serde(skip_deserializing, default, skip_serializing_if = "String::is_empty")]
    pub sha256: String,
    #[serde(skip_deserializing, default)]
    pub items_in_file: usize,
}

/// `[workload.dataset] format`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum DatasetFormat {
    /// From the content: `[` ShareGPT, `{` JSONL.
    #[default]
    Auto,
    Jsonl,
    Sharegpt,
}

/// `[workload.dataset] output_tokens`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OutputTokens {
    /// Each item's output length (`output_tokens`/`max_tokens` of a JSONL line, the first reply
    /// of a ShareGPT conversation); items without one use `workload.max_tokens`.
    #[default]
    Dataset,
    /// Every request sends `workload.max_tokens`.
    MaxTokens,
}

/// `[workload.synthetic]`: lengths drawn (seeded) from distributions, in bench's
/// `--input-tokens-dist` grammar (`fixed:N`, `uniform:LO:HI`, `normal:MEAN:STD`,
/// `lognormal:MEAN:STD`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SyntheticSource {
    /// Prompt tokens of each request (default: `matched_prompt_tokens` for every request).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub input_tokens: Option<String>,
    /// `max_tokens` of each request (default: `workload.max_tokens`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_tokens: Option<String>,
    #[serde(default)]
    pub seed: u64,
}

/// `[workload.conversation]`: each stream runs conversations of `turns` turns; turn k resends
/// turns 1..k-1 with the model's actual replies plus a new user turn of
/// `matched_prompt_tokens`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ConversationSource {
    pub turns: u32,
    /// Pause between a reply and the conversation's next turn, milliseconds.
    #[serde(default)]
    pub think_time_ms: f64,
}

/// `[workload.shared_prefix]`: every prompt (of `matched_prompt_tokens`) starts with one of
/// `groups` shared prefixes of exactly `tokens` tokens.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SharedPrefixSource {
    pub tokens: u64,
    #[serde(default = "one")]
    pub groups: u32,
    #[serde(default)]
    pub order: PrefixOrder,
    /// Seed of the `random` order.
    #[serde(default)]
    pub seed: u64,
}

/// `[workload.shared_prefix] order`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum PrefixOrder {
    /// Request i uses group i mod G.
    #[default]
    RoundRobin,
    /// A seeded pseudo-random group per request.
    Random,
}

fn one() -> u32 {
    1
}

/// `[[workload.slo]]`: `limit = "ttft_p95=500ms"` (or a comma list, `metrics::slo` form), at
/// `concurrency = 4`, or at every measured level when `concurrency` is left out.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SloEntry {
    pub limit: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub concurrency: Option<u32>,
}

impl Workload {
    /// The kind of the workload source (`matched` when none is declared).
    pub fn source_kind(&self) -> &'static str {
        if self.dataset.is_some() {
            "dataset"
        } else if self.synthetic.is_some() {
            "synthetic"
        } else if self.conversation.is_some() {
            "conversation"
        } else if self.shared_prefix.is_some() {
            "shared-prefix"
        } else {
            "matched"
        }
    }

    /// The level the `concurrency` and `goodput` priorities compare: the declared one, else the
    /// highest level listed.
    pub fn priority_level(&self) -> u32 {
        self.concurrency_priority_level
            .or_else(|| self.concurrency.iter().copied().max())
            .unwrap_or(1)
    }

    /// The SLO limits that apply at `level` (entries for it and entries for every level). The
    /// entries were validated at load; one that does not parse is left out.
    pub fn slo_at(&self, level: u32) -> Vec<crate::metrics::slo::SloLimit> {
        self.slo_where(|e| e.concurrency.is_none_or(|c| c == level))
    }

    /// The SLO limits of the capacity search: `[workload.capacity] slo`, else the
    /// `[[workload.slo]]` entries for every level. Validated at load; one that does not parse is
    /// left out.
    pub fn slo_capacity(&self) -> Vec<crate::metrics::slo::SloLimit> {
        match &self.capacity {
            Some(c) if !c.slo.is_empty() => c
                .slo
                .iter()
                .filter_map(|e| crate::metrics::slo::SloLimit::parse_list(e).ok())
                .flatten()
                .collect(),
            _ => self.slo_open_loop(),
        }
    }

    /// The SLO limits of an open-loop step: the entries for every level.
    pub fn slo_open_loop(&self) -> Vec<crate::metrics::slo::SloLimit> {
        self.slo_where(|e| e.concurrency.is_none())
    }

    fn slo_where(&self, keep: impl Fn(&SloEntry) -> bool) -> Vec<crate::metrics::slo::SloLimit> {
        self.slo
            .iter()
            .filter(|e| keep(e))
            .filter_map(|e| crate::metrics::slo::SloLimit::parse_list(&e.limit).ok())
            .flatten()
            .collect()
    }
}

/// A message of the workload code (written for `bakeoff bench`'s flags) in the campaign's words:
/// each flag becomes the `[workload]` field that sets the same thing.
pub fn in_campaign_words(msg: &str) -> String {
    [
        (
            "--dataset-min-prompt-tokens",
            "workload.dataset.min_prompt_tokens",
        ),
        (
            "--dataset-max-prompt-tokens",
            "workload.dataset.max_prompt_tokens",
        ),
        (
            "--dataset-max-output-tokens",
            "workload.dataset.max_output_tokens",
        ),
        ("--dataset-sample", "workload.dataset.sample"),
        (
            "--dataset-format jsonl|sharegpt",
            "format = \"jsonl\" or \"sharegpt\" in [workload.dataset]",
        ),
        ("--dataset-format", "workload.dataset.format"),
        ("--input-tokens-dist", "workload.synthetic.input_tokens"),
        ("--output-tokens-dist", "workload.synthetic.output_tokens"),
        ("--allow-prefix-cache", "workload.allow_prefix_cache = true"),
        ("--endpoint completions", "workload.api = \"completions\""),
        ("--endpoint chat", "workload.api = \"chat\""),
        (
            "--tokenizer FILE",
            "the arm's `tokenizer` (a tokenizer.json)",
        ),
        ("--tokenizer", "the arm's `tokenizer`"),
        ("--max-tokens", "workload.max_tokens"),
        ("--multi-turn", "workload.conversation.turns"),
    ]
    .iter()
    .fold(msg.to_string(), |m, (flag, field)| m.replace(flag, field))
}

fn default_warm() -> u32 {
    5
}
fn default_concurrency() -> Vec<u32> {
    vec![1]
}

/// `[workload.sampling]`: always sent explicitly and recorded.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Sampling {
    #[serde(default)]
    pub temperature: f64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub top_p: Option<f64>,
    #[serde(default)]
    pub seed: u64,
    /// Ask the engine to ignore end-of-sequence so every request decodes `max_tokens`.
    #[serde(default)]
    pub ignore_eos: bool,
}

impl Default for Sampling {
    fn default() -> Self {
        Sampling {
            temperature: 0.0,
            top_p: None,
            seed: 0,
            ignore_eos: false,
        }
    }
}
