//! One keep-alive HTTP/1.1 connection: write a request, read the response with a timestamp per
//! `read()`, decode the body framing by hand.

use super::sse::{ChunkSink, Flow, SseParser};
use super::trace::{ErrorClass, RequestError, Trace};
use super::Target;
use crate::clock::mono_ns;
use std::time::Duration;
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;

const READ_CHUNK: usize = 16 * 1024;
/// How much of an error body is kept in the failure message.
const BODY_EXCERPT: usize = 300;

/// Per-request limits and options.
#[derive(Debug, Clone)]
pub struct StreamOpts {
    /// Whole-request limit.
    pub timeout: Duration,
    /// Longest silence between two reads.
    pub stall: Duration,
    /// Keep generated text and tool calls (gates need them; load runs don't).
    pub collect: bool,
}

impl Default for StreamOpts {
    fn default() -> Self {
        StreamOpts {
            timeout: Duration::from_secs(600),
            stall: Duration::from_secs(60),
            collect: false,
        }
    }
}

pub struct Conn {
    stream: TcpStream,
    /// `https://`: the TLS state (the socket then carries ciphertext).
    tls: Option<Box<super::tls::Tls>>,
    buf: Vec<u8>,
    /// Stall/timeout watchdog and the CLOCK_MONOTONIC time it is armed for (0 = not armed).
    watch: std::pin::Pin<Box<tokio::time::Sleep>>,
    watch_at: u64,
    /// Last time bytes arrived, or the request was sent.
    last_ns: u64,
    /// False once the connection can't carry another request (error, `Connection: close`).
    pub reusable: bool,
}

impl Conn {
    pub async fn connect(target: &Target, timeout: Duration) -> Result<Conn, RequestError> {
        let addr = target.authority();
        let stream = match tokio::time::timeout(timeout, TcpStream::connect(&addr)).await {
            Ok(Ok(s)) => s,
            Ok(Err(e)) => {
                return Err(RequestError::new(
                    ErrorClass::Connect,
                    format!(
                        "cannot connect to {addr}: {e}; is the server running and the URL right?"
                    ),
                ))
            }
            Err(_) => {
                return Err(RequestError::new(
                    ErrorClass::Connect,
                    format!("connecting to {addr} took longer than {timeout:?}"),
                ))
            }
        };
        // Small SSE writes must not wait for Nagle on either side.
        let _ = stream.set_nodelay(true);
        // Arrival = when the bytes reached the socket, even if this client reads them later.
        crate::netstamp::enable(&stream);
        let mut stream = stream;
        let tls = match &target.tls {
            None => None,
            Some(trust) => Some(Box::new(
                match tokio::time::timeout(
                    timeout,
                    super::tls::Tls::handshake(&mut stream, target, trust),
                )
                .await
                {
                    Ok(r) => r?,
                    Err(_) => {
                        return Err(RequestError::new(
                            ErrorClass::Connect,
                            format!("the TLS handshake with {addr} took longer than {timeout:?}"),
                        ))
                    }
                },
            )),
        };
        Ok(Conn {
            stream,
            tls,
            buf: Vec::with_capacity(READ_CHUNK),
            watch: Box::pin(tokio::time::sleep(Duration::from_secs(3600))),
            watch_at: 0,
            last_ns: mono_ns(),
            reusable: true,
        })
    }

    /// Reads once, with the stall and overall deadlines; returns the byte count and arrival time.
    ///
    /// The watchdog timer is re-armed only when it fires (about once per stall period), not per
    /// read: registering a timer per chunk would cost more than parsing the chunk.
    async fn read_some(
        &mut self,
        deadline_ns: u64,
        stall: Duration,
    ) -> Result<(usize, u64), RequestError> {
        if self.buf.capacity() - self.buf.len() < READ_CHUNK {
            self.buf.reserve(READ_CHUNK);
        }
        let stall_ns = stall.as_nanos() as u64;
        loop {
            let now = mono_ns();
            if now >= deadline_ns {
                return Err(RequestError::new(
                    ErrorClass::Timeout,
                    "request exceeded its time limit",
                ));
            }
            let idle_limit = self.last_ns.saturating_add(stall_ns);
            if now >= idle_limit {
                return Err(RequestError::new(
                    ErrorClass::Stall,
                    format!("no bytes for {:.1} s (stall limit)", stall.as_secs_f64()),
                ));
            }
            let fire = idle_limit.min(deadline_ns);
            if self.watch_at <= now || self.watch_at > fire {
                self.watch
                    .as_mut()
                    .reset(tokio::time::Instant::now() + Duration::from_nanos(fire - now));
                self.watch_at = fire;
            }
            tokio::select! {
                biased;
                // Appends into spare capacity (no zero-filling); cancel-safe.
                r = async {
                    match &mut self.tls {
                        None => crate::netstamp::read(&self.stream, &mut self.buf).await,
                        Some(tls) => tls.read(&self.stream, &mut self.buf).await,
                    }
                } => {
                    return match r {
                        Ok((n, t)) => {
                            // Stamps of one socket never go backwards (clock-offset jitter).
                            let t = t.max(self.last_ns);
                            self.last_ns = t;
                            Ok((n, t))
                        }
                        Err(e) => Err(RequestError::new(ErrorClass::Io, format!("read failed: {e}"))),
                    };
                }
                _ = self.watch.as_mut() => {
                    // Loop: either a real stall/timeout, or reads happened since arming.
                    self.watch_at = 0;
                }
            }
        }
    }

    /// Sends `request` and streams the SSE response into `trace`. The trace's `send_ns` is set
    /// right before the write. Never panics on bad input: every problem becomes `trace.error`.
    pub async fn stream(&mut self, request: &[u8], opts: &StreamOpts, trace: &mut Trace) {
        trace.send_ns = mono_ns();
        self.last_ns = trace.send_ns;
        let deadline = trace.send_ns + opts.timeout.as_nanos() as u64;
        if let Err(e) = self.write_all(request).await {
            self.reusable = false;
            trace.error = Some(RequestError::new(
                ErrorClass::Io,
                format!("could not send the request: {e}"),
            ));
            return;
        }
        if let Err(e) = self.stream_response(opts, trace, deadline).await {
            self.reusable = false;
            if trace.end_ns.is_none() {
                trace.end_ns = Some(mono_ns().saturating_sub(trace.send_ns));
            }
            if trace.error.is_none() {
                trace.error = Some(e);
            }
        }
    }

    async fn write_all(&mut self, bytes: &[u8]) -> std::io::Result<()> {
        match &mut self.tls {
            None => self.stream.write_all(bytes).await,
            Some(tls) => tls.write_all(&mut self.stream, bytes).await,
        }
    }

    async fn stream_response(
        &mut self,
        opts: &StreamOpts,
        trace: &mut Trace,
        deadline: u64,
    ) -> Result<(), RequestError> {
        let send = trace.send_ns;
        let head = self
            .read_head(deadline, opts.stall, |t| {
                trace.first_byte_ns = Some(t - send);
            })
            .await?;
        trace.status = Some(head.status);
        if head.request_id.is_some() {
            trace.response_id = head.request_id.clone();
        }
        if !(200..300).contains(&head.status) {
            let body = self.read_body_excerpt(&head, deadline, opts.stall).await;
            let mut e = RequestError::new(
                ErrorClass::HttpStatus,
                format!("HTTP {}: {}", head.status, body),
            );
            e.status = Some(head.status);
            return Err(e);
        }
        if !head.content_type.starts_with("text/event-stream") {
            let body = self.read_body_excerpt(&head, deadline, opts.stall).await;
            self.reusable = false;
            return Err(RequestError::new(
                ErrorClass::NotSse,
                format!(
                    "expected an SSE stream (text/event-stream), got '{}': {}",
                    head.content_type, body
                ),
            ));
        }
        if let Some(cap) = estimate_events(trace) {
            trace.events.reserve(cap);
        }
        let mut parser = SseParser::default();
        let mut framing = Framing::new(&head);
        // Bytes after the head that arrived with it carry the head's timestamp.
        let mut t = head.t_ns;
        loop {
            let pending = std::mem::take(&mut self.buf);
            let mut sink = ChunkSink {
                trace: &mut *trace,
                collect: opts.collect,
            };
            let mut stop = false;
            let res = framing.decode(&pending, &mut |data: &[u8]| {
                if !stop && parser.feed(data, t - send, &mut sink) == Flow::Stop {
                    stop = true;
                }
            });
            self.buf = pending;
            let consumed = match res {
                Ok(c) => c,
                Err(msg) => {
                    return Err(RequestError::new(ErrorClass::Incomplete, msg));
                }
            };
            self.buf.drain(..consumed);
            if stop || trace.error.is_some() {
                self.reusable = false;
                return Ok(());
            }
            if framing.finished() {
                break;
            }
            match self.read_some(deadline, opts.stall).await {
                Ok((0, _)) => {
                    if matches!(framing, Framing::Close) {
                        break;
                    }
                    self.reusable = false;
                    return Err(self.incomplete(
                        &parser,
                        trace,
                        "the server closed the connection",
                    ));
                }
                Ok((_, at)) => t = at,
                Err(e) => return Err(e),
            }
        }
        if matches!(framing, Framing::Close) || head.close {
            self.reusable = false;
        }
        if !parser.done {
            return Err(self.incomplete(&parser, trace, "the stream ended"));
        }
        Ok(())
    }

    fn incomplete(&self, parser: &SseParser, trace: &Trace, how: &str) -> RequestError {
        let partial = if parser.has_partial() {
            " in the middle of an event"
        } else {
            ""
        };
        RequestError::new(
            ErrorClass::Incomplete,
            format!(
                "{how}{partial} before data: [DONE] after {} events",
                trace.events.len()
            ),
        )
    }

    async fn read_head(
        &mut self,
        deadline: u64,
        stall: Duration,
        mut on_first_byte: impl FnMut(u64),
    ) -> Result<Head, RequestError> {
        let mut first = true;
        let mut t = 0;
        loop {
            if !self.buf.is_empty() {
                let mut headers = [httparse::EMPTY_HEADER; 64];
                let mut resp = httparse::Response::new(&mut headers);
                match resp.parse(&self.buf) {
                    Ok(httparse::Status::Complete(n)) => {
                        let head = Head::from_parsed(&resp, t);
                        self.buf.drain(..n);
                        if head.status == 100 {
                            continue;
                        }
                        return Ok(head);
                    }
                    Ok(httparse::Status::Partial) => {
                        if self.buf.len() > 64 * 1024 {
                            self.reusable = false;
                            return Err(RequestError::new(
                                ErrorClass::NotSse,
                                "response head larger than 64 KiB",
                            ));
                        }
                    }
                    Err(e) => {
                        self.reusable = false;
                        return Err(RequestError::new(
                            ErrorClass::NotSse,
                            format!(
                                "the server did not answer with HTTP ({e}): {}",
                                String::from_utf8_lossy(&self.buf[..self.buf.len().min(120)])
                            ),
                        ));
                    }
                }
            }
            let (n, at) = self.read_some(deadline, stall).await?;
            if n == 0 {
                self.reusable = false;
                return Err(RequestError::new(
                    ErrorClass::Io,
                    "the server closed the connection without answering",
                ));
            }
            if first {
                on_first_byte(at);
                first = false;
            }
            t = at;
        }
    }

    /// Reads a whole (non-SSE) body, up to `limit` bytes.
    async fn read_body(
        &mut self,
        head: &Head,
        deadline: u64,
        stall: Duration,
        limit: usize,
    ) -> Result<Vec<u8>, RequestError> {
        let mut framing = Framing::new(head);
        let mut body = Vec::new();
        loop {
            let pending = std::mem::take(&mut self.buf);
            let res = framing.decode(&pending, &mut |d: &[u8]| {
                if body.len() < limit {
                    body.extend_from_slice(&d[..d.len().min(limit - body.len())]);
                }
            });
            self.buf = pending;
            let consumed = res.map_err(|m| RequestError::new(ErrorClass::Incomplete, m))?;
            self.buf.drain(..consumed);
            if framing.finished() {
                break;
            }
            let (n, _) = self.read_some(deadline, stall).await?;
            if n == 0 {
                if matches!(framing, Framing::Close) {
                    break;
                }
                self.reusable = false;
                return Err(RequestError::new(
                    ErrorClass::Incomplete,
                    "the server closed the connection in the middle of the body",
                ));
            }
        }
        if matches!(framing, Framing::Close) || head.close {
            self.reusable = false;
        }
        Ok(body)
    }

    async fn read_body_excerpt(&mut self, head: &Head, deadline: u64, stall: Duration) -> String {
        // Bounded wait: an error body that never ends must not hang the run.
        let short = deadline.min(mono_ns() + 5_000_000_000);
        match self.read_body(head, short, stall, 64 * 1024).await {
            Ok(b) => {
                let s = String::from_utf8_lossy(&b);
                let s = s.trim();
                if s.chars().count() > BODY_EXCERPT {
                    format!("{}…", s.chars().take(BODY_EXCERPT).collect::<String>())
                } else if s.is_empty() {
                    "(empty body)".to_string()
                } else {
                    s.to_string()
                }
            }
            Err(e) => {
                self.reusable = false;
                format!("(body unreadable: {})", e.message)
            }
        }
    }

    /// Sends a request and returns the status and the whole body (control plane: tokenize,
    /// models, probes).
    pub async fn exchange(
        &mut self,
        request: &[u8],
        timeout: Duration,
        limit: usize,
    ) -> Result<(u16, Vec<u8>), RequestError> {
        self.last_ns = mono_ns();
        let deadline = self.last_ns + timeout.as_nanos() as u64;
        if let Err(e) = self.write_all(request).await {
            self.reusable = false;
            return Err(RequestError::new(
                ErrorClass::Io,
                format!("could not send the request: {e}"),
            ));
        }
        let head = self.read_head(deadline, timeout, |_| {}).await?;
        let body = self.read_body(&head, deadline, timeout, limit).await?;
        Ok((head.status, body))
    }
}

fn estimate_events(trace: &Trace) -> Option<usize> {
    // Reserve once per request to keep reallocation off the hot path.
    if trace.events.capacity() == 0 {
        Some(64)
    } else {
        None
    }
}

struct Head {
    status: u16,
    content_type: String,
    chunked: bool,
    content_length: Option<u64>,
    close: bool,
    request_id: Option<String>,
    t_ns: u64,
}

impl Head {
    fn from_parsed(resp: &httparse::Response<'_, '_>, t_ns: u64) -> Head {
        let mut h = Head {
            status: resp.code.unwrap_or(0),
            content_type: String::new(),
            chunked: false,
            content_length: None,
            close: resp.version == Some(0),
            request_id: None,
            t_ns,
        };
        for hd in resp.headers.iter() {
            let v = String::from_utf8_lossy(hd.value);
            if hd.name.eq_ignore_ascii_case("content-type") {
                h.content_type = v.to_ascii_lowercase();
            } else if hd.name.eq_ignore_ascii_case("transfer-encoding") {
                h.chunked = v.to_ascii_lowercase().contains("chunked");
            } else if hd.name.eq_ignore_ascii_case("content-length") {
                h.content_length = v.trim().parse().ok();
            } else if hd.name.eq_ignore_ascii_case("connection") {
                let v = v.to_ascii_lowercase();
                if v.contains("close") {
                    h.close = true;
                } else if v.contains("keep-alive") {
                    h.close = false;
                }
            } else if hd.name.eq_ignore_ascii_case("x-request-id") {
                h.request_id = Some(v.into_owned());
            }
        }
        h
    }
}

/// Response body framing (RFC 9112 §6).
enum Framing {
    Length(u64),
    Chunked(ChunkState),
    Close,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum ChunkState {
    Size,
    Data(u64),
    DataEnd,
    Trailer,
    Done,
}

impl Framing {
    fn new(head: &Head) -> Framing {
        if head.chunked {
            Framing::Chunked(ChunkState::Size)
        } else if let Some(n) = head.content_length {
            Framing::Length(n)
        } else if head.status == 204 || head.status == 304 {
            Framing::Length(0)
        } else {
            Framing::Close
        }
    }

    fn finished(&self) -> bool {
        matches!(
            self,
            Framing::Length(0) | Framing::Chunked(ChunkState::Done)
        )
    }

    /// Decodes what it can from `buf`, handing body bytes to `emit`; returns bytes consumed.
    fn decode(&mut self, buf: &[u8], emit: &mut dyn FnMut(&[u8])) -> Result<usize, String> {
        match self {
            Framing::Close => {
                if !buf.is_empty() {
                    emit(buf);
                }
                Ok(buf.len())
            }
            Framing::Length(left) => {
                let take = (*left).min(buf.len() as u64) as usize;
                if take > 0 {
                    emit(&buf[..take]);
                }
                *left -= take as u64;
                Ok(take)
            }
            Framing::Chunked(state) => {
                let mut i = 0;
                loop {
                    match *state {
                        ChunkState::Size => {
                            let Some(nl) = memchr::memchr(b'\n', &buf[i..]) else {
                                if buf.len() - i > 1024 {
                                    return Err(
                                        "invalid chunked encoding (size line too long)".into()
                                    );
                                }
                                return Ok(i);
                            };
                            let line = &buf[i..i + nl];
                            let line = line.strip_suffix(b"\r").unwrap_or(line);
                            let hex = line.split(|&b| b == b';').next().unwrap_or(b"");
                            let hex = std::str::from_utf8(hex).unwrap_or("").trim();
                            let size = u64::from_str_radix(hex, 16).map_err(|_| {
                                format!(
                                    "invalid chunked encoding: bad chunk size '{}'",
                                    String::from_utf8_lossy(&line[..line.len().min(40)])
                                )
                            })?;
                            i += nl + 1;
                            *state = if size == 0 {
                                ChunkState::Trailer
                            } else {
                                ChunkState::Data(size)
                            };
                        }
                        ChunkState::Data(left) => {
                            let take = left.min((buf.len() - i) as u64) as usize;
                            if take == 0 {
                                return Ok(i);
                            }
                            emit(&buf[i..i + take]);
                            i += take;
                            *state = if left == take as u64 {
                                ChunkState::DataEnd
                            } else {
                                ChunkState::Data(left - take as u64)
                            };
                        }
                        ChunkState::DataEnd => {
                            let rest = &buf[i..];
                            if rest.starts_with(b"\r\n") {
                                i += 2;
                            } else if rest.starts_with(b"\n") {
                                i += 1;
                            } else if rest.len() < 2 {
                                return Ok(i);
                            } else {
                                return Err(
                                    "invalid chunked encoding: missing CRLF after chunk".into()
                                );
                            }
                            *state = ChunkState::Size;
                        }
                        ChunkState::Trailer => {
                            let Some(nl) = memchr::memchr(b'\n', &buf[i..]) else {
                                return Ok(i);
                            };
                            let empty = nl == 0 || (nl == 1 && buf[i] == b'\r');
                            i += nl + 1;
                            if empty {
                                *state = ChunkState::Done;
                            }
                        }
                        ChunkState::Done => return Ok(i),
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn decode_all(parts: &[&[u8]]) -> (Vec<u8>, bool) {
        let mut f = Framing::Chunked(ChunkState::Size);
        let mut out = Vec::new();
        let mut pending: Vec<u8> = Vec::new();
        for p in parts {
            pending.extend_from_slice(p);
            let n = f
                .decode(&pending, &mut |d| out.extend_from_slice(d))
                .unwrap();
            pending.drain(..n);
        }
        (out, f.finished())
    }

    #[test]
    fn chunked_across_arbitrary_splits() {
        let whole: &[u8] = b"5\r\nhello\r\n7;ext=1\r\n, world\r\n0\r\n\r\n";
        for cut in 0..whole.len() {
            let (out, done) = decode_all(&[&whole[..cut], &whole[cut..]]);
            assert_eq!(out, b"hello, world", "cut at {cut}");
            assert!(done);
        }
    }

    #[test]
    fn chunked_rejects_garbage() {
        let mut f = Framing::Chunked(ChunkState::Size);
        let err = f.decode(b"zz\r\n", &mut |_| {}).unwrap_err();
        assert!(err.contains("bad chunk size"));
    }
}
