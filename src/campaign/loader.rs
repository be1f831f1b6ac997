//! Reading a campaign file: parse it (spec/), then resolve and check it (validate/).
//!
//! This sits above both so that neither imports the other.

use super::diag::{self, CampaignError, Diagnostic, SpanIndex};
use super::paths::absolute;
use super::spec::{hex_sha256, Campaign, Source};
use super::validate;
use std::path::Path;

/// Reads, parses, resolves and validates a campaign file.
///
/// Errors: a file that cannot be read, or a TOML syntax / type / missing-field / unknown-field
/// error, yields exactly one diagnostic (parsing stops there). Otherwise every semantic problem
/// is reported, one diagnostic (one line) each, sorted by line.
pub fn load(path: &Path) -> Result<Campaign, CampaignError> {
    let bytes = std::fs::read(path).map_err(|e| {
        CampaignError::single(Diagnostic {
            file: path.to_path_buf(),
            line: 0,
            field: "file".into(),
            problem: format!("cannot read the campaign file ({e})"),
            fix: "check the path".into(),
        })
    })?;
    let text = String::from_utf8(bytes).map_err(|e| {
        let offset = e.utf8_error().valid_up_to();
        let line = 1 + e.as_bytes()[..offset]
            .iter()
            .filter(|b| **b == b'\n')
            .count();
        CampaignError::single(Diagnostic {
            file: path.to_path_buf(),
            line,
            field: "file".into(),
            problem: "the file is not valid UTF-8".into(),
            fix: "save it as UTF-8".into(),
        })
    })?;
    parse(&text, path)
}

/// [`load`] for text already read: `path` names the file in errors and its directory anchors
/// relative paths (a relative `path` is taken against the current directory).
pub fn parse(text: &str, path: &Path) -> Result<Campaign, CampaignError> {
    let index = SpanIndex::build(text);
    let mut c: Campaign = toml::from_str(text)
        .map_err(|e| CampaignError::single(diag::from_toml_error(path, text, &index, &e)))?;
    // Absolute from here on: a bundle records this path, and recovery may run from anywhere.
    let file = absolute(path);
    let dir = file
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_else(|| "/".into());
    c.source = Source {
        path: file,
        dir,
        sha256: hex_sha256(text.as_bytes()),
    };
    validate::resolve_and_validate(&mut c, path, &index)?;
    Ok(c)
}
