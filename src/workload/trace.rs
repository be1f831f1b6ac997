//! A request trace to replay (`bench --trace`): a JSONL file, one request a line, in the field
//! names of the Mooncake traces: `timestamp` (the arrival time, ms from the trace's start),
//! `input_length` and `output_length` (tokens), and optionally `hash_ids`, the prompt's blocks of
//! `block_tokens` tokens each, in order: two requests whose `hash_ids` start alike share those
//! prompt tokens exactly (block `k` is tokens `k·block_tokens ..`, the last one cut at
//! `input_length`). Other fields are ignored.
//!
//! Pure: parsing with errors that name the file, line and field; the window, sample and time
//! scaling that turn the trace into a schedule; and each request's prompt text. A block's text
//! is a function of its id and the run's salt, made of words that are one token each after a
//! space (`filler::short_word`), so a prompt of `input_length` words is `input_length` tokens
//! and requests sharing blocks send the same token ids for them.

use super::filler::{mix, short_word};
use rand::seq::SliceRandom;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use serde_json::Value;
use std::collections::HashMap;
use std::path::{Path, PathBuf};

/// Tokens per `hash_ids` block unless the run says otherwise: the Mooncake traces' block size.
pub const DEFAULT_BLOCK_TOKENS: u64 = 512;

/// Most prompt tokens one replay builds (its prompts are held in memory): window or sample a
/// larger trace.
pub const MAX_REPLAY_TOKENS: u64 = 50_000_000;

/// One request of a trace.
#[derive(Debug, Clone, PartialEq)]
pub struct TraceRequest {
    /// Its line in the file (1-based), recorded on its request line.
    pub line: usize,
    pub timestamp_ms: f64,
    pub input_length: u64,
    pub output_length: u64,
    pub hash_ids: Vec<u64>,
}

/// A parsed trace, in arrival order (lines with equal timestamps keep the file's order).
#[derive(Debug, Clone)]
pub struct RequestTrace {
    pub path: PathBuf,
    pub sha256: String,
    pub requests: Vec<TraceRequest>,
}

/// Reads and checks `path`; `block_tokens` bounds how many `hash_ids` a request may name.
pub fn load(path: &Path, block_tokens: u64) -> Result<RequestTrace, String> {
    let name = path.display().to_string();
    let bytes = std::fs::read(path).map_err(|e| {
        format!("{name}: cannot read the trace ({e}); give the path of a JSONL trace file")
    })?;
    let sha256 = {
        use sha2::Digest;
        sha2::Sha256::digest(&bytes)
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect::<String>()
    };
    let text = String::from_utf8(bytes)
        .map_err(|e| format!("{name}: the trace is not UTF-8 text ({e}); traces are JSONL"))?;
    let requests = parse(&name, &text, block_tokens)?;
    Ok(RequestTrace {
        path: path.to_path_buf(),
        sha256,
        requests,
    })
}

/// Parses the lines of a trace named `name`.
pub fn parse(name: &str, text: &str, block_tokens: u64) -> Result<Vec<TraceRequest>, String> {
    if block_tokens == 0 {
        return Err(format!(
            "{name}: block_tokens is 0; give the tokens per hash_ids block (the Mooncake traces use {DEFAULT_BLOCK_TOKENS})"
        ));
    }
    let mut out = Vec::new();
    for (i, raw) in text.lines().enumerate() {
        let line = i + 1;
        if raw.trim().is_empty() {
            continue;
        }
        let v: Value = serde_json::from_str(raw).map_err(|e| {
            format!("{name}:{line}: not JSON ({e}); each line is one JSON object such as {{\"timestamp\": 0, \"input_length\": 512, \"output_length\": 64}}")
        })?;
        out.push(request(name, line, &v, block_tokens)?);
    }
    if out.is_empty() {
        return Err(format!(
            "{name}: no requests (every line is blank); each line needs timestamp, input_length and output_length"
        ));
    }
    // Stable: equal timestamps keep the file's order.
    out.sort_by(|a, b| a.timestamp_ms.total_cmp(&b.timestamp_ms));
    Ok(out)
}

fn request(name: &str, line: usize, v: &Value, block: u64) -> Result<TraceRequest, String> {
    let at = |field: &str, why: String| format!("{name}:{line}: {field}: {why}");
    let Some(o) = v.as_object() else {
        return Err(format!(
            "{name}:{line}: not a JSON object; each line is one object with timestamp, input_length and output_length"
        ));
    };
    let timestamp_ms = match o.get("timestamp") {
        None => return Err(at("timestamp", "missing; give the arrival time in ms from the trace's start, e.g. \"timestamp\": 1250".into())),
        Some(t) => t
            .as_f64()
            .filter(|t| t.is_finite() && *t >= 0.0)
            .ok_or_else(|| at("timestamp", format!("{t} is not a number of ms >= 0; give the arrival time in ms from the trace's start")))?,
    };
    let length = |field: &str| -> Result<u64, String> {
        match o.get(field) {
            None => Err(at(field, "missing; give a token count >= 1".into())),
            Some(x) => x.as_u64().filter(|&n| n >= 1).ok_or_else(|| {
                at(
                    field,
                    format!("{x} is not a whole number of tokens >= 1; fix the value"),
                )
            }),
        }
    };
    let input_length = length("input_length")?;
    let output_length = length("output_length")?;
    let hash_ids = match o.get("hash_ids") {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::Array(a)) => a
            .iter()
            .map(|x| {
                x.as_u64().ok_or_else(|| {
                    at("hash_ids", format!("{x} is not a block id (a whole number >= 0); list the prompt's block ids in order"))
                })
            })
            .collect::<Result<_, _>>()?,
        Some(x) => {
            return Err(at(
                "hash_ids",
                format!("{x} is not a list; give the prompt's block ids in order, e.g. [0, 1, 2]"),
            ))
        }
    };
    let most = input_length.div_ceil(block);
    if hash_ids.len() as u64 > most {
        return Err(at(
            "hash_ids",
            format!(
                "{} blocks of {block} tokens are more than input_length {input_length} holds ({most}); drop ids from the end or set the block size the trace was made with (block_tokens)",
                hash_ids.len()
            ),
        ));
    }
    Ok(TraceRequest {
        line,
        timestamp_ms,
        input_length,
        output_length,
        hash_ids,
    })
}

/// Which part of the trace is replayed, and how fast.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Select {
    /// Trace time runs this many times faster (2: twice the arrival rate).
    pub speedup: f64,
    /// The window: requests from `start_s` (trace time, seconds) for `duration_s`.
    pub start_s: Option<f64>,
    pub duration_s: Option<f64>,
    /// Replay this many requests of the window, drawn with `seed` (kept in arrival order).
    pub sample: Option<usize>,
    pub seed: u64,
}

impl Default for Select {
    fn default() -> Select {
        Select {
            speedup: 1.0,
            start_s: None,
            duration_s: None,
            sample: None,
            seed: 0,
        }
    }
}

/// The requests to replay with their intended send offsets (ns after the replay's start: the
/// window's start, or the first request's arrival without one, scaled by the speedup).
#[derive(Debug, Clone)]
pub struct Replay {
    pub requests: Vec<TraceRequest>,
    pub offsets_ns: Vec<u64>,
}

/// The replay of `t` under `o`; errors name the setting by `label` (`--trace-speedup`, ...).
pub fn select(
    t: &RequestTrace,
    o: &Select,
    label: impl Fn(&str) -> String,
) -> Result<Replay, String> {
    if !(o.speedup.is_finite() && o.speedup > 0.0) {
        return Err(format!(
            "{}: {} is not a factor > 0; give e.g. 1 (the trace's own pace) or 4 (four times faster)",
            label("speedup"),
            o.speedup
        ));
    }
    for (f, v) in [("start", o.start_s), ("duration", o.duration_s)] {
        if let Some(v) = v.filter(|v| !(v.is_finite() && *v >= 0.0)) {
            return Err(format!("{}: {v} is not a time >= 0 s", label(f)));
        }
    }
    let from = o.start_s.unwrap_or(0.0) * 1e3;
    let to = o.duration_s.map_or(f64::INFINITY, |d| from + d * 1e3);
    let mut kept: Vec<&TraceRequest> = t
        .requests
        .iter()
        .filter(|r| r.timestamp_ms >= from && r.timestamp_ms < to)
        .collect();
    if kept.is_empty() {
        let (a, b) = (
            t.requests[0].timestamp_ms / 1e3,
            t.requests[t.requests.len() - 1].timestamp_ms / 1e3,
        );
        return Err(format!(
            "{}: no request of {} arrives in the window (from {} s{}); its requests arrive from {a} s to {b} s",
            label("start"),
            t.path.display(),
            from / 1e3,
            o.duration_s.map(|d| format!(" for {d} s")).unwrap_or_default()
        ));
    }
    if let Some(n) = o.sample {
        if n == 0 {
            return Err(format!(
                "{}: 0 requests; give a count >= 1",
                label("sample")
            ));
        }
        if n < kept.len() {
            let mut idx: Vec<usize> = (0..kept.len()).collect();
            idx.shuffle(&mut ChaCha8Rng::seed_from_u64(o.seed));
            idx.truncate(n);
            idx.sort_unstable();
            kept = idx.into_iter().map(|i| kept[i]).collect();
        }
    }
    let origin = match o.start_s {
        Some(_) => from,
        None => kept[0].timestamp_ms,
    };
    let offsets_ns = kept
        .iter()
        .map(|r| ((r.timestamp_ms - origin) / o.speedup * 1e6).round() as u64)
        .collect();
    Ok(Replay {
        requests: kept.into_iter().cloned().collect(),
        offsets_ns,
    })
}

/// The prompt of replayed request `index`: `input_length` one-token words, each after a space.
/// Tokens inside block `k` of `hash_ids` are the block's own words (the same in every request
/// naming it, for this `salt`); the rest are the request's own.
pub fn prompt(r: &TraceRequest, index: u64, block_tokens: u64, salt: u64) -> String {
    let mut s = String::with_capacity(r.input_length as usize * 5);
    let own = mix(salt ^ 0x7472_6163_655f_7274 ^ mix(index));
    for j in 0..r.input_length {
        let (b, pos) = (j / block_tokens, j % block_tokens);
        let key = match r.hash_ids.get(b as usize) {
            Some(&h) => mix(mix(salt ^ mix(h)) ^ pos),
            None => mix(own ^ j),
        };
        s.push(' ');
        s.push_str(short_word(key));
    }
    s
}

/// For each request in order, the prompt tokens it shares by design with an earlier one: its
/// leading blocks whose whole chain of ids (from the first) an earlier request began with, each
/// as far as an earlier request's copy reached (a block that was an earlier prompt's cut last
/// block shares only that much, and ends the match). What a prefix cache could serve, before the
/// engine's own block rounding.
pub fn shared_tokens(requests: &[TraceRequest], block_tokens: u64) -> Vec<u64> {
    // Tokens of each chain's last block that earlier requests sent.
    let mut seen: HashMap<Vec<u64>, u64> = HashMap::new();
    let in_block =
        |r: &TraceRequest, k: usize| (r.input_length - k as u64 * block_tokens).min(block_tokens);
    requests
        .iter()
        .map(|r| {
            let mut shared = 0;
            for k in 0..r.hash_ids.len() {
                let Some(&had) = seen.get(&r.hash_ids[..=k]) else {
                    break;
                };
                let here = in_block(r, k);
                shared += had.min(here);
                if had < here {
                    break;
                }
            }
            for k in 0..r.hash_ids.len() {
                let e = seen.entry(r.hash_ids[..=k].to_vec()).or_insert(0);
                *e = (*e).max(in_block(r, k));
            }
            shared
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const OK: &str = "{\"timestamp\": 0, \"input_length\": 40, \"output_length\": 4, \"hash_ids\": [1, 2, 3]}\n\
        {\"timestamp\": 500, \"input_length\": 20, \"output_length\": 8, \"hash_ids\": [1, 2]}\n\
        \n\
        {\"timestamp\": 250, \"input_length\": 33, \"output_length\": 2, \"hash_ids\": [1, 5, 3], \"extra\": 1}\n";

    fn trace(text: &str) -> RequestTrace {
        RequestTrace {
            path: "t.jsonl".into(),
            sha256: String::new(),
            requests: parse("t.jsonl", text, 16).unwrap(),
        }
    }

    #[test]
    fn parses_and_orders_by_arrival() {
        let t = trace(OK);
        let lines: Vec<usize> = t.requests.iter().map(|r| r.line).collect();
        assert_eq!(lines, vec![1, 4, 2]);
        assert_eq!(t.requests[1].hash_ids, vec![1, 5, 3]);
        assert_eq!(t.requests[2].input_length, 20);
    }

    #[test]
    fn errors_name_the_file_line_and_field() {
        let e = |text: &str| parse("trace.jsonl", text, 16).unwrap_err();
        let good = "{\"timestamp\": 0, \"input_length\": 4, \"output_length\": 4}\n";
        let cases = [
            ("{\"timestamp\": 1, \"output_length\": 4}", "trace.jsonl:2: input_length: missing"),
            ("{\"timestamp\": 1, \"input_length\": 0, \"output_length\": 4}", "trace.jsonl:2: input_length: 0 is not a whole number"),
            ("{\"timestamp\": 1, \"input_length\": 4.5, \"output_length\": 4}", "trace.jsonl:2: input_length: 4.5"),
            ("{\"timestamp\": -3, \"input_length\": 4, \"output_length\": 4}", "trace.jsonl:2: timestamp: -3 is not"),
            ("{\"input_length\": 4, \"output_length\": 4}", "trace.jsonl:2: timestamp: missing"),
            ("{\"timestamp\": 1, \"input_length\": 4}", "trace.jsonl:2: output_length: missing"),
            ("{\"timestamp\": 1, \"input_length\": 4, \"output_length\": 4, \"hash_ids\": [1, \"a\"]}", "trace.jsonl:2: hash_ids: \"a\" is not a block id"),
            ("{\"timestamp\": 1, \"input_length\": 4, \"output_length\": 4, \"hash_ids\": 7}", "trace.jsonl:2: hash_ids: 7 is not a list"),
            ("{\"timestamp\": 1, \"input_length\": 17, \"output_length\": 4, \"hash_ids\": [1, 2, 3]}", "trace.jsonl:2: hash_ids: 3 blocks of 16 tokens are more than input_length 17 holds (2)"),
            ("[1]", "trace.jsonl:2: not a JSON object"),
            ("{oops", "trace.jsonl:2: not JSON"),
        ];
        for (bad, want) in cases {
            let got = e(&format!("{good}{bad}\n"));
            assert!(got.starts_with(want), "{bad}: {got}");
        }
        assert!(e("\n\n").contains("no requests"));
    }

    #[test]
    fn window_sample_and_speedup_make_the_schedule() {
        let t = trace(OK);
        let all = select(&t, &Select::default(), |f| f.into()).unwrap();
        assert_eq!(all.offsets_ns, vec![0, 250_000_000, 500_000_000]);
        let fast = select(
            &t,
            &Select {
                speedup: 4.0,
                ..Select::default()
            },
            |f| f.into(),
        )
        .unwrap();
        assert_eq!(fast.offsets_ns, vec![0, 62_500_000, 125_000_000]);
        // A window from 0.2 s for 0.3 s keeps the request at 250 ms, timed from the window.
        let w = Select {
            start_s: Some(0.2),
            duration_s: Some(0.3),
            ..Select::default()
        };
        let r = select(&t, &w, |f| f.into()).unwrap();
        assert_eq!(r.offsets_ns, vec![50_000_000]);
        assert_eq!(r.requests[0].line, 4);
        let empty = Select {
            start_s: Some(9.0),
            ..Select::default()
        };
        let e = select(&t, &empty, |f| format!("--trace-{f}")).unwrap_err();
        assert!(
            e.starts_with("--trace-start: no request of t.jsonl arrives"),
            "{e}"
        );
        let bad = Select {
            speedup: 0.0,
            ..Select::default()
        };
        assert!(select(&t, &bad, |f| format!("--trace-{f}"))
            .unwrap_err()
            .starts_with("--trace-speedup: 0 is not"));
        // A seeded sample keeps arrival order and repeats with its seed.
        let s = |seed| Select {
            sample: Some(2),
            seed,
            ..Select::default()
        };
        let a = select(&t, &s(1), |f| f.into()).unwrap();
        assert_eq!(a.requests.len(), 2);
        assert!(a.requests[0].timestamp_ms < a.requests[1].timestamp_ms);
        assert_eq!(
            a.requests,
            select(&t, &s(1), |f| f.into()).unwrap().requests
        );
    }

    #[test]
    fn shared_blocks_are_the_same_words_and_nothing_else_is() {
        let t = trace(OK);
        let words = |i: usize| -> Vec<String> {
            prompt(&t.requests[i], i as u64, 16, 9)
                .split(' ')
                .skip(1)
                .map(String::from)
                .collect()
        };
        let (a, b, c) = (words(0), words(1), words(2));
        assert_eq!((a.len(), b.len(), c.len()), (40, 33, 20));
        // Block 1 (tokens 0..16) is shared by all three; block 2 by the first and last.
        assert_eq!(a[..16], b[..16]);
        assert_eq!(a[..20], c[..]);
        assert_ne!(a[16..32], b[16..32]);
        // Block 3 of the first and third lines: same id, but after different blocks.
        assert_eq!(a[32], b[32]);
        // Another salt (another run) shares nothing with this one.
        assert_ne!(
            prompt(&t.requests[0], 0, 16, 10),
            prompt(&t.requests[0], 0, 16, 9)
        );
        assert_eq!(shared_tokens(&t.requests, 16), vec![0, 16, 20]);
        // A block first sent cut (4 of 16 tokens) shares only those 4 with a later full copy.
        let cut = trace(
            "{\"timestamp\": 0, \"input_length\": 20, \"output_length\": 1, \"hash_ids\": [1, 2]}\n\
             {\"timestamp\": 1, \"input_length\": 40, \"output_length\": 1, \"hash_ids\": [1, 2, 3]}\n",
        );
        assert_eq!(shared_tokens(&cut.requests, 16), vec![0, 20]);
    }
}
