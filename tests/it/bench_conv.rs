//! `bakeoff bench --multi-turn` and `--shared-prefix-tokens` against the reference engine with its
//! prefix cache on (16-token blocks: a request's cached tokens are 16 × the leading blocks an
//! earlier prompt already holds).

use crate::support::reference;
use reference::{bench, text, Engine};
use serde_json::Value;
use std::collections::BTreeMap;

const PROFILE: &str = "model = \"ref\"\nttft_ms = 20\nprefill_tok_s = 20000\ndecode_tok_s = 400\ncontext_tokens = 8192\nprefix_cache = true\n";

fn jsonl(path: &std::path::Path) -> Vec<Value> {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// Runs bench on a fresh engine; the summary and the `--requests-jsonl` lines.
fn run(args: &[&str]) -> (Value, Vec<Value>) {
    let _g = reference::serial();
    let e = Engine::start(PROFILE);
    let jl = e.path("requests.jsonl");
    let mut all: Vec<&str> = args.to_vec();
    all.extend(["--requests-jsonl", jl.to_str().unwrap()]);
    let (o, v) = bench(&e.url, &all, &e.path("bench.json"));
    assert!(o.status.success(), "{}", text(&o));
    (v.expect("summary written"), jsonl(&jl))
}

fn u(v: &Value) -> u64 {
    v.as_u64().unwrap_or_else(|| panic!("not a count: {v}"))
}

/// Each conversation's lines by turn: (prompt tokens, cached tokens, completion tokens).
fn conversations(lines: &[Value]) -> BTreeMap<u64, BTreeMap<u64, (u64, u64, u64)>> {
    let mut m: BTreeMap<u64, BTreeMap<u64, (u64, u64, u64)>> = BTreeMap::new();
    for l in lines {
        assert_eq!(l["ok"], true, "{l}");
        assert_eq!(l["prompt_tokens"], l["usage"]["prompt_tokens"], "{l}");
        assert_eq!(l["cached_tokens"], l["usage"]["cached_tokens"], "{l}");
        let prev = m.entry(u(&l["conversation"])).or_default().insert(
            u(&l["turn"]),
            (
                u(&l["prompt_tokens"]),
                u(&l["cached_tokens"]),
                u(&l["usage"]["completion_tokens"]),
            ),
        );
        assert!(prev.is_none(), "a turn sent twice: {l}");
    }
    m
}

/// How much each turn's prompt grows over the last one's prompt plus reply (the same for every
/// turn); checks the cache served every earlier prompt's whole blocks.
fn growth(endpoint: &str, max_tokens: u64) -> (i64, Value) {
    let mt = max_tokens.to_string();
    let (v, lines) = run(&[
        "--endpoint",
        endpoint,
        "--multi-turn",
        "3",
        "--concurrency",
        "2",
        "--requests",
        "12",
        "--prompt-tokens",
        "64",
        "--max-tokens",
        &mt,
        "--ignore-eos",
    ]);
    assert_eq!(v["ok"], 12, "{v}");
    assert_eq!(v["load"]["multi_turn"], 3);
    assert_eq!(
        v["prompt_token_mismatches"], 0,
        "only first turns are sized"
    );
    let convs = conversations(&lines);
    assert_eq!(
        convs.len(),
        4,
        "two streams, two conversations each: {convs:?}"
    );
    let mut d = None;
    for (id, turns) in &convs {
        assert_eq!(turns.keys().copied().collect::<Vec<_>>(), [1, 2, 3], "{id}");
        // Turn 1 is the sized prompt alone, and a fresh one: nothing cached.
        assert_eq!(turns[&1].0, 64, "conversation {id}");
        assert_eq!(turns[&1].1, 0, "conversation {id}: turn 1 hit the cache");
        for k in 2..=3 {
            let (p0, _, c0) = turns[&(k - 1)];
            let (p, cached, _) = turns[&k];
            assert_eq!(c0, max_tokens);
            // The history (the last prompt and its reply) is resent: the engine's cache holds
            // every whole 16-token block of the last turn's prompt.
            assert_eq!(
                cached,
                p0 / 16 * 16,
                "conversation {id} turn {k}: {turns:?}"
            );
            let g = p as i64 - (p0 + c0) as i64;
            assert!(g > 0, "conversation {id} turn {k}: {turns:?}");
            assert_eq!(*d.get_or_insert(g), g, "growth differs: {convs:?}");
        }
    }
    (d.unwrap(), v)
}

#[test]
fn multi_turn_resends_the_history_with_the_actual_replies() {
    for endpoint in ["chat", "completions"] {
        let (g20, v) = growth(endpoint, 20);
        let (g40, _) = growth(endpoint, 40);
        // A reply twice as long grows the next prompt by its own length only: the growth over
        // prompt + reply is the new user turn and the template, whatever the reply.
        assert_eq!(g20, g40, "{endpoint}");
        let w = &v["workload"];
        let rows = w["multi_turn"]["per_turn"].as_array().unwrap();
        assert_eq!(rows.len(), 3, "{w}");
        assert_eq!(w["multi_turn"]["conversations"], 4);
        assert_eq!(rows[0]["turn"], 1);
        assert_eq!(rows[0]["cached_tokens_p50"], 0.0);
        assert_eq!(rows[0]["prompt_tokens_p50"], 64.0);
        for k in 1..3 {
            let (c, c0) = (
                &rows[k]["cached_tokens_p50"],
                &rows[k - 1]["cached_tokens_p50"],
            );
            assert!(c.as_f64() > c0.as_f64(), "{w}");
            assert_eq!(rows[k]["requests"], 4, "{w}");
            assert!(rows[k]["ttft_ms_p50"].as_f64().unwrap() > 0.0);
        }
        let share = w["cached_tokens_share"].as_f64().unwrap();
        assert!(share > 0.3 && share < 1.0, "{w}");
    }
}

#[test]
fn think_time_separates_a_conversations_turns() {
    let (v, lines) = run(&[
        "--multi-turn",
        "2",
        "--think-time",
        "150",
        "--requests",
        "4",
        "--prompt-tokens",
        "32",
        "--max-tokens",
        "4",
    ]);
    assert_eq!(v["load"]["think_time_ms"], 150.0);
    for pair in lines.chunks(2) {
        assert_eq!(pair[0]["conversation"], pair[1]["conversation"]);
        let end0 = pair[0]["send_offset_ms"].as_f64().unwrap()
            + pair[0]["metrics"]["e2e_ms"].as_f64().unwrap();
        let gap = pair[1]["send_offset_ms"].as_f64().unwrap() - end0;
        assert!(
            (150.0..400.0).contains(&gap),
            "turn 2 sent {gap} ms after turn 1 ended"
        );
    }
    // Between conversations there is no think time.
    let end1 = lines[1]["send_offset_ms"].as_f64().unwrap()
        + lines[1]["metrics"]["e2e_ms"].as_f64().unwrap();
    let gap = lines[2]["send_offset_ms"].as_f64().unwrap() - end1;
    assert!(gap < 100.0, "a new conversation waited {gap} ms");
}

#[test]
fn shared_prefix_requests_hit_the_cache_after_the_first_of_each_group() {
    for endpoint in ["chat", "completions"] {
        let (v, lines) = run(&[
            "--endpoint",
            endpoint,
            "--shared-prefix-tokens",
            "48",
            "--prefix-groups",
            "3",
            "--requests",
            "9",
            "--prompt-tokens",
            "100",
            "--max-tokens",
            "4",
        ]);
        assert_eq!(v["ok"], 9);
        // The whole prompt is still exactly --prompt-tokens.
        assert_eq!(v["prompt_token_mismatches"], 0, "{v}");
        assert_eq!(v["prompt"]["target_tokens"], 100);
        assert_eq!(v["prompt"]["shared_prefix"]["tokens"], 48);
        let mut seen = std::collections::BTreeSet::new();
        for l in &lines {
            assert_eq!(l["prompt_tokens"], 100, "{l}");
            let g = u(&l["prefix_group"]);
            assert_eq!(g, u(&l["index"]) % 3, "round-robin groups: {l}");
            let cached = u(&l["cached_tokens"]);
            if seen.insert(g) {
                assert_eq!(
                    cached, 0,
                    "the first request of group {g} hit the cache: {l}"
                );
            } else {
                // The 48 shared tokens (chat: after the 3-token turn header) are 3 whole blocks;
                // the request's own nonce line comes right after them.
                assert_eq!(cached, 48, "{endpoint}: {l}");
            }
        }
        let w = &v["workload"];
        let share = w["cached_tokens_share"].as_f64().unwrap();
        assert!((share - 6.0 * 48.0 / 900.0).abs() < 1e-9, "{w}");
        for row in w["shared_prefix"]["per_group"].as_array().unwrap() {
            assert_eq!(row["requests"], 3, "{w}");
            assert_eq!(row["first_request_cached_tokens"], 0, "{w}");
            assert_eq!(row["requests_with_cached_tokens"], 2, "{w}");
        }
    }
}

#[test]
fn random_groups_follow_the_seed() {
    let args = [
        "--shared-prefix-tokens",
        "40",
        "--prefix-groups",
        "4",
        "--prefix-random",
        "--seed",
        "5",
        "--requests",
        "12",
        "--prompt-tokens",
        "80",
        "--max-tokens",
        "2",
    ];
    let groups = |lines: &[Value]| {
        lines
            .iter()
            .map(|l| u(&l["prefix_group"]))
            .collect::<Vec<_>>()
    };
    let (v, a) = run(&args);
    let (_, b) = run(&args);
    assert_eq!(v["load"]["prefix_order"], "random");
    let ga = groups(&a);
    assert_eq!(ga, groups(&b), "the same seed, the same groups");
    assert!(ga.iter().all(|&g| g < 4));
    assert_ne!(
        ga,
        (0..12).map(|i| i % 4).collect::<Vec<_>>(),
        "not round-robin"
    );
    assert!(a.iter().all(|l| l["prompt_tokens"] == 80));
}

#[test]
fn structured_workloads_refuse_what_they_cannot_do() {
    let _g = reference::serial();
    let e = Engine::start(PROFILE);
    let out = e.path("x.json");
    let cases: &[(&[&str], &str)] = &[
        // Under --rate each arrival is a whole conversation (the default 32 requests are not).
        (
            &["--multi-turn", "3", "--rate", "5"],
            "--requests 32 is not a whole number of 3-turn conversations",
        ),
        (&["--multi-turn", "0"], "--multi-turn must be at least 1"),
        (&["--think-time", "5"], "--multi-turn"),
        (
            &["--shared-prefix-tokens", "64", "--prompt-tokens", "64"],
            "less than --prompt-tokens 64",
        ),
        (
            &["--shared-prefix-tokens", "8", "--prompt", "hi"],
            "--prompt",
        ),
        (&["--prefix-groups", "2"], "--shared-prefix-tokens"),
        (
            &["--shared-prefix-tokens", "8", "--prefix-groups", "0"],
            "--prefix-groups must be at least 1",
        ),
        // Multi-turn with a shared prefix works (bench_conv_combo.rs); with a synthetic source the
        // prefix can't be sized.
        (
            &[
                "--shared-prefix-tokens",
                "8",
                "--input-tokens-dist",
                "fixed:20",
            ],
            "--shared-prefix-tokens sizes each request's own part",
        ),
    ];
    for (args, want) in cases {
        let (o, _) = bench(&e.url, args, &out);
        // Refused before any request: exit 2.
        assert_eq!(o.status.code(), Some(2), "{args:?}: {}", text(&o));
        let t = text(&o);
        assert!(t.contains(want), "{args:?}: {t}");
    }
}
