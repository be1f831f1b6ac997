//! Validation bounds: every count, size and duration of a campaign has a range that fits the
//! machine, and a value outside it is refused in one line naming the file, line, field and range.

use crate::support::campaign::{campaign_file, one_error_in_file, ONE_ARM_CAMPAIGN as BASE};
use crate::support::BIN;
use bakeoff::campaign;
use std::process::Command;

/// Loads `text` (one change from BASE) and returns its single error line, checking its form
/// `FILE:LINE: field: problem; fix` with LINE the line holding `needle` and the fix a range.
fn refused(text: &str, needle: &str, field: &str) -> String {
    let (f, msg) = one_error_in_file(text, (needle, 0), field);
    assert!(msg.contains("; give a value from "), "{msg}");
    // The command line: exit 2, the same one line, nothing started.
    let o = Command::new(BIN)
        .args(["run", "--dry-run"])
        .arg(&f.path)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2), "{o:?}");
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(stderr.contains(&msg), "{stderr}");
    msg
}

#[test]
fn absurd_counts_are_refused_naming_the_field_and_range() {
    let m = refused(
        &BASE.replace("concurrency = [1, 2]", "concurrency = [1, 100000000]"),
        "concurrency =",
        "workload.concurrency[1]",
    );
    assert!(m.contains("100000000 is outside the range 1..=4096"), "{m}");
    let m = refused(
        &BASE.replace("warm_repetitions = 2", "warm_repetitions = 4000000000"),
        "warm_repetitions",
        "workload.warm_repetitions",
    );
    assert!(
        m.contains("4000000000 is outside the range 1..=100000"),
        "{m}"
    );
    let m = refused(
        &BASE.replace("max_tokens = 10", "max_tokens = 0"),
        "max_tokens",
        "workload.max_tokens",
    );
    assert!(m.contains("0 is outside the range 1..=1000000"), "{m}");
    let m = refused(
        &BASE.replace(
            "port = 18998",
            "port = 18998\nready_timeout_s = 99999999999",
        ),
        "ready_timeout_s",
        "lane.ready_timeout_s",
    );
    assert!(m.contains("1..=604800"), "{m}");
    let m = refused(
        &format!("{BASE}\n[gates.tools]\nbatch = 50000\n"),
        "batch",
        "gates.tools.batch",
    );
    assert!(m.contains("1..=10000"), "{m}");
    let m = refused(
        &BASE.replace("served_context = 4096", "served_context = 99999999999"),
        "served_context",
        "arms[0].served_context",
    );
    assert!(m.contains("outside the range"), "{m}");
    // The largest values in range load.
    let ok = campaign_file(
        &BASE
            .replace("concurrency = [1, 2]", "concurrency = [1, 4096]")
            .replace("warm_repetitions = 2", "warm_repetitions = 100000"),
    );
    assert_eq!(ok.load_error(), None);
}

#[test]
fn a_broken_suite_is_refused_at_load_and_the_plan_counts_the_cases() {
    let shipped = include_str!("../../../suites/tools.toml");
    let dir = tempfile::tempdir().unwrap();
    let suite = dir.path().join("tools.toml");
    let path = dir.path().join("campaign.toml");
    let text = format!("{BASE}\n[gates.tools]\nsuite = \"tools.toml\"\n");
    std::fs::write(&path, &text).unwrap();
    // A typo in a schema keyword: refused before anything runs, naming the suite's line.
    let typo = shipped.replacen(
        "additionalProperties = false",
        "additionalPropertiesx = false",
        1,
    );
    std::fs::write(&suite, &typo).unwrap();
    let msg = campaign::load(&path).unwrap_err().to_string();
    assert!(!msg.contains('\n'), "{msg}");
    let cline = text.lines().position(|l| l.starts_with("suite =")).unwrap() + 1;
    let sline = typo
        .lines()
        .position(|l| l.contains("additionalPropertiesx"))
        .unwrap()
        + 1;
    assert!(
        msg.starts_with(&format!(
            "{}:{cline}: gates.tools.suite: the suite is refused: {}:{sline}: ",
            path.display(),
            suite.display()
        )),
        "{msg}"
    );
    assert!(msg.contains("; check its spelling"), "{msg}");
    // Fixed: the plan records the suite's digest and its number of cases.
    std::fs::write(&suite, shipped).unwrap();
    let c = campaign::load(&path).unwrap_or_else(|e| panic!("{e}"));
    let p = campaign::plan(&c);
    assert_eq!(p.suites.len(), 1, "{:?}", p.suites);
    let s = &p.suites[0];
    assert_eq!(s.gate, "tools");
    assert_eq!(s.cases, shipped.matches("[[cases]]").count());
    assert_eq!(
        s.sha256,
        bakeoff::gates::suite::sha256_hex(shipped.as_bytes())
    );
    let shown = p.render(&campaign::Mask::none());
    assert!(
        shown.contains(&format!("{} case(s), sha256 {}", s.cases, s.sha256)),
        "{shown}"
    );
}

#[test]
fn a_promotion_table_out_of_range_is_refused_at_load() {
    // Checked when the campaign loads, not first when `bakeoff promote` reads the bundle hours
    // later: the dry run already names the field.
    let (f, m) = crate::support::campaign::one_error_in_file(
        &format!("{BASE}\n[promotion]\nbake_s = 60\ninterval_s = 0\n"),
        ("interval_s", 0),
        "promotion.interval_s",
    );
    assert!(
        m.contains("must be a number > 0 (got 0); give a positive number"),
        "{m}"
    );
    let o = Command::new(BIN)
        .args(["run", "--dry-run"])
        .arg(&f.path)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2), "{o:?}");
    let m = crate::support::campaign::one_error(
        &format!("{BASE}\n[promotion]\nbake_s = 10\ninterval_s = 30\n"),
        ("interval_s", 0),
        "promotion.interval_s",
    );
    assert!(
        m.contains("30 is longer than bake_s 10; make the interval shorter than the bake"),
        "{m}"
    );
    let m = crate::support::campaign::one_error(
        &format!("{BASE}\n[promotion]\nfailure_limit = 0\n"),
        ("failure_limit", 0),
        "promotion.failure_limit",
    );
    assert!(m.contains("must be >= 1"), "{m}");
}
