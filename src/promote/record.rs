//! The promotion folder's record (`promotion.json`) and its launch journal: each action is
//! recorded (written, synced, renamed) before it is taken and again once it ended, so a promotion
//! killed at any point leaves a folder `bakeoff recover` can read.

use crate::evidence::bundle;
use crate::run::journal::{Journal, Journaled, State};
use anyhow::Result;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::path::{Path, PathBuf};

/// Where a promotion stands.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "kebab-case")]
pub enum Phase {
    /// Checked, nothing touched yet.
    Planned,
    /// The transaction runs (incumbent stopping, winner launching, identity, preflight).
    Switching,
    /// The winner serves under analysis.
    Baking,
    /// Ending: the incumbent is being restored.
    RollingBack,
    /// Done: the winner serves the lane.
    Promoted,
    /// Done: the incumbent serves again, proven.
    RolledBack,
    /// Done: the incumbent could not be proven back; the lane is marked.
    RollbackFailed,
}

impl Phase {
    pub fn done(self) -> bool {
        matches!(
            self,
            Phase::Promoted | Phase::RolledBack | Phase::RollbackFailed
        )
    }
    pub fn as_str(self) -> &'static str {
        match self {
            Phase::Planned => "planned",
            Phase::Switching => "switching",
            Phase::Baking => "baking",
            Phase::RollingBack => "rolling-back",
            Phase::Promoted => "promoted",
            Phase::RolledBack => "rolled-back",
            Phase::RollbackFailed => "rollback-failed",
        }
    }
}

/// One action of the transaction.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Step {
    pub name: String,
    /// `intent` (recorded before the action), `ok`, `failed`.
    pub status: String,
    pub at: String,
    pub detail: String,
    #[serde(default)]
    pub facts: Value,
}

/// One analysis interval of the bake.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Interval {
    pub index: u32,
    pub started_at: String,
    pub seconds: f64,
    pub requests_ok: u64,
    pub requests_failed: u64,
    pub ttft_p95_ms: Option<f64>,
    pub decode_tok_s_p50: Option<f64>,
    /// `pass`, `fail` or `inconclusive`.
    pub outcome: String,
    /// Each check: what was measured against which limit.
    pub checks: Vec<Value>,
    pub detail: String,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Record {
    pub schema: String,
    pub phase: Phase,
    /// The campaign bundle acted on (absolute) and its root digest.
    pub campaign_bundle: PathBuf,
    pub campaign_root_digest: String,
    pub campaign_id: String,
    pub arm: String,
    pub incumbent: String,
    /// Why this arm may be promoted (policy auto, or the operator's --confirm).
    pub authorization: String,
    pub lane: String,
    /// From a multi-lane bundle: where the arm was measured and the lane it was promoted on
    /// (the incumbent's), with the card-to-card spread the bundle measured.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lanes: Option<super::lanes::Lanes>,
    /// The bake's parameters and the arm's own bake-off figures it is compared with.
    pub bake: Value,
    pub steps: Vec<Step>,
    pub intervals: Vec<Interval>,
    /// The decision (promoted / rolled back / rollback failed) and why.
    #[serde(default)]
    pub decision: Option<String>,
    #[serde(default)]
    pub why: String,
    /// Commands that start the incumbent again by hand (secrets as `$NAME`), when needed.
    #[serde(default)]
    pub restart: Vec<String>,
    pub started_at: String,
    #[serde(default)]
    pub ended_at: Option<String>,
    #[serde(default)]
    pub notes: Vec<String>,
}

pub const SCHEMA: &str = "bakeoff.promotion/1";

/// The folder being written: the record and the launch journal.
pub struct Folder {
    pub dir: PathBuf,
    pub rec: Record,
    pub journal: Journal,
}

impl Folder {
    /// A new folder (refused when it exists and is not empty).
    pub fn create(dir: &Path, rec: Record) -> Result<Folder> {
        if std::fs::read_dir(dir).is_ok_and(|mut d| d.next().is_some()) {
            anyhow::bail!(
                "the promotion folder {} is not empty (an earlier promotion?); give another --output",
                dir.display()
            );
        }
        std::fs::create_dir_all(dir)
            .map_err(|e| anyhow::anyhow!("cannot create {}: {e}", dir.display()))?;
        let f = Folder {
            dir: dir.to_path_buf(),
            rec,
            journal: Journal::default(),
        };
        f.save()?;
        Ok(f)
    }

    /// An existing folder (a recovery).
    pub fn open(dir: &Path) -> Result<Folder> {
        let p = dir.join(bundle::PROMOTION);
        let b = std::fs::read(&p).map_err(|e| {
            anyhow::anyhow!(
                "cannot read {}: {e}; give a folder `bakeoff promote` wrote",
                p.display()
            )
        })?;
        let rec: Record = serde_json::from_slice(&b)
            .map_err(|e| anyhow::anyhow!("{} is not a promotion record: {e}", p.display()))?;
        Ok(Folder {
            dir: dir.to_path_buf(),
            rec,
            journal: read_journal(dir)?,
        })
    }

    /// Writes `promotion.json` (atomic and synced).
    pub fn save(&self) -> Result<()> {
        let b = serde_json::to_vec_pretty(&self.rec)?;
        crate::evidence::write_atomic(&self.dir.join(bundle::PROMOTION), &b)
    }

    /// Records an action before it is taken.
    pub fn intent(&mut self, name: &str, detail: impl Into<String>) -> Result<()> {
        self.push(name, "intent", detail.into(), Value::Null)
    }

    /// Records how an action ended.
    pub fn ended(&mut self, name: &str, ok: bool, detail: impl Into<String>, facts: Value) {
        let status = if ok { "ok" } else { "failed" };
        // The transaction goes on (a rollback most of all) even when the folder cannot be
        // written: the error is kept in memory and said at the end.
        if let Err(e) = self.push(name, status, detail.into(), facts) {
            self.rec
                .notes
                .push(format!("could not record step {name}: {e:#}"));
        }
    }

    fn push(&mut self, name: &str, status: &str, detail: String, facts: Value) -> Result<()> {
        self.rec.steps.push(Step {
            name: name.into(),
            status: status.into(),
            at: crate::clock::wall_rfc3339(),
            detail,
            facts,
        });
        self.save()
    }

    pub fn set_phase(&mut self, p: Phase) -> Result<()> {
        self.rec.phase = p;
        self.save()
    }
    /// Marks every open entry of `arm` with `state` (a recovery's findings, or the promoted
    /// winner handed over to the lane).
    pub fn journal_close(&mut self, changes: &[(usize, State, String)]) {
        for (i, st, what) in changes {
            if let Some(e) = self.journal.entries.get_mut(*i) {
                e.state = *st;
                e.recovery = Some(what.clone());
                e.updated_at = crate::clock::wall_rfc3339();
            }
        }
        let _ = self.save_journal();
    }

    /// Seals the folder: the record, its summary (`summary`) and `report.html` (`page`), then
    /// the manifest (its root digest returned).
    pub fn seal(&mut self, summary: &str, page: &str) -> Result<String> {
        self.save()?;
        crate::evidence::write_atomic(
            &self.dir.join(bundle::PROMOTION_SUMMARY),
            summary.as_bytes(),
        )?;
        crate::evidence::write_atomic(&self.dir.join(bundle::REPORT_HTML), page.as_bytes())?;
        let m = crate::evidence::manifest::write(&self.dir)?;
        Ok(m.root_sha256.unwrap_or_default())
    }
}

/// Is `dir` a promotion folder?
pub fn is_promotion(dir: &Path) -> bool {
    dir.join(bundle::PROMOTION).is_file()
}

/// The folder's launch journal (empty when nothing was launched).
fn read_journal(dir: &Path) -> Result<Journal> {
    match std::fs::read(dir.join(bundle::LAUNCH_JOURNAL)) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Journal::default()),
        Err(e) => Err(anyhow::anyhow!(
            "cannot read the launch journal in {}: {e}",
            dir.display()
        )),
        Ok(b) => serde_json::from_slice(&b).map_err(|e| {
            anyhow::anyhow!("the launch journal in {} is not valid: {e}", dir.display())
        }),
    }
}

impl Journaled for Folder {
    fn journal_mut(&mut self) -> &mut Journal {
        &mut self.journal
    }

    fn invocation(&self) -> u32 {
        1
    }

    fn save_journal(&mut self) -> Result<()> {
        let b = serde_json::to_vec_pretty(&self.journal)?;
        crate::evidence::write_atomic(&self.dir.join(bundle::LAUNCH_JOURNAL), &b)
    }
}
