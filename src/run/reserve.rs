//! Disk space held back for the run's last words. On a disk that fills and stays full, the
//! final `campaign-result.json`, `checkpoint.json` and manifest could not be written, and the
//! bundle would keep the in-run result that says `running …` although the run ended. The run
//! allocates a file of [`size`] bytes when the bundle opens; if a last write fails, the file is
//! removed and the write tried again in the space it held.

use std::path::{Path, PathBuf};

/// Bytes held back: room for the final result, checkpoint and manifest, which grow with the
/// number of plan steps (measured: a few hundred bytes to a few KiB per step each).
pub fn size(plan_steps: usize) -> u64 {
    (256 * 1024 + 16 * 1024 * plan_steps as u64).min(16 * 1024 * 1024)
}

/// The held space: a file whose blocks are allocated (not a sparse file), removed on drop.
pub struct Reserve {
    path: PathBuf,
}

impl Reserve {
    /// Allocates `bytes` at `path`. Err: the disk has no room even now (the run goes on; its
    /// last words are then retried without a reserve), or the file system cannot allocate.
    pub fn take(path: &Path, bytes: u64) -> std::io::Result<Reserve> {
        use std::os::fd::AsRawFd;
        let f = std::fs::File::create(path)?;
        // SAFETY: an open file descriptor and a length in range.
        let rc = unsafe { libc::posix_fallocate(f.as_raw_fd(), 0, bytes as libc::off_t) };
        if rc != 0 {
            drop(f);
            let _ = std::fs::remove_file(path);
            return Err(std::io::Error::from_raw_os_error(rc));
        }
        Ok(Reserve {
            path: path.to_path_buf(),
        })
    }

    /// Gives the space back (the disk is full and the last words need it).
    pub fn release(self) {}
}

impl Drop for Reserve {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::MetadataExt;

    #[test]
    fn the_reserve_holds_real_blocks_and_is_gone_once_released() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join(".space-reserve");
        let r = Reserve::take(&p, 300 * 1024).unwrap();
        let m = std::fs::metadata(&p).unwrap();
        assert_eq!(m.len(), 300 * 1024);
        // Allocated, not sparse: st_blocks counts 512-byte units.
        assert!(m.blocks() * 512 >= 300 * 1024, "{} blocks", m.blocks());
        r.release();
        assert!(!p.exists());
    }

    #[test]
    fn the_size_grows_with_the_plan_and_is_bounded() {
        assert!(size(30) > size(1));
        assert_eq!(size(1_000_000), 16 * 1024 * 1024);
    }
}
