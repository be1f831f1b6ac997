//! The prompt-sizing probe over a streamed response, for endpoints that always stream (some
//! gateways, mock servers) or whose non-streaming answer carries no usage: one request with
//! `stream: true` and `stream_options.include_usage`, read by the measurement client itself, and
//! `usage.prompt_tokens` of its usage chunk.

use crate::client::{post_request_bytes, Conn, StreamOpts, Target, Trace};
use serde_json::{json, Map, Value};
use std::time::Duration;

/// Why a streamed probe gave no count.
#[derive(Debug, Clone, PartialEq)]
pub enum Failure {
    /// The endpoint answered with this HTTP status (message: status and body excerpt).
    Status(u16, String),
    /// The stream ended normally but no chunk carried `usage.prompt_tokens`.
    NoUsage,
    /// Anything else (connect, not SSE, malformed, timeout), in words.
    Other(String),
}

/// `usage.prompt_tokens` of one streamed request with `body` (its `stream` and `stream_options`
/// are set here) sent to `path`.
pub async fn prompt_tokens(
    target: &Target,
    path: &str,
    body: &Map<String, Value>,
    api_key: Option<&str>,
    timeout: Duration,
) -> Result<u64, Failure> {
    let mut body = body.clone();
    body.insert("stream".into(), json!(true));
    body.insert("stream_options".into(), json!({"include_usage": true}));
    let bytes = serde_json::to_vec(&body).expect("JSON body");
    let req = post_request_bytes(target, path, &bytes, api_key, true);
    let mut conn = Conn::connect(target, timeout)
        .await
        .map_err(|e| Failure::Other(e.message))?;
    let opts = StreamOpts {
        timeout,
        stall: timeout,
        collect: false,
    };
    let mut trace = Trace::default();
    conn.stream(&req, &opts, &mut trace).await;
    if let Some(e) = trace.error {
        return Err(match e.status {
            Some(s) => Failure::Status(s, e.message),
            None => Failure::Other(e.to_string()),
        });
    }
    trace
        .usage
        .and_then(|u| u.prompt_tokens)
        .ok_or(Failure::NoUsage)
}
