//! The one folder the server may write under (`bakeoff mcp --root DIR`): every path a tool is
//! given to write to, and every resource it reads, resolves inside it, symlinks followed. A path
//! that leaves it (`..`, an absolute path elsewhere, a symlink pointing out) is refused before
//! anything is touched.

use std::path::{Component, Path, PathBuf};

/// The root, canonical (symlinks resolved), so a prefix test on resolved paths is exact.
#[derive(Debug, Clone)]
pub struct Root {
    dir: PathBuf,
}

impl Root {
    /// `dir` must exist and be a directory.
    pub fn new(dir: &Path) -> anyhow::Result<Root> {
        let dir = dir.canonicalize().map_err(|e| {
            anyhow::anyhow!(
                "--root {}: {e}; give an existing directory the server may write under",
                dir.display()
            )
        })?;
        if !dir.is_dir() {
            anyhow::bail!(
                "--root {}: not a directory; give an existing directory the server may write under",
                dir.display()
            );
        }
        Ok(Root { dir })
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// `p` (relative to the root, or absolute) resolved with symlinks followed as far as it
    /// exists; refused unless it stays under the root. `field` names the tool's input in the
    /// error. The path need not exist yet (a bundle folder still to be made).
    pub fn inside(&self, p: &str, field: &str) -> Result<PathBuf, String> {
        let given = Path::new(p);
        if p.trim().is_empty() {
            return Err(format!(
                "{field}: empty; give a path under {}",
                self.dir.display()
            ));
        }
        let joined = if given.is_absolute() {
            given.to_path_buf()
        } else {
            self.dir.join(given)
        };
        let resolved = resolve(&joined);
        if resolved.starts_with(&self.dir) {
            Ok(resolved)
        } else {
            Err(format!(
                "{field}: {p} resolves to {}, outside the server's folder {} (symlinks and `..` are followed); give a path under it",
                resolved.display(),
                self.dir.display()
            ))
        }
    }
}

/// `p` walked one component at a time: `..` leaves the folder reached so far (already
/// resolved, so it is the real parent), and every component that exists is resolved through
/// its symlinks; the part that does not exist yet is kept as written.
fn resolve(p: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for c in p.components() {
        match c {
            Component::ParentDir => {
                out.pop();
            }
            Component::CurDir => {}
            other => {
                out.push(other);
                if let Ok(real) = out.canonicalize() {
                    out = real;
                }
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_that_leave_the_root_are_refused_symlinks_included() {
        let t = tempfile::tempdir().unwrap();
        let root = Root::new(t.path()).unwrap();
        let outside = tempfile::tempdir().unwrap();
        std::os::unix::fs::symlink(outside.path(), t.path().join("link")).unwrap();
        assert!(root
            .inside("out", "output")
            .unwrap()
            .starts_with(root.dir()));
        assert!(root.inside("a/b/../c", "output").is_ok());
        for bad in [
            "../x",
            "a/../../x",
            "missing/../../x",
            "link/x",
            "a/../link/x",
            "/etc",
        ] {
            let e = root.inside(bad, "output").unwrap_err();
            assert!(
                e.starts_with("output: ") && e.contains("outside"),
                "{bad}: {e}"
            );
        }
        let abs = t.path().join("sub").display().to_string();
        assert!(root.inside(&abs, "output").is_ok());
    }
}
