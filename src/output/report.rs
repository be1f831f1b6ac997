//! `bakeoff report --json`: `bakeoff.report/1`, the documents written and the verdict.

use super::run::VerdictPart;
use crate::decide::Verdict;
use serde::Serialize;

#[derive(Debug, Clone, Serialize)]
pub struct ReportDoc {
    pub schema: &'static str,
    pub exit_code: u8,
    pub bundle: String,
    /// `--force`: rendered although the bundle does not verify or disagrees with its step
    /// files (each problem is a limitation, in `forced_limitations`).
    pub forced: bool,
    /// The documents written (absolute paths).
    pub wrote: Vec<String>,
    pub winner: Option<String>,
    pub verdict: VerdictPart,
    pub limitations: Vec<String>,
    pub forced_limitations: Vec<String>,
    /// The manifest's root digest after the render.
    pub root_digest: Option<String>,
}

impl ReportDoc {
    pub const SCHEMA: &'static str = "bakeoff.report/1";

    pub fn new(
        bundle: String,
        v: &Verdict,
        forced: bool,
        wrote: Vec<String>,
        root_digest: Option<String>,
    ) -> Self {
        ReportDoc {
            schema: Self::SCHEMA,
            exit_code: super::exit::DONE,
            bundle,
            forced,
            wrote,
            winner: v.winner.clone(),
            verdict: VerdictPart::new(v),
            limitations: v.limitations.clone(),
            forced_limitations: v
                .limitations
                .iter()
                .filter(|l| forced && l.contains("--force"))
                .cloned()
                .collect(),
            root_digest,
        }
    }
}
