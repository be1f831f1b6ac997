//! The tools that read a sealed bundle: its verdict, its verification, the comparison of two.
//! Each gives the same document as the command line (`bakeoff.run/1`, `bakeoff.verify/1`,
//! `compare --json`), from the same library calls; none writes.

use crate::evidence::manifest;
use crate::output::run::RunDoc;
use crate::output::verify::VerifyDoc;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::path::Path;

#[derive(Debug, Clone, Deserialize, JsonSchema)]
pub struct BundleInput {
    /// The bundle folder, absolute or relative to the server's root.
    pub bundle: String,
}

#[derive(Debug, Clone, Deserialize, JsonSchema)]
pub struct VerifyInput {
    /// The bundle folder, absolute or relative to the server's root.
    pub bundle: String,
    /// The root digest kept from the run (`bakeoff verify --digest`): the manifest must be
    /// that one.
    pub digest: Option<String>,
}

#[derive(Debug, Clone, Deserialize, JsonSchema)]
pub struct CompareInput {
    /// The baseline bundle (A).
    pub a: String,
    /// The bundle compared against it (B).
    pub b: String,
    /// Compare although a bundle does not verify or the workloads differ (each difference is
    /// a warning).
    #[serde(default)]
    pub force: bool,
    /// Count a shared metric of B worse than A's by more than this percent (≥ 0) as a
    /// regression (`compare --fail-on-regression`).
    pub fail_on_regression: Option<f64>,
}

#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct CompareOutput {
    /// `--fail-on-regression` given and some metric passed it (the CLI exits 1 then).
    pub regressed: bool,
    /// `bakeoff compare --json`'s document.
    pub comparison: serde_json::Value,
}

/// `bakeoff.run/1` of the bundle as it stands: its result, the verdict decided from its
/// evidence, its root digest. Refused when the bundle does not verify.
pub fn verdict(dir: &Path) -> Result<RunDoc, String> {
    let b = crate::report::load_checked(dir, false).map_err(|e| format!("bundle: {e:#}"))?;
    let v = crate::report::verdict(&b);
    Ok(RunDoc::standing(
        dir.display().to_string(),
        &b.result,
        &v,
        b.manifest.root_sha256.clone(),
    ))
}

/// `bakeoff verify DIR --json`: every file re-hashed, the manifest's digest, the CSV's cells.
pub fn verify(dir: &Path, digest: Option<&str>) -> Result<VerifyDoc, String> {
    if let Some(d) = digest {
        if d.len() != 64 || !d.bytes().all(|c| c.is_ascii_hexdigit()) {
            return Err(format!(
                "digest: {d:?} is not a SHA-256 root digest (64 hex digits, as `bakeoff run` printed it)"
            ));
        }
    }
    let (m, mut problems) = manifest::verify(dir, digest).map_err(|e| format!("bundle: {e:#}"))?;
    problems.extend(crate::report::csv::check(dir));
    Ok(VerifyDoc::new(
        dir.display().to_string(),
        &m,
        &problems,
        digest,
    ))
}

/// `bakeoff compare A B --json`: refused (as the CLI refuses) when a bundle does not verify
/// or the workloads differ, unless `force`.
pub fn compare(a: &Path, b: &Path, force: bool, pct: Option<f64>) -> Result<CompareOutput, String> {
    if let Some(p) = pct {
        if !p.is_finite() || p < 0.0 {
            return Err(format!(
                "fail_on_regression: {p}: give a percentage ≥ 0, e.g. 10"
            ));
        }
    }
    let x = crate::report::load_checked(a, force).map_err(|e| format!("a: {e:#}"))?;
    let y = crate::report::load_checked(b, force).map_err(|e| format!("b: {e:#}"))?;
    let c = crate::report::compare::compare(&x.result, &y.result, force)
        .map_err(|e| format!("{e:#}"))?;
    let doc = crate::report::compare::ComparisonDoc::full(&c, &x.notes, &y.notes, pct);
    let regressed = doc
        .regressions
        .as_ref()
        .is_some_and(|r| r.iter().any(|r| r.counts()));
    Ok(CompareOutput {
        regressed,
        comparison: doc.to_json(),
    })
}
