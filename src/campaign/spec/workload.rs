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
        self.slo
            .iter()
            .filter(|e| e.concurrency.is_none_or(|c| c == level))
            .filter_map(|e| crate::metrics::slo::SloLimit::parse_list(&e.limit).ok())
            .flatten()
            .collect()
    }
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
