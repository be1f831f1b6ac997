//! The history store on SQLite (the same cases run on a real PostgreSQL server in
//! `tests/infra/postgres.rs`), the SQLite-only failures, and `bakeoff history` end to end.

use crate::support::history::{all_cases, bundle, Run};
use crate::support::json_doc::doc;
use crate::support::{text, BIN};
use bakeoff::history::{DbSpec, Store};
use std::path::Path;
use std::process::{Command, Output};

fn history(db: &Path, args: &[&str]) -> Output {
    Command::new(BIN)
        .arg("history")
        .arg("--db")
        .arg(db)
        .args(args)
        .output()
        .unwrap()
}

#[test]
fn the_store_cases_pass_on_sqlite() {
    let t = tempfile::tempdir().unwrap();
    let root = t.path().to_path_buf();
    all_cases(
        &|name| DbSpec::Sqlite(root.join(format!("{name}.sqlite"))),
        &t.path().join("work"),
    );
}

#[test]
fn a_corrupt_file_is_named_and_left_alone() {
    let t = tempfile::tempdir().unwrap();
    let db = t.path().join("h.sqlite");
    let junk = b"this is not a database, it is a note someone saved here".repeat(100);
    std::fs::write(&db, &junk).unwrap();
    let e = format!(
        "{:#}",
        Store::open(&DbSpec::Sqlite(db.clone())).err().unwrap()
    );
    assert!(
        e.contains("h.sqlite") && e.contains("not a usable history database"),
        "{e}"
    );
    assert_eq!(std::fs::read(&db).unwrap(), junk, "the file was changed");
}

#[test]
fn the_cli_adds_lists_shows_gates_and_reports() {
    let t = tempfile::tempdir().unwrap();
    let db = t.path().join("h.sqlite");
    let mut dirs = Vec::new();
    for n in 0..30 {
        let wob = ((n * 7919) % 11) as f64 / 10.0 - 0.5;
        let mut r = Run::new(n, if n >= 20 { 60.0 } else { 50.0 } + wob, 40.0 + wob);
        if n >= 20 {
            r.inc_profile = "b".repeat(64);
        }
        dirs.push(bundle(t.path(), &r).display().to_string());
    }
    let mut args = vec!["add"];
    args.extend(dirs.iter().map(String::as_str));
    let o = history(&db, &args);
    assert!(o.status.success(), "{}", text(&o));
    assert_eq!(
        String::from_utf8_lossy(&o.stdout).matches("added ").count(),
        30
    );
    // A tampered bundle is refused with the reason; the exit says so.
    std::fs::write(Path::new(&dirs[3]).join("checkpoint.json"), "{}").unwrap();
    let o = history(&db, &["add", &dirs[3], "--json"]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    let d = doc(&o);
    assert_eq!(d["added"][0]["status"], "refused", "{d:#}");
    assert!(
        d["added"][0]["error"]
            .as_str()
            .unwrap()
            .contains("does not verify"),
        "{d:#}"
    );

    let o = history(&db, &["show", "--arm", "inc", "--metric", "ttft"]);
    assert!(o.status.success(), "{}", text(&o));
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(out.contains("profile/program fingerprint"), "{out}");

    let o = history(&db, &["regressions", "--fail-on", "5"]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(
        out.contains("REGRESSION inc (reference, m) ttft_p50@c1"),
        "{out}"
    );
    assert!(
        out.contains("changed there: profile/program fingerprint"),
        "{out}"
    );
    assert!(text(&o).contains("beyond --fail-on 5 %"), "{}", text(&o));
    // Beyond the change: no gate trips; --since after the change lists none.
    let o = history(&db, &["regressions", "--fail-on", "50", "--json"]);
    assert!(o.status.success(), "{}", text(&o));
    let d = doc(&o);
    let c = &d["change_points"][0];
    assert_eq!(
        (&c["regression"], &c["beyond_fail_on"]),
        (&true.into(), &false.into()),
        "{d:#}"
    );
    assert!(
        c["line"].as_str().unwrap().starts_with("REGRESSION inc"),
        "{d:#}"
    );
    let o = history(
        &db,
        &[
            "regressions",
            "--since",
            "2026-11-01T00:00:25Z",
            "--fail-on",
            "5",
        ],
    );
    assert!(o.status.success(), "{}", text(&o));
    assert!(String::from_utf8_lossy(&o.stdout).contains("0 change point(s)"));

    let page = t.path().join("trend.html");
    let o = history(
        &db,
        &[
            "report",
            "--metric",
            "ttft_p50@c1",
            "--html",
            page.to_str().unwrap(),
            "--json",
        ],
    );
    assert!(o.status.success(), "{}", text(&o));
    let d = doc(&o);
    assert_eq!(d["wrote"], page.display().to_string(), "{d:#}");
    assert_eq!(
        d["series"][0]["points"].as_array().unwrap().len(),
        30,
        "{d:#}"
    );
    let html = std::fs::read_to_string(&page).unwrap();
    assert!(
        html.contains("run-020/report.html"),
        "the change's first run is not linked"
    );
}

#[test]
fn the_default_store_lives_under_the_data_dir_and_a_password_in_argv_is_refused() {
    let t = tempfile::tempdir().unwrap();
    let b = bundle(t.path(), &Run::new(1, 50.0, 40.0));
    let o = Command::new(BIN)
        .args(["history", "add"])
        .arg(&b)
        .env("XDG_DATA_HOME", t.path().join("data"))
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", text(&o));
    assert!(t.path().join("data/bakeoff/history.sqlite").is_file());
    let o = Command::new(BIN)
        .args([
            "history",
            "list",
            "--db",
            "postgres://u:hunter2@127.0.0.1:1/h",
        ])
        .output()
        .unwrap();
    // A flag refused before the store is opened: exit 2.
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(
        text(&o).contains("BAKEOFF_HISTORY_PASSWORD"),
        "{}",
        text(&o)
    );
    assert!(
        !text(&o).contains("hunter2"),
        "the password was echoed: {}",
        text(&o)
    );
}
