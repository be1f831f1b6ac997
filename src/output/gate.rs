//! `bakeoff gate --json`: `bakeoff.gate/1`.

use crate::gates::GateResult;
use serde::Serialize;
use std::path::Path;

#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct GateDoc {
    pub schema: &'static str,
    pub exit_code: u8,
    pub url: String,
    pub model: String,
    /// Every gate run passed.
    pub passed: bool,
    pub checks: Vec<CheckPart>,
}

#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct CheckPart {
    pub gate: String,
    /// `passed`, `failed`, `inconclusive`, … (the artifact's `status`).
    pub status: String,
    /// Observations that passed out of `total` (the gate's k/N).
    pub passed: u64,
    pub total: u64,
    pub reason: String,
    pub duration_s: f64,
    /// The artifact holding every observation (`gate-<name>.json`).
    pub evidence: String,
}

impl GateDoc {
    pub const SCHEMA: &'static str = "bakeoff.gate/1";

    /// `paths`: each result's artifact, in the same order.
    pub fn new(url: &str, results: &[GateResult], paths: &[impl AsRef<Path>]) -> Self {
        let passed = results.iter().all(|r| r.passed());
        GateDoc {
            schema: Self::SCHEMA,
            exit_code: if passed {
                super::exit::DONE
            } else {
                super::exit::FAILED
            },
            url: url.to_string(),
            model: results.first().map(|r| r.model.clone()).unwrap_or_default(),
            passed,
            checks: results
                .iter()
                .zip(paths)
                .map(|(r, p)| CheckPart {
                    gate: r.gate.as_str().to_string(),
                    status: r.status.as_str().to_string(),
                    passed: r.passed,
                    total: r.total,
                    reason: r.reason.clone(),
                    duration_s: r.duration_s,
                    evidence: p.as_ref().display().to_string(),
                })
                .collect(),
        }
    }
}
