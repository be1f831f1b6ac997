//! `bakeoff bench --dataset` against a real llama.cpp server (SmolLM2-135M on the CPU): every
//! request's expected prompt tokens, counted before it is sent (the server's /tokenize plus the
//! measured chat template), equal the server's usage.

use crate::support::real_engine;
use crate::support::reference;

use real_engine::{RealEngine, RealServer, ServerOpts};
use reference::{bench, text};
use std::path::PathBuf;

fn example(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("examples/datasets")
        .join(name)
}

fn run(
    server: &RealServer,
    dir: &std::path::Path,
    name: &str,
    args: &[&str],
) -> (serde_json::Value, Vec<serde_json::Value>) {
    let out = dir.join(format!("{name}.json"));
    let jl = dir.join(format!("{name}.jsonl"));
    let mut a = args.to_vec();
    let jls = jl.to_str().unwrap().to_string();
    a.extend([
        "--requests-jsonl",
        &jls,
        "--extra-body",
        "{\"cache_prompt\": false}",
    ]);
    let (o, v) = bench(&server.base_url, &a, &out);
    assert!(o.status.success(), "{}", text(&o));
    let lines = std::fs::read_to_string(&jl)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    (v.unwrap(), lines)
}

fn check_exact(v: &serde_json::Value, reqs: &[serde_json::Value], n: usize) {
    assert_eq!(v["failed"], 0, "{v}");
    assert_eq!(v["prompt_token_mismatches"], 0, "{v}");
    assert_eq!(reqs.len(), n);
    for l in reqs {
        let exp = l["expected_prompt_tokens"]
            .as_u64()
            .unwrap_or_else(|| panic!("no expected count: {l}"));
        assert_eq!(Some(exp), l["usage"]["prompt_tokens"].as_u64(), "{l}");
        assert_eq!(
            l["sent_max_tokens"].as_u64(),
            l["usage"]["completion_tokens"].as_u64(),
            "{l}"
        );
    }
}

#[test]
fn llama_server_dataset_and_synthetic_prompt_tokens_equal_usage() {
    let _g = reference::serial();
    let server = RealServer::start(RealEngine::LlamaServer, ServerOpts::default());
    let dir = tempfile::tempdir().unwrap();
    // JSONL: prompt items and system+user chat items, each its own length.
    let data = example("sample.jsonl");
    let (v, reqs) = run(
        &server,
        dir.path(),
        "jsonl",
        &[
            "--dataset",
            data.to_str().unwrap(),
            "--dataset-sample",
            "8",
            "--seed",
            "1",
            "--dataset-max-output-tokens",
            "32",
            "--requests",
            "8",
            "--concurrency",
            "2",
            "--ignore-eos",
            "--max-tokens",
            "16",
        ],
    );
    check_exact(&v, &reqs, 8);
    assert_eq!(v["prompt"]["counter"], "server-tokenize", "{}", v["prompt"]);
    let distinct: std::collections::BTreeSet<u64> = reqs
        .iter()
        .map(|l| l["usage"]["prompt_tokens"].as_u64().unwrap())
        .collect();
    assert!(distinct.len() >= 4, "{distinct:?}");
    // ShareGPT: the first human turn, output length = the gpt reply's tokens (capped by the filter).
    let data = example("sample-sharegpt.json");
    let (v, reqs) = run(
        &server,
        dir.path(),
        "sharegpt",
        &[
            "--dataset",
            data.to_str().unwrap(),
            "--dataset-sample",
            "4",
            "--dataset-max-output-tokens",
            "60",
            "--requests",
            "4",
            "--ignore-eos",
        ],
    );
    check_exact(&v, &reqs, 4);
    // Synthetic lengths: each drawn length exact.
    let (v, reqs) = run(
        &server,
        dir.path(),
        "synthetic",
        &[
            "--input-tokens-dist",
            "uniform:60:160",
            "--output-tokens-dist",
            "fixed:8",
            "--seed",
            "2",
            "--requests",
            "4",
            "--ignore-eos",
        ],
    );
    check_exact(&v, &reqs, 4);
    eprintln!("synthetic lengths: {}", v["prompt"]["input_tokens"]);
}
