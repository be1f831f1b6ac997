//! The acceptance test of the history: 30 reference-engine campaigns on one lane, each added by
//! the campaign's `[history]` table (the last by `--history`); the incumbent's profile gets slower at run 20 (index 20). The TTFT
//! regression is found there with the profile change named; the candidate's unchanged series
//! has no change point. The smallest campaign that runs: two arms, one smoke gate, three warm
//! requests (about 2 s a campaign on the 2-core VM).

use crate::support::campaign::{cleanup, run, text, Camp, Small};
use std::process::Command;
use std::time::Instant;

const RUNS: usize = 30;
const STEP_AT: usize = 20;

fn campaign(t: &Camp) -> std::path::PathBuf {
    let small = Small {
        ranking: r#""ttft""#,
        max_tokens: 4,
        tables: "[history]\ndb = \"history.sqlite\"\n",
        ..Small::default()
    };
    t.write_small(
        "history-acceptance",
        &small,
        &[("inc", "incumbent"), ("cand", "candidate")],
    )
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
            history_in_the_verdict(&t, &out);
        }
        if n == 0 {
            // No history yet: no line in the verdict, but the trend page (one run) is linked.
            let lim = crate::support::campaign::json(&out.join("decision-summary.json"))
                ["limitations"]
                .to_string();
            assert!(!lim.contains("History:"), "{lim}");
            let page = std::fs::read_to_string(out.join("report.html")).unwrap();
            assert!(page.contains("href=\"history-trend.html\""));
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

/// The run where the incumbent got slower: its line and its lane's drift are limitations of the
/// verdict (the unchanged candidate's line, within its spread, is not), report.html links the trend page in the bundle (this run the last of 21 points), and
/// the verdict without the history (the same bundle re-rendered without its history files) has
/// the same ranking, decision and headline, field for field, and the same other limitations.
fn history_in_the_verdict(t: &Camp, out: &std::path::Path) {
    use crate::support::campaign::json;
    let sum = json(&out.join("decision-summary.json"));
    let lim: Vec<String> = sum["limitations"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| l.as_str().unwrap().to_string())
        .collect();
    assert!(
        lim.iter().any(
            |l| l.starts_with("History: incumbent `inc` ttft_p50@c1 today")
                && l.contains("beyond its history's spread")
        ),
        "{lim:?}"
    );
    assert!(
        lim.iter()
            .any(|l| l.contains("its incumbent `inc` drifts from its own history")),
        "{lim:?}"
    );
    // The candidate, unchanged, lies within its spread: informational (history-context.json,
    // report.html), not a limitation. Its medians are judged; its aggregate throughput is not:
    // that figure has no interval and its step is 3 requests of 4 tokens, so one loaded moment
    // moves it a few percent past the 8 runs' range (seen once in CI: -5 %).
    assert!(
        lim.iter()
            .all(|l| !l.contains("`cand`") || l.contains("`cand` aggregate_tok_s@")),
        "a within-spread line became a limitation: {lim:?}"
    );
    let cx = json(&out.join("history-context.json"));
    assert!(
        cx["informational"]
            .to_string()
            .contains("History: candidate `cand`: its"),
        "{cx}"
    );
    let md = std::fs::read_to_string(out.join("publication-summary.md")).unwrap();
    assert!(
        md.contains("History: incumbent `inc` ttft_p50@c1 today"),
        "{md}"
    );
    let page = std::fs::read_to_string(out.join("report.html")).unwrap();
    assert!(
        page.contains("<a href=\"history-trend.html\">"),
        "no link to the trend"
    );
    assert!(page.contains("<li>History: candidate `cand`: its"));
    let trend = std::fs::read_to_string(out.join("history-trend.html")).unwrap();
    assert!(trend.contains("21 runs;"), "the trend page lacks this run");

    let bare = t.path("without-history");
    let o = Command::new("cp")
        .arg("-r")
        .arg(out)
        .arg(&bare)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", text(&o));
    for f in ["history-context.json", "history-trend.html"] {
        std::fs::remove_file(bare.join(f)).unwrap();
    }
    let o = Command::new(crate::support::BIN)
        .args(["report", "--force"])
        .arg(&bare)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", text(&o));
    let plain = json(&bare.join("decision-summary.json"));
    for field in ["decision", "arms", "headline_results", "gates", "failures"] {
        assert_eq!(sum[field], plain[field], "{field} changed with the history");
    }
    let keep = |v: &serde_json::Value, skip: &str| -> Vec<String> {
        v["limitations"]
            .as_array()
            .unwrap()
            .iter()
            .map(|l| l.as_str().unwrap().to_string())
            .filter(|l| !l.starts_with(skip))
            .collect()
    };
    assert_eq!(
        keep(&sum, "History:"),
        keep(&plain, "Rendered with --force")
    );
    // (The --force note names the missing files; only the link must be gone.)
    assert!(!std::fs::read_to_string(bare.join("report.html"))
        .unwrap()
        .contains("href=\"history-trend.html\""));
    std::fs::remove_dir_all(&bare).unwrap();
}

/// A history store that cannot be read (a file that is no database) is one line: the run
/// completes (exit 0), its bundle has no history file and verifies, its verdict has no history
/// line, and the file is left untouched.
#[test]
fn a_history_that_cannot_be_read_leaves_the_run_as_without_one() {
    let _g = crate::support::exclusive();
    let t = Camp::new();
    let file = campaign(&t);
    for id in ["inc", "cand"] {
        t.profile(
            id,
            "ttft_ms = 60\ndecode_tok_s = 400\ncontext_tokens = 4096",
        );
    }
    let junk = t.path("junk.sqlite");
    std::fs::write(&junk, b"not a database ".repeat(200)).unwrap();
    let out = t.path("out");
    let o = run(&[
        file.to_str().unwrap(),
        "--output",
        out.to_str().unwrap(),
        "--history",
        junk.to_str().unwrap(),
    ]);
    cleanup(&out, None, t.port);
    let all = text(&o);
    assert!(o.status.success(), "{all}");
    assert!(
        all.contains("bakeoff run: history:") && all.contains("the verdict has no history lines"),
        "{all}"
    );
    for f in ["history-context.json", "history-trend.html"] {
        assert!(!out.join(f).exists(), "{f} written");
    }
    crate::support::campaign::verify(&out);
    let lim = crate::support::campaign::json(&out.join("decision-summary.json"))["limitations"]
        .to_string();
    assert!(!lim.contains("History:"), "{lim}");
    assert_eq!(
        std::fs::read(&junk).unwrap(),
        b"not a database ".repeat(200)
    );
}
