//! `bakeoff verify --json`: `bakeoff.verify/1`.

use crate::evidence::manifest::{Manifest, Problem};
use serde::Serialize;

#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct VerifyDoc {
    pub schema: &'static str,
    pub exit_code: u8,
    pub bundle: String,
    /// Every listed file matches and the manifest is sealed by its root digest (and by the
    /// digest given, when one was).
    pub ok: bool,
    /// Files the manifest lists (each re-hashed).
    pub files_checked: usize,
    /// The manifest's root digest as it stands (None: it has none).
    pub root_digest: Option<String>,
    /// `--digest HEX` when given.
    pub digest_given: Option<String>,
    pub problems: Vec<ProblemPart>,
}

#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct ProblemPart {
    /// `changed`, `missing`, `unlisted`, `not-regular`, `manifest-edited`, `manifest-entry`,
    /// `digest-mismatch`, `unaccounted`, `validity`.
    pub kind: &'static str,
    /// The file it is about (the manifest for edits of the manifest).
    pub file: String,
    /// The line `bakeoff verify` prints for it.
    pub detail: String,
}

impl VerifyDoc {
    pub const SCHEMA: &'static str = "bakeoff.verify/1";

    pub fn new(bundle: String, m: &Manifest, problems: &[Problem], digest: Option<&str>) -> Self {
        let ok = problems.is_empty();
        VerifyDoc {
            schema: Self::SCHEMA,
            exit_code: if ok {
                super::exit::DONE
            } else {
                super::exit::FAILED
            },
            bundle,
            ok,
            files_checked: m.files.len(),
            root_digest: m.root_sha256.clone(),
            digest_given: digest.map(str::to_string),
            problems: problems
                .iter()
                .map(|p| ProblemPart {
                    kind: p.kind(),
                    file: p.file().to_string(),
                    detail: p.to_string(),
                })
                .collect(),
        }
    }
}
