//! Dataset files: prompts (and output lengths) people actually serve, read from JSONL or ShareGPT
//! JSON. This file parses and orders; `workload::items` counts tokens, filters and builds the
//! requests.
//!
//! - JSONL: one object a line with `prompt` (text) or `messages` (a chat list of `{role,
//!   content}`), optional `output_tokens` (or `max_tokens`) as the output length and optional `id`.
//!   Blank lines are skipped; other fields are ignored.
//! - ShareGPT JSON: an array of `{"id", "conversations": [{"from": "human"|"gpt", "value"}...]}`.
//!   The first human turn is the prompt, the first gpt reply after it gives the output length (its
//!   tokens, counted later), as vLLM's benchmark does. Conversations without such a pair are
//!   skipped and counted.

use rand::seq::SliceRandom;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::path::{Path, PathBuf};

/// The file's format (`--dataset-format`, else detected from the content).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Format {
    Jsonl,
    Sharegpt,
}

impl Format {
    pub fn as_str(self) -> &'static str {
        match self {
            Format::Jsonl => "jsonl",
            Format::Sharegpt => "sharegpt",
        }
    }
}

/// One chat message of a `messages` item.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Message {
    pub role: String,
    pub content: String,
}

/// What an item sends.
#[derive(Debug, Clone, PartialEq)]
pub enum ItemInput {
    /// A prompt text: the user turn (chat) or the prompt (completions).
    Text(String),
    /// A chat message list, sent as given (chat only).
    Messages(Vec<Message>),
}

/// How long an item's answer should be.
#[derive(Debug, Clone, PartialEq)]
pub enum OutputLen {
    /// None given: `--max-tokens` applies.
    Unset,
    /// `output_tokens` / `max_tokens` of a JSONL line.
    Tokens(u64),
    /// The reference reply of a ShareGPT conversation: its length in tokens, counted later.
    Reply(String),
}

/// One item of a dataset file.
#[derive(Debug, Clone, PartialEq)]
pub struct Item {
    /// Position among the file's items (0-based; skipped ShareGPT conversations don't count).
    pub index: usize,
    /// The `id` field, as text, when the item has one.
    pub id: Option<String>,
    /// Where it is: `data.jsonl:17`, or `data.json entry 3`.
    pub at: String,
    pub input: ItemInput,
    pub output: OutputLen,
    /// ShareGPT: the human turns after the first, each with the gpt reply after it (if any), for
    /// multi-turn replays (`workload::conversation::scripts`). Empty for JSONL items (a
    /// `messages` list holds its own turns).
    pub later_turns: Vec<(String, Option<String>)>,
}

/// A loaded dataset file.
#[derive(Debug, Clone)]
pub struct Dataset {
    pub path: PathBuf,
    /// SHA-256 of the file's bytes (hex).
    pub sha256: String,
    pub format: Format,
    pub items: Vec<Item>,
    /// ShareGPT conversations without a human turn followed by a gpt reply (skipped).
    pub skipped: usize,
}

impl Dataset {
    /// The record of the file a run drew from (its digest, format and size) and how it drew:
    /// `sample` items, in the file's order or (`shuffle`) a permutation drawn from `seed`.
    pub fn record(&self, sample: Option<usize>, shuffle: bool, seed: u64) -> serde_json::Value {
        serde_json::json!({
            "path": self.path.display().to_string(),
            "sha256": self.sha256,
            "format": self.format,
            "items_in_file": self.items.len(),
            "skipped_conversations": self.skipped,
            "sample": sample,
            "order": if shuffle { "seeded-shuffle" } else { "file" },
            "seed": seed,
        })
    }

    /// The order items are considered in: the file's order, or (`shuffle`) a permutation drawn
    /// from `seed`, the same on every run and platform.
    pub fn order(&self, shuffle: bool, seed: u64) -> Vec<usize> {
        let mut order: Vec<usize> = (0..self.items.len()).collect();
        if shuffle {
            let mut rng = ChaCha8Rng::seed_from_u64(seed ^ 0x6461_7461_7365_7421);
            order.shuffle(&mut rng);
        }
        order
    }
}

/// Loads `path` in `format` (detected from the content when `None`).
pub fn load(path: &Path, format: Option<Format>) -> Result<Dataset, String> {
    let name = path.display().to_string();
    let bytes = std::fs::read(path).map_err(|e| {
        format!("{name}: cannot read the dataset file ({e}); give the path of a JSONL or ShareGPT JSON file")
    })?;
    let sha256 = {
        use sha2::Digest;
        sha2::Sha256::digest(&bytes)
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect::<String>()
    };
    let text = String::from_utf8(bytes).map_err(|e| {
        format!("{name}: the file is not UTF-8 text ({e}); datasets are JSONL or JSON")
    })?;
    let format = match format {
        Some(f) => f,
        None => detect(&text).ok_or_else(|| {
            format!("{name}: cannot tell the format (the file is empty or starts with neither `{{` (JSONL) nor `[` (ShareGPT JSON)); pass --dataset-format jsonl|sharegpt")
        })?,
    };
    let (items, skipped) = match format {
        Format::Jsonl => (parse_jsonl(&name, &text)?, 0),
        Format::Sharegpt => parse_sharegpt(&name, &text)?,
    };
    if items.is_empty() {
        return Err(match format {
            Format::Jsonl => format!("{name}: no items (every line is blank); each line needs a JSON object with `prompt` or `messages`"),
            Format::Sharegpt => format!("{name}: no usable conversation ({skipped} skipped: none has a human turn followed by a gpt reply)"),
        });
    }
    Ok(Dataset {
        path: path.to_path_buf(),
        sha256,
        format,
        items,
        skipped,
    })
}

/// The format from the first non-blank character: `[` ShareGPT JSON, `{` JSONL.
pub fn detect(text: &str) -> Option<Format> {
    match text
        .trim_start_matches('\u{feff}')
        .trim_start()
        .chars()
        .next()
    {
        Some('[') => Some(Format::Sharegpt),
        Some('{') => Some(Format::Jsonl),
        _ => None,
    }
}

fn id_text(v: &Value) -> Option<String> {
    match v {
        Value::String(s) => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        _ => None,
    }
}

/// Parses JSONL text; errors name `file:line`, the field and the fix.
pub fn parse_jsonl(name: &str, text: &str) -> Result<Vec<Item>, String> {
    let mut items = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let at = format!("{name}:{}", i + 1);
        let line = line.trim_start_matches('\u{feff}').trim();
        if line.is_empty() {
            continue;
        }
        let v: Value = serde_json::from_str(line)
            .map_err(|e| format!("{at}: not a JSON object ({e}); each line must be one JSON object, like {{\"prompt\": \"...\", \"output_tokens\": 128}}"))?;
        let Value::Object(o) = v else {
            return Err(format!("{at}: a JSON {} where an object is needed; each line must be one JSON object with `prompt` or `messages`", kind(&v)));
        };
        let input = match (o.get("prompt"), o.get("messages")) {
            (Some(_), Some(_)) => {
                return Err(format!(
                    "{at}: both `prompt` and `messages`; give one of them"
                ))
            }
            (None, None) => {
                return Err(format!(
                    "{at}: neither `prompt` nor `messages`; each line needs one"
                ))
            }
            (Some(Value::String(p)), None) => {
                if p.is_empty() {
                    return Err(format!("{at}: `prompt` is empty; give the prompt text"));
                }
                ItemInput::Text(p.clone())
            }
            (Some(p), None) => {
                return Err(format!(
                    "{at}: `prompt` is a JSON {}; it must be a string (the prompt text)",
                    kind(p)
                ))
            }
            (None, Some(m)) => ItemInput::Messages(messages(&at, m)?),
        };
        let output = match (o.get("output_tokens"), o.get("max_tokens")) {
            (Some(_), Some(_)) => {
                return Err(format!(
                    "{at}: both `output_tokens` and `max_tokens`; give one output length"
                ))
            }
            (Some(v), None) | (None, Some(v)) => {
                let field = if o.contains_key("output_tokens") {
                    "output_tokens"
                } else {
                    "max_tokens"
                };
                match v.as_u64() {
                    Some(n) if n >= 1 => OutputLen::Tokens(n),
                    Some(_) => return Err(format!("{at}: `{field}` is 0; the output length must be at least 1 token (or leave it out to use --max-tokens)")),
                    None if v.is_null() => OutputLen::Unset,
                    None => return Err(format!("{at}: `{field}` is {v}; it must be a whole number of tokens, at least 1")),
                }
            }
            (None, None) => OutputLen::Unset,
        };
        let id = match o.get("id") {
            None | Some(Value::Null) => None,
            Some(v) => Some(id_text(v).ok_or_else(|| {
                format!(
                    "{at}: `id` is a JSON {}; it must be a string or a number",
                    kind(v)
                )
            })?),
        };
        items.push(Item {
            index: items.len(),
            id,
            at,
            input,
            output,
            later_turns: Vec::new(),
        });
    }
    Ok(items)
}

fn messages(at: &str, v: &Value) -> Result<Vec<Message>, String> {
    let Value::Array(list) = v else {
        return Err(format!("{at}: `messages` is a JSON {}; it must be a list like [{{\"role\": \"user\", \"content\": \"...\"}}]", kind(v)));
    };
    if list.is_empty() {
        return Err(format!(
            "{at}: `messages` is empty; give at least one message"
        ));
    }
    let mut out = Vec::with_capacity(list.len());
    for (k, m) in list.iter().enumerate() {
        let role = m.get("role").and_then(Value::as_str);
        let content = m.get("content").and_then(Value::as_str);
        match (role, content) {
            (Some(r), Some(c)) => out.push(Message {
                role: r.to_string(),
                content: c.to_string(),
            }),
            (None, _) => return Err(format!("{at}: `messages[{k}]` has no string `role`; each message needs a role (system, user, assistant) and a text content")),
            (_, None) => return Err(format!("{at}: `messages[{k}].content` is missing or not a string; give the message text as a string")),
        }
    }
    Ok(out)
}

fn kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

#[derive(Deserialize)]
struct ShareGptEntry {
    #[serde(default)]
    id: Option<Value>,
    conversations: Vec<ShareGptTurn>,
}

#[derive(Deserialize)]
struct ShareGptTurn {
    from: String,
    value: String,
}

/// Parses ShareGPT JSON: the items and the number of conversations skipped.
pub fn parse_sharegpt(name: &str, text: &str) -> Result<(Vec<Item>, usize), String> {
    let entries: Vec<ShareGptEntry> = serde_json::from_str(text).map_err(|e| {
        format!("{name}: not ShareGPT JSON ({e}); the file must be a JSON array of {{\"id\": ..., \"conversations\": [{{\"from\": \"human\", \"value\": \"...\"}}, {{\"from\": \"gpt\", \"value\": \"...\"}}]}} (for one JSON object a line, pass --dataset-format jsonl)")
    })?;
    let mut items = Vec::new();
    let mut skipped = 0;
    for (k, e) in entries.into_iter().enumerate() {
        let is_human = |t: &&ShareGptTurn| matches!(t.from.as_str(), "human" | "user");
        let is_gpt = |t: &&ShareGptTurn| matches!(t.from.as_str(), "gpt" | "assistant" | "chatgpt");
        let Some(h) = e.conversations.iter().position(|t| is_human(&t)) else {
            skipped += 1;
            continue;
        };
        let Some(reply) = e.conversations[h + 1..].iter().find(is_gpt) else {
            skipped += 1;
            continue;
        };
        let prompt = &e.conversations[h].value;
        if prompt.is_empty() || reply.value.is_empty() {
            skipped += 1;
            continue;
        }
        let mut later_turns = Vec::new();
        let rest = &e.conversations[h + 1..];
        for (k, t) in rest.iter().enumerate() {
            if is_human(&t) && !t.value.is_empty() {
                let reply = rest[k + 1..]
                    .iter()
                    .take_while(|r| !is_human(r))
                    .find(is_gpt)
                    .map(|r| r.value.clone());
                later_turns.push((t.value.clone(), reply));
            }
        }
        items.push(Item {
            index: items.len(),
            id: e.id.as_ref().and_then(id_text),
            at: format!("{name} entry {k}"),
            input: ItemInput::Text(prompt.clone()),
            output: OutputLen::Reply(reply.value.clone()),
            later_turns,
        });
    }
    Ok((items, skipped))
}

/// The output length without a tokenizer: about four characters a token (stated in the record).
pub fn approx_tokens(text: &str) -> u64 {
    (text.chars().count() as u64).div_ceil(4).max(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn jsonl_lines_parse_with_their_fields() {
        let t = "{\"prompt\": \"hi\", \"output_tokens\": 5, \"id\": 7}\n\n{\"messages\": [{\"role\": \"user\", \"content\": \"yo\"}], \"max_tokens\": 3, \"extra\": 1}\n{\"prompt\": \"x\"}\n";
        let items = parse_jsonl("d.jsonl", t).unwrap();
        assert_eq!(items.len(), 3);
        assert_eq!(items[0].input, ItemInput::Text("hi".into()));
        assert_eq!(items[0].output, OutputLen::Tokens(5));
        assert_eq!(items[0].id.as_deref(), Some("7"));
        assert_eq!(items[1].at, "d.jsonl:3");
        assert_eq!(items[1].index, 1);
        assert_eq!(items[1].output, OutputLen::Tokens(3));
        assert!(matches!(&items[1].input, ItemInput::Messages(m) if m[0].content == "yo"));
        assert_eq!(items[2].output, OutputLen::Unset);
    }

    #[test]
    fn jsonl_errors_name_the_line_the_field_and_the_fix() {
        let e = |t: &str| parse_jsonl("data.jsonl", t).unwrap_err();
        assert_eq!(
            e("{\"prompt\":\"a\"}\n{\"text\": \"b\"}\n"),
            "data.jsonl:2: neither `prompt` nor `messages`; each line needs one"
        );
        assert!(e("{\"prompt\": 3}").starts_with("data.jsonl:1: `prompt` is a JSON number"));
        assert!(e("{\"prompt\": \"a\", \"output_tokens\": 0}").contains("`output_tokens` is 0"));
        assert!(e("{\"prompt\": \"a\", \"max_tokens\": \"9\"}").contains("`max_tokens` is \"9\""));
        assert!(e("{\"messages\": [{\"role\": \"user\"}]}").contains("`messages[0].content`"));
        assert!(e("not json").starts_with("data.jsonl:1: not a JSON object"));
        assert!(e("[1]").contains("a JSON array where an object is needed"));
    }

    #[test]
    fn sharegpt_takes_the_first_human_turn_and_the_reply_after_it() {
        let t = r#"[
          {"id": "a", "conversations": [{"from": "system", "value": "s"}, {"from": "human", "value": "q1"}, {"from": "gpt", "value": "r1"}, {"from": "human", "value": "q2"}]},
          {"id": "b", "conversations": [{"from": "human", "value": "only"}]},
          {"id": 3, "conversations": [{"from": "human", "value": "q"}, {"from": "gpt", "value": "r"}]}
        ]"#;
        let (items, skipped) = parse_sharegpt("s.json", t).unwrap();
        assert_eq!(skipped, 1);
        assert_eq!(items.len(), 2);
        assert_eq!(items[0].input, ItemInput::Text("q1".into()));
        // The later human turns are kept for multi-turn replays, each with the reply after it.
        assert_eq!(items[0].later_turns, vec![("q2".to_string(), None)]);
        assert!(items[1].later_turns.is_empty());
        assert_eq!(items[0].output, OutputLen::Reply("r1".into()));
        assert_eq!(items[1].id.as_deref(), Some("3"));
        assert_eq!(items[1].at, "s.json entry 2");
        let e = parse_sharegpt("s.json", r#"[{"id": 1}]"#).unwrap_err();
        assert!(
            e.contains("missing field `conversations`") && e.contains("line 1"),
            "{e}"
        );
    }

    #[test]
    fn the_format_is_detected_and_the_order_is_seeded() {
        assert_eq!(detect("  [ {}"), Some(Format::Sharegpt));
        assert_eq!(detect("\n{\"prompt\""), Some(Format::Jsonl));
        assert_eq!(detect(""), None);
        let d = Dataset {
            path: "x".into(),
            sha256: String::new(),
            format: Format::Jsonl,
            items: parse_jsonl("x", &"{\"prompt\":\"a\"}\n".repeat(20)).unwrap(),
            skipped: 0,
        };
        assert_eq!(d.order(false, 1), (0..20).collect::<Vec<_>>());
        assert_eq!(d.order(true, 1), d.order(true, 1));
        assert_ne!(d.order(true, 1), d.order(true, 2));
        assert_eq!(approx_tokens("abcdefghi"), 3);
    }
}
