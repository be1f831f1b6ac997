//! Hand-written JSON output for the hot path (serde_json is used only to parse requests).

/// Append `s` to `out` as a JSON string literal (with the quotes).
#[inline]
pub fn push_str(out: &mut String, s: &str) {
    out.push('"');
    push_escaped(out, s);
    out.push('"');
}

/// Append the escaped body of a JSON string (no quotes).
pub fn push_escaped(out: &mut String, s: &str) {
    let b = s.as_bytes();
    let mut start = 0;
    for (i, &c) in b.iter().enumerate() {
        let esc: &str = match c {
            b'"' => "\\\"",
            b'\\' => "\\\\",
            b'\n' => "\\n",
            b'\r' => "\\r",
            b'\t' => "\\t",
            0..=0x1f => "",
            _ => continue,
        };
        out.push_str(&s[start..i]);
        if esc.is_empty() {
            out.push_str(&format!("\\u{:04x}", c));
        } else {
            out.push_str(esc);
        }
        start = i + 1;
    }
    out.push_str(&s[start..]);
}

/// `s` as a JSON string literal.
pub fn string(s: &str) -> String {
    let mut o = String::with_capacity(s.len() + 2);
    push_str(&mut o, s);
    o
}

/// An OpenAI-style error body: `{"error":{"message":..,"type":..,"code":..}}`.
pub fn error_body(status: u16, kind: &str, message: &str) -> String {
    let mut o = String::with_capacity(message.len() + 64);
    o.push_str("{\"error\":{\"message\":");
    push_str(&mut o, message);
    o.push_str(",\"type\":");
    push_str(&mut o, kind);
    o.push_str(&format!(",\"code\":{status}}}}}"));
    o
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_like_serde() {
        for s in ["plain", "q\"uote\\", "ctl\u{1}\u{1f}\n\r\t", "ünï 🎉", ""] {
            let ours = string(s);
            let theirs = serde_json::to_string(s).unwrap();
            let back: String = serde_json::from_str(&ours).unwrap();
            assert_eq!(back, s);
            assert_eq!(ours.len(), theirs.len(), "{ours} vs {theirs}");
        }
        let e: serde_json::Value =
            serde_json::from_str(&error_body(400, "x", "bad \"y\"")).unwrap();
        assert_eq!(e["error"]["code"], 400);
        assert_eq!(e["error"]["message"], "bad \"y\"");
    }
}
