//! Name rules and small checks shared by the table checks.

use crate::campaign::diag::{FieldPath, Reporter};
use std::collections::HashSet;

pub(super) fn p(dotted: &str) -> FieldPath {
    FieldPath::parse(dotted)
}

/// Lowercase letters, digits and single `-` between them.
pub fn is_id(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 64
        && s.split('-').all(|part| {
            !part.is_empty()
                && part
                    .chars()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit())
        })
}

/// A POSIX environment variable name.
pub fn is_env_name(s: &str) -> bool {
    let mut chars = s.chars();
    matches!(chars.next(), Some(c) if c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// Whether a variable or flag name looks like it holds a secret: one of its words (split at
/// anything but letters and digits) is KEY, APIKEY, TOKEN, SECRET, PASSWORD, PASSWD or
/// CREDENTIAL(S), or ends with TOKEN, SECRET, PASSWORD or APIKEY (`HFTOKEN`); unless a word is
/// FILE, PATH, DIR or ENV (the value then names where the secret is, not the secret). Whole words,
/// so `MAX_TOKENS`, `--max-tokens` and `TOKENIZERS_PARALLELISM` are not secrets.
pub fn looks_secret(name: &str) -> bool {
    let words: Vec<String> = name
        .split(|c: char| !c.is_ascii_alphanumeric())
        .filter(|w| !w.is_empty())
        .map(|w| w.to_ascii_uppercase())
        .collect();
    if words
        .iter()
        .any(|w| matches!(w.as_str(), "FILE" | "PATH" | "DIR" | "ENV"))
    {
        return false;
    }
    words.iter().any(|w| {
        matches!(
            w.as_str(),
            "KEY"
                | "APIKEY"
                | "TOKEN"
                | "SECRET"
                | "PASSWORD"
                | "PASSWD"
                | "CREDENTIAL"
                | "CREDENTIALS"
        ) || ["TOKEN", "SECRET", "PASSWORD", "APIKEY"]
            .iter()
            .any(|s| w.ends_with(s))
    })
}

/// A literal that cannot be a secret (a number or a boolean), so a secret-looking name may hold it.
pub(super) fn harmless_literal(v: &str) -> bool {
    v.is_empty() || v.parse::<f64>().is_ok() || matches!(v, "true" | "false")
}

/// Reports each item of the list at `path` that repeats an earlier one.
pub(super) fn no_repeats<T: Eq + std::hash::Hash>(
    r: &mut Reporter,
    path: &str,
    items: &[T],
    name: impl Fn(&T) -> &str,
    fix: &str,
) {
    let mut seen = HashSet::new();
    for (i, x) in items.iter().enumerate() {
        if !seen.insert(x) {
            r.error(
                &p(path).index(i),
                format!("`{}` is listed twice", name(x)),
                fix,
            );
        }
    }
}

/// The ranges every count, size and duration of a campaign must fit (docs/campaign.md, *Ranges*):
/// wide enough for any real campaign, small enough that no valid campaign can exhaust memory,
/// sockets or time arithmetic.
pub mod limits {
    /// Prompt and context sizes, tokens (`matched_prompt_tokens`, `long_context_targets`,
    /// `served_context`).
    pub const TOKENS: u64 = 10_000_000;
    /// A completion's `max_tokens` (workload and retrieval).
    pub const MAX_TOKENS: u64 = 1_000_000;
    /// Warm repetitions per arm.
    pub const WARM_REPETITIONS: u64 = 100_000;
    /// One concurrency level: requests in flight at once (each holds a socket).
    pub const CONCURRENCY: u64 = 4096;
    /// Concurrency levels per campaign.
    pub const CONCURRENCY_LEVELS: u64 = 64;
    /// Tool-gate requests per variant.
    pub const TOOLS_BATCH: u64 = 10_000;
    /// Quality repetitions per item.
    pub const QUALITY_REPETITIONS: u64 = 1_000;
    /// Durations, seconds (`ready_timeout_s`, `stop_grace_s`): a week.
    pub const SECONDS: u64 = 604_800;
    /// GPU memory, MiB (`memory_reserve_mib`, `idle_baseline_max_mib`): 16 TiB.
    pub const MIB: u64 = 16 * 1024 * 1024;
    /// Reasoning headroom tokens.
    pub const REASONING_HEADROOM: u64 = 1_000_000;
}

/// Reports `v` outside `lo..=hi`, naming the range (one line).
pub(super) fn within(r: &mut Reporter, path: &FieldPath, v: u64, lo: u64, hi: u64, what: &str) {
    if v < lo || v > hi {
        r.error(
            path,
            format!("{v} is outside the range {lo}..={hi} ({what})"),
            format!("give a value from {lo} to {hi}"),
        );
    }
}

/// The shape label of a token count: the count itself below 1000, else whole thousands (`4k` for
/// 3613 or 4096, `128k` for 131072).
pub fn token_label(tokens: u64) -> String {
    if tokens < 1000 {
        tokens.to_string()
    } else if tokens.is_multiple_of(1024) {
        format!("{}k", tokens / 1024)
    } else {
        format!("{}k", (tokens + 500) / 1000)
    }
}
