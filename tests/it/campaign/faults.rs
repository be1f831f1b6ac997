//! `bakeoff run` under production faults, on reference-engine arms: two runs on one lane, evidence
//! that cannot be written. See docs/reliability.md for the fault matrix these tests back.

use crate::support::campaign::*;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

// Shared, not exclusive: these tests assert what happens on a fault, not timing figures, so two
// run at once (their campaigns are on their own ports, lock folders and temp dirs); no timing
// test (exclusive) runs beside them.
use crate::support::shared;

const FAST: &str = "ttft_ms = 10\ndecode_tok_s = 400\ncontext_tokens = 4096";
/// A slow decode: the arm's timing steps take seconds, time to act during the arm.
const SLOW: &str = "ttft_ms = 10\ndecode_tok_s = 20\ncontext_tokens = 4096";
const SLOWISH: &str = "ttft_ms = 10\ndecode_tok_s = 60\ncontext_tokens = 4096";

#[test]
fn a_second_run_on_the_lane_is_refused_naming_the_first() {
    let _g = shared();
    let t = Camp::new();
    let file = t.write_profiled(&[("inc", FAST), ("a", SLOW)]);
    let locks = t.path("locks");
    std::fs::create_dir_all(&locks).unwrap();
    // A lock left by a run that died: the first run takes it over and records that.
    let mut dead = Command::new("true").spawn().unwrap();
    let dead_pid = dead.id();
    dead.wait().unwrap();
    let lock_file = bakeoff::lane::lock::lock_path(&locks, "127.0.0.1", t.port);
    std::fs::write(
        &lock_file,
        format!(r#"{{"pid": {dead_pid}, "campaign_id": "dead-run", "bundle": "/gone"}}"#),
    )
    .unwrap();
    let mut first = t.spawn_run("inc", &file, None);
    let b = first.bundle.clone();
    first.wait_for("a-launch.json", Duration::from_secs(120));
    // The second run, same lane, its own output: refused before it touches anything.
    let out2 = t.path("out2");
    let o = run_command(
        &locks,
        &[file.to_str().unwrap(), "--output", out2.to_str().unwrap()],
    )
    .output()
    .unwrap();
    let err = String::from_utf8_lossy(&o.stderr).to_string();
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(err.contains("held by another bakeoff run"), "{err}");
    assert!(err.contains(&format!("pid {}", first.pid())), "{err}");
    assert!(err.contains("campaign `test-campaign`"), "{err}");
    assert!(err.contains(b.to_str().unwrap()), "{err}");
    assert!(!out2.exists(), "the refused run created its output");
    // The first completes undisturbed.
    let (ended, r) = first.end_with(0);
    assert_eq!(r["complete"], true, "{r:#}");
    verify(&b);
    let notes = r["notes"].to_string();
    assert!(
        notes.contains("took over a stale lock") && notes.contains("dead-run"),
        "{notes}"
    );
    assert!(
        ended.err.contains("took over a stale lock"),
        "{}",
        ended.err
    );
    assert_eq!(listener_model(t.port).as_deref(), Some("inc"));
    // Released on exit: the lock names nobody, and the lane can be taken again.
    assert_eq!(std::fs::read_to_string(&lock_file).unwrap(), "");
    // Raw logs (outside the bundle, unmasked) are the owner's only.
    use std::os::unix::fs::PermissionsExt;
    let logs = b.with_file_name("out.logs");
    let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode(&logs), 0o700, "{}", logs.display());
    assert_eq!(mode(&logs.join("a.log")), 0o600);
    assert_eq!(mode(&b.with_file_name("out.incumbent.log")), 0o600);
    // Resuming a complete bundle does nothing to the lane, and says so.
    let before = bakeoff::lane::procnet::find_listeners(t.port)[0].pid;
    let o = run_command(&locks, &["--resume", b.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", text(&o));
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("already complete"),
        "{}",
        text(&o)
    );
    assert_eq!(
        bakeoff::lane::procnet::find_listeners(t.port)[0].pid,
        before
    );
    verify(&b);
    first.cleanup();
}

/// Every step the checkpoint marks done has its evidence file in the bundle.
fn done_steps_have_files(b: &Path) -> usize {
    let ck = json(&b.join("checkpoint.json"));
    let mut n = 0;
    for s in ck["steps"].as_array().unwrap() {
        if s["status"] == "done" {
            let f = s["evidence"].as_str().unwrap();
            assert!(
                b.join(f).is_file(),
                "step {} marked done without {f}",
                s["number"]
            );
            n += 1;
        }
    }
    n
}

#[test]
fn evidence_that_cannot_be_written_stops_the_arm_and_restores() {
    let _g = shared();
    let t = Camp::new();
    let file = t.write_profiled(&[("inc", FAST), ("a", SLOW), ("b", FAST)]);
    let mut run = t.spawn_run("inc", &file, None);
    let b = run.bundle.clone();
    // During arm a, its warm timing file becomes unwritable: a directory in its place (a rename
    // onto a directory fails even for root, so this test cannot be skipped).
    run.wait_for("a-launch.json", Duration::from_secs(120));
    let blocked = b.join("a-timing-64-c1-warm.json");
    std::fs::create_dir(&blocked).unwrap();
    let (ended, r) = run.end_with(1);
    let err = &ended.err;
    assert_eq!(r["complete"], false, "{r:#}");
    let reason = r["incomplete_reason"].as_str().unwrap();
    assert!(reason.contains("evidence could not be written"), "{reason}");
    assert!(err.contains("incomplete"), "{err}");
    let a = arm(&r, "a");
    assert_eq!(a["failure"]["class"], "evidence-unwritable", "{a:#}");
    assert_eq!(a["status"], "interrupted", "{a:#}");
    // Straight to restoration: arm b never launched.
    assert!(!b.join("b-launch.json").exists());
    // The step is not done; every step marked done has its file.
    let ck = json(&b.join("checkpoint.json"));
    let st = ck["steps"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["evidence"] == "a-timing-64-c1-warm.json")
        .unwrap()
        .clone();
    assert_ne!(st["status"], "done", "{st:#}");
    assert!(done_steps_have_files(&b) > 0);
    // The candidate is gone; the incumbent serves.
    let pid = json(&b.join("a-launch.json"))["pid"].as_u64().unwrap() as u32;
    assert!(!pid_alive(pid), "candidate pid {pid} still alive");
    assert_eq!(r["restoration"]["status"], "passed", "{r:#}");
    assert_eq!(listener_model(t.port).as_deref(), Some("inc"));
    // The disk is fixed: resume runs the unwritten step again and completes.
    std::fs::remove_dir(&blocked).unwrap();
    let o = run_command(&run.locks, &["--resume", b.to_str().unwrap()])
        .output()
        .unwrap();
    let r = json(&b.join("campaign-result.json"));
    assert!(o.status.success(), "{}\n{r:#}", text(&o));
    assert_eq!(r["complete"], true, "{r:#}");
    assert_eq!(arm(&r, "a")["status"], "completed", "{r:#}");
    assert!(r["arms"][1]["failure"].is_null(), "{r:#}");
    assert!(blocked.is_file());
    done_steps_have_files(&b);
    verify(&b);
    assert_eq!(listener_model(t.port).as_deref(), Some("inc"));
    run.cleanup();
}

#[test]
fn a_failed_restoration_says_why_what_serves_and_how_to_restart() {
    let _g = shared();
    let t = Camp::new();
    let file = t.write_profiled(&[("inc", FAST), ("a", FAST)]);
    let mut run = t.spawn_run("inc", &file, None);
    // Once the incumbent is stopped, its profile breaks: it cannot be started again.
    run.wait_for("incumbent-shutdown.json", Duration::from_secs(120));
    let prof = t.path("inc.toml");
    let good = std::fs::read_to_string(&prof).unwrap();
    std::fs::write(&prof, "this is not a profile = = =\n").unwrap();
    let (Ended { err, .. }, r) = run.end_with(1);
    let detail = r["restoration"]["detail"].as_str().unwrap().to_string();
    eprintln!("restoration detail: {detail}");
    assert!(detail.contains("restore-incumbent failed: "), "{detail}");
    assert!(detail.contains("(see restoration-launch.json)"), "{detail}");
    assert!(detail.contains("nothing serves the lane"), "{detail}");
    let (_, cmd) = detail
        .split_once("start the incumbent again with: ")
        .unwrap_or_else(|| panic!("no restart command: {detail}"));
    assert!(err.contains(cmd), "{err}");
    // The command, as printed, brings the incumbent back once the profile is fixed.
    std::fs::write(&prof, good).unwrap();
    let st = Command::new("sh").arg("-c").arg(cmd).status().unwrap();
    assert!(st.success());
    wait_serving(t.port, Duration::from_secs(20));
    assert_eq!(listener_model(t.port).as_deref(), Some("inc"));
    run.cleanup();
}

#[test]
fn a_profile_edited_between_stop_and_restore_fails_the_identity_naming_it() {
    let _g = shared();
    let t = Camp::new();
    let file = t.write_profiled(&[("inc", FAST), ("a", SLOW)]);
    let mut run = t.spawn_run("inc", &file, None);
    let b = run.bundle.clone();
    // While the candidate runs, the stopped incumbent's profile changes: still a valid profile,
    // same model and context, so the engine starts and serves, but 57x slower.
    run.wait_for("a-launch.json", Duration::from_secs(120));
    let prof = t.path("inc.toml");
    let stop = json(&b.join("incumbent-shutdown.json"));
    let recorded = stop["recipe_fingerprint"]["files"].to_string();
    assert!(recorded.contains(prof.to_str().unwrap()), "{stop:#}");
    assert!(recorded.contains("\"method\":\"sha256\""), "{recorded}");
    std::fs::write(
        &prof,
        "model = \"inc\"\nttft_ms = 10\ndecode_tok_s = 7\ncontext_tokens = 4096\n",
    )
    .unwrap();
    let (Ended { err, .. }, r) = run.end_with(1);
    assert_eq!(r["restoration"]["status"], "failed", "{r:#}");
    let detail = r["restoration"]["detail"].as_str().unwrap();
    assert!(
        detail.contains("restoration-identity failed")
            && detail.contains(&format!("file {} changed", prof.display())),
        "{detail}"
    );
    assert!(
        err.contains(&format!("file {} changed", prof.display())),
        "{err}"
    );
    let id = json(&b.join("restoration-identity.json"));
    assert_eq!(id["checks"]["recipe_files"], false, "{id:#}");
    // The restored engine does serve (the old recipe text, the new file): never exact.
    assert_eq!(listener_model(t.port).as_deref(), Some("inc"));
    let all = std::fs::read_dir(&b)
        .unwrap()
        .filter_map(|e| std::fs::read_to_string(e.unwrap().path()).ok())
        .collect::<String>();
    assert!(
        !all.contains("\"exact-restoration\""),
        "a bundle file claims exact-restoration"
    );
    run.cleanup();
}

/// A small tmpfs, unmounted on drop.
struct Tmpfs(std::path::PathBuf);

impl Tmpfs {
    fn mount(at: &Path, size: &str) -> Option<Tmpfs> {
        std::fs::create_dir_all(at).unwrap();
        let ok = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
            .arg(at)
            .status()
            .is_ok_and(|s| s.success());
        ok.then(|| Tmpfs(at.to_path_buf()))
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg("-l").arg(&self.0).status();
    }
}

/// Fills the file system holding `p` until a write fails.
fn fill(p: &Path) {
    use std::io::Write;
    let mut f = std::fs::File::create(p).unwrap();
    let block = vec![0u8; 64 * 1024];
    while f.write_all(&block).is_ok() {}
    let _ = f.sync_all();
}

#[test]
fn a_disk_that_fills_and_stays_full_leaves_the_incumbent_serving() {
    let _g = shared();
    let t = Camp::new();
    let Some(disk) = Tmpfs::mount(&t.path("disk"), "8m") else {
        eprintln!("SKIPPED: cannot mount a tmpfs here (needs root); the unwritable-file test above covers the runner's handling");
        return;
    };
    let file = t.write_profiled(&[("inc", FAST), ("a", SLOW)]);
    let b = disk.0.join("out");
    let mut run = t.spawn_run("inc", &file, Some(&b));
    run.wait_for("a-launch.json", Duration::from_secs(120));
    fill(&disk.0.join("filler"));
    let err = run.end().code(1).err.clone();
    assert!(err.contains("restoration"), "{err}");
    // Never "complete"; and the last word on the disk is the run's end, never `running …`: the
    // space held back when the bundle opened is given up for the final result.
    let r = json(&b.join("campaign-result.json"));
    assert_eq!(r["complete"], false, "{r:#}");
    let reason = r["incomplete_reason"].as_str().unwrap_or_default();
    assert!(
        !reason.is_empty() && !reason.starts_with("running"),
        "the bundle still says the run is running: {r:#}\n{err}"
    );
    assert!(
        !bakeoff::evidence::bundle::space_reserve(&b).exists(),
        "the space reserve was left behind"
    );
    done_steps_have_files(&b);
    // The incumbent serves, although its log is on the full disk.
    wait_serving(t.port, Duration::from_secs(10));
    assert_eq!(listener_model(t.port).as_deref(), Some("inc"));
    let pid = json(&b.join("a-launch.json"))["pid"].as_u64().unwrap() as u32;
    assert!(!pid_alive(pid), "candidate pid {pid} still alive");
    run.cleanup();
    drop(disk);
}

#[test]
fn a_disk_full_for_a_second_never_leaves_a_complete_bundle_with_a_missing_file() {
    let _g = shared();
    let t = Camp::new();
    let Some(disk) = Tmpfs::mount(&t.path("disk"), "4m") else {
        eprintln!("SKIPPED: cannot mount a tmpfs here (needs root); the unwritable-file test above covers the runner's handling");
        return;
    };
    // Arm a is slow (its timing steps take seconds): the second after its launch hits its ready
    // and preflight writes, and the run goes on well after the disk is free again. Three times
    // SLOW's decode rate: the campaign runs to its end, and at SLOW that took 97 s of CI.
    let file = t.write_profiled(&[("inc", FAST), ("a", SLOWISH), ("b", FAST)]);
    let b = disk.0.join("out");
    let mut run = t.spawn_run("inc", &file, Some(&b));
    // As arm a starts: full for about a second, then freed.
    run.wait_for("a-launch.json", Duration::from_secs(180));
    let filler = disk.0.join("filler");
    fill(&filler);
    std::thread::sleep(Duration::from_millis(800));
    std::fs::remove_file(&filler).unwrap();
    let Ended { out: o, err } = run.end();
    let Ok(bytes) = std::fs::read(b.join("campaign-result.json")) else {
        // No result at all: never "complete"; the lane is still put back.
        assert_eq!(o.status.code(), Some(1), "{}", text(&o));
        done_steps_have_files(&b);
        assert_eq!(listener_model(t.port).as_deref(), Some("inc"));
        run.cleanup();
        return;
    };
    let r: serde_json::Value = serde_json::from_slice(&bytes).unwrap();
    eprintln!(
        "exit {:?}, complete {}, incomplete_reason {}, {} stderr lines about writes",
        o.status.code(),
        r["complete"],
        r["incomplete_reason"],
        err.lines().filter(|l| l.contains("write")).count()
    );
    eprintln!("{err}");
    assert!(
        r["complete"] == true || err.contains("incomplete"),
        "an incomplete run that does not say so: {err}"
    );
    // Every step the checkpoint marks done has its file, whichever writes the second hit.
    assert!(done_steps_have_files(&b) > 0);
    if r["complete"] == true {
        // Complete only when nothing is missing: exit 0 and the bundle verifies.
        assert!(o.status.success(), "{}", text(&o));
        verify(&b);
    } else {
        assert_eq!(o.status.code(), Some(1), "{}\n{r:#}", text(&o));
        let reason = r["incomplete_reason"].as_str().unwrap_or_default();
        assert!(!reason.is_empty(), "incomplete without a reason: {r:#}");
        // The disk was full for a second only: the final result and the manifest are written
        // once it frees (the run retries its last writes), so the bundle says why itself.
        assert!(
            !reason.starts_with("running"),
            "the final result was never written: {r:#}\n{}",
            text(&o)
        );
        assert!(
            b.join(bakeoff::evidence::bundle::MANIFEST).is_file(),
            "no manifest: {}",
            text(&o)
        );
        // The sealed bundle verifies, except for evidence the full second kept off the disk,
        // which the result's notes name as missing.
        let v = Command::new(BIN).arg("verify").arg(&b).output().unwrap();
        if !v.status.success() {
            let notes = r["notes"].to_string();
            let problems = String::from_utf8_lossy(&v.stdout).to_string();
            assert!(
                problems.lines().next().is_some(),
                "verify fails without a problem line: {}",
                text(&v)
            );
            for line in problems.lines() {
                let Some(rest) = line.strip_prefix("missing: ") else {
                    panic!(
                        "the sealed bundle fails verify for more than missing evidence: {line}\n{}",
                        text(&v)
                    );
                };
                let f = rest.split_whitespace().next().unwrap_or_default();
                assert!(
                    notes.contains(f),
                    "{f} missing but not in the notes: {notes}\n{line}"
                );
            }
        }
    }
    // Every evidence file an arm's result cites exists.
    for a in r["arms"].as_array().unwrap() {
        for f in a["evidence"].as_array().into_iter().flatten() {
            let f = f.as_str().unwrap();
            assert!(b.join(f).is_file(), "arm {} cites {f}, missing", a["id"]);
        }
    }
    // The incumbent serves afterwards; the candidates are gone.
    wait_serving(t.port, Duration::from_secs(10));
    assert_eq!(listener_model(t.port).as_deref(), Some("inc"));
    let pid = json(&b.join("a-launch.json"))["pid"].as_u64().unwrap() as u32;
    assert!(!pid_alive(pid), "candidate pid {pid} still alive");
    run.cleanup();
    drop(disk);
}

#[test]
fn a_restoration_whose_proof_cannot_be_written_is_unproven_never_passed() {
    let _g = shared();
    let t = Camp::new();
    let file = t.write_profiled(&[("inc", FAST), ("a", FAST)]);
    let mut run = t.spawn_run("inc", &file, None);
    let b = run.bundle.clone();
    // The restoration's identity and preflight files cannot be written (a directory in each
    // place: the rename fails even for root), as on a disk full while they are written.
    run.wait_for("a-launch.json", Duration::from_secs(120));
    let lost = ["restoration-identity.json", "restoration-preflight.json"];
    for f in lost {
        std::fs::create_dir(b.join(f)).unwrap();
    }
    let (ended, r) = run.end_with(1);
    let rest = &r["restoration"];
    assert_eq!(rest["status"], "unproven", "{r:#}");
    let detail = rest["detail"].as_str().unwrap();
    assert!(
        detail.starts_with("restored, but its proof could not be written")
            && lost.iter().all(|f| detail.contains(f)),
        "{detail}"
    );
    assert!(
        ended
            .err
            .contains("restoration unproven: restored, but its proof could not be written"),
        "{}",
        ended.err
    );
    assert!(!ended.err.contains("restoration passed"), "{}", ended.err);
    assert_eq!(r["complete"], false, "{r:#}");
    // The incumbent does serve; once the disk is writable, `bakeoff recover` takes the proof.
    assert_eq!(listener_model(t.port).as_deref(), Some("inc"));
    for f in lost {
        std::fs::remove_dir(b.join(f)).unwrap();
    }
    let o = Command::new(BIN)
        .arg("recover")
        .arg(&b)
        .env("BAKEOFF_LOCK_DIR", &run.locks)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", text(&o));
    let rec = json(&b.join("recovery-2.json"));
    assert_eq!(rec["lane_ok"], true, "{rec:#}");
    assert_eq!(
        rec["restoration"]["restoration-identity"]["passed"], true,
        "{rec:#}"
    );
    run.cleanup();
}

#[test]
fn sigint_during_the_restorations_last_step_exits_130_interrupted() {
    let _g = shared();
    let t = Camp::new();
    let file = t.write_profiled(&[("inc", FAST), ("a", FAST)]);
    let marker = t.path("paused");
    let pause = format!("restoration-preflight:{}", marker.display());
    let mut run = t.spawn_run_env("inc", &file, None, &[("BAKEOFF_TEST_PAUSE_AT", pause)]);
    let b = run.bundle.clone();
    wait_for_file(&marker, Duration::from_secs(180));
    // SAFETY: signals the bakeoff process this test spawned.
    unsafe { libc::kill(run.pid() as i32, libc::SIGINT) };
    std::thread::sleep(Duration::from_millis(200));
    // The last step goes on (the restoration finishes anyway), then the signal is honoured.
    std::fs::remove_file(&marker).unwrap();
    let (ended, r) = run.end_with(130);
    assert_eq!(r["complete"], false, "{r:#}");
    assert_eq!(
        r["incomplete_reason"], "interrupted by SIGINT during restoration/restoration-preflight",
        "{r:#}"
    );
    assert_eq!(r["restoration"]["status"], "passed", "{r:#}");
    assert!(ended.err.contains("incomplete"), "{}", ended.err);
    verify(&b);
    assert_eq!(listener_model(t.port).as_deref(), Some("inc"));
    run.cleanup();
}
