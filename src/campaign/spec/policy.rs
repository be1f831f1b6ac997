//! `[policy]`: how the verdict is decided.

use super::gates::GateName;
use super::workload::RankingMetric;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// Whether a winner may be promoted without a person.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Promotion {
    #[default]
    Manual,
    Auto,
}

/// `[policy]`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Policy {
    #[serde(default)]
    pub promotion: Promotion,
    /// Gates an arm must pass to be eligible. Default: every gate the campaign runs (filled by
    /// load; `restoration` is always included).
    #[serde(default)]
    pub required_gates: Vec<GateName>,
    /// Evidence labels the verdict must be able to claim before promotion (e.g. `functional`,
    /// `matched-performance`, `bounded-quality`, `exact-restoration`).
    #[serde(default)]
    pub required_evidence_labels: Vec<String>,
    /// Ranking metric → relative difference (0.05 = 5%) under which two arms tie on it and the
    /// next metric decides.
    #[serde(default)]
    pub tie_tolerance: BTreeMap<RankingMetric, f64>,
    /// Engine log lines matching these turn into limitations in the verdict.
    #[serde(default)]
    pub quality_risks: Vec<QualityRisk>,
}

impl Default for Policy {
    fn default() -> Self {
        Policy {
            promotion: Promotion::Manual,
            required_gates: Vec::new(),
            required_evidence_labels: Vec::new(),
            tie_tolerance: BTreeMap::new(),
            quality_risks: Vec::new(),
        }
    }
}

/// `[[policy.quality_risks]]`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct QualityRisk {
    /// A plain substring (case-sensitive) of an engine log line.
    pub pattern: String,
    /// The limitation the verdict states when a line matches.
    pub limitation: String,
}
