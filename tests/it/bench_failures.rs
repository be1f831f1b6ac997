//! `bakeoff bench` when requests fail or the server misbehaves: HTTP 500s, stalls and a crash
//! classified, bad input in one clear line, a server that is not OpenAI-compatible, Ctrl-C,
//! prompt sizing's retries, a 404 on `/v1/models`.

use crate::support::reference;
use reference::{bench, bench_profile as run, metric, text, Engine, BENCH_PROFILE as BASE};

#[test]
fn http_500s_are_classified_and_the_run_completes() {
    // A literal prompt: no sizing requests, so the declared fault hits measured requests only.
    let v = run(
        "error_rate = 0.5\n",
        &["--requests", "20", "--max-tokens", "4", "--prompt", "hello"],
    );
    let failed = v["failed"].as_u64().unwrap();
    assert!(failed > 0 && failed < 20, "failed {failed}");
    assert_eq!(v["ok"].as_u64().unwrap() + failed, 20);
    let f = &v["failures_by_class"]["http-status"];
    assert_eq!(f["count"].as_u64().unwrap(), failed);
    assert!(f["example"].as_str().unwrap().contains("HTTP 500"), "{f}");
    // Failed requests never enter percentiles.
    assert_eq!(v["metrics"]["ttft_ms"]["n"].as_u64().unwrap(), 20 - failed);
}

#[test]
fn a_stall_is_classified() {
    let e = Engine::start(&format!("{BASE}stall_after_chunks = 3\n"));
    let out = e.path("b.json");
    let (o, v) = bench(
        &e.url,
        &[
            "--requests",
            "2",
            "--max-tokens",
            "20",
            "--prompt-tokens",
            "32",
            "--stall-timeout",
            "0.5",
        ],
        &out,
    );
    // Every request failed, so the command fails, but the summary is still written.
    assert!(!o.status.success());
    assert!(text(&o).contains("no request succeeded"), "{}", text(&o));
    let v = v.expect("summary written even when every request failed");
    assert_eq!(v["failures_by_class"]["stall"]["count"], 2);
}

#[test]
fn a_crash_mid_run_is_classified_and_reported() {
    let e = Engine::start(&format!("{BASE}crash_after_requests = 3\n"));
    let out = e.path("b.json");
    let (o, v) = bench(
        &e.url,
        &["--requests", "6", "--max-tokens", "20", "--prompt", "hello"],
        &out,
    );
    let v = v.unwrap_or_else(|| panic!("summary written: {}", text(&o)));
    assert_eq!(v["ok"], 2, "{v}");
    assert_eq!(v["failed"], 4);
    let classes = v["failures_by_class"].as_object().unwrap();
    // The cut stream is incomplete; the later requests can't connect.
    assert!(
        classes.contains_key("incomplete") || classes.contains_key("io"),
        "{classes:?}"
    );
    assert!(classes.contains_key("connect"), "{classes:?}");
}

#[test]
fn bad_input_gets_one_clear_line() {
    let cases: &[(&[&str], &str)] = &[
        (&["bench", "localhost:1"], "http://"),
        (&["bench", "http://127.0.0.1:1"], "cannot connect"),
        (
            &["bench", "http://127.0.0.1:9", "--concurrency", "0"],
            "--concurrency",
        ),
        (
            &["bench", "http://127.0.0.1:9", "--extra-body", "{oops"],
            "--extra-body",
        ),
        (
            &[
                "bench",
                "http://127.0.0.1:9",
                "--api-key-env",
                "BAKEOFF_SURELY_UNSET_VAR",
            ],
            "BAKEOFF_SURELY_UNSET_VAR",
        ),
        (
            &["engine", "--profile", "/nonexistent/p.toml"],
            "/nonexistent/p.toml",
        ),
    ];
    for (args, needle) in cases {
        let o = std::process::Command::new(reference::BIN)
            .args(*args)
            .output()
            .unwrap();
        assert!(!o.status.success(), "{args:?} succeeded");
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(
            err.contains(needle),
            "{args:?}: stderr {err:?} lacks {needle:?}"
        );
        assert!(
            err.trim().lines().count() <= 2,
            "{args:?}: not one clear line: {err}"
        );
    }
}

#[test]
fn a_server_that_is_not_openai_compatible() {
    // A plain HTTP server with no /v1/models.
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port();
    std::thread::spawn(move || {
        use std::io::{Read, Write};
        for s in l.incoming().take(4) {
            let mut s = s.unwrap();
            let mut b = [0u8; 4096];
            let _ = s.read(&mut b);
            let _ = s.write_all(b"HTTP/1.1 404 Not Found\r\nContent-Type: text/html\r\nContent-Length: 9\r\nConnection: close\r\n\r\nnot here!");
        }
    });
    let o = std::process::Command::new(reference::BIN)
        .args(["bench", &format!("http://127.0.0.1:{port}")])
        .output()
        .unwrap();
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("OpenAI-compatible"), "{err}");
}

#[test]
fn ctrl_c_writes_the_summary_of_what_completed() {
    let e = Engine::start(BASE);
    let out = e.path("int.json");
    let child = std::process::Command::new(reference::BIN)
        .args([
            "bench",
            &e.url,
            "--prompt",
            "hi",
            "--requests",
            "200",
            "--concurrency",
            "2",
            "--max-tokens",
            "40",
            "--no-progress",
            "--json",
        ])
        .arg(&out)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // 40 tokens at 80 tok/s: about two requests per stream per second.
    std::thread::sleep(std::time::Duration::from_millis(2500));
    // SAFETY: sending a signal to our own child.
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    let o = child.wait_with_output().unwrap();
    assert!(!o.status.success());
    assert!(text(&o).contains("interrupted"), "{}", text(&o));
    let v: serde_json::Value = serde_json::from_slice(&std::fs::read(&out).unwrap()).unwrap();
    assert_eq!(v["interrupted"], true);
    let ok = v["ok"].as_u64().unwrap();
    assert!((2..200).contains(&ok), "ok {ok}");
    // Dropped in-flight requests are not failures.
    assert_eq!(v["failed"], 0);
}

/// A proxy in front of `upstream` that answers the first `fail` non-streaming completion requests
/// (prompt sizing's) with HTTP 500 and passes everything else through.
fn flaky_proxy(upstream: &str, fail: usize) -> String {
    use std::io::{Read, Write};
    use std::net::{TcpListener, TcpStream};
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;
    let up = upstream.trim_start_matches("http://").to_string();
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port();
    let failed = Arc::new(AtomicUsize::new(0));
    std::thread::spawn(move || {
        for s in l.incoming() {
            let Ok(mut client) = s else { return };
            let (up, failed) = (up.clone(), failed.clone());
            std::thread::spawn(move || {
                // The first request's head and body.
                let mut buf = Vec::new();
                let mut b = [0u8; 65536];
                loop {
                    let n = client.read(&mut b).unwrap_or(0);
                    if n == 0 {
                        return;
                    }
                    buf.extend_from_slice(&b[..n]);
                    let text = String::from_utf8_lossy(&buf).to_string();
                    if let Some(end) = text.find("\r\n\r\n") {
                        let len = text[..end]
                            .lines()
                            .find_map(|l| {
                                let l = l.to_ascii_lowercase();
                                l.strip_prefix("content-length:")
                                    .map(|v| v.trim().parse::<usize>().unwrap())
                            })
                            .unwrap_or(0);
                        if buf.len() >= end + 4 + len {
                            break;
                        }
                    }
                }
                let text = String::from_utf8_lossy(&buf);
                if text.starts_with("POST /v1/chat/completions")
                    && text.contains("\"stream\":false")
                    && failed.fetch_add(1, Ordering::SeqCst) < fail
                {
                    let body = "{\"error\":{\"message\":\"transient\"}}";
                    let _ = write!(client, "HTTP/1.1 500 Internal Server Error\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}", body.len());
                    return;
                }
                let mut server = TcpStream::connect(&up).unwrap();
                server.write_all(&buf).unwrap();
                let (mut c2, mut s2) = (client.try_clone().unwrap(), server.try_clone().unwrap());
                std::thread::spawn(move || {
                    let _ = std::io::copy(&mut c2, &mut s2);
                    let _ = s2.shutdown(std::net::Shutdown::Write);
                });
                let _ = std::io::copy(&mut server, &mut client);
                let _ = client.shutdown(std::net::Shutdown::Both);
            });
        }
    });
    format!("http://127.0.0.1:{port}")
}

#[test]
fn prompt_sizing_retries_a_transient_http_500() {
    let _g = reference::serial();
    let e = Engine::start(BASE);
    let url = flaky_proxy(&e.url, 2);
    let out = e.path("retry.json");
    let (o, v) = bench(
        &url,
        &[
            "--requests",
            "2",
            "--max-tokens",
            "4",
            "--prompt-tokens",
            "64",
        ],
        &out,
    );
    assert!(o.status.success(), "{}", text(&o));
    let v = v.unwrap();
    assert_eq!(metric(&v, "prompt_tokens", "min"), 64.0);
    let notes = v["prompt"]["notes"].to_string();
    assert!(
        notes.contains("2 sizing request(s) were retried") && notes.contains("HTTP 500"),
        "{notes}"
    );

    // A server that keeps failing: the error names the status and the retries.
    let url = flaky_proxy(&e.url, usize::MAX);
    let (o, _) = bench(
        &url,
        &["--requests", "2", "--prompt-tokens", "64"],
        &e.path("x.json"),
    );
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("HTTP 500") && err.contains("after 3 retries"),
        "{err}"
    );
}

/// A server whose /v1/models is a 404 HTML page and whose chat endpoint streams "hi".
fn server_without_models() -> String {
    use std::io::{Read, Write};
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for s in l.incoming() {
            let Ok(mut s) = s else { return };
            let mut b = [0u8; 65536];
            let n = s.read(&mut b).unwrap_or(0);
            let req = String::from_utf8_lossy(&b[..n]);
            if req.starts_with("GET /v1/models") {
                let html = "<!DOCTYPE html>\n<html>\n<head>\n<title>404 Not Found</title>\n</head>\n<body>\n<h1>Not Found</h1>\n<p>The requested URL was not found on this server.</p>\n<hr>\n</body>\n</html>\n";
                let _ = write!(s, "HTTP/1.1 404 Not Found\r\nContent-Type: text/html\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{html}", html.len());
            } else {
                let chunk = r#"{"id":"x","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"content":"hi"},"finish_reason":null}]}"#;
                let last = r#"{"id":"x","object":"chat.completion.chunk","choices":[{"index":0,"delta":{},"finish_reason":"stop"}],"usage":{"prompt_tokens":5,"completion_tokens":1,"total_tokens":6}}"#;
                let body = format!("data: {chunk}\n\ndata: {last}\n\ndata: [DONE]\n\n");
                let _ = write!(s, "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}", body.len());
            }
        }
    });
    format!("http://127.0.0.1:{port}")
}

#[test]
fn a_404_on_models_is_not_fatal_when_model_is_given() {
    let url = server_without_models();
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("m.json");
    let args = [
        "--model",
        "m",
        "--prompt",
        "hello",
        "--requests",
        "2",
        "--max-tokens",
        "1",
    ];
    let (o, v) = bench(&url, &args, &out);
    assert!(o.status.success(), "{}", text(&o));
    let v = v.unwrap();
    assert_eq!(v["ok"], 2);
    assert_eq!(v["model"], "m");
    let err = String::from_utf8_lossy(&o.stderr);
    let note: Vec<&str> = err.lines().filter(|l| l.contains("404")).collect();
    assert_eq!(note.len(), 1, "{err}");
    assert!(
        note[0].contains("Not Found") && !note[0].contains('<'),
        "{err}"
    );
    // Without --model it stays an error, on one line, without the HTML.
    let o = std::process::Command::new(reference::BIN)
        .args(["bench", &url, "--no-progress"])
        .output()
        .unwrap();
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("HTTP 404") && err.trim().lines().count() <= 2 && !err.contains("<html"),
        "{err}"
    );
}
