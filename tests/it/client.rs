//! The client against misbehaving servers: every problem is a classified failure with a message,
//! never a panic and never a latency sample.

use bakeoff::client::trace::kind;
use bakeoff::client::{post_request_bytes, Conn, ErrorClass, Reader, StreamOpts, Target, Trace};
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

/// Serves `parts` (written with a pause between them) to every connection, then either keeps the
/// connection open for `hold` or closes it.
async fn serve(parts: Vec<Vec<u8>>, hold: Duration) -> Target {
    let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = l.local_addr().unwrap().port();
    tokio::spawn(async move {
        loop {
            let Ok((mut s, _)) = l.accept().await else {
                return;
            };
            let parts = parts.clone();
            tokio::spawn(async move {
                let mut buf = vec![0u8; 65536];
                let _ = s.read(&mut buf).await;
                for p in parts {
                    if s.write_all(&p).await.is_err() {
                        return;
                    }
                    tokio::time::sleep(Duration::from_millis(5)).await;
                }
                tokio::time::sleep(hold).await;
            });
        }
    });
    Target::parse(&format!("http://127.0.0.1:{port}")).unwrap()
}

fn chunked(events: &[&str]) -> Vec<Vec<u8>> {
    let mut v = vec![
        b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"
            .to_vec(),
    ];
    for e in events {
        v.push(format!("{:x}\r\n{e}\r\n", e.len()).into_bytes());
    }
    v
}

async fn one(target: &Target, stall: Duration) -> Trace {
    let (t, reusable) = one_via(target, stall, None).await;
    // The same response read as a load reads it, by the shared reader and without keeping text,
    // must end the same way: the same events, the same failure, the same connection state.
    let reader = Reader::start().unwrap();
    let (s, s_reusable) = one_via(target, stall, Some(&reader)).await;
    let kinds = |t: &Trace| t.events.iter().map(|e| e.kind).collect::<Vec<_>>();
    assert_eq!(
        kinds(&s),
        kinds(&t),
        "event kinds, shared reader vs own task"
    );
    assert_eq!(s.error, t.error, "failure, shared reader vs own task");
    assert_eq!(
        (s.status, &s.response_id, &s.finish_reason, &s.usage),
        (t.status, &t.response_id, &t.finish_reason, &t.usage)
    );
    assert_eq!(
        (s.first_byte_ns.is_some(), s.end_ns.is_some()),
        (t.first_byte_ns.is_some(), t.end_ns.is_some())
    );
    assert_eq!(
        s_reusable, reusable,
        "connection reusable after the response"
    );
    if let (Some(f), Some(e)) = (s.first_byte_ns, s.events.first()) {
        assert!(f <= e.t_ns);
    }
    t
}

/// One request on a fresh connection: read by its own task with text kept, or by `reader`.
async fn one_via(target: &Target, stall: Duration, reader: Option<&Reader>) -> (Trace, bool) {
    let mut c = Conn::connect(target, Duration::from_secs(5)).await.unwrap();
    let req = post_request_bytes(target, "/v1/chat/completions", b"{}", None, true);
    let mut t = Trace::default();
    let opts = StreamOpts {
        timeout: Duration::from_secs(10),
        stall,
        collect: reader.is_none(),
    };
    c.stream_via(&req, &opts, &mut t, reader).await;
    (t, c.reusable)
}

const CONTENT: &str = "data: {\"choices\":[{\"delta\":{\"content\":\"hi\"}}]}\n\n";
const USAGE: &str = "data: {\"choices\":[],\"usage\":{\"prompt_tokens\":3,\"completion_tokens\":1,\"total_tokens\":4}}\n\n";

#[tokio::test]
async fn a_good_stream_is_measured() {
    let mut parts = chunked(&[CONTENT, USAGE, "data: [DONE]\n\n"]);
    parts.push(b"0\r\n\r\n".to_vec());
    let t = one(&serve(parts, Duration::ZERO).await, Duration::from_secs(5)).await;
    assert!(t.error.is_none(), "{:?}", t.error);
    assert_eq!(t.events.len(), 3);
    assert_eq!(t.events[0].kind, kind::CONTENT);
    assert!(t.first_byte_ns.unwrap() <= t.events[0].t_ns);
    assert_eq!(t.usage.unwrap().completion_tokens, Some(1));
    assert_eq!(t.output.unwrap().content, "hi");
}

#[tokio::test]
async fn a_stream_ended_by_closing_the_connection_is_complete() {
    // No length, no chunked encoding: the body ends when the server closes; an interim
    // `100 Continue` head comes first.
    let mut parts = vec![
        b"HTTP/1.1 100 Continue\r\n\r\n".to_vec(),
        b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n\r\n".to_vec(),
    ];
    for e in [CONTENT, CONTENT, USAGE, "data: [DONE]\n\n"] {
        parts.push(e.as_bytes().to_vec());
    }
    let t = one(&serve(parts, Duration::ZERO).await, Duration::from_secs(5)).await;
    assert!(t.error.is_none(), "{:?}", t.error);
    assert_eq!(t.events.len(), 4);
    assert_eq!(t.status, Some(200));
}

#[tokio::test]
async fn a_shared_reader_reads_many_streams_at_once() {
    let mut parts = chunked(&[CONTENT, CONTENT, USAGE, "data: [DONE]\n\n"]);
    parts.push(b"0\r\n\r\n".to_vec());
    let target = serve(parts, Duration::from_secs(5)).await;
    let reader = Reader::start().unwrap();
    let mut set = tokio::task::JoinSet::new();
    for _ in 0..64 {
        let (target, reader) = (target.clone(), reader.clone());
        set.spawn(async move {
            let mut c = Conn::connect(&target, Duration::from_secs(5))
                .await
                .unwrap();
            let req = post_request_bytes(&target, "/v1/chat/completions", b"{}", None, true);
            let mut t = Trace::default();
            c.stream_via(&req, &StreamOpts::default(), &mut t, Some(&reader))
                .await;
            (t, c.reusable)
        });
    }
    let mut n = 0;
    while let Some(r) = set.join_next().await {
        let (t, reusable) = r.unwrap();
        assert!(t.error.is_none(), "{:?}", t.error);
        assert_eq!(t.events.len(), 4);
        assert!(reusable);
        n += 1;
    }
    assert_eq!(n, 64);
}

#[tokio::test]
async fn connection_refused_is_a_connect_failure() {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port();
    drop(l);
    let target = Target::parse(&format!("http://127.0.0.1:{port}")).unwrap();
    let e = Conn::connect(&target, Duration::from_secs(2))
        .await
        .err()
        .unwrap();
    assert_eq!(e.class, ErrorClass::Connect);
    assert!(e.message.contains("cannot connect"), "{}", e.message);
}

#[tokio::test]
async fn http_error_keeps_status_and_body() {
    let body = "{\"error\":{\"message\":\"model overloaded\"}}";
    let parts = vec![format!(
        "HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .into_bytes()];
    let t = one(&serve(parts, Duration::ZERO).await, Duration::from_secs(5)).await;
    let e = t.error.unwrap();
    assert_eq!(e.class, ErrorClass::HttpStatus);
    assert_eq!(e.status, Some(503));
    assert!(e.message.contains("model overloaded"), "{}", e.message);
}

#[tokio::test]
async fn json_body_instead_of_sse() {
    let body = "{\"choices\":[{\"message\":{\"content\":\"hi\"}}]}";
    let parts = vec![format!(
        "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .into_bytes()];
    let t = one(&serve(parts, Duration::ZERO).await, Duration::from_secs(5)).await;
    let e = t.error.unwrap();
    assert_eq!(e.class, ErrorClass::NotSse);
    assert!(e.message.contains("application/json"), "{}", e.message);
}

#[tokio::test]
async fn not_http_at_all() {
    let parts = vec![b"SSH-2.0-OpenSSH_9.2\r\n".to_vec()];
    let t = one(&serve(parts, Duration::ZERO).await, Duration::from_secs(5)).await;
    let e = t.error.unwrap();
    assert_eq!(e.class, ErrorClass::NotSse);
    assert!(
        e.message.contains("did not answer with HTTP"),
        "{}",
        e.message
    );
}

#[tokio::test]
async fn malformed_chunk() {
    let t = one(
        &serve(chunked(&[CONTENT, "data: {not json\n\n"]), Duration::ZERO).await,
        Duration::from_secs(5),
    )
    .await;
    let e = t.error.unwrap();
    assert_eq!(e.class, ErrorClass::MalformedChunk);
    assert!(e.message.contains("{not json"), "{}", e.message);
}

#[tokio::test]
async fn stream_that_ends_without_done() {
    let mut parts = chunked(&[CONTENT, USAGE]);
    parts.push(b"0\r\n\r\n".to_vec());
    let t = one(&serve(parts, Duration::ZERO).await, Duration::from_secs(5)).await;
    let e = t.error.unwrap();
    assert_eq!(e.class, ErrorClass::Incomplete);
    assert!(e.message.contains("[DONE]"), "{}", e.message);
}

#[tokio::test]
async fn connection_dropped_mid_stream() {
    let t = one(
        &serve(chunked(&[CONTENT, "data: {\"choi"]), Duration::ZERO).await,
        Duration::from_secs(5),
    )
    .await;
    let e = t.error.unwrap();
    assert_eq!(e.class, ErrorClass::Incomplete);
    assert!(e.message.contains("closed the connection"), "{}", e.message);
}

#[tokio::test]
async fn stall_is_detected() {
    let t = one(
        &serve(chunked(&[CONTENT]), Duration::from_secs(5)).await,
        Duration::from_millis(300),
    )
    .await;
    let e = t.error.unwrap();
    assert_eq!(e.class, ErrorClass::Stall);
    assert!(e.message.contains("stall"), "{}", e.message);
}

#[tokio::test]
async fn error_event_inside_stream() {
    let t = one(
        &serve(
            chunked(&[
                CONTENT,
                "data: {\"error\":{\"message\":\"CUDA out of memory\"}}\n\n",
            ]),
            Duration::ZERO,
        )
        .await,
        Duration::from_secs(5),
    )
    .await;
    let e = t.error.unwrap();
    assert_eq!(e.class, ErrorClass::EngineError);
    assert!(e.message.contains("CUDA out of memory"));
}

/// A server that closes the first (pre-opened, idle) connection without answering, like a
/// keep-alive timeout, and serves later ones.
#[tokio::test]
async fn a_stale_keep_alive_connection_is_retried_once() {
    use bakeoff::load::{self, Mode, Plan, Prepared, Source};
    use std::sync::Arc;
    let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = l.local_addr().unwrap().port();
    tokio::spawn(async move {
        let mut n = 0;
        loop {
            let Ok((mut s, _)) = l.accept().await else {
                return;
            };
            n += 1;
            if n == 1 {
                drop(s);
                continue;
            }
            tokio::spawn(async move {
                let mut buf = vec![0u8; 65536];
                let _ = s.read(&mut buf).await;
                let mut parts = chunked(&[CONTENT, USAGE, "data: [DONE]\n\n"]);
                parts.push(b"0\r\n\r\n".to_vec());
                for p in parts {
                    let _ = s.write_all(&p).await;
                }
            });
        }
    });
    let target = Target::parse(&format!("http://127.0.0.1:{port}")).unwrap();
    struct Src(Target);
    impl Source for Src {
        fn prepare(&self, _i: u64) -> Prepared {
            Prepared {
                bytes: post_request_bytes(&self.0, "/v1/chat/completions", b"{}", None, true),
                prompt_tokens: None,
            }
        }
    }
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    let plan = Plan {
        mode: Mode::Closed { concurrency: 1 },
        requests: Some(1),
        duration: None,
        warmup: 0,
        warmup_duration: None,
        max_in_flight: None,
    };
    tokio::time::sleep(Duration::from_millis(50)).await;
    load::run(
        target.clone(),
        plan,
        Arc::new(Src(target)),
        StreamOpts::default(),
        tx,
    )
    .await
    .unwrap();
    let t = rx.recv().await.unwrap();
    assert!(t.error.is_none(), "{:?}", t.error);
    assert!(t.connect_ns.is_some(), "the retry used a fresh connection");
}

#[tokio::test]
async fn events_written_together_are_reported_and_give_no_zero_gap() {
    use bakeoff::metrics::summary::Collector;
    // Two writes of three content events each (back to back in one write), 5 ms apart, then
    // one content event alone, then usage and [DONE].
    let three = format!("{CONTENT}{CONTENT}{CONTENT}");
    let mut parts = chunked(&[&three, &three, CONTENT, USAGE, "data: [DONE]\n\n"]);
    parts.push(b"0\r\n\r\n".to_vec());
    let target = serve(parts, Duration::ZERO).await;
    let mut c = Collector::default();
    for i in 0..3 {
        let mut t = one(&target, Duration::from_secs(5)).await;
        assert!(t.error.is_none(), "{:?}", t.error);
        assert_eq!(t.events.len(), 9);
        t.index = i;
        c.add(&t, None);
    }
    let s = c.summarize(1);
    let r = &s.arrival_resolution;
    // Per request: 2 gaps inside each write of three cannot be resolved (4), 2 can.
    assert_eq!(r.unresolved_chunk_gaps, 3 * 4, "{r:?}");
    assert!(r.shared_read_events >= 3 * 4, "{r:?}");
    assert_eq!(r.events, 27);
    assert!(r.unresolved_chunk_gap_share.unwrap() > 0.6, "{r:?}");
    // The gaps between writes are measured (about 5 ms); none is reported as 0 ms.
    let g = &s.metrics["chunk_gap_ms"];
    assert_eq!(g.n, 3 * 2, "{g:?}");
    assert!(
        g.min >= 3.0,
        "a gap of {} ms between writes 5 ms apart",
        g.min
    );
}

/// A keep-alive server that answers `per_conn` requests on each connection (each request read
/// in full by its Content-Length, slowly when `slow_read`), then closes it after `close_after`.
/// Returns the target and the count of accepted connections.
async fn keep_alive_server(
    per_conn: usize,
    close_after: Duration,
    slow_read: bool,
) -> (Target, std::sync::Arc<std::sync::atomic::AtomicUsize>) {
    use std::sync::atomic::{AtomicUsize, Ordering};
    let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = l.local_addr().unwrap().port();
    let accepted = std::sync::Arc::new(AtomicUsize::new(0));
    let count = accepted.clone();
    tokio::spawn(async move {
        loop {
            let Ok((mut s, _)) = l.accept().await else {
                return;
            };
            count.fetch_add(1, Ordering::SeqCst);
            tokio::spawn(async move {
                for _ in 0..per_conn {
                    // The head, then the body by its length.
                    let mut got = Vec::new();
                    let mut buf = vec![0u8; 64 * 1024];
                    let need = loop {
                        if let Some(end) = got.windows(4).position(|w| w == b"\r\n\r\n") {
                            let head = String::from_utf8_lossy(&got[..end]).to_lowercase();
                            let len: usize = head
                                .lines()
                                .find_map(|l| l.strip_prefix("content-length: "))
                                .map(|v| v.trim().parse().unwrap())
                                .unwrap_or(0);
                            break end + 4 + len;
                        }
                        match s.read(&mut buf).await {
                            Ok(0) | Err(_) => return,
                            Ok(n) => got.extend_from_slice(&buf[..n]),
                        }
                    };
                    while got.len() < need {
                        if slow_read {
                            tokio::time::sleep(Duration::from_millis(1)).await;
                        }
                        match s.read(&mut buf).await {
                            Ok(0) | Err(_) => return,
                            Ok(n) => got.extend_from_slice(&buf[..n]),
                        }
                    }
                    let mut parts = chunked(&[CONTENT, USAGE, "data: [DONE]\n\n"]);
                    parts.push(b"0\r\n\r\n".to_vec());
                    if s.write_all(&parts.concat()).await.is_err() {
                        return;
                    }
                }
                tokio::time::sleep(close_after).await;
            });
        }
    });
    let target = Target::parse(&format!("http://127.0.0.1:{port}")).unwrap();
    (target, accepted)
}

/// A load's connection stays with the shared reader between requests: the next request is
/// written on it and read by the reader, with no new connection.
#[tokio::test]
async fn a_connection_held_by_the_reader_carries_request_after_request() {
    let (target, accepted) = keep_alive_server(5, Duration::from_secs(5), false).await;
    let reader = Reader::start().unwrap();
    let mut c = Conn::connect(&target, Duration::from_secs(5))
        .await
        .unwrap();
    let req = post_request_bytes(&target, "/v1/chat/completions", b"{}", None, true);
    for i in 0..5 {
        let mut t = Trace::default();
        c.stream_via(&req, &StreamOpts::default(), &mut t, Some(&reader))
            .await;
        assert!(t.error.is_none(), "request {i}: {:?}", t.error);
        assert_eq!(t.events.len(), 3, "request {i}");
        assert!(t.first_byte_ns.unwrap() <= t.events[0].t_ns);
        assert!(c.reusable, "request {i}");
    }
    // The same connection read by its own task (text kept) and by the reader again.
    let mut t = Trace::default();
    let opts = StreamOpts {
        collect: true,
        ..StreamOpts::default()
    };
    let (target2, _) = keep_alive_server(2, Duration::from_secs(5), false).await;
    let mut c2 = Conn::connect(&target2, Duration::from_secs(5))
        .await
        .unwrap();
    let req2 = post_request_bytes(&target2, "/v1/chat/completions", b"{}", None, true);
    c2.stream_via(&req2, &StreamOpts::default(), &mut t, Some(&reader))
        .await;
    assert!(t.error.is_none(), "{:?}", t.error);
    let mut t = Trace::default();
    c2.stream_via(&req2, &opts, &mut t, Some(&reader)).await;
    assert!(t.error.is_none(), "{:?}", t.error);
    assert_eq!(t.output.unwrap().content, "hi");
    assert_eq!(
        accepted.load(std::sync::atomic::Ordering::SeqCst),
        1,
        "one connection for five requests"
    );
}

/// A server that closes an idle connection the reader holds (a keep-alive timeout): the next
/// request on it fails before any byte as a stale connection does (the load retries that on a
/// fresh one), and the load's retry then succeeds.
#[tokio::test]
async fn an_idle_connection_closed_by_the_server_under_the_reader_is_stale() {
    let (target, _) = keep_alive_server(1, Duration::ZERO, false).await;
    let reader = Reader::start().unwrap();
    let mut c = Conn::connect(&target, Duration::from_secs(5))
        .await
        .unwrap();
    let req = post_request_bytes(&target, "/v1/chat/completions", b"{}", None, true);
    let mut t = Trace::default();
    c.stream_via(&req, &StreamOpts::default(), &mut t, Some(&reader))
        .await;
    assert!(t.error.is_none(), "{:?}", t.error);
    // The server closes the connection right after its one answer.
    tokio::time::sleep(Duration::from_millis(100)).await;
    let mut t = Trace::default();
    c.stream_via(&req, &StreamOpts::default(), &mut t, Some(&reader))
        .await;
    let e = t.error.expect("a closed connection fails");
    assert_eq!(e.class, ErrorClass::Io, "{e:?}");
    assert!(t.first_byte_ns.is_none());
    assert!(!c.reusable);

    // Through a load: two requests on one stream, a pause between them longer than the
    // server's keep-alive.
    use bakeoff::load::{self, Mode, Plan, Prepared, Source};
    struct Src(Target);
    impl Source for Src {
        fn prepare(&self, i: u64) -> Prepared {
            if i == 1 {
                std::thread::sleep(Duration::from_millis(100));
            }
            Prepared {
                bytes: post_request_bytes(&self.0, "/v1/chat/completions", b"{}", None, true),
                prompt_tokens: None,
            }
        }
    }
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    let plan = Plan {
        mode: Mode::Closed { concurrency: 1 },
        requests: Some(2),
        duration: None,
        warmup: 0,
        warmup_duration: None,
        max_in_flight: None,
    };
    load::run(
        target.clone(),
        plan,
        std::sync::Arc::new(Src(target)),
        StreamOpts::default(),
        tx,
    )
    .await
    .unwrap();
    for _ in 0..2 {
        let t = rx.recv().await.unwrap();
        assert!(t.error.is_none(), "request {}: {:?}", t.index, t.error);
        assert_eq!(t.events.len(), 3);
        if t.index == 1 {
            assert!(t.connect_ns.is_some(), "the retry used a fresh connection");
        }
    }
}

/// A request larger than the socket's buffers, to a server that reads it slowly: the write
/// waits for room through the reader, and the response is read as usual.
#[tokio::test]
async fn a_large_request_is_written_through_the_reader() {
    let (target, _) = keep_alive_server(2, Duration::from_secs(5), true).await;
    let reader = Reader::start().unwrap();
    let mut c = Conn::connect(&target, Duration::from_secs(5))
        .await
        .unwrap();
    let body = format!("{{\"prompt\":\"{}\"}}", "x".repeat(8 << 20));
    let req = post_request_bytes(&target, "/v1/completions", body.as_bytes(), None, true);
    for i in 0..2 {
        let mut t = Trace::default();
        c.stream_via(&req, &StreamOpts::default(), &mut t, Some(&reader))
            .await;
        assert!(t.error.is_none(), "request {i}: {:?}", t.error);
        assert_eq!(t.events.len(), 3, "request {i}");
        assert!(c.reusable);
    }
}
