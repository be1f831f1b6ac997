//! One keep-alive HTTP/1.1 connection: write a request, read the response with a timestamp per
//! `read()`, decode the body framing by hand.

use super::pacer::{Pacer, Sent};
use super::reader::{Finished, Held, Job, Reader};
use super::response::{parse_head, Framing, Head, Response, Step};
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
    /// `None` while the shared reader holds the socket (`held`), or after it could not be
    /// taken back.
    stream: Option<TcpStream>,
    /// The socket, held by a load's shared reader from its first streamed request on.
    held: Option<Held>,
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
    /// Connects (and for https, shakes hands) within `timeout` in all: the handshake gets what
    /// the TCP connect left of it, not a fresh `timeout`.
    pub async fn connect(target: &Target, timeout: Duration) -> Result<Conn, RequestError> {
        let addr = target.authority();
        let deadline = tokio::time::Instant::now() + timeout;
        let stream = match tokio::time::timeout_at(deadline, TcpStream::connect(&addr)).await {
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
                match tokio::time::timeout_at(
                    deadline,
                    super::tls::Tls::handshake(&mut stream, target, trust),
                )
                .await
                {
                    Ok(r) => r?,
                    Err(_) => {
                        return Err(RequestError::new(
                            ErrorClass::Connect,
                            format!(
                                "connecting to {addr} and the TLS handshake took longer than \
                                 {timeout:?} (the connect limit covers both)"
                            ),
                        ))
                    }
                },
            )),
        };
        Ok(Conn {
            stream: Some(stream),
            held: None,
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
                    let Some(stream) = &self.stream else {
                        return Err(lost());
                    };
                    match &mut self.tls {
                        None => crate::netstamp::read(stream, &mut self.buf).await,
                        Some(tls) => tls.read(stream, &mut self.buf).await,
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
        self.stream_via(request, opts, trace, None).await
    }

    /// [`Conn::stream`], with the response read by the load's shared `reader` where it can be:
    /// plain HTTP, no text kept (`opts.collect` off), nothing buffered from before.
    pub async fn stream_via(
        &mut self,
        request: &[u8],
        opts: &StreamOpts,
        trace: &mut Trace,
        reader: Option<&Reader>,
    ) {
        // A reader with a send thread paces requests that have an intended time (open loop).
        let pace = reader.and_then(Reader::pacer).zip(trace.intended_ns);
        let res = match reader {
            Some(r) if self.tls.is_none() && !opts.collect && self.buf.is_empty() => {
                self.stream_shared(r, request, opts, trace, pace).await
            }
            _ => {
                let sent = match pace {
                    None => Ok(None),
                    Some(p) => self.write_paced(p, request).await,
                };
                trace.send_ns = match &sent {
                    Ok(Some(s)) => s.send_ns,
                    _ => mono_ns(),
                };
                self.last_ns = trace.send_ns;
                let deadline = trace.send_ns + opts.timeout.as_nanos() as u64;
                let written = sent.map(|s| s.map_or(0, |s| s.written));
                if let Err(e) = match written {
                    Ok(n) => self.write_all(&request[n..]).await,
                    Err(e) => Err(e),
                } {
                    self.reusable = false;
                    trace.error = Some(RequestError::new(
                        ErrorClass::Io,
                        format!("could not send the request: {e}"),
                    ));
                    return;
                }
                self.stream_response(opts, trace, deadline).await
            }
        };
        if let Err(e) = res {
            self.reusable = false;
            if trace.end_ns.is_none() {
                trace.end_ns = Some(mono_ns().saturating_sub(trace.send_ns));
            }
            if trace.error.is_none() {
                trace.error = Some(e);
            }
        }
    }

    /// Waits for the request's time `pace.1`: on plain HTTP the send thread writes it then
    /// (what it wrote, stamped); a TLS connection (the thread cannot encrypt) waits on tokio's
    /// timer and is written by the caller, as before.
    async fn write_paced(
        &mut self,
        (pacer, at): (&Pacer, u64),
        request: &[u8],
    ) -> std::io::Result<Option<Sent>> {
        if self.tls.is_some() {
            let wait = Duration::from_nanos(at.saturating_sub(mono_ns()));
            tokio::time::sleep(wait).await;
            return Ok(None);
        }
        self.unhold()?;
        let Some(stream) = &self.stream else {
            return Err(lost());
        };
        let fd = std::os::fd::AsRawFd::as_raw_fd(stream);
        pacer.write_at(fd, request, at).await.map(Some)
    }

    async fn write_all(&mut self, bytes: &[u8]) -> std::io::Result<()> {
        self.unhold()?;
        let Some(stream) = &mut self.stream else {
            return Err(lost());
        };
        match &mut self.tls {
            None => stream.write_all(bytes).await,
            Some(tls) => tls.write_all(stream, bytes).await,
        }
    }

    /// Takes the socket back from the shared reader into this task's runtime registration
    /// (a request the reader does not read, or an error body).
    fn unhold(&mut self) -> std::io::Result<()> {
        let Some(held) = self.held.take() else {
            return Ok(());
        };
        let std = held.release().inspect_err(|_| self.reusable = false)?;
        self.stream = Some(TcpStream::from_std(std).inspect_err(|_| self.reusable = false)?);
        Ok(())
    }

    /// The request written on, and its response read by, the shared reader. The socket goes to
    /// the reader at the first such request and stays there (no registration change per
    /// request).
    async fn stream_shared(
        &mut self,
        reader: &Reader,
        request: &[u8],
        opts: &StreamOpts,
        trace: &mut Trace,
        pace: Option<(&Pacer, u64)>,
    ) -> Result<(), RequestError> {
        if !self.held.as_ref().is_some_and(|h| h.is(reader)) {
            let taken = self.unhold().and_then(|()| {
                self.stream
                    .take()
                    .ok_or_else(lost)
                    .and_then(|s| s.into_std())
            });
            let std = match taken {
                Ok(s) => s,
                Err(e) => {
                    trace.send_ns = mono_ns();
                    return Err(RequestError::new(ErrorClass::Io, format!("{e}")));
                }
            };
            match reader.hold(std) {
                Ok(h) => self.held = Some(h),
                Err((e, std)) => {
                    self.stream = TcpStream::from_std(std).ok();
                    trace.send_ns = mono_ns();
                    return Err(RequestError::new(
                        ErrorClass::Io,
                        format!("cannot watch the connection: {e}"),
                    ));
                }
            }
        }
        let held = self.held.as_mut().expect("held above");
        let job = Job {
            buf: std::mem::take(&mut self.buf),
            resp: Response::new(0, opts.collect),
            trace: std::mem::take(trace),
            last_ns: 0,
        };
        // Not reusable until the response ended as it should (a cancelled request leaves it so).
        let was_reusable = std::mem::replace(&mut self.reusable, false);
        let Finished { job, result, sent } =
            held.run(job, request, opts.timeout, opts.stall, pace).await;
        self.buf = job.buf;
        *trace = job.trace;
        self.last_ns = job.last_ns;
        let deadline = trace.send_ns + opts.timeout.as_nanos() as u64;
        match result {
            Ok(Step::Done { reusable }) => {
                self.reusable = was_reusable && reusable;
                Ok(())
            }
            Ok(Step::Unusual(head)) => {
                self.reusable = was_reusable;
                if let Err(e) = self.unhold() {
                    return Err(RequestError::new(
                        ErrorClass::Io,
                        format!("the connection could not be taken back: {e}"),
                    ));
                }
                Err(self.unusual(head, deadline, opts).await)
            }
            Ok(Step::More) => unreachable!("the reader hands back finished responses only"),
            Err(e) if !sent => {
                // As on the task's own path: a failed send records no end time.
                trace.error = Some(e);
                Ok(())
            }
            Err(e) => Err(e),
        }
    }

    async fn stream_response(
        &mut self,
        opts: &StreamOpts,
        trace: &mut Trace,
        deadline: u64,
    ) -> Result<(), RequestError> {
        let mut resp = Response::new(trace.send_ns, opts.collect);
        // Bytes already buffered (none, normally) carry the send time.
        let mut t = trace.send_ns;
        loop {
            match resp.advance(&mut self.buf, t, trace) {
                Ok(Step::More) => {}
                Ok(Step::Done { reusable }) => {
                    self.reusable &= reusable;
                    return Ok(());
                }
                Ok(Step::Unusual(head)) => return Err(self.unusual(head, deadline, opts).await),
                Err(e) => {
                    self.reusable = false;
                    return Err(e);
                }
            }
            let (n, at) = self.read_some(deadline, opts.stall).await?;
            if n == 0 {
                self.reusable = false;
                return match resp.eof(trace)? {
                    Step::Done { .. } => Ok(()),
                    _ => unreachable!("eof ends the response or fails"),
                };
            }
            resp.on_read(at, trace);
            t = at;
        }
    }

    /// A head that is not a 2xx SSE answer: the error, with an excerpt of the body.
    async fn unusual(&mut self, head: Head, deadline: u64, opts: &StreamOpts) -> RequestError {
        if !(200..300).contains(&head.status) {
            let body = self.read_body_excerpt(&head, deadline, opts.stall).await;
            let mut e = RequestError::new(
                ErrorClass::HttpStatus,
                format!("HTTP {}: {}", head.status, body),
            );
            e.status = Some(head.status);
            return e;
        }
        let body = self.read_body_excerpt(&head, deadline, opts.stall).await;
        self.reusable = false;
        RequestError::new(
            ErrorClass::NotSse,
            format!(
                "expected an SSE stream (text/event-stream), got '{}': {}",
                head.content_type, body
            ),
        )
    }

    async fn read_head(&mut self, deadline: u64, stall: Duration) -> Result<Head, RequestError> {
        loop {
            match parse_head(&mut self.buf) {
                Ok(Some(head)) => return Ok(head),
                Ok(None) => {}
                Err(e) => {
                    self.reusable = false;
                    return Err(e);
                }
            }
            let (n, _) = self.read_some(deadline, stall).await?;
            if n == 0 {
                self.reusable = false;
                return Err(RequestError::new(
                    ErrorClass::Io,
                    "the server closed the connection without answering",
                ));
            }
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
        let head = self.read_head(deadline, timeout).await?;
        let body = self.read_body(&head, deadline, timeout, limit).await?;
        Ok((head.status, body))
    }
}

fn lost() -> std::io::Error {
    std::io::Error::new(std::io::ErrorKind::NotConnected, "the connection was lost")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_server_that_never_answers_the_tls_handshake_fails_within_the_connect_limit() {
        // Accepts TCP connections and holds them silent: the handshake never completes.
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        std::thread::spawn(move || {
            let mut held = Vec::new();
            for s in listener.incoming().flatten() {
                held.push(s);
            }
        });
        let target = Target::parse(&format!("https://127.0.0.1:{port}"))
            .unwrap()
            .with_trust(crate::client::Trust::Insecure);
        let t0 = std::time::Instant::now();
        let err = match Conn::connect(&target, Duration::from_millis(300)).await {
            Ok(_) => panic!("a silent server completed a TLS handshake"),
            Err(e) => e,
        };
        let took = t0.elapsed();
        assert_eq!(err.class, ErrorClass::Connect, "{err}");
        assert!(
            err.message.contains("TLS handshake took longer than 300ms"),
            "{err}"
        );
        assert!(
            took >= Duration::from_millis(290) && took < Duration::from_secs(5),
            "{took:?}"
        );
    }
}
