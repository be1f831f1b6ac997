//! Engine `/metrics` snapshots (Prometheus text format) and their differences.
//!
//! vLLM (`vllm:*`), SGLang (`sglang:*`), llama.cpp (`llamacpp:*`, with `--metrics`) and the
//! reference engine (vLLM's names) all serve it. A snapshot before and after each timed step gives
//! the engine's own counts for the step (tokens, requests, prefix-cache hits, accepted draft
//! tokens) beside bakeoff's.

use crate::client::{Conn, Target};
use serde::Serialize;
use std::collections::BTreeMap;
use std::time::Duration;

/// Largest `/metrics` body accepted.
const LIMIT: usize = 32 * 1024 * 1024;

/// Parsed metrics: `name{label="v",…}` (labels sorted by name) → value, and the declared
/// `# TYPE` of each family.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Metrics {
    pub values: BTreeMap<String, f64>,
    pub types: BTreeMap<String, String>,
}

/// A scrape: when it was taken (CLOCK_MONOTONIC ns) and what it said.
#[derive(Debug, Clone, Serialize)]
pub struct Snapshot {
    pub mono_ns: u64,
    pub url: String,
    pub metrics: Metrics,
}

/// Parses Prometheus text exposition (version 0.0.4). Comments other than `# TYPE` are skipped;
/// a line that cannot be parsed is skipped too (an engine's odd line must not lose the rest).
pub fn parse(text: &str) -> Metrics {
    let mut m = Metrics::default();
    for line in text.lines() {
        let line = line.trim();
        if line.is_empty() {
            continue;
        }
        if let Some(rest) = line.strip_prefix('#') {
            let mut f = rest.split_whitespace();
            if f.next() == Some("TYPE") {
                if let (Some(name), Some(t)) = (f.next(), f.next()) {
                    m.types.insert(name.to_string(), t.to_string());
                }
            }
            continue;
        }
        if let Some((key, value)) = parse_sample(line) {
            m.values.insert(key, value);
        }
    }
    m
}

/// One sample line → (canonical key, value).
fn parse_sample(line: &str) -> Option<(String, f64)> {
    let name_end = line
        .find(|c: char| c == '{' || c.is_whitespace())
        .unwrap_or(line.len());
    let name = &line[..name_end];
    if name.is_empty() {
        return None;
    }
    let mut rest = &line[name_end..];
    let mut labels: Vec<(String, String)> = Vec::new();
    if rest.starts_with('{') {
        let (ls, after) = parse_labels(&rest[1..])?;
        labels = ls;
        rest = after;
    }
    let value = rest.split_whitespace().next()?;
    let value = match value {
        "+Inf" | "Inf" => f64::INFINITY,
        "-Inf" => f64::NEG_INFINITY,
        v => v.parse::<f64>().ok()?,
    };
    labels.sort();
    let key = if labels.is_empty() {
        name.to_string()
    } else {
        let l: Vec<String> = labels.iter().map(|(k, v)| format!("{k}=\"{v}\"")).collect();
        format!("{name}{{{}}}", l.join(","))
    };
    Some((key, value))
}

/// Parses `k="v",k2="v2"}` (after the `{`); returns the labels (values still escaped) and the
/// text after the `}`.
fn parse_labels(s: &str) -> Option<(Vec<(String, String)>, &str)> {
    let mut labels = Vec::new();
    let mut rest = s.trim_start();
    loop {
        if let Some(after) = rest.strip_prefix('}') {
            return Some((labels, after));
        }
        let eq = rest.find('=')?;
        let key = rest[..eq].trim().to_string();
        let after_eq = rest[eq + 1..].trim_start();
        let body = after_eq.strip_prefix('"')?;
        let mut end = None;
        let mut escaped = false;
        for (i, c) in body.char_indices() {
            if escaped {
                escaped = false;
            } else if c == '\\' {
                escaped = true;
            } else if c == '"' {
                end = Some(i);
                break;
            }
        }
        let end = end?;
        labels.push((key, body[..end].to_string()));
        rest = body[end + 1..].trim_start();
        rest = rest.strip_prefix(',').unwrap_or(rest).trim_start();
    }
}

/// The sample's metric name (the key without labels).
pub fn name_of(key: &str) -> &str {
    key.split('{').next().unwrap_or(key)
}

/// Whether a sample counts up (its step delta is meaningful): counters' `_total`, histograms'
/// and summaries' `_count`, `_sum` and `_bucket`. `_created` timestamps and gauges are not.
pub fn is_counter(m: &Metrics, key: &str) -> bool {
    let name = name_of(key);
    if name.ends_with("_created") {
        return false;
    }
    if let Some(t) = m.types.get(name) {
        return t == "counter";
    }
    for suffix in ["_total", "_count", "_sum", "_bucket"] {
        if let Some(family) = name.strip_suffix(suffix) {
            match m.types.get(family).map(String::as_str) {
                Some("counter") if suffix == "_total" => return true,
                Some("histogram") | Some("summary") if suffix != "_total" => return true,
                Some(_) => return false,
                None => {}
            }
        }
    }
    // Untyped: the naming convention.
    name.ends_with("_total")
}

/// A gauge before and after.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct GaugePair {
    pub before: Option<f64>,
    pub after: Option<f64>,
}

/// What changed between two snapshots.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct MetricsDiff {
    /// Counter deltas (after − before; a counter that appeared counts from 0).
    pub counters: BTreeMap<String, f64>,
    /// Gauges before and after.
    pub gauges: BTreeMap<String, GaugePair>,
    /// Counters that went down: the engine restarted between the snapshots.
    pub resets: Vec<String>,
    /// Counters present only in the second snapshot.
    pub appeared: Vec<String>,
}

impl MetricsDiff {
    /// The summed delta of every counter whose name (without labels) is `name`.
    pub fn counter_sum(&self, name: &str) -> f64 {
        self.counters
            .iter()
            .filter(|(k, _)| name_of(k) == name)
            .map(|(_, v)| v)
            .sum()
    }
}

/// The difference between two snapshots of the same engine.
pub fn diff(before: &Metrics, after: &Metrics) -> MetricsDiff {
    let mut d = MetricsDiff::default();
    for (k, &a) in &after.values {
        let b = before.values.get(k).copied();
        if is_counter(after, k) {
            match b {
                Some(b) if a < b => {
                    d.resets.push(k.clone());
                    d.counters.insert(k.clone(), a);
                }
                Some(b) => {
                    d.counters.insert(k.clone(), a - b);
                }
                None => {
                    d.appeared.push(k.clone());
                    d.counters.insert(k.clone(), a);
                }
            }
        } else if !name_of(k).ends_with("_created") {
            d.gauges.insert(
                k.clone(),
                GaugePair {
                    before: b,
                    after: Some(a),
                },
            );
        }
    }
    for (k, &b) in &before.values {
        if !after.values.contains_key(k)
            && !is_counter(before, k)
            && !name_of(k).ends_with("_created")
        {
            d.gauges.insert(
                k.clone(),
                GaugePair {
                    before: Some(b),
                    after: None,
                },
            );
        }
    }
    d
}

/// GETs `path` (usually `/metrics`) from `target` and parses it.
pub async fn scrape(target: &Target, path: &str, timeout: Duration) -> Result<Snapshot, String> {
    let req = format!(
        "GET {} HTTP/1.1\r\nHost: {}\r\nUser-Agent: bakeoff/{}\r\nAccept: text/plain\r\n\r\n",
        target.path(path),
        // Same Host form as every other request (https on 443 without the port).
        target.host_header(),
        crate::VERSION
    );
    let mut conn = Conn::connect(target, timeout)
        .await
        .map_err(|e| e.message)?;
    let t = crate::clock::mono_ns();
    let (status, body) = conn
        .exchange(req.as_bytes(), timeout, LIMIT)
        .await
        .map_err(|e| format!("{target}{path}: {}", e.message))?;
    if status != 200 {
        let text = String::from_utf8_lossy(&body[..body.len().min(200)]).into_owned();
        return Err(format!(
            "{target}{path} answered HTTP {status}: {text}{}",
            if status == 404 || status == 501 {
                " (llama.cpp serves /metrics only with --metrics)"
            } else {
                ""
            }
        ));
    }
    Ok(Snapshot {
        mono_ns: t,
        url: format!("{target}{path}"),
        metrics: parse(&String::from_utf8_lossy(&body)),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const VLLM: &str = r#"# HELP vllm:num_requests_running Number of requests in model execution batches.
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{engine="0",model_name="Qwen/Qwen3-8B"} 2.0
# HELP vllm:prompt_tokens_total Number of prefill tokens processed.
# TYPE vllm:prompt_tokens_total counter
vllm:prompt_tokens_total{engine="0",model_name="Qwen/Qwen3-8B"} 1.234e+04
# TYPE vllm:prompt_tokens_created gauge
vllm:prompt_tokens_created{engine="0",model_name="Qwen/Qwen3-8B"} 1.7e+09
# TYPE vllm:time_to_first_token_seconds histogram
vllm:time_to_first_token_seconds_bucket{engine="0",le="0.001",model_name="Qwen/Qwen3-8B"} 0.0
vllm:time_to_first_token_seconds_bucket{engine="0",le="+Inf",model_name="Qwen/Qwen3-8B"} 10.0
vllm:time_to_first_token_seconds_count{engine="0",model_name="Qwen/Qwen3-8B"} 10.0
vllm:time_to_first_token_seconds_sum{engine="0",model_name="Qwen/Qwen3-8B"} 0.52
vllm:spec_decode_num_accepted_tokens_total{engine="0",model_name="Qwen/Qwen3-8B"} 300
"#;

    const LLAMACPP: &str =
        "# HELP llamacpp:prompt_tokens_total Number of prompt tokens processed.\n\
# TYPE llamacpp:prompt_tokens_total counter\n\
llamacpp:prompt_tokens_total 120\n\
# TYPE llamacpp:predicted_tokens_seconds gauge\n\
llamacpp:predicted_tokens_seconds 41.5\n\
# TYPE llamacpp:requests_processing gauge\n\
llamacpp:requests_processing 1\n";

    const SGLANG: &str = "# TYPE sglang:num_running_reqs gauge\n\
sglang:num_running_reqs{model_name=\"meta-llama/Llama-3.1-8B\",tp_rank=\"0\"} 3.0\n\
# TYPE sglang:prompt_tokens counter\n\
sglang:prompt_tokens_total{model_name=\"meta-llama/Llama-3.1-8B\",tp_rank=\"0\"} 500.0\n\
sglang:cache_hit_rate{model_name=\"meta-llama/Llama-3.1-8B\",tp_rank=\"0\"} 0.25\n";

    #[test]
    fn parses_vllm() {
        let m = parse(VLLM);
        assert_eq!(
            m.values[r#"vllm:num_requests_running{engine="0",model_name="Qwen/Qwen3-8B"}"#],
            2.0
        );
        assert_eq!(
            m.values[r#"vllm:prompt_tokens_total{engine="0",model_name="Qwen/Qwen3-8B"}"#],
            12340.0
        );
        assert_eq!(
            m.values[r#"vllm:time_to_first_token_seconds_bucket{engine="0",le="+Inf",model_name="Qwen/Qwen3-8B"}"#],
            10.0
        );
        assert!(is_counter(
            &m,
            r#"vllm:time_to_first_token_seconds_count{engine="0"}"#
        ));
        assert!(is_counter(&m, "vllm:spec_decode_num_accepted_tokens_total"));
        assert!(!is_counter(&m, "vllm:num_requests_running"));
        assert!(!is_counter(&m, "vllm:prompt_tokens_created"));
    }

    #[test]
    fn parses_llamacpp_and_sglang() {
        let m = parse(LLAMACPP);
        assert_eq!(m.values["llamacpp:prompt_tokens_total"], 120.0);
        assert!(is_counter(&m, "llamacpp:prompt_tokens_total"));
        assert!(!is_counter(&m, "llamacpp:predicted_tokens_seconds"));
        let s = parse(SGLANG);
        let k = r#"sglang:prompt_tokens_total{model_name="meta-llama/Llama-3.1-8B",tp_rank="0"}"#;
        assert_eq!(s.values[k], 500.0);
        assert!(is_counter(&s, k));
        assert!(!is_counter(&s, "sglang:cache_hit_rate"));
    }

    #[test]
    fn labels_are_sorted_and_quotes_kept() {
        let m = parse(
            "x{b=\"2\",a=\"has \\\"quote\\\", comma } brace\"} 1 1700000000000\nbad line\n{x} 2\n",
        );
        assert_eq!(m.values.len(), 1, "{m:?}");
        assert_eq!(
            m.values.keys().next().unwrap(),
            "x{a=\"has \\\"quote\\\", comma } brace\",b=\"2\"}"
        );
    }

    #[test]
    fn diff_counters_and_gauges() {
        let before = parse(LLAMACPP);
        let after = parse(
            "# TYPE llamacpp:prompt_tokens_total counter\nllamacpp:prompt_tokens_total 200\n\
             # TYPE llamacpp:requests_processing gauge\nllamacpp:requests_processing 0\n\
             llamacpp:tokens_predicted_total 64\n",
        );
        let d = diff(&before, &after);
        assert_eq!(d.counters["llamacpp:prompt_tokens_total"], 80.0);
        assert_eq!(d.counters["llamacpp:tokens_predicted_total"], 64.0);
        assert_eq!(d.appeared, vec!["llamacpp:tokens_predicted_total"]);
        assert_eq!(
            d.gauges["llamacpp:requests_processing"],
            GaugePair {
                before: Some(1.0),
                after: Some(0.0)
            }
        );
        assert_eq!(d.gauges["llamacpp:predicted_tokens_seconds"].after, None);
        assert!(d.resets.is_empty());
        let restarted = diff(&after, &before);
        assert_eq!(restarted.resets, vec!["llamacpp:prompt_tokens_total"]);
        assert_eq!(d.counter_sum("llamacpp:prompt_tokens_total"), 80.0);
    }
}
