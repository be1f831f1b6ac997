//! SLO gates in a campaign: validated at load (one line naming the file, the line, the field and
//! the fix), shown in the dry run, checked per level on reference-engine arms: an arm whose
//! engine queues requests at C4 breaks `ttft_p95` there and is rejected with class
//! `slo-violated`, while the other is eligible and ranked by goodput at the named level.

use crate::support::campaign::*;
use crate::support::exclusive as serial;
use serde_json::Value;

/// The incumbent: no KV limit, so C4 runs four streams at once.
const ROOMY: &str = "ttft_ms = 10\ndecode_tok_s = 40\ncontext_tokens = 4096";
/// The candidate: faster at C1, but KV room for two requests of 64 + 8 tokens only, so at C4
/// two requests wait in the queue for a whole answer (8 tokens at 20 tok/s: ~350 ms).
const QUEUED: &str = "ttft_ms = 5\ndecode_tok_s = 20\ncontext_tokens = 4096\nkv_tokens = 150";

const SLO: &str = r#"concurrency_priority_level = 4

[[workload.slo]]
limit = "ttft_p95=200ms"
concurrency = 4

[[workload.slo]]
limit = "e2e_max=5s"

[workload.sampling]
ignore_eos = true
"#;

fn write_campaign(t: &Camp) -> std::path::PathBuf {
    t.profile("roomy", ROOMY);
    t.profile("queued", QUEUED);
    let tail = "\n[[arms]]\nid = \"queued\"\nrole = \"candidate\"\nengine = \"reference\"\nmodel = \"m\"\nlong_context_profile = \"full\"\n[arms.reference]\nprofile = \"queued.toml\"\n";
    let file = t.write(&[("roomy", "roomy")], "", tail);
    let toml = std::fs::read_to_string(&file)
        .unwrap()
        .replace(
            "ranking_priority = [\"ttft\", \"decode_tokens_per_second\"]",
            "ranking_priority = [\"goodput\", \"ttft\"]",
        )
        .replace("concurrency = [1, 2]\n", "concurrency = [1, 2, 4]\n")
        .replace("\n[gates]\n", &format!("{SLO}\n[gates]\n"));
    std::fs::write(&file, toml).unwrap();
    file
}

#[test]
fn an_arm_that_breaks_ttft_p95_at_c4_is_rejected_with_class_slo_violated() {
    let _g = serial();
    let t = Camp::new();
    let file = write_campaign(&t);
    // The dry run shows the gates and the level goodput is compared at.
    let dry = run(&[file.to_str().unwrap(), "--dry-run"]);
    let dry_text = text(&dry);
    assert!(dry.status.success(), "{dry_text}");
    assert!(
        dry_text.contains("slo        ttft_p95=200ms at c4"),
        "{dry_text}"
    );
    assert!(dry_text.contains("e2e_max=5s at every level"), "{dry_text}");
    assert!(
        dry_text.contains("concurrency and goodput compared at c4"),
        "{dry_text}"
    );
    assert!(
        dry_text.contains("SLO ttft p95 <= 200 ms, e2e max <= 5000 ms (and goodput)"),
        "{dry_text}"
    );

    let inc = t.start_incumbent("roomy");
    let o = run(&[file.to_str().unwrap()]);
    let b = t.bundle();
    cleanup(&b, Some(inc), t.port);
    let out = text(&o);
    assert!(o.status.success(), "{out}");
    verify(&b);
    let r = json(&b.join("campaign-result.json"));
    assert_eq!(r["workload"]["concurrency_priority_level"], 4, "{r:#}");
    assert_eq!(r["workload"]["slo"][0]["limit"], "ttft_p95=200ms");
    assert_eq!(r["workload"]["slo"][0]["concurrency"], 4);

    // Every warm level records its checks and goodput, in the result and in its step file.
    for id in ["roomy", "queued"] {
        let a = arm(&r, id);
        for (level, rec) in [
            (1, &a["warm"]),
            (2, &a["concurrency"]["2"]),
            (4, &a["concurrency"]["4"]),
        ] {
            let limits: Vec<&str> = rec["slo"]
                .as_array()
                .unwrap_or_else(|| panic!("{id} C{level}: {rec:#}"))
                .iter()
                .map(|c| c["limit"].as_str().unwrap())
                .collect();
            let want: Vec<&str> = if level == 4 {
                vec!["ttft p95 <= 200 ms", "e2e max <= 5000 ms"]
            } else {
                vec!["e2e max <= 5000 ms"]
            };
            assert_eq!(limits, want, "{id} C{level}");
            let g = &rec["goodput"];
            assert_eq!(g["requests_ok"], rec["requests_ok"], "{id} C{level}: {g}");
            assert!(g["goodput_req_s"].as_f64().is_some(), "{id} C{level}: {g}");
            let step = json(&b.join(rec["evidence"].as_str().unwrap()));
            assert_eq!(step["slo"], rec["slo"], "{id} C{level}");
            assert_eq!(step["goodput"], rec["goodput"], "{id} C{level}");
        }
        assert!(a["cold"].get("slo").is_none(), "cold runs carry no SLO");
    }
    let q4 = &arm(&r, "queued")["concurrency"]["4"];
    let ttft = &q4["slo"][0];
    assert_eq!(ttft["met"], false, "{q4:#}");
    let observed = ttft["observed_ms"].as_f64().unwrap();
    assert!(observed > 200.0, "{observed}");
    // Requests that waited in the queue are not goodput.
    assert!(
        q4["goodput"]["requests_meeting"].as_u64().unwrap()
            < q4["goodput"]["requests_ok"].as_u64().unwrap(),
        "{q4:#}"
    );
    let r4 = &arm(&r, "roomy")["concurrency"]["4"];
    assert_eq!(r4["slo"][0]["met"], true, "{r4:#}");

    let s = json(&b.join("decision-summary.json"));
    // The summary with its new failure class still validates against the v1 schema.
    let schema: Value =
        serde_json::from_str(include_str!("../../data/decision-summary.schema.json")).unwrap();
    let validator = jsonschema::validator_for(&schema).expect("the schema compiles");
    let errors: Vec<String> = validator.iter_errors(&s).map(|e| e.to_string()).collect();
    assert!(errors.is_empty(), "{errors:?}");
    let fails = s["failures"].as_array().unwrap();
    let f = fails
        .iter()
        .find(|f| f["class"] == "slo-violated")
        .unwrap_or_else(|| panic!("{s:#}"));
    let detail = f["detail"].as_str().unwrap();
    assert!(
        detail.starts_with("ttft p95 <= 200 ms broken at C4: observed "),
        "{detail}"
    );
    assert!(
        f["evidence"]
            .as_str()
            .unwrap()
            .starts_with("queued-timing-"),
        "{f}"
    );
    assert_eq!(fails.len(), 1, "{s:#}");
    let summary = std::fs::read_to_string(b.join("publication-summary.md")).unwrap();
    assert!(summary.contains("slo-violated"), "{summary}");
    let v = bakeoff::report::render_all(&b).unwrap();
    // Shown with --nocapture: the figures this run measured.
    eprintln!(
        "slo-violated: {detail}\nqueued C4 goodput: {}\nroomy C4 goodput: {}\nreason: {}",
        q4["goodput"], r4["goodput"], v.reason
    );
    assert_eq!(v.ranking, ["roomy"]);
    assert!(
        v.reason.contains("goodput under the SLOs at C4"),
        "{}",
        v.reason
    );
}

/// Loads the one-arm campaign, measured at 1, 2 and 4, with `prio` as the ranking priority,
/// `workload` lines added after `concurrency` and `tables` after the workload: the one error
/// (FILE for the path), or empty when it loads; and the text.
fn load_prio(prio: &str, workload: &str, tables: &str) -> (String, String) {
    let text = ONE_ARM_CAMPAIGN
        .replace(
            "ranking_priority = [\"ttft\"]",
            &format!("ranking_priority = {prio}"),
        )
        .replace(
            "concurrency = [1, 2]\n",
            &format!("concurrency = [1, 2, 4]\n{workload}"),
        )
        .replace("\n[[arms]]", &format!("{tables}\n[[arms]]"));
    let f = campaign_file(&text);
    let e = f.load_error().unwrap_or_default();
    (e.replace(&f.path.display().to_string(), "FILE"), text)
}

fn load(workload: &str, tables: &str) -> (String, String) {
    load_prio("[\"ttft\"]", workload, tables)
}

#[test]
fn bad_slo_entries_are_one_line_errors_naming_the_field_and_the_fix() {
    // A level that is not measured.
    let t = "\n[[workload.slo]]\nlimit = \"ttft_p95=500ms\"\nconcurrency = 8\n";
    let (e, text) = load("", t);
    let want = format!(
        "FILE:{}: workload.slo[0].concurrency: level 8 is not measured (workload.concurrency lists 1, 2, 4); use one of 1, 2, 4",
        line_of(&text, "concurrency = 8", 0)
    );
    assert!(e.starts_with(&want), "{e}\nwant {want}");
    // A limit that does not parse.
    let t = "\n[[workload.slo]]\nlimit = \"ttft_p97=500ms\"\n";
    let (e, text) = load("", t);
    assert!(
        e.starts_with(&format!(
            "FILE:{}: workload.slo[0].limit: SLO limit `ttft_p97=500ms`: unknown statistic `p97`",
            line_of(&text, "p97", 0)
        )),
        "{e}"
    );
    assert!(e.contains("; give limit = \"ttft_p95=500ms\""), "{e}");
    // The same limit twice at one level.
    let t = "\n[[workload.slo]]\nlimit = \"ttft_p95=500ms\"\n[[workload.slo]]\nlimit = \"ttft_p95=400ms\"\n";
    let (e, _) = load("", t);
    assert!(
        e.contains("workload.slo[1].limit: ttft p95 is limited twice at every level"),
        "{e}"
    );
    // An unknown key.
    let t = "\n[[workload.slo]]\nlimit = \"ttft_p95=500ms\"\nlevel = 4\n";
    let (e, _) = load("", t);
    assert!(e.contains("level"), "{e}");
    // goodput without an SLO.
    let (e, _) = load("", "");
    assert!(e.is_empty(), "the base campaign loads: {e}");
    let (e, _) = load_prio("[\"goodput\"]", "", "");
    assert!(
        e.contains("workload.ranking_priority: `goodput` ranks by requests per second meeting the SLOs, but no SLO is declared; add [[workload.slo]]"),
        "{e}"
    );
    // goodput at a level without an SLO.
    let (e, _) = load_prio(
        "[\"goodput\"]",
        "",
        "\n[[workload.slo]]\nlimit = \"ttft_p95=500ms\"\nconcurrency = 2\n",
    );
    assert!(
        e.contains("`goodput` is compared at level 4, where no SLO applies"),
        "{e}"
    );
    let (e, _) = load_prio(
        "[\"goodput\"]",
        "concurrency_priority_level = 2\n",
        "\n[[workload.slo]]\nlimit = \"ttft_p95=500ms\"\nconcurrency = 2\n",
    );
    assert!(e.is_empty(), "{e}");
    // A priority level that is not measured.
    let (e, text) = load_prio("[\"concurrency\"]", "concurrency_priority_level = 3\n", "");
    assert!(
        e.starts_with(&format!(
            "FILE:{}: workload.concurrency_priority_level: level 3 is not measured (workload.concurrency lists 1, 2, 4); use one of 1, 2, 4, or add 3 to workload.concurrency",
            line_of(&text, "concurrency_priority_level", 0)
        )),
        "{e}"
    );
}
