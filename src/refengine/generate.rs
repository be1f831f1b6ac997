//! What the engine answers: the output text of a request, cut into tokenizer pieces.
//!
//! Precedence (first that applies): a tool round trip (a `tool` message) → a tool call (`tools`) →
//! `Reply with exactly: <text>` → `response_format` JSON → retrieval questions (a question whose
//! statement is not in the prompt: what the engine knows, `knowledge.rs`) → filler text.
//! Every output token is one tokenizer piece of the final text, so `usage.completion_tokens`
//! equals the token count of what was emitted.

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde_json::Value;

use super::profile::{Profile, ToolBehavior};
use super::tokenizer;
use super::tools;

/// Short words (each ≤ 4 ASCII letters, so ` word` is exactly one piece).
const WORDS: &[&str] = &[
    "the", "of", "and", "to", "in", "is", "it", "that", "for", "on", "with", "as", "was", "at",
    "by", "this", "from", "but", "not", "are", "or", "have", "an", "they", "we", "can", "all",
    "one", "time", "more", "some", "into", "each", "out", "what", "when", "also", "data", "load",
    "fast", "slow", "test", "GPU", "node", "run", "step", "next", "then", "may", "new", "code",
    "long", "high", "low", "path", "plan", "work", "user", "mode", "rate", "task", "form", "part",
    "line",
];

/// Everything a generator needs to know about the request.
pub struct Input<'a> {
    pub chat: bool,
    /// The last user message (the whole prompt for /v1/completions).
    pub user: &'a str,
    /// The whole rendered prompt (searched for retrieval statements).
    pub prompt: &'a str,
    pub prompt_tokens: usize,
    /// Contents of `tool` messages, in order.
    pub tool_results: &'a [String],
    pub tools: &'a [Value],
    pub tool_choice: Option<&'a Value>,
    pub response_format: Option<&'a Value>,
    pub ignore_eos: bool,
    /// Completion token budget: min(max_tokens, context_tokens − prompt_tokens), ≥ 1.
    pub budget: usize,
    pub text_seed: u64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Finish {
    Stop,
    Length,
    ToolCalls,
}

impl Finish {
    pub fn as_str(self) -> &'static str {
        match self {
            Finish::Stop => "stop",
            Finish::Length => "length",
            Finish::ToolCalls => "tool_calls",
        }
    }
}

/// A tool call in the output: its first token is the header (id + name), then argument pieces.
#[derive(Debug, Clone)]
pub struct ToolCall {
    pub id: String,
    pub name: String,
}

/// The whole output of one request.
#[derive(Debug, Clone)]
pub struct Output {
    pub reasoning: String,
    /// End offsets of the reasoning pieces.
    pub reasoning_ends: Vec<u32>,
    /// Visible content, or the tool call's arguments when `tool` is set.
    pub answer: String,
    pub answer_ends: Vec<u32>,
    pub tool: Option<ToolCall>,
    pub finish: Finish,
}

impl Output {
    /// Tokens in the answer phase (a tool call's header counts as one).
    pub fn answer_tokens(&self) -> usize {
        self.answer_ends.len() + usize::from(self.tool.is_some())
    }

    pub fn completion_tokens(&self) -> usize {
        self.reasoning_ends.len() + self.answer_tokens()
    }

    /// Text of answer tokens [a, b) (a tool header token has no text).
    pub fn answer_text(&self, a: usize, b: usize) -> &str {
        let off = usize::from(self.tool.is_some());
        let a = a.saturating_sub(off);
        let b = b.saturating_sub(off);
        span(&self.answer, &self.answer_ends, a, b)
    }

    pub fn reasoning_text(&self, a: usize, b: usize) -> &str {
        span(&self.reasoning, &self.reasoning_ends, a, b)
    }
}

fn span<'a>(text: &'a str, ends: &[u32], a: usize, b: usize) -> &'a str {
    if a >= b {
        return "";
    }
    let start = if a == 0 { 0 } else { ends[a - 1] as usize };
    &text[start..ends[b - 1] as usize]
}

/// Seeded filler text of at least `n` pieces, continuing after `after` (so it starts with a space
/// when something precedes it).
pub fn filler(n: usize, seed: u64, lead_space: bool) -> String {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut s = String::with_capacity(n * 5 + 8);
    let mut pieces = 0;
    let mut since_stop = 0;
    let mut cap_next = !lead_space;
    while pieces < n {
        if since_stop >= 6 && rng.gen_ratio(1, 5) {
            s.push(if rng.gen_ratio(1, 3) { ',' } else { '.' });
            cap_next = s.ends_with('.');
            since_stop = 0;
        } else {
            if !s.is_empty() || lead_space {
                s.push(' ');
            }
            let w = WORDS[rng.gen_range(0..WORDS.len())];
            if cap_next {
                let mut c = w.chars();
                if let Some(f) = c.next() {
                    s.push(f.to_ascii_uppercase());
                    s.push_str(c.as_str());
                }
                cap_next = false;
            } else {
                s.push_str(w);
            }
            since_stop += 1;
        }
        pieces += 1;
    }
    s
}

/// Cut `text` to at most `n` pieces; returns the text, the piece ends and whether it was cut.
fn cut(text: String, n: usize) -> (String, Vec<u32>, bool) {
    let mut ends = tokenizer::piece_ends(&text);
    if ends.len() <= n {
        return (text, ends, false);
    }
    ends.truncate(n);
    let keep = ends.last().map(|&e| e as usize).unwrap_or(0);
    let mut text = text;
    text.truncate(keep);
    (text, ends, true)
}

/// Shift a value to a wrong one of the same shape: digits +1 (mod 10), letters +1 (z→a).
pub fn corrupt(v: &str) -> String {
    let out: String = v
        .chars()
        .map(|c| match c {
            '0'..='8' | 'a'..='y' | 'A'..='Y' => char::from(c as u8 + 1),
            '9' => '0',
            'z' => 'a',
            'Z' => 'A',
            other => other,
        })
        .collect();
    if out == v {
        format!("not {v}")
    } else {
        out
    }
}

/// The answer to a question whose statement is not in the prompt.
const DONT_KNOW: &str = "I don't know.";

/// Answers to `What is the <X>?` questions in `user`, looked up as `The <X> is <V>.` in `prompt`.
/// None when `user` asks no such question.
pub fn retrieval_answer(user: &str, prompt: &str, wrong: bool) -> Option<String> {
    const Q: &str = "what is the ";
    let lower_user = user.to_ascii_lowercase();
    let mut answers = Vec::new();
    let mut from = 0;
    while let Some(p) = lower_user[from..].find(Q) {
        let start = from + p + Q.len();
        let Some(q) = user[start..].find('?') else {
            break;
        };
        let x = user[start..start + q].trim();
        from = start + q + 1;
        if x.is_empty() || x.contains('\n') {
            continue;
        }
        let found = find_statement(prompt, x);
        answers.push(match found {
            Some(v) if wrong => corrupt(&v),
            Some(v) => v,
            None => DONT_KNOW.to_string(),
        });
    }
    if answers.is_empty() {
        None
    } else {
        Some(answers.join(", "))
    }
}

fn find_statement(prompt: &str, x: &str) -> Option<String> {
    for lead in ["The ", "the "] {
        let needle = format!("{lead}{x} is ");
        let mut from = 0;
        while let Some(p) = prompt[from..].find(&needle) {
            let start = from + p + needle.len();
            from = start;
            let rest = &prompt[start..];
            // The value ends at a '.' followed by whitespace or the end, or at a line end.
            let b = rest.as_bytes();
            let mut end = None;
            for (i, &c) in b.iter().enumerate() {
                if c == b'\n' {
                    end = Some(i);
                    break;
                }
                if c == b'.'
                    && (i + 1 == b.len() || b[i + 1].is_ascii_whitespace() || b[i + 1] == b'<')
                {
                    end = Some(i);
                    break;
                }
            }
            let v = rest[..end.unwrap_or(rest.len())].trim();
            if !v.is_empty() {
                return Some(v.to_string());
            }
        }
    }
    None
}

fn smoke_answer(user: &str) -> Option<String> {
    const P: &str = "Reply with exactly: ";
    let i = user.find(P)?;
    let rest = &user[i + P.len()..];
    let line = rest.split('\n').next().unwrap_or("").trim_end();
    Some(line.to_string())
}

fn json_answer(rf: &Value, user: &str, fallback: Option<String>) -> Option<String> {
    let kind = rf.get("type").and_then(Value::as_str)?;
    let v = match kind {
        "json_schema" => {
            let schema = rf
                .get("json_schema")
                .and_then(|j| j.get("schema"))
                .cloned()
                .unwrap_or(Value::Null);
            let keys: Vec<String> = schema
                .get("required")
                .and_then(Value::as_array)
                .map(|r| {
                    r.iter()
                        .filter_map(Value::as_str)
                        .map(String::from)
                        .collect()
                })
                .unwrap_or_default();
            if keys.is_empty() {
                tools::object_for(&schema, user, None)
            } else {
                tools::object_with_keys(&schema, &keys, user)
            }
        }
        "json_object" => {
            serde_json::json!({ "answer": fallback.unwrap_or_else(|| "ok".to_string()) })
        }
        _ => return None,
    };
    Some(v.to_string())
}

/// Build the output of one request.
pub fn generate(p: &Profile, inp: &Input, call_id: &str) -> Output {
    let mut budget = inp.budget.max(1);
    // Reasoning (chat only).
    let r = if inp.chat {
        p.reasoning_tokens as usize
    } else {
        0
    };
    let (reasoning, reasoning_ends) = if r > 0 {
        let mut t = String::from("Let me think about this.");
        t.push_str(&filler(r, inp.text_seed ^ 0x7265_6173, true));
        let (t, e, _) = cut(t, r.min(budget));
        (t, e)
    } else {
        (String::new(), Vec::new())
    };
    if r > budget {
        return Output {
            reasoning,
            reasoning_ends,
            answer: String::new(),
            answer_ends: Vec::new(),
            tool: None,
            finish: Finish::Length,
        };
    }
    budget -= r;
    let text_out = |text: Option<String>| -> Output {
        let (answer, ends, finish) = match text {
            Some(t) => {
                let natural = tokenizer::count(&t);
                if inp.ignore_eos && natural < budget {
                    let mut t = t;
                    t.push_str(&filler(budget - natural, inp.text_seed, !t.is_empty()));
                    let (a, e, _) = cut(t, budget);
                    (a, e, Finish::Length)
                } else {
                    let (a, e, was_cut) = cut(t, budget);
                    (
                        a,
                        e,
                        if was_cut {
                            Finish::Length
                        } else {
                            Finish::Stop
                        },
                    )
                }
            }
            None => {
                let (a, e, _) = cut(filler(budget, inp.text_seed, false), budget);
                (a, e, Finish::Length)
            }
        };
        Output {
            reasoning: reasoning.clone(),
            reasoning_ends: reasoning_ends.clone(),
            answer,
            answer_ends: ends,
            tool: None,
            finish,
        }
    };

    if inp.chat && !inp.tool_results.is_empty() {
        let joined = inp.tool_results.join("; ");
        return text_out(Some(format!("The tool returned: {joined}")));
    }
    if inp.chat && !inp.tools.is_empty() {
        if p.tool_behavior == ToolBehavior::IgnoreTools {
            if !matches!(inp.tool_choice, Some(Value::String(s)) if s == "none") {
                return text_out(Some(
                    "I can answer that without calling a tool.".to_string(),
                ));
            }
        } else if let Some(tool) = tools::choose(inp.tools, inp.tool_choice, inp.user) {
            let (name, args) = tools::call(tool, inp.user, p.tool_behavior);
            // The header is one token; arguments get the rest of the budget.
            let (answer, ends, was_cut) = cut(args, budget - 1);
            return Output {
                reasoning,
                reasoning_ends,
                answer,
                answer_ends: ends,
                tool: Some(ToolCall {
                    id: call_id.to_string(),
                    name,
                }),
                finish: if was_cut {
                    Finish::Length
                } else {
                    Finish::ToolCalls
                },
            };
        }
    }
    let wrong = inp.prompt_tokens as u64 > p.retrieval_effective_tokens;
    let specific = smoke_answer(inp.user).or_else(|| {
        match retrieval_answer(inp.user, inp.prompt, wrong) {
            // A statement in the prompt answers first; what the engine knows only fills a gap.
            Some(a) if !a.contains(DONT_KNOW) => Some(a),
            other => super::knowledge::answer(inp.user).or(other),
        }
    });
    if let Some(rf) = inp.response_format {
        if let Some(j) = json_answer(rf, inp.user, specific.clone()) {
            return text_out(Some(j));
        }
    }
    text_out(specific)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn input<'a>(user: &'a str, prompt: &'a str, budget: usize) -> Input<'a> {
        Input {
            chat: true,
            user,
            prompt,
            prompt_tokens: tokenizer::count(prompt),
            tool_results: &[],
            tools: &[],
            tool_choice: None,
            response_format: None,
            ignore_eos: false,
            budget,
            text_seed: 7,
        }
    }

    #[test]
    fn filler_is_exact_and_deterministic() {
        for n in [1, 2, 17, 300] {
            let f = filler(n, 42, false);
            assert_eq!(tokenizer::count(&f), n, "{f:?}");
            assert_eq!(f, filler(n, 42, false));
        }
        assert_ne!(filler(20, 1, false), filler(20, 2, false));
        let p = Profile::with_model("m");
        let o = generate(&p, &input("hi", "hi", 40), "c");
        assert_eq!(o.completion_tokens(), 40);
        assert_eq!(o.finish, Finish::Length);
    }

    #[test]
    fn retrieval_right_and_wrong() {
        let prompt = "The secret code is 4821. The capital city is Zorba.\nWhat is the secret code? What is the capital city?";
        assert_eq!(
            retrieval_answer(prompt, prompt, false).unwrap(),
            "4821, Zorba"
        );
        assert_eq!(
            retrieval_answer(prompt, prompt, true).unwrap(),
            "5932, Apscb"
        );
        assert_eq!(
            retrieval_answer("What is the colour?", prompt, false).unwrap(),
            "I don't know."
        );
        assert!(retrieval_answer("Hello", prompt, false).is_none());
        let p = Profile::with_model("m");
        let o = generate(&p, &input(prompt, prompt, 100), "c");
        assert_eq!(o.answer, "4821, Zorba");
        assert_eq!(o.finish, Finish::Stop);
    }

    #[test]
    fn smoke_reasoning_and_budget() {
        let mut p = Profile::with_model("m");
        let o = generate(
            &p,
            &input("Reply with exactly: pong 42\nthanks", "x", 100),
            "c",
        );
        assert_eq!(o.answer, "pong 42");
        assert_eq!(o.finish, Finish::Stop);
        let o = generate(&p, &input("Reply with exactly: pong 42", "x", 1), "c");
        assert_eq!(o.answer, "pong");
        assert_eq!(o.finish, Finish::Length);
        p.reasoning_tokens = 10;
        let o = generate(&p, &input("Reply with exactly: ok", "x", 100), "c");
        assert_eq!(o.reasoning_ends.len(), 10);
        assert_eq!(o.answer, "ok");
        assert_eq!(o.completion_tokens(), 11);
        let o = generate(&p, &input("Reply with exactly: ok", "x", 5), "c");
        assert_eq!(o.reasoning_ends.len(), 5);
        assert_eq!(o.answer, "");
        assert_eq!(o.finish, Finish::Length);
        let mut i = input("Reply with exactly: ok", "x", 30);
        i.ignore_eos = true;
        let o = generate(&p, &i, "c");
        assert_eq!(o.completion_tokens(), 30);
        assert!(o.answer.starts_with("ok "));
    }

    #[test]
    fn json_schema_required_keys() {
        let p = Profile::with_model("m");
        let rf: Value = serde_json::json!({"type":"json_schema","json_schema":{"name":"x","schema":{
            "type":"object","properties":{"name":{"type":"string"},"age":{"type":"integer"}},
            "required":["name","age"]}}});
        let mut i = input("name: Ada", "x", 100);
        i.response_format = Some(&rf);
        let o = generate(&p, &i, "c");
        let v: Value = serde_json::from_str(&o.answer).unwrap();
        assert_eq!(v, serde_json::json!({"name":"Ada","age":1}));
    }

    #[test]
    fn corrupt_keeps_shape() {
        assert_eq!(corrupt("1999"), "2000");
        assert_eq!(corrupt("abz-9"), "bca-0");
        assert_eq!(corrupt("--"), "not --");
    }
}
