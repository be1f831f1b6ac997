//! Integration tests of `bakeoff engine` (the reference engine): spawn the binary with a temporary
//! profile on port 0, talk raw HTTP/1.1 to it, and check API shapes, usage truth, the emission log,
//! the timing model against the profile, and every declared fault.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

/// Timing tests take the binary's lock exclusively; the others share it (fewer CPU contenders
/// while timing).
use crate::support::{exclusive, shared};

fn temp_dir() -> PathBuf {
    use std::sync::atomic::{AtomicU32, Ordering};
    static N: AtomicU32 = AtomicU32::new(0);
    let d = std::env::temp_dir().join(format!(
        "bakeoff-engine-test-{}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    ));
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// A running engine; killed (and its temp dir removed) on drop, even when a test panics.
struct Engine {
    child: Option<Child>,
    port: u16,
    dir: PathBuf,
}

impl Drop for Engine {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

impl Engine {
    fn start(profiles: &[&str]) -> Engine {
        Self::start_with(profiles, &[])
    }

    fn start_with(profiles: &[&str], extra: &[&str]) -> Engine {
        let dir = temp_dir();
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_bakeoff"));
        cmd.arg("engine").arg("--port").arg("0");
        for (i, p) in profiles.iter().enumerate() {
            let path = dir.join(format!("p{i}.toml"));
            std::fs::write(&path, p).unwrap();
            cmd.arg("--profile").arg(path);
        }
        cmd.args(extra);
        cmd.stdout(Stdio::piped()).stderr(Stdio::piped());
        let mut child = cmd.spawn().expect("spawn bakeoff engine");
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        let mut e = Engine {
            child: Some(child),
            port: 0,
            dir,
        };
        let prefix = "bakeoff engine listening on http://127.0.0.1:";
        assert!(line.starts_with(prefix), "unexpected first line {line:?}");
        e.port = line.trim()[prefix.len()..].parse().unwrap();
        e
    }

    fn req(&self, method: &str, path: &str, body: Option<&Value>) -> Resp {
        request(self.port, method, path, body)
    }

    fn post(&self, path: &str, body: Value) -> Resp {
        self.req("POST", path, Some(&body))
    }

    fn emissions(&self) -> Vec<Value> {
        let r = self.req("GET", "/debug/emissions", None);
        assert_eq!(r.status, 200);
        r.json()["requests"].as_array().unwrap().clone()
    }

    fn emission(&self, id: &str) -> Value {
        self.emissions()
            .into_iter()
            .find(|r| r["id"] == id)
            .unwrap_or_else(|| panic!("no emission record for {id}"))
    }

    /// Wait for the process to exit; its exit code and stderr.
    fn wait_exit(&mut self, within: Duration) -> (Option<i32>, String) {
        let mut child = self.child.take().unwrap();
        let deadline = Instant::now() + within;
        loop {
            if let Some(st) = child.try_wait().unwrap() {
                let mut err = String::new();
                child
                    .stderr
                    .take()
                    .unwrap()
                    .read_to_string(&mut err)
                    .unwrap();
                return (st.code(), err);
            }
            if Instant::now() > deadline {
                let _ = child.kill();
                let _ = child.wait();
                panic!("engine did not exit within {within:?}");
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }
}

#[derive(Debug)]
struct Resp {
    status: u16,
    headers: Vec<(String, String)>,
    body: Vec<u8>,
}

impl Resp {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    fn json(&self) -> Value {
        serde_json::from_slice(&self.body)
            .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&self.body)))
    }

    /// The `data:` payloads of an SSE body, in order.
    fn events(&self) -> Vec<String> {
        let text = String::from_utf8(self.body.clone()).unwrap();
        text.split("\n\n")
            .filter_map(|e| e.strip_prefix("data: "))
            .map(str::to_string)
            .collect()
    }

    /// The JSON events of an SSE body (without `[DONE]`), asserting `[DONE]` ends it.
    fn json_events(&self) -> Vec<Value> {
        let ev = self.events();
        assert_eq!(ev.last().map(String::as_str), Some("[DONE]"), "{ev:?}");
        ev[..ev.len() - 1]
            .iter()
            .map(|e| serde_json::from_str(e).unwrap())
            .collect()
    }
}

fn write_request(s: &mut TcpStream, method: &str, path: &str, body: Option<&Value>) {
    let body = body.map(|b| b.to_string()).unwrap_or_default();
    let head = format!(
        "{method} {path} HTTP/1.1\r\nhost: test\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n",
        body.len()
    );
    // One write: with head and body apart, Nagle + delayed ACK would add 40 ms per request.
    s.write_all(format!("{head}{body}").as_bytes()).unwrap();
}

fn read_head(r: &mut BufReader<TcpStream>) -> (u16, Vec<(String, String)>) {
    let mut line = String::new();
    r.read_line(&mut line).unwrap();
    let status: u16 = line
        .split_whitespace()
        .nth(1)
        .unwrap_or_else(|| panic!("bad status line {line:?}"))
        .parse()
        .unwrap();
    let mut headers = Vec::new();
    loop {
        let mut l = String::new();
        r.read_line(&mut l).unwrap();
        let l = l.trim_end();
        if l.is_empty() {
            break;
        }
        let (k, v) = l.split_once(':').unwrap();
        headers.push((k.trim().to_ascii_lowercase(), v.trim().to_string()));
    }
    (status, headers)
}

/// Read one HTTP chunk's data; None at the terminating chunk.
fn read_chunk(r: &mut BufReader<TcpStream>) -> Option<Vec<u8>> {
    let mut size = String::new();
    r.read_line(&mut size).unwrap();
    let n = usize::from_str_radix(size.trim(), 16)
        .unwrap_or_else(|_| panic!("bad chunk size {size:?}"));
    let mut data = vec![0u8; n + 2];
    r.read_exact(&mut data).unwrap();
    data.truncate(n);
    if n == 0 {
        None
    } else {
        Some(data)
    }
}

fn read_body(r: &mut BufReader<TcpStream>, headers: &[(String, String)]) -> Vec<u8> {
    let get = |k: &str| headers.iter().find(|(h, _)| h == k).map(|(_, v)| v.clone());
    if get("transfer-encoding").as_deref() == Some("chunked") {
        let mut body = Vec::new();
        while let Some(c) = read_chunk(r) {
            body.extend_from_slice(&c);
        }
        body
    } else {
        let n: usize = get("content-length").unwrap().parse().unwrap();
        let mut body = vec![0u8; n];
        r.read_exact(&mut body).unwrap();
        body
    }
}

fn request(port: u16, method: &str, path: &str, body: Option<&Value>) -> Resp {
    let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    write_request(&mut s, method, path, body);
    let mut r = BufReader::new(s);
    let (status, headers) = read_head(&mut r);
    let body = read_body(&mut r, &headers);
    Resp {
        status,
        headers,
        body,
    }
}

fn chat(model: &str, user: &str, max_tokens: u64, stream: bool) -> Value {
    json!({"model": model, "messages": [{"role": "user", "content": user}],
           "max_tokens": max_tokens, "stream": stream, "stream_options": {"include_usage": stream}})
}

fn tokens(e: &Engine, text: &str) -> u64 {
    e.post("/tokenize", json!({ "content": text })).json()["count"]
        .as_u64()
        .unwrap()
}

fn u64s(v: &Value) -> Vec<u64> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_u64().unwrap())
        .collect()
}

fn strs(v: &Value) -> Vec<String> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_str().unwrap().to_string())
        .collect()
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    v[(v.len() - 1) / 2]
}

const FAST: &str = "model = \"fast\"\nttft_ms = 5\ndecode_tok_s = 2000\n";

#[test]
fn health_loading_then_models() {
    let _g = shared();
    let e = Engine::start(&["model = \"m1\"\nstartup_ms = 400\ncontext_tokens = 4096\n"]);
    let h = e.req("GET", "/health", None);
    assert_eq!(h.status, 503);
    assert_eq!(h.json(), json!({"status": "loading"}));
    assert_eq!(e.req("GET", "/v1/models", None).status, 503);
    assert_eq!(
        e.post("/v1/chat/completions", chat("m1", "hi", 2, false))
            .status,
        503
    );
    let t0 = Instant::now();
    while e.req("GET", "/health", None).status != 200 {
        assert!(t0.elapsed() < Duration::from_secs(5));
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(
        e.req("GET", "/health", None).json(),
        json!({"status": "ok"})
    );
    let m = e.req("GET", "/v1/models", None).json();
    assert_eq!(m["object"], "list");
    assert_eq!(m["data"][0]["id"], "m1");
    assert_eq!(m["data"][0]["object"], "model");
    assert_eq!(m["data"][0]["owned_by"], "bakeoff-reference");
    assert_eq!(m["data"][0]["max_model_len"], 4096);
}

#[test]
fn several_profiles_serve_several_models() {
    let _g = shared();
    let e = Engine::start(&[FAST, "model = \"other\"\nttft_ms = 1\n"]);
    let m = e.req("GET", "/v1/models", None).json();
    let ids: Vec<&str> = m["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, vec!["fast", "other"]);
    assert_eq!(
        e.post("/v1/chat/completions", chat("other", "x", 2, false))
            .status,
        200
    );
    let r = e.post("/v1/chat/completions", chat("nope", "x", 2, false));
    assert_eq!(r.status, 404);
    assert!(r.json()["error"]["message"]
        .as_str()
        .unwrap()
        .contains("nope"));
}

#[test]
fn bad_profiles_fail_with_one_clear_line() {
    let _g = shared();
    let dir = temp_dir();
    let cases = [
        (
            "model = \"m\"\nttft_msx = 5\n",
            ".toml:2: ttft_msx: unknown key; ",
        ),
        (
            "model = \"m\"\ndecode_tok_s = -1\n",
            ".toml:2: decode_tok_s: must be a number in [0, 1000000], got -1; ",
        ),
        ("ttft_ms = 5\n", ".toml:1: model: missing"),
    ];
    for (i, (text, want)) in cases.iter().enumerate() {
        let path = dir.join(format!("bad{i}.toml"));
        std::fs::write(&path, text).unwrap();
        let out = Command::new(env!("CARGO_BIN_EXE_bakeoff"))
            .args(["engine", "--port", "0", "--profile"])
            .arg(&path)
            .output()
            .unwrap();
        assert!(!out.status.success());
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            err.contains(want) && err.contains(&format!("bad{i}.toml")),
            "{err}"
        );
    }
    let out = Command::new(env!("CARGO_BIN_EXE_bakeoff"))
        .args(["engine", "--port", "0", "--profile"])
        .arg(dir.join("missing.toml"))
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("missing.toml"));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn tokenize_detokenize_round_trip() {
    let _g = shared();
    let e = Engine::start(&[FAST]);
    for text in [
        "Hello, world!",
        "ünïcödé — ≠ ∑ 中文",
        "emoji 🎉🚀 👩‍👩‍👧 end",
        "new\nlines\r\n\ttabs  and   spaces ",
        "<|im_start|>user\nx<|im_end|>",
    ] {
        for key in ["content", "prompt"] {
            let t = e.post("/tokenize", json!({ key: text })).json();
            let ids = u64s(&t["tokens"]);
            assert_eq!(t["count"].as_u64().unwrap() as usize, ids.len());
            let d = e.post("/detokenize", json!({ "tokens": ids })).json();
            assert_eq!(d["content"], text);
        }
    }
    assert_eq!(tokens(&e, "abcdefgh"), 2);
    assert_eq!(tokens(&e, " a b"), 2);
    let bad = e.post("/detokenize", json!({"tokens": [0]}));
    assert_eq!(bad.status, 400);
    // Chat messages render the template; the count matches the chat request's prompt_tokens.
    let msgs = json!([{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi there"}]);
    let t = e.post("/tokenize", json!({ "messages": msgs })).json();
    let d = e
        .post("/detokenize", json!({ "tokens": t["tokens"] }))
        .json();
    assert!(d["content"]
        .as_str()
        .unwrap()
        .ends_with("<|im_start|>assistant\n"));
    let r = e
        .post(
            "/v1/chat/completions",
            json!({"model": "fast", "messages": msgs, "max_tokens": 3}),
        )
        .json();
    assert_eq!(r["usage"]["prompt_tokens"], t["count"]);
}

#[test]
fn usage_is_the_truth_of_the_tokenizer() {
    let _g = shared();
    let e = Engine::start(&[FAST]);
    for max in [1u64, 7, 40] {
        let r = e.post(
            "/v1/chat/completions",
            chat("fast", "Tell me a story", max, false),
        );
        assert_eq!(r.status, 200);
        let v = r.json();
        assert_eq!(v["object"], "chat.completion");
        let content = v["choices"][0]["message"]["content"].as_str().unwrap();
        assert_eq!(v["usage"]["completion_tokens"].as_u64().unwrap(), max);
        assert_eq!(tokens(&e, content), max);
        assert_eq!(v["choices"][0]["finish_reason"], "length");
        let p = v["usage"]["prompt_tokens"].as_u64().unwrap();
        assert_eq!(v["usage"]["total_tokens"].as_u64().unwrap(), p + max);
        assert_eq!(v["usage"]["prompt_tokens_details"]["cached_tokens"], 0);
        assert_eq!(
            v["usage"]["completion_tokens_details"]["reasoning_tokens"],
            0
        );
    }
    // Streaming: the concatenated deltas tokenize to the usage count.
    let r = e.post(
        "/v1/chat/completions",
        chat("fast", "Tell me a story", 25, true),
    );
    let ev = r.json_events();
    let text: String = ev
        .iter()
        .filter_map(|c| c["choices"][0]["delta"]["content"].as_str())
        .collect();
    let usage = &ev.last().unwrap()["usage"];
    assert_eq!(usage["completion_tokens"], 25);
    assert_eq!(tokens(&e, &text), 25);
    // Completions endpoint, string prompt and token-id prompt.
    let v = e
        .post(
            "/v1/completions",
            json!({"model":"fast","prompt":"Once upon a time","max_tokens":9}),
        )
        .json();
    assert_eq!(v["object"], "text_completion");
    assert_eq!(
        v["usage"]["prompt_tokens"].as_u64().unwrap(),
        tokens(&e, "Once upon a time")
    );
    assert_eq!(tokens(&e, v["choices"][0]["text"].as_str().unwrap()), 9);
    let ids = e
        .post("/tokenize", json!({"prompt": "Once upon a time"}))
        .json()["tokens"]
        .clone();
    let v2 = e
        .post(
            "/v1/completions",
            json!({"model":"fast","prompt":ids,"max_tokens":9}),
        )
        .json();
    assert_eq!(v2["choices"][0]["text"], v["choices"][0]["text"]);
    // Deterministic text; a different --seed changes it.
    let a = e
        .post("/v1/chat/completions", chat("fast", "same", 12, false))
        .json();
    let b = e
        .post("/v1/chat/completions", chat("fast", "same", 12, false))
        .json();
    assert_eq!(
        a["choices"][0]["message"]["content"],
        b["choices"][0]["message"]["content"]
    );
    let e2 = Engine::start_with(&[FAST], &["--seed", "9"]);
    let c = e2
        .post("/v1/chat/completions", chat("fast", "same", 12, false))
        .json();
    assert_ne!(
        a["choices"][0]["message"]["content"],
        c["choices"][0]["message"]["content"]
    );
    // Default max_tokens is 16.
    let d = e
        .post(
            "/v1/chat/completions",
            json!({"model":"fast","messages":[{"role":"user","content":"x"}]}),
        )
        .json();
    assert_eq!(d["usage"]["completion_tokens"], 16);
}

#[test]
fn streaming_shape_and_emission_log() {
    let _g = shared();
    let e = Engine::start(&[FAST]);
    let r = e.post("/v1/chat/completions", chat("fast", "Hi", 6, true));
    assert_eq!(r.status, 200);
    assert_eq!(r.header("content-type"), Some("text/event-stream"));
    let id = r.header("x-request-id").unwrap().to_string();
    assert!(id.starts_with("chatcmpl-"));
    let ev = r.json_events();
    assert_eq!(ev.len(), 6 + 2);
    for c in &ev {
        assert_eq!(c["id"], id.as_str());
        assert_eq!(c["object"], "chat.completion.chunk");
        assert_eq!(c["model"], "fast");
        assert!(c["created"].as_u64().unwrap() > 1_600_000_000);
    }
    assert_eq!(ev[0]["choices"][0]["delta"]["role"], "assistant");
    assert!(!ev[0]["choices"][0]["delta"]["content"]
        .as_str()
        .unwrap()
        .is_empty());
    assert!(ev[1]["choices"][0]["delta"].get("role").is_none());
    assert_eq!(ev[5]["choices"][0]["finish_reason"], Value::Null);
    assert_eq!(ev[6]["choices"][0]["delta"], json!({}));
    assert_eq!(ev[6]["choices"][0]["finish_reason"], "length");
    assert_eq!(ev[7]["choices"], json!([]));
    assert_eq!(ev[7]["usage"]["completion_tokens"], 6);

    let rec = e.emission(&id);
    let kinds = strs(&rec["kinds"]);
    let mut want = vec!["content"; 6];
    want.extend(["finish", "usage", "done"]);
    assert_eq!(kinds, want);
    let t = u64s(&rec["emit_ns"]);
    assert_eq!(t.len(), r.events().len(), "one timestamp per SSE event");
    assert!(t.windows(2).all(|w| w[0] <= w[1]));
    let recv = rec["recv_ns"].as_u64().unwrap();
    let head = rec["head_ns"].as_u64().unwrap();
    assert!(recv > 0 && recv <= head && head < t[0]);

    // Without include_usage: no usage chunk.
    let r = e.post(
        "/v1/chat/completions",
        json!({"model":"fast","messages":[{"role":"user","content":"x"}],"max_tokens":3,"stream":true}),
    );
    let ev = r.json_events();
    assert_eq!(ev.len(), 4);
    assert!(ev.iter().all(|c| c.get("usage").is_none()));

    // Completions streaming shape.
    let r = e.post(
        "/v1/completions",
        json!({"model":"fast","prompt":"x","max_tokens":3,"stream":true,"stream_options":{"include_usage":true}}),
    );
    let id = r.header("x-request-id").unwrap().to_string();
    assert!(id.starts_with("cmpl-"));
    let ev = r.json_events();
    assert_eq!(ev.len(), 5);
    assert_eq!(ev[0]["object"], "text_completion");
    assert!(ev[0]["choices"][0]["text"].is_string());
    assert_eq!(ev[3]["choices"][0]["finish_reason"], "length");
    assert_eq!(ev[4]["usage"]["completion_tokens"], 3);

    // Clearing the log.
    assert_eq!(e.req("DELETE", "/debug/emissions", None).status, 200);
    let all = e.req("GET", "/debug/emissions", None).json();
    assert_eq!(all, json!({"requests": [], "dropped": 0}));

    // Early role chunk: a role-only event first, flushed at admission (long before the content).
    let e = Engine::start(&[
        "model = \"er\"\nttft_ms = 80\ndecode_tok_s = 1000\nearly_role_chunk = true\n",
    ]);
    let r = e.post("/v1/chat/completions", chat("er", "Hi", 3, true));
    let ev = r.json_events();
    assert_eq!(ev[0]["choices"][0]["delta"], json!({"role": "assistant"}));
    assert!(ev[1]["choices"][0]["delta"].get("role").is_none());
    assert!(ev[1]["choices"][0]["delta"]["content"].is_string());
    let rec = e.emission(r.header("x-request-id").unwrap());
    assert_eq!(strs(&rec["kinds"])[..2], ["role", "content"]);
    let t = u64s(&rec["emit_ns"]);
    let recv = rec["recv_ns"].as_u64().unwrap();
    assert!(
        t[0] - recv < 30_000_000,
        "role chunk {} ns after recv",
        t[0] - recv
    );
    assert!(t[1] - recv >= 80_000_000);
}

#[test]
fn context_limit_answers_400_and_cuts_at_the_end() {
    let _g = shared();
    let e = Engine::start(&[
        "model = \"ctx\"\nttft_ms = 1\ndecode_tok_s = 5000\ncontext_tokens = 64\n",
    ]);
    let long = "abcd ".repeat(70);
    let r = e.post(
        "/v1/completions",
        json!({"model":"ctx","prompt":long,"max_tokens":4}),
    );
    assert_eq!(r.status, 400);
    let n = tokens(&e, &long);
    assert_eq!(
        r.json(),
        json!({"error":{"code":400,"type":"exceed_context_size_error",
            "message": format!("request ({n} tokens) exceeds the available context size (64 tokens)"),
            "n_prompt_tokens": n, "n_ctx": 64}})
    );
    assert!(r.header("x-request-id").is_some());
    let p = format!("abcd{}", " abcd".repeat(59)); // 60 tokens
    let v = e
        .post(
            "/v1/completions",
            json!({"model":"ctx","prompt":p,"max_tokens":50}),
        )
        .json();
    assert_eq!(v["usage"]["prompt_tokens"], 60);
    assert_eq!(v["usage"]["completion_tokens"], 4);
    assert_eq!(v["choices"][0]["finish_reason"], "length");
}

#[test]
fn invalid_requests() {
    let _g = shared();
    let e = Engine::start(&[FAST]);
    let mut s = TcpStream::connect(("127.0.0.1", e.port)).unwrap();
    s.write_all(b"POST /v1/chat/completions HTTP/1.1\r\ncontent-length: 5\r\n\r\n{bad}")
        .unwrap();
    let mut r = BufReader::new(s);
    let (status, headers) = read_head(&mut r);
    assert_eq!(status, 400);
    let body: Value = serde_json::from_slice(&read_body(&mut r, &headers)).unwrap();
    assert_eq!(body["error"]["type"], "invalid_request_error");
    assert_eq!(body["error"]["code"], 400);
    let r = e.post("/v1/chat/completions", json!({"model":"fast"}));
    assert_eq!(r.status, 400);
    assert!(r.json()["error"]["message"]
        .as_str()
        .unwrap()
        .contains("messages"));
    // Chunked request bodies: 411.
    let mut s = TcpStream::connect(("127.0.0.1", e.port)).unwrap();
    s.write_all(b"POST /v1/completions HTTP/1.1\r\ntransfer-encoding: chunked\r\n\r\n0\r\n\r\n")
        .unwrap();
    let (status, _) = read_head(&mut BufReader::new(s));
    assert_eq!(status, 411);
    assert_eq!(e.req("GET", "/nope", None).status, 404);
    // Keep-alive: two requests on one connection.
    let mut s = TcpStream::connect(("127.0.0.1", e.port)).unwrap();
    write_request(&mut s, "GET", "/health", None);
    let mut r = BufReader::new(s.try_clone().unwrap());
    let (st, h) = read_head(&mut r);
    read_body(&mut r, &h);
    write_request(
        &mut s,
        "POST",
        "/v1/chat/completions",
        Some(&chat("fast", "x", 3, true)),
    );
    let (st2, h2) = read_head(&mut r);
    let b2 = read_body(&mut r, &h2);
    assert_eq!((st, st2), (200, 200));
    assert!(String::from_utf8(b2).unwrap().ends_with("data: [DONE]\n\n"));
}

#[test]
fn fault_fail_at_startup() {
    let _g = shared();
    let mut e = Engine::start(&["model = \"f\"\nstartup_ms = 150\nfail_at_startup = \"CUDA error: out of memory (simulated)\"\n"]);
    let t0 = Instant::now();
    assert_eq!(e.req("GET", "/health", None).status, 503);
    let (code, err) = e.wait_exit(Duration::from_secs(5));
    assert_eq!(code, Some(1));
    assert!(
        err.contains("CUDA error: out of memory (simulated)"),
        "{err}"
    );
    assert!(t0.elapsed() >= Duration::from_millis(100));
}

#[test]
fn fault_crash_after_requests() {
    let _g = shared();
    let mut e = Engine::start(&[
        "model = \"c\"\nttft_ms = 5\ndecode_tok_s = 200\ncrash_after_requests = 2\n",
    ]);
    let ok = e.post("/v1/chat/completions", chat("c", "one", 10, true));
    assert_eq!(ok.json_events().len(), 12);
    // Request 2 is cut half way: the stream ends without [DONE] or the terminating chunk.
    let mut s = TcpStream::connect(("127.0.0.1", e.port)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    write_request(
        &mut s,
        "POST",
        "/v1/chat/completions",
        Some(&chat("c", "two", 10, true)),
    );
    let mut r = BufReader::new(s);
    let (status, _) = read_head(&mut r);
    assert_eq!(status, 200);
    let mut rest = Vec::new();
    let _ = r.read_to_end(&mut rest);
    let text = String::from_utf8_lossy(&rest);
    let events = text.matches("data: ").count();
    assert_eq!(events, 5, "{text}");
    assert!(!text.contains("[DONE]"));
    let (code, err) = e.wait_exit(Duration::from_secs(5));
    assert_eq!(code, Some(70));
    assert!(
        err.contains("reference engine: simulated crash after 2 requests"),
        "{err}"
    );
}

#[test]
fn fault_stall_after_chunks() {
    let _g = shared();
    let e = Engine::start(&[
        "model = \"st\"\nttft_ms = 5\ndecode_tok_s = 500\nstall_after_chunks = 3\n",
    ]);
    let mut s = TcpStream::connect(("127.0.0.1", e.port)).unwrap();
    write_request(
        &mut s,
        "POST",
        "/v1/chat/completions",
        Some(&chat("st", "x", 20, true)),
    );
    let mut r = BufReader::new(s.try_clone().unwrap());
    let (status, _) = read_head(&mut r);
    assert_eq!(status, 200);
    for _ in 0..3 {
        assert!(read_chunk(&mut r).is_some());
    }
    // Nothing more arrives, yet the connection stays open.
    s.set_read_timeout(Some(Duration::from_millis(400)))
        .unwrap();
    let mut b = [0u8; 16];
    let err = r.read(&mut b).unwrap_err();
    assert!(matches!(
        err.kind(),
        std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
    ));
    let recs = e.emissions();
    assert_eq!(recs[0]["kinds"].as_array().unwrap().len(), 3);
    assert_eq!(e.req("GET", "/health", None).status, 200);
}

#[test]
fn fault_error_rate_is_seeded() {
    let _g = shared();
    let count = |seed: &str| -> (usize, Vec<bool>) {
        let e = Engine::start_with(
            &["model = \"er\"\nttft_ms = 0\ndecode_tok_s = 100000\nerror_rate = 0.2\n"],
            &["--seed", seed],
        );
        let mut s = TcpStream::connect(("127.0.0.1", e.port)).unwrap();
        let mut r = BufReader::new(s.try_clone().unwrap());
        let mut pattern = Vec::new();
        for _ in 0..200 {
            write_request(
                &mut s,
                "POST",
                "/v1/completions",
                Some(&json!({"model":"er","prompt":"x","max_tokens":1})),
            );
            let (status, h) = read_head(&mut r);
            let body: Value = serde_json::from_slice(&read_body(&mut r, &h)).unwrap();
            if status == 500 {
                assert!(body["error"]["message"].is_string());
                assert_eq!(body["error"]["code"], 500);
            } else {
                assert_eq!(status, 200);
            }
            pattern.push(status == 500);
        }
        (pattern.iter().filter(|&&b| b).count(), pattern)
    };
    let (n, p) = count("7");
    assert!(
        (20..=60).contains(&n),
        "{n} errors of 200 at error_rate 0.2"
    );
    let (n2, p2) = count("7");
    assert_eq!((n, &p), (n2, &p2), "same seed, same requests fail");
    let (_, p3) = count("8");
    assert_ne!(p, p3);
}

fn weather_tool() -> Value {
    json!({"type":"function","function":{"name":"get_weather","description":"Weather",
        "parameters":{"type":"object","properties":{
            "city":{"type":"string"},
            "unit":{"type":"string","enum":["celsius","fahrenheit"]}},
            "required":["city","unit"]}}})
}

fn tool_request(model: &str, stream: bool) -> Value {
    json!({"model": model, "stream": stream, "max_tokens": 200,
        "messages":[{"role":"user","content":"Use get_weather for city: Paris, unit fahrenheit"}],
        "tools":[{"type":"function","function":{"name":"lookup","parameters":{"type":"object","properties":{}}}}, weather_tool()]})
}

#[test]
fn tool_behaviours() {
    let _g = shared();
    let profile = |b: &str| {
        format!("model = \"{b}\"\nttft_ms = 1\ndecode_tok_s = 5000\ntool_behavior = \"{b}\"\n")
    };
    let e = Engine::start(&[
        &profile("correct"),
        &profile("drop_required_arg"),
        &profile("ignore_tools"),
        &profile("malformed_arguments"),
    ]);
    let v = e
        .post("/v1/chat/completions", tool_request("correct", false))
        .json();
    let choice = &v["choices"][0];
    assert_eq!(choice["finish_reason"], "tool_calls");
    let call = &choice["message"]["tool_calls"][0];
    assert_eq!(call["type"], "function");
    assert!(call["id"].as_str().unwrap().starts_with("call_"));
    assert_eq!(call["function"]["name"], "get_weather");
    let args: Value =
        serde_json::from_str(call["function"]["arguments"].as_str().unwrap()).unwrap();
    assert_eq!(args, json!({"city":"Paris","unit":"fahrenheit"}));
    let args_tokens = tokens(&e, call["function"]["arguments"].as_str().unwrap());
    assert_eq!(
        v["usage"]["completion_tokens"].as_u64().unwrap(),
        1 + args_tokens
    );

    // Streaming: header delta, then argument fragments that concatenate to the arguments.
    let r = e.post("/v1/chat/completions", tool_request("correct", true));
    let ev = r.json_events();
    let first = &ev[0]["choices"][0]["delta"]["tool_calls"][0];
    assert_eq!(first["index"], 0);
    assert_eq!(first["function"]["name"], "get_weather");
    assert_eq!(first["function"]["arguments"], "");
    assert!(first["id"].as_str().unwrap().starts_with("call_"));
    let streamed: String = ev[1..]
        .iter()
        .filter_map(|c| c["choices"][0]["delta"]["tool_calls"][0]["function"]["arguments"].as_str())
        .collect();
    assert_eq!(streamed, call["function"]["arguments"].as_str().unwrap());
    assert_eq!(
        ev[ev.len() - 1]["choices"][0]["finish_reason"],
        "tool_calls"
    );
    let rec = e.emission(r.header("x-request-id").unwrap());
    assert!(strs(&rec["kinds"]).iter().filter(|k| *k == "tool").count() > 2);

    let v = e
        .post(
            "/v1/chat/completions",
            tool_request("drop_required_arg", false),
        )
        .json();
    let a: Value = serde_json::from_str(
        v["choices"][0]["message"]["tool_calls"][0]["function"]["arguments"]
            .as_str()
            .unwrap(),
    )
    .unwrap();
    assert_eq!(a, json!({"unit":"fahrenheit"}));

    let v = e
        .post("/v1/chat/completions", tool_request("ignore_tools", false))
        .json();
    assert!(v["choices"][0]["message"].get("tool_calls").is_none());
    assert!(
        v["choices"][0]["message"]["content"]
            .as_str()
            .unwrap()
            .len()
            > 3
    );
    assert_eq!(v["choices"][0]["finish_reason"], "stop");

    let v = e
        .post(
            "/v1/chat/completions",
            tool_request("malformed_arguments", false),
        )
        .json();
    let raw = v["choices"][0]["message"]["tool_calls"][0]["function"]["arguments"]
        .as_str()
        .unwrap();
    assert!(serde_json::from_str::<Value>(raw).is_err(), "{raw}");

    // tool_choice "none": no call.
    let mut req = tool_request("correct", false);
    req["tool_choice"] = json!("none");
    let v = e.post("/v1/chat/completions", req).json();
    assert!(v["choices"][0]["message"].get("tool_calls").is_none());

    // Round trip: a tool message gets a text answer that includes its content.
    let req = json!({"model":"correct","max_tokens":100,"tools":[weather_tool()],"messages":[
        {"role":"user","content":"Weather in Paris?"},
        {"role":"assistant","content":null,"tool_calls":[{"id":"call_1","type":"function","function":{"name":"get_weather","arguments":"{\"city\":\"Paris\"}"}}]},
        {"role":"tool","tool_call_id":"call_1","content":"18 C and sunny"}]});
    let v = e.post("/v1/chat/completions", req).json();
    assert!(v["choices"][0]["message"]["content"]
        .as_str()
        .unwrap()
        .contains("18 C and sunny"));
    assert_eq!(v["choices"][0]["finish_reason"], "stop");
}

#[test]
fn retrieval_right_then_wrong_past_the_effective_length() {
    let _g = shared();
    let e = Engine::start(&["model = \"rt\"\nttft_ms = 1\ndecode_tok_s = 5000\nretrieval_effective_tokens = 300\ncontext_tokens = 8192\n"]);
    let ask = |pad: usize| -> (Value, u64) {
        let filler = "lorem ".repeat(pad);
        let user = format!("{filler}The vault code is 4821. The pet name is Rex.\n{filler}What is the vault code? What is the pet name? What is the colour?");
        let v = e
            .post("/v1/chat/completions", chat("rt", &user, 50, false))
            .json();
        let p = v["usage"]["prompt_tokens"].as_u64().unwrap();
        (v, p)
    };
    let (v, p) = ask(50);
    assert!(p <= 300);
    assert_eq!(
        v["choices"][0]["message"]["content"],
        "4821, Rex, I don't know."
    );
    assert_eq!(v["choices"][0]["finish_reason"], "stop");
    let (v, p) = ask(200);
    assert!(p > 300);
    assert_eq!(
        v["choices"][0]["message"]["content"],
        "5932, Sfy, I don't know."
    );
    // Smoke and JSON.
    let v = e
        .post(
            "/v1/chat/completions",
            chat("rt", "Reply with exactly: pong\n", 20, false),
        )
        .json();
    assert_eq!(v["choices"][0]["message"]["content"], "pong");
    let req = json!({"model":"rt","max_tokens":50,"messages":[{"role":"user","content":"name: Ada"}],
        "response_format":{"type":"json_schema","json_schema":{"name":"p","schema":{"type":"object",
        "properties":{"name":{"type":"string"},"age":{"type":"integer"}},"required":["name","age"]}}}});
    let v = e.post("/v1/chat/completions", req).json();
    let obj: Value =
        serde_json::from_str(v["choices"][0]["message"]["content"].as_str().unwrap()).unwrap();
    assert_eq!(obj, json!({"name":"Ada","age":1}));
}

#[test]
fn prefix_cache_reports_cached_tokens() {
    let _g = shared();
    let e =
        Engine::start(&["model = \"pc\"\nttft_ms = 1\ndecode_tok_s = 5000\nprefix_cache = true\n"]);
    let prompt = "shared system prompt ".repeat(20);
    let body =
        |cache: bool| json!({"model":"pc","prompt":prompt,"max_tokens":2,"cache_prompt":cache});
    let n = tokens(&e, &prompt);
    let first = e.post("/v1/completions", body(true)).json();
    assert_eq!(first["usage"]["prompt_tokens_details"]["cached_tokens"], 0);
    let second = e.post("/v1/completions", body(true)).json();
    assert_eq!(
        second["usage"]["prompt_tokens_details"]["cached_tokens"]
            .as_u64()
            .unwrap(),
        (n - 1) / 16 * 16
    );
    let bypass = e.post("/v1/completions", body(false)).json();
    assert_eq!(bypass["usage"]["prompt_tokens_details"]["cached_tokens"], 0);
    let m = String::from_utf8(e.req("GET", "/metrics", None).body).unwrap();
    assert!(m.contains(&format!(
        "vllm:prefix_cache_hits_total{{model_name=\"pc\"}} {}",
        (n - 1) / 16 * 16
    )));
}

#[test]
fn metrics_and_kv_queue() {
    let _g = shared();
    // KV holds one request (prompt + max_tokens ≈ 30 tokens) at a time: the second waits FIFO.
    let e =
        Engine::start(&["model = \"kv\"\nttft_ms = 100\ndecode_tok_s = 1000\nkv_tokens = 40\n"]);
    let port = e.port;
    let body = json!({"model":"kv","prompt":"abcd abcd abcd abcd","max_tokens":20,"stream":true});
    let b1 = body.clone();
    let h1 = std::thread::spawn(move || request(port, "POST", "/v1/completions", Some(&b1)));
    std::thread::sleep(Duration::from_millis(30));
    let b2 = body.clone();
    let h2 = std::thread::spawn(move || request(port, "POST", "/v1/completions", Some(&b2)));
    std::thread::sleep(Duration::from_millis(30));
    let m = String::from_utf8(e.req("GET", "/metrics", None).body).unwrap();
    for name in [
        "vllm:num_requests_running",
        "vllm:num_requests_waiting",
        "vllm:kv_cache_usage_perc",
        "vllm:prompt_tokens_total",
        "vllm:generation_tokens_total",
        "vllm:spec_decode_num_draft_tokens_total",
        "vllm:spec_decode_num_accepted_tokens_total",
        "vllm:prefix_cache_hits_total",
        "vllm:request_success_total",
    ] {
        assert!(
            m.contains(&format!("{name}{{model_name=\"kv\"}}")),
            "{name} missing:\n{m}"
        );
    }
    assert!(
        m.contains("vllm:num_requests_running{model_name=\"kv\"} 1"),
        "{m}"
    );
    assert!(
        m.contains("vllm:num_requests_waiting{model_name=\"kv\"} 1"),
        "{m}"
    );
    let r1 = h1.join().unwrap();
    let r2 = h2.join().unwrap();
    let t1 = u64s(&e.emission(r1.header("x-request-id").unwrap())["emit_ns"]);
    let rec2 = e.emission(r2.header("x-request-id").unwrap());
    let t2 = u64s(&rec2["emit_ns"]);
    // The second is admitted when the first finishes, and its head is sent at admission.
    assert!(rec2["head_ns"].as_u64().unwrap() >= *t1.last().unwrap() - 1_000_000);
    assert!(t2[0] >= t1.last().unwrap() + 99_000_000);
    let m = String::from_utf8(e.req("GET", "/metrics", None).body).unwrap();
    assert!(
        m.contains("vllm:request_success_total{model_name=\"kv\"} 2"),
        "{m}"
    );
    assert!(
        m.contains("vllm:generation_tokens_total{model_name=\"kv\"} 40"),
        "{m}"
    );
}

#[test]
fn sigterm_exits_cleanly() {
    let _g = shared();
    let mut e = Engine::start(&[FAST]);
    // An open keep-alive connection must not hold the process up.
    let _idle = TcpStream::connect(("127.0.0.1", e.port)).unwrap();
    let pid = e.child.as_ref().unwrap().id() as i32;
    let t0 = Instant::now();
    // SAFETY: signalling our own child process.
    unsafe {
        libc::kill(pid, libc::SIGTERM);
    }
    let (code, _) = e.wait_exit(Duration::from_secs(3));
    assert_eq!(code, Some(0));
    assert!(
        t0.elapsed() < Duration::from_millis(500),
        "{:?}",
        t0.elapsed()
    );
}

/// Tests whose assertions are timing figures (within 1 ms, within 1 %): they run alone.
/// `scripts/test.sh` runs every `solo` module in a pass of its own with one test thread, after
/// the rest of the binary; the `exclusive()` lock keeps them apart from the other lock takers
/// under a plain `cargo test`.
mod solo {
    use super::*;

    #[test]
    fn ttft_and_decode_follow_the_profile() {
        let _g = exclusive();
        let e = Engine::start(&["model = \"ref\"\nttft_ms = 50\ndecode_tok_s = 80\n"]);
        let mut ttfts = Vec::new();
        let mut rates = Vec::new();
        let mut itls = Vec::new();
        for i in 0..6 {
            let r = e.post(
                "/v1/chat/completions",
                chat("ref", &format!("go {i}"), 41, true),
            );
            let rec = e.emission(r.header("x-request-id").unwrap());
            let kinds = strs(&rec["kinds"]);
            let t = u64s(&rec["emit_ns"]);
            let content: Vec<u64> = t
                .iter()
                .zip(&kinds)
                .filter(|(_, k)| *k == "content")
                .map(|(t, _)| *t)
                .collect();
            assert_eq!(content.len(), 41);
            ttfts.push((content[0] - rec["recv_ns"].as_u64().unwrap()) as f64 / 1e6);
            rates.push(40.0 / ((content[40] - content[0]) as f64 / 1e9));
            itls.extend(content.windows(2).map(|w| (w[1] - w[0]) as f64 / 1e6));
        }
        let ttft = median(ttfts.clone());
        let rate = median(rates.clone());
        let itl = median(itls);
        eprintln!("TTFT p50 {ttft:.3} ms, decode p50 {rate:.3} tok/s, ITL p50 {itl:.4} ms; ttfts {ttfts:?} rates {rates:?}");
        assert!((ttft - 50.0).abs() <= 1.0, "TTFT p50 {ttft} ms");
        assert!((rate - 80.0).abs() <= 0.8, "decode p50 {rate} tok/s");
        assert!((itl - 12.5).abs() <= 0.5, "ITL p50 {itl} ms");
    }

    #[test]
    fn concurrent_streams_keep_their_timing() {
        let _g = exclusive();
        let e = Engine::start(&["model = \"ref\"\nttft_ms = 50\ndecode_tok_s = 80\n"]);
        let port = e.port;
        let n = 64;
        // The starts are spread over one decode gap (64 × 0.2 ms = 12.8 ms), as a serving load's
        // arrivals are: started together, all 64 first tokens fall due in the same instant and
        // the median one waits for 31 writes and 31 woken readers on two shared cores (CI saw
        // the median TTFT 9.7 ms late on a busy host). Spread, all 64 still decode together
        // for the whole second and each token's deadline has the cores to itself.
        let t0 = std::time::Instant::now() + std::time::Duration::from_millis(20);
        let hs: Vec<_> = (0..n)
            .map(|i| {
                std::thread::spawn(move || {
                    let at = t0 + std::time::Duration::from_micros(200 * i as u64);
                    std::thread::sleep(at.saturating_duration_since(std::time::Instant::now()));
                    let r = request(
                        port,
                        "POST",
                        "/v1/chat/completions",
                        Some(&chat("ref", &format!("s{i}"), 81, true)),
                    );
                    r.header("x-request-id").unwrap().to_string()
                })
            })
            .collect();
        let ids: Vec<String> = hs.into_iter().map(|h| h.join().unwrap()).collect();
        let recs = e.emissions();
        let mut ttfts = Vec::new();
        let mut rates = Vec::new();
        let mut itls = Vec::new();
        for id in &ids {
            let rec = recs.iter().find(|r| r["id"] == id.as_str()).unwrap();
            let t = u64s(&rec["emit_ns"]);
            ttfts.push((t[0] - rec["recv_ns"].as_u64().unwrap()) as f64 / 1e6);
            rates.push(80.0 / ((t[80] - t[0]) as f64 / 1e9));
            itls.extend(t[..81].windows(2).map(|w| (w[1] - w[0]) as f64 / 1e6));
        }
        let ttft = median(ttfts.clone());
        let rate = median(rates);
        let itl = median(itls);
        eprintln!(
            "{n} streams: TTFT p50 {ttft:.3} ms, decode p50 {rate:.3} tok/s, ITL p50 {itl:.4} ms"
        );
        // 64 client threads share two cores with the engine here: allow 2 ms on the median TTFT.
        // The 64 streams run in lockstep, so one stall of the machine delays every stream's
        // last token at once (CI once saw 7 ms late on a 250 ms span: -3 %). The ITL median
        // (5,120 gaps; a stall moves two gaps per stream) is held to 1 %, the span to 2 %.
        assert!((itl - 12.5).abs() <= 0.125, "ITL p50 {itl} ms");
        assert!(
            (ttft - 50.0).abs() <= 2.0,
            "TTFT p50 {ttft}; each stream {ttfts:?}"
        );
        assert!((rate - 80.0).abs() <= 1.6, "decode p50 {rate}");
    }

    #[test]
    fn prefill_concurrency_and_long_context_slowdowns() {
        let _g = exclusive();
        let e = Engine::start(&[
            "model = \"p\"\nttft_ms = 20\nprefill_tok_s = 10000\ndecode_tok_s = 200\nlong_context_decode_slowdown = 0.5\n",
        ]);
        let prompt = "word ".repeat(1000); // 1001 pieces: `word`, 999 × ` word`, ` `
        let n_prompt = tokens(&e, &prompt) as f64;
        let (mut ttfts, mut itls) = (Vec::new(), Vec::new());
        for _ in 0..3 {
            let r = e.post(
                "/v1/completions",
                json!({"model":"p","prompt":prompt,"max_tokens":11,"stream":true}),
            );
            let rec = e.emission(r.header("x-request-id").unwrap());
            let t = u64s(&rec["emit_ns"]);
            ttfts.push((t[0] - rec["recv_ns"].as_u64().unwrap()) as f64 / 1e6);
            itls.push((t[10] - t[0]) as f64 / 10.0 / 1e6);
        }
        let (ttft, itl) = (median(ttfts), median(itls));
        let want_ttft = 20.0 + n_prompt / 10.0; // ms
        assert!(
            (ttft - want_ttft).abs() < 1.0,
            "ttft {ttft} want {want_ttft}"
        );
        let want_itl = 5.0 * (1.0 + 0.5 * n_prompt / 1000.0);
        assert!(
            (itl - want_itl).abs() / want_itl < 0.02,
            "itl {itl} want {want_itl}"
        );

        let e = Engine::start(&[
            "model = \"c\"\nttft_ms = 10\ndecode_tok_s = 100\nconcurrency_slowdown = 0.5\n",
        ]);
        let port = e.port;
        let hs: Vec<_> = (0..2)
            .map(|i| {
                std::thread::spawn(move || {
                    request(
                        port,
                        "POST",
                        "/v1/chat/completions",
                        Some(&chat("c", &format!("{i}"), 11, true)),
                    )
                })
            })
            .collect();
        for h in hs {
            let r = h.join().unwrap();
            let rec = e.emission(r.header("x-request-id").unwrap());
            let t = u64s(&rec["emit_ns"]);
            let itl = (t[10] - t[0]) as f64 / 10.0 / 1e6;
            // Two running requests: 10 ms × (1 + 0.5) while they overlap (they overlap almost fully).
            assert!(itl > 13.0 && itl < 15.5, "itl {itl}");
        }
    }

    #[test]
    fn tokens_per_chunk_and_speculative_chunks() {
        let _g = exclusive();
        let e = Engine::start(&[
            "model = \"k\"\nttft_ms = 10\ndecode_tok_s = 400\ntokens_per_chunk = 4\n",
        ]);
        let r = e.post("/v1/chat/completions", chat("k", "x", 41, true));
        let ev = r.json_events();
        let contents: Vec<String> = ev
            .iter()
            .filter_map(|c| {
                c["choices"][0]["delta"]["content"]
                    .as_str()
                    .map(String::from)
            })
            .collect();
        let sizes: Vec<u64> = contents.iter().map(|c| tokens(&e, c)).collect();
        assert_eq!(sizes, [vec![1], vec![4; 10]].concat());
        let rec = e.emission(r.header("x-request-id").unwrap());
        let t = u64s(&rec["emit_ns"]);
        let gap = median(
            t[..11]
                .windows(2)
                .map(|w| (w[1] - w[0]) as f64 / 1e6)
                .collect(),
        );
        assert!(
            (gap - 10.0).abs() < 0.3,
            "chunk gap p50 {gap} ms (4 tokens at 400/s)"
        );

        // Speculative decoding: 1 + accepted tokens per chunk, constant step time E/decode_tok_s,
        // delivered rate ≈ decode_tok_s.
        let e = Engine::start(&[
            "model = \"s\"\nttft_ms = 5\ndecode_tok_s = 500\nspec_acceptance = 0.6\nspec_draft_tokens = 3\n",
        ]);
        let r = e.post("/v1/chat/completions", chat("s", "x", 400, true));
        let ev = r.json_events();
        let sizes: Vec<u64> = ev
            .iter()
            .filter_map(|c| c["choices"][0]["delta"]["content"].as_str())
            .map(|c| tokens(&e, c))
            .collect();
        assert_eq!(sizes.iter().sum::<u64>(), 400);
        assert_eq!(sizes[0], 1);
        assert!(sizes[1..].iter().all(|&s| (1..=4).contains(&s)));
        assert!(sizes.contains(&1) && sizes.contains(&4));
        let e_tok = 1.0 + 0.6 + 0.36 + 0.216;
        let mean = (400.0 - 1.0) / (sizes.len() - 1) as f64;
        assert!(
            (mean - e_tok).abs() < 0.25,
            "mean tokens/step {mean} vs {e_tok}"
        );
        let rec = e.emission(r.header("x-request-id").unwrap());
        let t = u64s(&rec["emit_ns"]);
        let steps = sizes.len() - 1;
        let step_ms = (t[steps] - t[0]) as f64 / steps as f64 / 1e6;
        assert!(
            (step_ms - e_tok / 500.0 * 1e3).abs() < 0.1,
            "step {step_ms} ms"
        );
        let m = String::from_utf8(e.req("GET", "/metrics", None).body).unwrap();
        let val = |name: &str| -> f64 {
            m.lines()
                .find(|l| l.starts_with(name))
                .and_then(|l| l.rsplit(' ').next())
                .unwrap()
                .parse()
                .unwrap()
        };
        let draft = val("vllm:spec_decode_num_draft_tokens_total");
        let acc = val("vllm:spec_decode_num_accepted_tokens_total");
        assert_eq!(draft, 3.0 * steps as f64);
        assert!(acc >= (400 - 1 - steps) as f64);
    }

    #[test]
    fn reasoning_precedes_content_without_moving_ttft() {
        let _g = exclusive();
        let e = Engine::start(&[
            "model = \"r\"\nttft_ms = 60\ndecode_tok_s = 200\nreasoning_tokens = 8\n",
        ]);
        let r = e.post(
            "/v1/chat/completions",
            chat("r", "Reply with exactly: yes", 50, true),
        );
        let ev = r.json_events();
        assert_eq!(ev[0]["choices"][0]["delta"]["role"], "assistant");
        let reasoning: String = ev
            .iter()
            .filter_map(|c| c["choices"][0]["delta"]["reasoning_content"].as_str())
            .collect();
        let content: String = ev
            .iter()
            .filter_map(|c| c["choices"][0]["delta"]["content"].as_str())
            .collect();
        assert_eq!(tokens(&e, &reasoning), 8);
        assert_eq!(content, "yes");
        let usage = &ev.last().unwrap()["usage"];
        assert_eq!(usage["completion_tokens"], 9);
        assert_eq!(usage["completion_tokens_details"]["reasoning_tokens"], 8);
        let (mut ttfts, mut ttfos) = (Vec::new(), Vec::new());
        for i in 0..3 {
            let id = if i == 0 {
                r.header("x-request-id").unwrap().to_string()
            } else {
                let again = e.post(
                    "/v1/chat/completions",
                    chat("r", "Reply with exactly: yes", 50, true),
                );
                again.header("x-request-id").unwrap().to_string()
            };
            let rec = e.emission(&id);
            let kinds = strs(&rec["kinds"]);
            let t = u64s(&rec["emit_ns"]);
            let recv = rec["recv_ns"].as_u64().unwrap();
            let first_content = kinds.iter().position(|k| k == "content").unwrap();
            assert_eq!(first_content, 8);
            assert!(kinds[..8].iter().all(|k| k == "reasoning"));
            ttfts.push((t[first_content] - recv) as f64 / 1e6);
            ttfos.push((t[0] - recv) as f64 / 1e6);
        }
        let (ttft, ttfo) = (median(ttfts), median(ttfos));
        assert!((ttft - 60.0).abs() < 1.0, "ttft {ttft}");
        assert!((ttfo - 20.0).abs() < 1.0, "ttfo {ttfo} (60 − 8 × 5 ms)");
        // Budget runs out during reasoning: no content, finish length.
        let v = e
            .post(
                "/v1/chat/completions",
                chat("r", "Reply with exactly: yes", 5, false),
            )
            .json();
        assert_eq!(v["choices"][0]["finish_reason"], "length");
        assert_eq!(v["choices"][0]["message"]["content"], "");
        assert_eq!(
            v["usage"]["completion_tokens_details"]["reasoning_tokens"],
            5
        );
    }
}
