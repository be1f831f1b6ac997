//! `bakeoff bench --multi-turn` against a real llama.cpp server (its prompt cache is on by
//! default): each turn resends the history, so the server reports more cached tokens turn by turn.

use crate::support::real_engine;
use crate::support::reference;

use real_engine::{RealEngine, RealServer, ServerOpts};
use reference::{bench, text};
use std::collections::BTreeMap;

fn u(v: &serde_json::Value) -> u64 {
    v.as_u64().unwrap_or_else(|| panic!("not a count: {v}"))
}

#[test]
fn multi_turn_cached_tokens_grow_per_turn_on_llama_server() {
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
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("mt.json");
    let jl = dir.path().join("mt.jsonl");
    let (o, v) = bench(
        &server.base_url,
        &[
            "--multi-turn",
            "4",
            "--requests",
            "8",
            "--prompt-tokens",
            "128",
            "--max-tokens",
            "16",
            "--ignore-eos",
            "--requests-jsonl",
            jl.to_str().unwrap(),
        ],
        &out,
    );
    assert!(o.status.success(), "{}", text(&o));
    let v = v.unwrap();
    assert_eq!(v["ok"], 8, "{v}");
    // First turns are the sized prompt, exactly.
    assert_eq!(v["prompt_token_mismatches"], 0, "{v}");
    let mut convs: BTreeMap<u64, Vec<(u64, u64, u64)>> = BTreeMap::new();
    for l in std::fs::read_to_string(&jl).unwrap().lines() {
        let l: serde_json::Value = serde_json::from_str(l).unwrap();
        convs.entry(u(&l["conversation"])).or_default().push((
            u(&l["turn"]),
            u(&l["prompt_tokens"]),
            u(&l["cached_tokens"]),
        ));
    }
    assert_eq!(convs.len(), 2, "{convs:?}");
    for (id, turns) in &convs {
        let turn_numbers: Vec<u64> = turns.iter().map(|t| t.0).collect();
        assert_eq!(turn_numbers, [1, 2, 3, 4], "conversation {id}");
        assert_eq!(turns[0].1, 128, "conversation {id}: {turns:?}");
        for k in 1..4 {
            let (_, p0, c0) = turns[k - 1];
            let (_, p, c) = turns[k];
            // The history is resent: the prompt grows by the reply and a new user turn, and
            // the server serves (nearly) all of the last turn's prompt from its cache.
            assert!(p > p0 + 16 + 100, "conversation {id}: {turns:?}");
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
    // The printed/JSON rows show it per turn.
    let rows = v["workload"]["multi_turn"]["per_turn"].as_array().unwrap();
    assert_eq!(rows.len(), 4);
    let cached: Vec<f64> = rows
        .iter()
        .map(|r| r["cached_tokens_p50"].as_f64().unwrap())
        .collect();
    assert!(cached.windows(2).all(|w| w[1] > w[0]), "{cached:?}");
    assert!(String::from_utf8_lossy(&o.stdout).contains("multi-turn: 2 conversations"));
}
