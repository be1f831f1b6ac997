//! SSE framing and completion-chunk classification (the per-chunk hot path).

use super::trace::{kind, ErrorClass, Output, RequestError, ToolCall, Trace, Usage};
use serde::de::IgnoredAny;
use serde::Deserialize;
use std::borrow::Cow;

/// Splits a byte stream into SSE events. Bytes are fed as they arrive; an event is dispatched at
/// its terminating blank line and stamped with the arrival time of the read that completed it.
#[derive(Default)]
pub struct SseParser {
    line: Vec<u8>,
    data: Vec<u8>,
    has_data: bool,
    has_comment: bool,
    /// Set once `[DONE]` is seen; later bytes are ignored.
    pub done: bool,
    /// The shape of this stream's chunks, for the fast path (`fastchunk::Template`).
    template: super::fastchunk::Template,
}

/// `s` starts with one whole single-line data event (`data:` line, then a blank line, either
/// ending `\n` or `\r\n`): its value (one leading space dropped, as [`SseParser`] drops it)
/// and the bytes it spans.
#[inline]
fn whole_data_event(s: &[u8]) -> Option<(&[u8], usize)> {
    let rest = s.strip_prefix(b"data:")?;
    let nl = memchr::memchr(b'\n', rest)?;
    let after = &rest[nl + 1..];
    let blank = match after {
        [b'\n', ..] => 1,
        [b'\r', b'\n', ..] => 2,
        _ => return None,
    };
    let line = &rest[..nl];
    let line = line.strip_suffix(b"\r").unwrap_or(line);
    let v = line.strip_prefix(b" ").unwrap_or(line);
    Some((v, 5 + nl + 1 + blank))
}

/// What the caller should do after a feed.
#[derive(Debug, PartialEq, Eq)]
pub enum Flow {
    Continue,
    Stop,
}

impl SseParser {
    pub fn feed(&mut self, bytes: &[u8], t_ns: u64, sink: &mut ChunkSink<'_>) -> Flow {
        let mut s = bytes;
        while !s.is_empty() {
            // The common event, whole in this read (`data: …` and its blank line) with nothing
            // pending: handed to the sink in place, without copying the line into `data`.
            if self.line.is_empty() && !self.has_data && !self.has_comment {
                if let Some((v, used)) = whole_data_event(s) {
                    let flow = sink.chunk(v, t_ns, &mut self.template);
                    if v == b"[DONE]" {
                        self.done = true;
                    }
                    if flow == Flow::Stop {
                        return Flow::Stop;
                    }
                    s = &s[used..];
                    continue;
                }
            }
            match memchr::memchr(b'\n', s) {
                Some(nl) => {
                    let flow = if self.line.is_empty() {
                        self.line_done(&s[..nl], t_ns, sink)
                    } else {
                        let mut line = std::mem::take(&mut self.line);
                        line.extend_from_slice(&s[..nl]);
                        let f = self.line_done(&line, t_ns, sink);
                        line.clear();
                        self.line = line;
                        f
                    };
                    if flow == Flow::Stop {
                        return Flow::Stop;
                    }
                    s = &s[nl + 1..];
                }
                None => {
                    self.line.extend_from_slice(s);
                    break;
                }
            }
        }
        Flow::Continue
    }

    fn line_done(&mut self, line: &[u8], t_ns: u64, sink: &mut ChunkSink<'_>) -> Flow {
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        if line.is_empty() {
            return self.dispatch(t_ns, sink);
        }
        if line[0] == b':' {
            self.has_comment = true;
        } else if let Some(v) = line.strip_prefix(b"data:") {
            let v = v.strip_prefix(b" ").unwrap_or(v);
            if self.has_data {
                self.data.push(b'\n');
            }
            self.data.extend_from_slice(v);
            self.has_data = true;
        }
        // `event:`, `id:`, `retry:` carry nothing bakeoff needs.
        Flow::Continue
    }

    fn dispatch(&mut self, t_ns: u64, sink: &mut ChunkSink<'_>) -> Flow {
        let flow = if self.has_data {
            let flow = sink.chunk(&self.data, t_ns, &mut self.template);
            if self.data == b"[DONE]" {
                self.done = true;
            }
            flow
        } else if self.has_comment {
            sink.trace.events.push(super::Event { t_ns, kind: 0 });
            Flow::Continue
        } else {
            Flow::Continue
        };
        self.data.clear();
        self.has_data = false;
        self.has_comment = false;
        flow
    }

    /// True when a partial event is buffered (the stream stopped mid-event).
    pub fn has_partial(&self) -> bool {
        !self.line.is_empty() || self.has_data
    }
}

/// Interprets completion chunks into the trace.
pub struct ChunkSink<'a> {
    pub trace: &'a mut Trace,
    pub collect: bool,
}

#[derive(Deserialize)]
struct ChunkMsg<'a> {
    #[serde(borrow, default)]
    id: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    choices: Option<Choices<'a>>,
    #[serde(default)]
    usage: Option<UsageMsg>,
    #[serde(default)]
    error: Option<serde_json::Value>,
    #[serde(default)]
    timings: Option<TimingsMsg>,
}

/// The `choices` array, parsed without a heap allocation for the usual single choice (one
/// allocation per chunk was a measurable share of the per-chunk CPU at hundreds of streams).
struct Choices<'a> {
    first: Option<ChoiceMsg<'a>>,
    rest: Vec<ChoiceMsg<'a>>,
}

impl<'a> IntoIterator for Choices<'a> {
    type Item = ChoiceMsg<'a>;
    type IntoIter =
        std::iter::Chain<std::option::IntoIter<ChoiceMsg<'a>>, std::vec::IntoIter<ChoiceMsg<'a>>>;
    fn into_iter(self) -> Self::IntoIter {
        self.first.into_iter().chain(self.rest)
    }
}

impl<'de: 'a, 'a> Deserialize<'de> for Choices<'a> {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Seq<'a>(std::marker::PhantomData<&'a ()>);
        impl<'de: 'a, 'a> serde::de::Visitor<'de> for Seq<'a> {
            type Value = Choices<'a>;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("an array of choices")
            }
            fn visit_seq<A: serde::de::SeqAccess<'de>>(
                self,
                mut seq: A,
            ) -> Result<Choices<'a>, A::Error> {
                let first = seq.next_element()?;
                let mut rest = Vec::new();
                if first.is_some() {
                    while let Some(c) = seq.next_element()? {
                        rest.push(c);
                    }
                }
                Ok(Choices { first, rest })
            }
        }
        d.deserialize_seq(Seq(std::marker::PhantomData))
    }
}

#[derive(Deserialize)]
struct ChoiceMsg<'a> {
    #[serde(borrow, default)]
    delta: Option<DeltaMsg<'a>>,
    #[serde(borrow, default)]
    text: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    finish_reason: Option<Cow<'a, str>>,
}

#[derive(Deserialize)]
struct DeltaMsg<'a> {
    #[serde(borrow, default)]
    content: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    reasoning_content: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    reasoning: Option<Cow<'a, str>>,
    #[serde(default)]
    role: Option<IgnoredAny>,
    #[serde(borrow, default)]
    tool_calls: Option<Vec<ToolDeltaMsg<'a>>>,
}

#[derive(Deserialize)]
struct ToolDeltaMsg<'a> {
    #[serde(default)]
    index: Option<u64>,
    #[serde(borrow, default)]
    id: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    function: Option<FunctionDeltaMsg<'a>>,
}

#[derive(Deserialize)]
struct FunctionDeltaMsg<'a> {
    #[serde(borrow, default)]
    name: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    arguments: Option<Cow<'a, str>>,
}

#[derive(Deserialize)]
struct UsageMsg {
    prompt_tokens: Option<u64>,
    completion_tokens: Option<u64>,
    total_tokens: Option<u64>,
    prompt_tokens_details: Option<PromptDetails>,
    completion_tokens_details: Option<CompletionDetails>,
}

#[derive(Deserialize)]
struct PromptDetails {
    cached_tokens: Option<u64>,
}

#[derive(Deserialize)]
struct CompletionDetails {
    reasoning_tokens: Option<u64>,
}

#[derive(Deserialize)]
struct TimingsMsg {
    predicted_per_second: Option<f64>,
}

fn excerpt(b: &[u8]) -> String {
    let s = String::from_utf8_lossy(&b[..b.len().min(200)]);
    if b.len() > 200 {
        format!("{s}…")
    } else {
        s.into_owned()
    }
}

impl ChunkSink<'_> {
    fn fail(&mut self, class: ErrorClass, msg: String) -> Flow {
        if self.trace.error.is_none() {
            self.trace.error = Some(RequestError::new(class, msg));
        }
        Flow::Stop
    }

    fn chunk(&mut self, data: &[u8], t_ns: u64, template: &mut super::fastchunk::Template) -> Flow {
        if data == b"[DONE]" {
            self.trace.events.push(super::Event {
                t_ns,
                kind: kind::DONE,
            });
            self.trace.end_ns = Some(t_ns);
            return Flow::Continue;
        }
        // Load runs keep no text: the common chunk is read in one pass without the full parse
        // (which still decides everything the fast path declines).
        if !self.collect {
            if let Some(kind) = template.kind_of(data) {
                self.trace.events.push(super::Event { t_ns, kind });
                return Flow::Continue;
            }
            if let Some(f) = super::fastchunk::scan(data) {
                template.learn(data, &f);
                if self.trace.response_id.is_none() {
                    if let Some(id) = f.id {
                        self.trace.response_id = Some(id.to_string());
                    }
                }
                if let Some(r) = f.finish_reason {
                    self.trace.finish_reason = Some(r.to_string());
                }
                self.trace.events.push(super::Event { t_ns, kind: f.kind });
                return Flow::Continue;
            }
        }
        self.chunk_full(data, t_ns)
    }

    /// The full parse of a chunk's JSON.
    fn chunk_full(&mut self, data: &[u8], t_ns: u64) -> Flow {
        let msg: ChunkMsg<'_> = match serde_json::from_slice(data) {
            Ok(m) => m,
            Err(e) => {
                return self.fail(
                    ErrorClass::MalformedChunk,
                    format!("chunk is not valid JSON ({e}): {}", excerpt(data)),
                )
            }
        };
        let mut k = 0u8;
        if let Some(err) = msg.error {
            self.trace.events.push(super::Event {
                t_ns,
                kind: kind::ERROR,
            });
            let m = err
                .get("message")
                .and_then(|m| m.as_str())
                .map(str::to_string)
                .unwrap_or_else(|| err.to_string());
            return self.fail(
                ErrorClass::EngineError,
                format!("engine error in stream: {m}"),
            );
        }
        if self.trace.response_id.is_none() {
            if let Some(id) = &msg.id {
                self.trace.response_id = Some(id.to_string());
            }
        }
        if let Some(choices) = msg.choices {
            for c in choices {
                if let Some(t) = c.text {
                    if !t.is_empty() {
                        k |= kind::CONTENT;
                        if self.collect {
                            self.output().content.push_str(&t);
                        }
                    }
                }
                if let Some(d) = c.delta {
                    if let Some(t) = d.content {
                        if !t.is_empty() {
                            k |= kind::CONTENT;
                            if self.collect {
                                self.output().content.push_str(&t);
                            }
                        }
                    }
                    if let Some(t) = d.reasoning_content.or(d.reasoning) {
                        if !t.is_empty() {
                            k |= kind::REASONING;
                            if self.collect {
                                self.output().reasoning.push_str(&t);
                            }
                        }
                    }
                    if d.role.is_some() {
                        k |= kind::ROLE;
                    }
                    if let Some(calls) = d.tool_calls {
                        if !calls.is_empty() {
                            k |= kind::TOOL;
                        }
                        if self.collect {
                            for tc in calls {
                                self.merge_tool_delta(tc);
                            }
                        }
                    }
                }
                if let Some(f) = c.finish_reason {
                    k |= kind::FINISH;
                    self.trace.finish_reason = Some(f.into_owned());
                }
            }
        }
        if let Some(u) = msg.usage {
            k |= kind::USAGE;
            let usage = self.trace.usage.get_or_insert_with(Usage::default);
            usage.prompt_tokens = u.prompt_tokens;
            usage.completion_tokens = u.completion_tokens;
            usage.total_tokens = u.total_tokens;
            usage.cached_tokens = u.prompt_tokens_details.and_then(|d| d.cached_tokens);
            usage.reasoning_tokens = u.completion_tokens_details.and_then(|d| d.reasoning_tokens);
        }
        if let Some(tm) = msg.timings {
            if let Some(p) = tm.predicted_per_second {
                self.trace
                    .usage
                    .get_or_insert_with(Usage::default)
                    .engine_decode_tok_s = Some(p);
            }
        }
        self.trace.events.push(super::Event { t_ns, kind: k });
        Flow::Continue
    }

    fn output(&mut self) -> &mut Output {
        self.trace.output.get_or_insert_with(Output::default)
    }

    fn merge_tool_delta(&mut self, tc: ToolDeltaMsg<'_>) {
        let out = self.output();
        let index = tc.index.unwrap_or(0);
        let pos = match out.tool_calls.iter().position(|c| c.index == index) {
            Some(p) => p,
            None => {
                out.tool_calls.push(ToolCall {
                    index,
                    ..Default::default()
                });
                out.tool_calls.len() - 1
            }
        };
        let call = &mut out.tool_calls[pos];
        if let Some(id) = tc.id {
            if call.id.is_none() {
                call.id = Some(id.into_owned());
            }
        }
        if let Some(f) = tc.function {
            if let Some(n) = f.name {
                call.name.push_str(&n);
            }
            if let Some(a) = f.arguments {
                call.arguments.push_str(&a);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(chunks: &[&str], collect: bool) -> (Trace, SseParser) {
        let mut trace = Trace::default();
        let mut p = SseParser::default();
        for (i, c) in chunks.iter().enumerate() {
            let mut sink = ChunkSink {
                trace: &mut trace,
                collect,
            };
            if p.feed(c.as_bytes(), i as u64 * 10, &mut sink) == Flow::Stop {
                break;
            }
        }
        (trace, p)
    }

    #[test]
    fn classifies_role_content_usage_done() {
        let (t, p) = run(
            &[
                "data: {\"id\":\"x1\",\"choices\":[{\"delta\":{\"role\":\"assistant\",\"content\":\"\"}}]}\n\n",
                ": ping\n\n",
                "data: {\"choices\":[{\"delta\":{\"reasoning_content\":\"hm\"}}]}\n\ndata: {\"choices\":[{\"delta\":{\"content\":\"Hi\"}}]}\n",
                "\n",
                "data: {\"choices\":[{\"delta\":{},\"finish_reason\":\"stop\"}]}\r\n\r\n",
                "data: {\"choices\":[],\"usage\":{\"prompt_tokens\":5,\"completion_tokens\":2,\"total_tokens\":7,\"prompt_tokens_details\":{\"cached_tokens\":0}},\"timings\":{\"predicted_per_second\":77.5}}\n\ndata: [DONE]\n\n",
            ],
            true,
        );
        let kinds: Vec<u8> = t.events.iter().map(|e| e.kind).collect();
        assert_eq!(
            kinds,
            vec![
                kind::ROLE,
                0,
                kind::REASONING,
                kind::CONTENT,
                kind::FINISH,
                kind::USAGE,
                kind::DONE
            ]
        );
        // The content event completes in the 4th read (t=30), not when its data line arrived.
        assert_eq!(t.events[3].t_ns, 30);
        assert_eq!(t.response_id.as_deref(), Some("x1"));
        assert_eq!(t.finish_reason.as_deref(), Some("stop"));
        let u = t.usage.unwrap();
        assert_eq!(
            (u.prompt_tokens, u.completion_tokens, u.cached_tokens),
            (Some(5), Some(2), Some(0))
        );
        assert_eq!(u.engine_decode_tok_s, Some(77.5));
        assert!(p.done);
        assert_eq!(t.end_ns, Some(50));
        assert_eq!(t.output.unwrap().content, "Hi");
    }

    #[test]
    fn reassembles_tool_calls_by_index() {
        let (t, _) = run(
            &[
                "data: {\"choices\":[{\"delta\":{\"tool_calls\":[{\"index\":0,\"id\":\"c1\",\"type\":\"function\",\"function\":{\"name\":\"get_weather\",\"arguments\":\"\"}}]}}]}\n\n",
                "data: {\"choices\":[{\"delta\":{\"tool_calls\":[{\"index\":0,\"function\":{\"arguments\":\"{\\\"city\\\":\"}}]}}]}\n\n",
                "data: {\"choices\":[{\"delta\":{\"tool_calls\":[{\"index\":0,\"function\":{\"arguments\":\"\\\"Paris\\\"}\"}}]}}]}\n\n",
            ],
            true,
        );
        let calls = t.output.unwrap().tool_calls;
        assert_eq!(calls.len(), 1);
        assert_eq!(calls[0].name, "get_weather");
        assert_eq!(calls[0].arguments, "{\"city\":\"Paris\"}");
        assert_eq!(calls[0].id.as_deref(), Some("c1"));
        assert!(t.events.iter().all(|e| e.kind == kind::TOOL));
    }

    #[test]
    fn malformed_chunk_is_classified() {
        let (t, _) = run(&["data: {\"choices\":[{\"delta\n\ndata: [DONE]\n\n"], false);
        let e = t.error.unwrap();
        assert_eq!(e.class, ErrorClass::MalformedChunk);
        assert!(e.message.contains("not valid JSON"));
    }

    #[test]
    fn error_object_in_stream() {
        let (t, _) = run(
            &["data: {\"error\":{\"message\":\"out of memory\",\"code\":500}}\n\n"],
            false,
        );
        let e = t.error.unwrap();
        assert_eq!(e.class, ErrorClass::EngineError);
        assert!(e.message.contains("out of memory"));
    }

    /// Whole events in one read go to the sink in place; the same bytes split at every
    /// position (read line by line, copied) give the same trace: events, kinds, stamps,
    /// ids, finish reason, usage, `[DONE]`, text.
    #[test]
    fn events_in_place_match_events_split_across_reads() {
        let stream = concat!(
            "data: {\"id\":\"a1\",\"choices\":[{\"delta\":{\"role\":\"assistant\"}}]}\n\n",
            ": keep-alive\n\n",
            "data:{\"choices\":[{\"delta\":{\"content\":\"h\\u00e9\"}}]}\r\n\r\n",
            "event: x\ndata: {\"choices\":[{\"delta\":{\"content\":\"é\"}}]}\n\n",
            "data: {\"choices\":\n",
            "data: [{\"text\":\"y\"}]}\n\n",
            "data: {\"choices\":[{\"delta\":{},\"finish_reason\":\"stop\"}]}\n\n",
            "data: {\"choices\":[],\"usage\":{\"prompt_tokens\":3,\"completion_tokens\":4}}\n\n",
            "data: [DONE]\n\n",
        );
        for collect in [false, true] {
            let (whole, pw) = run(&[stream], collect);
            assert!(pw.done && whole.error.is_none(), "{:?}", whole.error);
            assert_eq!(whole.events.len(), 8);
            for cut in 1..stream.len() {
                if !stream.is_char_boundary(cut) {
                    continue;
                }
                let mut trace = Trace::default();
                let mut p = SseParser::default();
                for part in [&stream[..cut], &stream[cut..]] {
                    let mut sink = ChunkSink {
                        trace: &mut trace,
                        collect,
                    };
                    p.feed(part.as_bytes(), 0, &mut sink);
                }
                let kinds = |t: &Trace| t.events.iter().map(|e| e.kind).collect::<Vec<_>>();
                assert_eq!(kinds(&trace), kinds(&whole), "cut at {cut}");
                assert_eq!(trace.response_id, whole.response_id, "cut at {cut}");
                assert_eq!(trace.finish_reason, whole.finish_reason, "cut at {cut}");
                assert_eq!(trace.usage, whole.usage, "cut at {cut}");
                assert_eq!(trace.end_ns, whole.end_ns, "cut at {cut}");
                assert_eq!(
                    trace.output.as_ref().map(|o| &o.content),
                    whole.output.as_ref().map(|o| &o.content),
                    "cut at {cut}"
                );
                assert!(p.done && trace.error.is_none(), "cut at {cut}");
            }
        }
    }

    #[test]
    fn multi_line_data_and_split_reads() {
        let (t, _) = run(
            &["da", "ta: {\"choices\":[{\"text\":", "\"x\"}]}\n", "\n"],
            false,
        );
        assert_eq!(t.events.len(), 1);
        assert_eq!(t.events[0].kind, kind::CONTENT);
        assert_eq!(t.events[0].t_ns, 30);
    }
}

#[cfg(test)]
#[path = "sse_fastpath_tests.rs"]
mod fastpath_tests;
