//! One completion request: validation, admission, the timing model, and the emitted events.
//!
//! Timing model (docs/reference-engine.md states it for users):
//! - admission = recv_ns when KV space is free at once, else the moment it was granted;
//! - the first answer token (visible content, or a tool call's header) is emitted at
//!   `T1 = admission + ttft_ms + uncached_prompt_tokens / prefill_tok_s`;
//! - R reasoning tokens occupy the R decode intervals just before T1 (compressed evenly into
//!   [admission, T1] when they do not fit);
//! - after T1, token i+1 follows token i by one interval
//!   `1/decode_tok_s × (1 + concurrency_slowdown·(running−1)) × (1 + long_context_decode_slowdown·prompt/1000)`,
//!   with deadlines accumulated absolutely from T1 (no drift);
//! - a chunk is written at the deadline of its last token.

use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use super::app::App;
use super::emissions::{self, Kind, Record};
use super::generate::{self, Finish, Output};
use super::http::{self, Conn, Request};
use super::json;
use super::profile::{Profile, ToolBehavior};
use super::request::{self, Completion};
use super::state::{mix64, Model};
use super::timer::sleep_until_ns;
use crate::clock::mono_ns;

/// Write a complete (non-streamed) response and record it as one event of `kind`.
async fn respond_once(
    conn: &mut Conn,
    mut rec: Record,
    status: u16,
    body: &str,
    kind: Kind,
) -> bool {
    let bytes = http::response(
        status,
        "application/json",
        body.as_bytes(),
        Some(&rec.id),
        false,
    );
    let t = mono_ns();
    rec.head_ns = t;
    rec.push(t, kind);
    // Commit before the write: a client that reads the log right after the response finds it.
    emissions::commit(rec);
    conn.write(&bytes).await
}

/// Uniform in [0, 1) from the seed and a request sequence number.
fn unit(seed: u64, stream: u64, seq: u64) -> f64 {
    (mix64(mix64(seed ^ stream) ^ seq) >> 11) as f64 / (1u64 << 53) as f64
}

/// Handle a completion request; false when the connection must close.
pub async fn handle(app: &Arc<App>, conn: &mut Conn, req: &Request, chat: bool) -> bool {
    let n = app.next_id.fetch_add(1, Relaxed) + 1;
    let id = if chat {
        format!("chatcmpl-{n}")
    } else {
        format!("cmpl-{n}")
    };
    let rec = Record::new(id, req.recv_ns);
    let c = match request::parse(&req.body, chat) {
        Ok(c) => c,
        Err(msg) => {
            let body = json::error_body(400, "invalid_request_error", &msg);
            return respond_once(conn, rec, 400, &body, Kind::Error).await;
        }
    };
    let Some(model) = app.model(&c.model).cloned() else {
        let msg = format!("The model `{}` does not exist.", c.model);
        let body = json::error_body(404, "not_found_error", &msg);
        return respond_once(conn, rec, 404, &body, Kind::Error).await;
    };
    let p = &model.profile;
    let prompt_tokens = c.prompt_ids.len() as u64;
    if prompt_tokens >= p.context_tokens {
        let body = format!(
            "{{\"error\":{{\"code\":400,\"type\":\"exceed_context_size_error\",\"message\":\"request ({prompt_tokens} tokens) exceeds the available context size ({} tokens)\",\"n_prompt_tokens\":{prompt_tokens},\"n_ctx\":{}}}}}",
            p.context_tokens, p.context_tokens
        );
        return respond_once(conn, rec, 400, &body, Kind::Error).await;
    }
    let seq = model.seq.fetch_add(1, Relaxed) + 1;
    if p.error_rate > 0.0 && unit(app.seed, 0xe77, seq) < p.error_rate {
        model.counters.request_errors.fetch_add(1, Relaxed);
        let body = json::error_body(
            500,
            "internal_server_error",
            &format!("simulated internal error (error_rate) on request {seq}"),
        );
        return respond_once(conn, rec, 500, &body, Kind::Error).await;
    }
    run(app, conn, rec, &model, c, seq).await
}

/// Per-request constants of the timing model.
struct Timing {
    /// ns per token for one stream, before the concurrency factor.
    base_iv: f64,
    concurrency_slowdown: f64,
    tokens_per_chunk: usize,
    /// Speculative decoding: (acceptance, draft tokens, expected tokens per step).
    spec: Option<(f64, u32, f64)>,
}

impl Timing {
    /// The profile's model for a prompt of `prompt_tokens` (decode slows with the context).
    fn new(p: &Profile, prompt_tokens: usize) -> Timing {
        let lc = 1.0 + p.long_context_decode_slowdown * prompt_tokens as f64 / 1000.0;
        Timing {
            base_iv: 1e9 / p.decode_tok_s * lc,
            concurrency_slowdown: p.concurrency_slowdown,
            tokens_per_chunk: p.tokens_per_chunk.max(1) as usize,
            spec: (p.spec_acceptance > 0.0).then(|| {
                (
                    p.spec_acceptance,
                    p.spec_draft_tokens as u32,
                    p.spec_expected_tokens(),
                )
            }),
        }
    }

    fn interval(&self, model: &Model) -> f64 {
        let running = model.running.load(Relaxed).max(1) as f64;
        self.base_iv * (1.0 + self.concurrency_slowdown * (running - 1.0))
    }
}

/// One event to write: tokens [a, b) of a phase.
#[derive(Clone, Copy)]
enum Ev {
    Reasoning(usize, usize),
    Answer(usize, usize),
}

/// When each chunk is due: reasoning tokens in the intervals before the first answer token
/// (`t1`), then answer chunks of `tokens_per_chunk` (or one speculative step's accepted tokens)
/// at the model's decode interval.
struct Schedule {
    timing: Timing,
    spec_rng: ChaCha8Rng,
    adm: u64,
    t1: u64,
    n_reason: usize,
    n_answer: usize,
    r_start: f64,
    r_iv: f64,
    r_done: usize,
    a_done: usize,
    /// Offset of the last answer token from t1, ns.
    a_off: f64,
}

impl Schedule {
    /// Reasoning: R tokens in the R intervals before t1 (compressed when they don't fit).
    fn new(
        timing: Timing,
        spec_rng: ChaCha8Rng,
        model: &Model,
        span: (u64, u64),
        out: &Output,
        r_full: f64,
    ) -> Schedule {
        let (adm, t1) = span;
        let n_reason = out.reasoning_ends.len();
        let (r_start, r_iv) = if n_reason > 0 {
            let iv = timing.interval(model);
            let span = (t1 - adm) as f64;
            if r_full * iv <= span {
                (span - r_full * iv, iv)
            } else {
                (0.0, span / r_full)
            }
        } else {
            (0.0, 0.0)
        };
        Schedule {
            timing,
            spec_rng,
            adm,
            t1,
            n_reason,
            n_answer: out.answer_tokens(),
            r_start,
            r_iv,
            r_done: 0,
            a_done: 0,
            a_off: 0.0,
        }
    }

    /// The next event and its deadline (mono ns); counts the speculative draft and accepted
    /// tokens it decides.
    fn next(&mut self, model: &Model) -> (u64, Ev) {
        let k = self.timing.tokens_per_chunk;
        if self.r_done < self.n_reason {
            let g = if self.r_done == 0 {
                1
            } else {
                k.min(self.n_reason - self.r_done)
            };
            let last = (self.r_done + g - 1) as f64;
            let d = self.adm + (self.r_start + last * self.r_iv).round() as u64;
            return (d, Ev::Reasoning(self.r_done, self.r_done + g));
        }
        let rem = self.n_answer - self.a_done;
        let g = if self.a_done == 0 {
            1
        } else if let Some((alpha, draft, e)) = self.timing.spec {
            let mut acc = 0;
            while acc < draft && self.spec_rng.gen_bool(alpha) {
                acc += 1;
            }
            let counters = &model.counters;
            counters.spec_draft_tokens.fetch_add(draft as u64, Relaxed);
            counters.spec_accepted_tokens.fetch_add(acc as u64, Relaxed);
            self.a_off += self.timing.interval(model) * e;
            (1 + acc as usize).min(rem)
        } else {
            let g = k.min(rem);
            self.a_off += self.timing.interval(model) * g as f64;
            g
        };
        (
            self.t1 + self.a_off.round() as u64,
            Ev::Answer(self.a_done, self.a_done + g),
        )
    }

    /// Marks `ev` written.
    fn done(&mut self, ev: Ev) {
        match ev {
            Ev::Reasoning(_, b) => self.r_done = b,
            Ev::Answer(_, b) => self.a_done = b,
        }
    }
}

/// The filler's seed: --seed, the request's seed and prompt; with temperature > 0 and no seed
/// also the request's sequence number (a fresh sample each time).
fn text_seed(app: &App, c: &Completion, seq: u64) -> u64 {
    let mut text_seed = mix64(app.seed) ^ mix64(c.seed.map_or(0, |s| s.wrapping_add(1)));
    text_seed ^= c.prompt_ids.iter().fold(0x7e47u64, |h, &i| mix64(h ^ i));
    if c.seed.is_none() && c.temperature.is_some_and(|t| t > 0.0) {
        text_seed ^= mix64(seq ^ 0x5eed);
    }
    text_seed
}

/// The prompt's cached tokens (counted in the prefix-cache metrics) when the cache is used.
fn cached_tokens(model: &Model, c: &Completion, use_cache: bool) -> usize {
    if !use_cache {
        return 0;
    }
    let hit = model.cache_lookup(&c.prompt_ids);
    let counters = &model.counters;
    counters
        .prefix_cache_queries
        .fetch_add(c.prompt_ids.len() as u64, Relaxed);
    counters.prefix_cache_hits.fetch_add(hit as u64, Relaxed);
    hit
}

/// The start every chunk and body shares: `{"id":…,"object":…,"created":…,"model":…,`.
fn object_head(id: &str, p: &Profile, c: &Completion) -> String {
    let created = crate::clock::unix_secs();
    let object = match (c.chat, c.stream) {
        (true, true) => "chat.completion.chunk",
        (true, false) => "chat.completion",
        (false, _) => "text_completion",
    };
    let mut head = String::with_capacity(128);
    head.push_str("{\"id\":");
    json::push_str(&mut head, id);
    head.push_str(&format!(
        ",\"object\":\"{object}\",\"created\":{created},\"model\":"
    ));
    json::push_str(&mut head, &p.model);
    head.push(',');
    head
}

/// The profile request `seq` is answered with: past `tools_break_after_requests`, one whose tool
/// calls carry malformed arguments (a declared fault).
fn output_profile(p: &Profile, seq: u64) -> std::borrow::Cow<'_, Profile> {
    match p.tools_break_after_requests {
        Some(n) if seq > n => std::borrow::Cow::Owned(Profile {
            tool_behavior: ToolBehavior::MalformedArguments,
            ..p.clone()
        }),
        _ => std::borrow::Cow::Borrowed(p),
    }
}

async fn run(
    app: &Arc<App>,
    conn: &mut Conn,
    rec: Record,
    model: &Arc<Model>,
    c: Completion,
    seq: u64,
) -> bool {
    let p = &model.profile;
    let prompt_tokens = c.prompt_ids.len();
    let budget = (c.max_tokens)
        .min(p.context_tokens - prompt_tokens as u64)
        .min(p.max_output_tokens.unwrap_or(u64::MAX)) as usize;
    let call_id = format!("call_{}", rec.id.rsplit('-').next().unwrap_or("0"));
    let for_output = output_profile(p, seq);
    let out = generate::generate(
        &for_output,
        &generate::Input {
            chat: c.chat,
            user: &c.user,
            prompt: &c.prompt,
            prompt_tokens,
            tool_results: &c.tool_results,
            tools: &c.tools,
            tool_choice: c.tool_choice.as_ref(),
            response_format: c.response_format.as_ref(),
            ignore_eos: c.ignore_eos,
            budget,
            text_seed: text_seed(app, &c, seq),
        },
        &call_id,
    );

    // Admission: reserve prompt + budget KV tokens (FIFO).
    let admission = model
        .admit((prompt_tokens + budget) as u64, rec.recv_ns)
        .await;
    let adm = admission.at_ns;
    let counters = &model.counters;
    counters
        .prompt_tokens
        .fetch_add(prompt_tokens as u64, Relaxed);
    let use_cache = p.prefix_cache && c.cache_prompt;
    let cached = cached_tokens(model, &c, use_cache);
    let prefill_ns = if p.prefill_tok_s > 0.0 {
        (prompt_tokens - cached) as f64 * 1e9 / p.prefill_tok_s
    } else {
        0.0
    };
    // A declared slowdown after N requests (a winner that degrades during a promotion's bake).
    let slow_ms = match p.slow_after_requests {
        Some(n) if seq > n => p.slow_ttft_ms,
        _ => 0.0,
    };
    let t1 = adm + ((p.ttft_ms + slow_ms) * 1e6 + prefill_ns).round() as u64;
    let spec_rng = ChaCha8Rng::seed_from_u64(mix64(app.seed ^ 0x5bec) ^ mix64(seq));
    let head = object_head(&rec.id, p, &c);

    let total = out.completion_tokens();
    let n_reason = out.reasoning_ends.len();
    let crash_armed = p.crash_after_requests.is_some_and(|n| seq >= n);
    let stall_at = if c.stream { p.stall_after_chunks } else { None };

    let mut w = Writer {
        conn,
        rec,
        buf: Vec::with_capacity(512),
        payload: String::with_capacity(512),
        events: 0,
        stall_at,
    };

    let mut role_pending = c.chat;
    if c.stream {
        match start_stream(&mut w, &head, c.chat && p.early_role_chunk).await {
            Ok(true) => role_pending = false,
            Ok(false) => {}
            Err(r) => return r,
        }
    }

    let r_full = if c.chat {
        p.reasoning_tokens as f64
    } else {
        0.0
    };
    let mut schedule = Schedule::new(
        Timing::new(p, prompt_tokens),
        spec_rng,
        model,
        (adm, t1),
        &out,
        r_full,
    );
    let mut emitted = 0usize; // tokens written so far (both phases)
    let mut cache_inserted = !use_cache;
    while emitted < total {
        let (deadline, ev) = schedule.next(model);
        let g = match ev {
            Ev::Reasoning(a, b) | Ev::Answer(a, b) => b - a,
        };
        sleep_until_ns(deadline).await;
        if crash_armed && emitted + g > total / 2 {
            super::log_line(&format!(
                "reference engine: simulated crash after {} requests",
                p.crash_after_requests.unwrap_or(seq)
            ));
            std::process::exit(70);
        }
        if !cache_inserted {
            model.cache_insert(&c.prompt_ids);
            cache_inserted = true;
        }
        if c.stream {
            w.payload.clear();
            w.payload.push_str(&head);
            let kind = push_delta(&mut w.payload, ev, &out, c.chat, role_pending);
            role_pending = false;
            w.payload
                .push_str(",\"logprobs\":null,\"finish_reason\":null}]}");
            if let Some(r) = w.event(kind).await {
                counters
                    .generation_tokens
                    .fetch_add(emitted as u64, Relaxed);
                return r;
            }
        }
        emitted += g;
        schedule.done(ev);
    }
    counters.generation_tokens.fetch_add(total as u64, Relaxed);

    let usage = format!(
        "{{\"prompt_tokens\":{prompt_tokens},\"completion_tokens\":{total},\"total_tokens\":{},\"prompt_tokens_details\":{{\"cached_tokens\":{cached}}},\"completion_tokens_details\":{{\"reasoning_tokens\":{n_reason}}}}}",
        prompt_tokens + total
    );
    if c.stream {
        let ok = finish_stream(w, &head, &c, out.finish, &usage, model).await;
        drop(admission);
        return ok;
    }
    drop(admission);
    let body = non_stream_body(&head, c.chat, &out, out.finish, &usage);
    counters.request_success.fetch_add(1, Relaxed);
    respond_once(w.conn, w.rec, 200, &body, Kind::Done).await
}

/// A stream's start: the HTTP head, then with `role_chunk` a chunk with the role alone.
/// Ok(whether the role was sent); Err(keep-alive) when the request ended there.
async fn start_stream(w: &mut Writer<'_>, head: &str, role_chunk: bool) -> Result<bool, bool> {
    let h = http::stream_head(&w.rec.id);
    w.rec.head_ns = mono_ns();
    if !w.conn.write(&h).await {
        return Err(w.gone());
    }
    if !role_chunk {
        return Ok(false);
    }
    w.payload.clear();
    w.payload.push_str(head);
    w.payload
        .push_str("\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\"},\"logprobs\":null,\"finish_reason\":null}]}");
    match w.event(Kind::Role).await {
        Some(r) => Err(r),
        None => Ok(true),
    }
}

/// One streamed chunk's choice for tokens [a, b) of `ev` (after the object head, before
/// `logprobs`): a reasoning delta, a content delta or text, or a tool-call delta (the first
/// carries the call's id and name). The role rides on the first delta when not sent earlier.
fn push_delta(payload: &mut String, ev: Ev, out: &Output, chat: bool, role_pending: bool) -> Kind {
    let open_delta = |payload: &mut String| {
        payload.push_str("\"choices\":[{\"index\":0,\"delta\":{");
        if role_pending {
            payload.push_str("\"role\":\"assistant\",");
        }
    };
    match ev {
        Ev::Reasoning(a, b) => {
            if chat {
                open_delta(payload);
                payload.push_str("\"reasoning_content\":");
                json::push_str(payload, out.reasoning_text(a, b));
                payload.push('}');
            }
            Kind::Reasoning
        }
        Ev::Answer(a, b) if !chat => {
            payload.push_str("\"choices\":[{\"index\":0,\"text\":");
            json::push_str(payload, out.answer_text(a, b));
            Kind::Content
        }
        Ev::Answer(a, b) => {
            open_delta(payload);
            let kind = if let Some(tc) = &out.tool {
                payload.push_str("\"tool_calls\":[{\"index\":0,");
                if a == 0 {
                    payload.push_str("\"id\":");
                    json::push_str(payload, &tc.id);
                    payload.push_str(",\"type\":\"function\",\"function\":{\"name\":");
                    json::push_str(payload, &tc.name);
                    payload.push_str(",\"arguments\":");
                } else {
                    payload.push_str("\"function\":{\"arguments\":");
                }
                json::push_str(payload, out.answer_text(a, b));
                payload.push_str("}}]");
                Kind::Tool
            } else {
                payload.push_str("\"content\":");
                json::push_str(payload, out.answer_text(a, b));
                Kind::Content
            };
            payload.push('}');
            kind
        }
    }
}

/// A stream's end: the finish chunk, the usage chunk when asked, the stall fault's check,
/// `[DONE]` (a success once written). Returns whether the connection stays open.
async fn finish_stream(
    mut w: Writer<'_>,
    head: &str,
    c: &Completion,
    finish: Finish,
    usage: &str,
    model: &Model,
) -> bool {
    w.payload.clear();
    w.payload.push_str(head);
    if c.chat {
        w.payload.push_str("\"choices\":[{\"index\":0,\"delta\":{}");
    } else {
        w.payload
            .push_str("\"choices\":[{\"index\":0,\"text\":\"\"");
    }
    w.payload.push_str(&format!(
        ",\"logprobs\":null,\"finish_reason\":\"{}\"}}]}}",
        finish.as_str()
    ));
    if let Some(r) = w.event(Kind::Finish).await {
        return r;
    }
    if c.include_usage {
        w.payload.clear();
        w.payload.push_str(head);
        w.payload.push_str("\"choices\":[],\"usage\":");
        w.payload.push_str(usage);
        w.payload.push('}');
        if let Some(r) = w.event(Kind::Usage).await {
            return r;
        }
    }
    if let Some(r) = w.stall_check().await {
        return r;
    }
    let t = mono_ns();
    w.rec.push(t, Kind::Done);
    emissions::commit(w.rec);
    let ok = w.conn.write(http::DONE_AND_END).await;
    if ok {
        model.counters.request_success.fetch_add(1, Relaxed);
    }
    ok
}

fn non_stream_body(head: &str, chat: bool, out: &Output, finish: Finish, usage: &str) -> String {
    let mut b = String::with_capacity(out.answer.len() + out.reasoning.len() + 512);
    b.push_str(head);
    b.push_str("\"choices\":[{\"index\":0,");
    if chat {
        b.push_str("\"message\":{\"role\":\"assistant\",\"content\":");
        if out.tool.is_some() {
            b.push_str("null");
        } else {
            json::push_str(&mut b, &out.answer);
        }
        if !out.reasoning.is_empty() {
            b.push_str(",\"reasoning_content\":");
            json::push_str(&mut b, &out.reasoning);
        }
        if let Some(tc) = &out.tool {
            b.push_str(",\"tool_calls\":[{\"id\":");
            json::push_str(&mut b, &tc.id);
            b.push_str(",\"type\":\"function\",\"function\":{\"name\":");
            json::push_str(&mut b, &tc.name);
            b.push_str(",\"arguments\":");
            json::push_str(&mut b, &out.answer);
            b.push_str("}}]");
        }
        b.push('}');
    } else {
        b.push_str("\"text\":");
        json::push_str(&mut b, &out.answer);
    }
    b.push_str(&format!(
        ",\"logprobs\":null,\"finish_reason\":\"{}\"}}],\"usage\":{usage}}}",
        finish.as_str()
    ));
    b
}

/// Writes SSE events, records their timestamps, applies the stall fault.
struct Writer<'a> {
    conn: &'a mut Conn,
    rec: Record,
    buf: Vec<u8>,
    payload: String,
    events: u64,
    stall_at: Option<u64>,
}

impl Writer<'_> {
    /// The stall fault: after K events, stop writing, keep the connection until the client leaves.
    /// Some(keep_alive) when the request is over.
    async fn stall_check(&mut self) -> Option<bool> {
        if self.stall_at == Some(self.events) {
            emissions::commit(std::mem::take(&mut self.rec));
            self.conn.drain_until_closed().await;
            return Some(false);
        }
        None
    }

    /// Write `self.payload` as one SSE event. Some(keep_alive) when the request is over.
    async fn event(&mut self, kind: Kind) -> Option<bool> {
        if let Some(r) = self.stall_check().await {
            return Some(r);
        }
        http::sse_chunk(&mut self.buf, &self.payload);
        let t = mono_ns();
        self.rec.push(t, kind);
        self.events += 1;
        if !self.conn.write(&self.buf).await {
            return Some(self.gone());
        }
        None
    }

    /// The client went away mid-stream.
    fn gone(&mut self) -> bool {
        emissions::commit(std::mem::take(&mut self.rec));
        false
    }
}
