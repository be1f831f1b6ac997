//! Evidence files: every file is written atomically (temp file, fsync, rename).

pub mod allocation;
pub mod bundle;
pub mod client_path;
pub mod crosscheck;
pub mod energy;
pub mod history;
pub mod lane_spread;
pub mod manifest;
pub mod result;
pub mod reuse;
pub mod types;
pub mod validity;

pub use types::{
    FailureClass, GateName, GateStatus, Policy, Promotion, QualityRisk, RankingMetric,
    RestorationStatus, ToolVariant, UnknownValue,
};

use std::io::Write;
use std::path::Path;

/// Writes `bytes` to `path` atomically: a crash or a full disk leaves either the old file or the
/// new one, never a torn one. Errors name the path and what to do.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> anyhow::Result<()> {
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    let name = path
        .file_name()
        .ok_or_else(|| anyhow::anyhow!("{}: not a file path", path.display()))?;
    let tmp = dir.join(format!(
        ".{}.tmp-{}",
        name.to_string_lossy(),
        std::process::id()
    ));
    let res = (|| -> std::io::Result<()> {
        let mut f = std::fs::File::create(&tmp)?;
        f.write_all(bytes)?;
        f.sync_all()?;
        std::fs::rename(&tmp, path)?;
        if let Ok(d) = std::fs::File::open(dir) {
            let _ = d.sync_all();
        }
        Ok(())
    })();
    if let Err(e) = res {
        let _ = std::fs::remove_file(&tmp);
        anyhow::bail!(
            "cannot write {}: {e}; check that the directory exists, is writable and has free space",
            path.display()
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writes_and_replaces() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("a.json");
        write_atomic(&p, b"one").unwrap();
        write_atomic(&p, b"two").unwrap();
        assert_eq!(std::fs::read(&p).unwrap(), b"two");
        // No temp files left behind.
        assert_eq!(std::fs::read_dir(d.path()).unwrap().count(), 1);
        let err = write_atomic(&d.path().join("missing/x.json"), b"x").unwrap_err();
        assert!(err.to_string().contains("missing/x.json"));
    }
}
