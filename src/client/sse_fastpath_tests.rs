//! The chunk fast paths (`fastchunk::scan` and its per-stream `Template`) against the full
//! parse: wherever a fast path answers, the full parse must decide the chunk the same way.

use super::*;

/// What a chunk left in the trace: events, response id, finish reason, failed or not.
type Outcome = (
    Vec<crate::client::Event>,
    Option<String>,
    Option<String>,
    bool,
);

/// The fast path's outcome next to the full parse's, for one chunk.
fn both(data: &[u8]) -> (Option<u8>, Outcome) {
    let full = {
        let mut trace = Trace::default();
        let mut sink = ChunkSink {
            trace: &mut trace,
            collect: false,
        };
        sink.chunk_full(data, 7);
        (
            trace.events.clone(),
            trace.response_id.clone(),
            trace.finish_reason.clone(),
            trace.error.is_some(),
        )
    };
    let fast = crate::client::fastchunk::scan(data).map(|f| f.kind);
    if fast.is_some() {
        let mut trace = Trace::default();
        let mut sink = ChunkSink {
            trace: &mut trace,
            collect: false,
        };
        sink.chunk(data, 7, &mut Default::default());
        let got = (
            trace.events.clone(),
            trace.response_id.clone(),
            trace.finish_reason.clone(),
            trace.error.is_some(),
        );
        assert_eq!(
            got,
            full,
            "fast path differs from the full parse on {:?}",
            String::from_utf8_lossy(data)
        );
    }
    (fast, full)
}

const SAMPLES: &[&str] = &[
    // The reference engine's chunks.
    r#"{"id":"chatcmpl-17","object":"chat.completion.chunk","created":1764547200,"model":"ref","choices":[{"index":0,"delta":{"role":"assistant"},"logprobs":null,"finish_reason":null}]}"#,
    r#"{"id":"chatcmpl-17","object":"chat.completion.chunk","created":1764547200,"model":"ref","choices":[{"index":0,"delta":{"content":" tok5"},"logprobs":null,"finish_reason":null}]}"#,
    r#"{"id":"chatcmpl-17","object":"chat.completion.chunk","created":1764547200,"model":"ref","choices":[{"index":0,"delta":{},"logprobs":null,"finish_reason":"length"}]}"#,
    // OpenAI / vLLM style, with usage null and a role chunk carrying empty content.
    r#"{"id":"chatcmpl-abc","object":"chat.completion.chunk","created":1,"model":"m","system_fingerprint":null,"choices":[{"index":0,"delta":{"role":"assistant","content":""},"logprobs":null,"finish_reason":null}],"usage":null}"#,
    r#"{"id":"cmpl-9","object":"text_completion","created":2,"model":"m","choices":[{"index":0,"text":" hello","logprobs":null,"finish_reason":null,"stop_reason":null}]}"#,
    r#"{"id":"x","choices":[{"index":0,"delta":{"reasoning_content":"hm","content":null}}]}"#,
    r#"{"id":"x","choices":[{"index":0,"delta":{"reasoning_content":"","reasoning":"r"}}]}"#,
    r#"{"id":"x","choices":[{"index":0,"delta":{"reasoning":"r","tool_calls":null}}]}"#,
    r#" { "id" : "sp" , "choices" : [ { "delta" : { "content" : "a" } , "finish_reason" : "stop" } , { "text" : "" } ] , "n" : [ 1 , -2.5e+3 , true , false , null , { } , [ ] ] } "#,
    r#"{"choices":[],"created":0,"extra":{"a":[1,{"b":"c"}],"d":-0.0}}"#,
    r#"{"id":null,"choices":null,"usage":null,"error":null,"timings":null}"#,
    // Strings longer than the scanner's byte loop (checked in bulk past 32 bytes), ASCII
    // and not.
    r#"{"id":"chatcmpl-0123456789abcdef0123456789abcdef","choices":[{"delta":{"content":"a longer piece of generated text, past the short loop"}}]}"#,
    r#"{"id":"x","choices":[{"delta":{"content":"thirty-two bytes of plain ascii, then: déjà vu ✓"}}]}"#,
    // Declined by the fast path (the full parse decides): escapes, usage, error, tools.
    r#"{"id":"x","choices":[{"delta":{"content":"a\nb"}}]}"#,
    r#"{"id":"x","choices":[],"usage":{"prompt_tokens":5,"completion_tokens":2,"total_tokens":7}}"#,
    r#"{"error":{"message":"boom"}}"#,
    r#"{"choices":[{"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{}"}}]}}]}"#,
    r#"{"choices":[{"delta":{}}],"timings":{"predicted_per_second":7.5}}"#,
];

#[test]
fn fast_path_takes_the_common_chunks() {
    for s in &SAMPLES[..13] {
        let (fast, (_, _, _, err)) = both(s.as_bytes());
        assert!(fast.is_some(), "fast path declined {s}");
        assert!(!err);
    }
    for s in &SAMPLES[13..] {
        assert!(both(s.as_bytes()).0.is_none(), "fast path took {s}");
    }
    // Kinds as the full parse gives them.
    assert_eq!(both(SAMPLES[0].as_bytes()).0, Some(kind::ROLE));
    assert_eq!(both(SAMPLES[1].as_bytes()).0, Some(kind::CONTENT));
    assert_eq!(both(SAMPLES[2].as_bytes()).0, Some(kind::FINISH));
    assert_eq!(both(SAMPLES[3].as_bytes()).0, Some(kind::ROLE));
    assert_eq!(both(SAMPLES[5].as_bytes()).0, Some(kind::REASONING));
    assert_eq!(both(SAMPLES[6].as_bytes()).0, Some(0));
    assert_eq!(
        both(SAMPLES[8].as_bytes()).0,
        Some(kind::CONTENT | kind::FINISH)
    );
}

/// A seeded xorshift for the corruption tests.
struct Rng(u64);

impl Rng {
    /// A number below `n`.
    fn below(&mut self, n: usize) -> usize {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        (self.0 % n as u64) as usize
    }
}

/// One to three random edits of `b`: a byte removed, inserted or replaced (from JSON's own
/// characters, control and non-UTF-8 bytes), or a piece of it copied elsewhere.
fn corrupt(b: &mut Vec<u8>, rng: &mut Rng) {
    let alphabet: &[u8] = b"{}[]\",:\\ 0123456789.-+eEtrufalsn\n\t\x01\xff\xc3a\"";
    for _ in 0..1 + rng.below(3) {
        let at = rng.below(b.len() + 1);
        match rng.below(4) {
            0 if at < b.len() => {
                b.remove(at);
            }
            1 => b.insert(at, alphabet[rng.below(alphabet.len())]),
            2 if at < b.len() => b[at] = alphabet[rng.below(alphabet.len())],
            _ => {
                let end = (at + rng.below(12)).min(b.len());
                let piece = b[at.min(end)..end].to_vec();
                let to = rng.below(b.len() + 1);
                b.splice(to..to, piece);
            }
        }
    }
}

#[test]
fn fast_path_never_decides_differently_on_corrupted_chunks() {
    // Edits and corruptions of every sample: wherever the fast path answers, the full parse
    // must succeed with the same kinds, id and finish reason (checked inside `both`).
    let mut rng = Rng(0x9e3779b97f4a7c15);
    let (mut taken, mut total) = (0, 0);
    for s in SAMPLES {
        for _ in 0..3000 {
            let mut b = s.as_bytes().to_vec();
            corrupt(&mut b, &mut rng);
            total += 1;
            if both(&b).0.is_some() {
                taken += 1;
            }
        }
    }
    // The corruptions must exercise both sides.
    assert!(
        taken > total / 20 && taken < total,
        "{taken} of {total} taken"
    );
}

#[test]
fn template_never_decides_differently_from_the_full_parse() {
    // Each sample the fast path takes serves as a template; its text is then replaced by
    // plain and hostile strings, and the whole chunk edited as above. Wherever the template
    // answers, the full parse must succeed with the same single event and finish reason.
    let texts: &[&[u8]] = &[
        b"",
        b"x",
        b" tok9",
        b"d\xc3\xa9j\xc3\xa0 vu",
        b"a\"b",
        b"a\\nb",
        b"\x01",
        b"\xff",
        b"\xc3",
        b"\"},\"x\":\"",
        b"null",
        b"a long run of text well past thirty-two bytes",
    ];
    let mut rng = Rng(0x2545f4914f6cdd1d);
    let (mut learned, mut taken) = (0, 0);
    for s in SAMPLES {
        let Some(got) = crate::client::fastchunk::scan(s.as_bytes()) else {
            continue;
        };
        let mut tpl = crate::client::fastchunk::Template::default();
        tpl.learn(s.as_bytes(), &got);
        let Some(k) = tpl.kind_of(s.as_bytes()) else {
            continue;
        };
        learned += 1;
        assert_eq!(k, got.kind, "the template chunk itself: {s}");
        let (_, (_, id, _, _)) = both(s.as_bytes());
        let open = s.rfind(":\"").map(|i| i + 2);
        let mut variants: Vec<Vec<u8>> = Vec::new();
        for _ in 0..2000 {
            let mut b = s.as_bytes().to_vec();
            if rng.below(2) == 0 {
                // Another text in the template's place (the last string value opened).
                if let Some(o) = open {
                    let close = o + s[o..].find('"').unwrap();
                    b.splice(o..close, texts[rng.below(texts.len())].iter().copied());
                }
            } else {
                corrupt(&mut b, &mut rng);
            }
            variants.push(b);
        }
        for v in variants {
            let Some(k) = tpl.kind_of(&v) else {
                continue;
            };
            taken += 1;
            let (_, (events, vid, finish, err)) = both(&v);
            let what = String::from_utf8_lossy(&v);
            assert!(!err, "template took what the full parse refuses: {what}");
            assert_eq!(
                events,
                vec![crate::client::Event { t_ns: 7, kind: k }],
                "{what}"
            );
            assert_eq!(vid, id, "{what}");
            assert_eq!(finish, None, "{what}");
        }
    }
    assert!(learned >= 7, "{learned} samples learned as templates");
    assert!(taken > 1000, "{taken} variants taken by a template");
}

#[test]
fn fast_path_declines_duplicates_and_deep_nesting() {
    for s in [
        r#"{"id":"a","id":"b","choices":[]}"#,
        r#"{"choices":[],"choices":[]}"#,
        r#"{"choices":[{"delta":{"content":"a","content":"b"}}]}"#,
        r#"{"choices":[{"finish_reason":"a","finish_reason":null}]}"#,
    ] {
        let (fast, (_, _, _, err)) = both(s.as_bytes());
        assert!(fast.is_none() && err, "{s}");
    }
    let deep = format!(
        r#"{{"x":{}1{},"choices":[]}}"#,
        "[".repeat(100),
        "]".repeat(100)
    );
    assert!(both(deep.as_bytes()).0.is_none());
    let ok = format!(
        r#"{{"x":{}1{},"choices":[]}}"#,
        "[".repeat(10),
        "]".repeat(10)
    );
    assert_eq!(both(ok.as_bytes()).0, Some(0));
}
