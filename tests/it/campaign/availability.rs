//! The availability requirement on reference engines: an arm whose engine answers HTTP 500 to
//! some of its timed requests cannot win, with class `availability`, naming the step file and its
//! counts; a declared `max_failed_fraction` above its share lets it through.

use crate::support::campaign::*;
use serde_json::Value;

// Fault seeds and failure classes, no timing figure: beside other tests that take it too.
use crate::support::shared as serial;

const FAST: &str = "ttft_ms = 10\ndecode_tok_s = 400\ncontext_tokens = 4096";

/// `error_rate` 0.1 with this `--seed`: of the arm's first 30 requests the engine fails numbers 7
/// and 10 (`u(seed, n) < 0.1`, docs/reference-engine.md *Faults*): the second warm c1 request and
/// one c2 request; its preflight (1–3), prompt sizing and gates pass. The test fails loudly if
/// the request order ever moves the errors out of the timed steps.
const FLAKY_SEED: u64 = 62;

/// Runs the campaign: incumbent `inc`, candidate `flaky` (faster, but erroring) with `policy`
/// appended to `[policy]`. Returns the bundle dir and the campaign result.
fn run_campaign(t: &Camp, policy_extra: &str, seed: u64) -> (std::path::PathBuf, Value, String) {
    t.profile("inc", FAST);
    t.profile(
        "flaky",
        "ttft_ms = 5\ndecode_tok_s = 600\ncontext_tokens = 4096\nerror_rate = 0.1",
    );
    let tail = format!(
        "\n[[arms]]\nid = \"flaky\"\nrole = \"candidate\"\nengine = \"reference\"\nmodel = \"m\"\nlong_context_profile = \"full\"\n[arms.reference]\nprofile = \"flaky.toml\"\nseed = {seed}\n"
    );
    let file = t.write(&[("inc", "inc")], "", &tail);
    if !policy_extra.is_empty() {
        let toml = std::fs::read_to_string(&file)
            .unwrap()
            .replace("[policy]\n", &format!("[policy]\n{policy_extra}\n"));
        std::fs::write(&file, toml).unwrap();
    }
    let (b, out) = t.run_ok_text("inc", &file);
    let r = json(&b.join("campaign-result.json"));
    (b, r, out)
}

fn arm<'a>(r: &'a Value, id: &str) -> &'a Value {
    r["arms"]
        .as_array()
        .unwrap()
        .iter()
        .find(|a| a["id"] == id)
        .unwrap()
}

/// Seed 0: flaky's tools gate, failed on its one request error (HTTP 500), not a wrong answer.
fn failed_tools_gate<'a>(r: &'a Value, out: &str) -> &'a Value {
    let tools = arm(r, "flaky")["gates"]
        .as_array()
        .unwrap()
        .iter()
        .find(|g| g["name"] == "tools")
        .unwrap();
    assert_eq!(tools["status"], "failed", "{tools:#}\n{out}");
    assert_eq!(
        tools["requests"]["failures_are_request_errors"], true,
        "{tools:#}"
    );
    tools
}

#[test]
fn failed_timed_requests_make_an_arm_ineligible_with_class_availability() {
    let _g = serial();
    let t = Camp::new();
    let (b, r, out) = run_campaign(&t, "", FLAKY_SEED);
    let flaky = arm(&r, "flaky");
    // The seed puts the errors in timed steps, none in a gate (else the gate itself fails).
    for g in flaky["gates"].as_array().unwrap() {
        assert_eq!(g["status"], "passed", "{g:#}\n{out}");
        if let Some(q) = g.get("requests") {
            assert_eq!(q["failed"], 0, "{g:#}");
        }
    }
    // Timed steps with failures, read from their own files.
    let mut timed: Vec<Value> = Vec::new();
    timed.extend(flaky["cold"].as_object().map(|_| flaky["cold"].clone()));
    timed.extend(flaky["warm"].as_object().map(|_| flaky["warm"].clone()));
    for (_, c) in flaky["concurrency"].as_object().unwrap() {
        timed.push(c.clone());
    }
    if let Some(t) = flaky["long_context"]["timing"].as_object() {
        timed.push(Value::Object(t.clone()));
    }
    let failing: Vec<&Value> = timed
        .iter()
        .filter(|t| t["requests_failed"].as_u64().unwrap() > 0)
        .collect();
    assert!(
        !failing.is_empty(),
        "FLAKY_SEED no longer puts an error in a timed step: {r:#}"
    );
    let s = json(&b.join("decision-summary.json"));
    let fails: Vec<&Value> = s["failures"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| f["class"] == "availability")
        .collect();
    assert_eq!(fails.len(), 1, "{s:#}");
    let f = fails[0];
    assert_eq!(f["candidate"], "flaky", "{f:#}");
    let detail = f["detail"].as_str().unwrap();
    let (mut sent_all, mut failed_all) = (0, 0);
    for t in &failing {
        let ev = t["evidence"].as_str().unwrap();
        // The step file's own counts are the ones the verdict names.
        let step = json(&b.join(ev));
        let failed = step["stats"]["failed"].as_u64().unwrap();
        let ok = step["stats"]["ok"].as_u64().unwrap();
        assert_eq!(failed, t["requests_failed"].as_u64().unwrap());
        let bad = step["requests"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|q| q["ok"] == false)
            .count() as u64;
        assert_eq!(bad, failed, "{step:#}");
        assert!(
            step["stats"]["failures_by_class"]["http-status"]["count"].as_u64() == Some(failed),
            "{step:#}"
        );
        let want = format!(
            "{ev}: {failed} of {} failed (http-status ×{failed})",
            ok + failed
        );
        assert!(detail.contains(&want), "{want}\n{detail}");
        failed_all += failed;
        sent_all += ok + failed;
    }
    assert!(
        detail.starts_with(&format!("{failed_all} of ")),
        "{detail} ({sent_all} timed)"
    );
    assert!(detail.contains("the policy allows 0%"), "{detail}");
    assert!(f["evidence"].as_str().unwrap().contains("timing"), "{f:#}");
    // The faster arm lost on availability: the incumbent wins.
    let winner = s["decision"]["winner"].as_str().unwrap_or_default();
    assert!(winner.starts_with("inc "), "{s:#}");
    // The run ends by printing the verdict; the pid of the restored incumbent is said there,
    // never in the documents (it goes stale when the process stops).
    assert!(out.contains("bakeoff run: winner inc: "), "{out}");
    assert!(
        out.contains("bakeoff run: promotion not authorized; next: "),
        "{out}"
    );
    assert!(
        out.contains("bakeoff run: failures: 1\n  flaky availability: 2 of "),
        "{out}"
    );
    assert!(
        out.contains("the restored incumbent keeps serving as pid "),
        "{out}"
    );
    let rest = r["restoration"]["detail"].as_str().unwrap();
    assert!(!rest.contains("pid") && !rest.contains("kill"), "{rest}");
    let md = std::fs::read_to_string(b.join("publication-summary.md")).unwrap();
    assert!(!md.contains("kill -TERM"), "{md}");
    eprintln!("{detail}");
    verify(&b);
}

#[test]
fn a_declared_max_failed_fraction_admits_the_arm() {
    let _g = serial();
    let t = Camp::new();
    let (b, r, _) = run_campaign(&t, "max_failed_fraction = 0.5", FLAKY_SEED);
    assert_eq!(r["policy"]["max_failed_fraction"], 0.5, "{r:#}");
    let s = json(&b.join("decision-summary.json"));
    assert!(
        s["failures"]
            .as_array()
            .unwrap()
            .iter()
            .all(|f| f["class"] != "availability"),
        "{s:#}"
    );
    // Its figures say over how many requests they were computed.
    let reason = s["decision"]["reason"].as_str().unwrap_or_default();
    assert!(reason.contains("over "), "{s:#}");
    // The failures the allowance let through are said wherever its figures are used: its arm
    // decision, the winner's reason when it wins, and the publication summary; the counts are
    // those of the step files (the same walk as the availability check).
    let flaky = arm(&r, "flaky");
    let mut timed: Vec<&Value> = vec![&flaky["warm"]];
    timed.extend(flaky["cold"].as_object().map(|_| &flaky["cold"]));
    timed.extend(flaky["concurrency"].as_object().unwrap().values());
    let failed: u64 = timed
        .iter()
        .map(|t| t["requests_failed"].as_u64().unwrap())
        .sum();
    assert!(
        failed > 0,
        "FLAKY_SEED puts no error in a timed step: {r:#}"
    );
    let want = format!("{failed} of ");
    let tail = "), within the 50% allowance";
    let dec = s["arms"]
        .as_array()
        .unwrap()
        .iter()
        .find(|a| a["id"] == "flaky")
        .unwrap()["decision"]
        .as_str()
        .unwrap();
    // The disclosure ends the decision text.
    let said = dec
        .rfind(&format!("; {want}"))
        .map(|i| &dec[i + 2..])
        .filter(|d| d.ends_with(tail))
        .unwrap_or_else(|| panic!("no disclosure in {dec}"));
    assert!(said.contains("requests failed (http-status"), "{said}");
    assert!(
        said.contains(" at warm") || said.contains(" at C"),
        "{said}"
    );
    if s["decision"]["winner"]
        .as_str()
        .unwrap_or_default()
        .starts_with("flaky")
    {
        assert!(reason.contains(said), "{reason}\n{said}");
    }
    let md = std::fs::read_to_string(b.join("publication-summary.md")).unwrap();
    assert!(md.contains(said), "{said}\n{md}");
    // The incumbent failed nothing: nothing disclosed.
    let inc = s["arms"]
        .as_array()
        .unwrap()
        .iter()
        .find(|a| a["id"] == "inc")
        .unwrap();
    assert!(
        !inc["decision"].as_str().unwrap().contains("allowance"),
        "{inc:#}"
    );
    verify(&b);
}

/// The allowance and a gate agree: a gate whose only failures are request errors counts those
/// requests against `max_failed_fraction`, like a timed step's, and does not fail the arm while
/// the arm's share stays within it (seed 0 fails one tools request, as in the test below).
#[test]
fn a_gate_failed_only_by_request_errors_within_the_allowance_is_disclosed_not_failed() {
    let _g = serial();
    let t = Camp::new();
    let (b, r, out) = run_campaign(&t, "max_failed_fraction = 0.5", 0);
    failed_tools_gate(&r, &out);
    let s = json(&b.join("decision-summary.json"));
    assert!(
        s["failures"]
            .as_array()
            .unwrap()
            .iter()
            .all(|f| f["candidate"] != "flaky"),
        "{s:#}"
    );
    let dec = s["arms"]
        .as_array()
        .unwrap()
        .iter()
        .find(|a| a["id"] == "flaky")
        .unwrap()["decision"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(dec.contains("http-status at tools gate"), "{dec}");
    assert!(dec.contains("within the 50% allowance"), "{dec}");
    verify(&b);
}

/// Seed 0 fails request 25: a tools request (HTTP 500). The tools gate fails on a request error,
/// not on a wrong tool call: its class is `availability`, never `tool-schema`.
#[test]
fn a_gate_failed_by_request_errors_is_classed_availability_not_tool_schema() {
    let _g = serial();
    let t = Camp::new();
    let (b, r, out) = run_campaign(&t, "", 0);
    let tools = failed_tools_gate(&r, &out);
    assert_eq!(
        tools["requests"]["failures_by_class"]["http-status"], 1,
        "{tools:#}"
    );
    let flaky = arm(&r, "flaky");
    assert_eq!(flaky["failure"]["class"], "availability", "{flaky:#}");
    let s = json(&b.join("decision-summary.json"));
    let classes: Vec<&str> = s["failures"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| f["candidate"] == "flaky")
        .map(|f| f["class"].as_str().unwrap())
        .collect();
    assert!(classes.contains(&"availability"), "{s:#}");
    assert!(!classes.contains(&"tool-schema"), "{s:#}");
    verify(&b);
}
