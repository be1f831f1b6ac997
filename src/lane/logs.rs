//! Log capture helpers: read what an arm wrote since its launch, keep the last lines, find an
//! out-of-memory line, and mask secret values in anything shown.

use super::EnvVal;
use std::io::{Read, Seek, SeekFrom};
use std::path::Path;

/// How much of a log (from its end) is read for a tail or a classification.
pub const SCAN_BYTES: usize = 1024 * 1024;

/// Replaces every secret value with `***`.
#[derive(Clone, Default)]
pub struct Masker {
    /// Non-empty secret values, longest first (so a secret containing another is masked whole).
    secrets: Vec<String>,
}

impl Masker {
    pub fn from_env(env: &[(String, EnvVal)]) -> Masker {
        let mut secrets: Vec<String> = env
            .iter()
            .filter(|(_, v)| v.secret && !v.value.is_empty())
            .map(|(_, v)| v.value.clone())
            .collect();
        secrets.sort_by(|a, b| b.len().cmp(&a.len()).then(a.cmp(b)));
        secrets.dedup();
        Masker { secrets }
    }

    pub fn mask(&self, text: &str) -> String {
        let mut out = text.to_string();
        for s in &self.secrets {
            if out.contains(s.as_str()) {
                out = out.replace(s.as_str(), "***");
            }
        }
        out
    }

    pub fn is_empty(&self) -> bool {
        self.secrets.is_empty()
    }
}

impl std::fmt::Debug for Masker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Masker({} secrets)", self.secrets.len())
    }
}

/// The text written to `path` after byte `offset`, at most the last `limit` bytes of it (lossy
/// UTF-8). Empty when the file is missing.
pub fn read_since(path: &Path, offset: u64, limit: usize) -> String {
    let Ok(mut f) = std::fs::File::open(path) else {
        return String::new();
    };
    let len = f.metadata().map(|m| m.len()).unwrap_or(0);
    let start = offset.max(len.saturating_sub(limit as u64)).min(len);
    if f.seek(SeekFrom::Start(start)).is_err() {
        return String::new();
    }
    let mut buf = Vec::new();
    let _ = f.take(limit as u64).read_to_end(&mut buf);
    String::from_utf8_lossy(&buf).into_owned()
}

/// Splits log text into display lines: a carriage return (progress bars) keeps only what was
/// drawn last on that line; trailing empty lines are dropped.
pub fn lines(text: &str) -> Vec<String> {
    let mut out: Vec<String> = text
        .split('\n')
        .map(|l| {
            let l = l.strip_suffix('\r').unwrap_or(l);
            l.rsplit('\r').next().unwrap_or(l).to_string()
        })
        .collect();
    while out.last().is_some_and(|l| l.trim().is_empty()) {
        out.pop();
    }
    out
}

/// The last `n` display lines of `text` (see [`lines`]).
pub fn last_lines(text: &str, n: usize) -> Vec<String> {
    let mut all = lines(text);
    all.drain(..all.len().saturating_sub(n));
    all
}

/// The last `n` lines written to `path` since `offset`, masked.
pub fn tail(path: &Path, offset: u64, n: usize, masker: &Masker) -> Vec<String> {
    let text = read_since(path, offset, SCAN_BYTES);
    last_lines(&text, n)
        .iter()
        .map(|l| masker.mask(l))
        .collect()
}

/// Lower-case substrings that mark an out-of-memory failure in an engine's log.
pub const OOM_PATTERNS: &[&str] = &[
    "cuda out of memory",
    "cudamalloc failed",
    "failed to allocate",
    "outofmemoryerror",
    "out of memory",
    "cuda_error_out_of_memory",
    "erroroutofdevicememory",
    "no available memory for the cache blocks",
];

/// The last line of `text` that matches an out-of-memory pattern.
pub fn oom_line(text: &str) -> Option<String> {
    lines(text)
        .into_iter()
        .rev()
        .find(|l| {
            let low = l.to_ascii_lowercase();
            OOM_PATTERNS.iter().any(|p| low.contains(p))
        })
        .map(|l| l.trim().to_string())
}

/// Words of a line that says why a program stopped (lower case).
const ERROR_PATTERNS: &[&str] = &[
    "error",
    "refused",
    "fatal",
    "failed",
    "failure",
    "exception",
    "traceback",
    "panic",
    "abort",
    "cannot",
    "can't",
    "unable",
    "invalid",
    "not found",
    "no such",
];

/// The last of `lines` that reads as an error. An engine that exits at start may write its
/// reason on stderr and its banner on stdout; Docker's log driver copies the two streams apart,
/// so the banner can land after the reason and "the last line" alone would hide why it stopped.
pub fn last_error_line(lines: &[String]) -> Option<&str> {
    lines
        .iter()
        .rev()
        .find(|l| {
            let low = l.to_ascii_lowercase();
            ERROR_PATTERNS.iter().any(|p| low.contains(p))
        })
        .map(|l| l.trim())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn masks_longest_secret_first() {
        let m = Masker::from_env(&[
            ("A".into(), EnvVal::secret("abc")),
            ("B".into(), EnvVal::secret("abcdef")),
            ("C".into(), EnvVal::literal("plain")),
            ("D".into(), EnvVal::secret("")),
        ]);
        assert_eq!(m.mask("x abcdef y abc plain"), "x *** y *** plain");
        assert!(!format!("{m:?}").contains("abc"));
    }

    #[test]
    fn lines_keep_last_progress_bar_state() {
        assert_eq!(
            lines("a\r\nload 10%\rload 50%\rload 100%\nb\n\n"),
            vec!["a", "load 100%", "b"]
        );
    }

    #[test]
    fn the_reason_wins_over_a_banner_copied_after_it() {
        let tail = last_lines(
            "loading\nengine refused the model: simulated\nlistening on :8000\n",
            5,
        );
        assert_eq!(
            last_error_line(&tail),
            Some("engine refused the model: simulated")
        );
        assert_eq!(last_error_line(&last_lines("loading\nready\n", 5)), None);
    }

    #[test]
    fn last_lines_are_the_last_n_display_lines() {
        assert_eq!(last_lines("a\nb\r\nc 1%\rc 9%\n\n", 2), vec!["b", "c 9%"]);
        assert_eq!(last_lines("a\n", 5), vec!["a"]);
        assert!(last_lines("", 3).is_empty());
    }

    #[test]
    fn finds_oom_lines() {
        let log = "loading\ntorch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB\nbye\n";
        assert_eq!(
            oom_line(log).unwrap(),
            "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB"
        );
        assert!(oom_line("ggml_backend_cuda_buffer_type_alloc_buffer: allocating 9000 MiB on device 0: cudaMalloc failed: out of memory").is_some());
        assert!(oom_line("error: unknown argument --foo\n").is_none());
    }

    #[test]
    fn reads_since_offset_only() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("log");
        std::fs::write(&p, "old run\n").unwrap();
        let off = std::fs::metadata(&p).unwrap().len();
        std::fs::OpenOptions::new()
            .append(true)
            .open(&p)
            .and_then(|mut f| std::io::Write::write_all(&mut f, b"new 1\nnew 2\n"))
            .unwrap();
        assert_eq!(
            tail(&p, off, 40, &Masker::default()),
            vec!["new 1", "new 2"]
        );
        assert_eq!(tail(&p, off, 1, &Masker::default()), vec!["new 2"]);
        assert!(tail(&d.path().join("missing"), 0, 5, &Masker::default()).is_empty());
    }
}
