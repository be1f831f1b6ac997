//! Bundles under the server's root as MCP resources: each bundle's summary files are listed
//! (`file://` URIs), and any file of a bundle can be read through the `file://{path}`
//! template. Only files inside a bundle under the root are served (symlinks followed first),
//! text only, up to [`MAX_BYTES`].

use super::paths::Root;
use crate::evidence::bundle;
use rmcp::model::{Resource, ResourceContents, ResourceTemplate};
use std::path::{Path, PathBuf};

/// The largest file served (report.html with its embedded chart library is ~300 KB).
pub const MAX_BYTES: u64 = 8 << 20;
/// How deep under the root bundles are looked for.
const DEPTH: usize = 3;

/// The files listed for each bundle (those it has).
const LISTED: [&str; 6] = [
    bundle::RESULT,
    bundle::DECISION_SUMMARY,
    bundle::PUBLICATION_SUMMARY,
    bundle::MANIFEST,
    bundle::STATS_CSV,
    bundle::CHECKPOINT,
];

fn mime(p: &Path) -> &'static str {
    match p.extension().and_then(|e| e.to_str()) {
        Some("json") | Some("jsonl") => "application/json",
        Some("md") => "text/markdown",
        Some("html") => "text/html",
        Some("csv") => "text/csv",
        Some("toml") => "application/toml",
        _ => "text/plain",
    }
}

fn uri(p: &Path) -> String {
    format!("file://{}", p.display())
}

/// Folders under `dir` (to [`DEPTH`]) that hold a bundle (a checkpoint or a manifest).
fn bundles(dir: &Path, depth: usize, out: &mut Vec<PathBuf>) {
    if dir.join(bundle::CHECKPOINT).is_file() || dir.join(bundle::MANIFEST).is_file() {
        out.push(dir.to_path_buf());
        return;
    }
    if depth == 0 {
        return;
    }
    let Ok(rd) = std::fs::read_dir(dir) else {
        return;
    };
    let mut subs: Vec<PathBuf> = rd
        .flatten()
        .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
        .map(|e| e.path())
        .collect();
    subs.sort();
    for s in subs {
        bundles(&s, depth - 1, out);
    }
}

pub fn list(root: &Root) -> Vec<Resource> {
    let mut found = Vec::new();
    bundles(root.dir(), DEPTH, &mut found);
    let mut out = Vec::new();
    for b in found {
        let name = b
            .strip_prefix(root.dir())
            .unwrap_or(&b)
            .display()
            .to_string();
        for f in LISTED {
            let p = b.join(f);
            if let Ok(m) = std::fs::metadata(&p) {
                out.push(
                    Resource::new(uri(&p), format!("{name}/{f}"))
                        .with_mime_type(mime(&p))
                        .with_size(m.len()),
                );
            }
        }
    }
    out
}

pub fn templates() -> Vec<ResourceTemplate> {
    vec![ResourceTemplate::new("file://{path}", "bundle-file")
        .with_description(
            "Any file of a bundle under the server's root, by its absolute path (the listed resources' URIs are examples)",
        )]
}

/// The file behind `uri`, when it is a text file inside a bundle under the root.
pub fn read(root: &Root, uri: &str) -> Result<ResourceContents, String> {
    let Some(path) = uri.strip_prefix("file://") else {
        return Err(format!("{uri}: not a file:// URI of a bundle file"));
    };
    let p = root.inside(path, "uri")?;
    let in_bundle = p.ancestors().skip(1).any(|d| {
        d.starts_with(root.dir())
            && (d.join(bundle::CHECKPOINT).is_file() || d.join(bundle::MANIFEST).is_file())
    });
    if !in_bundle {
        return Err(format!(
            "{uri}: not a file inside a bundle under the server's root"
        ));
    }
    let m = std::fs::metadata(&p).map_err(|e| format!("{uri}: {e}"))?;
    if !m.is_file() || m.len() > MAX_BYTES {
        return Err(format!(
            "{uri}: not a regular file of at most {MAX_BYTES} bytes"
        ));
    }
    let bytes = std::fs::read(&p).map_err(|e| format!("{uri}: {e}"))?;
    let text = String::from_utf8(bytes).map_err(|_| format!("{uri}: not a text file"))?;
    let mut c = ResourceContents::text(text, uri);
    if let ResourceContents::TextResourceContents { mime_type, .. } = &mut c {
        *mime_type = Some(mime(&p).to_string());
    }
    Ok(c)
}
