//! A multi-lane run that dies (SIGKILL stands for the OOM killer and a reboot): `bakeoff recover`
//! puts every lane back from its own launch journal (the incumbent serving its lane, nothing on
//! the qualification lane, no process the run started left), then `bakeoff run --resume`
//! finishes every lane from its own checkpoint (docs/fleet.md "Recover and resume").

use crate::fleet::{arm_wall_ms, as_lanes, run_span, timeline_bar};
use crate::support::campaign::*;
use crate::support::shared;
use std::collections::BTreeMap;
use std::path::Path;
use std::time::{Duration, Instant};

const FAST: &str = "ttft_ms = 10\ndecode_tok_s = 400\ncontext_tokens = 4096";
/// A slow decode: the arm's timing steps take seconds, time to kill bakeoff while it serves.
const SLOW: &str = "ttft_ms = 10\ndecode_tok_s = 40\ncontext_tokens = 4096";

/// Kills whatever still listens on the test's lane ports when the test ends (pass or fail).
struct Ports<'a>(&'a Path, [u16; 2]);

impl Drop for Ports<'_> {
    fn drop(&mut self) {
        for p in self.1 {
            cleanup(self.0, None, p);
        }
    }
}

/// Every process group a lane's launch journal recorded is gone, but the one serving `serving`.
fn nothing_left(lane: &Path, serving: u16) {
    let keep: Vec<u32> = bakeoff::lane::procnet::find_listeners(serving)
        .iter()
        .filter_map(|l| l.pgid)
        .collect();
    let j = json(&lane.join("launch-journal.json"));
    for e in j["entries"].as_array().unwrap() {
        let Some(pgid) = e["process"]["pgid"].as_u64() else {
            continue;
        };
        if keep.contains(&(pgid as u32)) {
            continue;
        }
        let alive = bakeoff::lane::process::group_members(pgid as u32);
        assert!(
            alive.is_empty(),
            "{} left alive: {alive:?}\n{e:#}",
            e["arm"]
        );
    }
}

/// The manifest's sha256 of every file of arm `arm` in lane folder `lane`.
fn hashes(b: &Path, lane: &str, arm: &str) -> BTreeMap<String, String> {
    let m = json(&b.join("artifact-manifest.json"));
    let prefix = format!("lanes/{lane}/{arm}-");
    m["files"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| f["path"].as_str().unwrap().starts_with(&prefix))
        .map(|f| (f["path"].as_str().unwrap().into(), f["sha256"].to_string()))
        .collect()
}

/// SIGKILL while both lanes serve an arm (`b` on the incumbent's lane g0, `c` on the
/// qualification lane g1, after `a` finished there): `recover` stops both, restores the incumbent
/// on g0, leaves g1 empty and seals the bundle (not complete); `--resume` then runs only what
/// was not finished (a's evidence kept byte for byte) and the bundle completes and verifies.
#[test]
fn sigkill_during_two_lanes_then_recover_and_resume() {
    let _g = shared();
    let t = Camp::new();
    for (p, prof) in [("inc", FAST), ("a", FAST), ("b", SLOW), ("c", SLOW)] {
        t.profile(p, prof);
    }
    let f = t.write(
        &[("inc", "inc"), ("a", "a"), ("b", "b"), ("c", "c")],
        "",
        "",
    );
    let toml = std::fs::read_to_string(&f).unwrap();
    let p1 = free_port();
    std::fs::write(&f, as_lanes(&toml, &[("g1", p1)])).unwrap();
    let t0 = Instant::now();
    let mut live = t.spawn_run("inc", &f, None);
    let b = live.bundle.clone();
    let _ports = Ports(&b, [t.port, p1]);
    let serving = |port: u16, arm: &str| {
        b.join(format!(
            "lanes/{}/{arm}-launch.json",
            if port == p1 { "g1" } else { "g0" }
        ))
        .exists()
            && listener_model(port).as_deref() == Some(arm)
    };
    let limit = Instant::now() + Duration::from_secs(120);
    while !(serving(t.port, "b") && serving(p1, "c")) {
        assert!(Instant::now() < limit, "b and c never served together");
        std::thread::sleep(Duration::from_millis(20));
    }
    // SAFETY: signals the bakeoff process this test started.
    unsafe { libc::kill(live.pid() as i32, libc::SIGKILL) };
    let e = live.end();
    assert_eq!(e.out.status.code(), None, "{}", text(&e.out));
    let r = json(&b.join("campaign-result.json"));
    assert!(
        r["incomplete_reason"]
            .as_str()
            .unwrap()
            .starts_with("running"),
        "{r:#}"
    );
    assert!(!b.join("artifact-manifest.json").exists());
    // A lane folder's own result names the bundle to recover, not itself (refused alone).
    let lane = json(&b.join("lanes/g1/campaign-result.json"));
    let said = lane["incomplete_reason"].as_str().unwrap();
    assert!(
        said.contains(&format!("`bakeoff recover {}`", b.display())) && !said.contains("lanes/g1"),
        "{said}"
    );
    let killed = t0.elapsed().as_secs_f64();

    // recover: every lane back, one line per lane.
    let locks = t.path("locks");
    let bs = b.to_str().unwrap();
    let o = bakeoff_command(&locks, &["recover", bs]).output().unwrap();
    let out = text(&o);
    assert!(o.status.success(), "{out}");
    for says in [
        "lane g0: invocation 1 of this bundle died before it finished",
        "lane g0: the incumbent `inc` serves the lane",
        "lane g1: nothing serves the qualification lane",
        "lane g0 is back (see lanes/g0/recovery-2.json)",
        "lane g1 is back (see lanes/g1/recovery-2.json)",
        "every lane is back; finish the campaign with `bakeoff run --resume",
    ] {
        assert!(out.contains(says), "{says}: {out}");
    }
    assert_eq!(listener_model(t.port).as_deref(), Some("inc"), "{out}");
    assert!(
        bakeoff::lane::procnet::find_listeners(p1).is_empty(),
        "{out}"
    );
    nothing_left(&b.join("lanes/g0"), t.port);
    nothing_left(&b.join("lanes/g1"), p1);
    verify(&b);
    let r = json(&b.join("campaign-result.json"));
    assert_eq!(r["complete"], false, "{r:#}");
    let why = r["incomplete_reason"].as_str().unwrap();
    assert!(
        why.contains("lane g0 back, lane g1 back") && why.contains("--resume"),
        "{why}"
    );
    assert_eq!(arm(&r, "a")["status"], "completed", "{r:#}");
    let rec = json(&b.join("lanes/g1/recovery-2.json"));
    assert_eq!(rec["lane_ok"], true, "{rec:#}");
    assert!(rec["entries"].to_string().contains("stopped-by-recovery"));
    let a_files = hashes(&b, "g1", "a");
    assert!(a_files.len() >= 4, "{a_files:?}");
    // One lane's folder is not a bundle of its own.
    let g1 = b.join("lanes/g1");
    let o = bakeoff_command(&locks, &["recover", g1.to_str().unwrap()])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(
        text(&o).contains("is one lane's folder of a multi-lane bundle"),
        "{}",
        text(&o)
    );
    let recovered = t0.elapsed().as_secs_f64();

    // --resume: each lane from its checkpoint; a is not run again.
    let o = bakeoff_command(&locks, &["run", "--resume", bs, "--no-progress"])
        .output()
        .unwrap();
    let out = text(&o);
    let r = json(&b.join("campaign-result.json"));
    assert!(o.status.success(), "{out}\n{r:#}");
    assert!(out.contains("(resuming)"), "{out}");
    assert_eq!(r["complete"], true, "{r:#}");
    for id in ["inc", "a", "b", "c"] {
        assert_eq!(arm(&r, id)["status"], "completed", "{id}: {r:#}");
    }
    assert_eq!(r["restoration"]["status"], "passed", "{r:#}");
    verify(&b);
    assert_eq!(hashes(&b, "g1", "a"), a_files);
    let ck = json(&g1.join("checkpoint.json"));
    for s in ck["steps"].as_array().unwrap() {
        if s["arm"] == "a" {
            assert_eq!(s["invocation"], 1, "a ran once: {s:#}");
        }
    }
    // c's unfinished steps ran in the resume (invocation 3: run, recover, resume).
    let c3 = ck["steps"]
        .as_array()
        .unwrap()
        .iter()
        .any(|s| s["arm"] == "c" && s["invocation"] == 3);
    assert!(c3, "{ck:#}");
    // report.html's per-lane view: which arm ran where and when (c over two invocations), the
    // control on every lane and the spread.
    let page = std::fs::read_to_string(b.join("report.html")).unwrap();
    let lanes = &page[page.find("<h2 id=\"lanes\">").expect("a per-lane section")..];
    for says in [
        "<td rowspan=3>g1</td>",
        "none (qualification lane)",
        "<td>inc.control</td>",
        "<td>a</td>",
        "<td class=n>1, 3</td>",
        "id=\"lane-control\"",
        "lanes/g1/inc.control-timing-64-c1-warm.json",
        "<td>ttft</td>",
        " (same host)</td>",
    ] {
        assert!(lanes.contains(says), "{says}: {lanes}");
    }
    // The lanes' timeline: only the resume (invocation 3) recorded its schedule; c's steps that
    // ran then start g1's run, laid end to end from its start.
    assert!(!lanes.contains("<svg id=\"lane-timeline-1\""), "{lanes}");
    let (start, _) = run_span(&r, 3, "lanes/g1");
    let (s, e, outcome, control) = timeline_bar(lanes, "lane-timeline-3", "g1", "lanes/g1", "c");
    let wall = arm_wall_ms(&g1, "c", 3);
    assert!((s - start).abs() < 0.001, "bar at {s}, run at {start}");
    assert!(
        (e - (start + wall)).abs() < 0.01,
        "bar ends {e}, {start} + {wall}"
    );
    assert_eq!((outcome.as_str(), control), ("completed", false));
    // The run SIGKILL ended (and the recovery) recorded none: said.
    let key = "<p id=\"lane-timeline-unrecorded\" data-invocations=\"";
    let said = lanes.find(key).map(|i| &lanes[i + key.len()..]);
    let said = said.map(|p| &p[..p.find('"').unwrap()]);
    assert!(
        said.is_some_and(|l| l.starts_with('1') && !l.contains('3')),
        "{said:?}"
    );
    assert!(b.join("lane-spread.json").is_file());
    assert_eq!(listener_model(t.port).as_deref(), Some("inc"), "{out}");
    assert!(bakeoff::lane::procnet::find_listeners(p1).is_empty());
    eprintln!(
        "killed at {killed:.1} s, recovered at {recovered:.1} s, resumed at {:.1} s",
        t0.elapsed().as_secs_f64()
    );
}
