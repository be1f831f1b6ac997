//! Recovery after bakeoff itself dies (SIGKILL stands for the OOM killer and a reboot's loss of
//! the process), on reference-engine arms: `bakeoff run --resume` and `bakeoff recover` find what
//! the dead run left on the lane from the bundle's launch journal, stop what they can prove is its
//! own, and restore the incumbent; a pid that now belongs to another process is left alone. See
//! docs/reliability.md for the fault matrix these tests back.
//!
//! Each test checks: the incumbent serves with its identity afterwards, no process the campaign
//! started is left (every recorded process group is gone but the serving incumbent's), the bundle
//! says honestly what happened (and verifies), the message says what was found and done.

use crate::support::campaign::*;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

// Shared, not exclusive: these tests assert what happens on a fault, not timing figures, so two
// run at once (their campaigns are on their own ports, lock folders and temp dirs); no timing
// test (exclusive) runs beside them.
use crate::support::shared;

const FAST: &str = "ttft_ms = 10\ndecode_tok_s = 400\ncontext_tokens = 4096";
/// A slow decode: the candidate's timing steps take seconds, time to kill bakeoff while it serves.
const SLOW: &str = "ttft_ms = 10\ndecode_tok_s = 20\ncontext_tokens = 4096";

fn wait_until(what: &str, limit: Duration, mut f: impl FnMut() -> bool) {
    let t = Instant::now();
    while !f() {
        assert!(t.elapsed() < limit, "{what}: not after {limit:?}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn bakeoff(lock_dir: &Path, args: &[&str]) -> Command {
    let mut c = Command::new(BIN);
    c.args(args)
        .env("BAKEOFF_LOCK_DIR", lock_dir)
        .env_remove("BAKEOFF_TEST_PAUSE_AT")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    c
}

/// A campaign (incumbent `inc`, candidate `a`) with the incumbent serving, and `bakeoff run`
/// started on it.
struct Setup {
    t: Camp,
    b: PathBuf,
    locks: PathBuf,
    inc: Option<Child>,
}

impl Setup {
    fn start(candidate: &str) -> Setup {
        let t = Camp::new();
        t.profile("inc", FAST);
        t.profile("a", candidate);
        t.write(&[("inc", "inc"), ("a", "a")], "", "");
        let inc = Some(t.start_incumbent("inc"));
        let b = t.bundle();
        let locks = t.path("locks");
        Setup { t, b, locks, inc }
    }

    fn run(&self, pause_at: Option<&str>) -> Child {
        let file = self.t.path("campaign.toml");
        let mut c = bakeoff(
            &self.locks,
            &["run", file.to_str().unwrap(), "--no-progress"],
        );
        if let Some(p) = pause_at {
            let marker = self.t.path("paused");
            c.env("BAKEOFF_TEST_PAUSE_AT", format!("{p}:{}", marker.display()));
        }
        c.spawn().unwrap()
    }

    /// SIGKILL to bakeoff (the OOM killer's signal).
    fn kill(&mut self, mut run: Child) {
        run.kill().unwrap();
        run.wait().unwrap();
        // The test's own incumbent child, if bakeoff stopped it.
        if let Some(c) = self.inc.as_mut() {
            if let Ok(Some(_)) = c.try_wait() {
                self.inc = None;
            }
        }
    }

    fn journal(&self) -> Vec<serde_json::Value> {
        json(&self.b.join("launch-journal.json"))["entries"]
            .as_array()
            .unwrap()
            .clone()
    }

    /// The recorded process (pid, pgid) of the journal entries of arm `arm`.
    fn recorded(&self, arm: &str) -> Vec<(u32, u32)> {
        self.journal()
            .iter()
            .filter(|e| e["arm"] == arm && !e["process"].is_null())
            .map(|e| {
                (
                    e["process"]["pid"].as_u64().unwrap() as u32,
                    e["process"]["pgid"].as_u64().unwrap() as u32,
                )
            })
            .collect()
    }

    /// After the recovery: the incumbent serves with its model, and of every process group the
    /// campaign recorded only the serving incumbent's is alive.
    fn lane_is_back(&self) {
        wait_serving(self.t.port, Duration::from_secs(20));
        assert_eq!(listener_model(self.t.port).as_deref(), Some("inc"));
        let serving = bakeoff::lane::procnet::find_listeners(self.t.port);
        let serving_groups: Vec<u32> = serving.iter().filter_map(|l| l.pgid).collect();
        for e in self.journal() {
            if e["process"].is_null() {
                continue;
            }
            let pgid = e["process"]["pgid"].as_u64().unwrap() as u32;
            let alive = bakeoff::lane::process::group_members(pgid);
            if e["purpose"] == "restore-incumbent" && serving_groups.contains(&pgid) {
                continue;
            }
            assert!(
                alive.is_empty(),
                "the campaign's process group {pgid} ({}) is still alive: {alive:?}\n{e:#}",
                e["arm"]
            );
        }
    }
}

impl Drop for Setup {
    fn drop(&mut self) {
        cleanup(&self.b, self.inc.take(), self.t.port);
        for e in std::fs::read(self.b.join("launch-journal.json"))
            .ok()
            .and_then(|b| serde_json::from_slice::<serde_json::Value>(&b).ok())
            .and_then(|v| v["entries"].as_array().cloned())
            .unwrap_or_default()
        {
            if let (Some(pid), Some(st)) = (
                e["process"]["pid"].as_u64(),
                e["process"]["start_ticks"].as_u64(),
            ) {
                // Only a process that is still the recorded one.
                if bakeoff::lane::adopt::start_ticks(pid as u32) == Some(st) {
                    // SAFETY: signals a process group this test's campaign started.
                    unsafe { libc::kill(-(pid as i32), libc::SIGKILL) };
                }
            }
        }
    }
}

fn stderr(o: &std::process::Output) -> String {
    String::from_utf8_lossy(&o.stderr).to_string()
}

/// Kills bakeoff while candidate `a` serves; returns the candidate's (pid, pgid).
fn killed_while_the_candidate_serves(s: &mut Setup) -> (u32, u32) {
    let run = s.run(None);
    let port = s.t.port;
    // The candidate serves and its launch step is recorded (the journal has its pid: the
    // journal is synced before the launch evidence is written).
    let launched = s.b.join("a-launch.json");
    wait_until("the candidate serves", Duration::from_secs(120), || {
        launched.exists() && listener_model(port).as_deref() == Some("a")
    });
    // While the run lives, `bakeoff recover` is refused and touches nothing.
    let o = bakeoff(&s.locks, &["recover", s.b.to_str().unwrap(), "--json"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert_eq!(crate::support::json_doc::doc(&o)["refused"], true);
    assert!(
        stderr(&o).contains(&format!("held by another bakeoff run (pid {},", run.id())),
        "{}",
        text(&o)
    );
    s.kill(run);
    let rec = s.recorded("a");
    assert_eq!(rec.len(), 1, "{:#?}", s.journal());
    let (pid, pgid) = rec[0];
    assert_eq!(pid, pgid, "the arm leads its own process group");
    // What production saw: the candidate keeps the lane, the bundle has no manifest.
    assert!(pid_alive(pid));
    assert_eq!(listener_model(port).as_deref(), Some("a"));
    assert!(!s.b.join("artifact-manifest.json").exists());
    let r = json(&s.b.join("campaign-result.json"));
    let why = r["incomplete_reason"].as_str().unwrap();
    assert!(
        why.starts_with("running") && why.contains("bakeoff recover"),
        "{why}"
    );
    (pid, pgid)
}

/// `bakeoff run --resume` after the kill: completes; returns its stderr.
fn resume_completes(s: &Setup) -> String {
    let o = bakeoff(
        &s.locks,
        &["run", "--resume", s.b.to_str().unwrap(), "--no-progress"],
    )
    .output()
    .unwrap();
    let r = json(&s.b.join("campaign-result.json"));
    assert!(o.status.success(), "{}\n{r:#}", text(&o));
    assert_eq!(r["complete"], true, "{r:#}");
    let notes = r["notes"].to_string();
    assert!(notes.contains("died before it finished"), "{notes}");
    // The dead run's lane lock was taken over, and that is recorded.
    assert!(notes.contains("took over a stale lock"), "{notes}");
    verify(&s.b);
    stderr(&o)
}

#[test]
fn sigkill_while_a_candidate_serves_then_resume_restores_and_completes() {
    let _g = shared();
    let mut s = Setup::start(SLOW);
    let (pid, pgid) = killed_while_the_candidate_serves(&mut s);
    let err = resume_completes(&s);
    assert!(
        err.contains("left running by the dead run")
            && err.contains(&format!("pid {pid}"))
            && err.contains("stopped"),
        "{err}"
    );
    assert!(!err.contains("is in use by something that is not the incumbent"));
    assert!(!pid_alive(pid));
    assert!(bakeoff::lane::process::group_members(pgid).is_empty());
    // The recovery is in the bundle: its evidence, the journal's state of the candidate.
    let rec = json(&s.b.join("recovery-2.json"));
    assert_eq!(rec["entries"][0]["state"], "stopped-by-recovery", "{rec:#}");
    let first = s.journal().into_iter().find(|e| e["arm"] == "a").unwrap();
    assert_eq!(first["state"], "stopped-by-recovery", "{first:#}");
    s.lane_is_back();
}

#[test]
fn sigkill_during_the_incumbent_stop_then_resume_restores_and_completes() {
    let _g = shared();
    let mut s = Setup::start(FAST);
    let run = s.run(Some("incumbent-stopped"));
    let marker = s.t.path("paused");
    wait_until("the pause point", Duration::from_secs(120), || {
        marker.exists()
    });
    s.kill(run);
    // The incumbent is stopped and bakeoff is gone: the lane is empty.
    assert!(listener_model(s.t.port).is_none());
    if let Some(mut c) = s.inc.take() {
        let _ = c.wait();
    }
    let err = resume_completes(&s);
    assert!(err.contains("died before it finished"), "{err}");
    s.lane_is_back();
}

#[test]
fn sigkill_during_restoration_then_resume_restores_and_completes() {
    let _g = shared();
    let mut s = Setup::start(FAST);
    let run = s.run(Some("restoration-launched"));
    let marker = s.t.path("paused");
    wait_until("the pause point", Duration::from_secs(180), || {
        marker.exists()
    });
    s.kill(run);
    if let Some(mut c) = s.inc.take() {
        let _ = c.wait();
    }
    let restored: Vec<_> = s
        .journal()
        .into_iter()
        .filter(|e| e["purpose"] == "restore-incumbent")
        .collect();
    assert_eq!(restored.len(), 1, "{restored:#?}");
    assert_eq!(restored[0]["state"], "started", "{restored:#?}");
    let rpid = restored[0]["process"]["pid"].as_u64().unwrap() as u32;
    assert!(pid_alive(rpid));
    let err = resume_completes(&s);
    assert!(
        err.contains("restored incumbent `inc`") && err.contains("kept"),
        "{err}"
    );
    s.lane_is_back();
}

#[test]
fn recover_alone_puts_the_incumbent_back() {
    let _g = shared();
    let mut s = Setup::start(SLOW);
    let (pid, pgid) = killed_while_the_candidate_serves(&mut s);
    let o = bakeoff(&s.locks, &["recover", s.b.to_str().unwrap(), "--json"])
        .output()
        .unwrap();
    let err = stderr(&o);
    assert!(o.status.success(), "{}", text(&o));
    // `--json`: one lane, back, its recovery file, and what finishes the campaign.
    let d = crate::support::json_doc::doc(&o);
    assert_eq!(
        (&d["lanes_back"], &d["complete"]),
        (&true.into(), &false.into())
    );
    assert_eq!(d["lanes"][0]["evidence"], "recovery-2.json", "{d:#}");
    assert!(
        d["next"]
            .as_str()
            .unwrap()
            .starts_with("bakeoff run --resume "),
        "{d:#}"
    );
    assert!(err.contains("died before it finished"), "{err}");
    assert!(err.contains("left running by the dead run"), "{err}");
    assert!(
        err.contains("the incumbent `inc` serves the lane") && err.contains("the lane is back"),
        "{err}"
    );
    assert!(!pid_alive(pid));
    assert!(bakeoff::lane::process::group_members(pgid).is_empty());
    s.lane_is_back();
    // The bundle says what happened, is sealed, and is not complete (no arm ran).
    verify(&s.b);
    let r = json(&s.b.join("campaign-result.json"));
    assert_eq!(r["complete"], false);
    let why = r["incomplete_reason"].as_str().unwrap();
    assert!(
        why.contains("bakeoff recover") && why.contains("--resume"),
        "{why}"
    );
    assert!(
        r["notes"].to_string().contains("took over a stale lock"),
        "{r:#}"
    );
    let rec = json(&s.b.join("recovery-2.json"));
    assert_eq!(rec["lane_ok"], true, "{rec:#}");
    assert_eq!(
        rec["restoration"]["restoration-identity"]["passed"], true,
        "{rec:#}"
    );
}

#[test]
fn a_pid_reused_by_another_process_is_not_killed() {
    let _g = shared();
    let mut s = Setup::start(SLOW);
    let (pid, _) = killed_while_the_candidate_serves(&mut s);
    // The candidate ends; its pid is then "given" to another process: the journal's pid is made
    // the pid of an unrelated process (whose start time differs from the recorded one).
    // SAFETY: signals the candidate's own process group (proven by the test's checks above).
    unsafe { libc::kill(-(pid as i32), libc::SIGKILL) };
    wait_until("the candidate is gone", Duration::from_secs(10), || {
        !pid_alive(pid)
    });
    use std::os::unix::process::CommandExt;
    let mut other = Command::new("sleep")
        .arg("300")
        .process_group(0)
        .spawn()
        .unwrap();
    let opid = other.id();
    let p = s.b.join("launch-journal.json");
    let mut j = json(&p);
    for e in j["entries"].as_array_mut().unwrap() {
        if e["arm"] == "a" {
            e["process"]["pid"] = opid.into();
            e["process"]["pgid"] = opid.into();
        }
    }
    std::fs::write(&p, serde_json::to_string_pretty(&j).unwrap()).unwrap();
    let o = bakeoff(&s.locks, &["recover", s.b.to_str().unwrap()])
        .output()
        .unwrap();
    let err = stderr(&o);
    let alive = pid_alive(opid);
    let _ = other.kill();
    let _ = other.wait();
    assert!(alive, "recover killed pid {opid}, which is not the run's");
    assert!(o.status.success(), "{}", text(&o));
    assert!(
        err.contains(&format!("NOT stopped: pid {opid} is now another process"))
            && err.contains("the pid was reused"),
        "{err}"
    );
    s.lane_is_back();
    let r = json(&s.b.join("campaign-result.json"));
    let notes = r["notes"].to_string();
    assert!(notes.contains("NOT stopped"), "{notes}");
    verify(&s.b);
}

#[test]
fn sigkill_before_the_pid_is_recorded_finds_the_arm_by_argv_and_start_time() {
    let _g = shared();
    let mut s = Setup::start(SLOW);
    let run = s.run(Some("launch-unrecorded"));
    let marker = s.t.path("paused");
    wait_until("the pause point", Duration::from_secs(120), || {
        marker.exists()
    });
    s.kill(run);
    // The journal knows what was about to start, not its pid.
    let j = s.journal();
    let open: Vec<_> = j.iter().filter(|e| e["state"] == "starting").collect();
    assert_eq!(open.len(), 1, "{j:#?}");
    assert!(open[0]["process"].is_null());
    let arm = open[0]["arm"].as_str().unwrap().to_string();
    let argv: Vec<String> = serde_json::from_value(open[0]["argv"].clone()).unwrap();
    // The arm it started (its own process group, that argv).
    let started: Vec<u32> = bakeoff::lane::procnet::find_listeners(s.t.port)
        .iter()
        .map(|l| l.pid)
        .chain(std::iter::once(0))
        .collect();
    let err = resume_completes(&s);
    assert!(
        err.contains(&format!("arm `{arm}`")) && err.contains("left running by the dead run"),
        "{err}"
    );
    assert!(!err.contains("NOT stopped"), "{err}");
    // Nothing with the arm's argv is left but what serves the lane now.
    let serving: Vec<u32> = bakeoff::lane::procnet::find_listeners(s.t.port)
        .iter()
        .map(|l| l.pid)
        .collect();
    for p in started
        .into_iter()
        .filter(|p| *p != 0 && !serving.contains(p))
    {
        assert!(!pid_alive(p), "pid {p} of the dead run is still alive");
    }
    let left = bakeoff::lane::adopt::started_after(&argv, 0);
    assert!(
        left.iter().all(|m| serving.contains(&m.pid)),
        "processes with the arm's argv left: {left:?}"
    );
    s.lane_is_back();
}

/// Bundle `s.b`'s run started from the campaign's own folder with relative paths, as an operator
/// does (`cd campaigns/x && bakeoff run campaign.toml --output out`), and bakeoff was SIGKILLed
/// while the candidate served: returns the candidate's pid.
fn killed_relative_run(s: &mut Setup) -> u32 {
    let mut c = bakeoff(
        &s.locks,
        &["run", "campaign.toml", "--output", "out", "--no-progress"],
    );
    c.current_dir(s.t.dir.path());
    let run = c.spawn().unwrap();
    let port = s.t.port;
    let launched = s.b.join("a-launch.json");
    wait_until("the candidate serves", Duration::from_secs(120), || {
        launched.exists() && listener_model(port).as_deref() == Some("a")
    });
    s.kill(run);
    let ck = json(&s.b.join("checkpoint.json"));
    assert_eq!(
        ck["campaign_file"],
        s.t.path("campaign.toml").to_str().unwrap(),
        "the checkpoint records the campaign file absolute"
    );
    let files = ck["files"].to_string();
    assert!(
        files.contains(s.t.path("a.toml").to_str().unwrap()),
        "{files}"
    );
    s.recorded("a")[0].0
}

/// `bakeoff ARGS` run from directory `cwd`.
fn from(s: &Setup, cwd: &Path, args: &[&str]) -> std::process::Output {
    let mut c = bakeoff(&s.locks, args);
    c.current_dir(cwd);
    c.output().unwrap()
}

#[test]
fn recover_and_resume_from_another_directory_put_the_lane_back_and_complete() {
    let _g = shared();
    let mut s = Setup::start(SLOW);
    let pid = killed_relative_run(&mut s);
    let b = s.b.to_str().unwrap().to_string();
    let o = from(&s, Path::new("/"), &["recover", &b]);
    assert!(o.status.success(), "{}", text(&o));
    assert!(!pid_alive(pid), "the candidate still serves");
    s.lane_is_back();
    let o = from(
        &s,
        Path::new("/"),
        &["run", "--resume", &b, "--no-progress"],
    );
    let r = json(&s.b.join("campaign-result.json"));
    assert!(o.status.success(), "{}\n{r:#}", text(&o));
    assert_eq!(r["complete"], true, "{r:#}");
    verify(&s.b);
    s.lane_is_back();
    // A complete bundle, resumed from anywhere: nothing to do, the lane untouched.
    let o = from(
        &s,
        Path::new("/"),
        &["run", "--resume", &b, "--no-progress"],
    );
    assert!(o.status.success(), "{}", text(&o));
    assert!(stderr(&o).contains("already complete"), "{}", text(&o));
    // A bundle of an older bakeoff (the campaign file recorded as typed): refused from
    // elsewhere with the way to run it, and it still works from its campaign directory.
    let p = s.b.join("checkpoint.json");
    let mut ck = json(&p);
    ck["campaign_file"] = "campaign.toml".into();
    std::fs::write(&p, serde_json::to_string_pretty(&ck).unwrap()).unwrap();
    let o = from(&s, Path::new("/"), &["recover", &b]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    let err = stderr(&o);
    assert!(
        err.contains("older bakeoff")
            && err.contains(&format!("cd THAT_DIR && bakeoff recover {b}")),
        "{err}"
    );
    let o = from(&s, s.t.dir.path(), &["recover", &b]);
    assert!(o.status.success(), "{}", text(&o));
    s.lane_is_back();
}

/// `bakeoff run --resume BUNDLE` from `/`, refused before it touches anything: its stderr.
fn resume_refused(s: &Setup, bundle: &str) -> String {
    let o = from(
        s,
        Path::new("/"),
        &["run", "--resume", bundle, "--no-progress"],
    );
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    stderr(&o)
}

#[test]
fn resume_of_a_copied_bundle_from_another_directory_names_a_moved_file_then_completes() {
    let _g = shared();
    let mut s = Setup::start(SLOW);
    let pid = killed_relative_run(&mut s);
    // The bundle is copied elsewhere (the candidate still serves the lane).
    let copy = s.t.path("elsewhere/copy");
    std::fs::create_dir_all(copy.parent().unwrap()).unwrap();
    let st = Command::new("cp")
        .arg("-a")
        .arg(&s.b)
        .arg(&copy)
        .status()
        .unwrap();
    assert!(st.success());
    let c = copy.to_str().unwrap().to_string();
    // A file the campaign names moved away: refused, naming it and the directory it is
    // resolved against; nothing touched.
    let prof = s.t.path("a.toml");
    let moved = s.t.path("a.toml.moved");
    std::fs::rename(&prof, &moved).unwrap();
    let err = resume_refused(&s, &c);
    assert!(
        err.contains(prof.to_str().unwrap())
            && err.contains(s.t.dir.path().to_str().unwrap())
            && err.contains("put the file back"),
        "{err}"
    );
    assert!(pid_alive(pid), "a refused resume touched the lane");
    // A file that changed since the run started: refused, naming it.
    std::fs::rename(&moved, &prof).unwrap();
    let orig = std::fs::read(&prof).unwrap();
    std::fs::write(&prof, [&orig[..], b"\n# edited\n"].concat()).unwrap();
    let err = resume_refused(&s, &c);
    assert!(
        err.contains(prof.to_str().unwrap()) && err.contains("changed since the run started"),
        "{err}"
    );
    std::fs::write(&prof, &orig).unwrap();
    // Put back: the copy's journal proves the candidate the dead run's own; it is stopped, the
    // campaign completes in the copy, which verifies.
    let o = from(
        &s,
        Path::new("/"),
        &["run", "--resume", &c, "--no-progress"],
    );
    let r = json(&copy.join("campaign-result.json"));
    assert!(o.status.success(), "{}\n{r:#}", text(&o));
    assert!(
        stderr(&o).contains("left running by the dead run"),
        "{}",
        text(&o)
    );
    assert_eq!(r["complete"], true, "{r:#}");
    assert!(!pid_alive(pid));
    verify(&copy);
    wait_serving(s.t.port, Duration::from_secs(20));
    assert_eq!(listener_model(s.t.port).as_deref(), Some("inc"));
    // The incumbent the copy restored is the one to stop at the end.
    cleanup(&copy, None, s.t.port);
}
