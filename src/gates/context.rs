//! The served context length: `--context-tokens`, else `/v1/models` (`max_model_len` of vLLM,
//! SGLang and the reference engine; llama.cpp's `meta.n_ctx`, which is per slot), else llama.cpp's
//! `/props` (`default_generation_settings.n_ctx`).

use super::GateContext;
use crate::client::control::get_json;
use serde::Serialize;
use serde_json::Value;
use std::time::Duration;

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ServedContext {
    /// Tokens one request may use (prompt + completion); None when the endpoint does not say.
    pub tokens: Option<u64>,
    /// Where the number came from.
    pub source: String,
}

/// The model's entry of a `/v1/models` body (the one whose id is `model`, else the only one).
fn entry<'a>(v: &'a Value, model: &str) -> Option<&'a Value> {
    let data = v.get("data")?.as_array()?;
    data.iter()
        .find(|m| m.get("id").and_then(Value::as_str) == Some(model))
        .or_else(|| (data.len() == 1).then(|| &data[0]))
}

/// The context a `/v1/models` body declares for `model`.
pub fn from_models(v: &Value, model: &str) -> Option<(u64, &'static str)> {
    let e = entry(v, model)?;
    if let Some(n) = e.get("max_model_len").and_then(Value::as_u64) {
        return Some((n, "/v1/models max_model_len"));
    }
    if let Some(n) = e.pointer("/meta/n_ctx").and_then(Value::as_u64) {
        return Some((n, "/v1/models meta.n_ctx (llama.cpp, per slot)"));
    }
    if let Some(n) = e.get("context_length").and_then(Value::as_u64) {
        return Some((n, "/v1/models context_length"));
    }
    None
}

/// Asks the endpoint (unless the context says).
pub async fn served(ctx: &GateContext) -> ServedContext {
    if let Some(n) = ctx.context_tokens {
        return ServedContext {
            tokens: Some(n),
            source: "--context-tokens".into(),
        };
    }
    let t = Duration::from_secs(30).min(ctx.timeout);
    let key = ctx.api_key.as_deref();
    if let Ok((200, v)) = get_json(&ctx.target, "/v1/models", key, t).await {
        if let Some((n, src)) = from_models(&v, &ctx.model) {
            return ServedContext {
                tokens: Some(n),
                source: src.into(),
            };
        }
    }
    if let Ok((200, v)) = get_json(&ctx.target, "/props", key, t).await {
        if let Some(n) = v
            .pointer("/default_generation_settings/n_ctx")
            .and_then(Value::as_u64)
        {
            return ServedContext {
                tokens: Some(n),
                source: "/props default_generation_settings.n_ctx (llama.cpp, per slot)".into(),
            };
        }
    }
    ServedContext {
        tokens: None,
        source: "unknown: neither /v1/models nor /props states it; pass --context-tokens".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn reads_vllm_and_llama_cpp_shapes() {
        let v = json!({"data":[{"id":"a","max_model_len":32768},{"id":"b","max_model_len":8192}]});
        assert_eq!(
            from_models(&v, "b"),
            Some((8192, "/v1/models max_model_len"))
        );
        let v = json!({"data":[{"id":"smollm2","meta":{"n_ctx":4096,"n_ctx_train":8192}}]});
        assert_eq!(from_models(&v, "other").map(|x| x.0), Some(4096));
        assert_eq!(from_models(&json!({"data":[]}), "x"), None);
    }
}
