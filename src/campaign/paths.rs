//! Lexical path resolution for the campaign file's relative paths.

use std::path::{Component, Path, PathBuf};

/// `p` made absolute against the current directory, with `.` and `..` removed lexically.
pub(crate) fn absolute(p: &Path) -> PathBuf {
    let joined = if p.is_absolute() {
        p.to_path_buf()
    } else {
        std::env::current_dir()
            .unwrap_or_else(|_| PathBuf::from("/"))
            .join(p)
    };
    normalize(&joined)
}

/// `base.join(p)` with `.` and `..` removed lexically (`p` unchanged when absolute).
pub(crate) fn resolve(base: &Path, p: &Path) -> PathBuf {
    normalize(&base.join(p))
}

fn normalize(p: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for c in p.components() {
        match c {
            Component::CurDir => {}
            Component::ParentDir => {
                if !out.pop() {
                    out.push("..");
                }
            }
            other => out.push(other.as_os_str()),
        }
    }
    out
}
