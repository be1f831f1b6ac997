//! `checkpoint.json`: which plan steps are finished, rewritten after every step, so an interrupted
//! campaign can be resumed (`bakeoff run --resume DIR`) without redoing finished steps.
//!
//! It also records every step's wall time (and the time spent outside steps), from which the
//! orchestration overhead is computed.

use super::fingerprint::FileDigest;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

pub const CHECKPOINT_FILE: &str = crate::evidence::bundle::CHECKPOINT;
pub const SCHEMA: &str = "bakeoff.checkpoint/v1";

#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq, Default)]
#[serde(rename_all = "kebab-case")]
pub enum StepStatus {
    #[default]
    Pending,
    /// Ran to the end (its gate may have failed: see the evidence).
    Done,
    /// Ran and failed so the arm could not go on.
    Failed,
    /// Not run: an earlier step of its arm failed.
    Skipped,
    /// Cancelled by a signal; runs again on resume.
    Interrupted,
}

impl StepStatus {
    /// Finished for good: resume does not run it again.
    pub fn finished(self) -> bool {
        matches!(
            self,
            StepStatus::Done | StepStatus::Failed | StepStatus::Skipped
        )
    }
}

/// One plan step's state.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Default)]
pub struct StepState {
    pub number: usize,
    pub arm: Option<String>,
    pub step: String,
    pub evidence: String,
    pub status: StepStatus,
    /// Wall time of the step's work (not of writing its evidence), ms.
    pub wall_ms: Option<f64>,
    pub finished_at: Option<String>,
    /// Which invocation (1 = the first run, 2 = the first resume, ...) ran it.
    pub invocation: Option<u32>,
}

/// Work outside the plan's steps that still had to be done (a relaunch on resume, stopping an
/// incumbent again, restoration redone), with its wall time.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Default)]
pub struct ExtraStep {
    pub invocation: u32,
    pub arm: Option<String>,
    pub step: String,
    pub evidence: Option<String>,
    pub wall_ms: f64,
}

/// Where one invocation's wall time went.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Default)]
pub struct InvocationTiming {
    pub invocation: u32,
    pub started_at: String,
    pub total_ms: f64,
    /// launch, ready, stop, stop-incumbent, restore-incumbent: the engines starting and stopping.
    pub engine_lifecycle_ms: f64,
    /// preflight, timing, retrieval, tools, quality, restoration checks, GPU checks.
    pub measurement_ms: f64,
    /// Everything else: bakeoff's own bookkeeping (evidence, checkpoint and result writes,
    /// process discovery, the manifest).
    pub overhead_ms: f64,
    /// overhead_ms / total_ms.
    pub overhead_fraction: f64,
    /// How it ended: `complete`, `incomplete`, `interrupted by SIGINT during …`.
    pub outcome: String,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Default)]
pub struct ArmState {
    /// The next request index on this arm's server (distinct per request, below 98,000,000).
    pub next_index: u64,
    /// Launches so far (1 = the planned launch; more = relaunches on resume).
    pub launches: u32,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Default)]
pub struct Checkpoint {
    pub schema: String,
    pub campaign_id: String,
    /// The campaign file the run started from (its directory anchors relative paths on resume).
    pub campaign_file: PathBuf,
    pub campaign_sha256: String,
    pub started_at: String,
    pub updated_at: String,
    pub invocations: u32,
    pub steps: Vec<StepState>,
    pub extra: Vec<ExtraStep>,
    pub arms: BTreeMap<String, ArmState>,
    /// Times the incumbent was stopped by this campaign.
    pub incumbent_shutdowns: u32,
    pub timing: Vec<InvocationTiming>,
    /// Where the campaign's prompt nonce numbers start (random per campaign; absent in
    /// checkpoints written before it existed, which used 0).
    #[serde(default)]
    pub nonce_base: Option<u64>,
    /// The `[workload.dataset]` file the run started with: a resume refuses a changed one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dataset: Option<DatasetDigest>,
    /// The `[workload.trace]` file the run started with: a resume refuses a changed one (the
    /// arms still to run would replay other requests than those that did).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trace: Option<DatasetDigest>,
    /// Every file the campaign names, resolved to an absolute path, with its digest when the
    /// bundle opened (absent in bundles written before it existed): a resume or recovery from
    /// any directory, or from a copied bundle, names one that moved or changed since.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub files: Vec<NamedFile>,
}

/// A file the campaign names: the field that names it and the file's digest.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct NamedFile {
    pub named_by: String,
    #[serde(flatten)]
    pub digest: FileDigest,
}

/// A dataset file and the SHA-256 of its bytes.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Default)]
pub struct DatasetDigest {
    pub path: PathBuf,
    pub sha256: String,
}

impl NamedFile {
    /// Why this file is not what the run started with (gone, unreadable or changed), with the
    /// fix; None: unchanged.
    pub fn changed(&self) -> Option<String> {
        let short = |s: &str| s.chars().take(12).collect::<String>();
        let p = &self.digest.path;
        match super::fingerprint::file_digest(p) {
            Err(e) => Some(format!(
                "{} ({}) cannot be read now ({e}); the run started with it there: put it back at that path",
                p.display(),
                self.named_by
            )),
            Ok(now) if !super::fingerprint::same_content(&self.digest, &now) => Some(format!(
                "{} ({}) changed since the run started (sha256 {}… size {} then, {}… size {} now): put the original back, or start a new campaign",
                p.display(),
                self.named_by,
                short(&self.digest.sha256),
                self.digest.size,
                short(&now.sha256),
                now.size
            )),
            Ok(_) => None,
        }
    }
}

impl Checkpoint {
    pub fn new(plan: &super::Plan) -> Checkpoint {
        let c = &plan.campaign;
        Checkpoint {
            schema: SCHEMA.into(),
            campaign_id: c.campaign.id.clone(),
            campaign_file: c.source.path.clone(),
            campaign_sha256: c.source.sha256.clone(),
            started_at: crate::clock::wall_rfc3339(),
            updated_at: crate::clock::wall_rfc3339(),
            invocations: 0,
            steps: plan
                .steps
                .iter()
                .map(|s| StepState {
                    number: s.number,
                    arm: s.arm.clone(),
                    step: s.kind.name().into(),
                    evidence: s.evidence.clone(),
                    ..Default::default()
                })
                .collect(),
            extra: Vec::new(),
            arms: BTreeMap::new(),
            incumbent_shutdowns: 0,
            timing: Vec::new(),
            // Drawn by the runner when it opens a new bundle (run/recorder.rs).
            nonce_base: None,
            dataset: c.workload.dataset.as_ref().map(|d| DatasetDigest {
                path: d.path.clone(),
                sha256: d.sha256.clone(),
            }),
            trace: c.workload.trace.as_ref().map(|t| DatasetDigest {
                path: t.path.clone(),
                sha256: t.sha256.clone(),
            }),
            files: super::fingerprint::campaign_files(c)
                .into_iter()
                .filter_map(|(p, named_by)| {
                    let digest = super::fingerprint::file_digest(&p).ok()?;
                    Some(NamedFile { named_by, digest })
                })
                .collect(),
        }
    }

    /// The files the campaign named when the run started that are gone or changed now, one line
    /// each with the fix (empty: none, or a bundle written before files were recorded).
    pub fn files_changed(&self) -> Vec<String> {
        self.files.iter().filter_map(NamedFile::changed).collect()
    }

    /// The file the campaign's field `named_by` named when the run started (None: it named none,
    /// or the bundle was written before files were recorded).
    pub fn file_named_by(&self, named_by: &str) -> Option<&NamedFile> {
        self.files.iter().find(|f| f.named_by == named_by)
    }

    /// Why the campaign `c` (the bundle's copy, loaded again for a resume) may not resume this
    /// run: its dataset file changed (or is another file) since the run started, so the arms
    /// still to run would send other prompts than those that ran. None: it may.
    pub fn workload_changed(&self, c: &super::Campaign) -> Option<String> {
        let now = c.workload.dataset.as_ref();
        let now = now.map(|d| (d.path.as_path(), d.sha256.as_str()));
        workload_file_changed(self.dataset.as_ref()?, now, "dataset", "send other prompts")
    }

    /// [`Self::workload_changed`] for the `[workload.trace]` file: the arms still to run would
    /// replay other requests than those that did.
    pub fn trace_changed(&self, c: &super::Campaign) -> Option<String> {
        let now = c.workload.trace.as_ref();
        let now = now.map(|t| (t.path.as_path(), t.sha256.as_str()));
        workload_file_changed(self.trace.as_ref()?, now, "trace", "replay other requests")
    }

    pub fn load(dir: &Path) -> anyhow::Result<Checkpoint> {
        let p = dir.join(CHECKPOINT_FILE);
        let b = std::fs::read(&p).map_err(|e| {
            anyhow::anyhow!(
                "cannot read {} ({e}); --resume needs a bundle written by `bakeoff run`",
                p.display()
            )
        })?;
        let ck: Checkpoint = serde_json::from_slice(&b)
            .map_err(|e| anyhow::anyhow!("{} is not a bakeoff checkpoint: {e}", p.display()))?;
        if ck.schema != SCHEMA {
            anyhow::bail!("{}: unknown checkpoint schema {:?}", p.display(), ck.schema);
        }
        Ok(ck)
    }

    pub fn save(&mut self, dir: &Path) -> anyhow::Result<()> {
        self.updated_at = crate::clock::wall_rfc3339();
        let mut b = serde_json::to_vec_pretty(self)?;
        b.push(b'\n');
        crate::evidence::write_atomic(&dir.join(CHECKPOINT_FILE), &b)
    }

    pub fn step(&self, number: usize) -> &StepState {
        &self.steps[number - 1]
    }

    pub fn set(&mut self, number: usize, status: StepStatus, wall_ms: Option<f64>, inv: u32) {
        let s = &mut self.steps[number - 1];
        s.status = status;
        s.wall_ms = wall_ms;
        s.finished_at = Some(crate::clock::wall_rfc3339());
        s.invocation = Some(inv);
    }
}

/// Why a resume must refuse the `[workload.<table>]` file the run started with (`was`), given
/// the campaign's now (its path and SHA-256, read at load): the table is gone, names another
/// path, or the file holds other bytes, so the arms still to run would `would` than those that
/// ran. None: the same file.
fn workload_file_changed(
    was: &DatasetDigest,
    now: Option<(&Path, &str)>,
    table: &str,
    would: &str,
) -> Option<String> {
    let Some((path, sha256)) = now else {
        return Some(format!(
            "the run started with a [workload.{table}] the campaign no longer has"
        ));
    };
    if path != was.path {
        return Some(format!(
            "workload.{table}.path is {} now, but the run started with {}; resume with the campaign's original {table}",
            path.display(),
            was.path.display()
        ));
    }
    (sha256 != was.sha256).then(|| {
        format!(
            "the {table} file {} changed since the run started (sha256 {} then, {sha256} now): the arms still to run would {would} than those that ran; put the original file back to resume, or start a new campaign",
            path.display(),
            was.sha256,
        )
    })
}
