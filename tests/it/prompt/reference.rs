//! Matched prompts against the reference engine (`bakeoff engine`): its `/tokenize` and its
//! `usage.prompt_tokens` through a ChatML template, for both sizing strategies it allows.

use crate::support::reference;

use bakeoff::client::control::post_json;
use bakeoff::client::Target;
use bakeoff::workload::prompt::{
    build, build_with, Backend, HttpBackend, MatchedPrompt, PromptSpec, Sizing, Strategy,
};
use bakeoff::workload::Endpoint;
use serde_json::json;
use std::time::Duration;

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

const PROFILE: &str = "model = \"ref\"\nttft_ms = 1\ndecode_tok_s = 5000\n";
const TIMEOUT: Duration = Duration::from_secs(30);

/// The real endpoint with its `/tokenize` hidden: forces calibration against `usage`.
struct NoTokenize<'a>(HttpBackend<'a>);

impl Backend for NoTokenize<'_> {
    async fn tokenize(&mut self, _text: &str) -> Result<Option<u64>, String> {
        Ok(None)
    }
    async fn prompt_tokens(&mut self, text: &str) -> Result<u64, String> {
        self.0.prompt_tokens(text).await
    }
}

fn http(target: &Target, endpoint: Endpoint) -> HttpBackend<'_> {
    HttpBackend {
        target,
        model: "ref",
        endpoint,
        api_key: None,
        timeout: TIMEOUT,
        extra_body: None,
        mode: Default::default(),
        retried: Vec::new(),
    }
}

/// `usage.prompt_tokens` of a real request carrying request `index` of the prompt.
async fn reported(target: &Target, p: &MatchedPrompt, index: u64) -> u64 {
    let mut body = serde_json::Map::new();
    body.insert("model".into(), json!("ref"));
    body.insert("max_tokens".into(), json!(1));
    body.insert("cache_prompt".into(), json!(false));
    p.insert_input(&mut body, index);
    let (status, v) = post_json(target, p.endpoint.path(), &body.into(), None, TIMEOUT)
        .await
        .unwrap();
    assert_eq!(status, 200, "{v}");
    v["usage"]["prompt_tokens"].as_u64().unwrap()
}

#[test]
fn reference_engine_reports_exactly_the_target() {
    let _g = reference::serial();
    runtime().block_on(async {
        let engine = reference::Engine::start(PROFILE);
        let target = Target::parse(&engine.url).unwrap();
        for endpoint in [Endpoint::Chat, Endpoint::Completions] {
            let spec = PromptSpec {
                target: &target,
                model: "ref",
                endpoint,
                tokens: 1000,
                tokenizer: None,
                api_key: None,
                nonce: true,
                timeout: TIMEOUT,
                extra_body: None,
            };
            let p = build(&spec).await.unwrap();
            assert_eq!(p.strategy, Strategy::ServerTokenize);
            assert_eq!(p.verified_prompt_tokens, 1000);
            assert_eq!(p.sizing_requests, 2);
            if endpoint == Endpoint::Completions {
                assert_eq!(p.template_overhead, 0);
            } else {
                assert!(p.template_overhead > 0);
            }

            let sizing = Sizing {
                endpoint,
                tokens: 1000,
                nonce: true,
            };
            let c = build_with(&mut NoTokenize(http(&target, endpoint)), None, sizing)
                .await
                .unwrap();
            assert_eq!(c.strategy, Strategy::UsageCalibration);
            assert!(c.sizing_requests <= 12, "{} requests", c.sizing_requests);
            assert_eq!(c.template_overhead, p.template_overhead);

            for m in [&p, &c] {
                for i in [0, 1, 4242, 99_999_999] {
                    assert_eq!(
                        reported(&target, m, i).await,
                        1000,
                        "{:?} request {i}",
                        m.strategy
                    );
                }
            }
            // The engine's own count of the content agrees with the record.
            assert_eq!(
                http(&target, endpoint).tokenize(&p.text(7)).await.unwrap(),
                Some(p.content_tokens)
            );
        }
    });
}
