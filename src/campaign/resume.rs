//! The campaign of an existing bundle, for `bakeoff run --resume DIR` and `bakeoff recover DIR`:
//! the bundle's own copy of the campaign file, its relative paths resolved against the directory
//! of the campaign file the run started from (recorded absolute in `checkpoint.json`), so both
//! work from any working directory and from a bundle that was moved or copied elsewhere.
//!
//! Bundles written before the path was recorded absolute name it as typed (`campaign.toml`):
//! those still resolve against the current directory, and a failure says to run from there.

use super::checkpoint::Checkpoint;
use super::diag::Diagnostic;
use super::paths::absolute;
use super::Campaign;
use crate::evidence::bundle::CAMPAIGN_COPY;
use std::path::Path;

/// The bundle's campaign and checkpoint, and what changed since the run started.
pub struct BundleCampaign {
    pub campaign: Campaign,
    pub checkpoint: Checkpoint,
    /// Files the campaign names that are gone or changed since the run started, each with the
    /// fix (the caller decides: a resume refuses, a recovery warns).
    pub changed: Vec<String>,
}

impl BundleCampaign {
    /// Why this bundle may not be resumed (None: it may): its campaign copy is not the file the
    /// run started with, its dataset or trace changed, or a file the campaign names moved or changed
    /// (then the arms still to run would not be the arms that ran). One line per problem.
    pub fn unresumable(&self) -> Option<Vec<String>> {
        let (c, ck) = (&self.campaign, &self.checkpoint);
        if c.source.sha256 != ck.campaign_sha256 {
            return Some(vec![
                "the bundle's campaign.toml differs from the one the run started with".into(),
            ]);
        }
        if let Some(why) = ck.workload_changed(c).or_else(|| ck.trace_changed(c)) {
            return Some(vec![why]);
        }
        if self.changed.is_empty() {
            return None;
        }
        let mut out = self.changed.clone();
        out.push(format!(
            "{} file(s) the campaign names moved or changed since the run started (above): the arms still to run would not be the arms that ran; nothing was touched",
            self.changed.len()
        ));
        Some(out)
    }
}

/// Why a bundle's campaign cannot be used: the copy's diagnostics (if it did not load) and one
/// message that says what to do.
#[derive(Debug)]
pub struct Refusal {
    pub diagnostics: Vec<Diagnostic>,
    pub message: String,
}

impl Refusal {
    fn new(message: String) -> Refusal {
        Refusal {
            diagnostics: Vec::new(),
            message,
        }
    }
}

/// Loads the campaign of bundle `dir` (see the module doc). `command` is what the user ran
/// (`bakeoff recover` or `bakeoff run --resume`), for the fix of an old bundle.
pub fn load_bundle(dir: &Path, command: &str) -> Result<BundleCampaign, Refusal> {
    let dir = absolute(dir);
    let ck = Checkpoint::load(&dir).map_err(|e| {
        Refusal::new(format!(
            "{e:#}; give the directory of a bundle `bakeoff run` wrote"
        ))
    })?;
    let copy = dir.join(CAMPAIGN_COPY);
    let text = std::fs::read_to_string(&copy)
        .map_err(|e| Refusal::new(format!("cannot read {}: {e}", copy.display())))?;
    let recorded_absolute = ck.campaign_file.is_absolute();
    // An old bundle's relative path: against the current directory, as it always was.
    let file = absolute(&ck.campaign_file);
    let campaign_dir = file.parent().unwrap_or(Path::new("/")).to_path_buf();
    let c = match super::parse(&text, &file) {
        Ok(c) => c,
        Err(e) => {
            let message = if recorded_absolute {
                format!(
                    "the bundle's campaign.toml copy no longer loads: its relative paths are resolved against {} (the directory of {}, where the run started), and a file it names is not there any more (above); put the file back at that path, then run `{command} {}` again",
                    campaign_dir.display(),
                    file.display(),
                    dir.display()
                )
            } else {
                format!(
                    "the bundle's campaign.toml copy no longer loads from here: this bundle was written by an older bakeoff, which recorded the campaign file as `{}` relative to the directory the run started in, so its paths were resolved against {} (the current directory); run the command from the directory that held the campaign file: `cd THAT_DIR && {command} {}`",
                    ck.campaign_file.display(),
                    campaign_dir.display(),
                    dir.display()
                )
            };
            return Err(Refusal {
                diagnostics: e.diagnostics,
                message,
            });
        }
    };
    let changed = ck.files_changed();
    Ok(BundleCampaign {
        campaign: c,
        checkpoint: ck,
        changed,
    })
}
