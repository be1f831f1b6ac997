//! The verdict documents from a hand-built bundle: decision-summary.json validates against the
//! v1 schema, every evidence name is a manifest file, `bakeoff verify` still passes after the
//! render, and `compare` refuses unlike workloads naming the difference.

use crate::support::decide_fixture as fixture;

use bakeoff::evidence::manifest;
use serde_json::{json, Value};

fn schema_errors(v: &Value) -> Vec<String> {
    let schema: Value =
        serde_json::from_str(include_str!("../../data/decision-summary.schema.json")).unwrap();
    let validator = jsonschema::validator_for(&schema).expect("the schema compiles");
    validator
        .iter_errors(v)
        .map(|e| format!("{} at {}", e, e.instance_path()))
        .collect()
}

#[test]
fn the_reference_example_validates_against_the_copied_schema() {
    let ex: Value =
        serde_json::from_str(include_str!("../../data/decision-summary.example.json")).unwrap();
    assert!(schema_errors(&ex).is_empty(), "{:?}", schema_errors(&ex));
    let bad = json!({"schema": "anvil-serving.benchmark-decision-summary/v1"});
    assert!(!schema_errors(&bad).is_empty());
}

#[test]
fn render_all_writes_a_valid_summary_and_keeps_the_bundle_verifiable() {
    let d = tempfile::tempdir().unwrap();
    let r = fixture::seed();
    fixture::write_bundle(d.path(), &r);
    let v = bakeoff::report::render_all(d.path()).unwrap();
    assert_eq!(v.winner.as_deref(), Some("gittensor"));

    let s: Value =
        serde_json::from_slice(&std::fs::read(d.path().join("decision-summary.json")).unwrap())
            .unwrap();
    assert!(schema_errors(&s).is_empty(), "{:?}", schema_errors(&s));
    // The file reads back as the typed document, field for field.
    let typed: bakeoff::report::summary::DecisionSummary =
        serde_json::from_value(s.clone()).expect("the summary reads as its type");
    assert_eq!(typed.to_json(), s);
    assert_eq!(s["decision"]["promotion_authorized"], json!(false));
    assert_eq!(s["complete"], json!(true));
    assert_eq!(s["workload"]["matched_prompt_tokens"], json!(3613));
    assert_eq!(
        s["workload"]["long_context_actual_prompt_tokens"],
        json!({"bounded_64k_arms": 5350, "full_arms": 24400})
    );
    assert_eq!(
        s["headline_results"][0]["candidate"],
        json!("Gittensor RTX5090 NVFP4 target-only")
    );
    assert_eq!(s["headline_results"][0]["ttft_p50_ms"], json!(50.9));
    let classes: Vec<(&str, &str)> = s["failures"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| (f["arm"].as_str().unwrap(), f["class"].as_str().unwrap()))
        .collect();
    assert_eq!(
        classes,
        vec![
            ("gittensor-dspark", "compatibility"),
            ("cometkim-mtp3", "tool-schema"),
            ("quasar-mtp2", "workload-regression")
        ]
    );

    // Every evidence name (and every evidence field anywhere) is a file of the rewritten manifest.
    let (m, problems) = manifest::verify(d.path(), None).unwrap();
    assert!(problems.is_empty(), "{problems:?}");
    let files: Vec<&str> = m.files.iter().map(|f| f.path.as_str()).collect();
    for name in [
        "decision-summary.json",
        "publication-summary.md",
        "report.html",
    ] {
        assert!(files.contains(&name), "{name} not in manifest");
    }
    let mut names: Vec<String> = s["evidence"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_str().unwrap().to_string())
        .collect();
    for part in ["gates", "failures", "headline_results"] {
        names.extend(
            s[part]
                .as_array()
                .unwrap()
                .iter()
                .filter_map(|g| g.get("evidence")?.as_str().map(String::from)),
        );
    }
    assert!(names.len() > 10);
    for n in &names {
        assert!(
            files.contains(&n.as_str()),
            "evidence {n} is not in the manifest"
        );
    }

    let md = std::fs::read_to_string(d.path().join("publication-summary.md")).unwrap();
    for part in [
        "## Identity",
        "## Workload",
        "## Gates",
        "## Headline results",
        "## Failures",
        "## Limitations",
        "## Decision",
        "bakeoff verify",
        "50.9 (50.8–51.0, range 93.75 %)",
        "Medians of 5 requests have no 95 % interval",
    ] {
        assert!(
            md.contains(part),
            "publication-summary.md lacks {part}:\n{md}"
        );
    }

    // Re-rendering is idempotent and still verifies.
    bakeoff::report::render_all(d.path()).unwrap();
    let s2: Value =
        serde_json::from_slice(&std::fs::read(d.path().join("decision-summary.json")).unwrap())
            .unwrap();
    assert_eq!(s, s2);
    assert!(manifest::verify(d.path(), None).unwrap().1.is_empty());
}

#[test]
fn complete_is_false_when_the_incumbent_was_not_restored() {
    let d = tempfile::tempdir().unwrap();
    let mut r = fixture::seed();
    r.restoration.as_mut().unwrap().status = bakeoff::evidence::RestorationStatus::Failed;
    fixture::write_bundle(d.path(), &r);
    bakeoff::report::render_all(d.path()).unwrap();
    let s: Value =
        serde_json::from_slice(&std::fs::read(d.path().join("decision-summary.json")).unwrap())
            .unwrap();
    assert!(schema_errors(&s).is_empty());
    assert_eq!(s["complete"], json!(false));
    assert!(s["decision"]["decision_labels"]
        .as_array()
        .unwrap()
        .contains(&json!("rollback")));
}

#[test]
fn compare_refuses_unlike_workloads_naming_the_difference() {
    let a = fixture::seed();
    let mut b = fixture::seed();
    b.workload.max_tokens = 256;
    b.identity.hardware = "single NVIDIA H200".into();
    let err = bakeoff::report::compare::compare(&a, &b, false)
        .unwrap_err()
        .to_string();
    assert!(err.contains("max_tokens: 64 vs 256"), "{err}");
    assert!(err.contains("hardware"), "{err}");
    assert!(err.contains("--force"), "{err}");
    let c = bakeoff::report::compare::compare(&a, &b, true).unwrap();
    assert_eq!(c.rows.len(), a.arms.len());
    let text = bakeoff::report::compare::render(&c);
    assert!(
        text.contains("warning (--force): workloads differ: max_tokens: 64 vs 256"),
        "{text}"
    );
    // Like workloads compare without force; a shared arm 1% apart inside its CIs is a tie.
    let mut b2 = fixture::seed();
    let g = b2.arms.iter_mut().find(|x| x.id == "gittensor").unwrap();
    g.warm.as_mut().unwrap().ttft_ms = Some(fixture::stat(51.0, 0.5));
    let text = bakeoff::report::compare::render(
        &bakeoff::report::compare::compare(&a, &b2, false).unwrap(),
    );
    assert!(
        text.lines()
            .any(|l| l.starts_with("gittensor ") && l.contains("ttft_ms") && l.contains("tie")),
        "{text}"
    );
}

#[test]
fn cli_report_and_compare() {
    let d1 = tempfile::tempdir().unwrap();
    let d2 = tempfile::tempdir().unwrap();
    fixture::write_bundle(d1.path(), &fixture::seed());
    let mut b = fixture::seed();
    b.workload.concurrency = vec![1, 4];
    fixture::write_bundle(d2.path(), &b);
    let exe = env!("CARGO_BIN_EXE_bakeoff");
    let out = std::process::Command::new(exe)
        .arg("report")
        .arg(d1.path())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(String::from_utf8_lossy(&out.stdout).contains("winner: gittensor"));
    let out = std::process::Command::new(exe)
        .args(["verify"])
        .arg(d1.path())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    let out = std::process::Command::new(exe)
        .arg("compare")
        .arg(d1.path())
        .arg(d2.path())
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("concurrency: [1, 2] vs [1, 4]"), "{err}");
}

#[test]
fn the_policy_recorded_in_the_result_wins_over_the_campaign_copy() {
    // The bundle's campaign.toml says manual promotion; the result records the policy the run
    // used (auto, only labels this campaign can earn), and that is the one the verdict applies.
    let d = tempfile::tempdir().unwrap();
    let mut r = fixture::seed();
    let mut p = fixture::seed_policy();
    p.promotion = bakeoff::campaign::Promotion::Auto;
    p.required_evidence_labels.retain(|l| {
        ![
            "calibrated-kv-quality",
            "agentic-swe-quality",
            "routed-client",
        ]
        .contains(&l.as_str())
    });
    r.policy = Some(p);
    fixture::write_bundle(d.path(), &r);
    let v = bakeoff::report::render_all(d.path()).unwrap();
    assert!(v.promotion_authorized, "{}", v.next_gate);
    // No fallback note: nothing was assumed.
    assert!(
        !v.limitations.iter().any(|l| l.contains("campaign.toml")),
        "{:?}",
        v.limitations
    );
    // The same bundle without the record (an older bundle) falls back to the copy: manual.
    r.policy = None;
    fixture::write_bundle(d.path(), &r);
    let v = bakeoff::report::render_all(d.path()).unwrap();
    assert!(!v.promotion_authorized);
}

#[test]
fn the_headline_shows_each_declared_concurrency_level_and_names_the_ranked_one() {
    let d = tempfile::tempdir().unwrap();
    let mut r = fixture::seed();
    // Levels [1, 4], ranked on concurrency first: no C2 column of dashes, C4 named as ranked.
    r.workload.concurrency = vec![1, 4];
    r.workload.ranking_priority = vec![
        bakeoff::campaign::RankingMetric::Concurrency,
        bakeoff::campaign::RankingMetric::Ttft,
    ];
    for a in &mut r.arms {
        if let Some(mut t) = a.concurrency.remove("2") {
            t.concurrency = 4;
            t.evidence = t.evidence.replace("-c2-", "-c4-");
            a.concurrency.insert("4".into(), t);
        }
    }
    fixture::write_bundle(d.path(), &r);
    bakeoff::report::render_all(d.path()).unwrap();
    let s: Value =
        serde_json::from_slice(&std::fs::read(d.path().join("decision-summary.json")).unwrap())
            .unwrap();
    assert!(schema_errors(&s).is_empty(), "{:?}", schema_errors(&s));
    assert_eq!(s["measurement"]["concurrency_levels"], json!([1, 4]));
    assert_eq!(s["measurement"]["ranked_concurrency_level"], json!(4));
    for h in s["headline_results"].as_array().unwrap() {
        assert!(h["c4_aggregate_tok_s"].as_f64().unwrap() > 0.0, "{h}");
        assert!(h["c1_aggregate_tok_s"].as_f64().unwrap() > 0.0, "{h}");
        assert!(h.get("c2_aggregate_tok_s").is_none(), "{h}");
        // Each interval says what it is: 5 requests, a range with 93.75 % coverage.
        assert_eq!(
            h["ttft_p50_ci"],
            json!({"method": "range", "coverage": 0.9375, "n": 5,
                   "label": "range, 93.75 % coverage; no 95 % interval below 6 requests"}),
            "{h}"
        );
    }
    let md = std::fs::read_to_string(d.path().join("publication-summary.md")).unwrap();
    assert!(
        md.contains("| C1 aggregate tok/s | C4 aggregate tok/s (ranked) | decision |"),
        "{md}"
    );
    assert!(!md.contains("C2 ") && !md.contains("95% CI"), "{md}");
    let html = std::fs::read_to_string(d.path().join("report.html")).unwrap();
    assert!(
        html.contains("<th>C1 tok/s</th><th>C4 tok/s (ranked)</th>"),
        "{html}"
    );
    assert!(!html.contains("95% CI"), "{html}");
}

/// A bundle with a history context (as `bakeoff run --history` writes it before rendering): the
/// lines beyond the history's spread are limitations of a summary that still validates, the
/// lines within it are not (they sit beside the trend link in report.html), the ranking is the
/// one without the history, and re-rendering from the bundle alone gives the same documents.
/// A trend page named but absent is said to be missing, never linked.
#[test]
fn the_history_context_informs_the_limitations_and_not_the_ranking() {
    use bakeoff::evidence::history::{self as hist, HistoryContext};
    let read = |d: &std::path::Path, f: &str| std::fs::read(d.join(f)).unwrap();
    let r = fixture::seed();
    let plain = tempfile::tempdir().unwrap();
    fixture::write_bundle(plain.path(), &r);
    bakeoff::report::render_all(plain.path()).unwrap();
    let without: Value =
        serde_json::from_slice(&read(plain.path(), "decision-summary.json")).unwrap();

    let d = tempfile::tempdir().unwrap();
    fixture::write_bundle(d.path(), &r);
    let beyond = "History: incumbent `inc` ttft_p50@c1 today 51.0 ms; its last 8 runs on this GPU and lane 47.0–48.0 ms: +7 %, beyond its history's spread.";
    let drift = "History: lane 10.0.0.5:8000: its incumbent `inc` drifts from its own history (ttft_p50@c1 +7 %); every arm measured there today shares the drift, so compare them with that in mind.";
    let within = "History: candidate `cand`: its 5 single-stream figures today lie within its last 8 runs on this GPU and lane.";
    let cx = HistoryContext {
        schema: hist::SCHEMA.into(),
        store: "/var/lib/bakeoff/history.sqlite".into(),
        written_at: "2026-12-01T10:00:00Z".into(),
        lines: vec![beyond.into(), drift.into()],
        informational: vec![within.into()],
        trend: Some("history-trend.html".into()),
    };
    hist::write(d.path(), &cx).unwrap();
    std::fs::write(d.path().join("history-trend.html"), "<html>trend</html>").unwrap();
    manifest::write(d.path()).unwrap();
    bakeoff::report::render_all(d.path()).unwrap();

    let s: Value = serde_json::from_slice(&read(d.path(), "decision-summary.json")).unwrap();
    assert!(schema_errors(&s).is_empty(), "{:?}", schema_errors(&s));
    let lim: Vec<&str> = s["limitations"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| l.as_str().unwrap())
        .collect();
    let theirs: Vec<&str> = lim
        .iter()
        .copied()
        .filter(|l| l.starts_with("History:"))
        .collect();
    assert_eq!(theirs, [beyond, drift]);
    let mut rest = s["limitations"].clone();
    rest.as_array_mut()
        .unwrap()
        .retain(|l| !l.as_str().unwrap().starts_with("History:"));
    assert_eq!(rest, without["limitations"]);
    for field in [
        "decision",
        "headline_results",
        "gates",
        "failures",
        "identity",
    ] {
        assert_eq!(s[field], without[field], "{field} changed with the history");
    }
    let md = String::from_utf8(read(d.path(), "publication-summary.md")).unwrap();
    assert!(
        md.contains(beyond) && md.contains("drifts from its own history"),
        "{md}"
    );
    assert!(!md.contains("`cand`: its 5"), "{md}");
    let page = String::from_utf8(read(d.path(), "report.html")).unwrap();
    assert!(page.contains("<a href=\"history-trend.html\">history-trend.html</a>"));
    let li = page
        .find("<li>History: candidate `cand`: its 5")
        .expect("the within line is shown");
    assert!(
        li < page.find("<h2>Limitations</h2>").unwrap(),
        "shown apart from the limitations"
    );
    assert!(manifest::verify(d.path(), None).unwrap().1.is_empty());

    // `bakeoff report DIR` again: the bundle alone gives the same verdict.
    let first: Vec<Vec<u8>> = [
        "decision-summary.json",
        "publication-summary.md",
        "report.html",
    ]
    .iter()
    .map(|f| read(d.path(), f))
    .collect();
    bakeoff::report::render_all(d.path()).unwrap();
    for (f, b) in [
        "decision-summary.json",
        "publication-summary.md",
        "report.html",
    ]
    .iter()
    .zip(first)
    {
        assert_eq!(read(d.path(), f), b, "{f} differs on a re-render");
    }

    // The trend page gone: no link to a file that is not there.
    std::fs::remove_file(d.path().join("history-trend.html")).unwrap();
    manifest::write(d.path()).unwrap();
    bakeoff::report::render_all(d.path()).unwrap();
    let page = String::from_utf8(read(d.path(), "report.html")).unwrap();
    assert!(!page.contains("href=\"history-trend.html\""));
    assert!(page.contains("the trend page history-trend.html is missing from this bundle"));
}
