//! Profile files: one TOML file per served model, with its performance model and declared faults.
//!
//! Every key is documented in docs/reference-engine.md. Parsing is strict: an unknown key, a wrong
//! type or an out-of-range value is one error line naming the file and the key.

use std::path::{Path, PathBuf};

/// What the engine does with a request that declares `tools`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ToolBehavior {
    /// Calls the right tool with arguments built from the schema and the user message.
    Correct,
    /// Like `Correct`, but omits the first `required` property.
    DropRequiredArg,
    /// Answers in text, as if no tools were offered.
    IgnoreTools,
    /// Calls the tool with arguments that are not valid JSON.
    MalformedArguments,
}

impl ToolBehavior {
    pub fn as_str(self) -> &'static str {
        match self {
            ToolBehavior::Correct => "correct",
            ToolBehavior::DropRequiredArg => "drop_required_arg",
            ToolBehavior::IgnoreTools => "ignore_tools",
            ToolBehavior::MalformedArguments => "malformed_arguments",
        }
    }
}

/// One served model: its declared performance model and faults.
#[derive(Debug, Clone, PartialEq)]
pub struct Profile {
    /// The file it came from (for messages).
    pub source: PathBuf,
    /// Served model id (`model` in requests, `id` in /v1/models).
    pub model: String,
    /// Time from process start until /health answers 200, ms.
    pub startup_ms: f64,
    /// Fixed part of the time to the first visible content token, ms.
    pub ttft_ms: f64,
    /// Prefill speed for the uncached prompt tokens, tokens/s; 0 = prefill costs nothing.
    pub prefill_tok_s: f64,
    /// Decode speed of one stream alone, tokens/s.
    pub decode_tok_s: f64,
    /// Fractional decode slowdown per extra running request.
    pub concurrency_slowdown: f64,
    /// Served context length, tokens.
    pub context_tokens: u64,
    /// KV-cache capacity, tokens; 0 = unlimited.
    pub kv_tokens: u64,
    /// Tokens per streamed chunk after the first token.
    pub tokens_per_chunk: u64,
    /// Per-draft-token acceptance probability; 0 = speculative decoding off.
    pub spec_acceptance: f64,
    /// Draft tokens proposed per speculative step.
    pub spec_draft_tokens: u64,
    /// Fractional decode slowdown per 1,000 prompt tokens.
    pub long_context_decode_slowdown: f64,
    /// Reasoning tokens emitted before the answer (chat only).
    pub reasoning_tokens: u64,
    /// Flush a role-only chunk as soon as the request is admitted.
    pub early_role_chunk: bool,
    /// Reuse 16-token prompt blocks across requests.
    pub prefix_cache: bool,
    pub tool_behavior: ToolBehavior,
    /// Retrieval questions are answered correctly up to this many prompt tokens.
    pub retrieval_effective_tokens: u64,
    /// Fault: after startup_ms, write this line to stderr and exit with code 1.
    pub fail_at_startup: Option<String>,
    /// Fault: exit with code 70 half way through the output of request number N.
    pub crash_after_requests: Option<u64>,
    /// Fault: every stream stops writing after K SSE events (the connection stays open).
    pub stall_after_chunks: Option<u64>,
    /// Fault: fraction of requests answered HTTP 500.
    pub error_rate: f64,
    /// Fault: requests numbered above N wait `slow_ttft_ms` longer for their first token (an
    /// engine that degrades under sustained traffic; a promotion's bake must catch it).
    pub slow_after_requests: Option<u64>,
    pub slow_ttft_ms: f64,
    /// Fault: no answer is longer than N tokens (reasoning included), whatever `max_tokens` and
    /// `ignore_eos` ask: an engine that does not honor the requested output length.
    pub max_output_tokens: Option<u64>,
    /// Fault: requests numbered above N call their tool with arguments that are not JSON (tool
    /// calls that break in service; a promotion's bake canary must catch it).
    pub tools_break_after_requests: Option<u64>,
}

impl Profile {
    /// A profile with every default and the given model id (handy in tests).
    pub fn with_model(model: &str) -> Profile {
        Profile {
            source: PathBuf::from("<defaults>"),
            model: model.to_string(),
            startup_ms: 0.0,
            ttft_ms: 50.0,
            prefill_tok_s: 0.0,
            decode_tok_s: 50.0,
            concurrency_slowdown: 0.0,
            context_tokens: 32_768,
            kv_tokens: 0,
            tokens_per_chunk: 1,
            spec_acceptance: 0.0,
            spec_draft_tokens: 3,
            long_context_decode_slowdown: 0.0,
            reasoning_tokens: 0,
            early_role_chunk: false,
            prefix_cache: false,
            tool_behavior: ToolBehavior::Correct,
            retrieval_effective_tokens: u64::MAX,
            fail_at_startup: None,
            crash_after_requests: None,
            stall_after_chunks: None,
            error_rate: 0.0,
            slow_after_requests: None,
            slow_ttft_ms: 0.0,
            max_output_tokens: None,
            tools_break_after_requests: None,
        }
    }

    /// Expected tokens per speculative step: 1 + Σ_{i=1..k} α^i (1 when speculation is off).
    pub fn spec_expected_tokens(&self) -> f64 {
        if self.spec_acceptance <= 0.0 {
            return 1.0;
        }
        let mut e = 1.0;
        let mut p = 1.0;
        for _ in 0..self.spec_draft_tokens {
            p *= self.spec_acceptance;
            e += p;
        }
        e
    }

    /// Parse a profile from TOML text; `source` names the file in error messages.
    pub fn parse(text: &str, source: &Path) -> anyhow::Result<Profile> {
        let file = source.display();
        let table: toml::Table = toml::from_str(text).map_err(|e| {
            let line = e
                .span()
                .map(|s| text[..s.start.min(text.len())].matches('\n').count() + 1)
                .unwrap_or(1);
            anyhow::anyhow!(
                "{file}:{line}: invalid TOML: {}; fix the TOML syntax at that line (one `key = value` per line, each key once)",
                e.message().trim().replace('\n', " ")
            )
        })?;
        let mut p = Profile::with_model("");
        p.source = source.to_path_buf();
        let mut have_model = false;
        for (key, value) in &table {
            let f = Field {
                file: &file,
                line: key_line(text, key),
                key,
                value,
            };
            match key.as_str() {
                "model" => {
                    p.model = f.string()?;
                    if p.model.is_empty() || p.model.chars().any(|c| c.is_control()) {
                        return Err(f.bad("a non-empty model id without control characters"));
                    }
                    have_model = true;
                }
                "startup_ms" => p.startup_ms = f.number(0.0, 86_400_000.0)?,
                "ttft_ms" => p.ttft_ms = f.number(0.0, 3_600_000.0)?,
                "prefill_tok_s" => p.prefill_tok_s = f.number(0.0, f64::MAX)?,
                "decode_tok_s" => {
                    p.decode_tok_s = f.number(0.0, 1_000_000.0)?;
                    if p.decode_tok_s <= 0.0 {
                        return Err(f.bad("a number > 0"));
                    }
                }
                "concurrency_slowdown" => p.concurrency_slowdown = f.number(0.0, 1000.0)?,
                "context_tokens" => p.context_tokens = f.integer(1, u32::MAX as u64)?,
                "kv_tokens" => p.kv_tokens = f.integer(0, u64::MAX >> 8)?,
                "tokens_per_chunk" => p.tokens_per_chunk = f.integer(1, 1_000_000)?,
                "spec_acceptance" => p.spec_acceptance = f.number(0.0, 1.0)?,
                "spec_draft_tokens" => p.spec_draft_tokens = f.integer(1, 64)?,
                "long_context_decode_slowdown" => {
                    p.long_context_decode_slowdown = f.number(0.0, 1000.0)?
                }
                "reasoning_tokens" => p.reasoning_tokens = f.integer(0, 10_000_000)?,
                "early_role_chunk" => p.early_role_chunk = f.boolean()?,
                "prefix_cache" => p.prefix_cache = f.boolean()?,
                "tool_behavior" => {
                    p.tool_behavior = match f.string()?.as_str() {
                        "correct" => ToolBehavior::Correct,
                        "drop_required_arg" => ToolBehavior::DropRequiredArg,
                        "ignore_tools" => ToolBehavior::IgnoreTools,
                        "malformed_arguments" => ToolBehavior::MalformedArguments,
                        _ => {
                            return Err(f.bad(
                                "one of \"correct\", \"drop_required_arg\", \"ignore_tools\", \"malformed_arguments\"",
                            ))
                        }
                    }
                }
                "retrieval_effective_tokens" => {
                    p.retrieval_effective_tokens = f.integer(0, u64::MAX >> 8)?
                }
                "fail_at_startup" => {
                    let s = f.string()?;
                    if s.contains('\n') {
                        return Err(f.bad("a single log line (no newline)"));
                    }
                    p.fail_at_startup = Some(s);
                }
                "crash_after_requests" => p.crash_after_requests = Some(f.integer(1, u64::MAX >> 8)?),
                "stall_after_chunks" => p.stall_after_chunks = Some(f.integer(0, u64::MAX >> 8)?),
                "error_rate" => p.error_rate = f.number(0.0, 1.0)?,
                "slow_after_requests" => {
                    p.slow_after_requests = Some(f.integer(0, u64::MAX >> 8)?)
                }
                "slow_ttft_ms" => p.slow_ttft_ms = f.number(0.0, 3_600_000.0)?,
                "max_output_tokens" => p.max_output_tokens = Some(f.integer(1, u64::MAX >> 8)?),
                "tools_break_after_requests" => {
                    p.tools_break_after_requests = Some(f.integer(0, u64::MAX >> 8)?)
                }
                _ => {
                    anyhow::bail!(
                        "{file}:{}: {key}: unknown key; remove it or use one of the known keys: {}",
                        f.line,
                        KNOWN_KEYS.join(", ")
                    )
                }
            }
        }
        if !have_model {
            anyhow::bail!(
                "{file}:1: model: missing (the served model id); add model = \"…\" at the top"
            );
        }
        Ok(p)
    }

    /// Read and parse one profile file.
    pub fn load(path: &Path) -> anyhow::Result<Profile> {
        let text = std::fs::read_to_string(path).map_err(|e| {
            anyhow::anyhow!(
                "{}: cannot read the profile: {e}; give the path of a readable profile file",
                path.display()
            )
        })?;
        Profile::parse(&text, path)
    }
}

/// Every key a profile may hold, in documentation order.
pub const KNOWN_KEYS: &[&str] = &[
    "model",
    "startup_ms",
    "ttft_ms",
    "prefill_tok_s",
    "decode_tok_s",
    "concurrency_slowdown",
    "context_tokens",
    "kv_tokens",
    "tokens_per_chunk",
    "spec_acceptance",
    "spec_draft_tokens",
    "long_context_decode_slowdown",
    "reasoning_tokens",
    "early_role_chunk",
    "prefix_cache",
    "tool_behavior",
    "retrieval_effective_tokens",
    "fail_at_startup",
    "crash_after_requests",
    "stall_after_chunks",
    "error_rate",
    "slow_after_requests",
    "slow_ttft_ms",
    "max_output_tokens",
    "tools_break_after_requests",
];

/// The 1-based line where `key` is set in a flat TOML file (1 when it cannot be found).
fn key_line(text: &str, key: &str) -> usize {
    text.lines()
        .position(|l| {
            let l = l.trim_start();
            let l = l.strip_prefix('"').unwrap_or(l);
            l.strip_prefix(key).is_some_and(|rest| {
                let rest = rest.strip_prefix('"').unwrap_or(rest).trim_start();
                rest.starts_with('=')
            })
        })
        .map_or(1, |n| n + 1)
}

struct Field<'a> {
    file: &'a std::path::Display<'a>,
    line: usize,
    key: &'a str,
    value: &'a toml::Value,
}

impl Field<'_> {
    fn bad(&self, want: &str) -> anyhow::Error {
        let got = self.value.to_string();
        let got: String = got.chars().take(60).collect();
        anyhow::anyhow!(
            "{}:{}: {}: must be {want}, got {got}; give {want}",
            self.file,
            self.line,
            self.key
        )
    }

    fn number(&self, min: f64, max: f64) -> anyhow::Result<f64> {
        let v = match self.value {
            toml::Value::Integer(i) => *i as f64,
            toml::Value::Float(f) => *f,
            _ => return Err(self.bad(&format!("a number in [{min}, {max}]"))),
        };
        if !v.is_finite() || v < min || v > max {
            let want = if max == f64::MAX {
                format!("a finite number >= {min}")
            } else {
                format!("a number in [{min}, {max}]")
            };
            return Err(self.bad(&want));
        }
        Ok(v)
    }

    fn integer(&self, min: u64, max: u64) -> anyhow::Result<u64> {
        match self.value {
            toml::Value::Integer(i) if *i >= 0 && (*i as u64) >= min && (*i as u64) <= max => {
                Ok(*i as u64)
            }
            _ => Err(self.bad(&format!("an integer in [{min}, {max}]"))),
        }
    }

    fn boolean(&self) -> anyhow::Result<bool> {
        match self.value {
            toml::Value::Boolean(b) => Ok(*b),
            _ => Err(self.bad("true or false")),
        }
    }

    fn string(&self) -> anyhow::Result<String> {
        match self.value {
            toml::Value::String(s) => Ok(s.clone()),
            _ => Err(self.bad("a string")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> anyhow::Result<Profile> {
        Profile::parse(text, Path::new("p.toml"))
    }

    #[test]
    fn defaults_and_values() {
        let p = parse("model = \"m\"\nttft_ms = 50\ndecode_tok_s = 80.5\nprefix_cache = true\n")
            .unwrap();
        assert_eq!(p.model, "m");
        assert_eq!(p.ttft_ms, 50.0);
        assert_eq!(p.decode_tok_s, 80.5);
        assert!(p.prefix_cache);
        assert_eq!(p.tokens_per_chunk, 1);
        assert_eq!(p.retrieval_effective_tokens, u64::MAX);
    }

    #[test]
    fn errors_name_file_and_key() {
        // `FILE:LINE: key: problem; fix`, one line.
        let one = |text: &str, want: &str| {
            let e = parse(text).unwrap_err().to_string();
            assert!(e.starts_with(want), "want {want:?}, got {e:?}");
            assert!(e.contains("; ") && !e.contains('\n'), "{e}");
            e
        };
        let e = one(
            "model = \"m\"\nbogus = 1\n",
            "p.toml:2: bogus: unknown key; ",
        );
        assert!(e.contains("decode_tok_s"), "{e}");
        one(
            "model = \"m\"\nttft_ms = \"fast\"\n",
            "p.toml:2: ttft_ms: must be a number",
        );
        let e = one(
            "model = \"m\"\n\nerror_rate = 1.5\n",
            "p.toml:3: error_rate: ",
        );
        assert!(e.contains("[0, 1]"), "{e}");
        let e = one(
            "model = \"m\"\nconcurrency_slowdown = 1e300\n",
            "p.toml:2: concurrency_slowdown: must be a number in [0, 1000]",
        );
        assert!(e.contains("give a number in [0, 1000]"), "{e}");
        one("ttft_ms = 5\n", "p.toml:1: model: missing");
        one("model = \n", "p.toml:1: invalid TOML");
        one("model = \"m\"\nmodel = \"n\"\n", "p.toml:2: invalid TOML");
        one(
            "model = \"m\"\ntool_behavior = \"x\"\n",
            "p.toml:2: tool_behavior: must be one of",
        );
    }

    #[test]
    fn spec_expectation() {
        let mut p = Profile::with_model("m");
        assert_eq!(p.spec_expected_tokens(), 1.0);
        p.spec_acceptance = 0.5;
        p.spec_draft_tokens = 3;
        assert!((p.spec_expected_tokens() - 1.875).abs() < 1e-12);
    }
}
