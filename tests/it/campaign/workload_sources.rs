//! Campaign workload sources beside the matched prompt (`[workload.dataset]`, `.synthetic`,
//! `.conversation`, `.shared_prefix`) on reference-engine arms: every arm sends the same work
//! items in the same order, each request line records its item with the expected and the
//! reported prompt tokens; conversations resend their history (cached tokens grow per turn); a
//! changed dataset file is refused on `--resume`; bad tables are one-line errors naming the
//! file, the field and the fix.

use crate::support::campaign::*;
use crate::support::exclusive as serial;
use bakeoff::campaign;
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// A reference engine with a prefix cache (16-token blocks).
const PROFILE: &str =
    "ttft_ms = 5\nprefill_tok_s = 50000\ndecode_tok_s = 400\ncontext_tokens = 8192\nprefix_cache = true";

fn sample() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/datasets/sample.jsonl")
}

/// A two-arm campaign (both reference engines, the incumbent started by the test) with the
/// smoke preflight only; `workload` goes after `[workload]`'s keys, `tables` after it.
fn write(t: &Camp, workload: &str, tables: &str) -> PathBuf {
    t.profile("inc", PROFILE);
    t.profile("cand", PROFILE);
    let small = Small {
        concurrency: "1, 2",
        workload,
        ignore_eos: true,
        tables,
        ..Small::default()
    };
    t.write_small(
        "sources",
        &small,
        &[("inc", "incumbent"), ("cand", "candidate")],
    )
}

/// The request lines of an arm's timing steps, by evidence file, in plan order.
fn timing_lines(b: &Path, arm: &str) -> Vec<(String, Vec<Value>)> {
    let plan = json(&b.join("plan.json"));
    plan["steps"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|s| s["arm"] == arm && s["kind"]["kind"] == "timing")
        .map(|s| {
            let f = s["evidence"].as_str().unwrap().to_string();
            let mut lines = json(&b.join(&f))["requests"].as_array().unwrap().clone();
            lines.sort_by_key(|l| l["index"].as_u64());
            (f, lines)
        })
        .collect()
}

fn sha256(p: &Path) -> String {
    use sha2::Digest;
    sha2::Sha256::digest(std::fs::read(p).unwrap())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

#[test]
fn a_dataset_campaign_sends_every_arm_the_same_items_with_exact_prompt_tokens() {
    let _g = serial();
    let t = Camp::new();
    std::fs::create_dir_all(t.path("data")).unwrap();
    let data = t.path("data/sample.jsonl");
    std::fs::copy(sample(), &data).unwrap();
    let digest = sha256(&data);
    let file = write(
        &t,
        "",
        "[workload.dataset]\npath = \"data/sample.jsonl\"\nsample = 7\nseed = 11\nmax_output_tokens = 64\n",
    );
    let f = file.to_str().unwrap();
    let dry = run(&[f, "--dry-run"]);
    let dry_text = text(&dry);
    assert!(dry.status.success(), "{dry_text}");
    assert!(
        dry_text.contains(&format!(
            "source     dataset {} (40 items, sha256 {digest})",
            data.display()
        )),
        "{dry_text}"
    );
    assert!(dry_text.contains("sample 7 (seed 11)"), "{dry_text}");
    // Step files are named after the source, and numbered items: 1 cold + 3 warm + 6 at c2.
    assert!(
        dry_text.contains("cand-timing-dataset-c2-warm.json"),
        "{dry_text}"
    );
    assert!(dry_text.contains("work items 4..10"), "{dry_text}");

    let b = t.run_ok("inc", Path::new(f));
    verify(&b);

    let r = json(&b.join("campaign-result.json"));
    let w = &r["workload"];
    assert_eq!(w["source"]["kind"], "dataset", "{w:#}");
    assert_eq!(w["source"]["sha256"], digest.as_str());
    assert_eq!(w["source"]["sample"], 7);
    let items = &w["work_items"];
    assert_eq!(items["inc"].as_array().unwrap().len(), 7, "{w:#}");
    assert_eq!(
        items["inc"], items["cand"],
        "every arm sized the same items"
    );
    let md = std::fs::read_to_string(b.join("publication-summary.md")).unwrap();
    assert!(
        md.contains(&format!("- workload source: dataset (docs/campaign.md, Workload sources; dataset sha256 {digest})")),
        "{md}"
    );
    // No matched prompt was sent, so none is reported as matched.
    assert_eq!(w["matched_prompt_tokens_reported"], serde_json::json!({}));

    let mut per_arm: BTreeMap<&str, Vec<(String, u64, Value)>> = BTreeMap::new();
    for arm in ["inc", "cand"] {
        let steps = timing_lines(&b, arm);
        assert_eq!(steps.len(), 3, "{steps:?}");
        let mut position = 0;
        for (file, lines) in &steps {
            assert!(!lines.is_empty(), "{file}");
            let ev = json(&b.join(file));
            assert_eq!(ev["prompt"]["strategy"], "dataset", "{file}");
            assert_eq!(ev["prompt"]["dataset"]["sha256"], digest.as_str());
            for l in lines {
                assert_eq!(l["ok"], true, "{file}: {l}");
                let src = &l["source"];
                assert_eq!(src["dataset_sha256"], digest.as_str(), "{l}");
                // The server's usage equals the count made before sending, for every request.
                let expected = l["expected_prompt_tokens"].as_u64().unwrap();
                assert_eq!(l["reported_prompt_tokens"], expected, "{file}: {l}");
                assert_eq!(l["usage"]["prompt_tokens"], expected, "{file}: {l}");
                // Each request decodes its item's output length (ignore_eos).
                assert_eq!(l["usage"]["completion_tokens"], l["sent_max_tokens"], "{l}");
                assert!(l["sent_max_tokens"].as_u64().unwrap() <= 64, "{l}");
                per_arm.entry(arm).or_default().push((
                    file.replace(&format!("{arm}-"), ""),
                    position,
                    serde_json::json!([src["item"], src["id"], l["sent_max_tokens"]]),
                ));
                position += 1;
            }
        }
        assert_eq!(position, 10, "1 cold + 3 warm + 6 at c2");
        // Request i of the arm sends item i (mod 7), whatever its server's request numbers.
        let list = items[arm].as_array().unwrap();
        for (_, pos, got) in &per_arm[arm] {
            let want = &list[(*pos % 7) as usize];
            assert_eq!(got[0], want["item"], "position {pos}");
        }
    }
    assert_eq!(
        per_arm["inc"], per_arm["cand"],
        "both arms sent the same items in the same order"
    );
    let distinct: std::collections::BTreeSet<String> =
        per_arm["inc"].iter().map(|x| x.2[0].to_string()).collect();
    assert_eq!(distinct.len(), 7, "the sample's 7 items were all sent");

    // A resume with the dataset file changed is refused before anything starts; with the file
    // back it gets as far as "already complete".
    let mut changed = std::fs::read_to_string(&data).unwrap();
    changed.push_str("{\"prompt\": \"one more\"}\n");
    std::fs::write(&data, changed).unwrap();
    let o = run(&["--resume", b.to_str().unwrap()]);
    let out = text(&o);
    assert_eq!(o.status.code(), Some(2), "{out}");
    assert!(
        out.contains(&format!(
            "the dataset file {} changed since the run started (sha256 {digest} then,",
            data.display()
        )),
        "{out}"
    );
    assert!(
        out.contains("put the original file back to resume"),
        "{out}"
    );
    std::fs::copy(sample(), &data).unwrap();
    let o = run(&["--resume", b.to_str().unwrap()]);
    assert!(o.status.success(), "{}", text(&o));
    assert!(text(&o).contains("already complete"), "{}", text(&o));
}

#[test]
fn a_multi_turn_campaign_resends_each_conversation_and_the_cache_grows_per_turn() {
    let _g = serial();
    let t = Camp::new();
    let file = write(
        &t,
        "allow_prefix_cache = false\n",
        "[workload.conversation]\nturns = 3\n",
    );
    let b = t.run_ok("inc", &file);
    verify(&b);
    let r = json(&b.join("campaign-result.json"));
    assert_eq!(r["workload"]["source"]["kind"], "conversation", "{r:#}");
    for arm in ["inc", "cand"] {
        let steps = timing_lines(&b, arm);
        let (file, lines) = &steps[1];
        assert!(file.ends_with("-c1-warm.json"), "{file}");
        // One stream, three requests: turns 1, 2, 3 of one conversation.
        let turns: Vec<(u64, u64, u64, u64)> = lines
            .iter()
            .map(|l| {
                assert_eq!(l["ok"], true, "{l}");
                assert_eq!(l["prompt_tokens"], l["usage"]["prompt_tokens"], "{l}");
                (
                    l["turn"].as_u64().unwrap(),
                    l["prompt_tokens"].as_u64().unwrap(),
                    l["cached_tokens"].as_u64().unwrap(),
                    l["usage"]["completion_tokens"].as_u64().unwrap(),
                )
            })
            .collect();
        assert_eq!(
            turns.iter().map(|x| x.0).collect::<Vec<_>>(),
            [1, 2, 3],
            "{turns:?}"
        );
        assert_eq!(turns[0].1, 64, "turn 1 is the matched prompt: {turns:?}");
        assert_eq!(turns[0].2, 0, "turn 1 is fresh: {turns:?}");
        for k in 1..3 {
            let (p0, c0) = (turns[k - 1].1, turns[k - 1].3);
            // The history is resent: the prompt holds the last prompt and its reply, and the
            // engine's cache serves the last prompt's whole blocks.
            assert!(turns[k].1 > p0 + c0, "{turns:?}");
            assert_eq!(turns[k].2, p0 / 16 * 16, "{turns:?}");
        }
        // The per-turn summary of the step.
        let ev = json(&b.join(file));
        let rows = ev["workload"]["multi_turn"]["per_turn"].as_array().unwrap();
        assert_eq!(rows.len(), 3, "{ev:#}");
        assert!(
            rows[2]["cached_tokens_p50"].as_f64() > rows[1]["cached_tokens_p50"].as_f64(),
            "{rows:?}"
        );
        assert_eq!(ev["prompt"]["conversation"]["turns"], 3);
        // Conversations are meant to hit the cache: no cache-defeated warning.
        assert!(ev["prefix_cache_warning"].is_null(), "{ev:#}");
        // At c2 two streams hold two conversations.
        let (_, c2) = &steps[2];
        let convs: std::collections::BTreeSet<u64> = c2
            .iter()
            .map(|l| l["conversation"].as_u64().unwrap())
            .collect();
        assert!(convs.len() >= 2, "{c2:?}");
    }
}

#[test]
fn synthetic_and_shared_prefix_campaigns_send_exact_prompts_the_same_on_every_arm() {
    let _g = serial();
    // Synthetic lengths: drawn once from the seed, sized exactly on each arm.
    let t = Camp::new();
    let file = write(
        &t,
        "",
        "[workload.synthetic]\ninput_tokens = \"uniform:40:90\"\noutput_tokens = \"uniform:4:12\"\nseed = 5\n",
    );
    let b = t.run_ok("inc", &file);
    let r = json(&b.join("campaign-result.json"));
    assert_eq!(r["workload"]["source"]["kind"], "synthetic", "{r:#}");
    assert_eq!(r["workload"]["source"]["pool"], 10);
    let mut sent: BTreeMap<&str, Vec<(u64, u64)>> = BTreeMap::new();
    for arm in ["inc", "cand"] {
        for (file, lines) in timing_lines(&b, arm) {
            assert!(file.contains("-timing-synthetic-"), "{file}");
            for l in lines {
                assert_eq!(l["ok"], true, "{l}");
                let p = l["usage"]["prompt_tokens"].as_u64().unwrap();
                assert_eq!(l["source"]["input_tokens"], p, "{l}");
                assert_eq!(l["expected_prompt_tokens"], p, "{l}");
                assert_eq!(l["usage"]["completion_tokens"], l["sent_max_tokens"], "{l}");
                assert!((40..=90).contains(&p), "{l}");
                sent.entry(arm)
                    .or_default()
                    .push((p, l["sent_max_tokens"].as_u64().unwrap()));
            }
        }
    }
    assert_eq!(sent["inc"].len(), 10);
    assert_eq!(
        sent["inc"], sent["cand"],
        "the same lengths in the same order"
    );

    // Shared prefixes: every prompt is the matched 64 tokens, the first 32 shared by its group.
    let t = Camp::new();
    let file = write(
        &t,
        "",
        "[workload.shared_prefix]\ntokens = 32\ngroups = 2\n",
    );
    let b = t.run_ok("inc", &file);
    let r = json(&b.join("campaign-result.json"));
    assert_eq!(r["workload"]["source"]["kind"], "shared-prefix", "{r:#}");
    // The whole prompt is the matched prompt: reported as matched.
    assert_eq!(r["workload"]["matched_prompt_tokens_reported"]["cand"], 64);
    for arm in ["inc", "cand"] {
        let steps = timing_lines(&b, arm);
        let (file, lines) = &steps[1];
        let mut seen = std::collections::BTreeSet::new();
        for l in lines {
            assert_eq!(l["prompt_tokens"], 64, "{l}");
            let g = l["prefix_group"].as_u64().unwrap();
            assert_eq!(g, l["index"].as_u64().unwrap() % 2, "{l}");
            let cached = l["cached_tokens"].as_u64().unwrap();
            if seen.insert(g) {
                assert_eq!(
                    cached, 0,
                    "{file}: the first of group {g} hit the cache: {l}"
                );
            } else {
                assert_eq!(cached, 32, "{file}: {l}");
            }
        }
        let ev = json(&b.join(file));
        let rows = ev["workload"]["shared_prefix"]["per_group"]
            .as_array()
            .unwrap();
        assert_eq!(rows.len(), 2, "{ev:#}");
        assert_eq!(ev["prompt"]["shared_prefix"]["tokens"], 32);
        assert_eq!(ev["prompt"]["target_tokens"], 64);
    }
}

#[test]
fn the_dataset_example_loads_and_plans_with_its_digest() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let c = campaign::load(&root.join("examples/campaigns/reference-dataset.toml"))
        .unwrap_or_else(|e| panic!("{e}"));
    let d = c.workload.dataset.as_ref().unwrap();
    assert_eq!(d.path, root.join("examples/datasets/sample.jsonl"));
    assert_eq!(d.sha256, sha256(&d.path));
    assert_eq!(d.items_in_file, 40);
    let p = campaign::plan(&c);
    // 1 cold + 6 warm + 4 × 6 at c4 = 31 items per arm, numbered in plan order.
    let firsts: Vec<Option<u64>> = p
        .steps_for("fast-arm")
        .filter_map(|s| match &s.kind {
            campaign::StepKind::Timing { first_item, .. } => Some(*first_item),
            _ => None,
        })
        .collect();
    assert_eq!(firsts, [Some(0), Some(1), Some(7)]);
    assert!(p
        .evidence_files()
        .contains(&"fast-arm-timing-dataset-c4-warm.json"));
    let text = p.render(&campaign::Mask::none());
    assert!(text.contains(&format!("sha256 {}", d.sha256)), "{text}");
}

#[test]
fn compare_names_a_different_workload_source() {
    use bakeoff::evidence::result::CampaignResult;
    use bakeoff::report::compare::differences;
    let matched = CampaignResult::default();
    let mut a = CampaignResult::default();
    a.workload.source = Some(
        serde_json::json!({"kind": "dataset", "path": "/a/x.jsonl", "sha256": "aa", "sample": 4}),
    );
    let mut b = a.clone();
    // The same file elsewhere is the same workload.
    b.workload.source.as_mut().unwrap()["path"] = "/b/x.jsonl".into();
    assert!(differences(&a, &b).is_empty());
    b.workload.source.as_mut().unwrap()["sha256"] = "bb".into();
    let d = differences(&a, &b);
    assert_eq!(d.len(), 1, "{d:?}");
    assert_eq!(d[0].field, "workload source");
    let d = differences(&matched, &a);
    assert_eq!(d[0].a, "the matched prompt", "{d:?}");
}

/// Loads a campaign of `workload` keys and `tables` (the file is in a temp dir beside a
/// `data/` folder holding a copy of the sample), with `edits` (from, to) applied to its text: the
/// errors, FILE for its path.
fn load_edited(workload: &str, tables: &str, edits: &[(&str, &str)]) -> String {
    let d = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(d.path().join("data")).unwrap();
    std::fs::copy(sample(), d.path().join("data/sample.jsonl")).unwrap();
    let t = Camp {
        dir: d,
        port: 18997,
    };
    let p = write(&t, workload, tables);
    let mut text = std::fs::read_to_string(&p).unwrap();
    for (from, to) in edits {
        assert!(text.contains(from), "{from}");
        text = text.replace(from, to);
    }
    std::fs::write(&p, text).unwrap();
    match campaign::load(&p) {
        Ok(_) => String::new(),
        Err(e) => e.to_string().replace(&p.display().to_string(), "FILE"),
    }
}

fn load(workload: &str, tables: &str) -> String {
    load_edited(workload, tables, &[])
}

#[test]
fn bad_workload_sources_are_one_line_errors_naming_the_file_field_and_fix() {
    // Loads, with the digest and item count read at load.
    assert_eq!(
        load("", "[workload.dataset]\npath = \"data/sample.jsonl\"\n"),
        ""
    );
    let e = load("", "[workload.dataset]\npath = \"data/missing.jsonl\"\n");
    assert!(
        e.contains(": workload.dataset.path: dataset file ") && e.starts_with("FILE:")
            && e.contains("data/missing.jsonl does not exist; give the path of a JSONL or ShareGPT JSON file, relative to the campaign file's directory"),
        "{e}"
    );
    let e = load(
        "",
        "[workload.dataset]\npath = \"data/sample.jsonl\"\nmin_prompt_tokens = 90\nmax_prompt_tokens = 50\n",
    );
    assert!(
        e.contains("workload.dataset.min_prompt_tokens: min_prompt_tokens 90 is above max_prompt_tokens 50; no item could pass; lower min_prompt_tokens or raise max_prompt_tokens"),
        "{e}"
    );
    // An output filter no item passes: the sample would be empty.
    let e = load(
        "",
        "[workload.dataset]\npath = \"data/sample.jsonl\"\nmax_output_tokens = 3\n",
    );
    assert!(
        e.contains("workload.dataset.max_output_tokens: no item of ")
            && e.contains("passes max_output_tokens = 3 (the shortest output is 8 tokens); the sample would be empty; raise max_output_tokens to at least 8"),
        "{e}"
    );
    let e = load(
        "",
        "[workload.dataset]\npath = \"data/sample.jsonl\"\nformat = \"sharegpt\"\n",
    );
    assert!(
        e.contains("workload.dataset.path: the dataset is refused: "),
        "{e}"
    );
    let e = load(
        "",
        "[workload.synthetic]\ninput_tokens = \"uniform:512:128\"\n",
    );
    assert!(
        e.contains("workload.synthetic.input_tokens: workload.synthetic.input_tokens uniform:512:128: LO 512 is above HI 128; write uniform:128:512"),
        "{e}"
    );
    let e = load("", "[workload.synthetic]\ninput_tokens = \"zipf:3\"\n");
    assert!(
        e.contains("expected fixed:N, uniform:LO:HI, normal:MEAN:STD or lognormal:MEAN:STD")
            && e.contains("; write input_tokens = \"fixed:N\""),
        "{e}"
    );
    let e = load("", "[workload.synthetic]\nseed = 3\n");
    assert!(
        e.contains(
            "workload.synthetic: [workload.synthetic] gives neither input_tokens nor output_tokens"
        ),
        "{e}"
    );
    // Two sources: refused as bench refuses the combination.
    let e = load(
        "",
        "[workload.dataset]\npath = \"data/sample.jsonl\"\n[workload.synthetic]\noutput_tokens = \"fixed:8\"\n",
    );
    assert!(
        e.contains(
            "workload.synthetic: [workload.dataset] and [workload.synthetic] cannot be combined"
        ) && e.contains("bakeoff bench refuses --dataset with --input-tokens-dist")
            && e.contains("; keep one workload source"),
        "{e}"
    );
    // Conversations opened with a shared prefix, and a dataset's conversations replayed, load
    // (as bench's --multi-turn takes --shared-prefix-tokens or --dataset).
    assert_eq!(
        load(
            "",
            "[workload.conversation]\nturns = 2\n[workload.shared_prefix]\ntokens = 16\n",
        ),
        ""
    );
    assert_eq!(
        load(
            "",
            "[workload.conversation]\nturns = 1\n[workload.dataset]\npath = \"data/sample.jsonl\"\n",
        ),
        ""
    );
    // Its length filters cannot apply to a replayed conversation.
    let e = load(
        "",
        "[workload.conversation]\nturns = 1\n[workload.dataset]\npath = \"data/sample.jsonl\"\nmax_prompt_tokens = 500\n",
    );
    assert!(
        e.contains("workload.dataset.max_prompt_tokens: max_prompt_tokens can't filter a replayed conversation")
            && e.contains("; remove max_prompt_tokens"),
        "{e}"
    );
    // A dataset without conversations of that many user turns is refused at load.
    let e = load(
        "",
        "[workload.conversation]\nturns = 40\n[workload.dataset]\npath = \"data/sample.jsonl\"\n",
    );
    assert!(
        e.contains("workload.dataset.path: its conversations cannot be replayed with workload.conversation.turns = 40: ")
            && e.contains("no conversation has 40 user turns (the most any item has is ")
            && e.contains("; give a dataset of `messages` conversations"),
        "{e}"
    );
    let e = load("", "[workload.shared_prefix]\ntokens = 64\n");
    assert!(
        e.contains("workload.shared_prefix.tokens: a shared prefix of 64 tokens does not fit in matched_prompt_tokens = 64")
            && e.contains("give tokens from 1 to 63"),
        "{e}"
    );
    let e = load_edited(
        "",
        "[workload.dataset]\npath = \"data/sample.jsonl\"\n",
        &[(
            "[policy]\n",
            "[policy]\nrequired_evidence_labels = [\"matched-performance\"]\n",
        )],
    );
    assert!(
        e.contains("policy.required_evidence_labels: `matched-performance` can never be claimed"),
        "{e}"
    );
    let e = load("", "[workload.conversation]\nturns = 0\n");
    assert!(e.contains("workload.conversation.turns: "), "{e}");
    // The sample has `messages` items, which the completions API cannot take.
    let e = load(
        "api = \"completions\"\n",
        "[workload.dataset]\npath = \"data/sample.jsonl\"\n",
    );
    assert!(
        e.contains("a `messages` item cannot go to api = \"completions\"")
            && e.contains("; set workload.api = \"chat\""),
        "{e}"
    );
}
