//! The shipped reference example reaches a verdict: `bakeoff gate` with its default checks (the
//! built-in suites) passes on a reference engine, and `examples/campaigns/reference-dry-run.toml`
//! run as shipped (on a free port, into a temp dir) ends with a winner; its one failing arm is the
//! one its profile says fails (bounded-16k drops a required tool argument).

use crate::support::campaign::*;
use std::path::Path;
use std::process::{Command, Stdio};

#[test]
fn gate_with_default_checks_passes_on_a_reference_engine() {
    let port = free_port();
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut eng = Command::new(BIN)
        .args(["engine", "--profile"])
        .arg(root.join("examples/profiles/reference-50ms-80tps.toml"))
        .args(["--host", "127.0.0.1", "--port", &port.to_string()])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    wait_serving(port, std::time::Duration::from_secs(20));
    let out = tempfile::tempdir().unwrap();
    let o = Command::new(BIN)
        .arg("gate")
        .arg(format!("http://127.0.0.1:{port}"))
        .arg("--out")
        .arg(out.path())
        .output()
        .unwrap();
    let _ = eng.kill();
    let _ = eng.wait();
    assert!(o.status.success(), "{}", text(&o));
    let q = json(&out.path().join("gate-quality.json"));
    assert_eq!(q["status"], "passed", "{q:#}");
    assert_eq!(q["passed"], q["total"], "{q:#}");
}

#[test]
fn the_reference_example_ends_with_a_winner() {
    // A whole campaign whose verdict compares timings, but by margins no neighbour's load can
    // close (the winner's TTFT is 30 ms against 50 and 60; the 40 ms arm fails its tools gate),
    // so it runs beside the other shared tests. Exclusive, its 97 s left CI's second test
    // thread waiting on the lock.
    let _g = crate::support::shared();
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let tmp = tempfile::tempdir().unwrap();
    // The example as shipped, beside its profiles, on a free port and writing into the temp dir.
    let copy = |from: &Path, to: &Path| {
        std::fs::create_dir_all(to).unwrap();
        for e in std::fs::read_dir(from).unwrap() {
            let e = e.unwrap();
            if e.file_type().unwrap().is_file() {
                std::fs::copy(e.path(), to.join(e.file_name())).unwrap();
            }
        }
    };
    let ex = tmp.path().join("examples");
    copy(&root.join("examples/profiles"), &ex.join("profiles"));
    copy(
        &root.join("examples/campaigns/profiles"),
        &ex.join("campaigns/profiles"),
    );
    let port = free_port();
    let text_in = std::fs::read_to_string(root.join("examples/campaigns/reference-dry-run.toml"))
        .unwrap()
        .replace("port = 18181", &format!("port = {port}"))
        .replace(
            "output = \"../../target/campaigns/reference-dry-run\"",
            "output = \"../../out\"",
        );
    assert!(text_in.contains(&format!("port = {port}")));
    let file = ex.join("campaigns/reference-dry-run.toml");
    std::fs::write(&file, text_in).unwrap();
    let bundle = tmp.path().join("out");
    let inc = Command::new(BIN)
        .args(["engine", "--profile"])
        .arg(ex.join("profiles/reference-50ms-80tps.toml"))
        .args(["--host", "127.0.0.1", "--port", &port.to_string()])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    wait_serving(port, std::time::Duration::from_secs(20));
    let o = run(&[file.to_str().unwrap()]);
    cleanup(&bundle, Some(inc), port);
    assert!(o.status.success(), "{}", text(&o));
    let s = json(&bundle.join("decision-summary.json"));
    let winner = s["decision"]["winner"].as_str().unwrap_or_default();
    assert!(winner.starts_with("fast-arm"), "{s:#}");
    // Every arm passed the built-in quality suite except where its profile says otherwise.
    let failures: Vec<(&str, &str)> = s["failures"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| {
            (
                f["candidate"].as_str().unwrap(),
                f["class"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(failures, [("bounded-16k", "tool-schema")], "{s:#}");
    verify(&bundle);
}
