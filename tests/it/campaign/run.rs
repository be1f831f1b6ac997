//! `bakeoff run` on reference-engine arms: a full campaign, failing arms, signals, resume,
//! preconditions, secrets.

use crate::support::campaign;

use crate::support::json_doc::doc;
use campaign::*;
use serde_json::Value;
use std::time::{Duration, Instant};

// Faults, signals and failure classes, no timing figure: beside other tests that take it too.
use crate::support::shared as serial;

const FAST: &str = "ttft_ms = 10\ndecode_tok_s = 400\ncontext_tokens = 4096";
const SECRET: &str = "sekrit-value-8c1f2a77d3";

#[test]
fn full_campaign_with_failing_arms_completes_and_verifies() {
    let _g = serial();
    let t = Camp::new();
    t.profile("inc", FAST);
    t.profile(
        "fast",
        "ttft_ms = 5\ndecode_tok_s = 600\ncontext_tokens = 4096",
    );
    t.profile("crashy", &format!("{FAST}\ncrash_after_requests = 8"));
    t.profile(
        "dies",
        &format!("{FAST}\nfail_at_startup = \"CUDA out of memory: simulated\""),
    );
    t.profile("slow", &format!("{FAST}\nstartup_ms = 60000"));
    let proc_arm = format!(
        r#"
[[arms]]
id = "proc-arm"
role = "candidate"
engine = "reference as a process"
model = "m"
served_model = "fast"
served_context = 4096
long_context_profile = "full"
[arms.process]
argv = ["{bin}", "engine", "--profile", "fast.toml", "--host", "127.0.0.1", "--port", "{port}"]
env = {{ API_TOKEN = {{ from_env = "BAKEOFF_TEST_SECRET" }}, OTHER = "x" }}
"#,
        bin = BIN,
        port = t.port
    );
    let file = t.write(
        &[
            ("inc", "inc"),
            ("fast", "fast"),
            ("crashy", "crashy"),
            ("dies", "dies"),
            ("slow", "slow"),
        ],
        "",
        &proc_arm,
    );
    // The never-ready arm needs a short ready timeout: all arms share the lane's.
    let toml = std::fs::read_to_string(&file)
        .unwrap()
        .replace("ready_timeout_s = 20", "ready_timeout_s = 3");
    std::fs::write(&file, toml).unwrap();
    let inc = t.start_incumbent("inc");
    let t0 = Instant::now();
    let o = std::process::Command::new(BIN)
        .arg("run")
        .arg(&file)
        .arg("--no-progress")
        .arg("--json")
        .env("BAKEOFF_TEST_SECRET", SECRET)
        .output()
        .unwrap();
    eprintln!("campaign took {:.1} s", t0.elapsed().as_secs_f64());
    let b = t.bundle();
    let r = json(&b.join("campaign-result.json"));
    let cleanup_after = || cleanup(&b, None, t.port);
    assert!(o.status.success(), "{}\n{r:#}", text(&o));
    assert_eq!(r["complete"], true, "{r:#}");
    verify(&b);
    // `--json`: the run's last words as one document (docs/agents.md), from the same values.
    let d = doc(&o);
    assert_eq!(
        (&d["complete"], &d["interrupted"]),
        (&true.into(), &().into())
    );
    assert_eq!(d["bundle"], b.display().to_string());
    let root = json(&b.join("artifact-manifest.json"))["root_sha256"].clone();
    assert_eq!(d["root_digest"], root, "{d:#}");
    let status = |id: &str| {
        let a = d["arms"].as_array().unwrap().iter().find(|a| a["id"] == id);
        let a = a.unwrap_or_else(|| panic!("{id}: {d:#}"));
        (a["status"].clone(), a["failure"]["class"].clone())
    };
    assert_eq!(status("crashy"), ("failed".into(), "crash".into()));
    assert_eq!(status("dies"), ("failed".into(), "compatibility".into()));
    assert_eq!(status("fast"), ("completed".into(), ().into()));
    let failed: Vec<&Value> = d["verdict"]["failures"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| &f["arm"])
        .collect();
    assert!(failed.contains(&&Value::from("crashy")), "{d:#}");
    assert_eq!(d["winner"], d["verdict"]["winner"]);
    assert_eq!(d["restoration"]["status"], "passed", "{d:#}");
    // arm-stats.csv: a row per timed step, equal to the step files.
    let rows = crate::bench_export::campaign_csv_equals_step_files(&b);
    for step in ["cold", "warm", "c2"] {
        assert!(
            rows.contains(&("fast".to_string(), step.to_string())),
            "{rows:?}"
        );
    }
    // The verdict was derived from the verified bundle (report refuses nothing it wrote).
    assert!(
        !text(&o).contains("could not be written") && b.join("decision-summary.json").exists(),
        "{}",
        text(&o)
    );
    let arm = |id: &str| {
        r["arms"]
            .as_array()
            .unwrap()
            .iter()
            .find(|a| a["id"] == id)
            .unwrap()
            .clone()
    };
    // The full arm: timings, gates, long context.
    let fast = arm("fast");
    assert_eq!(fast["status"], "completed", "{fast:#}");
    assert!(fast["cold"]["ttft_ms"]["p50"].as_f64().unwrap() > 0.0);
    assert_eq!(fast["warm"]["requests_ok"], 2);
    assert_eq!(fast["concurrency"]["2"]["requests_ok"], 4);
    assert_eq!(fast["long_context"]["actual_prompt_tokens"][0], 600);
    assert!(fast["gates"].as_array().unwrap().len() >= 5);
    // A crash mid-run fails that step; the campaign goes on.
    let crashy = arm("crashy");
    assert_eq!(crashy["status"], "failed");
    assert_eq!(crashy["failure"]["class"], "crash", "{crashy:#}");
    assert!(
        !crashy["quality_risk_lines"].as_array().unwrap().is_empty(),
        "{crashy:#}"
    );
    // Exit at startup: compatibility, fast.
    let dies = arm("dies");
    assert_eq!(dies["failure"]["class"], "compatibility", "{dies:#}");
    let ready = json(&b.join("dies-ready.json"));
    let el = ready["failure"]["elapsed_ms"].as_f64().unwrap();
    assert!(el < 2000.0, "exit detected after {el} ms");
    assert_eq!(ready["failure"]["cause"], "out-of-memory", "{ready:#}");
    // Never ready: killed at its timeout, no orphan.
    let slow = json(&b.join("slow-ready.json"));
    assert_eq!(slow["failure"]["cause"], "timeout", "{slow:#}");
    let stop = json(&b.join("slow-stop.json"));
    assert_eq!(stop["stop"]["group_gone"], true, "{stop:#}");
    assert_eq!(arm("proc-arm")["status"], "completed");
    // Every launched arm's process is gone.
    for a in ["fast", "crashy", "slow", "proc-arm"] {
        let l = json(&b.join(format!("{a}-launch.json")));
        let pid = l["pid"].as_u64().unwrap() as u32;
        assert!(!pid_alive(pid), "{a} pid {pid} still alive");
    }
    // Restoration proven; the incumbent serves again.
    assert_eq!(
        r["restoration"]["status"], "passed",
        "{:#}",
        r["restoration"]
    );
    assert_eq!(listener_model(t.port).as_deref(), Some("inc"));
    // The secret is nowhere in the bundle.
    for e in std::fs::read_dir(&b).unwrap() {
        let p = e.unwrap().path();
        let bytes = std::fs::read(&p).unwrap();
        assert!(
            !String::from_utf8_lossy(&bytes).contains(SECRET),
            "secret found in {}",
            p.display()
        );
    }
    // Overhead recorded.
    let ck = json(&b.join("checkpoint.json"));
    let f = ck["timing"][0]["overhead_fraction"].as_f64().unwrap();
    eprintln!("orchestration overhead {:.3}%", f * 100.0);
    cleanup_after();
    drop(inc);
}

fn wait_for(p: &std::path::Path, limit: Duration) {
    let t = Instant::now();
    while !p.exists() {
        assert!(t.elapsed() < limit, "{} never appeared", p.display());
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn sigint(child: &std::process::Child) {
    // SAFETY: signals the bakeoff process this test started.
    unsafe {
        libc::kill(child.id() as i32, libc::SIGINT);
    }
}

#[test]
fn sigint_during_an_arm_restores_and_resume_completes() {
    let _g = serial();
    let t = Camp::new();
    t.profile("inc", FAST);
    t.profile("a", FAST);
    t.profile(
        "b",
        "ttft_ms = 10\ndecode_tok_s = 20\ncontext_tokens = 4096",
    );
    let file = t.write(&[("inc", "inc"), ("a", "a"), ("b", "b")], "", "");
    let mut inc = Some(t.start_incumbent("inc"));
    let b = t.bundle();
    let child = std::process::Command::new(BIN)
        .arg("run")
        .arg(&file)
        .arg("--no-progress")
        .arg("--json")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // Interrupt during arm b's timing (its slow decode makes the warm step long).
    wait_for(
        &b.join("b-timing-64-c1-cold.json"),
        Duration::from_secs(120),
    );
    sigint(&child);
    let o = child.wait_with_output().unwrap();
    assert_eq!(o.status.code(), Some(130), "{}", text(&o));
    let r = json(&b.join("campaign-result.json"));
    assert_eq!(r["complete"], false);
    let reason = r["incomplete_reason"].as_str().unwrap();
    assert!(
        reason.starts_with("interrupted by SIGINT during b/"),
        "{reason}"
    );
    let d = doc(&o);
    assert_eq!(d["interrupted"], reason, "{d:#}");
    assert_eq!(
        (&d["complete"], &d["incomplete_reason"]),
        (&false.into(), &reason.into())
    );
    let b_arm = d["arms"]
        .as_array()
        .unwrap()
        .iter()
        .find(|a| a["id"] == "b")
        .unwrap();
    assert_eq!(b_arm["status"], "interrupted", "{d:#}");
    verify(&b);
    assert_eq!(listener_model(t.port).as_deref(), Some("inc"));
    if let Some(mut c) = inc.take() {
        let _ = c.wait(); // the test's incumbent was stopped by bakeoff
    }
    let done_a = std::fs::metadata(b.join("a-timing-64-c1-warm.json"))
        .unwrap()
        .modified()
        .unwrap();
    let cold_b = std::fs::metadata(b.join("b-timing-64-c1-cold.json"))
        .unwrap()
        .modified()
        .unwrap();
    // The campaign's random nonce base is in the checkpoint; the resume continues from it.
    let base = json(&b.join("checkpoint.json"))["nonce_base"].clone();
    assert!(base.as_u64().is_some_and(|n| n < 98_000_000), "{base}");
    // Resume: the restored incumbent is stopped again, b continues, all verifies.
    let o = run(&["--resume", b.to_str().unwrap(), "--json"]);
    assert!(o.status.success(), "{}", text(&o));
    let r = json(&b.join("campaign-result.json"));
    assert_eq!(r["complete"], true, "{r:#}");
    let d = doc(&o);
    assert_eq!(
        (&d["resumed"], &d["complete"]),
        (&true.into(), &true.into())
    );
    // Nothing left to resume: still one document, the bundle as it stands.
    let again = doc(&run(&["--resume", b.to_str().unwrap(), "--json"]));
    assert_eq!(
        (&again["nothing_to_run"], &again["timing"]),
        (&true.into(), &().into())
    );
    assert_eq!(again["root_digest"], d["root_digest"]);
    verify(&b);
    assert_eq!(
        std::fs::metadata(b.join("a-timing-64-c1-warm.json"))
            .unwrap()
            .modified()
            .unwrap(),
        done_a
    );
    assert_eq!(
        std::fs::metadata(b.join("b-timing-64-c1-cold.json"))
            .unwrap()
            .modified()
            .unwrap(),
        cold_b
    );
    assert!(b.join("b-timing-64-c2-warm.json").exists());
    let ck = json(&b.join("checkpoint.json"));
    assert_eq!(ck["invocations"], 2);
    assert_eq!(ck["nonce_base"], base);
    // Every timing step, before and after the resume, numbered its prompts from that base, on
    // request indices that never repeat on one server.
    let mut seen = std::collections::HashSet::new();
    for name in ["b-timing-64-c1-cold.json", "b-timing-64-c2-warm.json"] {
        let ev = json(&b.join(name));
        assert_eq!(ev["load"]["nonce_base"], base, "{name}");
        let first = ev["load"]["first_index"].as_u64().unwrap();
        let n = ev["load"]["requests"].as_u64().unwrap();
        assert!(
            (first..first + n).all(|i| seen.insert(i)),
            "{name} repeats an index"
        );
        assert!(ev["prefix_cache_warning"].is_null(), "{name}");
    }
    assert_eq!(listener_model(t.port).as_deref(), Some("inc"));
    cleanup(&b, None, t.port);
}

#[test]
fn sigint_during_restoration_leaves_the_incumbent_running() {
    let _g = serial();
    let t = Camp::new();
    // The incumbent takes a moment to start, so the signal lands during restoration.
    t.profile("inc", &format!("{FAST}\nstartup_ms = 1500"));
    t.profile("a", FAST);
    let file = t.write(&[("inc", "inc"), ("a", "a")], "", "");
    let inc = t.start_incumbent("inc");
    let b = t.bundle();
    let child = std::process::Command::new(BIN)
        .arg("run")
        .arg(&file)
        .arg("--no-progress")
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    wait_for(&b.join("a-stop.json"), Duration::from_secs(120));
    std::thread::sleep(Duration::from_millis(300));
    sigint(&child);
    let o = child.wait_with_output().unwrap();
    assert_eq!(o.status.code(), Some(130), "{}", text(&o));
    let r = json(&b.join("campaign-result.json"));
    assert_eq!(r["complete"], false);
    assert!(
        r["incomplete_reason"]
            .as_str()
            .unwrap()
            .contains("restoration"),
        "{}",
        r["incomplete_reason"]
    );
    assert_eq!(r["restoration"]["status"], "passed");
    verify(&b);
    assert_eq!(listener_model(t.port).as_deref(), Some("inc"));
    cleanup(&b, Some(inc), t.port);
}

#[test]
fn preconditions_stop_the_run_before_any_arm() {
    let _g = serial();
    let t = Camp::new();
    t.profile("inc", FAST);
    t.profile("a", FAST);
    let file = t.write(&[("inc", "inc"), ("a", "a")], "", "");
    // A port held by something that is not the incumbent.
    let l = std::net::TcpListener::bind(("127.0.0.1", t.port)).unwrap();
    let o = run(&[file.to_str().unwrap(), "--json"]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    let d = doc(&o);
    assert_eq!(
        (&d["schema"], &d["refused"]),
        (&"bakeoff.error/1".into(), &true.into())
    );
    assert!(
        d["message"].as_str().unwrap().contains("not the incumbent"),
        "{d:#}"
    );
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("not the incumbent"),
        "{}",
        text(&o)
    );
    assert!(!t.bundle().join("a-launch.json").exists());
    drop(l);
    // An unwritable output directory. A path under a regular file can't be created even by root
    // (CI runs as root, where a read-only directory would still be writable).
    let plain = t.path("plain-file");
    std::fs::write(&plain, b"not a directory").unwrap();
    let out = plain.join("bundle");
    let o = run(&[file.to_str().unwrap(), "--output", out.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("output directory"),
        "{}",
        text(&o)
    );
    assert!(!out.exists());
    // A malformed campaign file.
    let bad = t.path("bad.toml");
    std::fs::write(&bad, "[campaign]\nid = \"x\"\n[lane]\nport = 70000\n").unwrap();
    let o = run(&[bad.to_str().unwrap(), "--json"]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("bad.toml:"),
        "{}",
        text(&o)
    );
    // `--json`: the same diagnostics, each naming the file, in the error document.
    let d = doc(&o);
    let diags = d["diagnostics"].as_array().unwrap();
    assert!(
        !diags.is_empty()
            && diags
                .iter()
                .all(|x| x.as_str().unwrap().contains("bad.toml:")),
        "{d:#}"
    );
    // Dry run sends nothing and prints the plan.
    let o = run(&[file.to_str().unwrap(), "--dry-run"]);
    assert!(o.status.success(), "{}", text(&o));
    assert!(String::from_utf8_lossy(&o.stdout).contains("restoration-preflight"));
    assert!(!t.bundle().exists());
}
