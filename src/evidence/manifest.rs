//! The artifact manifest: every file of the bundle with its size and SHA-256, sealed by a root
//! digest over the manifest's own fields, and its re-check.
//!
//! What `verify` catches, and how it names it:
//! - a data file edited, deleted or added (hidden ones included): that file;
//! - a symlink or other non-regular file anywhere in the bundle: that path (refused);
//! - the manifest edited (a hash, a size, its version, an entry removed or added): the manifest,
//!   because its root digest no longer matches its fields;
//! - the manifest rewritten with a fresh root digest: the manifest, when the person gives the
//!   digest printed at the end of the run (`bakeoff verify DIR --digest HEX`);
//! - a file deleted together with its manifest entry: that file, when `checkpoint.json` or
//!   `campaign-result.json` names it as a step's evidence.

use super::validity::ArmValidity;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use std::collections::BTreeMap;
use std::io::Read;
use std::path::{Path, PathBuf};

pub const MANIFEST: &str = super::bundle::MANIFEST;
pub const SCHEMA: &str = "bakeoff.artifact-manifest/v2";

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Entry {
    /// Path relative to the bundle directory, with `/` separators.
    pub path: String,
    pub bytes: u64,
    pub sha256: String,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Manifest {
    pub schema: String,
    pub bakeoff_version: String,
    pub files: Vec<Entry>,
    /// SHA-256 of the manifest's other fields ([`root_digest`]): an edit of any of them is an
    /// edit of the manifest. Absent in manifests written before bakeoff sealed them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub root_sha256: Option<String>,
    /// Per arm, what could weaken its figures (`evidence::validity`), gathered from the step
    /// files when the manifest is written; sealed by the root digest; absent in older manifests.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub validity: BTreeMap<String, ArmValidity>,
}

/// The root digest of a manifest: SHA-256 of `schema`, `bakeoff_version` and every entry's path,
/// size and hash, one per line, in the manifest's order.
pub fn root_digest(m: &Manifest) -> String {
    let mut h = Sha256::new();
    h.update(format!("{}\n{}\n", m.schema, m.bakeoff_version).as_bytes());
    for e in &m.files {
        h.update(format!("{}\t{}\t{}\n", e.path, e.bytes, e.sha256).as_bytes());
    }
    // Only when present, so manifests written before the block keep their digest.
    if !m.validity.is_empty() {
        h.update(serde_json::to_vec(&m.validity).unwrap_or_default());
    }
    hex(&h.finalize())
}

/// SHA-256 (hex) and size of one file, streamed (evidence files can be large).
pub fn hash_file(path: &Path) -> std::io::Result<(String, u64)> {
    let mut f = std::fs::File::open(path)?;
    let mut h = Sha256::new();
    let mut buf = vec![0u8; 1 << 16];
    let mut n = 0u64;
    loop {
        let k = f.read(&mut buf)?;
        if k == 0 {
            break;
        }
        h.update(&buf[..k]);
        n += k as u64;
    }
    Ok((hex(&h.finalize()), n))
}

pub fn sha256_hex(bytes: &[u8]) -> String {
    hex(&Sha256::digest(bytes))
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

/// What a walk of the bundle found: its regular files (hidden ones included, the manifest
/// excluded), and every path that is not a regular file or directory (symlinks, sockets, ...).
struct Listing {
    files: Vec<PathBuf>,
    odd: Vec<(PathBuf, &'static str)>,
}

fn list_files(dir: &Path) -> std::io::Result<Listing> {
    let mut l = Listing {
        files: Vec::new(),
        odd: Vec::new(),
    };
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d)? {
            let e = e?;
            let p = e.path();
            // `file_type` does not follow symlinks.
            let ft = e.file_type()?;
            let rel = p.strip_prefix(dir).expect("under dir").to_path_buf();
            if ft.is_symlink() {
                l.odd.push((rel, "a symlink"));
            } else if ft.is_dir() {
                stack.push(p);
            } else if ft.is_file() {
                if rel.as_os_str() != MANIFEST {
                    l.files.push(rel);
                }
            } else {
                l.odd.push((rel, "not a regular file"));
            }
        }
    }
    l.files.sort();
    l.odd.sort();
    Ok(l)
}

fn rel_string(p: &Path) -> String {
    p.components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect::<Vec<_>>()
        .join("/")
}

/// Hashes every file in the bundle and writes `artifact-manifest.json` atomically, sealed by its
/// root digest. A symlink or other non-regular file in the bundle is refused (a bundle holds
/// regular files only: a link could point anywhere).
pub fn write(dir: &Path) -> anyhow::Result<Manifest> {
    let l = list_files(dir).map_err(|e| anyhow::anyhow!("cannot list {}: {e}", dir.display()))?;
    if let Some((p, what)) = l.odd.first() {
        anyhow::bail!(
            "{} is {what}; an evidence bundle holds regular files only: remove it and run `bakeoff report {}` again",
            dir.join(p).display(),
            dir.display()
        );
    }
    let mut files = Vec::new();
    for rel in l.files {
        let (sha256, bytes) = hash_file(&dir.join(&rel))
            .map_err(|e| anyhow::anyhow!("cannot hash {}: {e}", dir.join(&rel).display()))?;
        files.push(Entry {
            path: rel_string(&rel),
            bytes,
            sha256,
        });
    }
    let mut m = Manifest {
        schema: SCHEMA.to_string(),
        bakeoff_version: crate::VERSION.to_string(),
        files,
        root_sha256: None,
        validity: super::validity::gather(dir),
    };
    m.root_sha256 = Some(root_digest(&m));
    super::write_atomic(&dir.join(MANIFEST), &serde_json::to_vec_pretty(&m)?)?;
    Ok(m)
}

/// Reads a bundle's manifest.
pub fn read(dir: &Path) -> anyhow::Result<Manifest> {
    let mpath = dir.join(MANIFEST);
    let bytes = std::fs::read(&mpath).map_err(|e| {
        anyhow::anyhow!(
            "cannot read {}: {e}; is {} an evidence bundle?",
            mpath.display(),
            dir.display()
        )
    })?;
    serde_json::from_slice(&bytes)
        .map_err(|e| anyhow::anyhow!("{} is not a valid manifest: {e}", mpath.display()))
}

/// One discrepancy found by [`verify`]. Each names the file at fault.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Problem {
    /// A data file's content differs from its (unedited) manifest entry.
    Changed {
        path: String,
        expected: String,
        actual: String,
    },
    /// A manifest entry's file is gone.
    Missing { path: String },
    /// A regular file the manifest does not list.
    Unlisted { path: String },
    /// A symlink or other non-regular file.
    NotRegular { path: String, what: &'static str },
    /// The manifest's fields do not match its root digest (or it has none).
    ManifestEdited { detail: String },
    /// An entry of an edited manifest that disagrees with its file: the manifest's side changed.
    ManifestEntry { path: String, detail: String },
    /// The manifest is sealed but not by the digest the person kept.
    DigestMismatch { expected: String, actual: String },
    /// A step's evidence file named by `by` that is in neither the bundle nor the manifest.
    Unaccounted { path: String, by: String },
    /// The manifest's validity block for an arm disagrees with the arm's step files.
    Validity { arm: String },
    /// A document derived from the evidence (`arm-stats.csv`) disagrees with what it is derived
    /// from; `detail` names the row and column.
    Disagrees { path: String, detail: String },
}

fn short(s: &str) -> &str {
    &s[..12.min(s.len())]
}

impl Problem {
    /// The problem's kind in one word (`bakeoff verify --json`).
    pub fn kind(&self) -> &'static str {
        match self {
            Problem::Changed { .. } => "changed",
            Problem::Missing { .. } => "missing",
            Problem::Unlisted { .. } => "unlisted",
            Problem::NotRegular { .. } => "not-regular",
            Problem::ManifestEdited { .. } => "manifest-edited",
            Problem::ManifestEntry { .. } => "manifest-entry",
            Problem::DigestMismatch { .. } => "digest-mismatch",
            Problem::Unaccounted { .. } => "unaccounted",
            Problem::Validity { .. } => "validity",
            Problem::Disagrees { .. } => "disagrees",
        }
    }

    /// The file this problem is about (the manifest for edits of the manifest).
    pub fn file(&self) -> &str {
        match self {
            Problem::Changed { path, .. }
            | Problem::Missing { path }
            | Problem::Unlisted { path }
            | Problem::NotRegular { path, .. }
            | Problem::Unaccounted { path, .. }
            | Problem::Disagrees { path, .. } => path,
            Problem::ManifestEdited { .. }
            | Problem::ManifestEntry { .. }
            | Problem::DigestMismatch { .. }
            | Problem::Validity { .. } => MANIFEST,
        }
    }
}

impl std::fmt::Display for Problem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Problem::Changed {
                path,
                expected,
                actual,
            } => write!(
                f,
                "changed: {path} (manifest sha256 {}…, now {}…)",
                short(expected),
                short(actual)
            ),
            Problem::Missing { path } => write!(
                f,
                "missing: {path} is in the manifest but not in the bundle"
            ),
            Problem::Unlisted { path } => write!(f, "not in manifest: {path}"),
            Problem::NotRegular { path, what } => write!(
                f,
                "refused: {path} is {what} (a bundle holds regular files only)"
            ),
            Problem::ManifestEdited { detail } => write!(f, "edited: {MANIFEST} ({detail})"),
            Problem::ManifestEntry { path, detail } => write!(
                f,
                "edited: {MANIFEST}: its entry for {path} {detail} (the entry changed, not necessarily the file)"
            ),
            Problem::DigestMismatch { expected, actual } => write!(
                f,
                "replaced: {MANIFEST} has root digest {actual}, not the {expected} given with --digest"
            ),
            Problem::Validity { arm } => write!(
                f,
                "edited: {MANIFEST}: its validity block for arm {arm} disagrees with the arm's step files (rewrite it with `bakeoff report`)"
            ),
            Problem::Disagrees { path, detail } => write!(
                f,
                "disagrees: {path}: {detail} (rewrite it with `bakeoff report`)"
            ),
            Problem::Unaccounted { path, by } => write!(
                f,
                "missing: {path} is named by {by} but is neither in the bundle nor in {MANIFEST} (deleted with its entry?)"
            ),
        }
    }
}

/// Evidence files the bundle's own records name: finished steps of `checkpoint.json` and every
/// `evidence` field of `campaign-result.json` (read as plain JSON: this layer knows no plan).
fn named_evidence(dir: &Path) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let read = |name: &str| -> Option<serde_json::Value> {
        serde_json::from_slice(&std::fs::read(dir.join(name)).ok()?).ok()
    };
    if let Some(ck) = read(super::bundle::CHECKPOINT) {
        for s in ck["steps"].as_array().into_iter().flatten() {
            let done = matches!(s["status"].as_str(), Some("done") | Some("failed"));
            if let (true, Some(e)) = (done, s["evidence"].as_str()) {
                let by = format!(
                    "{} (step {})",
                    super::bundle::CHECKPOINT,
                    s["number"].as_u64().unwrap_or(0)
                );
                out.push((e.to_string(), by));
            }
        }
    }
    if let Some(r) = read(super::bundle::RESULT) {
        out.extend(
            evidence_names(&r)
                .into_iter()
                .map(|s| (s, super::bundle::RESULT.to_string())),
        );
    }
    out
}

/// Every file an `evidence` field names anywhere in a record (a string or a list of strings):
/// what `verify` expects in the bundle, and what the recorder checks before it calls a run
/// complete, so the two never disagree.
pub fn evidence_names(v: &serde_json::Value) -> Vec<String> {
    fn walk(v: &serde_json::Value, out: &mut Vec<String>) {
        match v {
            serde_json::Value::Object(m) => {
                for (k, x) in m {
                    match (k.as_str(), x) {
                        ("evidence", serde_json::Value::String(s)) if !s.is_empty() => {
                            out.push(s.clone())
                        }
                        ("evidence", serde_json::Value::Array(a)) => {
                            out.extend(a.iter().filter_map(|s| s.as_str()).map(str::to_string))
                        }
                        _ => walk(x, out),
                    }
                }
            }
            serde_json::Value::Array(a) => a.iter().for_each(|x| walk(x, out)),
            _ => {}
        }
    }
    let mut out = Vec::new();
    walk(v, &mut out);
    out
}

/// Re-hashes the bundle against its manifest, checks the manifest's root digest (and the one a
/// person kept, when given) and that every evidence file the bundle's records name is there.
/// `Ok(vec![])` means nothing changed.
pub fn verify(dir: &Path, digest: Option<&str>) -> anyhow::Result<(Manifest, Vec<Problem>)> {
    let m = read(dir)?;
    let mut problems = Vec::new();
    let actual_root = root_digest(&m);
    let sealed = match &m.root_sha256 {
        Some(r) if *r == actual_root => true,
        Some(r) => {
            problems.push(Problem::ManifestEdited {
                detail: format!(
                    "its fields do not match its root digest: recorded {}…, computed {}…",
                    short(r),
                    short(&actual_root)
                ),
            });
            false
        }
        None => {
            problems.push(Problem::ManifestEdited {
                detail: "it has no root digest (written before bakeoff sealed manifests, or the digest was removed); its own fields are not covered".into(),
            });
            false
        }
    };
    if let Some(d) = digest {
        let d = d.trim().to_ascii_lowercase();
        if d != actual_root {
            problems.push(Problem::DigestMismatch {
                expected: d,
                actual: actual_root.clone(),
            });
        }
    }
    let mut listed = std::collections::BTreeSet::new();
    for e in &m.files {
        listed.insert(e.path.clone());
        let p = dir.join(&e.path);
        if std::fs::symlink_metadata(&p).is_ok_and(|md| !md.file_type().is_file()) {
            continue; // reported by the walk below
        }
        match hash_file(&p) {
            Ok((sha, n)) if sha == e.sha256 && n == e.bytes => {}
            Ok((sha, n)) if !sealed => problems.push(Problem::ManifestEntry {
                path: e.path.clone(),
                detail: if sha != e.sha256 {
                    format!(
                        "records sha256 {}…, the file's is {}…",
                        short(&e.sha256),
                        short(&sha)
                    )
                } else {
                    format!("records {} bytes, the file has {n}", e.bytes)
                },
            }),
            Ok((sha, _)) => problems.push(Problem::Changed {
                path: e.path.clone(),
                expected: e.sha256.clone(),
                actual: sha,
            }),
            Err(_) => problems.push(Problem::Missing {
                path: e.path.clone(),
            }),
        }
    }
    let l = list_files(dir).map_err(|e| anyhow::anyhow!("cannot list {}: {e}", dir.display()))?;
    for (p, what) in &l.odd {
        problems.push(Problem::NotRegular {
            path: rel_string(p),
            what,
        });
    }
    let present: std::collections::BTreeSet<String> =
        l.files.iter().map(|p| rel_string(p)).collect();
    for s in &present {
        if !listed.contains(s) {
            problems.push(Problem::Unlisted { path: s.clone() });
        }
    }
    let mut seen = std::collections::BTreeSet::new();
    for (path, by) in named_evidence(dir) {
        if !listed.contains(&path) && !present.contains(&path) && seen.insert(path.clone()) {
            problems.push(Problem::Unaccounted { path, by });
        }
    }
    // The validity block against the step files it was gathered from (cheap: they are read
    // once each), so a re-sealed manifest cannot carry another block.
    if !m.validity.is_empty() {
        let again = super::validity::gather(dir);
        for (arm, v) in &m.validity {
            if again.get(arm) != Some(v) {
                problems.push(Problem::Validity { arm: arm.clone() });
            }
        }
    }
    Ok((m, problems))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(p: &[Problem]) -> Vec<String> {
        p.iter().map(|x| x.to_string()).collect()
    }

    fn bundle() -> tempfile::TempDir {
        let d = tempfile::tempdir().unwrap();
        std::fs::write(d.path().join("a.json"), b"{}").unwrap();
        std::fs::create_dir(d.path().join("logs")).unwrap();
        std::fs::write(d.path().join("logs/engine.log"), b"hello").unwrap();
        std::fs::write(d.path().join("b.json"), b"[]").unwrap();
        d
    }

    fn edit_manifest(d: &Path, f: impl FnOnce(&mut serde_json::Value)) {
        let p = d.join(MANIFEST);
        let mut v: serde_json::Value = serde_json::from_slice(&std::fs::read(&p).unwrap()).unwrap();
        f(&mut v);
        std::fs::write(&p, serde_json::to_vec_pretty(&v).unwrap()).unwrap();
    }

    #[test]
    fn verify_names_changed_missing_and_unlisted_files() {
        let d = bundle();
        let m = write(d.path()).unwrap();
        assert_eq!(m.files.len(), 3);
        assert_eq!(m.files[1].path, "b.json");
        assert_eq!(
            m.files[0].sha256,
            "44136fa355b3678a1146ad16f7e8649e94fb4fc21fe77e8310c060f61caaff8a"
        );
        assert_eq!(m.root_sha256.as_deref(), Some(root_digest(&m).as_str()));
        assert!(verify(d.path(), None).unwrap().1.is_empty());
        assert!(verify(d.path(), m.root_sha256.as_deref())
            .unwrap()
            .1
            .is_empty());

        std::fs::write(d.path().join("a.json"), b"{ }").unwrap();
        std::fs::remove_file(d.path().join("b.json")).unwrap();
        std::fs::write(d.path().join("extra.txt"), b"x").unwrap();
        let (_, p) = verify(d.path(), None).unwrap();
        let text = names(&p);
        assert_eq!(p.len(), 3, "{text:?}");
        assert!(text[0].starts_with("changed: a.json"));
        assert!(text[1].starts_with("missing: b.json"));
        assert!(text[2].starts_with("not in manifest: extra.txt"));
    }

    #[test]
    fn hidden_files_are_listed_and_symlinks_refused() {
        let d = bundle();
        std::fs::write(d.path().join(".hidden.json"), b"1").unwrap();
        let m = write(d.path()).unwrap();
        assert!(m.files.iter().any(|e| e.path == ".hidden.json"));
        // Added after the manifest: reported.
        std::fs::write(d.path().join(".x.json"), b"{}").unwrap();
        let (_, p) = verify(d.path(), None).unwrap();
        assert_eq!(names(&p), vec!["not in manifest: .x.json".to_string()]);
        std::fs::remove_file(d.path().join(".x.json")).unwrap();
        std::os::unix::fs::symlink("/etc/hostname", d.path().join("link.json")).unwrap();
        let (_, p) = verify(d.path(), None).unwrap();
        assert_eq!(p.len(), 1, "{:?}", names(&p));
        assert_eq!(p[0].file(), "link.json");
        assert!(p[0]
            .to_string()
            .starts_with("refused: link.json is a symlink"));
        let e = write(d.path()).unwrap_err().to_string();
        assert!(e.contains("link.json is a symlink"), "{e}");
        // A listed file replaced by a symlink: refused, not hashed through the link.
        std::fs::remove_file(d.path().join("link.json")).unwrap();
        write(d.path()).unwrap();
        std::fs::remove_file(d.path().join("b.json")).unwrap();
        std::os::unix::fs::symlink("a.json", d.path().join("b.json")).unwrap();
        let (_, p) = verify(d.path(), None).unwrap();
        assert_eq!(names(&p).len(), 1, "{:?}", names(&p));
        assert_eq!(p[0].file(), "b.json");
    }

    #[test]
    fn edits_of_the_manifest_name_the_manifest() {
        type Edit = fn(&mut serde_json::Value);
        let edits: [(&str, Edit); 5] = [
            ("bytes", |v| v["files"][0]["bytes"] = 99.into()),
            ("version", |v| v["bakeoff_version"] = "9.9.9".into()),
            ("hash", |v| {
                v["files"][1]["sha256"] =
                    "0000000000000000000000000000000000000000000000000000000000000000".into()
            }),
            ("entry removed", |v| {
                v["files"].as_array_mut().unwrap().remove(2);
            }),
            ("root removed", |v| {
                v.as_object_mut().unwrap().remove("root_sha256");
            }),
        ];
        for (what, f) in edits {
            let d = bundle();
            write(d.path()).unwrap();
            edit_manifest(d.path(), f);
            let (_, p) = verify(d.path(), None).unwrap();
            let text = names(&p);
            assert!(!p.is_empty(), "{what}: verify passed");
            assert!(
                p.iter()
                    .any(|x| matches!(x, Problem::ManifestEdited { .. })),
                "{what}: {text:?}"
            );
            // No data file is blamed for the manifest's edit.
            assert!(
                !p.iter().any(|x| matches!(x, Problem::Changed { .. })),
                "{what}: {text:?}"
            );
            if what == "hash" {
                assert!(
                    text.iter()
                        .any(|t| t
                            .starts_with("edited: artifact-manifest.json: its entry for b.json")),
                    "{text:?}"
                );
            }
        }
    }

    #[test]
    fn a_resealed_manifest_fails_against_the_kept_digest_and_named_evidence_is_checked() {
        let d = bundle();
        std::fs::write(
            d.path().join(super::super::bundle::CHECKPOINT),
            br#"{"steps":[{"number":3,"evidence":"b.json","status":"done"},{"number":4,"evidence":"never.json","status":"skipped"}]}"#,
        )
        .unwrap();
        let kept = write(d.path()).unwrap().root_sha256.unwrap();
        // b.json deleted together with its entry, the manifest re-sealed.
        std::fs::remove_file(d.path().join("b.json")).unwrap();
        edit_manifest(d.path(), |v| {
            v["files"]
                .as_array_mut()
                .unwrap()
                .retain(|e| e["path"] != "b.json");
            let m: Manifest = serde_json::from_value(v.clone()).unwrap();
            v["root_sha256"] = root_digest(&m).into();
        });
        let (_, p) = verify(d.path(), None).unwrap();
        assert_eq!(
            names(&p),
            vec!["missing: b.json is named by checkpoint.json (step 3) but is neither in the bundle nor in artifact-manifest.json (deleted with its entry?)".to_string()]
        );
        let (_, p) = verify(d.path(), Some(&kept)).unwrap();
        assert!(
            p.iter()
                .any(|x| matches!(x, Problem::DigestMismatch { .. })),
            "{:?}",
            names(&p)
        );
    }
}
