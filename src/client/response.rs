//! The response to one streamed request, driven by bytes as they are read: the HTTP head, the
//! body framing and the SSE events into the trace. Push-style (each read's bytes and stamp go
//! in, what to do next comes out), so the same code serves a connection read by its own task
//! (`conn`) and one read by the shared reader (`reader`).

use super::sse::{ChunkSink, Flow, SseParser};
use super::trace::{ErrorClass, RequestError, Trace};

/// What the caller does after [`Response::advance`] or [`Response::eof`].
pub(super) enum Step {
    /// Read more bytes.
    More,
    /// The stream ended as it should (`[DONE]` and the end of the body), or an event stopped it
    /// (`trace.error` says why). `reusable`: the connection can carry another request.
    Done { reusable: bool },
    /// The head is not a 2xx SSE answer: the caller reads (an excerpt of) the body and fails.
    Unusual(Head),
}

enum Stage {
    Head,
    Body {
        head: Head,
        framing: Framing,
        parser: SseParser,
    },
}

/// The state of one streamed response.
pub(super) struct Response {
    stage: Stage,
    send_ns: u64,
    collect: bool,
    first_byte: bool,
}

impl Response {
    pub(super) fn new(send_ns: u64, collect: bool) -> Response {
        Response {
            stage: Stage::Head,
            send_ns,
            collect,
            first_byte: false,
        }
    }

    /// The request's send time (CLOCK_MONOTONIC ns), when it is stamped after the parse state
    /// was made.
    pub(super) fn set_send(&mut self, send_ns: u64) {
        self.send_ns = send_ns;
    }

    /// A read returned bytes that arrived at `t` (CLOCK_MONOTONIC ns): the first one is the
    /// response's first byte.
    pub(super) fn on_read(&mut self, t: u64, trace: &mut Trace) {
        if !self.first_byte && matches!(self.stage, Stage::Head) {
            self.first_byte = true;
            trace.first_byte_ns = Some(t - self.send_ns);
        }
    }

    /// Consumes what it can of `buf` (bytes that arrived by `t`), draining what it used.
    pub(super) fn advance(
        &mut self,
        buf: &mut Vec<u8>,
        t: u64,
        trace: &mut Trace,
    ) -> Result<Step, RequestError> {
        if let Stage::Head = self.stage {
            let Some(head) = parse_head(buf)? else {
                return Ok(Step::More);
            };
            trace.status = Some(head.status);
            if head.request_id.is_some() {
                trace.response_id = head.request_id.clone();
            }
            if !(200..300).contains(&head.status)
                || !head.content_type.starts_with("text/event-stream")
            {
                return Ok(Step::Unusual(head));
            }
            if trace.events.capacity() == 0 {
                // Reserve once per request to keep reallocation off the hot path.
                trace.events.reserve(64);
            }
            self.stage = Stage::Body {
                framing: Framing::new(&head),
                head,
                parser: SseParser::default(),
            };
        }
        let Stage::Body {
            head,
            framing,
            parser,
        } = &mut self.stage
        else {
            unreachable!("the head was parsed above");
        };
        let send = self.send_ns;
        let mut sink = ChunkSink {
            trace: &mut *trace,
            collect: self.collect,
        };
        let mut stop = false;
        let res = framing.decode(buf, &mut |data: &[u8]| {
            if !stop && parser.feed(data, t - send, &mut sink) == Flow::Stop {
                stop = true;
            }
        });
        let consumed = res.map_err(|msg| RequestError::new(ErrorClass::Incomplete, msg))?;
        buf.drain(..consumed);
        if stop || trace.error.is_some() {
            return Ok(Step::Done { reusable: false });
        }
        if framing.finished() {
            return finish(head, framing, parser, trace);
        }
        Ok(Step::More)
    }

    /// The server closed the connection (a read returned 0 bytes).
    pub(super) fn eof(&mut self, trace: &mut Trace) -> Result<Step, RequestError> {
        match &mut self.stage {
            Stage::Head => Err(RequestError::new(
                ErrorClass::Io,
                "the server closed the connection without answering",
            )),
            Stage::Body {
                head,
                framing,
                parser,
            } => {
                if matches!(framing, Framing::Close) {
                    return finish(head, framing, parser, trace);
                }
                Err(incomplete(
                    parser,
                    trace,
                    "the server closed the connection",
                ))
            }
        }
    }
}

fn finish(
    head: &Head,
    framing: &Framing,
    parser: &SseParser,
    trace: &Trace,
) -> Result<Step, RequestError> {
    if !parser.done {
        return Err(incomplete(parser, trace, "the stream ended"));
    }
    Ok(Step::Done {
        reusable: !(matches!(framing, Framing::Close) || head.close),
    })
}

fn incomplete(parser: &SseParser, trace: &Trace, how: &str) -> RequestError {
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

/// Parses a response head from the start of `buf`, skipping
/// `100 Continue` heads; drains what it used. `None`: the head is not complete yet.
pub(super) fn parse_head(buf: &mut Vec<u8>) -> Result<Option<Head>, RequestError> {
    while !buf.is_empty() {
        let mut headers = [httparse::EMPTY_HEADER; 64];
        let mut resp = httparse::Response::new(&mut headers);
        match resp.parse(buf) {
            Ok(httparse::Status::Complete(n)) => {
                let head = Head::from_parsed(&resp);
                buf.drain(..n);
                if head.status == 100 {
                    continue;
                }
                return Ok(Some(head));
            }
            Ok(httparse::Status::Partial) => {
                if buf.len() > 64 * 1024 {
                    return Err(RequestError::new(
                        ErrorClass::NotSse,
                        "response head larger than 64 KiB",
                    ));
                }
                return Ok(None);
            }
            Err(e) => {
                return Err(RequestError::new(
                    ErrorClass::NotSse,
                    format!(
                        "the server did not answer with HTTP ({e}): {}",
                        String::from_utf8_lossy(&buf[..buf.len().min(120)])
                    ),
                ));
            }
        }
    }
    Ok(None)
}

pub(super) struct Head {
    pub(super) status: u16,
    pub(super) content_type: String,
    chunked: bool,
    content_length: Option<u64>,
    pub(super) close: bool,
    request_id: Option<String>,
}

impl Head {
    pub(super) fn from_parsed(resp: &httparse::Response<'_, '_>) -> Head {
        let mut h = Head {
            status: resp.code.unwrap_or(0),
            content_type: String::new(),
            chunked: false,
            content_length: None,
            close: resp.version == Some(0),
            request_id: None,
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
pub(super) enum Framing {
    Length(u64),
    Chunked(ChunkState),
    Close,
}

#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum ChunkState {
    Size,
    Data(u64),
    DataEnd,
    Trailer,
    Done,
}

impl Framing {
    pub(super) fn new(head: &Head) -> Framing {
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

    pub(super) fn finished(&self) -> bool {
        matches!(
            self,
            Framing::Length(0) | Framing::Chunked(ChunkState::Done)
        )
    }

    /// Decodes what it can from `buf`, handing body bytes to `emit`; returns bytes consumed.
    pub(super) fn decode(
        &mut self,
        buf: &[u8],
        emit: &mut dyn FnMut(&[u8]),
    ) -> Result<usize, String> {
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
