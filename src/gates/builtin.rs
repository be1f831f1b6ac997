//! The suites shipped in the repository, built in so the binary works from any directory, and
//! the loaders that take a suite path (or none: the default) and fall back to a built-in suite
//! named by its repository path when no such file exists here.

use super::suite;
use super::{QualitySuite, ToolSuite};
use std::path::Path;

/// The suites shipped in the repository, built in so the binary works from any directory.
pub const BUILTIN_TOOLS: (&str, &str) =
    ("suites/tools.toml", include_str!("../../suites/tools.toml"));
pub const BUILTIN_TOOLS_FEWSHOT: (&str, &str) = (
    "suites/tools-fewshot.toml",
    include_str!("../../suites/tools-fewshot.toml"),
);
pub const BUILTIN_QUALITY: (&str, &str) = (
    "suites/quality.toml",
    include_str!("../../suites/quality.toml"),
);

/// Loads a tools suite: `path`, or the built-in copy when `path` names a shipped suite
/// (`suites/tools.toml`, `suites/tools-fewshot.toml`) that does not exist here; None = the
/// built-in `suites/tools.toml`. Used by `bakeoff gate` and by campaigns.
pub fn load_tools(path: Option<&Path>) -> Result<ToolSuite, suite::SuiteError> {
    match path {
        Some(p) => match builtin(p, &[BUILTIN_TOOLS, BUILTIN_TOOLS_FEWSHOT]) {
            Some((name, text)) => {
                ToolSuite::from_file(suite::from_bytes(Path::new(name), text.as_bytes())?)
            }
            None => ToolSuite::load(p),
        },
        None => ToolSuite::from_file(suite::from_bytes(
            Path::new(BUILTIN_TOOLS.0),
            BUILTIN_TOOLS.1.as_bytes(),
        )?),
    }
}

/// A built-in suite named by its repository path when no such file exists here.
fn builtin(
    p: &Path,
    list: &[(&'static str, &'static str)],
) -> Option<(&'static str, &'static str)> {
    if p.exists() {
        return None;
    }
    list.iter().copied().find(|(n, _)| Path::new(n) == p)
}

/// Loads a quality suite like [`load_tools`] (built in: `suites/quality.toml`).
pub fn load_quality(path: Option<&Path>) -> Result<QualitySuite, suite::SuiteError> {
    match path {
        Some(p) => match builtin(p, &[BUILTIN_QUALITY]) {
            Some((name, text)) => {
                QualitySuite::from_file(suite::from_bytes(Path::new(name), text.as_bytes())?)
            }
            None => QualitySuite::load(p),
        },
        None => QualitySuite::from_file(suite::from_bytes(
            Path::new(BUILTIN_QUALITY.0),
            BUILTIN_QUALITY.1.as_bytes(),
        )?),
    }
}
