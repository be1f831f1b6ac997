//! Sending one chat request (streamed or not) and recording it: the request with long messages cut
//! to a stated limit, the response excerpt, finish reason, usage and latency.

use super::expect::excerpt;
use super::suite::sha256_hex;
use super::tooldef::ReturnedCall;
use super::GateContext;
use crate::client::control::post_json;
use crate::client::trace::kind;
use crate::client::{post_request_bytes, Conn, ErrorClass, RequestError, StreamOpts, Trace, Usage};
use crate::clock::mono_ns;
use crate::metrics::RequestMetrics;
use crate::workload::request::{merge_extra, set_stream, BodySpec, Precedence};
use serde::Serialize;
use serde_json::{json, Map, Value};

pub const CHAT_PATH: &str = "/v1/chat/completions";

/// The sampling every gate request carries (before per-request `max_tokens` and seed offsets).
pub fn sampling_record(ctx: &GateContext) -> Value {
    let mut m = Map::new();
    m.insert("temperature".into(), json!(ctx.temperature));
    m.insert("seed".into(), json!(ctx.seed));
    if !ctx.extra_body.is_empty() {
        m.insert("extra_body".into(), Value::Object(ctx.extra_body.clone()));
    }
    Value::Object(m)
}

/// A chat body with the model, messages and explicit sampling (temperature, seed, max_tokens).
pub fn chat_body(
    ctx: &GateContext,
    messages: Vec<Value>,
    max_tokens: u64,
    seed: u64,
) -> Map<String, Value> {
    let mut b = BodySpec {
        model: &ctx.model,
        max_tokens,
        temperature: Some(ctx.temperature),
        seed: Some(seed),
        ..Default::default()
    }
    .build();
    b.insert("messages".into(), Value::Array(messages));
    b
}

/// What came back, whole (the gates score it; the record keeps an excerpt).
#[derive(Debug, Clone, Default)]
pub struct Reply {
    pub stream: bool,
    pub status: Option<u16>,
    pub content: String,
    pub reasoning: String,
    pub calls: Vec<ReturnedCall>,
    pub finish_reason: Option<String>,
    pub usage: Option<Usage>,
    pub error: Option<RequestError>,
    /// Streams: whether `data: [DONE]` arrived.
    pub done: Option<bool>,
    /// Streams: events that carried visible content.
    pub content_chunks: Option<u64>,
    pub latency: Latency,
}

#[derive(Debug, Clone, Default, Serialize)]
pub struct Latency {
    /// Request sent → end of the response (non-streaming: includes the TCP connect).
    pub e2e_ms: Option<f64>,
    /// Streams: request sent → first visible content.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ttft_ms: Option<f64>,
    /// Streams: request sent → first chunk with any output (content, reasoning, tool call).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ttfo_ms: Option<f64>,
}

/// The recorded response: excerpts plus every scoring input.
#[derive(Debug, Clone, Serialize)]
pub struct ResponseRecord {
    pub stream: bool,
    pub status: Option<u16>,
    pub content: String,
    pub content_chars: usize,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub reasoning: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reasoning_chars: Option<usize>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub tool_calls: Vec<ReturnedCall>,
    pub finish_reason: Option<String>,
    pub usage: Option<Usage>,
    pub error: Option<RequestError>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub done: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub content_chunks: Option<u64>,
}

/// One request and its response, as recorded in an observation.
#[derive(Debug, Clone, Serialize)]
pub struct ExchangeRecord {
    pub request: Value,
    pub response: ResponseRecord,
    pub latency: Latency,
}

/// Cuts `s` to `limit` characters: the head and the tail, with the cut's size and the whole
/// text's SHA-256 in between.
pub fn cut(s: &str, limit: usize) -> String {
    let n = s.chars().count();
    if n <= limit {
        return s.to_string();
    }
    let head = limit / 2;
    let tail = limit - head;
    let h: String = s.chars().take(head).collect();
    let t: String = s.chars().skip(n - tail).collect();
    format!(
        "{h}…[{} of {n} characters omitted; sha256 of the whole text {}]…{t}",
        n - limit,
        sha256_hex(s.as_bytes())
    )
}

/// The request body as recorded: every field, with long message contents cut.
pub fn request_record(body: &Map<String, Value>, limit: usize) -> Value {
    let mut b = body.clone();
    if let Some(Value::Array(msgs)) = b.get_mut("messages") {
        for m in msgs {
            if let Some(Value::String(c)) = m.get_mut("content") {
                if c.chars().count() > limit {
                    *c = cut(c, limit);
                }
            }
        }
    }
    b.insert("path".into(), json!(CHAT_PATH));
    Value::Object(b)
}

impl Reply {
    pub fn ok(&self) -> bool {
        self.error.is_none()
    }

    pub fn record(&self, request: Value, limit: usize) -> ExchangeRecord {
        ExchangeRecord {
            request,
            response: ResponseRecord {
                stream: self.stream,
                status: self.status,
                content: cut(&self.content, limit),
                content_chars: self.content.chars().count(),
                reasoning: cut(&self.reasoning, limit),
                reasoning_chars: (!self.reasoning.is_empty())
                    .then(|| self.reasoning.chars().count()),
                tool_calls: self
                    .calls
                    .iter()
                    .map(|c| ReturnedCall {
                        arguments: cut(&c.arguments, limit),
                        ..c.clone()
                    })
                    .collect(),
                finish_reason: self.finish_reason.clone(),
                usage: self.usage.clone(),
                error: self.error.clone(),
                done: self.done,
                content_chunks: self.content_chunks,
            },
            latency: self.latency.clone(),
        }
    }

    /// The error in words, for reasons: `HTTP 500: ...`, `incomplete: the stream ended ...`.
    pub fn error_words(&self) -> Option<String> {
        self.error.as_ref().map(|e| match e.class {
            ErrorClass::HttpStatus => e.message.clone(),
            _ => format!("{}: {}", e.class.as_str(), e.message),
        })
    }
}

/// Sends `body` (model, messages, sampling and anything else already in it) as a streaming or
/// non-streaming chat request. `extra_body` is merged last. Returns the recorded request and the
/// reply; transport and HTTP problems become `reply.error`, never a panic or an `Err`.
pub async fn send(ctx: &GateContext, mut body: Map<String, Value>, stream: bool) -> (Value, Reply) {
    set_stream(&mut body, stream);
    merge_extra(&mut body, &ctx.extra_body, Precedence::ExtraWins);
    let record = request_record(&body, ctx.excerpt_chars);
    let reply = if stream {
        send_stream(ctx, &body).await
    } else {
        send_plain(ctx, &body).await
    };
    (record, reply)
}

async fn send_stream(ctx: &GateContext, body: &Map<String, Value>) -> Reply {
    let bytes = serde_json::to_vec(body).expect("JSON values serialize");
    let req = post_request_bytes(&ctx.target, CHAT_PATH, &bytes, ctx.api_key.as_deref(), true);
    let mut reply = Reply {
        stream: true,
        ..Default::default()
    };
    let mut conn = match Conn::connect(&ctx.target, ctx.timeout).await {
        Ok(c) => c,
        Err(e) => {
            reply.error = Some(e);
            return reply;
        }
    };
    let mut trace = Trace::default();
    let opts = StreamOpts {
        timeout: ctx.timeout,
        stall: ctx.stall,
        collect: true,
    };
    conn.stream(&req, &opts, &mut trace).await;
    let m = RequestMetrics::from_trace(&trace);
    reply.status = trace.status;
    reply.finish_reason = trace.finish_reason.clone();
    reply.usage = trace.usage.clone();
    reply.error = trace.error.clone();
    reply.done = Some(trace.events.iter().any(|e| e.kind & kind::DONE != 0));
    reply.content_chunks = Some(
        trace
            .events
            .iter()
            .filter(|e| e.kind & kind::CONTENT != 0)
            .count() as u64,
    );
    reply.latency = Latency {
        e2e_ms: m.e2e_ms,
        ttft_ms: m.ttft_ms,
        ttfo_ms: m.ttfo_ms,
    };
    if let Some(out) = trace.output {
        reply.content = out.content;
        reply.reasoning = out.reasoning;
        let mut calls = out.tool_calls;
        calls.sort_by_key(|c| c.index);
        reply.calls = calls
            .into_iter()
            .map(|c| ReturnedCall {
                id: c.id,
                name: c.name,
                arguments: c.arguments,
            })
            .collect();
    }
    reply
}

async fn send_plain(ctx: &GateContext, body: &Map<String, Value>) -> Reply {
    let mut reply = Reply::default();
    let t0 = mono_ns();
    let res = post_json(
        &ctx.target,
        CHAT_PATH,
        &Value::Object(body.clone()),
        ctx.api_key.as_deref(),
        ctx.timeout,
    )
    .await;
    reply.latency.e2e_ms = Some((mono_ns() - t0) as f64 / 1e6);
    let (status, v) = match res {
        Ok(x) => x,
        Err(e) => {
            reply.status = e.status;
            reply.error = Some(e);
            return reply;
        }
    };
    reply.status = Some(status);
    if !(200..300).contains(&status) {
        let mut e = RequestError::new(
            ErrorClass::HttpStatus,
            format!("HTTP {status}: {}", excerpt(&v.to_string(), 300)),
        );
        e.status = Some(status);
        reply.error = Some(e);
        return reply;
    }
    if let Some(err) = v.get("error").filter(|e| !e.is_null()) {
        let m = err
            .get("message")
            .and_then(Value::as_str)
            .map(str::to_string)
            .unwrap_or_else(|| err.to_string());
        reply.error = Some(RequestError::new(
            ErrorClass::EngineError,
            format!("engine error: {m}"),
        ));
        return reply;
    }
    let choice = v.get("choices").and_then(|c| c.get(0));
    let Some(choice) = choice else {
        reply.error = Some(RequestError::new(
            ErrorClass::MalformedChunk,
            format!(
                "the response has no choices[0]: {}",
                excerpt(&v.to_string(), 200)
            ),
        ));
        return reply;
    };
    let msg = choice.get("message").cloned().unwrap_or(Value::Null);
    reply.content = msg
        .get("content")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string();
    reply.reasoning = msg
        .get("reasoning_content")
        .or_else(|| msg.get("reasoning"))
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string();
    if let Some(calls) = msg.get("tool_calls").and_then(Value::as_array) {
        reply.calls = calls
            .iter()
            .map(|c| {
                let f = c.get("function").unwrap_or(c);
                ReturnedCall {
                    id: c.get("id").and_then(Value::as_str).map(str::to_string),
                    name: f
                        .get("name")
                        .and_then(Value::as_str)
                        .unwrap_or("")
                        .to_string(),
                    arguments: match f.get("arguments") {
                        Some(Value::String(s)) => s.clone(),
                        None | Some(Value::Null) => String::new(),
                        Some(other) => other.to_string(),
                    },
                }
            })
            .collect();
    }
    reply.finish_reason = choice
        .get("finish_reason")
        .and_then(Value::as_str)
        .map(str::to_string);
    if let Some(u) = v.get("usage").filter(|u| u.is_object()) {
        let n = |k: &str| u.get(k).and_then(Value::as_u64);
        reply.usage = Some(Usage {
            prompt_tokens: n("prompt_tokens"),
            completion_tokens: n("completion_tokens"),
            total_tokens: n("total_tokens"),
            cached_tokens: u
                .pointer("/prompt_tokens_details/cached_tokens")
                .and_then(Value::as_u64),
            reasoning_tokens: u
                .pointer("/completion_tokens_details/reasoning_tokens")
                .and_then(Value::as_u64),
            engine_decode_tok_s: v
                .pointer("/timings/predicted_per_second")
                .and_then(Value::as_f64),
        });
    }
    reply
}

/// Splits a leading `<think>...</think>` block out of visible content (engines that don't
/// separate reasoning). Returns (visible, reasoning, unclosed): `unclosed` is true when a
/// `<think>` was opened and never closed.
pub fn split_think(content: &str) -> (String, String, bool) {
    let t = content.trim_start();
    if let Some(rest) = t.strip_prefix("<think>") {
        match rest.find("</think>") {
            Some(i) => (
                rest[i + "</think>".len()..].trim().to_string(),
                rest[..i].to_string(),
                false,
            ),
            None => (String::new(), rest.to_string(), true),
        }
    } else {
        (content.trim().to_string(), String::new(), false)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cuts_long_text_with_its_hash() {
        let s = "a".repeat(50) + &"b".repeat(50);
        let c = cut(&s, 10);
        assert!(c.starts_with("aaaaa…[90 of 100 characters omitted; sha256 of the whole text "));
        assert!(c.ends_with("]…bbbbb"));
        assert_eq!(cut("short", 10), "short");
    }

    #[test]
    fn think_blocks() {
        assert_eq!(
            split_think("<think>hmm</think> Paris"),
            ("Paris".into(), "hmm".into(), false)
        );
        assert_eq!(split_think("<think>hmm"), ("".into(), "hmm".into(), true));
        assert_eq!(split_think(" Paris "), ("Paris".into(), "".into(), false));
    }
}
