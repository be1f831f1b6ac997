//! `bakeoff bench --multi-turn` combined with `--shared-prefix-tokens`, `--rate` and `--dataset`,
//! against the reference engine with its prefix cache on (16-token blocks: a request's cached
//! tokens are 16 × the leading blocks an earlier prompt already holds), and the combinations
//! that are refused.

use crate::support::reference::{self, bench, text, Engine};
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::PathBuf;

const PROFILE: &str = "model = \"ref\"\nttft_ms = 20\nprefill_tok_s = 20000\ndecode_tok_s = 400\ncontext_tokens = 8192\nprefix_cache = true\n";

fn example(name: &str) -> String {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("examples/datasets")
        .join(name)
        .display()
        .to_string()
}

/// Runs bench on a fresh engine; the summary and the `--requests-jsonl` lines (measured only).
fn run(args: &[&str]) -> (Value, Vec<Value>) {
    let _g = reference::serial();
    let e = Engine::start(PROFILE);
    let jl = e.path("requests.jsonl");
    let mut all: Vec<&str> = args.to_vec();
    all.extend(["--requests-jsonl", jl.to_str().unwrap()]);
    let (o, v) = bench(&e.url, &all, &e.path("bench.json"));
    assert!(o.status.success(), "{}", text(&o));
    let lines = std::fs::read_to_string(&jl)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .filter(|l| l["warmup"] == false)
        .collect();
    (v.expect("summary written"), lines)
}

/// The refusal of `args` (bench must fail before sending a request).
fn refused(args: &[&str]) -> String {
    let e = Engine::start(PROFILE);
    let (o, _) = bench(&e.url, args, &e.path("bench.json"));
    assert!(!o.status.success(), "{}", text(&o));
    text(&o)
}

fn u(v: &Value) -> u64 {
    v.as_u64().unwrap_or_else(|| panic!("not a count: {v}"))
}

/// The lines of each conversation, by turn.
fn by_conversation(lines: &[Value]) -> BTreeMap<u64, BTreeMap<u64, Value>> {
    let mut m: BTreeMap<u64, BTreeMap<u64, Value>> = BTreeMap::new();
    for l in lines {
        assert_eq!(l["ok"], true, "{l}");
        let prev = m
            .entry(u(&l["conversation"]))
            .or_default()
            .insert(u(&l["turn"]), l.clone());
        assert!(prev.is_none(), "a turn sent twice: {l}");
    }
    m
}

/// Every later turn's cached tokens are the whole 16-token blocks of the turn before it (the
/// history resent with the actual reply), and its prompt is longer than that prompt and reply.
/// Each conversation has turns 1..=`turns`, except (with `partial`) the ones the request count
/// cut short, which have turns 1..=m.
fn check_history_cached(convs: &BTreeMap<u64, BTreeMap<u64, Value>>, turns: u64, partial: bool) {
    for (id, t) in convs {
        let m = t.len() as u64;
        assert!(
            m == turns || (partial && m < turns),
            "conversation {id}: {t:?}"
        );
        assert_eq!(
            t.keys().copied().collect::<Vec<_>>(),
            (1..=m).collect::<Vec<_>>(),
            "conversation {id}"
        );
        for k in 2..=m {
            let (prev, cur) = (&t[&(k - 1)], &t[&k]);
            let p0 = u(&prev["prompt_tokens"]);
            let c0 = u(&prev["usage"]["completion_tokens"]);
            assert_eq!(
                u(&cur["cached_tokens"]),
                p0 / 16 * 16,
                "conversation {id} turn {k}: {t:?}"
            );
            assert!(
                u(&cur["prompt_tokens"]) > p0 + c0,
                "conversation {id} turn {k}"
            );
        }
    }
}

#[test]
fn multi_turn_conversations_open_with_their_groups_shared_prefix() {
    let (v, lines) = run(&[
        "--multi-turn",
        "3",
        "--shared-prefix-tokens",
        "48",
        "--prefix-groups",
        "2",
        "--requests",
        "12",
        "--prompt-tokens",
        "80",
        "--max-tokens",
        "12",
        "--ignore-eos",
    ]);
    assert_eq!(v["ok"], 12, "{v}");
    assert_eq!(v["load"]["multi_turn"], 3);
    assert_eq!(v["load"]["shared_prefix_tokens"], 48);
    // First turns are sized: prefix + user turn = exactly --prompt-tokens.
    assert_eq!(v["prompt_token_mismatches"], 0, "{v}");
    let convs = by_conversation(&lines);
    assert_eq!(convs.len(), 4, "{convs:?}");
    check_history_cached(&convs, 3, false);
    let mut seen = std::collections::BTreeSet::new();
    for (id, t) in &convs {
        // Every turn of a conversation is in the conversation's group: round-robin by id.
        let g = u(&t[&1]["prefix_group"]);
        assert_eq!(g, id % 2, "conversation {id}");
        for l in t.values() {
            assert_eq!(u(&l["prefix_group"]), g, "{l}");
        }
        let first = &t[&1];
        assert_eq!(u(&first["prompt_tokens"]), 80, "{first}");
        let cached = u(&first["cached_tokens"]);
        if seen.insert(g) {
            assert_eq!(
                cached, 0,
                "the group's first conversation hit the cache: {first}"
            );
        } else {
            // The 48 shared tokens (after the chat turn's 3-token header) are 3 whole blocks; the
            // conversation's own nonce line follows.
            assert_eq!(cached, 48, "conversation {id}: {first}");
        }
    }
    let w = &v["workload"];
    assert_eq!(
        w["multi_turn"]["per_turn"].as_array().unwrap().len(),
        3,
        "{w}"
    );
    let groups = w["shared_prefix"]["per_group"].as_array().unwrap();
    assert_eq!(groups.len(), 2, "{w}");
    for g in groups {
        assert_eq!(g["requests"], 6, "{w}");
    }
}

#[test]
fn multi_turn_under_a_rate_starts_conversations_on_the_schedule() {
    let (v, lines) = run(&[
        "--multi-turn",
        "3",
        "--think-time",
        "60",
        "--rate",
        "10",
        "--requests",
        "12",
        "--warmup",
        "3",
        "--prompt-tokens",
        "48",
        "--max-tokens",
        "16",
        "--ignore-eos",
    ]);
    assert_eq!(v["load"]["mode"], "open-loop");
    assert_eq!(v["ok"], 12, "{v}");
    let convs = by_conversation(&lines);
    assert_eq!(
        convs.len(),
        4,
        "12 requests are 4 conversations of 3 turns: {convs:?}"
    );
    check_history_cached(&convs, 3, false);
    // Turn 1 of each conversation is an arrival of the constant schedule (10/s): its intended
    // start (send minus schedule lag) is 100 ms after the last one's. The warm-up conversation
    // took arrival 0.
    let mut intended: Vec<f64> = convs
        .values()
        .map(|t| {
            let l = &t[&1];
            l["send_offset_ms"].as_f64().unwrap() - l["schedule_lag_ms"].as_f64().unwrap()
        })
        .collect();
    intended.sort_by(f64::total_cmp);
    for w in intended.windows(2) {
        assert!(
            (w[1] - w[0] - 100.0).abs() < 1.0,
            "arrivals not 100 ms apart: {intended:?}"
        );
    }
    for (id, t) in &convs {
        assert_eq!(u(&t[&1]["index"]) % 3, 0, "conversation {id}");
        for k in 2..=3u64 {
            let (prev, cur) = (&t[&(k - 1)], &t[&k]);
            // Later turns follow the think time after the reply, not the schedule.
            assert!(cur["schedule_lag_ms"].is_null(), "{cur}");
            assert_eq!(u(&cur["index"]), u(&prev["index"]) + 1, "{cur}");
            let end = prev["send_offset_ms"].as_f64().unwrap()
                + prev["metrics"]["e2e_ms"].as_f64().unwrap();
            let gap = cur["send_offset_ms"].as_f64().unwrap() - end;
            assert!(
                (60.0..400.0).contains(&gap),
                "conversation {id} turn {k} sent {gap} ms after the reply"
            );
        }
    }
}

#[test]
fn multi_turn_replays_a_datasets_conversations_with_the_real_replies() {
    let data = example("sample-multiturn.jsonl");
    let (v, lines) = run(&[
        "--multi-turn",
        "3",
        "--dataset",
        &data,
        "--concurrency",
        "2",
        "--requests",
        "12",
        "--ignore-eos",
    ]);
    assert_eq!(v["ok"], 12, "{v}");
    assert_eq!(v["prompt"]["strategy"], "dataset-conversations");
    assert_eq!(v["prompt"]["turns"], 3);
    let convs = by_conversation(&lines);
    // Two streams take requests as they finish, and the items' output lengths differ: the
    // 12 requests may end a stream's last conversation early.
    let whole = convs.values().filter(|t| t.len() == 3).count();
    assert!(whole >= 3 && convs.len() <= 5, "{convs:?}");
    check_history_cached(&convs, 3, true);
    let file: Vec<Value> = std::fs::read_to_string(&data)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    for (id, t) in &convs {
        // Conversation c replays item c (file order), every turn naming it; each turn asks the
        // item's output length and gets it.
        let item = &file[*id as usize];
        for l in t.values() {
            assert_eq!(u(&l["source"]["item"]), *id, "{l}");
            assert_eq!(l["source"]["id"], item["id"], "{l}");
            assert_eq!(l["sent_max_tokens"], item["output_tokens"], "{l}");
            assert_eq!(
                l["usage"]["completion_tokens"], item["output_tokens"],
                "{l}"
            );
        }
    }
    // ShareGPT: the conversations with two human turns (5 of the sample's 20).
    let sharegpt = example("sample-sharegpt.json");
    let (v, lines) = run(&[
        "--multi-turn",
        "2",
        "--dataset",
        &sharegpt,
        "--requests",
        "10",
        "--max-tokens",
        "8",
    ]);
    assert_eq!(v["ok"], 10, "{v}");
    assert_eq!(v["prompt"]["left_out_short"], 15, "{}", v["prompt"]);
    let convs = by_conversation(&lines);
    assert_eq!(convs.len(), 5);
    for t in convs.values() {
        assert_eq!(t.len(), 2);
        assert!(u(&t[&2]["cached_tokens"]) > 0, "{t:?}");
    }
}

#[test]
fn combinations_that_cant_work_are_refused_with_the_reason() {
    let _g = reference::serial();
    let data = example("sample-multiturn.jsonl");
    let e = refused(&["--multi-turn", "3", "--rate", "5", "--requests", "10"]);
    assert!(
        e.contains("--requests 10 is not a whole number of 3-turn conversations")
            && e.contains("use 9 or 12"),
        "{e}"
    );
    let e = refused(&["--multi-turn", "9", "--dataset", &data]);
    assert!(
        e.contains("no conversation has 9 user turns (the most any item has is 4)"),
        "{e}"
    );
    let e = refused(&["--shared-prefix-tokens", "16", "--dataset", &data]);
    assert!(
        e.contains("--shared-prefix-tokens sizes each request's own part"),
        "{e}"
    );
    let e = refused(&["--multi-turn", "2", "--input-tokens-dist", "uniform:10:20"]);
    assert!(
        e.contains("--multi-turn can't take --input-tokens-dist"),
        "{e}"
    );
    let e = refused(&[
        "--multi-turn",
        "2",
        "--dataset",
        &data,
        "--dataset-max-prompt-tokens",
        "100",
    ]);
    assert!(
        e.contains("--dataset-max-prompt-tokens can't be used with --multi-turn --dataset"),
        "{e}"
    );
}
