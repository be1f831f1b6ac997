//! The campaign tools' inputs checked as `bakeoff run` checks them: the file loaded by the same
//! loader (the same `FILE:LINE: field: problem; fix` lines), the plan the dry run prints, and
//! the bundle folder confined to the server's root.

use super::paths::Root;
use crate::campaign::{self, Campaign, Mask};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

#[derive(Debug, Clone, Deserialize, JsonSchema)]
pub struct PlanInput {
    /// The campaign file (TOML, docs/campaign.md), absolute or relative to the server's root.
    pub campaign: String,
    /// The bundle folder, under the server's root (default: the campaign's `output`, taken
    /// relative to the root).
    pub output: Option<String>,
}

#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct PlanOutput {
    pub campaign_id: String,
    /// The bundle folder the run would write (absolute, under the root).
    pub bundle: String,
    /// The arms in campaign order (the first is the incumbent when one is declared).
    pub arms: Vec<String>,
    /// The plan's steps, in order: what `watch` counts.
    pub steps: Vec<PlanStepPart>,
    /// Warnings the loader gave (the run would start anyway).
    pub warnings: Vec<String>,
    /// `bakeoff run --dry-run`'s text: every step with every parameter, secrets masked.
    pub dry_run: String,
}

#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct PlanStepPart {
    pub number: usize,
    pub arm: Option<String>,
    /// The step kind (`launch`, `preflight`, `timing`, …).
    pub step: String,
    /// Its shape label (`64-c1-warm`), when it has one.
    pub shape: Option<String>,
    /// The evidence file it writes, relative to the bundle.
    pub evidence: String,
}

#[derive(Debug, Clone, Deserialize, JsonSchema)]
pub struct ResumeInput {
    /// The bundle of an interrupted run, under the server's root.
    pub bundle: String,
}

/// A refused input: the message, and a campaign file's diagnostics (`FILE:LINE: field: problem;
/// fix`), as `bakeoff run` prints them.
pub struct Refused {
    pub message: String,
    pub diagnostics: Vec<String>,
}

impl Refused {
    fn plain(message: String) -> Refused {
        Refused {
            message,
            diagnostics: Vec::new(),
        }
    }

    /// The one text a tool error carries.
    pub fn text(&self) -> String {
        let mut s = self.message.clone();
        for d in &self.diagnostics {
            s.push('\n');
            s.push_str(d);
        }
        s
    }
}

/// The campaign file, loaded and checked, and the bundle folder it would run into.
pub fn load(root: &Root, input: &PlanInput) -> Result<(Campaign, PathBuf), Refused> {
    let file = resolve_input(root, &input.campaign);
    let c = campaign::load(&file).map_err(|e| Refused {
        message: format!(
            "the campaign file has {} problem(s); nothing was started",
            e.diagnostics.len()
        ),
        diagnostics: e.diagnostics.iter().map(|d| d.to_string()).collect(),
    })?;
    let out = match &input.output {
        Some(o) => root.inside(o, "output"),
        None => root.inside(
            &c.campaign.output.display().to_string(),
            "output (the campaign's, taken relative to the root)",
        ),
    }
    .map_err(Refused::plain)?;
    // The history store is written after the run: it too must be under the root (a database
    // URL is not a file this server writes).
    if let Some(db) = c.history_db().filter(|d| !d.contains("://")) {
        root.inside(&db, "[history] db").map_err(Refused::plain)?;
    }
    Ok((c, out))
}

/// A campaign or bundle given to a reading tool: relative paths are the root's.
pub fn resolve_input(root: &Root, p: &str) -> PathBuf {
    let p = Path::new(p);
    if p.is_absolute() {
        p.to_path_buf()
    } else {
        root.dir().join(p)
    }
}

/// The plan `bakeoff run --dry-run` prints, with its steps as data.
pub fn plan(root: &Root, input: &PlanInput) -> Result<PlanOutput, Refused> {
    let (mut c, out) = load(root, input)?;
    c.campaign.output = out.clone();
    let p = campaign::plan(&c);
    Ok(PlanOutput {
        campaign_id: c.campaign.id.clone(),
        bundle: out.display().to_string(),
        arms: c.arms.iter().map(|a| a.id.clone()).collect(),
        steps: p
            .steps
            .iter()
            .map(|s| PlanStepPart {
                number: s.number,
                arm: s.arm.clone(),
                step: s.kind.name().to_string(),
                shape: s.shape.clone(),
                evidence: s.evidence.clone(),
            })
            .collect(),
        warnings: c.warnings.iter().map(|w| w.to_string()).collect(),
        dry_run: p.render(&Mask::from_process_env(&c)),
    })
}

/// `bakeoff run FILE --output DIR`'s arguments, after the same checks as [`plan`].
pub fn start_args(
    root: &Root,
    input: &PlanInput,
) -> Result<(Vec<std::ffi::OsString>, PathBuf), Refused> {
    let (c, out) = load(root, input)?;
    Ok((
        vec![
            c.source.path.clone().into_os_string(),
            "--output".into(),
            out.clone().into_os_string(),
        ],
        out,
    ))
}

/// `bakeoff run --resume DIR`'s arguments: the bundle under the root, with its campaign.
pub fn resume_args(
    root: &Root,
    input: &ResumeInput,
) -> Result<(Vec<std::ffi::OsString>, PathBuf), Refused> {
    let dir = root
        .inside(&input.bundle, "bundle")
        .map_err(Refused::plain)?;
    if !dir.join(crate::evidence::bundle::CHECKPOINT).is_file() {
        return Err(Refused::plain(format!(
            "bundle: {} has no checkpoint: not a bundle a run began; give the folder `start` returned",
            dir.display()
        )));
    }
    Ok((vec!["--resume".into(), dir.clone().into_os_string()], dir))
}
