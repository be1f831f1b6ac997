//! The reference engine's tokenizer: simple, fast, deterministic and exactly invertible.
//!
//! Text splits into pieces, left to right. At each position:
//! - `<|im_start|>` and `<|im_end|>` are one special token each;
//! - otherwise a piece is an optional single leading space followed by either a run of 1–4 ASCII
//!   alphanumerics (longer runs split every 4) or exactly one other character (any UTF-8 char,
//!   including a space or a newline). A space that ends the text, or that comes before a special
//!   token, is a piece on its own.
//!
//! Ids pack a piece's bytes (at most 5) reversibly: `id = len << 40 | big-endian bytes`, so every
//! id is < 6·2^40 < 2^53 (exact in JSON doubles) and /detokenize inverts /tokenize exactly.
//! Special tokens are ids 1 (`<|im_start|>`) and 2 (`<|im_end|>`).

use serde_json::Value;

pub const IM_START: &str = "<|im_start|>";
pub const IM_END: &str = "<|im_end|>";
pub const ID_IM_START: u64 = 1;
pub const ID_IM_END: u64 = 2;

/// Length of the special token starting at `s`, if one does.
#[inline]
fn special_len(s: &[u8]) -> Option<usize> {
    if s.len() >= IM_END.len() && s[0] == b'<' && s[1] == b'|' {
        if s.starts_with(IM_START.as_bytes()) {
            return Some(IM_START.len());
        }
        if s.starts_with(IM_END.as_bytes()) {
            return Some(IM_END.len());
        }
    }
    None
}

#[inline]
fn utf8_len(first: u8) -> usize {
    match first {
        0x00..=0x7f => 1,
        0xc0..=0xdf => 2,
        0xe0..=0xef => 3,
        _ => 4,
    }
}

/// Length in bytes of the piece that starts at byte `i` of `s` (`i < s.len()`, on a char boundary).
#[inline]
fn piece_len(s: &[u8], i: usize) -> usize {
    let rest = &s[i..];
    if let Some(n) = special_len(rest) {
        return n;
    }
    let mut j = 0;
    if rest[0] == b' ' && rest.len() > 1 && special_len(&rest[1..]).is_none() {
        j = 1;
    }
    if rest[j].is_ascii_alphanumeric() {
        let mut k = j + 1;
        while k < rest.len() && k < j + 4 && rest[k].is_ascii_alphanumeric() {
            k += 1;
        }
        k
    } else {
        j + utf8_len(rest[j])
    }
}

/// Calls `f` with every piece of `text`, in order.
pub fn for_each_piece<'a>(text: &'a str, mut f: impl FnMut(&'a str)) {
    let b = text.as_bytes();
    let mut i = 0;
    while i < b.len() {
        let n = piece_len(b, i);
        f(&text[i..i + n]);
        i += n;
    }
}

/// The pieces of `text`.
pub fn pieces(text: &str) -> Vec<&str> {
    let mut v = Vec::with_capacity(text.len() / 3 + 1);
    for_each_piece(text, |p| v.push(p));
    v
}

/// Byte offsets where each piece of `text` ends (so piece i is `text[ends[i-1]..ends[i]]`).
pub fn piece_ends(text: &str) -> Vec<u32> {
    let b = text.as_bytes();
    let mut v = Vec::with_capacity(text.len() / 3 + 1);
    let mut i = 0;
    while i < b.len() {
        i += piece_len(b, i);
        v.push(i as u32);
    }
    v
}

/// Token count of `text`.
pub fn count(text: &str) -> usize {
    let b = text.as_bytes();
    let mut i = 0;
    let mut n = 0;
    while i < b.len() {
        i += piece_len(b, i);
        n += 1;
    }
    n
}

/// The id of one piece.
#[inline]
pub fn piece_id(piece: &str) -> u64 {
    match piece {
        IM_START => ID_IM_START,
        IM_END => ID_IM_END,
        _ => {
            let b = piece.as_bytes();
            debug_assert!(!b.is_empty() && b.len() <= 5);
            let mut v = 0u64;
            for &x in b {
                v = (v << 8) | x as u64;
            }
            ((b.len() as u64) << 40) | v
        }
    }
}

/// Token ids of `text`.
pub fn encode(text: &str) -> Vec<u64> {
    let mut v = Vec::with_capacity(text.len() / 3 + 1);
    for_each_piece(text, |p| v.push(piece_id(p)));
    v
}

/// Text of token ids; an id that is not one of ours is an error naming it.
pub fn decode(ids: &[u64]) -> Result<String, String> {
    let mut out = Vec::with_capacity(ids.len() * 3);
    for &id in ids {
        match id {
            ID_IM_START => out.extend_from_slice(IM_START.as_bytes()),
            ID_IM_END => out.extend_from_slice(IM_END.as_bytes()),
            _ => {
                let len = (id >> 40) as usize;
                if !(1..=5).contains(&len) {
                    return Err(format!("unknown token id {id}"));
                }
                let v = id & ((1u64 << 40) - 1);
                if len < 5 && v >> (8 * len) != 0 {
                    return Err(format!("unknown token id {id}"));
                }
                let start = out.len();
                for k in (0..len).rev() {
                    out.push((v >> (8 * k)) as u8);
                }
                let piece = std::str::from_utf8(&out[start..])
                    .map_err(|_| format!("unknown token id {id}"))?;
                if piece_len(piece.as_bytes(), 0) != piece.len() {
                    return Err(format!("unknown token id {id}"));
                }
            }
        }
    }
    String::from_utf8(out).map_err(|_| "token ids do not form UTF-8 text".to_string())
}

/// Text of a message `content`: a string, or an array of parts whose `text` fields are joined.
pub fn content_text(content: &Value) -> String {
    match content {
        Value::String(s) => s.clone(),
        Value::Array(parts) => {
            let mut s = String::new();
            for p in parts {
                match p {
                    Value::String(t) => s.push_str(t),
                    Value::Object(o) => {
                        if let Some(Value::String(t)) = o.get("text") {
                            s.push_str(t);
                        }
                    }
                    _ => {}
                }
            }
            s
        }
        Value::Null => String::new(),
        other => other.to_string(),
    }
}

/// Render a chat request into its prompt text (ChatML):
/// an optional tools system turn, then `<|im_start|>{role}\n{content}<|im_end|>\n` per message,
/// then `<|im_start|>assistant\n`. An assistant message's `tool_calls` are rendered after its
/// content as `<tool_call>{json}</tool_call>` lines.
pub fn render_chat(messages: &[Value], tools: Option<&Value>) -> String {
    let mut s = String::new();
    if let Some(Value::Array(t)) = tools {
        if !t.is_empty() {
            s.push_str(IM_START);
            s.push_str("system\n# Tools\nYou may call these functions:\n");
            for tool in t {
                s.push_str(&tool.to_string());
                s.push('\n');
            }
            s.push_str(IM_END);
            s.push('\n');
        }
    }
    for m in messages {
        let role = m.get("role").and_then(Value::as_str).unwrap_or("user");
        s.push_str(IM_START);
        s.push_str(role);
        s.push('\n');
        if let Some(c) = m.get("content") {
            s.push_str(&content_text(c));
        }
        if let Some(Value::Array(calls)) = m.get("tool_calls") {
            for c in calls {
                s.push_str("\n<tool_call>");
                s.push_str(&c.get("function").unwrap_or(c).to_string());
                s.push_str("</tool_call>");
            }
        }
        s.push_str(IM_END);
        s.push('\n');
    }
    s.push_str(IM_START);
    s.push_str("assistant\n");
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splits_as_documented() {
        assert_eq!(pieces("Hello world"), vec!["Hell", "o", " worl", "d"]);
        assert_eq!(pieces("a  b"), vec!["a", "  ", "b"]);
        assert_eq!(pieces("x, y."), vec!["x", ",", " y", "."]);
        assert_eq!(
            pieces("line\n\nnext "),
            vec!["line", "\n", "\n", "next", " "]
        );
        assert_eq!(pieces(" é"), vec![" é"]);
        assert_eq!(pieces("12345678"), vec!["1234", "5678"]);
        assert_eq!(
            pieces("<|im_start|>user\nhi <|im_end|>"),
            vec!["<|im_start|>", "user", "\n", "hi", " ", "<|im_end|>"]
        );
        assert_eq!(pieces("<|im"), vec!["<", "|", "im"]);
        assert_eq!(pieces(""), Vec::<&str>::new());
    }

    #[test]
    fn round_trips() {
        for t in [
            "Hello, world!",
            "héllo wörld — ünïcödé",
            "emoji 🎉🚀 and 👩‍👩‍👧 family",
            "tabs\tand\nnewlines\r\n",
            "  leading and trailing  ",
            "<|im_start|>system\nx<|im_end|>\n",
            "中文字符测试",
            " ",
            "a",
        ] {
            let ids = encode(t);
            assert_eq!(ids.len(), count(t));
            assert_eq!(decode(&ids).unwrap(), t);
            assert!(ids.iter().all(|&i| i < (1u64 << 53)));
            let ends = piece_ends(t);
            assert_eq!(ends.len(), ids.len());
            assert_eq!(*ends.last().unwrap() as usize, t.len());
        }
    }

    #[test]
    fn rejects_foreign_ids() {
        assert!(decode(&[0]).is_err());
        assert!(decode(&[7u64 << 40]).is_err());
        assert!(decode(&[(1u64 << 40) | 0x1ff]).is_err());
        assert!(decode(&[piece_id("ab")]).is_ok());
        // "a." packed as one piece: our tokenizer would split it, so it is not one of our ids.
        assert!(decode(&[(2u64 << 40) | ((b'a' as u64) << 8) | b'.' as u64]).is_err());
    }

    #[test]
    fn chat_template() {
        let msgs: Vec<Value> = serde_json::from_str(
            r#"[{"role":"system","content":"Be brief."},{"role":"user","content":[{"type":"text","text":"Hi"}]}]"#,
        )
        .unwrap();
        let s = render_chat(&msgs, None);
        assert_eq!(
            s,
            "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n"
        );
        // system turn 10 tokens, user turn 6, reply header 5 (`assistant` is 3 pieces).
        assert_eq!(count(&s), 21);
    }
}
