//! A small `[workload.dataset]` campaign against a real llama.cpp server (SmolLM2-135M on the
//! CPU): two endpoint arms on one `llama-server`, each request's expected prompt tokens (counted
//! before it is sent: the server's /tokenize plus the measured chat template) equal the server's
//! usage, and both arms send the same items in the same order.

use crate::support::campaign::{json, run, text};
use crate::support::real_engine;
use real_engine::{RealEngine, RealServer, ServerOpts};
use serde_json::Value;
use std::path::Path;

#[test]
fn a_dataset_campaign_on_llama_server_has_usage_equal_to_the_expected_prompt_tokens() {
    let _g = crate::support::exclusive(); // one real server at a time
    let server = RealServer::start(RealEngine::LlamaServer, ServerOpts::default());
    let dir = tempfile::tempdir().unwrap();
    let data = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/datasets/sample.jsonl");
    let lane = crate::support::free_port();
    let file = dir.path().join("campaign.toml");
    let arm = |id: &str, role: &str| {
        format!(
            "\n[[arms]]\nid = \"{id}\"\nrole = \"{role}\"\nengine = \"llama-server\"\nmodel = \"SmolLM2-135M-Instruct\"\nserved_model = \"{}\"\nserved_context = 4096\n[arms.endpoint]\nurl = \"{}\"\n",
            ServerOpts::default().alias,
            server.base_url
        )
    };
    let text_of = format!(
        r#"[campaign]
id = "real-dataset"
output = "out"

[lane]
host = "127.0.0.1"
port = {lane}
ready_timeout_s = 30

[workload]
ranking_priority = ["ttft"]
matched_prompt_tokens = 64
max_tokens = 8
warm_repetitions = 1
concurrency = [1, 2]

[workload.dataset]
path = "{}"
sample = 4
seed = 2
max_output_tokens = 24

[workload.sampling]
ignore_eos = true

[gates]
preflight = ["smoke"]

[policy]
required_gates = ["smoke"]
{}{}"#,
        data.display(),
        arm("a", "incumbent"),
        arm("b", "candidate"),
    );
    std::fs::write(&file, text_of).unwrap();
    let t0 = std::time::Instant::now();
    let o = run(&[file.to_str().unwrap()]);
    let out = text(&o);
    assert!(o.status.success(), "{out}");
    eprintln!("dataset campaign on llama-server: {:?}", t0.elapsed());
    let b = dir.path().join("out");
    let r = json(&b.join("campaign-result.json"));
    let items = &r["workload"]["work_items"];
    assert_eq!(items["a"].as_array().unwrap().len(), 4, "{r:#}");
    assert_eq!(items["a"], items["b"]);
    let plan = json(&b.join("plan.json"));
    let mut sent: std::collections::BTreeMap<String, Vec<Value>> = Default::default();
    let mut n = 0;
    for s in plan["steps"].as_array().unwrap() {
        if s["kind"]["kind"] != "timing" {
            continue;
        }
        let ev = json(&b.join(s["evidence"].as_str().unwrap()));
        let mut lines = ev["requests"].as_array().unwrap().clone();
        lines.sort_by_key(|l| l["index"].as_u64());
        for l in &lines {
            assert_eq!(l["ok"], true, "{l}");
            let exp = l["expected_prompt_tokens"]
                .as_u64()
                .unwrap_or_else(|| panic!("no expected count: {l}"));
            assert_eq!(l["usage"]["prompt_tokens"].as_u64(), Some(exp), "{l}");
            assert_eq!(l["reported_prompt_tokens"].as_u64(), Some(exp), "{l}");
            assert_eq!(
                l["sent_max_tokens"].as_u64(),
                l["usage"]["completion_tokens"].as_u64(),
                "{l}"
            );
            sent.entry(s["arm"].as_str().unwrap().to_string())
                .or_default()
                .push(l["source"]["item"].clone());
            n += 1;
        }
    }
    assert_eq!(n, 2 * (1 + 1 + 2), "cold, warm c1 and warm c2 on two arms");
    // Keep the checkpoint's wall times in the output: where the time went.
    let ck = json(&b.join("checkpoint.json"));
    for s in ck["steps"].as_array().unwrap() {
        eprintln!("  {} {}: {} ms", s["arm"], s["step"], s["wall_ms"]);
    }
    assert_eq!(
        sent["a"], sent["b"],
        "both arms sent the same items in order"
    );
}
