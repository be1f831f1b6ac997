//! What one request leaves behind: plain data, recomputable into any metric definition.

use serde::{Deserialize, Serialize};

/// Flags of one SSE event (several may be set on one chunk).
pub mod kind {
    /// Non-empty visible `content` (chat) or `text` (completions).
    pub const CONTENT: u8 = 1;
    /// Non-empty `reasoning_content` / `reasoning`.
    pub const REASONING: u8 = 2;
    /// A tool-call delta.
    pub const TOOL: u8 = 4;
    /// Carries `role` only (no output).
    pub const ROLE: u8 = 8;
    pub const USAGE: u8 = 16;
    pub const FINISH: u8 = 32;
    /// `data: [DONE]`.
    pub const DONE: u8 = 64;
    /// An `error` object inside the stream.
    pub const ERROR: u8 = 128;
    /// Any generated output (what TTFO and chunk gaps count).
    pub const OUTPUT: u8 = CONTENT | REASONING | TOOL;
}

/// One received SSE event: arrival offset from the request's send time, and its kind flags.
/// Comments and keep-alives are recorded with no flags so raw offsets stay complete.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Event {
    pub t_ns: u64,
    pub kind: u8,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Usage {
    pub prompt_tokens: Option<u64>,
    pub completion_tokens: Option<u64>,
    pub total_tokens: Option<u64>,
    pub cached_tokens: Option<u64>,
    pub reasoning_tokens: Option<u64>,
    /// llama.cpp's own decode speed (`timings.predicted_per_second`), when the engine sends it.
    pub engine_decode_tok_s: Option<f64>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ErrorClass {
    /// TCP connect or TLS handshake failed (refused, unreachable, timed out, certificate).
    Connect,
    /// The whole request exceeded its time limit.
    Timeout,
    /// No bytes arrived for longer than the stall limit.
    Stall,
    /// A non-2xx status.
    HttpStatus,
    /// A 2xx answer that is not an SSE stream (or not HTTP at all).
    NotSse,
    /// An SSE `data:` payload that is not valid JSON of a completion chunk.
    MalformedChunk,
    /// The stream ended before `data: [DONE]`.
    Incomplete,
    /// The engine sent an `error` object inside the stream.
    EngineError,
    /// Any other socket error.
    Io,
}

impl ErrorClass {
    pub fn as_str(self) -> &'static str {
        match self {
            ErrorClass::Connect => "connect",
            ErrorClass::Timeout => "timeout",
            ErrorClass::Stall => "stall",
            ErrorClass::HttpStatus => "http-status",
            ErrorClass::NotSse => "not-sse",
            ErrorClass::MalformedChunk => "malformed-chunk",
            ErrorClass::Incomplete => "incomplete",
            ErrorClass::EngineError => "engine-error",
            ErrorClass::Io => "io",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RequestError {
    pub class: ErrorClass,
    pub message: String,
    pub status: Option<u16>,
}

impl RequestError {
    pub fn new(class: ErrorClass, message: impl Into<String>) -> Self {
        RequestError {
            class,
            message: message.into(),
            status: None,
        }
    }
}

impl std::fmt::Display for RequestError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.class.as_str(), self.message)
    }
}

/// A tool call reassembled from streamed deltas (by index).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ToolCall {
    pub index: u64,
    pub id: Option<String>,
    pub name: String,
    pub arguments: String,
}

/// Generated text, kept only when the caller asks (gates do; load runs don't, to bound memory).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Output {
    pub content: String,
    pub reasoning: String,
    pub tool_calls: Vec<ToolCall>,
}

/// Everything observed about one request. Offsets are nanoseconds after `send_ns`.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Trace {
    pub index: u64,
    pub warmup: bool,
    /// Open loop: the scheduled send time (CLOCK_MONOTONIC ns).
    pub intended_ns: Option<u64>,
    /// When the first request byte was written (CLOCK_MONOTONIC ns).
    pub send_ns: u64,
    /// Duration of a TCP connect made for this request before it was sent (not inside TTFB).
    pub connect_ns: Option<u64>,
    pub status: Option<u16>,
    /// `x-request-id` header or the chunks' `id`.
    pub response_id: Option<String>,
    pub first_byte_ns: Option<u64>,
    pub events: Vec<Event>,
    /// End of stream: arrival of `[DONE]`, or of the last byte when the stream failed.
    pub end_ns: Option<u64>,
    pub usage: Option<Usage>,
    pub finish_reason: Option<String>,
    pub error: Option<RequestError>,
    pub output: Option<Output>,
    /// Prompt tokens the client intended to send (matched prompt), when known.
    pub client_prompt_tokens: Option<u64>,
    /// Where the request sits in a structured workload (multi-turn conversation, shared-prefix
    /// group); `None` for independent requests.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub place: Option<Place>,
}

/// A request's place in a structured workload (`bakeoff bench --multi-turn`,
/// `--shared-prefix-tokens`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Place {
    /// The conversation this request is a turn of (numbered from 0 within the load).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub conversation: Option<u64>,
    /// The turn, from 1: turn k resends turns 1..k−1 and their replies.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub turn: Option<u32>,
    /// The shared-prefix group whose system prompt the request starts with (from 0).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prefix_group: Option<u32>,
}

impl Trace {
    pub fn ok(&self) -> bool {
        self.error.is_none()
    }
}
