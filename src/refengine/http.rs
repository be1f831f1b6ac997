//! Minimal HTTP/1.1 on a tokio TcpStream: keep-alive, Content-Length request bodies, chunked
//! streaming responses. No pipelining (a client sends the next request after the response).

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::clock::mono_ns;

/// Largest request head we accept.
const MAX_HEAD: usize = 64 * 1024;
/// Largest request body we accept (a 1M-token prompt fits).
pub const MAX_BODY: usize = 64 * 1024 * 1024;

/// One parsed request.
#[derive(Debug)]
pub struct Request {
    pub method: String,
    /// Path without the query string.
    pub path: String,
    pub body: Vec<u8>,
    /// CLOCK_MONOTONIC when the request's first bytes reached the socket (the kernel's receive
    /// stamp; the read time where there is none).
    pub recv_ns: u64,
    /// The client asked to close the connection after this response (or spoke HTTP/1.0).
    pub close: bool,
}

/// Why no request came out of the connection.
pub enum ReadError {
    /// The peer closed (or reset) the connection between requests.
    Closed,
    /// A malformed request: answer with this status and message, then close.
    Bad(u16, String),
}

/// Reads requests from one connection, keeping leftover bytes between them.
pub struct Conn {
    pub stream: TcpStream,
    buf: Vec<u8>,
}

impl Conn {
    pub fn new(stream: TcpStream) -> Conn {
        let _ = stream.set_nodelay(true);
        // A request "arrives" when its bytes reach the socket, not when this engine, busy with
        // other streams, gets round to reading them: the performance model starts there.
        crate::netstamp::enable(&stream);
        Conn {
            stream,
            buf: Vec::with_capacity(8192),
        }
    }

    /// Reads more bytes; returns when they arrived (the kernel's receive stamp).
    async fn fill(&mut self) -> Result<u64, ReadError> {
        if self.buf.capacity() - self.buf.len() < 4096 {
            self.buf.reserve(self.buf.capacity().max(8192));
        }
        match crate::netstamp::read(&self.stream, &mut self.buf).await {
            Ok((0, _)) | Err(_) => Err(ReadError::Closed),
            Ok((_, at)) => Ok(at),
        }
    }

    /// The next request on this connection.
    pub async fn read_request(&mut self) -> Result<Request, ReadError> {
        let mut recv_ns = if self.buf.is_empty() { 0 } else { mono_ns() };
        loop {
            if !self.buf.is_empty() {
                let mut headers = [httparse::EMPTY_HEADER; 64];
                let mut req = httparse::Request::new(&mut headers);
                match req.parse(&self.buf) {
                    Ok(httparse::Status::Complete(head_len)) => {
                        let method = req.method.unwrap_or("").to_string();
                        let full = req.path.unwrap_or("/");
                        let path = full.split('?').next().unwrap_or("/").to_string();
                        let mut close = req.version == Some(0);
                        let mut content_length: Option<usize> = None;
                        let mut expect_continue = false;
                        for h in req.headers.iter() {
                            let name = h.name;
                            if name.eq_ignore_ascii_case("content-length") {
                                let v = std::str::from_utf8(h.value).unwrap_or("").trim();
                                match v.parse::<usize>() {
                                    Ok(n) => content_length = Some(n),
                                    Err(_) => {
                                        return Err(ReadError::Bad(
                                            400,
                                            "invalid Content-Length".into(),
                                        ))
                                    }
                                }
                            } else if name.eq_ignore_ascii_case("transfer-encoding") {
                                return Err(ReadError::Bad(
                                    411,
                                    "chunked request bodies are not supported; send Content-Length"
                                        .into(),
                                ));
                            } else if name.eq_ignore_ascii_case("expect") {
                                expect_continue = h.value.eq_ignore_ascii_case(b"100-continue");
                            } else if name.eq_ignore_ascii_case("connection") {
                                let v = String::from_utf8_lossy(h.value).to_ascii_lowercase();
                                if v.contains("close") {
                                    close = true;
                                } else if v.contains("keep-alive") {
                                    close = false;
                                }
                            }
                        }
                        let len = content_length.unwrap_or(0);
                        if len > MAX_BODY {
                            return Err(ReadError::Bad(413, "request body too large".into()));
                        }
                        if expect_continue && self.buf.len() < head_len + len {
                            // curl sends `Expect: 100-continue` for large bodies and waits for this.
                            if self
                                .stream
                                .write_all(b"HTTP/1.1 100 Continue\r\n\r\n")
                                .await
                                .is_err()
                            {
                                return Err(ReadError::Closed);
                            }
                        }
                        while self.buf.len() < head_len + len {
                            let want = head_len + len - self.buf.len();
                            self.buf.reserve(want);
                            self.fill().await?;
                        }
                        let body = self.buf[head_len..head_len + len].to_vec();
                        self.buf.drain(..head_len + len);
                        return Ok(Request {
                            method,
                            path,
                            body,
                            recv_ns,
                            close,
                        });
                    }
                    Ok(httparse::Status::Partial) => {
                        if self.buf.len() > MAX_HEAD {
                            return Err(ReadError::Bad(431, "request head too large".into()));
                        }
                    }
                    Err(e) => return Err(ReadError::Bad(400, format!("malformed request: {e}"))),
                }
            }
            let at = self.fill().await?;
            if recv_ns == 0 {
                recv_ns = at;
            }
        }
    }

    /// Write all of `bytes`; false when the peer is gone.
    pub async fn write(&mut self, bytes: &[u8]) -> bool {
        self.stream.write_all(bytes).await.is_ok()
    }

    /// Read and discard until the peer closes (used by the stall fault).
    pub async fn drain_until_closed(&mut self) {
        let mut scratch = [0u8; 4096];
        loop {
            match self.stream.read(&mut scratch).await {
                Ok(0) | Err(_) => return,
                Ok(_) => {}
            }
        }
    }
}

pub fn reason(status: u16) -> &'static str {
    match status {
        200 => "OK",
        400 => "Bad Request",
        404 => "Not Found",
        405 => "Method Not Allowed",
        411 => "Length Required",
        413 => "Payload Too Large",
        431 => "Request Header Fields Too Large",
        500 => "Internal Server Error",
        503 => "Service Unavailable",
        _ => "Unknown",
    }
}

/// A complete response with a Content-Length body, head and body in one buffer.
pub fn response(
    status: u16,
    content_type: &str,
    body: &[u8],
    request_id: Option<&str>,
    close: bool,
) -> Vec<u8> {
    let mut o = Vec::with_capacity(body.len() + 200);
    o.extend_from_slice(
        format!(
            "HTTP/1.1 {status} {}\r\ncontent-type: {content_type}\r\ncontent-length: {}\r\n",
            reason(status),
            body.len()
        )
        .as_bytes(),
    );
    if let Some(id) = request_id {
        o.extend_from_slice(format!("x-request-id: {id}\r\n").as_bytes());
    }
    if close {
        o.extend_from_slice(b"connection: close\r\n");
    }
    o.extend_from_slice(b"\r\n");
    o.extend_from_slice(body);
    o
}

/// The head of a streamed (chunked) SSE response.
pub fn stream_head(request_id: &str) -> Vec<u8> {
    format!(
        "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncache-control: no-cache\r\ntransfer-encoding: chunked\r\nx-request-id: {request_id}\r\n\r\n"
    )
    .into_bytes()
}

/// Frame one SSE event `data: {payload}\n\n` as one HTTP chunk into `out` (cleared first).
#[inline]
pub fn sse_chunk(out: &mut Vec<u8>, payload: &str) {
    use std::io::Write;
    out.clear();
    let _ = write!(out, "{:x}\r\n", payload.len() + 8);
    out.extend_from_slice(b"data: ");
    out.extend_from_slice(payload.as_bytes());
    out.extend_from_slice(b"\n\n\r\n");
}

/// The `[DONE]` event and the terminating zero-length chunk, in one buffer.
pub const DONE_AND_END: &[u8] = b"e\r\ndata: [DONE]\n\n\r\n0\r\n\r\n";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn framing() {
        let mut o = Vec::new();
        sse_chunk(&mut o, "{}");
        assert_eq!(o, b"a\r\ndata: {}\n\n\r\n");
        assert_eq!("data: [DONE]\n\n".len(), 0xe);
    }
}
