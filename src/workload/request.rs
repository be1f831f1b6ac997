//! OpenAI request bodies: the one place that writes their sampling and framing fields, merges
//! caller-given extra fields and inserts the prompt. `bakeoff bench`, campaign timing, the
//! selftest, the gates and prompt sizing all build their bodies here, so the same settings give
//! the same bytes whichever command sends them.

use super::Endpoint;
use serde_json::{json, Map, Value};

/// The fields every request of one load (or one gate exchange) shares, apart from the input.
#[derive(Debug, Clone, Default)]
pub struct BodySpec<'a> {
    pub model: &'a str,
    pub max_tokens: u64,
    /// Sent when given (an engine's default applies otherwise).
    pub temperature: Option<f64>,
    pub top_p: Option<f64>,
    pub seed: Option<u64>,
    /// `ignore_eos: true` (vLLM, llama.cpp): generate exactly `max_tokens`. Not sent when false.
    pub ignore_eos: bool,
    /// `Some(true)`: `stream: true` with `stream_options.include_usage` (see [`set_stream`]);
    /// `Some(false)`: `stream: false`; `None`: no stream field (the caller decides later).
    pub stream: Option<bool>,
}

impl BodySpec<'_> {
    /// The body without its input (`messages` or `prompt`; see [`insert_input`]).
    pub fn build(&self) -> Map<String, Value> {
        let mut b = Map::new();
        b.insert("model".into(), json!(self.model));
        b.insert("max_tokens".into(), json!(self.max_tokens));
        if let Some(t) = self.temperature {
            b.insert("temperature".into(), json!(t));
        }
        if let Some(p) = self.top_p {
            b.insert("top_p".into(), json!(p));
        }
        if let Some(s) = self.seed {
            b.insert("seed".into(), json!(s));
        }
        if self.ignore_eos {
            b.insert("ignore_eos".into(), json!(true));
        }
        if let Some(s) = self.stream {
            set_stream(&mut b, s);
        }
        b
    }
}

/// Sets `stream`; a stream also asks for the usage chunk (`stream_options.include_usage`),
/// which every token count of a streamed request comes from.
pub fn set_stream(body: &mut Map<String, Value>, stream: bool) {
    body.insert("stream".into(), json!(stream));
    if stream {
        body.insert("stream_options".into(), json!({"include_usage": true}));
    }
}

/// Which side wins when an extra field names a field the body already has.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Precedence {
    /// The extra field replaces the body's: the user's `--extra-body` (bench) or a gate
    /// context's `extra_body` can override sampling; what was sent is recorded.
    ExtraWins,
    /// The body's field stays; extra fields only add what is missing (a prompt-sizing probe
    /// keeps its `max_tokens: 1` and `stream: false` whatever the extra fields say).
    BodyWins,
}

/// Merges `extra` into `body` with the given precedence.
pub fn merge_extra(body: &mut Map<String, Value>, extra: &Map<String, Value>, p: Precedence) {
    for (k, v) in extra {
        match p {
            Precedence::ExtraWins => {
                body.insert(k.clone(), v.clone());
            }
            Precedence::BodyWins => {
                body.entry(k.clone()).or_insert_with(|| v.clone());
            }
        }
    }
}

/// Puts the input in: `messages` with one user turn (chat) or `prompt` (completions).
pub fn insert_input(body: &mut Map<String, Value>, endpoint: Endpoint, text: String) {
    match endpoint {
        Endpoint::Chat => body.insert(
            "messages".into(),
            json!([{ "role": "user", "content": text }]),
        ),
        Endpoint::Completions => body.insert("prompt".into(), Value::String(text)),
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_streamed_body_asks_for_usage_and_omits_what_is_unset() {
        let b = BodySpec {
            model: "m",
            max_tokens: 8,
            temperature: Some(0.0),
            seed: Some(3),
            stream: Some(true),
            ..Default::default()
        }
        .build();
        assert_eq!(
            Value::Object(b),
            json!({"model": "m", "max_tokens": 8, "temperature": 0.0, "seed": 3,
                   "stream": true, "stream_options": {"include_usage": true}})
        );
        let plain = BodySpec {
            model: "m",
            max_tokens: 1,
            top_p: Some(0.5),
            ignore_eos: true,
            stream: Some(false),
            ..Default::default()
        }
        .build();
        assert_eq!(
            Value::Object(plain),
            json!({"model": "m", "max_tokens": 1, "top_p": 0.5, "ignore_eos": true,
                   "stream": false})
        );
    }

    #[test]
    fn extra_fields_merge_with_the_stated_precedence() {
        let base = BodySpec {
            model: "m",
            max_tokens: 1,
            stream: Some(false),
            ..Default::default()
        }
        .build();
        let extra = json!({"max_tokens": 99, "top_k": 5});
        let extra = extra.as_object().unwrap();
        let mut over = base.clone();
        merge_extra(&mut over, extra, Precedence::ExtraWins);
        assert_eq!(over["max_tokens"], 99);
        assert_eq!(over["top_k"], 5);
        let mut under = base;
        merge_extra(&mut under, extra, Precedence::BodyWins);
        assert_eq!(under["max_tokens"], 1);
        assert_eq!(under["top_k"], 5);
    }

    #[test]
    fn the_input_goes_where_the_endpoint_wants_it() {
        let mut b = Map::new();
        insert_input(&mut b, Endpoint::Completions, "x".into());
        assert_eq!(b["prompt"], "x");
        insert_input(&mut b, Endpoint::Chat, "y".into());
        assert_eq!(b["messages"], json!([{"role": "user", "content": "y"}]));
    }
}
