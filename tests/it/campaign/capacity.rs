//! `[workload.capacity]` on reference-engine arms: an arm that is fastest at low load but
//! saturates early (its KV cache holds one request at a time) loses a capacity-first campaign to
//! a slower-TTFT arm that carries more rate, and the verdict states both brackets and the limit
//! that broke; the dry run prints the step; bad tables are one-line errors naming the file,
//! field and fix.

use crate::support::campaign::*;
use crate::support::exclusive as serial;
use std::path::PathBuf;
use std::process::Command;

/// Fastest alone (5 ms TTFT), but one request at a time (48 KV tokens each, 60 in all) of about
/// 190 ms: past about 5 req/s its queue grows and TTFT with it.
const QUICK: &str =
    "ttft_ms = 5\nprefill_tok_s = 0\ndecode_tok_s = 80\ncontext_tokens = 8192\nkv_tokens = 60";
/// 40 ms TTFT, no KV bound, no slowdown with load: carries every rate probed.
const STEADY: &str = "ttft_ms = 40\nprefill_tok_s = 0\ndecode_tok_s = 400\ncontext_tokens = 8192";

/// A two-arm campaign (`steady` the incumbent, `quick` the candidate) ranked by capacity, then
/// TTFT; `capacity` is the `[workload.capacity]` table's body.
fn write(t: &Camp, capacity: &str) -> PathBuf {
    write_with(t, capacity, "")
}

/// [`write`] with more `[[arms]]` after the two.
fn write_with(t: &Camp, capacity: &str, extra_arms: &str) -> PathBuf {
    t.profile("steady", STEADY);
    t.profile("quick", QUICK);
    let mut s = t.head("capacity", "");
    s.push_str(&format!(
        r#"
[workload]
ranking_priority = ["capacity", "ttft"]
matched_prompt_tokens = 32
max_tokens = 16
warm_repetitions = 3
concurrency = [1]

[workload.sampling]
ignore_eos = true

[workload.capacity]
{capacity}
[gates]
preflight = ["smoke"]

[policy]
required_gates = ["smoke", "restoration"]
"#
    ));
    s.push_str(&reference_arm("steady", "incumbent", "steady", ""));
    s.push_str(&reference_arm("quick", "candidate", "quick", ""));
    s.push_str(extra_arms);
    let p = t.path("campaign.toml");
    std::fs::write(&p, s).unwrap();
    p
}

const SEARCH: &str = "slo = [\"ttft_p95=100ms\"]\nstart_rate = 3.0\nmax_rate = 12.0\nprecision = 0.35\nrequests = 6\narrival = \"constant\"\n";

#[test]
fn an_arm_fastest_at_low_load_that_saturates_early_loses_a_capacity_first_campaign() {
    let _g = serial();
    let t = Camp::new();
    // `quickspec`: quick's engine declared as speculative with `steady` its control; its capacity
    // bracket lies wholly below the control's, a workload regression.
    let spec = reference_arm(
        "quickspec",
        "candidate",
        "quick",
        "speculative = { method = \"eagle3\", control = \"steady\" }\n",
    );
    let file = write_with(&t, SEARCH, &spec);
    let o = Command::new(BIN)
        .args(["run", "--dry-run"])
        .arg(&file)
        .output()
        .unwrap();
    let dry = text(&o);
    assert!(o.status.success(), "{dry}");
    for want in [
        "capacity under SLO ttft p95 <= 100 ms: open-loop probes (constant arrivals) from 3 req/s, doubling then bisecting to 35 %, at most 8 probe(s) up to 12 req/s, 6 request(s) per probe",
        "quick-capacity.json",
    ] {
        assert!(dry.contains(want), "missing {want:?} in:\n{dry}");
    }
    let b = t.run_ok("steady", &file);
    verify(&b);
    let r = json(&b.join("campaign-result.json"));
    // quick is the faster arm at low load.
    let ttft = |id: &str| arm(&r, id)["warm"]["ttft_ms"]["p50"].as_f64().unwrap();
    assert!(ttft("quick") < ttft("steady"), "{r:#}");
    // quick: 3 req/s held, 6 broke (its queue), 4.5 held; steady held up to max_rate.
    let q = &arm(&r, "quick")["capacity"];
    assert_eq!(q["held_rate_per_s"], 4.5, "{q:#}");
    assert_eq!(q["broken_rate_per_s"], 6.0, "{q:#}");
    assert!(
        q["broken_by"]
            .as_str()
            .unwrap()
            .starts_with("ttft p95 <= 100 ms: "),
        "{q:#}"
    );
    let rates: Vec<f64> = q["probes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["rate_per_s"].as_f64().unwrap())
        .collect();
    assert_eq!(rates, [3.0, 6.0, 4.5], "{q:#}");
    let s = &arm(&r, "steady")["capacity"];
    assert_eq!(s["held_rate_per_s"], 12.0, "{s:#}");
    assert!(s["broken_rate_per_s"].is_null(), "{s:#}");
    assert!(s["client_bound_rate_per_s"].is_null(), "{s:#}");
    // Every probe in the step file: rate, goodput, each SLO against its limit, failures.
    let ev = json(&b.join("quick-capacity.json"));
    let probes = ev["probes"].as_array().unwrap();
    assert_eq!(probes.len(), 3, "{ev:#}");
    assert_eq!(probes[1]["outcome"]["outcome"], "broken", "{ev:#}");
    assert_eq!(probes[1]["requests"].as_array().unwrap().len(), 6);
    let p1 = &ev["capacity"]["probes"][1];
    assert_eq!(p1["slo"][0]["met"], false, "{p1:#}");
    assert!(p1["goodput"]["goodput_req_s"].is_number(), "{p1:#}");
    // The verdict: steady wins on capacity; its reason gives both brackets and the limit.
    let d = json(&b.join("decision-summary.json"));
    assert_eq!(d["decision"]["winner_arm"], "steady", "{d:#}");
    let reason = d["decision"]["reason"].as_str().unwrap();
    for want in [
        "capacity under the SLOs (held 12.0 req/s, nothing broke: held up to max_rate 12 req/s;",
        "next best quick: held 4.5 req/s, broke at 6.0 req/s (ttft p95 <= 100 ms: ",
    ] {
        assert!(reason.contains(want), "missing {want:?} in {reason}");
    }
    let decisions = d["arms"].as_array().unwrap();
    let qd = decisions.iter().find(|a| a["id"] == "quick").unwrap();
    let qd = qd["decision"].as_str().unwrap();
    assert!(
        qd.contains("capacity: held 4.5 req/s, broke at 6.0 req/s (ttft p95 <= 100 ms: "),
        "{qd}"
    );
    // The speculative arm is checked against its control on capacity too.
    let f = d["failures"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["candidate"] == "quickspec")
        .unwrap_or_else(|| panic!("quickspec did not fail: {d:#}"));
    assert_eq!(f["class"], "workload-regression", "{f:#}");
    let detail = f["detail"].as_str().unwrap();
    assert!(
        detail.starts_with(
            "capacity fell below its control's: without speculation (steady) held 12.0 req/s"
        ) && detail.contains("; with EAGLE3 held "),
        "{detail}"
    );
    assert_eq!(f["evidence"], "quickspec-capacity.json", "{f:#}");
    let md = std::fs::read_to_string(b.join("publication-summary.md")).unwrap();
    assert!(md.contains("## Capacity under SLOs"), "{md}");
    assert!(
        md.contains("| quick | 4.5 | 6.0 | ttft p95 <= 100 ms: "),
        "{md}"
    );
    csv_capacity_columns_are_checked(&b, q["broken_by"].as_str().unwrap());
}

/// `arm-stats.csv`: each arm's rows carry its bracket (a rate nothing reached is empty, never 0);
/// a cell edited and the manifest sealed again is named by `bakeoff verify`.
fn csv_capacity_columns_are_checked(b: &std::path::Path, quick_broken_by: &str) {
    use bakeoff::report::csv::{document, parse};
    let p = b.join("arm-stats.csv");
    let mut rows = parse(&std::fs::read_to_string(&p).unwrap());
    let h = rows.remove(0);
    let at = |c: &str| h.iter().position(|x| x == c).unwrap();
    let cells = |r: &[String]| -> [String; 4] {
        [
            "capacity_held_rate_per_s",
            "capacity_broken_rate_per_s",
            "capacity_broken_by",
            "capacity_client_bound",
        ]
        .map(|c| r[at(c)].clone())
    };
    let warm = |arm: &str| {
        rows.iter()
            .position(|r| r[at("arm")] == arm && r[at("step")] == "warm")
            .unwrap_or_else(|| panic!("no warm row for {arm}: {rows:?}"))
    };
    assert_eq!(
        cells(&rows[warm("quick")]),
        ["4.5", "6.0", quick_broken_by, "false"]
    );
    assert_eq!(cells(&rows[warm("steady")]), ["12.0", "", "", "false"]);
    // Every row of the arm says the same.
    for r in rows.iter().filter(|r| r[at("arm")] == "quick") {
        assert_eq!(cells(r), cells(&rows[warm("quick")]), "{r:?}");
    }
    let i = warm("quick");
    rows[i][at("capacity_held_rate_per_s")] = "9.0".into();
    std::fs::write(&p, document(&h, &rows)).unwrap();
    bakeoff::evidence::manifest::write(b).unwrap();
    let o = Command::new(BIN).arg("verify").arg(b).output().unwrap();
    let out = text(&o);
    assert!(!o.status.success(), "{out}");
    assert!(
        out.contains("disagrees: arm-stats.csv: arm quick step warm column capacity_held_rate_per_s says \"9.0\", but campaign-result.json and its step files give \"4.5\""),
        "{out}"
    );
}

fn load_error(capacity: &str) -> String {
    let t = Camp::new();
    let p = write(&t, capacity);
    match bakeoff::campaign::load(&p) {
        Ok(_) => String::new(),
        Err(e) => {
            let msg = e.to_string();
            assert_eq!(e.diagnostics.len(), 1, "one error: {msg}");
            let text = std::fs::read_to_string(&p).unwrap();
            let field = msg.split(": ").nth(1).unwrap().rsplit('.').next().unwrap();
            let field = field.split('[').next().unwrap();
            let line = match text.lines().any(|l| l.starts_with(&format!("{field} ="))) {
                true => line_of(&text, &format!("{field} ="), 0),
                false => line_of(&text, "[workload.capacity]", 0),
            };
            msg.replace(&format!("{}:{line}:", p.display()), "FILE:LINE:")
        }
    }
}

#[test]
fn bad_capacity_tables_are_one_line_errors_naming_the_file_field_and_fix() {
    assert_eq!(load_error(SEARCH), "");
    assert_eq!(
        load_error("slo = [\"e2e_p99=2s\"]\nrates = [1.0, 2.0]\nduration_secs = 2\n"),
        ""
    );
    for (table, want) in [
        (
            "slo = [\"ttft_p95=fast\"]\n",
            "FILE:LINE: workload.capacity.slo[0]: SLO limit ",
        ),
        (
            "requests = 4\n",
            "FILE:LINE: workload.capacity.slo: no SLO to search under: capacity is the highest rate at which every SLO holds; give slo = [\"ttft_p95=500ms\"]",
        ),
        (
            "slo = [\"ttft_p95=100ms\"]\nstart_rate = 0\n",
            "FILE:LINE: workload.capacity.start_rate: 0 is not a positive number of requests per second; give a rate above 0, e.g. start_rate = 1.0",
        ),
        (
            "slo = [\"ttft_p95=100ms\"]\nstart_rate = 20.0\nmax_rate = 10.0\n",
            "FILE:LINE: workload.capacity.start_rate: start_rate 20 is above max_rate 10: no probe could run; give a start_rate at or below max_rate",
        ),
        (
            "slo = [\"ttft_p95=100ms\"]\nrates = [2.0, 2.0]\n",
            "FILE:LINE: workload.capacity.rates[1]: rate 2 is listed twice; list each rate once",
        ),
        (
            "slo = [\"ttft_p95=100ms\"]\nrates = [2.0, 100.0]\n",
            "FILE:LINE: workload.capacity.rates[1]: rate 100 is above max_rate 64; raise max_rate or leave the rate out",
        ),
        (
            "slo = [\"ttft_p95=100ms\"]\nmax_steps = 0\n",
            "FILE:LINE: workload.capacity.max_steps: 0 is outside the range 1..=64 (probes per arm); give a value from 1 to 64",
        ),
        (
            "slo = [\"ttft_p95=100ms\"]\nprecision = 0\n",
            "FILE:LINE: workload.capacity.precision: precision 0 is not in (0, 1]; give the relative gap",
        ),
        (
            "slo = [\"ttft_p95=100ms\"]\nmax_failure_share = 1.5\n",
            "FILE:LINE: workload.capacity.max_failure_share: max_failure_share 1.5 is not in [0, 1); give the share",
        ),
        (
            "slo = [\"ttft_p95=100ms\"]\nrequests = 4\nduration_secs = 2\n",
            "FILE:LINE: workload.capacity.duration_secs: both requests and duration_secs size a probe; give one",
        ),
        (
            "slo = [\"ttft_p95=100ms\"]\nrequests = 0\n",
            "FILE:LINE: workload.capacity.requests: 0 is outside the range 1..=100000 (measured requests per probe)",
        ),
        (
            "slo = [\"ttft_p95=100ms\"]\nduration_secs = -1\n",
            "FILE:LINE: workload.capacity.duration_secs: duration_secs -1 is not a positive number of seconds",
        ),
    ] {
        let e = load_error(table);
        assert!(e.starts_with(want), "{table}\nwant {want}\n got {e}");
    }
}

#[test]
fn a_capacity_priority_without_the_table_is_an_error() {
    let t = Camp::new();
    let p = write(&t, SEARCH);
    let text = std::fs::read_to_string(&p).unwrap();
    let cut = text.replace(&format!("[workload.capacity]\n{SEARCH}"), "");
    std::fs::write(&p, &cut).unwrap();
    let e = bakeoff::campaign::load(&p).unwrap_err().to_string();
    let line = line_of(&cut, "ranking_priority", 0);
    assert!(
        e.starts_with(&format!(
            "{}:{line}: workload.ranking_priority: ",
            p.display()
        )),
        "{e}"
    );
    assert!(
        e.contains("`capacity` ranks by the highest request rate every SLO held at, but no capacity search is declared; add [workload.capacity]"),
        "{e}"
    );
}
