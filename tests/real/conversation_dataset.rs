//! `bakeoff bench --multi-turn --dataset` against a real llama.cpp server: a dataset's
//! conversations (system prompt, then user turns) replayed turn by turn with the model's own
//! replies; the server reports more cached tokens turn by turn.

use crate::support::real_engine;
use crate::support::reference;

use real_engine::{RealEngine, RealServer, ServerOpts};
use reference::{bench, text};
use std::collections::BTreeMap;

fn u(v: &serde_json::Value) -> u64 {
    v.as_u64().unwrap_or_else(|| panic!("not a count: {v}"))
}

#[test]
fn dataset_conversations_replayed_turn_by_turn_grow_the_cache_on_llama_server() {
    let _g = reference::serial();
    // One slot: every turn lands where the conversation's history is cached.
    let server = RealServer::start(
        RealEngine::LlamaServer,
        ServerOpts {
            parallel: 1,
            ctx: 4096,
            ..ServerOpts::default()
        },
    );
    let data = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("examples/datasets/sample-multiturn.jsonl");
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("mt.json");
    let jl = dir.path().join("mt.jsonl");
    let (o, v) = bench(
        &server.base_url,
        &[
            "--multi-turn",
            "3",
            "--dataset",
            data.to_str().unwrap(),
            "--requests",
            "9",
            "--ignore-eos",
            "--requests-jsonl",
            jl.to_str().unwrap(),
        ],
        &out,
    );
    assert!(o.status.success(), "{}", text(&o));
    let v = v.unwrap();
    assert_eq!(v["ok"], 9, "{v}");
    assert_eq!(v["prompt"]["strategy"], "dataset-conversations");
    let mut convs: BTreeMap<u64, Vec<serde_json::Value>> = BTreeMap::new();
    for l in std::fs::read_to_string(&jl).unwrap().lines() {
        let l: serde_json::Value = serde_json::from_str(l).unwrap();
        convs.entry(u(&l["conversation"])).or_default().push(l);
    }
    assert_eq!(convs.len(), 3, "{convs:?}");
    for (id, turns) in &convs {
        let numbers: Vec<u64> = turns.iter().map(|l| u(&l["turn"])).collect();
        assert_eq!(numbers, [1, 2, 3], "conversation {id}");
        for l in turns {
            // Every turn names its dataset item and asks (and gets) the item's output length.
            assert_eq!(u(&l["source"]["item"]), *id, "{l}");
            assert_eq!(l["usage"]["completion_tokens"], l["sent_max_tokens"], "{l}");
        }
        for k in 1..3 {
            let p0 = u(&turns[k - 1]["prompt_tokens"]);
            let c0 = u(&turns[k - 1]["cached_tokens"]);
            let out0 = u(&turns[k - 1]["usage"]["completion_tokens"]);
            let (p, c) = (u(&turns[k]["prompt_tokens"]), u(&turns[k]["cached_tokens"]));
            // The history is resent with the real reply: the prompt grows by at least the
            // reply, and the server serves (nearly) all of the last turn's prompt from its cache.
            assert!(p > p0 + out0, "conversation {id}: {turns:?}");
            assert!(
                c > c0,
                "conversation {id}: cached tokens did not grow: {turns:?}"
            );
            assert!(
                c + 8 >= p0,
                "conversation {id} turn {}: cached {c} of {p0}",
                k + 1
            );
        }
    }
}
