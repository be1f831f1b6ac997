//! `bakeoff selftest --dataset` / `--output-tokens-dist`: the selftest's client driven with a
//! dataset workload still matches every event to the engine's emission log, and each level
//! reports which dataset item every request sent, with exact prompt tokens and the item's output
//! length generated (the engine's output lengths vary per request).

use std::process::Command;

use crate::support::BIN;

fn selftest(args: &[&str]) -> serde_json::Value {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("selftest.json");
    let out = Command::new(BIN)
        .args(["selftest", "--waves", "2", "--json"])
        .arg(&json)
        .args(args)
        .output()
        .unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "{text}");
    if args
        .iter()
        .any(|a| *a == "--dataset" || a.ends_with("-tokens-dist"))
    {
        assert!(text.contains("workload: "), "{text}");
    }
    serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap()
}

#[test]
fn selftest_with_a_dataset_reports_each_requests_item() {
    let _g = crate::support::exclusive();
    let data =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/datasets/sample.jsonl");
    let v = selftest(&[
        "--levels",
        "4",
        "--no-floor",
        "--dataset",
        data.to_str().unwrap(),
    ]);
    assert_eq!(v["workload"]["strategy"], "dataset", "{}", v["workload"]);
    let file: Vec<serde_json::Value> = std::fs::read_to_string(&data)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let l = &v["levels"][0];
    assert_eq!(l["requests_ok"], 8, "{l}");
    assert_eq!(l["unmatched_requests"], 0, "{l}");
    assert!(l["added_delay_ms"]["p50"].is_number(), "{l}");
    assert!(l["chunks_per_read"].as_f64().unwrap() > 0.0, "{l}");
    let w = &l["workload"];
    assert_eq!(w["prompt_token_mismatches"], 0, "{w}");
    assert_eq!(w["distinct_items"], 8, "{w}");
    let reqs = w["requests"].as_array().unwrap();
    assert_eq!(reqs.len(), 8);
    let mut outputs = std::collections::BTreeSet::new();
    for r in reqs {
        let k = r["source"]["item"].as_u64().unwrap();
        assert_eq!(k, r["index"].as_u64().unwrap(), "file order: {r}");
        let item = &file[k as usize];
        assert_eq!(r["source"]["id"], item["id"], "{r}");
        assert_eq!(
            r["expected_prompt_tokens"], r["reported_prompt_tokens"],
            "{r}"
        );
        // The selftest sends ignore_eos: each request generates exactly its item's length.
        let want = item["output_tokens"]
            .as_u64()
            .or(item["max_tokens"].as_u64())
            .unwrap_or(64);
        assert_eq!(r["sent_max_tokens"], want, "{r}");
        assert_eq!(r["completion_tokens"], want, "{r}");
        outputs.insert(want);
    }
    assert!(outputs.len() > 2, "output lengths vary: {outputs:?}");
}

#[test]
fn selftest_with_synthetic_output_lengths() {
    let _g = crate::support::exclusive();
    let v = selftest(&[
        "--levels",
        "2",
        "--no-floor",
        "--output-tokens-dist",
        "uniform:4:12",
    ]);
    assert_eq!(v["workload"]["strategy"], "synthetic");
    let w = &v["levels"][0]["workload"];
    assert_eq!(w["prompt_token_mismatches"], 0, "{w}");
    for r in w["requests"].as_array().unwrap() {
        assert_eq!(r["reported_prompt_tokens"], 32, "{r}");
        assert_eq!(r["completion_tokens"], r["sent_max_tokens"], "{r}");
    }
}

/// The floor replays the client's own workload: with a dataset it reads the same items' output
/// lengths, so its event count is the dataset's, not the literal prompt's 64 tokens a request.
#[test]
fn the_floor_reads_the_same_dataset_workload_as_the_client() {
    let _g = crate::support::exclusive();
    let data =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/datasets/sample.jsonl");
    // The literal prompt: every request streams 64 tokens plus a fixed number of other events
    // (role, finish, [DONE], ...): that fixed number, measured here rather than assumed.
    let lit = selftest(&["--levels", "16"]);
    let l = &lit["levels"][0];
    let n = l["requests_ok"].as_u64().unwrap();
    assert_eq!(n, 32, "{l}");
    let floor = l["floor_chunks"]
        .as_u64()
        .expect("floor measured at 16 streams");
    assert_eq!(floor % n, 0, "{l}");
    // The floor counts its naps under the client's rule (16 streams read below the nap rate:
    // none, as the client).
    assert_eq!(l["floor_naps"].as_u64(), Some(0), "{l}");
    let extra = floor / n - 64;
    let v = selftest(&["--levels", "16", "--dataset", data.to_str().unwrap()]);
    let l = &v["levels"][0];
    let reqs = l["workload"]["requests"].as_array().unwrap();
    assert_eq!(reqs.len(), 32, "{l}");
    let tokens: u64 = reqs
        .iter()
        .map(|r| r["completion_tokens"].as_u64().unwrap())
        .sum();
    assert_ne!(
        tokens,
        64 * 32,
        "the sample's output lengths differ from 64"
    );
    assert_eq!(
        l["floor_chunks"].as_u64().unwrap(),
        tokens + extra * 32,
        "the floor read the dataset's output lengths: {l}"
    );
}
