//! The listener, the per-connection loop and the small endpoints.

use std::sync::Arc;

use serde_json::Value;
use tokio::net::TcpListener;

// `App` lives in app.rs so completion.rs can use it without importing this module.
pub use super::app::App;
use super::http::{self, Conn, ReadError, Request};
use super::json;
use super::state;
use super::{completion, emissions, tokenizer};

/// Accept connections forever.
pub async fn serve(listener: TcpListener, app: Arc<App>) {
    loop {
        match listener.accept().await {
            Ok((stream, _)) => {
                let app = app.clone();
                tokio::spawn(async move { connection(Conn::new(stream), app).await });
            }
            Err(e) => {
                // EMFILE and friends: back off briefly instead of spinning.
                super::log_line(&format!("reference engine: accept failed: {e}"));
                tokio::time::sleep(std::time::Duration::from_millis(5)).await;
            }
        }
    }
}

async fn connection(mut conn: Conn, app: Arc<App>) {
    loop {
        let req = match conn.read_request().await {
            Ok(r) => r,
            Err(ReadError::Closed) => return,
            Err(ReadError::Bad(status, msg)) => {
                let body = json::error_body(status, "invalid_request_error", &msg);
                let _ = conn
                    .write(&http::response(
                        status,
                        "application/json",
                        body.as_bytes(),
                        None,
                        true,
                    ))
                    .await;
                return;
            }
        };
        let keep = route(&app, &mut conn, &req).await;
        if !keep || req.close {
            return;
        }
    }
}

async fn reply(conn: &mut Conn, status: u16, content_type: &str, body: &str) -> bool {
    conn.write(&http::response(
        status,
        content_type,
        body.as_bytes(),
        None,
        false,
    ))
    .await
}

async fn reply_json(conn: &mut Conn, status: u16, body: &str) -> bool {
    reply(conn, status, "application/json", body).await
}

/// Answer one request; false when the connection must close.
async fn route(app: &Arc<App>, conn: &mut Conn, req: &Request) -> bool {
    let m = req.method.as_str();
    let path = req.path.as_str();
    let loading = !app.loaded();
    match (m, path) {
        ("GET", "/health") => {
            if loading {
                reply_json(conn, 503, r#"{"status":"loading"}"#).await
            } else {
                reply_json(conn, 200, r#"{"status":"ok"}"#).await
            }
        }
        ("GET", "/metrics") => {
            let text = state::metrics_text(&app.models);
            reply(conn, 200, "text/plain; version=0.0.4", &text).await
        }
        ("GET", "/debug/emissions") => reply_json(conn, 200, &emissions::to_json()).await,
        ("DELETE", "/debug/emissions") => {
            emissions::clear();
            reply_json(conn, 200, r#"{"cleared":true}"#).await
        }
        ("GET", "/v1/models")
        | ("POST", "/tokenize")
        | ("POST", "/detokenize")
        | ("POST", "/v1/chat/completions")
        | ("POST", "/v1/completions")
            if loading =>
        {
            let body = json::error_body(503, "service_unavailable", "model is loading");
            reply_json(conn, 503, &body).await
        }
        ("GET", "/v1/models") => reply_json(conn, 200, &models_json(app)).await,
        ("POST", "/tokenize") => match tokenize(app, &req.body) {
            Ok(b) => reply_json(conn, 200, &b).await,
            Err(e) => bad_request(conn, &e).await,
        },
        ("POST", "/detokenize") => match detokenize(&req.body) {
            Ok(b) => reply_json(conn, 200, &b).await,
            Err(e) => bad_request(conn, &e).await,
        },
        ("POST", "/v1/chat/completions") => completion::handle(app, conn, req, true).await,
        ("POST", "/v1/completions") => completion::handle(app, conn, req, false).await,
        (
            _,
            "/health"
            | "/metrics"
            | "/debug/emissions"
            | "/v1/models"
            | "/tokenize"
            | "/detokenize"
            | "/v1/chat/completions"
            | "/v1/completions",
        ) => {
            let body = json::error_body(405, "invalid_request_error", "method not allowed");
            reply_json(conn, 405, &body).await
        }
        _ => {
            let body = json::error_body(404, "not_found_error", &format!("no route {path}"));
            reply_json(conn, 404, &body).await
        }
    }
}

async fn bad_request(conn: &mut Conn, msg: &str) -> bool {
    let body = json::error_body(400, "invalid_request_error", msg);
    reply_json(conn, 400, &body).await
}

fn models_json(app: &App) -> String {
    let created = crate::clock::unix_secs();
    let mut o = String::from("{\"object\":\"list\",\"data\":[");
    for (i, m) in app.models.iter().enumerate() {
        if i > 0 {
            o.push(',');
        }
        o.push_str("{\"id\":");
        json::push_str(&mut o, &m.profile.model);
        o.push_str(&format!(
            ",\"object\":\"model\",\"created\":{created},\"owned_by\":\"bakeoff-reference\",\"max_model_len\":{}}}",
            m.profile.context_tokens
        ));
    }
    o.push_str("]}");
    o
}

fn tokenize(app: &App, body: &[u8]) -> Result<String, String> {
    let v: Value =
        serde_json::from_slice(body).map_err(|e| format!("request body is not valid JSON: {e}"))?;
    let text = if let Some(c) = v.get("content").or_else(|| v.get("prompt")) {
        c.as_str()
            .ok_or("`content` / `prompt` must be a string")?
            .to_string()
    } else if let Some(Value::Array(msgs)) = v.get("messages") {
        let tools = v
            .get("tools")
            .filter(|t| t.as_array().is_some_and(|a| !a.is_empty()));
        tokenizer::render_chat(msgs, tools)
    } else {
        return Err("give `content` (llama.cpp), `prompt` or `messages` (vLLM)".into());
    };
    let ids = tokenizer::encode(&text);
    let max_len = v
        .get("model")
        .and_then(Value::as_str)
        .and_then(|n| app.model(n))
        .or(app.models.first())
        .map(|m| m.profile.context_tokens)
        .unwrap_or(0);
    let mut o = String::with_capacity(ids.len() * 15 + 64);
    o.push_str("{\"tokens\":[");
    for (i, id) in ids.iter().enumerate() {
        if i > 0 {
            o.push(',');
        }
        o.push_str(&id.to_string());
    }
    o.push_str(&format!(
        "],\"count\":{},\"max_model_len\":{max_len}}}",
        ids.len()
    ));
    Ok(o)
}

fn detokenize(body: &[u8]) -> Result<String, String> {
    let v: Value =
        serde_json::from_slice(body).map_err(|e| format!("request body is not valid JSON: {e}"))?;
    let ids: Vec<u64> = v
        .get("tokens")
        .and_then(Value::as_array)
        .ok_or("missing `tokens` (an array of token ids)")?
        .iter()
        .map(|x| x.as_u64().ok_or("`tokens` must hold non-negative integers"))
        .collect::<Result<_, _>>()?;
    let text = tokenizer::decode(&ids)?;
    let s = json::string(&text);
    Ok(format!("{{\"content\":{s},\"prompt\":{s}}}"))
}
