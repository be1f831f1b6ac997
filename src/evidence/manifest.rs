//! The artifact manifest: every evidence file with its size and SHA-256, and its re-check.

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use std::io::Read;
use std::path::{Path, PathBuf};

pub const MANIFEST: &str = super::bundle::MANIFEST;
pub const SCHEMA: &str = "bakeoff.artifact-manifest/v1";

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

/// Every regular file under `dir` except the manifest itself and temp files, sorted.
fn list_files(dir: &Path) -> std::io::Result<Vec<PathBuf>> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d)? {
            let e = e?;
            let p = e.path();
            let ft = e.file_type()?;
            if ft.is_dir() {
                stack.push(p);
            } else if ft.is_file() {
                let rel = p.strip_prefix(dir).expect("under dir").to_path_buf();
                let name = rel.to_string_lossy();
                if name == MANIFEST
                    || p.file_name()
                        .is_some_and(|n| n.to_string_lossy().starts_with('.'))
                {
                    continue;
                }
                out.push(rel);
            }
        }
    }
    out.sort();
    Ok(out)
}

fn rel_string(p: &Path) -> String {
    p.components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect::<Vec<_>>()
        .join("/")
}

/// Hashes every file in the bundle and writes `artifact-manifest.json` atomically.
pub fn write(dir: &Path) -> anyhow::Result<Manifest> {
    let mut files = Vec::new();
    for rel in list_files(dir).map_err(|e| anyhow::anyhow!("cannot list {}: {e}", dir.display()))? {
        let (sha256, bytes) = hash_file(&dir.join(&rel))
            .map_err(|e| anyhow::anyhow!("cannot hash {}: {e}", dir.join(&rel).display()))?;
        files.push(Entry {
            path: rel_string(&rel),
            bytes,
            sha256,
        });
    }
    let m = Manifest {
        schema: SCHEMA.to_string(),
        bakeoff_version: crate::VERSION.to_string(),
        files,
    };
    super::write_atomic(&dir.join(MANIFEST), &serde_json::to_vec_pretty(&m)?)?;
    Ok(m)
}

/// One discrepancy found by [`verify`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Problem {
    Changed {
        path: String,
        expected: String,
        actual: String,
    },
    Missing {
        path: String,
    },
    Unlisted {
        path: String,
    },
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
                &expected[..12.min(expected.len())],
                &actual[..12.min(actual.len())]
            ),
            Problem::Missing { path } => write!(
                f,
                "missing: {path} is in the manifest but not in the bundle"
            ),
            Problem::Unlisted { path } => write!(f, "not in manifest: {path}"),
        }
    }
}

/// Re-hashes the bundle against its manifest. `Ok(vec![])` means nothing changed.
pub fn verify(dir: &Path) -> anyhow::Result<(Manifest, Vec<Problem>)> {
    let mpath = dir.join(MANIFEST);
    let bytes = std::fs::read(&mpath).map_err(|e| {
        anyhow::anyhow!(
            "cannot read {}: {e}; is {} an evidence bundle?",
            mpath.display(),
            dir.display()
        )
    })?;
    let m: Manifest = serde_json::from_slice(&bytes)
        .map_err(|e| anyhow::anyhow!("{} is not a valid manifest: {e}", mpath.display()))?;
    let mut problems = Vec::new();
    let mut listed = std::collections::BTreeSet::new();
    for e in &m.files {
        listed.insert(e.path.clone());
        let p = dir.join(&e.path);
        match hash_file(&p) {
            Ok((sha, _)) if sha == e.sha256 => {}
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
    for rel in list_files(dir).map_err(|e| anyhow::anyhow!("cannot list {}: {e}", dir.display()))? {
        let s = rel_string(&rel);
        if !listed.contains(&s) {
            problems.push(Problem::Unlisted { path: s });
        }
    }
    Ok((m, problems))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn verify_names_changed_missing_and_unlisted_files() {
        let d = tempfile::tempdir().unwrap();
        std::fs::write(d.path().join("a.json"), b"{}").unwrap();
        std::fs::create_dir(d.path().join("logs")).unwrap();
        std::fs::write(d.path().join("logs/engine.log"), b"hello").unwrap();
        std::fs::write(d.path().join("b.json"), b"[]").unwrap();
        let m = write(d.path()).unwrap();
        assert_eq!(m.files.len(), 3);
        assert_eq!(m.files[1].path, "b.json");
        assert_eq!(
            m.files[0].sha256,
            "44136fa355b3678a1146ad16f7e8649e94fb4fc21fe77e8310c060f61caaff8a"
        );
        assert!(verify(d.path()).unwrap().1.is_empty());

        std::fs::write(d.path().join("a.json"), b"{ }").unwrap();
        std::fs::remove_file(d.path().join("b.json")).unwrap();
        std::fs::write(d.path().join("extra.txt"), b"x").unwrap();
        let (_, p) = verify(d.path()).unwrap();
        let text: Vec<String> = p.iter().map(|x| x.to_string()).collect();
        assert_eq!(p.len(), 3, "{text:?}");
        assert!(text[0].starts_with("changed: a.json"));
        assert!(text[1].starts_with("missing: b.json"));
        assert!(text[2].starts_with("not in manifest: extra.txt"));
    }
}
