//! The endpoint as prompt sizing sees it: [`Backend`] (the interface the search in
//! `workload::prompt` talks through) and [`HttpBackend`], the real one over HTTP: `/tokenize` in
//! its llama.cpp and vLLM forms, and `usage.prompt_tokens` of real requests, non-streaming or,
//! where the endpoint refuses that, streamed (`workload::streamed`).

use super::request::{insert_input, merge_extra, BodySpec, Precedence};
use super::Endpoint;
use crate::client::control::{excerpt, post_json};
use crate::client::{ErrorClass, RequestError, Target};
use serde_json::{json, Value};
use std::future::Future;
use std::time::Duration;

/// The endpoint as the sizing logic sees it.
pub trait Backend: Send {
    /// Token count of `text` from the server's tokenizer endpoint, without special tokens;
    /// `Ok(None)` when the server has no such endpoint.
    fn tokenize(&mut self, text: &str) -> impl Future<Output = Result<Option<u64>, String>> + Send;
    /// `usage.prompt_tokens` of one real request (`max_tokens` 1, temperature 0) whose content
    /// (chat) or prompt (completions) is `text`: non-streaming, or streamed where the endpoint
    /// refuses that.
    fn prompt_tokens(&mut self, text: &str) -> impl Future<Output = Result<u64, String>> + Send;
    /// How the backend had to measure, for the record (taken once, at the end).
    fn take_notes(&mut self) -> Vec<String> {
        Vec::new()
    }
}

/// The real endpoint, over HTTP.
pub struct HttpBackend<'a> {
    pub target: &'a Target,
    pub model: &'a str,
    pub endpoint: Endpoint,
    pub api_key: Option<&'a str>,
    pub timeout: Duration,
    pub extra_body: Option<&'a serde_json::Map<String, Value>>,
    /// Which form of sizing request works here: learnt on the first one (start with
    /// `SizingMode::default()`).
    pub mode: SizingMode,
    /// Transient failures retried so far (start with `Vec::new()`): one line each, for the record.
    pub retried: Vec<String>,
}

/// A sizing request that fails transiently (HTTP 500/502/503/504, a refused or reset
/// connection) is sent again up to this many times, after [`RETRY_BACKOFF`], doubling each time.
pub const SIZING_RETRIES: u32 = 3;
/// The wait before the first retry of a sizing request (then 2x, 4x).
pub const RETRY_BACKOFF: Duration = Duration::from_millis(250);

/// Whether an HTTP status is worth another try.
fn transient_status(s: u16) -> bool {
    matches!(s, 500 | 502 | 503 | 504)
}

/// Why a control request's outcome is worth another try, in words; `None` when it is not.
fn transient(r: &Result<(u16, Value), RequestError>) -> Option<String> {
    match r {
        Ok((s, _)) if transient_status(*s) => Some(format!("HTTP {s}")),
        Err(e) => match e.status {
            Some(s) if transient_status(s) => Some(format!("HTTP {s}")),
            Some(_) => None,
            None if matches!(
                e.class,
                ErrorClass::Connect | ErrorClass::Io | ErrorClass::Incomplete
            ) =>
            {
                Some(e.message.clone())
            }
            None => None,
        },
        _ => None,
    }
}

/// Which form of sizing request an endpoint answers with `usage.prompt_tokens`.
#[derive(Debug, Clone, Default, PartialEq)]
pub enum SizingMode {
    /// Nothing sent yet: a refusal of `stream: false` falls back to a streamed request.
    #[default]
    Unknown,
    /// `stream: false` answered with usage; later errors are the endpoint's own.
    NonStreaming,
    /// The endpoint would not give usage for `stream: false` (why, in words): every sizing
    /// request streams and reads the usage chunk.
    Streamed(String),
}

impl Backend for HttpBackend<'_> {
    fn take_notes(&mut self) -> Vec<String> {
        let mut notes: Vec<String> = match &self.mode {
            SizingMode::Streamed(why) => Some(why),
            _ => None,
        }
        .map(|why| format!("sizing requests were streamed and read usage.prompt_tokens from the usage chunk (stream_options.include_usage): {why}"))
            .into_iter()
            .collect();
        if !self.retried.is_empty() {
            notes.push(format!(
                "{} sizing request(s) were retried after a transient failure: {}",
                self.retried.len(),
                self.retried.join("; ")
            ));
        }
        notes
    }

    async fn tokenize(&mut self, text: &str) -> Result<Option<u64>, String> {
        // One body for llama.cpp (`content`, `add_special`) and vLLM (`model`, `prompt`,
        // `add_special_tokens`); the reply is `{"tokens":[...]}` or `{"count":n,...}`.
        let body = json!({
            "content": text,
            "add_special": false,
            "model": self.model,
            "prompt": text,
            "add_special_tokens": false,
        });
        let t = self.target;
        match self.post_retrying("/tokenize", &body).await.0 {
            Ok((200, v)) => Ok(tokenize_count(&v)),
            Ok((s @ (401 | 403), v)) => Err(format!(
                "{t}/tokenize answered HTTP {s}: {}; check --api-key",
                excerpt(&v)
            )),
            // 404/405 (and anything else that is not a token list): no usable /tokenize.
            Ok(_) => Ok(None),
            Err(e) if e.status.is_some() => Ok(None),
            Err(e) => Err(format!("{t}/tokenize: {}", e.message)),
        }
    }

    async fn prompt_tokens(&mut self, text: &str) -> Result<u64, String> {
        let mut body = BodySpec {
            model: self.model,
            max_tokens: 1,
            stream: Some(false),
            ..Default::default()
        }
        .build();
        // An integer 0, as this probe has always sent (tests/it/prompt/http.rs checks it).
        body.insert("temperature".into(), json!(0));
        insert_input(&mut body, self.endpoint, text.to_string());
        if let Some(extra) = self.extra_body {
            merge_extra(&mut body, extra, Precedence::BodyWins);
        }
        let t = self.target;
        let path = self.endpoint.path();
        if matches!(self.mode, SizingMode::Streamed(_)) {
            return self.streamed_tokens(&body, text, None).await;
        }
        let learning = self.mode == SizingMode::Unknown;
        let (reply, retries) = self.post_retrying(path, &Value::Object(body.clone())).await;
        let after = retried_suffix(retries);
        let (status, v) = match reply {
            Ok(r) => r,
            // A 200 that is not JSON: an endpoint that streams whatever it is asked.
            Err(e) if learning && e.status == Some(200) => {
                let why = "HTTP 200 with a body that is not JSON to stream: false".to_string();
                return self.streamed_tokens(&body, text, Some(why)).await;
            }
            Err(e) => {
                return Err(format!(
                    "{t}{path}: {} (while sizing the prompt){after}",
                    e.message
                ))
            }
        };
        // A refusal of the non-streaming form (a 400 may also be the context limit: the streamed
        // request tells them apart).
        if learning && matches!(status, 400 | 404 | 405 | 415 | 422 | 501) {
            let why = format!("HTTP {status} to stream: false ({})", excerpt(&v));
            return match self.streamed_tokens(&body, text, Some(why)).await {
                Ok(n) => Ok(n),
                Err(e) if status == 400 || status == 413 => Err(format!(
                    "{e}; is the prompt longer than the model's context?"
                )),
                Err(e) => Err(e),
            };
        }
        if status != 200 {
            let hint = match status {
                401 | 403 => "; check --api-key",
                400 | 413 => "; is the prompt longer than the model's context?",
                503 => "; is the server still loading the model?",
                _ => "",
            };
            return Err(format!(
                "{t}{path} answered HTTP {status} to a sizing request with a {}-character prompt: {}{after}{hint}",
                text.len(),
                excerpt(&v)
            ));
        }
        match v
            .get("usage")
            .and_then(|u| u.get("prompt_tokens"))
            .and_then(Value::as_u64)
        {
            Some(n) => {
                self.mode = SizingMode::NonStreaming;
                Ok(n)
            }
            None if learning => {
                let why = format!("HTTP 200 without usage.prompt_tokens to stream: false (body: {})", excerpt(&v));
                self.streamed_tokens(&body, text, Some(why)).await
            }
            None => Err(format!(
                "{t}{path} sent no usage.prompt_tokens (body: {}), so the prompt size cannot be checked; pass --tokenizer FILE and check the engine's usage reporting",
                excerpt(&v)
            )),
        }
    }
}

/// The words an error adds when the request was retried first.
fn retried_suffix(retries: u32) -> String {
    match retries {
        0 => String::new(),
        n => format!(" (after {n} retries with backoff)"),
    }
}

impl HttpBackend<'_> {
    /// POST `body` to `path`, sending it again (up to [`SIZING_RETRIES`] times, with doubling
    /// backoff) while the answer is a transient failure; the last outcome and the retries spent.
    async fn post_retrying(
        &mut self,
        path: &str,
        body: &Value,
    ) -> (Result<(u16, Value), RequestError>, u32) {
        let mut retries = 0;
        loop {
            let r = post_json(self.target, path, body, self.api_key, self.timeout).await;
            match transient(&r) {
                Some(why) if retries < SIZING_RETRIES => {
                    let wait = RETRY_BACKOFF * 2u32.pow(retries);
                    retries += 1;
                    self.retried.push(format!(
                        "{path}: {why}, retry {retries} after {} ms",
                        wait.as_millis()
                    ));
                    tokio::time::sleep(wait).await;
                }
                _ => return (r, retries),
            }
        }
    }

    /// The streamed form of the sizing request; `why` (first time only): why the non-streaming
    /// form did not do, kept for the record once the streamed one works.
    async fn streamed_tokens(
        &mut self,
        body: &serde_json::Map<String, Value>,
        text: &str,
        why: Option<String>,
    ) -> Result<u64, String> {
        use super::streamed::{prompt_tokens, Failure};
        let (t, path) = (self.target, self.endpoint.path());
        let first = why
            .as_deref()
            .map(|w| format!("{t}{path} answered {w}, and "))
            .unwrap_or_default();
        let mut retries = 0;
        let reply = loop {
            let r = prompt_tokens(t, path, body, self.api_key, self.timeout).await;
            match &r {
                Err(Failure::Status(s, _)) if transient_status(*s) && retries < SIZING_RETRIES => {
                    let wait = RETRY_BACKOFF * 2u32.pow(retries);
                    retries += 1;
                    self.retried.push(format!(
                        "{path} (streamed): HTTP {s}, retry {retries} after {} ms",
                        wait.as_millis()
                    ));
                    tokio::time::sleep(wait).await;
                }
                _ => break r,
            }
        };
        let after = retried_suffix(retries);
        match reply {
            Ok(n) => {
                if let Some(w) = why {
                    self.mode = SizingMode::Streamed(w);
                }
                Ok(n)
            }
            Err(Failure::NoUsage) => Err(format!(
                "{first}its streamed answer carried no usage.prompt_tokens although stream_options.include_usage was sent, so the prompt size cannot be measured: the server lacks usage reporting (and a usable /tokenize); pass --tokenizer FILE (the served model's tokenizer.json)"
            )),
            Err(Failure::Status(s, m)) => {
                let hint = match s {
                    401 | 403 => "; check --api-key",
                    503 => "; is the server still loading the model?",
                    _ => "",
                };
                Err(format!(
                    "{first}{t}{path} answered {m} to a streamed sizing request with a {}-character prompt{after}{hint}",
                    text.len()
                ))
            }
            Err(Failure::Other(m)) => Err(format!("{first}the streamed sizing request failed: {m}")),
        }
    }
}

/// The token count in a `/tokenize` reply: vLLM's `count`, or the length of `tokens`.
pub fn tokenize_count(v: &Value) -> Option<u64> {
    if let Some(n) = v.get("count").and_then(Value::as_u64) {
        return Some(n);
    }
    v.get("tokens")
        .and_then(Value::as_array)
        .map(|a| a.len() as u64)
}
