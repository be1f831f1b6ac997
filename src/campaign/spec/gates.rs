//! `[gates]`: which pass/fail checks run, and their parameters.

use crate::evidence::{GateName, ToolVariant};
use serde::{Deserialize, Serialize};
use std::path::PathBuf;

/// A quick gate run right after an arm is ready (and again after restoration).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum PreflightGate {
    Smoke,
    Json,
    Streaming,
}

impl PreflightGate {
    pub fn as_str(self) -> &'static str {
        match self {
            PreflightGate::Smoke => "smoke",
            PreflightGate::Json => "json",
            PreflightGate::Streaming => "streaming",
        }
    }

    pub fn gate(self) -> GateName {
        match self {
            PreflightGate::Smoke => GateName::Smoke,
            PreflightGate::Json => GateName::Json,
            PreflightGate::Streaming => GateName::Streaming,
        }
    }
}

/// `[gates]`. A table that is absent is a gate that does not run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Gates {
    /// Run after each arm is ready and after restoration.
    #[serde(default = "default_preflight")]
    pub preflight: Vec<PreflightGate>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tools: Option<ToolsGate>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retrieval: Option<RetrievalGate>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub quality: Option<QualityGate>,
}

fn default_preflight() -> Vec<PreflightGate> {
    vec![
        PreflightGate::Smoke,
        PreflightGate::Json,
        PreflightGate::Streaming,
    ]
}

impl Default for Gates {
    fn default() -> Self {
        Gates {
            preflight: default_preflight(),
            tools: None,
            retrieval: None,
            quality: None,
        }
    }
}

/// `[gates.tools]`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ToolsGate {
    /// Suite file; absent: the gate's built-in suite. Absolute after load.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub suite: Option<PathBuf>,
    /// Requests per variant.
    #[serde(default = "default_tools_batch")]
    pub batch: u32,
    #[serde(default = "default_variants")]
    pub variants: Vec<ToolVariant>,
}

fn default_tools_batch() -> u32 {
    20
}
fn default_variants() -> Vec<ToolVariant> {
    vec![
        ToolVariant::Plain,
        ToolVariant::Streaming,
        ToolVariant::RoundTrip,
    ]
}

/// `[gates.retrieval]`: needles at depths of a prompt of each arm's long-context target.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RetrievalGate {
    /// Needles planted in the prompt, one question each (1–12).
    #[serde(default = "default_needles")]
    pub needles: u32,
    /// Depth of each needle as a fraction of the prompt (0 = start, 1 = end), one per needle.
    /// Default: evenly spread, `(i + 1) / (needles + 1)` (filled by load).
    #[serde(default)]
    pub depths: Vec<f64>,
    /// `max_tokens` of a retrieval answer (counted against the served context).
    #[serde(default = "default_retrieval_max")]
    pub max_tokens: u32,
}

fn default_needles() -> u32 {
    2
}
fn default_retrieval_max() -> u32 {
    32
}

/// `[gates.quality]`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct QualityGate {
    /// Suite file; absent: the gate's built-in suite. Absolute after load.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub suite: Option<PathBuf>,
    /// Attempts per suite item.
    #[serde(default = "default_quality_reps")]
    pub repetitions: u32,
    /// Tokens added to every item's visible-answer budget for reasoning models (default: the
    /// suite's own setting).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reasoning_headroom: Option<u64>,
}

fn default_quality_reps() -> u32 {
    3
}
