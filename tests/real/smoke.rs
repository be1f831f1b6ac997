//! Both real llama.cpp servers start, answer /health and /v1/models, stop on drop, and the SmolLM2 tokenizer.json
//! that scripts/engine-setup.sh rebuilt from the GGUF gives the same ids as the server's own /tokenize.
//! Needs `scripts/engine-setup.sh` (the tests panic with that command when the engines are missing).

use crate::support::real_engine;

use real_engine::{RealEngine, RealServer, ServerOpts};

fn health_and_models(kind: RealEngine) {
    let _g = crate::support::exclusive(); // one real server at a time
    let server = RealServer::start(kind, ServerOpts::default());
    let (status, body) = server.get("/health");
    assert_eq!(status, 200, "{body}");
    assert!(body.contains("ok"), "{body}");
    let (status, body) = server.get("/v1/models");
    assert_eq!(status, 200, "{body}");
    let v: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(v["data"][0]["id"], "smollm2-135m", "{v}");
    assert_eq!(v["data"][0]["meta"]["n_ctx_train"], 8192, "{v}");
    let pid = server.pid() as libc::pid_t;
    drop(server);
    // SAFETY: signal 0 only checks whether the process exists.
    assert_ne!(
        unsafe { libc::kill(pid, 0) },
        0,
        "{} still running after drop",
        kind.name()
    );
}

#[test]
fn xllamacpp_serves_health_and_models() {
    health_and_models(RealEngine::XLlamaCpp);
}

#[test]
fn llama_server_serves_health_and_models() {
    health_and_models(RealEngine::LlamaServer);
}

#[test]
fn tokenizer_json_matches_server_tokenize() {
    let _g = crate::support::exclusive(); // one real server at a time
    let tok = tokenizers::Tokenizer::from_file(real_engine::smollm2_tokenizer_path()).unwrap();
    let server = RealServer::start(
        RealEngine::XLlamaCpp,
        ServerOpts {
            parallel: 1,
            ..ServerOpts::default()
        },
    );
    for text in [
        "Hello world",
        "1234567890 3.14159 -42 1,000,000",
        "naïve café, 日本語, Привет 👋🏽 🚀",
        "  two spaces\n\n\ttab  \n",
        "fn main() { println!(\"{}\", x); }",
        "<|im_start|>user\nHi!<|im_end|>\n<|im_start|>assistant\n",
    ] {
        let ids = tok.encode(text, false).unwrap().get_ids().to_vec();
        assert_eq!(ids, server.tokenize(text), "token ids differ for {text:?}");
        assert_eq!(tok.decode(&ids, false).unwrap(), text);
    }
}
