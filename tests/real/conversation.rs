//! `bakeoff bench --multi-turn` against a real llama.cpp server (its prompt cache is on by
//! default): each turn resends the history, so the server reports more cached tokens turn by
//! turn; with matched prompts, and with a dataset's conversations (system prompt, then user
//! turns) replayed with the model's own replies.

use crate::support::real_engine;
use crate::support::reference;

use real_engine::{RealEngine, RealServer, ServerOpts};
use reference::{bench, text};
use serde_json::Value;
use std::collections::BTreeMap;

fn u(v: &Value) -> u64 {
    v.as_u64().unwrap_or_else(|| panic!("not a count: {v}"))
}

/// One slot: every turn lands where the conversation's history is cached.
fn one_slot_server() -> RealServer {
    RealServer::start(
        RealEngine::LlamaServer,
        ServerOpts {
            parallel: 1,
            ctx: 4096,
            ..ServerOpts::default()
        },
    )
}

/// Runs `bench --multi-turn … --ignore-eos --requests-jsonl` with `args` and returns its stdout,
/// its JSON report and each conversation's request lines in turn order.
fn replay(server: &RealServer, args: &[&str]) -> (String, Value, BTreeMap<u64, Vec<Value>>) {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("mt.json");
    let jl = dir.path().join("mt.jsonl");
    let mut all: Vec<&str> = args.to_vec();
    all.extend(["--ignore-eos", "--requests-jsonl", jl.to_str().unwrap()]);
    let (o, v) = bench(&server.base_url, &all, &out);
    assert!(o.status.success(), "{}", text(&o));
    let mut convs: BTreeMap<u64, Vec<Value>> = BTreeMap::new();
    for l in std::fs::read_to_string(&jl).unwrap().lines() {
        let l: Value = serde_json::from_str(l).unwrap();
        convs.entry(u(&l["conversation"])).or_default().push(l);
    }
    for (id, turns) in &convs {
        let numbers: Vec<u64> = turns.iter().map(|l| u(&l["turn"])).collect();
        let expected: Vec<u64> = (1..=turns.len() as u64).collect();
        assert_eq!(numbers, expected, "conversation {id}");
    }
    (
        String::from_utf8_lossy(&o.stdout).into_owned(),
        v.unwrap(),
        convs,
    )
}

/// Turn by turn: the prompt grows by more than the last reply plus `new_user_tokens`, the
/// cached tokens grow, and the server serves (nearly) all of the last turn's prompt from cache.
fn assert_history_cached(id: u64, turns: &[Value], new_user_tokens: u64) {
    for k in 1..turns.len() {
        let p0 = u(&turns[k - 1]["prompt_tokens"]);
        let c0 = u(&turns[k - 1]["cached_tokens"]);
        let out0 = u(&turns[k - 1]["usage"]["completion_tokens"]);
        let (p, c) = (u(&turns[k]["prompt_tokens"]), u(&turns[k]["cached_tokens"]));
        assert!(
            p > p0 + out0 + new_user_tokens,
            "conversation {id}: {turns:?}"
        );
        assert!(
            c > c0,
            "conversation {id}: cached tokens did not grow: {turns:?}"
        );
        assert!(
            c + 8 >= p0,
            "conversation {id}: turn {} cached {c} of the last prompt's {p0}: {turns:?}",
            k + 1
        );
    }
}

#[test]
fn multi_turn_cached_tokens_grow_per_turn_on_llama_server() {
    let _g = reference::serial();
    let server = one_slot_server();
    let (stdout, v, convs) = replay(
        &server,
        &[
            "--multi-turn",
            "4",
            "--requests",
            "8",
            "--prompt-tokens",
            "128",
            "--max-tokens",
            "16",
        ],
    );
    assert_eq!(v["ok"], 8, "{v}");
    // First turns are the sized prompt, exactly.
    assert_eq!(v["prompt_token_mismatches"], 0, "{v}");
    assert_eq!(convs.len(), 2, "{convs:?}");
    for (id, turns) in &convs {
        assert_eq!(turns.len(), 4, "conversation {id}");
        assert_eq!(
            u(&turns[0]["prompt_tokens"]),
            128,
            "conversation {id}: {turns:?}"
        );
        // Each new user turn is another matched prompt (well over 100 tokens).
        assert_history_cached(*id, turns, 100);
    }
    // The printed/JSON rows show it per turn.
    let rows = v["workload"]["multi_turn"]["per_turn"].as_array().unwrap();
    assert_eq!(rows.len(), 4);
    let cached: Vec<f64> = rows
        .iter()
        .map(|r| r["cached_tokens_p50"].as_f64().unwrap())
        .collect();
    assert!(cached.windows(2).all(|w| w[1] > w[0]), "{cached:?}");
    assert!(stdout.contains("multi-turn: 2 conversations"));
}

#[test]
fn dataset_conversations_replayed_turn_by_turn_grow_the_cache_on_llama_server() {
    let _g = reference::serial();
    let server = one_slot_server();
    let data = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("examples/datasets/sample-multiturn.jsonl");
    let (_, v, convs) = replay(
        &server,
        &[
            "--multi-turn",
            "3",
            "--dataset",
            data.to_str().unwrap(),
            "--requests",
            "9",
        ],
    );
    assert_eq!(v["ok"], 9, "{v}");
    assert_eq!(v["prompt"]["strategy"], "dataset-conversations");
    assert_eq!(convs.len(), 3, "{convs:?}");
    for (id, turns) in &convs {
        assert_eq!(turns.len(), 3, "conversation {id}");
        for l in turns {
            // Every turn names its dataset item and asks (and gets) the item's output length.
            assert_eq!(u(&l["source"]["item"]), *id, "{l}");
            assert_eq!(l["usage"]["completion_tokens"], l["sent_max_tokens"], "{l}");
        }
        // The history is resent with the real reply.
        assert_history_cached(*id, turns, 0);
    }
}
