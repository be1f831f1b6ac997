//! `workload::prompt::build` over real HTTP, against a small in-process OpenAI-compatible fake:
//! llama.cpp and vLLM `/tokenize` shapes, no `/tokenize`, a local tokenizer.json, and the errors.

use bakeoff::client::Target;
use bakeoff::workload::prompt::{build, PromptSpec, Strategy};
use bakeoff::workload::Endpoint;
use serde_json::{json, Value};
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

/// The fake's template: this many tokens around a chat message.
const CHAT_OVERHEAD: u64 = 12;

#[derive(Clone, Copy, PartialEq)]
enum Tokenize {
    /// llama.cpp: `{"tokens":[...]}` from `content`.
    Llama,
    /// vLLM: `{"count":n}` from `prompt`.
    Vllm,
    /// No such endpoint (404).
    Missing,
    /// 401 (a gateway with a key).
    Unauthorized,
}

#[derive(Clone, Copy)]
struct Behaviour {
    tokenize: Tokenize,
    /// Completions over this many prompt tokens get HTTP 400 (the context limit).
    context: u64,
    /// Leave `usage` out of completion replies.
    no_usage: bool,
    /// Require `Authorization: Bearer <this>`.
    key: Option<&'static str>,
    /// Answer `stream: false` with HTTP 400 (an endpoint that always streams).
    stream_only: bool,
}

const DEFAULT: Behaviour = Behaviour {
    tokenize: Tokenize::Llama,
    context: 100_000,
    no_usage: false,
    key: None,
    stream_only: false,
};

/// The fake tokenizer: one token per whitespace-separated piece.
fn count(text: &str) -> u64 {
    text.split_whitespace().count() as u64
}

struct Fake {
    url: String,
    /// (path, request body) of every request, in order.
    log: Arc<Mutex<Vec<(String, Value)>>>,
}

async fn serve(b: Behaviour) -> Fake {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let log = Arc::new(Mutex::new(Vec::new()));
    let log2 = log.clone();
    tokio::spawn(async move {
        loop {
            let Ok((mut sock, _)) = listener.accept().await else {
                return;
            };
            let log = log2.clone();
            tokio::spawn(async move {
                let mut buf = Vec::new();
                let mut chunk = [0u8; 65536];
                let (head_end, len) = loop {
                    let n = sock.read(&mut chunk).await.unwrap_or(0);
                    if n == 0 {
                        return;
                    }
                    buf.extend_from_slice(&chunk[..n]);
                    if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
                        let head = String::from_utf8_lossy(&buf[..i]).to_ascii_lowercase();
                        let len = head
                            .lines()
                            .find_map(|l| l.strip_prefix("content-length:"))
                            .map_or(0, |v| v.trim().parse::<usize>().unwrap());
                        break (i + 4, len);
                    }
                };
                while buf.len() < head_end + len {
                    let n = sock.read(&mut chunk).await.unwrap_or(0);
                    if n == 0 {
                        return;
                    }
                    buf.extend_from_slice(&chunk[..n]);
                }
                let head = String::from_utf8_lossy(&buf[..head_end]).to_string();
                let path = head.split(' ').nth(1).unwrap_or("").to_string();
                let body: Value =
                    serde_json::from_slice(&buf[head_end..head_end + len]).unwrap_or(Value::Null);
                log.lock().unwrap().push((path.clone(), body.clone()));
                let authorized = b
                    .key
                    .is_none_or(|k| head.contains(&format!("Authorization: Bearer {k}\r\n")));
                if path.ends_with("completions") && body["stream"] == true && authorized {
                    let _ = sock.write_all(streamed(b, &path, &body).as_bytes()).await;
                    return;
                }
                let (status, reply) = respond(b, &path, &body, authorized);
                let text = reply.to_string();
                let resp = format!(
                    "HTTP/1.1 {status} X\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{text}",
                    text.len()
                );
                let _ = sock.write_all(resp.as_bytes()).await;
            });
        }
    });
    Fake { url, log }
}

/// `usage.prompt_tokens` the fake reports for a completion request.
fn prompt_count(path: &str, body: &Value) -> u64 {
    if path == "/v1/chat/completions" {
        count(body["messages"][0]["content"].as_str().unwrap()) + CHAT_OVERHEAD
    } else {
        count(body["prompt"].as_str().unwrap())
    }
}

/// A streamed completion: one content chunk, the finish, the usage chunk when asked (and the
/// fake reports usage), `[DONE]`; over the context limit, HTTP 400.
fn streamed(b: Behaviour, path: &str, body: &Value) -> String {
    let prompt_tokens = prompt_count(path, body);
    if prompt_tokens > b.context {
        let e = json!({"error": {"type": "exceed_context_size_error", "n_prompt_tokens": prompt_tokens}}).to_string();
        return format!(
            "HTTP/1.1 400 X\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{e}",
            e.len()
        );
    }
    let chat = path == "/v1/chat/completions";
    let choice = |delta: &str, finish: Value| {
        if chat {
            json!({"index": 0, "delta": {"content": delta}, "finish_reason": finish})
        } else {
            json!({"index": 0, "text": delta, "finish_reason": finish})
        }
    };
    let mut events = vec![
        json!({"id": "s1", "choices": [choice("x", Value::Null)]}),
        json!({"id": "s1", "choices": [choice("", json!("length"))]}),
    ];
    if body["stream_options"]["include_usage"] == true && !b.no_usage {
        events.push(json!({"id": "s1", "choices": [], "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": 1, "total_tokens": prompt_tokens + 1}}));
    }
    let mut text: String = events.iter().map(|e| format!("data: {e}\n\n")).collect();
    text.push_str("data: [DONE]\n\n");
    format!(
        "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{text}",
        text.len()
    )
}

fn respond(b: Behaviour, path: &str, body: &Value, authorized: bool) -> (u16, Value) {
    let unauthorized =
        json!({"error": {"message": "Invalid API Key", "type": "authentication_error"}});
    match path {
        "/tokenize" => match b.tokenize {
            Tokenize::Missing => (404, json!({"error": {"message": "File Not Found"}})),
            Tokenize::Unauthorized => (401, unauthorized),
            Tokenize::Llama => {
                let n = count(body["content"].as_str().unwrap());
                (200, json!({"tokens": vec![7; n as usize]}))
            }
            Tokenize::Vllm => {
                assert_eq!(body["add_special_tokens"], false);
                let n = count(body["prompt"].as_str().unwrap());
                (200, json!({"count": n, "max_model_len": 8192}))
            }
        },
        "/v1/models" => (
            200,
            json!({"object": "list", "data": [{"id": "fake-model"}]}),
        ),
        "/v1/chat/completions" | "/v1/completions" if !authorized => (401, unauthorized),
        "/v1/chat/completions" | "/v1/completions" if b.stream_only => (
            400,
            json!({"error": {"message": "only stream: true is supported", "type": "invalid_request_error"}}),
        ),
        "/v1/chat/completions" | "/v1/completions" => {
            assert_eq!(body["max_tokens"], 1);
            assert_eq!(body["stream"], false);
            let prompt_tokens = prompt_count(path, body);
            if prompt_tokens > b.context {
                return (
                    400,
                    json!({"error": {"type": "exceed_context_size_error", "n_prompt_tokens": prompt_tokens}}),
                );
            }
            let mut v = json!({"choices": [{"index": 0, "message": {"role": "assistant", "content": "x"}}]});
            if !b.no_usage {
                v["usage"] = json!({"prompt_tokens": prompt_tokens, "completion_tokens": 1});
            }
            (200, v)
        }
        _ => (404, json!({"error": {"message": "File Not Found"}})),
    }
}

async fn build_on(
    fake: &Fake,
    endpoint: Endpoint,
    tokens: u64,
    tokenizer: Option<&Path>,
    api_key: Option<&str>,
) -> Result<bakeoff::workload::prompt::MatchedPrompt, String> {
    build_with_extra(fake, endpoint, tokens, tokenizer, api_key, None).await
}

async fn build_with_extra(
    fake: &Fake,
    endpoint: Endpoint,
    tokens: u64,
    tokenizer: Option<&Path>,
    api_key: Option<&str>,
    extra_body: Option<&serde_json::Map<String, Value>>,
) -> Result<bakeoff::workload::prompt::MatchedPrompt, String> {
    let target = Target::parse(&fake.url).unwrap();
    let spec = PromptSpec {
        target: &target,
        model: "fake-model",
        endpoint,
        tokens,
        tokenizer,
        api_key,
        nonce: true,
        timeout: Duration::from_secs(10),
        extra_body,
    };
    let fut = build(&spec);
    assert_send(&fut);
    fut.await
}

/// `build` can run inside `tokio::spawn`.
fn assert_send<T: Send>(_: &T) {}

impl Fake {
    fn paths(&self) -> Vec<String> {
        self.log
            .lock()
            .unwrap()
            .iter()
            .map(|(p, _)| p.clone())
            .collect()
    }
    fn count_of(&self, path: &str) -> usize {
        self.paths().iter().filter(|p| *p == path).count()
    }
}

#[tokio::test]
async fn llama_cpp_tokenize_shape() {
    let fake = serve(DEFAULT).await;
    let p = build_on(&fake, Endpoint::Chat, 500, None, None)
        .await
        .unwrap();
    assert_eq!(p.strategy, Strategy::ServerTokenize);
    assert_eq!(p.verified_prompt_tokens, 500);
    assert_eq!(p.template_overhead, CHAT_OVERHEAD as i64);
    assert_eq!(count(&p.text(31)) + CHAT_OVERHEAD, 500);
    assert_eq!(fake.count_of("/v1/chat/completions"), 2);
    assert_eq!(fake.count_of("/tokenize") as u64, p.tokenize_requests);
    // One body carries both the llama.cpp and the vLLM keys.
    let log = fake.log.lock().unwrap();
    let (_, t) = log.iter().find(|(p, _)| p == "/tokenize").unwrap();
    assert_eq!(t["add_special"], false);
    assert_eq!(t["add_special_tokens"], false);
    assert_eq!(t["model"], "fake-model");
    assert_eq!(t["content"], t["prompt"]);
    let (_, c) = log
        .iter()
        .find(|(p, _)| p == "/v1/chat/completions")
        .unwrap();
    assert_eq!(c["temperature"], 0);
    assert_eq!(c["model"], "fake-model");
}

#[tokio::test]
async fn vllm_tokenize_shape_on_completions() {
    let fake = serve(Behaviour {
        tokenize: Tokenize::Vllm,
        ..DEFAULT
    })
    .await;
    let p = build_on(&fake, Endpoint::Completions, 777, None, None)
        .await
        .unwrap();
    assert_eq!(p.strategy, Strategy::ServerTokenize);
    assert_eq!(p.template_overhead, 0);
    assert_eq!(count(&p.text(5)), 777);
    assert_eq!(fake.count_of("/v1/completions"), 2);
}

#[tokio::test]
async fn without_tokenize_it_calibrates_against_usage() {
    let fake = serve(Behaviour {
        tokenize: Tokenize::Missing,
        ..DEFAULT
    })
    .await;
    let p = build_on(&fake, Endpoint::Chat, 1000, None, None)
        .await
        .unwrap();
    assert_eq!(p.strategy, Strategy::UsageCalibration);
    assert_eq!(p.verified_prompt_tokens, 1000);
    assert_eq!(p.template_overhead, CHAT_OVERHEAD as i64);
    assert_eq!(count(&p.text(123_456)) + CHAT_OVERHEAD, 1000);
    assert_eq!(fake.count_of("/tokenize"), 1, "probed once");
    let n = fake.count_of("/v1/chat/completions") as u64;
    assert_eq!(n, p.sizing_requests);
    assert!(n <= 12, "{n} requests");
}

#[tokio::test]
async fn calibration_requests_carry_the_extra_body() {
    // `--extra-body` can change the rendered prompt (chat_template_kwargs): the requests that
    // measure the template must carry it, while sizing keeps its own max_tokens and stream.
    let fake = serve(DEFAULT).await;
    let extra = json!({"chat_template_kwargs": {"enable_thinking": false}, "max_tokens": 99, "stream": true});
    let p = build_with_extra(
        &fake,
        Endpoint::Chat,
        400,
        None,
        None,
        Some(extra.as_object().unwrap()),
    )
    .await
    .unwrap();
    assert_eq!(p.verified_prompt_tokens, 400);
    let log = fake.log.lock().unwrap().clone();
    let chats: Vec<&Value> = log
        .iter()
        .filter(|(p, _)| p == "/v1/chat/completions")
        .map(|(_, b)| b)
        .collect();
    assert!(!chats.is_empty());
    for b in chats {
        assert_eq!(b["chat_template_kwargs"]["enable_thinking"], false, "{b}");
        assert_eq!(b["max_tokens"], 1, "{b}");
        assert_eq!(b["stream"], false, "{b}");
    }
}

#[tokio::test]
async fn an_explicit_tokenizer_json_is_used_instead_of_tokenize() {
    // A word-level tokenizer that splits on whitespace: the same count as the fake server.
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("tokenizer.json");
    let tj = json!({
        "version": "1.0", "truncation": null, "padding": null, "added_tokens": [],
        "normalizer": null, "pre_tokenizer": {"type": "WhitespaceSplit"},
        "post_processor": null, "decoder": null,
        "model": {"type": "WordLevel", "vocab": {"[UNK]": 0, "the": 1}, "unk_token": "[UNK]"}
    });
    std::fs::write(&path, tj.to_string()).unwrap();
    let fake = serve(DEFAULT).await;
    let p = build_on(&fake, Endpoint::Chat, 300, Some(&path), None)
        .await
        .unwrap();
    assert_eq!(p.strategy, Strategy::LocalTokenizer);
    assert_eq!(p.verified_prompt_tokens, 300);
    assert_eq!(fake.count_of("/tokenize"), 0);
    assert_eq!(fake.count_of("/v1/chat/completions"), 2);

    let missing = dir.path().join("nope.json");
    let e = build_on(&fake, Endpoint::Chat, 300, Some(&missing), None)
        .await
        .unwrap_err();
    assert!(e.contains("--tokenizer") && e.contains("nope.json"), "{e}");
}

#[tokio::test]
async fn the_api_key_is_sent_and_a_refusal_names_it() {
    let fake = serve(Behaviour {
        key: Some("sekrit"),
        ..DEFAULT
    })
    .await;
    let p = build_on(&fake, Endpoint::Chat, 200, None, Some("sekrit"))
        .await
        .unwrap();
    assert_eq!(p.verified_prompt_tokens, 200);
    let e = build_on(&fake, Endpoint::Chat, 200, None, Some("wrong"))
        .await
        .unwrap_err();
    assert!(e.contains("401") && e.contains("--api-key"), "{e}");
    assert!(
        !e.contains("wrong"),
        "the key never appears in messages: {e}"
    );

    let fake = serve(Behaviour {
        tokenize: Tokenize::Unauthorized,
        ..DEFAULT
    })
    .await;
    let e = build_on(&fake, Endpoint::Chat, 200, None, None)
        .await
        .unwrap_err();
    assert!(e.contains("/tokenize") && e.contains("--api-key"), "{e}");
}

#[tokio::test]
async fn endpoint_errors_are_one_clear_line() {
    let fake = serve(Behaviour {
        context: 400,
        ..DEFAULT
    })
    .await;
    let e = build_on(&fake, Endpoint::Chat, 1000, None, None)
        .await
        .unwrap_err();
    assert!(e.contains("HTTP 400") && e.contains("context"), "{e}");
    assert!(!e.contains('\n'), "{e}");

    let fake = serve(Behaviour {
        no_usage: true,
        ..DEFAULT
    })
    .await;
    let e = build_on(&fake, Endpoint::Chat, 1000, None, None)
        .await
        .unwrap_err();
    assert!(e.contains("usage.prompt_tokens"), "{e}");

    let e = build_on(&fake, Endpoint::Chat, 2_000_000, None, None)
        .await
        .unwrap_err();
    assert!(e.contains("--prompt-tokens"), "{e}");

    // Nothing listening.
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", l.local_addr().unwrap());
    drop(l);
    let gone = Fake {
        url,
        log: Arc::default(),
    };
    let e = build_on(&gone, Endpoint::Chat, 1000, None, None)
        .await
        .unwrap_err();
    assert!(e.contains("/tokenize"), "{e}");
}

#[tokio::test]
async fn a_stream_only_endpoint_is_sized_from_the_usage_chunk() {
    for tokenize in [Tokenize::Missing, Tokenize::Llama, Tokenize::Vllm] {
        for endpoint in [Endpoint::Chat, Endpoint::Completions] {
            let fake = serve(Behaviour {
                tokenize,
                stream_only: true,
                ..DEFAULT
            })
            .await;
            let p = build_on(&fake, endpoint, 300, None, None).await.unwrap();
            let overhead = if endpoint == Endpoint::Chat {
                CHAT_OVERHEAD
            } else {
                0
            };
            assert_eq!(p.verified_prompt_tokens, 300);
            for i in [0, 7, 97_999_999] {
                assert_eq!(count(&p.text(i)) + overhead, 300);
            }
            let strategy = match tokenize {
                Tokenize::Missing => Strategy::UsageCalibration,
                _ => Strategy::ServerTokenize,
            };
            assert_eq!(p.strategy, strategy);
            assert!(
                p.notes
                    .iter()
                    .any(|n| n.contains("streamed") && n.contains("HTTP 400")),
                "{:?}",
                p.notes
            );
            // One refused stream: false, then every sizing request streamed with include_usage.
            let log = fake.log.lock().unwrap();
            let sizing: Vec<&Value> = log
                .iter()
                .filter(|(p, _)| p.ends_with("completions"))
                .map(|(_, b)| b)
                .collect();
            assert_eq!(sizing[0]["stream"], false);
            assert!(sizing[1..].iter().all(|b| b["stream"] == true
                && b["stream_options"]["include_usage"] == true
                && b["max_tokens"] == 1));
        }
    }
}

#[tokio::test]
async fn a_stream_only_endpoint_without_usage_is_named() {
    let fake = serve(Behaviour {
        tokenize: Tokenize::Missing,
        stream_only: true,
        no_usage: true,
        ..DEFAULT
    })
    .await;
    let e = build_on(&fake, Endpoint::Chat, 300, None, None)
        .await
        .unwrap_err();
    assert!(
        e.contains("HTTP 400 to stream: false")
            && e.contains("no usage.prompt_tokens although stream_options.include_usage was sent")
            && e.contains("/tokenize")
            && e.contains("--tokenizer"),
        "{e}"
    );
    assert!(!e.contains('\n'), "{e}");
    // Over the context limit, the streamed request's 400 names the context.
    let fake = serve(Behaviour {
        tokenize: Tokenize::Missing,
        stream_only: true,
        context: 400,
        ..DEFAULT
    })
    .await;
    let e = build_on(&fake, Endpoint::Chat, 1000, None, None)
        .await
        .unwrap_err();
    assert!(e.contains("HTTP 400") && e.contains("context"), "{e}");
}

#[tokio::test]
async fn bench_against_a_stream_only_endpoint_sends_exactly_sized_prompts() {
    use bakeoff::bench::{run_one, BenchSpec, LoadShape, Quiet};
    let fake = serve(Behaviour {
        tokenize: Tokenize::Missing,
        stream_only: true,
        ..DEFAULT
    })
    .await;
    let spec = BenchSpec {
        prompt_tokens: 256,
        max_tokens: 1,
        timeout: 30.0,
        stall_timeout: 30.0,
        shape: LoadShape {
            concurrency: vec![2],
            requests: Some(6),
            ..Default::default()
        },
        ..BenchSpec::new(bakeoff::client::Target::parse(&fake.url).unwrap())
    };
    let (_keep, never) = tokio::sync::watch::channel(false);
    let r = run_one(&spec, never, &Quiet).await.unwrap();
    assert_eq!(r.stats.ok, 6, "{:?}", r.stats.failures_by_class);
    let p = &r.stats.metrics["prompt_tokens"];
    assert_eq!((p.min, p.max), (256.0, 256.0));
    assert_eq!(r.stats.prompt_token_mismatches, 0);
    assert_eq!(r.prompt["strategy"], "usage-calibration");
    assert_eq!(r.prompt["verified_prompt_tokens"], 256);
}
