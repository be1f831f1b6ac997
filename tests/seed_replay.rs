//! The seed-replay example (`examples/seed-replay/`): the reference verdict
//! (`tests/data/decision-summary.example.json`) recreated with reference-engine arms. Runs the
//! README's command on a copy of the example whose lane port (18190) is replaced by a free one
//! (the README's main job leaves its restored incumbent serving 18190: no test may need that
//! port), then checks the verdict: schema, winner, failure
//! classes, promotion withheld, the incumbent restored, measured figures within 2% of the
//! profiles, and `bakeoff verify`. The restored incumbent is stopped at the end.

// Its own test binary: its figures are held to 2% of the profiles over a run of minutes, so no
// other test may run beside it (in `tests/it/` one would).
#[path = "support/mod.rs"]
mod support;

use support::campaign;

use campaign::*;
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

/// The example's lane port (`[lane] port`, and the gittensor arm's argv).
const EXAMPLE_PORT: &str = "18190";

/// A copy of the example in `dir` with its lane port replaced by `port`: the campaign file.
fn example_on(dir: &Path, port: u16) -> PathBuf {
    let st = Command::new("cp")
        .arg("-a")
        .arg(example())
        .arg(dir)
        .status()
        .unwrap();
    assert!(st.success(), "cp -a {}", example().display());
    let f = dir.join("campaign.toml");
    let text = std::fs::read_to_string(&f).unwrap();
    assert_eq!(
        text.matches(EXAMPLE_PORT).count(),
        3,
        "the example's port moved"
    );
    std::fs::write(&f, text.replace(EXAMPLE_PORT, &port.to_string())).unwrap();
    f
}

fn example() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/seed-replay")
}

/// Stops whatever the campaign restored on the lane, also when an assertion fails.
struct StopRestored(PathBuf, u16);

impl Drop for StopRestored {
    fn drop(&mut self) {
        cleanup(&self.0, None, self.1);
    }
}

fn profile(arm: &str) -> toml::Table {
    let p = example().join(format!("profiles/{arm}.toml"));
    let text = std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
    text.parse().unwrap()
}

fn num(t: &toml::Table, key: &str) -> Option<f64> {
    t.get(key)
        .and_then(|v| v.as_float().or(v.as_integer().map(|i| i as f64)))
}

fn within(what: &str, measured: f64, declared: f64, tol: f64) {
    let rel = (measured - declared).abs() / declared;
    assert!(
        rel <= tol,
        "{what}: measured {measured:.2}, declared {declared:.2} ({:+.2}%, limit {:.0}%)",
        (measured - declared) / declared * 100.0,
        tol * 100.0
    );
}

#[test]
fn seed_replay_reaches_the_reference_verdict() {
    let lane_port = free_port();
    let tmp = tempfile::tempdir().unwrap();
    let file = example_on(&tmp.path().join("example"), lane_port);
    let bundle = tmp.path().join("seed");
    let _stop = StopRestored(bundle.clone(), lane_port);
    let t = Instant::now();
    // The README's command: the example file (on a free port), nothing serving on the lane yet.
    let o = Command::new(BIN)
        .arg("run")
        .arg(&file)
        .arg("--output")
        .arg(&bundle)
        .arg("--no-progress")
        .env("BAKEOFF_BIN", BIN) // kv-scale-warning.sh runs this build's engine
        .output()
        .unwrap();
    let wall = t.elapsed();
    eprintln!("seed-replay run: {:.1} s", wall.as_secs_f64());
    assert!(o.status.success(), "bakeoff run failed: {}", text(&o));
    let out = String::from_utf8_lossy(&o.stdout).to_string() + &String::from_utf8_lossy(&o.stderr);
    assert!(
        out.contains("kill -TERM"),
        "the run says how to stop the restored incumbent: {out}"
    );

    // The summary validates against the schema.
    let s = json(&bundle.join("decision-summary.json"));
    let schema: Value =
        serde_json::from_str(include_str!("data/decision-summary.schema.json")).unwrap();
    let validator = jsonschema::validator_for(&schema).expect("the schema compiles");
    let errors: Vec<String> = validator.iter_errors(&s).map(|e| e.to_string()).collect();
    assert!(errors.is_empty(), "schema errors: {errors:#?}");

    // The same decisions as the reference verdict.
    let d = &s["decision"];
    assert_eq!(d["winner_arm"], "gittensor", "{d:#}");
    assert_eq!(d["promotion_authorized"], false);
    let dl: Vec<&str> = d["decision_labels"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|x| x.as_str())
        .collect();
    assert!(
        dl.contains(&"challenger") && dl.contains(&"no-promotion"),
        "{dl:?}"
    );
    assert!(!dl.contains(&"rollback"), "{dl:?}");
    let el: Vec<&str> = d["evidence_labels"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|x| x.as_str())
        .collect();
    for l in [
        "functional",
        "capacity",
        "matched-performance",
        "bounded-quality",
        "compatibility-failure",
        "exact-restoration",
    ] {
        assert!(el.contains(&l), "evidence label {l} missing: {el:?}");
    }
    let mut failures: Vec<(String, String)> = s["failures"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| {
            (
                f["arm"].as_str().unwrap_or_default().to_string(),
                f["class"].as_str().unwrap_or_default().to_string(),
            )
        })
        .collect();
    failures.sort();
    assert_eq!(
        failures,
        vec![
            ("cometkim-mtp3".to_string(), "tool-schema".to_string()),
            ("gittensor-dspark".to_string(), "compatibility".to_string()),
            ("quasar-mtp2".to_string(), "workload-regression".to_string()),
        ],
        "{:#}",
        s["failures"]
    );

    // The incumbent is restored and proven.
    let r = json(&bundle.join("campaign-result.json"));
    assert_eq!(
        r["restoration"]["status"], "passed",
        "{:#}",
        r["restoration"]
    );
    assert_eq!(
        listener_model(lane_port).as_deref(),
        Some("incumbent-gguf-mtp3"),
        "the restored incumbent serves the lane"
    );

    // Measured figures within 2% of the profiles: warm median TTFT = ttft_ms (prefill is free),
    // warm median decode = decode_tok_s at the matched prompt (long-context slowdown applied).
    let matched = s["workload"]["matched_prompt_tokens"]
        .as_f64()
        .or_else(|| r["workload"]["matched_prompt_tokens"].as_f64())
        .unwrap_or(3613.0);
    let heads = s["headline_results"].as_array().unwrap();
    assert_eq!(
        heads.len(),
        10,
        "every arm but the one that failed to load: {heads:#?}"
    );
    for h in heads {
        let arm = h["arm"].as_str().unwrap();
        let p = profile(arm);
        let ttft = num(&p, "ttft_ms").unwrap();
        let slow = num(&p, "long_context_decode_slowdown").unwrap_or(0.0);
        let decode = num(&p, "decode_tok_s").unwrap() / (1.0 + slow * matched / 1000.0);
        within(
            &format!("{arm} TTFT p50 ms"),
            h["ttft_p50_ms"].as_f64().unwrap(),
            ttft,
            0.02,
        );
        within(
            &format!("{arm} decode p50 tok/s"),
            h["decode_p50_tok_s"].as_f64().unwrap(),
            decode,
            0.02,
        );
    }
    // QUASAR MTP2's long-context decode against its control (the regression's evidence).
    let lc = |id: &str| -> f64 {
        r["arms"]
            .as_array()
            .unwrap()
            .iter()
            .find(|a| a["id"] == id)
            .and_then(|a| a["long_context"]["decode_tok_s"].as_f64())
            .unwrap_or_else(|| panic!("{id}: no long-context decode"))
    };
    let target = 24400.0 / 1000.0;
    within(
        "quasar-mtp2 long-context decode",
        lc("quasar-mtp2"),
        100.0 / (1.0 + 0.068 * target),
        0.02,
    );
    within(
        "quasar-nospec long-context decode",
        lc("quasar-nospec"),
        70.0 / (1.0 + 0.002 * target),
        0.02,
    );

    verify(&bundle);

    // Stop the restored incumbent; nothing is left on the lane.
    cleanup(&bundle, None, lane_port);
    let t = Instant::now();
    while http_get(lane_port, "/health").is_some() && t.elapsed() < Duration::from_secs(10) {
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(
        http_get(lane_port, "/health").is_none(),
        "the incumbent was not stopped"
    );
}
