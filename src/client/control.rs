//! Control-plane requests (models, tokenize, probes): whole JSON bodies, a fresh connection each.

use super::conn::Conn;
use super::trace::{ErrorClass, RequestError};
use super::{post_request_bytes, Target};
use std::time::Duration;

/// Largest control-plane body accepted (a `/tokenize` of a long prompt is a few hundred KiB).
const LIMIT: usize = 64 * 1024 * 1024;

/// GET `path`, returning the status and the parsed JSON body.
pub async fn get_json(
    target: &Target,
    path: &str,
    api_key: Option<&str>,
    timeout: Duration,
) -> Result<(u16, serde_json::Value), RequestError> {
    bodyless("GET", target, path, api_key, timeout).await
}

/// DELETE `path`, returning the status and the parsed JSON body.
pub async fn delete_json(
    target: &Target,
    path: &str,
    api_key: Option<&str>,
    timeout: Duration,
) -> Result<(u16, serde_json::Value), RequestError> {
    bodyless("DELETE", target, path, api_key, timeout).await
}

async fn bodyless(
    method: &str,
    target: &Target,
    path: &str,
    api_key: Option<&str>,
    timeout: Duration,
) -> Result<(u16, serde_json::Value), RequestError> {
    let mut req = format!(
        "{method} {} HTTP/1.1\r\nHost: {}\r\nUser-Agent: bakeoff/{}\r\nAccept: application/json\r\n",
        target.path(path),
        target.host_header(),
        crate::VERSION
    );
    if let Some(k) = api_key {
        req.push_str(&format!("Authorization: Bearer {k}\r\n"));
    }
    req.push_str("\r\n");
    call(target, req.as_bytes(), path, timeout).await
}

/// POST a JSON body to `path`, returning the status and the parsed JSON body.
pub async fn post_json(
    target: &Target,
    path: &str,
    body: &serde_json::Value,
    api_key: Option<&str>,
    timeout: Duration,
) -> Result<(u16, serde_json::Value), RequestError> {
    let body = serde_json::to_vec(body).expect("JSON values serialize");
    let req = post_request_bytes(target, path, &body, api_key, false);
    call(target, &req, path, timeout).await
}

async fn call(
    target: &Target,
    req: &[u8],
    path: &str,
    timeout: Duration,
) -> Result<(u16, serde_json::Value), RequestError> {
    let mut conn = Conn::connect(target, timeout).await?;
    let (status, body) = conn.exchange(req, timeout, LIMIT).await?;
    if body.is_empty() {
        return Ok((status, serde_json::Value::Null));
    }
    match serde_json::from_slice(&body) {
        Ok(v) => Ok((status, v)),
        Err(_) => {
            let text = one_line(&String::from_utf8_lossy(&body[..body.len().min(4096)]), 120);
            let mut e = RequestError::new(
                ErrorClass::NotSse,
                format!(
                    "{target}{path} answered HTTP {status} with a body that is not JSON: {text}"
                ),
            );
            e.status = Some(status);
            Err(e)
        }
    }
}

/// The model ids `/v1/models` lists, in order.
pub async fn list_models(
    target: &Target,
    api_key: Option<&str>,
    timeout: Duration,
) -> Result<Vec<String>, String> {
    match models_answer(target, api_key, timeout).await {
        ModelsAnswer::Listed(ids) => Ok(ids),
        ModelsAnswer::NoAnswer(e) | ModelsAnswer::Unusable(e) => Err(e),
    }
}

/// What `/v1/models` said: the ids, an answer that lists none (a 404, HTML, an empty list), or
/// no answer at all (connection refused); the last two carry the error in words.
#[derive(Debug, Clone, PartialEq)]
pub enum ModelsAnswer {
    Listed(Vec<String>),
    Unusable(String),
    NoAnswer(String),
}

/// `/v1/models`, telling a server that answered without a model list from one that did not answer.
pub async fn models_answer(
    target: &Target,
    api_key: Option<&str>,
    timeout: Duration,
) -> ModelsAnswer {
    match models_inner(target, api_key, timeout).await {
        Ok(ids) => ModelsAnswer::Listed(ids),
        Err((true, e)) => ModelsAnswer::Unusable(e),
        Err((false, e)) => ModelsAnswer::NoAnswer(e),
    }
}

/// Err((answered, message)).
async fn models_inner(
    target: &Target,
    api_key: Option<&str>,
    timeout: Duration,
) -> Result<Vec<String>, (bool, String)> {
    let (status, v) = get_json(target, "/v1/models", api_key, timeout)
        .await
        .map_err(|e| match e.class {
            ErrorClass::Connect => (false, e.message),
            _ => (
                e.status.is_some(),
                format!("{}; is this an OpenAI-compatible server?", e.message),
            ),
        })?;
    let fail = |m: String| (true, m);
    if status != 200 {
        return Err(fail(format!(
            "{target}/v1/models answered HTTP {status}: {}; is this an OpenAI-compatible server?",
            excerpt(&v)
        )));
    }
    let ids: Vec<String> = v
        .get("data")
        .and_then(|d| d.as_array())
        .map(|a| {
            a.iter()
                .filter_map(|m| m.get("id").and_then(|i| i.as_str()).map(str::to_string))
                .collect()
        })
        .unwrap_or_default();
    if ids.is_empty() {
        return Err(fail(format!(
            "{target}/v1/models lists no models (body: {}); is this an OpenAI-compatible server? Pass --model to choose one",
            excerpt(&v)
        )));
    }
    Ok(ids)
}

/// A body summarised on one line: HTML tags dropped, whitespace runs made one space, at most
/// `max` characters (then "…").
pub fn one_line(text: &str, max: usize) -> String {
    let mut plain = String::with_capacity(text.len().min(4 * max));
    let looks_html = text.trim_start().starts_with('<');
    let mut in_tag = false;
    for c in text.chars() {
        match c {
            '<' if looks_html => {
                in_tag = true;
                plain.push(' ');
            }
            '>' if looks_html && in_tag => in_tag = false,
            _ if in_tag => {}
            c => plain.push(c),
        }
    }
    let words: Vec<&str> = plain.split_whitespace().collect();
    let joined = words.join(" ");
    if joined.chars().count() > max {
        format!("{}…", joined.chars().take(max).collect::<String>())
    } else {
        joined
    }
}

pub fn excerpt(v: &serde_json::Value) -> String {
    let s = v.to_string();
    if s.chars().count() > 200 {
        format!("{}…", s.chars().take(200).collect::<String>())
    } else {
        s
    }
}
