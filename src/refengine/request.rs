//! Parsing `/v1/chat/completions` and `/v1/completions` request bodies.

use serde_json::Value;

use super::tokenizer;

/// Default `max_tokens` when a request gives none.
pub const DEFAULT_MAX_TOKENS: u64 = 16;

/// A completion request, validated, with its prompt rendered and tokenized.
#[derive(Debug)]
pub struct Completion {
    pub chat: bool,
    pub model: String,
    /// The rendered prompt (chat template applied for chat requests).
    pub prompt: String,
    pub prompt_ids: Vec<u64>,
    /// The last user message (the whole prompt for /v1/completions).
    pub user: String,
    pub tool_results: Vec<String>,
    pub tools: Vec<Value>,
    pub tool_choice: Option<Value>,
    pub response_format: Option<Value>,
    pub max_tokens: u64,
    pub stream: bool,
    pub include_usage: bool,
    pub temperature: Option<f64>,
    pub seed: Option<u64>,
    pub ignore_eos: bool,
    pub cache_prompt: bool,
}

fn opt_u64(v: &Value, key: &str) -> Result<Option<u64>, String> {
    match v.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(x) => x
            .as_u64()
            .or_else(|| {
                x.as_f64()
                    .filter(|f| *f >= 0.0 && f.fract() == 0.0)
                    .map(|f| f as u64)
            })
            .map(Some)
            .ok_or_else(|| format!("`{key}` must be a non-negative integer")),
    }
}

fn opt_bool(v: &Value, key: &str) -> Result<Option<bool>, String> {
    match v.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Bool(b)) => Ok(Some(*b)),
        Some(_) => Err(format!("`{key}` must be a boolean")),
    }
}

/// Parse a completion request body (`chat` selects the endpoint's shape).
pub fn parse(body: &[u8], chat: bool) -> Result<Completion, String> {
    let v: Value =
        serde_json::from_slice(body).map_err(|e| format!("request body is not valid JSON: {e}"))?;
    if !v.is_object() {
        return Err("request body must be a JSON object".into());
    }
    let model = match v.get("model") {
        Some(Value::String(s)) => s.clone(),
        Some(_) => return Err("`model` must be a string".into()),
        None => return Err("missing required field `model`".into()),
    };
    let tools: Vec<Value> = match v.get("tools") {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::Array(a)) => a.clone(),
        Some(_) => return Err("`tools` must be an array".into()),
    };
    let mut tool_results = Vec::new();
    let (prompt, prompt_ids, user) = if chat {
        let msgs = match v.get("messages") {
            Some(Value::Array(a)) if !a.is_empty() => a,
            Some(Value::Array(_)) => return Err("`messages` must not be empty".into()),
            Some(_) => return Err("`messages` must be an array".into()),
            None => return Err("missing required field `messages`".into()),
        };
        let mut user = String::new();
        for m in msgs {
            let role = m
                .get("role")
                .and_then(Value::as_str)
                .ok_or("every message needs a string `role`")?;
            let text = m
                .get("content")
                .map(tokenizer::content_text)
                .unwrap_or_default();
            match role {
                "user" => user = text,
                "tool" => tool_results.push(text),
                _ => {}
            }
        }
        let t = if tools.is_empty() {
            None
        } else {
            v.get("tools")
        };
        let prompt = tokenizer::render_chat(msgs, t);
        let ids = tokenizer::encode(&prompt);
        (prompt, ids, user)
    } else {
        let p = v.get("prompt").ok_or("missing required field `prompt`")?;
        let p = match p {
            Value::Array(a) if a.len() == 1 && !a[0].is_number() => &a[0],
            other => other,
        };
        match p {
            Value::String(s) => {
                let ids = tokenizer::encode(s);
                (s.clone(), ids, s.clone())
            }
            Value::Array(a) => {
                let ids: Option<Vec<u64>> = a.iter().map(Value::as_u64).collect();
                let ids = ids.ok_or("`prompt` must be a string or an array of token ids")?;
                let text = tokenizer::decode(&ids)?;
                (text.clone(), ids, text)
            }
            _ => return Err("`prompt` must be a string or an array of token ids".into()),
        }
    };
    let max_tokens = match opt_u64(&v, "max_completion_tokens")? {
        Some(n) => Some(n),
        None => opt_u64(&v, "max_tokens")?,
    };
    let max_tokens = max_tokens.unwrap_or(DEFAULT_MAX_TOKENS);
    if max_tokens == 0 {
        return Err("`max_tokens` must be at least 1".into());
    }
    let include_usage = match v.get("stream_options") {
        None | Some(Value::Null) => false,
        Some(o) => opt_bool(o, "include_usage")?.unwrap_or(false),
    };
    let temperature = match v.get("temperature") {
        None | Some(Value::Null) => None,
        Some(t) => Some(t.as_f64().ok_or("`temperature` must be a number")?),
    };
    let seed = match v.get("seed") {
        None | Some(Value::Null) => None,
        Some(s) => Some(
            s.as_u64()
                .or_else(|| s.as_i64().map(|i| i as u64))
                .ok_or("`seed` must be an integer")?,
        ),
    };
    Ok(Completion {
        chat,
        model,
        prompt,
        prompt_ids,
        user,
        tool_results,
        tools,
        tool_choice: v.get("tool_choice").cloned(),
        response_format: v.get("response_format").filter(|r| !r.is_null()).cloned(),
        max_tokens,
        stream: opt_bool(&v, "stream")?.unwrap_or(false),
        include_usage,
        temperature,
        seed,
        ignore_eos: opt_bool(&v, "ignore_eos")?.unwrap_or(false),
        cache_prompt: opt_bool(&v, "cache_prompt")?.unwrap_or(true),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_chat_and_completions() {
        let c = parse(
            br#"{"model":"m","messages":[{"role":"user","content":"hi"}],"max_tokens":5,"stream":true,"stream_options":{"include_usage":true}}"#,
            true,
        )
        .unwrap();
        assert_eq!(c.max_tokens, 5);
        assert!(c.stream && c.include_usage);
        assert_eq!(c.user, "hi");
        assert_eq!(c.prompt_ids.len(), tokenizer::count(&c.prompt));
        let c = parse(br#"{"model":"m","prompt":"abc def"}"#, false).unwrap();
        assert_eq!(c.max_tokens, DEFAULT_MAX_TOKENS);
        assert_eq!(c.prompt_ids.len(), 2);
        let ids = tokenizer::encode("abc def");
        let body = serde_json::json!({"model":"m","prompt":ids}).to_string();
        let c = parse(body.as_bytes(), false).unwrap();
        assert_eq!(c.prompt, "abc def");
    }

    #[test]
    fn rejects_bad_requests() {
        assert!(parse(b"{", true).unwrap_err().contains("not valid JSON"));
        assert!(parse(br#"{"messages":[]}"#, true)
            .unwrap_err()
            .contains("model"));
        assert!(parse(br#"{"model":"m"}"#, true)
            .unwrap_err()
            .contains("messages"));
        assert!(parse(br#"{"model":"m","prompt":"x","max_tokens":0}"#, false).is_err());
        assert!(parse(br#"{"model":"m","prompt":"x","stream":"yes"}"#, false).is_err());
    }
}
