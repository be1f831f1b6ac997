//! Recovery after bakeoff itself died while a Slurm arm ran (SIGKILL stands for the OOM killer and
//! a reboot's loss of the process), against the real one-node Slurm cluster of [`super::slurm`]:
//! the launch journal records the job's name, submitting uid and submit intent before sbatch and
//! its id after; `bakeoff run --resume` and `bakeoff recover` prove the job is the dead run's own
//! (id, name, user, submit time from `scontrol show job`), cancel it, wait until Slurm lists it
//! ended and the port is free, and put the incumbent back. A job of the same name that is not
//! proven is never cancelled. See docs/reliability.md.

use super::slurm::{
    arm, campaign, cluster, job, reference_arm, slurm_arm, squeue, stop_lane, Leftovers, FAST, SLOW,
};
use crate::support::campaign::{json, listener_model, text, verify, wait_serving, Camp};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// `bakeoff …` with the test's lane-lock folder, no test pause, output captured.
fn bakeoff_cmd(locks: &Path, args: &[&str]) -> Command {
    crate::support::campaign::bakeoff_command(locks, args)
}

/// A campaign whose `bakeoff run` was SIGKILLed while its Slurm candidate served the lane.
struct Killed {
    bundle: PathBuf,
    locks: PathBuf,
    /// The test's incumbent child, stopped by the dead run; reaped by [`Killed::bakeoff`].
    inc: Option<Child>,
}

impl Killed {
    /// Runs `bakeoff ARGS` (the recovery: `recover` or `run --resume`) on the dead run's lane
    /// after reaping the incumbent it stopped; asserts it succeeded (naming the result, if any)
    /// and returns its stderr.
    fn bakeoff(&mut self, args: &[&str]) -> String {
        if let Some(mut c) = self.inc.take() {
            let _ = c.wait();
        }
        let t0 = Instant::now();
        let o = bakeoff_cmd(&self.locks, args).output().unwrap();
        eprintln!(
            "{} after the kill: {:.1} s",
            args.join(" "),
            t0.elapsed().as_secs_f64()
        );
        let r = std::fs::read_to_string(self.bundle.join("campaign-result.json"));
        assert!(
            o.status.success(),
            "{}\n{}",
            text(&o),
            r.unwrap_or_default()
        );
        String::from_utf8_lossy(&o.stderr).to_string()
    }
}

/// A campaign (reference incumbent `inc` serving, Slurm candidate `sl` with a slow decode) whose
/// `bakeoff run` is SIGKILLed while the candidate's job serves the lane: the job keeps the lane.
/// With `pause`, bakeoff is killed at that test pause point instead.
fn killed_while_the_slurm_candidate_serves(
    t: &Camp,
    name: &str,
    pause: Option<&str>,
    other_jobs: usize,
) -> Killed {
    t.profile("inc", FAST);
    t.profile("sl", SLOW);
    let file = campaign(
        t,
        &[
            reference_arm("inc", "incumbent"),
            slurm_arm(t, "sl", "candidate", name, ""),
        ],
        "",
    );
    let inc = Some(t.start_incumbent("inc"));
    let b = t.bundle();
    let locks = t.path("locks");
    let mut c = bakeoff_cmd(&locks, &["run", file.to_str().unwrap(), "--no-progress"]);
    let log = t.path("killed-run.err");
    c.stdout(Stdio::null())
        .stderr(std::fs::File::create(&log).unwrap());
    let marker = t.path("paused");
    if let Some(p) = pause {
        c.env("BAKEOFF_TEST_PAUSE_AT", format!("{p}:{}", marker.display()));
    }
    let mut run = c.spawn().unwrap();
    let t0 = Instant::now();
    // Ready: the journal has the job's node by then (written before the ready evidence).
    let launched = b.join("sl-ready.json");
    loop {
        let ready = match pause {
            Some(_) => marker.exists(),
            None => launched.exists(),
        };
        if ready && listener_model(t.port).as_deref() == Some("sl") {
            break;
        }
        let said = || std::fs::read_to_string(&log).unwrap_or_default();
        assert!(
            t0.elapsed() < Duration::from_secs(120),
            "the Slurm candidate does not serve; squeue: {:?}; bakeoff said:\n{}",
            squeue(name),
            said()
        );
        assert!(
            run.try_wait().unwrap().is_none(),
            "bakeoff ended early:\n{}",
            said()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(squeue(name).len(), 1 + other_jobs, "the arm's job runs");
    // SIGKILL: the OOM killer's signal.
    run.kill().unwrap();
    run.wait().unwrap();
    // What production saw: the job keeps the lane, the bundle has no manifest.
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(listener_model(t.port).as_deref(), Some("sl"));
    assert_eq!(squeue(name).len(), 1 + other_jobs, "{:?}", squeue(name));
    assert!(!b.join("artifact-manifest.json").exists());
    Killed {
        bundle: b,
        locks,
        inc,
    }
}

/// The launch journal's entry of the Slurm candidate.
fn journal_entry(b: &Path) -> serde_json::Value {
    json(&b.join("launch-journal.json"))["entries"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["arm"] == "sl")
        .cloned()
        .expect("the Slurm arm is in the launch journal")
}

/// After the recovery: Slurm lists no live job of the campaign (the recorded one ended), the
/// incumbent serves with its model.
fn job_cancelled_and_incumbent_back(t: &Camp, name: &str, id: &str) {
    assert!(squeue(name).is_empty(), "{:?}", squeue(name));
    job_ended(id);
    incumbent_back(t);
}

/// Slurm lists the job `id` neither running nor pending (or no longer at all).
fn job_ended(id: &str) {
    let j = job(id);
    assert!(
        j.get("JobState")
            .is_none_or(|s| s != "RUNNING" && s != "PENDING"),
        "{j:?}"
    );
}

/// The incumbent serves the lane with its model.
fn incumbent_back(t: &Camp) {
    wait_serving(t.port, Duration::from_secs(30));
    assert_eq!(listener_model(t.port).as_deref(), Some("inc"));
}

#[test]
fn sigkill_while_a_slurm_candidate_serves_then_resume_cancels_its_job_and_completes() {
    let _g = cluster();
    let t = Camp::new();
    let name = format!("bo-kill-{}", t.port);
    let _left = Leftovers(name.clone(), t.port);
    let mut k = killed_while_the_slurm_candidate_serves(&t, &name, None, 0);
    let b = k.bundle.clone();
    // The journal recorded the job before and after sbatch: its name, uid, then its id.
    let e = journal_entry(&b);
    let id = json(&b.join("sl-launch.json"))["slurm_job"]["job_id"]
        .as_str()
        .unwrap()
        .to_string();
    assert_eq!(e["kind"], "slurm", "{e:#}");
    assert_eq!(e["state"], "started", "{e:#}");
    assert_eq!(e["slurm"]["job_id"], id.as_str(), "{e:#}");
    assert_eq!(e["slurm"]["job_name"], name.as_str(), "{e:#}");
    // Once the job ran, its node too.
    let host = Command::new("hostname").arg("-s").output().unwrap();
    assert_eq!(
        e["slurm"]["node"],
        String::from_utf8_lossy(&host.stdout).trim(),
        "{e:#}"
    );
    // SAFETY: getuid only reads this process's user id.
    assert_eq!(e["slurm"]["uid"], unsafe { libc::getuid() }, "{e:#}");
    let err = k.bakeoff(&["run", "--resume", b.to_str().unwrap(), "--no-progress"]);
    let r = json(&b.join("campaign-result.json"));
    assert_eq!(r["complete"], true, "{r:#}");
    assert!(
        err.contains(&format!("Slurm job {id} `{name}`"))
            && err.contains("left running by the dead run")
            && err.contains(&format!("scancel --signal=TERM --full {id}")),
        "{err}"
    );
    assert!(
        !err.contains("is in use by something that is not the incumbent"),
        "{err}"
    );
    let notes = r["notes"].to_string();
    assert!(notes.contains("died before it finished"), "{notes}");
    assert!(
        notes.contains(&format!(
            "cancelled Slurm job(s) {id} the dead run left running"
        )),
        "{notes}"
    );
    // The recovery's evidence and the journal say what was done.
    let rec = json(&b.join("recovery-2.json"));
    let found = &rec["entries"][0];
    assert_eq!(found["state"], "stopped-by-recovery", "{rec:#}");
    let cancel = &found["slurm_jobs"][0]["cancel"];
    assert_eq!(cancel["job_id"], id.as_str(), "{rec:#}");
    assert_eq!(cancel["ended"], true, "{rec:#}");
    assert_eq!(cancel["port_free"], true, "{rec:#}");
    assert_eq!(journal_entry(&b)["state"], "stopped-by-recovery");
    job_cancelled_and_incumbent_back(&t, &name, &id);
    assert_eq!(
        r["restoration"]["status"], "passed",
        "{:#}",
        r["restoration"]
    );
    // The resumed run launched the candidate again (a new job) and stopped it.
    assert_eq!(arm(&r, "sl")["status"], "completed", "{r:#}");
    verify(&b);
    stop_lane(t.port);
}

#[test]
fn sigkill_while_a_slurm_candidate_serves_then_recover_alone_puts_the_lane_back() {
    let _g = cluster();
    let t = Camp::new();
    let name = format!("bo-rec-{}", t.port);
    let _left = Leftovers(name.clone(), t.port);
    let mut k = killed_while_the_slurm_candidate_serves(&t, &name, None, 0);
    let b = k.bundle.clone();
    let id = journal_entry(&b)["slurm"]["job_id"]
        .as_str()
        .unwrap()
        .to_string();
    let err = k.bakeoff(&["recover", b.to_str().unwrap()]);
    assert!(
        err.contains("died before it finished")
            && err.contains(&format!("Slurm job {id} `{name}`"))
            && err.contains("left running by the dead run"),
        "{err}"
    );
    job_cancelled_and_incumbent_back(&t, &name, &id);
    let r = json(&b.join("campaign-result.json"));
    assert_eq!(r["complete"], false, "{r:#}");
    assert!(
        r["incomplete_reason"]
            .as_str()
            .unwrap_or_default()
            .contains("--resume"),
        "{r:#}"
    );
    assert_eq!(journal_entry(&b)["state"], "stopped-by-recovery");
    verify(&b);
    stop_lane(t.port);
}

#[test]
fn sigkill_before_the_job_id_is_recorded_finds_the_job_by_name_user_and_submit_time() {
    let _g = cluster();
    let t = Camp::new();
    let name = format!("bo-unrec-{}", t.port);
    let _left = Leftovers(name.clone(), t.port);
    // A job of the same name submitted before the campaign (another run's; held, so the one-core
    // node stays free for the candidate): never cancelled.
    let other = Command::new("sbatch")
        .args([
            "--parsable",
            "--hold",
            "--output=/dev/null",
            &format!("--job-name={name}"),
            "--wrap=sleep 300",
        ])
        .output()
        .unwrap();
    assert!(other.status.success(), "{}", text(&other));
    let other = String::from_utf8_lossy(&other.stdout).trim().to_string();
    // Slurm's SubmitTime has whole seconds.
    std::thread::sleep(Duration::from_millis(2100));
    let mut k = killed_while_the_slurm_candidate_serves(&t, &name, Some("launch-unrecorded@sl"), 1);
    let b = k.bundle.clone();
    let e = journal_entry(&b);
    assert_eq!(e["state"], "starting", "{e:#}");
    assert_eq!(e["slurm"]["job_id"], "", "{e:#}");
    let ours: Vec<String> = squeue(&name)
        .iter()
        .filter_map(|l| l.split_whitespace().next().map(str::to_string))
        .filter(|i| *i != other)
        .collect();
    assert_eq!(ours.len(), 1, "{:?}", squeue(&name));
    let err = k.bakeoff(&["recover", b.to_str().unwrap()]);
    assert!(
        err.contains(&format!("Slurm job {} `{name}`", ours[0]))
            && err.contains("left running by the dead run"),
        "{err}"
    );
    assert!(
        err.contains(&format!("Slurm job {other} NOT cancelled")) && err.contains("before"),
        "{err}"
    );
    // Ours is gone, the other job of that name is still there.
    let left = squeue(&name);
    assert!(
        left.len() == 1 && left[0].starts_with(&format!("{other} ")),
        "{left:?}"
    );
    job_ended(&ours[0]);
    incumbent_back(&t);
    verify(&b);
    stop_lane(t.port);
    // Leftovers cancels the other job.
}
