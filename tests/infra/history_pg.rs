//! The history store against a real PostgreSQL server (Debian's `postgresql`, in
//! `target/infra/postgres`, started by `scripts/infra/postgres.sh up` when not up yet;
//! `scripts/test.sh` tears it down at exit): the same store cases as SQLite
//! (`tests/support/history.rs`), each in a fresh database, and what only a server can do (a
//! password from the environment, a connection dropped mid-ingest).

use crate::support::history::{all_cases, bundle, count, Run};
use crate::support::{text, BIN};
use bakeoff::history::sql::Value;
use bakeoff::history::{self, DbSpec, Store};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

fn state_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("target/infra/postgres")
}

/// The server's URL (role `bakeoff`, database `postgres`, no password in it); brought up once
/// per test process. The password goes into `BAKEOFF_HISTORY_PASSWORD`, as an operator's would.
fn server() -> &'static (String, String) {
    static UP: OnceLock<(String, String)> = OnceLock::new();
    UP.get_or_init(|| {
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/infra/postgres.sh");
        let o = Command::new(&script)
            .arg("up")
            .arg(state_dir())
            .output()
            .unwrap();
        assert!(o.status.success(), "postgres.sh up failed: {}", text(&o));
        let line = String::from_utf8_lossy(&o.stdout).trim().to_string();
        let url = line
            .strip_prefix("export BAKEOFF_TEST_POSTGRES=")
            .unwrap_or_else(|| panic!("postgres.sh printed {line:?}"))
            .to_string();
        let pw = std::fs::read_to_string(state_dir().join("password")).unwrap();
        std::env::set_var("BAKEOFF_HISTORY_PASSWORD", pw.trim());
        (url, pw.trim().to_string())
    })
}

/// A fresh, empty database on the server (dropped first if a run before left it).
fn fresh_db(name: &str) -> DbSpec {
    let (url, pw) = server();
    let mut c: ::postgres::Config = url.parse().unwrap();
    c.password(pw);
    let mut admin = c.connect(::postgres::NoTls).unwrap();
    let db = format!("hist_{name}");
    admin
        .batch_execute(&format!("DROP DATABASE IF EXISTS {db} WITH (FORCE)"))
        .unwrap();
    admin
        .batch_execute(&format!("CREATE DATABASE {db}"))
        .unwrap();
    DbSpec::Postgres(url.replacen("/postgres", &format!("/{db}"), 1))
}

#[test]
fn the_store_cases_pass_on_postgres() {
    server();
    let t = tempfile::tempdir().unwrap();
    all_cases(&fresh_db, t.path());
}

#[test]
fn a_connection_dropped_mid_ingest_keeps_nothing_of_that_bundle() {
    let db = fresh_db("dropped");
    let t = tempfile::tempdir().unwrap();
    let b = bundle(t.path(), &Run::new(1, 50.0, 40.0));
    let sum = history::summarize(&b).unwrap();
    let mut s = Store::open(&db).unwrap();
    let DbSpec::Postgres(url) = &db else {
        unreachable!()
    };
    let url = url.clone();
    let e = s
        .write(|tx| {
            tx.exec(
                "INSERT INTO bundles (digest, campaign_id, started_at, host, hardware, gpu_model, driver, lane, complete, workload, winner, reason, path, added_at) VALUES (?, 'c', 's', 'h', '', '', '', '', 1, '{}', '', '', '/p', 'now')",
                &[Value::text(&sum.digest)],
            )?;
            let pid = tx.query("SELECT pg_backend_pid()", &[])?[0][0].int().unwrap();
            // Another session ends this one's connection between two statements of the bundle.
            let mut c: ::postgres::Config = url.parse().unwrap();
            c.password(&server().1);
            let mut other = c.connect(::postgres::NoTls).unwrap();
            other.execute("SELECT pg_terminate_backend($1::int, 5000)", &[&(pid as i32)]).unwrap();
            tx.exec("INSERT INTO arms (digest, arm, role, label, recipe, engine, engine_version, model, quantization, speculative, image, program, status, failure, gates) VALUES (?, 'a', '', '', '', '', '', '', '', '', '', '', '', '', '')", &[Value::text(&sum.digest)])?;
            Ok(())
        })
        .unwrap_err();
    let e = format!("{e:#}");
    assert!(
        e.contains("connection to the PostgreSQL server was lost")
            && e.contains("nothing of it was kept"),
        "{e}"
    );
    drop(s);
    let mut s = Store::open(&db).unwrap();
    assert_eq!(count(&mut s), 0, "a half-written bundle is in the history");
    let (_, a) = history::add_bundle(&mut s, &b).unwrap();
    assert_eq!(a, history::Added::New);
}

#[test]
fn the_cli_reads_the_password_from_the_environment_only() {
    let db = fresh_db("cli");
    let DbSpec::Postgres(url) = &db else {
        unreachable!()
    };
    let t = tempfile::tempdir().unwrap();
    let b = bundle(t.path(), &Run::new(1, 50.0, 40.0));
    let o = Command::new(BIN)
        .args(["history", "add", "--db", url])
        .arg(&b)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", text(&o));
    assert!(
        String::from_utf8_lossy(&o.stdout).contains("added "),
        "{}",
        text(&o)
    );
    let o = Command::new(BIN)
        .args(["history", "list", "--db", url])
        .env("BAKEOFF_HISTORY_PASSWORD", "wrong-password-42")
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    let all = text(&o);
    assert!(
        all.contains("cannot connect") && all.contains("BAKEOFF_HISTORY_PASSWORD"),
        "{all}"
    );
    assert!(
        !all.contains("wrong-password-42") && !all.contains(&server().1),
        "{all}"
    );
}
