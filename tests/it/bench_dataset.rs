//! `bakeoff bench --dataset` and synthetic lengths against the reference engine: every request's
//! expected prompt tokens (counted before it is sent) equal the engine's usage, each line names
//! its source item, and dataset errors name the file, line and field.

use crate::support::reference::{self, bench, text, Engine};
use serde_json::Value;
use std::path::PathBuf;

const FAST: &str =
    "model = \"ref\"\nttft_ms = 1\nprefill_tok_s = 0\ndecode_tok_s = 4000\ncontext_tokens = 8192\n";

fn example(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("examples/datasets")
        .join(name)
}

fn lines(p: &std::path::Path) -> Vec<Value> {
    std::fs::read_to_string(p)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

fn sha256(p: &std::path::Path) -> String {
    use sha2::Digest;
    let d = sha2::Sha256::digest(std::fs::read(p).unwrap());
    d.iter().map(|b| format!("{b:02x}")).collect()
}

/// Runs bench with `args` and --requests-jsonl; the summary and the request lines.
fn run(e: &Engine, args: &[&str]) -> (Value, Vec<Value>) {
    let out = e.path("bench.json");
    let jl = e.path("requests.jsonl");
    let mut a: Vec<&str> = args.to_vec();
    let jls = jl.to_str().unwrap().to_string();
    a.extend(["--requests-jsonl", &jls]);
    let (o, v) = bench(&e.url, &a, &out);
    assert!(o.status.success(), "{}", text(&o));
    (v.expect("summary written"), lines(&jl))
}

/// Every request: expected == reported prompt tokens, and (with --ignore-eos) the output length
/// sent is the one generated.
fn check_exact(v: &Value, reqs: &[Value]) {
    assert_eq!(v["failed"], 0, "{v}");
    assert_eq!(v["prompt_token_mismatches"], 0, "{v}");
    for l in reqs {
        let exp = l["expected_prompt_tokens"]
            .as_u64()
            .unwrap_or_else(|| panic!("{l}"));
        assert_eq!(Some(exp), l["reported_prompt_tokens"].as_u64(), "{l}");
        assert_eq!(Some(exp), l["usage"]["prompt_tokens"].as_u64(), "{l}");
        assert_eq!(
            l["sent_max_tokens"].as_u64(),
            l["usage"]["completion_tokens"].as_u64(),
            "{l}"
        );
    }
}

#[test]
fn a_jsonl_dataset_run_has_exact_prompt_tokens_for_every_request() {
    let _g = reference::serial();
    let e = Engine::start(FAST);
    let data = example("sample.jsonl");
    let (v, reqs) = run(
        &e,
        &[
            "--dataset",
            data.to_str().unwrap(),
            "--requests",
            "40",
            "--concurrency",
            "4",
            "--ignore-eos",
            "--max-tokens",
            "20",
        ],
    );
    check_exact(&v, &reqs);
    assert_eq!(reqs.len(), 40);
    assert_eq!(v["prompt"]["strategy"], "dataset");
    assert_eq!(v["prompt"]["counter"], "server-tokenize");
    assert_eq!(v["prompt"]["dataset"]["sha256"], sha256(&data));
    assert_eq!(v["prompt"]["dataset"]["order"], "file");
    assert_eq!(v["prompt"]["items"].as_array().unwrap().len(), 40);
    // Chat items with a system message have their own measured template overhead.
    assert!(
        v["prompt"]["template_overhead"]["system,user"].is_i64(),
        "{}",
        v["prompt"]
    );
    // Each item once, in file order, each line naming it.
    let mut seen: Vec<u64> = reqs
        .iter()
        .map(|l| l["source"]["item"].as_u64().unwrap())
        .collect();
    seen.sort_unstable();
    assert_eq!(seen, (0..40).collect::<Vec<_>>());
    for l in &reqs {
        assert_eq!(l["source"]["dataset_sha256"], sha256(&data));
        assert!(l["source"]["id"].is_string(), "{l}");
    }
    // Prompt lengths vary, and items without an output length got --max-tokens.
    let p: Vec<u64> = reqs
        .iter()
        .map(|l| l["expected_prompt_tokens"].as_u64().unwrap())
        .collect();
    assert!(
        p.iter().max().unwrap() > &(p.iter().min().unwrap() * 2),
        "{p:?}"
    );
    let lens: std::collections::BTreeSet<u64> = reqs
        .iter()
        .map(|l| l["sent_max_tokens"].as_u64().unwrap())
        .collect();
    assert!(lens.len() >= 4 && lens.contains(&20), "{lens:?}");
    // The nonce line still goes first: the engine saw no cached prefix.
    assert_eq!(v["prompt"]["nonce"], true);
}

#[test]
fn a_sharegpt_sample_is_seeded_filtered_and_exact() {
    let _g = reference::serial();
    let e = Engine::start(FAST);
    let data = example("sample-sharegpt.json");
    let args = |seed: &'static str| {
        vec![
            "--dataset",
            data.to_str().unwrap(),
            "--dataset-sample",
            "6",
            "--seed",
            seed,
            "--dataset-max-prompt-tokens",
            "400",
            "--requests",
            "6",
            "--ignore-eos",
        ]
        .into_iter()
        .map(String::from)
        .collect::<Vec<_>>()
    };
    let a1 = args("3");
    let (v, reqs) = run(&e, &a1.iter().map(String::as_str).collect::<Vec<_>>());
    check_exact(&v, &reqs);
    let d = &v["prompt"]["dataset"];
    assert_eq!(d["format"], "sharegpt");
    assert_eq!(d["items_in_file"], 20);
    assert_eq!(d["skipped_conversations"], 1);
    assert_eq!(d["order"], "seeded-shuffle");
    let items = v["prompt"]["items"].as_array().unwrap();
    assert_eq!(items.len(), 6);
    for it in items {
        assert!(it["prompt_tokens"].as_u64().unwrap() <= 400);
        assert!(it["at"]
            .as_str()
            .unwrap()
            .contains("sample-sharegpt.json entry"));
    }
    // The output length is the gpt reply's token count (the reference tokenizer: /tokenize).
    let convs: Value = serde_json::from_slice(&std::fs::read(&data).unwrap()).unwrap();
    let first = &items[0];
    let k = first["at"]
        .as_str()
        .unwrap()
        .rsplit(' ')
        .next()
        .unwrap()
        .parse::<usize>()
        .unwrap();
    let reply = convs[k]["conversations"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["from"] == "gpt")
        .unwrap()["value"]
        .as_str()
        .unwrap()
        .to_string();
    assert_eq!(
        first["output_tokens"].as_u64().unwrap(),
        tokenize(&e.url, &reply)
    );
    // The same seed draws the same items; another seed others.
    let ids = |v: &Value| -> Vec<String> {
        v["prompt"]["items"]
            .as_array()
            .unwrap()
            .iter()
            .map(|i| i["id"].to_string())
            .collect()
    };
    let (v2, _) = run(&e, &a1.iter().map(String::as_str).collect::<Vec<_>>());
    assert_eq!(ids(&v), ids(&v2));
    let a3 = args("4");
    let (v3, _) = run(&e, &a3.iter().map(String::as_str).collect::<Vec<_>>());
    assert_ne!(ids(&v), ids(&v3));
}

fn tokenize(url: &str, text: &str) -> u64 {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let t = bakeoff::client::Target::parse(url).unwrap();
    let body = serde_json::json!({"content": text, "add_special": false});
    let (s, v) = rt
        .block_on(bakeoff::client::control::post_json(
            &t,
            "/tokenize",
            &body,
            None,
            std::time::Duration::from_secs(5),
        ))
        .unwrap();
    assert_eq!(s, 200);
    v["tokens"].as_array().unwrap().len() as u64
}

#[test]
fn dataset_errors_name_the_file_line_field_and_fix() {
    let _g = reference::serial();
    let e = Engine::start(FAST);
    let fail = |args: &[&str]| -> String {
        let (o, _) = bench(&e.url, args, &e.path("x.json"));
        assert!(!o.status.success());
        text(&o)
    };
    let bad = e.path("bad.jsonl");
    std::fs::write(&bad, "{\"prompt\": \"a\"}\n\n{\"text\": \"b\"}\n").unwrap();
    let out = fail(&["--dataset", bad.to_str().unwrap()]);
    assert!(
        out.contains("bad.jsonl:3: neither `prompt` nor `messages`; each line needs one"),
        "{out}"
    );
    std::fs::write(&bad, "{\"prompt\": \"a\", \"output_tokens\": -2}\n").unwrap();
    let out = fail(&["--dataset", bad.to_str().unwrap()]);
    assert!(out.contains("bad.jsonl:1: `output_tokens` is -2"), "{out}");
    // Messages cannot go to the completions endpoint.
    let data = example("sample.jsonl");
    let out = fail(&[
        "--dataset",
        data.to_str().unwrap(),
        "--endpoint",
        "completions",
    ]);
    assert!(
        out.contains("sample.jsonl:6: a `messages` item cannot go to --endpoint completions"),
        "{out}"
    );
    // An empty sample after the filters says how many each filter dropped.
    let out = fail(&[
        "--dataset",
        data.to_str().unwrap(),
        "--dataset-min-prompt-tokens",
        "100000",
    ]);
    assert!(
        out.contains("no item left after the filters: of 40 considered, 40 were shorter than --dataset-min-prompt-tokens 100000, 0 longer"),
        "{out}"
    );
    let out = fail(&["--dataset", e.path("nope.jsonl").to_str().unwrap()]);
    assert!(
        out.contains("nope.jsonl: cannot read the dataset file"),
        "{out}"
    );
    // A dataset replaces the single prompt: the flags conflict.
    let out = fail(&["--dataset", data.to_str().unwrap(), "--prompt-tokens", "64"]);
    assert!(out.contains("cannot be used with"), "{out}");
}

#[test]
fn synthetic_lengths_are_exact_for_every_request() {
    let _g = reference::serial();
    let e = Engine::start(FAST);
    let (v, reqs) = run(
        &e,
        &[
            "--input-tokens-dist",
            "uniform:40:90",
            "--output-tokens-dist",
            "normal:12:4",
            "--seed",
            "5",
            "--requests",
            "12",
            "--concurrency",
            "3",
            "--ignore-eos",
        ],
    );
    check_exact(&v, &reqs);
    assert_eq!(reqs.len(), 12);
    assert_eq!(v["prompt"]["strategy"], "synthetic");
    let drawn: Vec<u64> = v["prompt"]["input_tokens"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_u64().unwrap())
        .collect();
    assert!(drawn.iter().all(|&x| (40..=90).contains(&x)));
    let distinct: std::collections::BTreeSet<u64> = reqs
        .iter()
        .map(|l| l["usage"]["prompt_tokens"].as_u64().unwrap())
        .collect();
    assert!(distinct.len() >= 4, "{distinct:?}");
    // Request k sent draw k.
    for l in &reqs {
        let k = l["source"]["synthetic"].as_u64().unwrap() as usize;
        assert_eq!(l["expected_prompt_tokens"].as_u64().unwrap(), drawn[k]);
    }
}
