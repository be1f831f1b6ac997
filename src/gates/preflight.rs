//! Preflight gates: one request each.
//! - `smoke`: a short answer that contains an expected marker;
//! - `json`: a `response_format` json_schema answer that parses, is an object, has the required
//!   keys and validates against the schema;
//! - `streaming`: an SSE stream that ends with `data: [DONE]`, carries visible content and usage.

use super::exchange::{chat_body, send, Reply};
use super::expect::excerpt;
use super::{GateContext, GateResult, Observation, Status, Verdict};
use crate::evidence::GateName;
use serde_json::{json, Value};

/// What the smoke answer must contain (case-insensitive). A word every chat model says when asked,
/// so the smoke gate proves the endpoint answers, not that a small model follows instructions.
pub const SMOKE_MARKER: &str = "hello";
const SMOKE_PROMPT: &str = "Reply with exactly: hello";
const SMOKE_MAX_TOKENS: u64 = 16;

const JSON_PROMPT: &str = "Return a JSON object with the fields status: ok and count: 3";
const JSON_MAX_TOKENS: u64 = 64;

const STREAM_PROMPT: &str = "Reply with exactly: streaming works";
const STREAM_MAX_TOKENS: u64 = 16;

fn json_schema() -> Value {
    json!({
        "type": "object",
        "properties": {"status": {"type": "string"}, "count": {"type": "integer"}},
        "required": ["status", "count"],
        "additionalProperties": false
    })
}

fn user(text: &str) -> Vec<Value> {
    vec![json!({"role": "user", "content": text})]
}

/// Builds the one-observation result.
fn finish(
    ctx: &GateContext,
    gate: GateName,
    request: Value,
    reply: &Reply,
    verdict: Result<String, (String, String)>,
    details: Value,
) -> GateResult {
    let mut r = GateResult::start(gate, ctx);
    let (v, class, reason) = match verdict {
        Ok(reason) => (Verdict::Pass, None, reason),
        Err((class, reason)) => (Verdict::Fail, Some(class), reason),
    };
    r.observations.push(Observation {
        id: format!("{gate}#1"),
        item: Some(gate.as_str().to_string()),
        variant: None,
        attempt: Some(1),
        verdict: v,
        class,
        reason: reason.clone(),
        exchanges: vec![reply.record(request, ctx.excerpt_chars)],
        details,
    });
    r.count();
    r.status = if v == Verdict::Pass {
        Status::Passed
    } else {
        Status::Failed
    };
    r.reason = reason;
    r
}

fn request_failed(reply: &Reply) -> Option<(String, String)> {
    reply
        .error_words()
        .map(|w| ("request-error".to_string(), format!("request failed: {w}")))
}

pub async fn smoke(ctx: &GateContext) -> GateResult {
    let body = chat_body(ctx, user(SMOKE_PROMPT), SMOKE_MAX_TOKENS, ctx.seed);
    let (req, reply) = send(ctx, body, false).await;
    let verdict = match request_failed(&reply) {
        Some(e) => Err(e),
        None if reply
            .content
            .to_lowercase()
            .contains(&SMOKE_MARKER.to_lowercase()) =>
        {
            Ok(format!("the answer contains {SMOKE_MARKER}"))
        }
        None if reply.content.trim().is_empty() => Err((
            "no-visible-answer".into(),
            format!(
                "no visible answer (finish_reason {})",
                reply.finish_reason.as_deref().unwrap_or("none")
            ),
        )),
        None => Err((
            "wrong-answer".into(),
            format!(
                "the answer {:?} does not contain {SMOKE_MARKER}",
                excerpt(&reply.content, 80)
            ),
        )),
    };
    finish(
        ctx,
        GateName::Smoke,
        req,
        &reply,
        verdict,
        json!({"marker": SMOKE_MARKER}),
    )
}

/// The content as JSON: the whole trimmed text, or the inside of one ```json fence.
fn parse_json_answer(text: &str) -> Option<(Value, bool)> {
    let t = text.trim();
    if let Ok(v) = serde_json::from_str(t) {
        return Some((v, false));
    }
    let inner = t
        .strip_prefix("```json")
        .or_else(|| t.strip_prefix("```"))?
        .strip_suffix("```")?;
    serde_json::from_str(inner.trim()).ok().map(|v| (v, true))
}

pub async fn json(ctx: &GateContext) -> GateResult {
    let schema = json_schema();
    let mut body = chat_body(ctx, user(JSON_PROMPT), JSON_MAX_TOKENS, ctx.seed);
    body.insert(
        "response_format".into(),
        json!({"type": "json_schema", "json_schema": {"name": "preflight", "strict": true, "schema": schema}}),
    );
    let (req, reply) = send(ctx, body, false).await;
    let validator = jsonschema::validator_for(&schema).expect("the preflight schema is valid");
    let mut details = json!({"schema": schema});
    let verdict = match request_failed(&reply) {
        Some(e) => Err(e),
        None => match parse_json_answer(&reply.content) {
            None => Err((
                "not-json".into(),
                format!(
                    "the answer is not valid JSON (finish_reason {}): {:?}",
                    reply.finish_reason.as_deref().unwrap_or("none"),
                    excerpt(&reply.content, 120)
                ),
            )),
            Some((v, fenced)) => {
                details["fenced"] = json!(fenced);
                let missing: Vec<&str> = ["status", "count"]
                    .into_iter()
                    .filter(|k| v.get(k).is_none())
                    .collect();
                if !v.is_object() {
                    Err((
                        "schema".into(),
                        format!(
                            "the answer is JSON but not an object: {}",
                            excerpt(&v.to_string(), 80)
                        ),
                    ))
                } else if !missing.is_empty() {
                    Err((
                        "schema".into(),
                        format!(
                            "the JSON answer lacks the required key(s): {}",
                            missing.join(", ")
                        ),
                    ))
                } else {
                    let errs: Vec<String> =
                        validator.iter_errors(&v).map(|e| e.to_string()).collect();
                    if errs.is_empty() {
                        Ok(format!(
                            "the answer {} parses and has the required keys",
                            excerpt(&v.to_string(), 80)
                        ))
                    } else {
                        Err((
                            "schema".into(),
                            format!(
                                "the JSON answer does not match the schema: {}",
                                errs.join("; ")
                            ),
                        ))
                    }
                }
            }
        },
    };
    finish(ctx, GateName::Json, req, &reply, verdict, details)
}

pub async fn streaming(ctx: &GateContext) -> GateResult {
    let body = chat_body(ctx, user(STREAM_PROMPT), STREAM_MAX_TOKENS, ctx.seed);
    let (req, reply) = send(ctx, body, true).await;
    let usage = reply.usage.as_ref();
    let chunks = reply.content_chunks.unwrap_or(0);
    let verdict = if let Some(e) = request_failed(&reply) {
        Err(e)
    } else if reply.done != Some(true) {
        Err((
            "incomplete".into(),
            "the stream did not end with data: [DONE]".into(),
        ))
    } else if usage.and_then(|u| u.prompt_tokens).is_none()
        || usage.and_then(|u| u.completion_tokens).is_none()
    {
        Err((
            "no-usage".into(),
            "the stream carried no usage (prompt_tokens and completion_tokens) although stream_options.include_usage was sent".into(),
        ))
    } else if chunks == 0 {
        Err((
            "no-visible-answer".into(),
            "the stream carried no visible content".into(),
        ))
    } else {
        Ok(format!(
            "ended with [DONE] after {chunks} content chunks; usage {} prompt + {} completion tokens",
            usage.and_then(|u| u.prompt_tokens).unwrap_or(0),
            usage.and_then(|u| u.completion_tokens).unwrap_or(0)
        ))
    };
    finish(ctx, GateName::Streaming, req, &reply, verdict, Value::Null)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_answers_parse_with_or_without_a_fence() {
        assert!(!parse_json_answer(" {\"a\":1} ").unwrap().1);
        assert!(parse_json_answer("```json\n{\"a\":1}\n```").unwrap().1);
        assert!(parse_json_answer("sure: {\"a\":1}").is_none());
    }
}
