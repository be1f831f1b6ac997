//! The acceptance test of the history: 30 reference-engine campaigns on one lane, each added by
//! the campaign's `[history]` table (the last by `--history`); the incumbent's profile gets slower at run 20 (index 20). The TTFT
//! regression is found there with the profile change named; the candidate's unchanged series
//! has no change point. The smallest campaign that runs: two arms, one smoke gate, three warm
//! requests (about 2 s a campaign on the 2-core VM).

use crate::support::campaign::{cleanup, reference_arm, run, text, Camp};
use std::process::Command;
use std::time::Instant;

const RUNS: usize = 30;
const STEP_AT: usize = 20;

fn campaign(t: &Camp) -> std::path::PathBuf {
    let mut s = t.head("history-acceptance", "");
    s.push_str(
        r#"
[workload]
ranking_priority = ["ttft"]
matched_prompt_tokens = 64
max_tokens = 4
warm_repetitions = 3
concurrency = [1]

[gates]
preflight = ["smoke"]

[policy]
required_gates = ["smoke", "restoration"]

[history]
db = "history.sqlite"
"#,
    );
    for (id, role) in [("inc", "incumbent"), ("cand", "candidate")] {
        s.push_str(&reference_arm(id, role, id, ""));
    }
    let p = t.path("campaign.toml");
    std::fs::write(&p, s).unwrap();
    p
}

#[test]
fn thirty_campaigns_find_the_slower_profile_at_run_20_and_nothing_else() {
    let _g = crate::support::exclusive();
    let started = Instant::now();
    let t = Camp::new();
    let db = t.path("history.sqlite");
    let file = campaign(&t);
    t.profile(
        "cand",
        "ttft_ms = 60\ndecode_tok_s = 400\ncontext_tokens = 4096",
    );
    let mut last = None;
    for n in 0..RUNS {
        let ttft = if n >= STEP_AT { 90 } else { 60 };
        t.profile(
            "inc",
            &format!("ttft_ms = {ttft}\ndecode_tok_s = 400\ncontext_tokens = 4096"),
        );
        let out = t.path(&format!("out-{n:02}"));
        // The campaign's `[history] db` (relative to it); the last run names it with --history.
        let mut args = vec![file.to_str().unwrap(), "--output", out.to_str().unwrap()];
        if n == RUNS - 1 {
            args.extend(["--history", db.to_str().unwrap()]);
        }
        let o = run(&args);
        let all = text(&o);
        if !o.status.success() || !all.contains("added to") {
            cleanup(&out, None, t.port);
            panic!("run {n}: {all}");
        }
        if n == STEP_AT {
            assert!(
                all.contains("incumbent `inc` ttft_p50@c1 today")
                    && all.contains("beyond its history's spread"),
                "run {n} does not set today's TTFT beside its history: {all}"
            );
        }
        last = Some(out);
    }
    cleanup(last.as_ref().unwrap(), None, t.port);
    let runs_s = started.elapsed().as_secs_f64();

    let o = Command::new(crate::support::BIN)
        .args([
            "history",
            "regressions",
            "--metric",
            "ttft_p50@c1",
            "--fail-on",
            "10",
            "--db",
        ])
        .arg(&db)
        .output()
        .unwrap();
    let out = String::from_utf8_lossy(&o.stdout).to_string();
    assert_eq!(
        o.status.code(),
        Some(1),
        "the gate did not trip: {}",
        text(&o)
    );
    let found: Vec<&str> = out
        .lines()
        .filter(|l| l.starts_with("REGRESSION") || l.starts_with("improvement"))
        .collect();
    assert_eq!(found.len(), 1, "{out}");
    assert!(found[0].contains("inc (reference, m) ttft_p50@c1"), "{out}");
    assert!(
        found[0].contains("changed there: profile/program fingerprint"),
        "{out}"
    );
    let at = (STEP_AT - 1..=STEP_AT + 1).any(|n| found[0].contains(&format!("out-{n:02}")));
    assert!(at, "the change is not at run {STEP_AT} ± 1: {out}");
    eprintln!(
        "history acceptance: {RUNS} campaigns in {runs_s:.1} s, whole test {:.1} s",
        started.elapsed().as_secs_f64()
    );
}
