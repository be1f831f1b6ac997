//! Matched prompts against a real llama.cpp server running SmolLM2-135M-Instruct on the CPU: each
//! sizing strategy must give a 1,000-token chat prompt that the server reports as exactly 1,000
//! `usage.prompt_tokens`, whatever the request number in its nonce.
//! The engines are installed by scripts/engine-setup.sh (see tests/support/real_engine.rs).

use crate::support::real_engine;

use bakeoff::client::control::post_json;
use bakeoff::client::Target;
use bakeoff::workload::prompt::{
    build, build_with, Backend, HttpBackend, MatchedPrompt, PromptSpec, Sizing, Strategy,
};
use bakeoff::workload::Endpoint;
use real_engine::{RealEngine, RealServer, ServerOpts};
use serde_json::json;
use std::path::Path;
use std::time::Duration;

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

const TIMEOUT: Duration = Duration::from_secs(120);
const MODEL: &str = "smollm2-135m";

/// One real server at a time in this binary: two on 2 cores would slow each other down.
use crate::support::exclusive as serial;

/// The real server with its `/tokenize` hidden: forces calibration against `usage.prompt_tokens`.
struct NoTokenize<'a>(HttpBackend<'a>);

impl Backend for NoTokenize<'_> {
    async fn tokenize(&mut self, _text: &str) -> Result<Option<u64>, String> {
        Ok(None)
    }
    async fn prompt_tokens(&mut self, text: &str) -> Result<u64, String> {
        self.0.prompt_tokens(text).await
    }
}

async fn sized(
    target: &Target,
    endpoint: Endpoint,
    tokens: u64,
    strategy: Strategy,
    tokenizer: &Path,
) -> MatchedPrompt {
    let p = match strategy {
        Strategy::ServerTokenize | Strategy::LocalTokenizer => {
            let spec = PromptSpec {
                target,
                model: MODEL,
                endpoint,
                tokens,
                tokenizer: (strategy == Strategy::LocalTokenizer).then_some(tokenizer),
                api_key: None,
                nonce: true,
                timeout: TIMEOUT,
                extra_body: None,
            };
            build(&spec).await
        }
        Strategy::UsageCalibration => {
            let mut backend = NoTokenize(HttpBackend {
                target,
                model: MODEL,
                endpoint,
                api_key: None,
                timeout: TIMEOUT,
                extra_body: None,
                mode: Default::default(),
                retried: Vec::new(),
            });
            let sizing = Sizing {
                endpoint,
                tokens,
                nonce: true,
            };
            build_with(&mut backend, None, sizing).await
        }
    };
    let p = p.unwrap_or_else(|e| panic!("{strategy:?} on {endpoint:?}: {e}"));
    assert_eq!(p.strategy, strategy);
    assert_eq!(p.target_tokens, tokens);
    assert_eq!(p.verified_prompt_tokens, tokens);
    assert_eq!(p.content_tokens as i64 + p.template_overhead, tokens as i64);
    p
}

/// `usage.prompt_tokens` the server reports for request `index` of the prompt, sent as an ordinary
/// request with the prompt cache off.
async fn reported(target: &Target, p: &MatchedPrompt, index: u64) -> u64 {
    let mut body = serde_json::Map::new();
    body.insert("model".into(), json!(MODEL));
    body.insert("max_tokens".into(), json!(2));
    body.insert("temperature".into(), json!(0));
    body.insert("cache_prompt".into(), json!(false));
    p.insert_input(&mut body, index);
    body.insert("stream".into(), json!(false));
    let (status, v) = post_json(target, p.endpoint.path(), &body.into(), None, TIMEOUT)
        .await
        .unwrap_or_else(|e| panic!("{}", e.message));
    assert_eq!(status, 200, "{v}");
    v["usage"]["prompt_tokens"]
        .as_u64()
        .unwrap_or_else(|| panic!("no usage.prompt_tokens in {v}"))
}

/// The acceptance check: a 1,000-token chat prompt, each strategy, several request numbers.
#[test]
fn xllamacpp_reports_exactly_1000_prompt_tokens_for_each_strategy() {
    let _g = serial();
    runtime().block_on(async {
        let server = RealServer::start(RealEngine::XLlamaCpp, ServerOpts::default());
        let tokenizer = real_engine::smollm2_tokenizer_path();
        let target = Target::parse(&server.base_url).unwrap();
        let mut overheads = Vec::new();
        for strategy in [
            Strategy::ServerTokenize,
            Strategy::LocalTokenizer,
            Strategy::UsageCalibration,
        ] {
            let p = sized(&target, Endpoint::Chat, 1000, strategy, &tokenizer).await;
            eprintln!("{}", serde_json::to_string(&p).unwrap());
            assert!(p.text(0).starts_with("[bakeoff 00000000]\n"));
            assert_ne!(p.text(0), p.text(1));
            match strategy {
                Strategy::UsageCalibration => assert!(p.sizing_requests <= 12, "{p:?}"),
                _ => assert!(p.sizing_requests <= 3, "{p:?}"),
            }
            for index in [0, 987_654] {
                assert_eq!(
                    reported(&target, &p, index).await,
                    1000,
                    "{strategy:?}, request {index}"
                );
            }
            // The server's own tokenizer agrees with the recorded content size, for two numbers.
            for index in [3, 55_555_555] {
                assert_eq!(
                    server.tokenize(&p.text(index)).len() as u64,
                    p.content_tokens,
                    "{strategy:?}, request {index}"
                );
            }
            overheads.push(p.template_overhead);
        }
        // The chat template costs the same whichever way it was measured.
        assert!(
            overheads.iter().all(|&o| o == overheads[0]),
            "{overheads:?}"
        );
        assert!(overheads[0] > 0, "ChatML adds role markers");
    });
}

/// A streamed request with `include_usage` reports the same count as the sizing did.
#[test]
fn llama_server_streams_the_matched_count_and_completions_have_no_template() {
    let _g = serial();
    runtime().block_on(async {
        let server = RealServer::start(RealEngine::LlamaServer, ServerOpts::default());
        let tokenizer = real_engine::smollm2_tokenizer_path();
        let target = Target::parse(&server.base_url).unwrap();

        let p = sized(
            &target,
            Endpoint::Chat,
            1000,
            Strategy::ServerTokenize,
            &tokenizer,
        )
        .await;
        let (status, sse) = server.post_json(
            "/v1/chat/completions",
            &json!({
                "model": MODEL,
                "messages": p.messages_json(424_242),
                "max_tokens": 2,
                "temperature": 0,
                "stream": true,
                "stream_options": {"include_usage": true},
                "cache_prompt": false,
            }),
        );
        assert_eq!(status, 200, "{sse}");
        let usage = sse
            .lines()
            .filter_map(|l| l.strip_prefix("data: "))
            .filter_map(|d| serde_json::from_str::<serde_json::Value>(d).ok())
            .find_map(|v| v["usage"]["prompt_tokens"].as_u64())
            .unwrap_or_else(|| panic!("no usage chunk in {sse}"));
        assert_eq!(usage, 1000);

        // Raw completions: no template; SmolLM2 adds no BOS, so the overhead is 0.
        let c = sized(
            &target,
            Endpoint::Completions,
            1000,
            Strategy::ServerTokenize,
            &tokenizer,
        )
        .await;
        assert_eq!(c.template_overhead, 0);
        for index in [0, 7] {
            assert_eq!(reported(&target, &c, index).await, 1000);
        }
    });
}
