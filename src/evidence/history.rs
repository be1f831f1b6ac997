//! `history-context.json`: what the history store said about a run, as plain lines. `bakeoff
//! run` with a history store writes it before the verdict is rendered; the report reads its
//! lines (what lies beyond the history's spread) into the verdict's limitations (never its
//! ranking), and shows its informational lines (what lies within) beside the link to the trend
//! page it names.
//! The history itself is not read here: the bundle carries what was said, so `bakeoff report
//! DIR` re-derives the same documents without the database.

use serde::{Deserialize, Serialize};
use std::path::Path;

pub const SCHEMA: &str = "bakeoff.history-context/v1";

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HistoryContext {
    pub schema: String,
    /// The store it came from, as `bakeoff history` names it (never with a password).
    pub store: String,
    /// When it was computed (RFC 3339).
    pub written_at: String,
    /// Each a limitation of the verdict: an arm's figure today beyond its own history's spread,
    /// a lane whose control drifts.
    pub lines: Vec<String>,
    /// What lies within the history's spread (an arm whose figures today look like its last
    /// runs): shown beside the trend link in `report.html`, never a limitation.
    #[serde(default)]
    pub informational: Vec<String>,
    /// The trend page in the bundle (`history-trend.html`), when one was written.
    pub trend: Option<String>,
}

/// The bundle's history context: None when it has none (a run without a history store). A file
/// that is there but unreadable is an error naming it (the bundle's verify covers its bytes).
pub fn read(dir: &Path) -> anyhow::Result<Option<HistoryContext>> {
    let p = dir.join(super::bundle::HISTORY_CONTEXT);
    let bytes = match std::fs::read(&p) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => anyhow::bail!("cannot read {}: {e}", p.display()),
    };
    let c: HistoryContext = serde_json::from_slice(&bytes).map_err(|e| {
        anyhow::anyhow!(
            "{} is not a history context ({e}); remove it and run `bakeoff report {}` (the verdict then has no history lines)",
            p.display(),
            dir.display()
        )
    })?;
    Ok(Some(c))
}

/// Writes it into the bundle (atomically).
pub fn write(dir: &Path, c: &HistoryContext) -> anyhow::Result<()> {
    super::write_atomic(
        &dir.join(super::bundle::HISTORY_CONTEXT),
        &serde_json::to_vec_pretty(c)?,
    )
}
