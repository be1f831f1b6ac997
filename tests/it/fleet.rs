//! Fleet campaigns (docs/fleet.md): `[[lanes]]` beside `[lane]`, the schedule `--dry-run`
//! prints, the errors of a bad lane list, a one-table `[[lanes]]` campaign running exactly as
//! its `[lane]` twin, and several lanes running side by side into one bundle (a signal reaching
//! every lane; what is not built for such bundles refusing them).

use crate::support::campaign::*;
use crate::support::{exclusive, shared};
use std::path::Path;

const FAST: &str = "ttft_ms = 10\ndecode_tok_s = 400\ncontext_tokens = 4096";

/// `[lane]` of `Camp::head` turned into `[[lanes]]` tables: the first (`g0`, the campaign's own
/// port) serves the incumbent `inc`; `more` are (id, port) qualification lanes.
pub(crate) fn as_lanes(text: &str, more: &[(&str, u16)]) -> String {
    let mut extra = String::new();
    for (id, port) in more {
        extra.push_str(&format!(
            "\n[[lanes]]\nid = \"{id}\"\nhost = \"127.0.0.1\"\nport = {port}\n"
        ));
    }
    let text = text.replace("[lane]\n", "[[lanes]]\nid = \"g0\"\nincumbent = \"inc\"\n");
    text.replacen("\n[workload]\n", &format!("{extra}\n[workload]\n"), 1)
}

/// Every file the bundle's manifest lists, sorted.
fn manifest_files(bundle: &Path) -> Vec<String> {
    let m = json(&bundle.join(bakeoff::evidence::bundle::MANIFEST));
    let mut files: Vec<String> = m["files"]
        .as_array()
        .unwrap_or_else(|| panic!("the manifest has no files list: {m}"))
        .iter()
        .map(|f| f["path"].as_str().unwrap_or_default().to_string())
        .collect();
    files.sort();
    files
}

#[test]
fn dry_run_prints_each_lane_and_its_arms() {
    let t = Camp::new();
    for p in ["inc", "a", "b", "c"] {
        t.profile(p, FAST);
    }
    let f = t.write(
        &[("inc", "inc"), ("a", "a"), ("b", "b"), ("c", "c")],
        "",
        "",
    );
    let text = std::fs::read_to_string(&f).unwrap();
    let (p1, p2) = (free_port(), free_port());
    std::fs::write(&f, as_lanes(&text, &[("g1", p1), ("g2", p2)])).unwrap();
    let o = run(&[f.to_str().unwrap(), "--dry-run"]);
    let out = text_of(&o);
    assert!(o.status.success(), "{out}");
    assert!(out.contains("lanes        3 lane(s)"), "{out}");
    assert!(
        out.contains(&format!("lane g1      http://127.0.0.1:{p1}")),
        "{out}"
    );
    assert!(
        out.contains("  incumbent  inc (stopped first, restored exactly afterwards)"),
        "{out}"
    );
    // Four arms of equal length: inc on its lane, then a → g1, b → g2, c → g0 (least loaded, in
    // lane order among equals).
    let block = |lane: &str| {
        let start = out.find(&format!("lane {lane:<7}")).unwrap();
        let rest = &out[start + 1..];
        let end = rest
            .find("\nlane ")
            .or_else(|| rest.find("\nworkload"))
            .unwrap();
        rest[..end].to_string()
    };
    assert!(
        block("g0").contains("1. inc (") && block("g0").contains("2. c ("),
        "{out}"
    );
    assert!(block("g1").contains("1. a ("), "{out}");
    assert!(block("g2").contains("1. b ("), "{out}");
}

/// A qualification lane whose port something already serves is refused before anything
/// starts: exit 2, no bundle, no logs folder, and the incumbent's lane untouched.
#[test]
fn a_busy_qualification_lane_is_refused_before_anything_starts() {
    let t = Camp::new();
    t.profile("inc", FAST);
    t.profile("a", FAST);
    let f = t.write(&[("inc", "inc"), ("a", "a")], "", "");
    let text = std::fs::read_to_string(&f).unwrap();
    let busy = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let p1 = busy.local_addr().unwrap().port();
    std::fs::write(&f, as_lanes(&text, &[("g1", p1)])).unwrap();
    let o = run_command(&t.path("locks"), &[f.to_str().unwrap()])
        .output()
        .unwrap();
    let out = text_of(&o);
    assert_eq!(o.status.code(), Some(2), "{out}");
    assert!(
        out.contains(&format!(
            "lane g1: port 127.0.0.1:{p1} of a qualification lane (no incumbent) is in use"
        )),
        "{out}"
    );
    assert!(!t.bundle().exists(), "nothing is written: {out}");
    assert!(!t.path("out.g0.logs").exists(), "{out}");
    drop(busy);
}

/// Seconds since the epoch of a `YYYY-MM-DDTHH:MM:SSZ` label (the checkpoint's `finished_at`).
fn epoch_s(label: &str) -> f64 {
    let n = |r: std::ops::Range<usize>| label[r].parse::<i64>().unwrap();
    let (y, m, d) = (n(0..4), n(5..7), n(8..10));
    // Days from the civil date (Howard Hinnant's algorithm).
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    (days * 86_400 + n(11..13) * 3600 + n(14..16) * 60 + n(17..19)) as f64
}

/// The span of a lane's arm steps in its checkpoint: from the first arm step's start (its end
/// less its wall time) to the last one's end, seconds since the epoch (1 s resolution).
fn arm_span(lane_dir: &Path) -> (f64, f64) {
    let ck = json(&lane_dir.join("checkpoint.json"));
    let mut span = (f64::MAX, f64::MIN);
    for s in ck["steps"].as_array().unwrap() {
        let (Some(at), Some(ms)) = (s["finished_at"].as_str(), s["wall_ms"].as_f64()) else {
            continue;
        };
        if s["arm"].is_null()
            || s["step"] == "stop-incumbent"
            || s["evidence"].as_str().unwrap().starts_with("restoration-")
        {
            continue;
        }
        let end = epoch_s(at);
        span = (span.0.min(end - ms / 1e3), span.1.max(end));
    }
    assert!(span.0 < span.1, "no arm step in {}", lane_dir.display());
    span
}

/// The first bar of arm `arm` in run folder `folder` on lane `lane` of report.html's lanes'
/// timeline `svg` (`lane-timeline-<invocation>`): its start and end (ms on the invocation's
/// clock), outcome and whether it is the control's copy.
pub(crate) fn timeline_bar(
    page: &str,
    svg: &str,
    lane: &str,
    folder: &str,
    arm: &str,
) -> (f64, f64, String, bool) {
    let at = page
        .find(&format!("<svg id=\"{svg}\""))
        .unwrap_or_else(|| panic!("no {svg} in report.html"));
    let head = format!(
        "<g class=\"tl-bar\" data-lane=\"{lane}\" data-folder=\"{folder}\" data-arm=\"{arm}\" "
    );
    let svg_text = &page[at..at + page[at..].find("</svg>").unwrap()];
    let i = svg_text
        .find(&head)
        .unwrap_or_else(|| panic!("no bar {head} in {svg_text}"));
    let attrs = &svg_text[i + head.len()..];
    let attrs = &attrs[..attrs.find('>').unwrap()];
    let attr = |k: &str| {
        let from = attrs.find(&format!("{k}=\"")).unwrap() + k.len() + 2;
        attrs[from..from + attrs[from..].find('"').unwrap()].to_string()
    };
    (
        attr("data-start-ms").parse().unwrap(),
        attr("data-end-ms").parse().unwrap(),
        attr("data-outcome"),
        attr("data-control") == "true",
    )
}

/// The span of run folder `folder` in invocation `inv`'s `schedule_timing` of a result.
pub(crate) fn run_span(r: &serde_json::Value, inv: u64, folder: &str) -> (f64, f64) {
    let t = r["schedule_timing"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["invocation"] == inv)
        .unwrap_or_else(|| panic!("no schedule_timing of invocation {inv}: {r:#}"));
    let s = t["runs"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["folder"] == folder)
        .unwrap_or_else(|| panic!("no run {folder} in {t:#}"));
    (
        s["start_ms"].as_f64().unwrap(),
        s["end_ms"].as_f64().unwrap(),
    )
}

/// The wall times of arm `arm`'s steps that invocation `inv` ran in a run folder's checkpoint.
pub(crate) fn arm_wall_ms(run_dir: &Path, arm: &str, inv: u64) -> f64 {
    let ck = json(&run_dir.join("checkpoint.json"));
    ck["steps"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|s| s["arm"] == arm && s["invocation"] == inv)
        .filter_map(|s| s["wall_ms"].as_f64())
        .sum()
}

/// A campaign over two lanes (the incumbent's and a qualification lane) runs both at once into
/// one bundle: every arm completes on its scheduled lane, its evidence names carry the lane,
/// the bundle verifies and renders, the verdict covers every arm, the incumbent is restored on
/// its lane and nothing is left on the other; the lanes' arm spans overlap in the checkpoints'
/// own timestamps. The commands not built for multi-lane bundles refuse it; a resume of it has
/// nothing to do.
#[test]
fn two_lanes_run_side_by_side_into_one_bundle() {
    // The overlap is read from wall-clock stamps: nothing else times beside it.
    let _g = exclusive();
    let t = Camp::new();
    // Each arm takes a while to start, so that a lane's arms last long enough to show overlap
    // beyond the stamps' 1 s resolution.
    let slow_start = format!("startup_ms = 1500\n{FAST}");
    for p in ["inc", "a", "b", "c"] {
        t.profile(p, &slow_start);
    }
    let f = t.write(
        &[("inc", "inc"), ("a", "a"), ("b", "b"), ("c", "c")],
        "",
        "",
    );
    let text = std::fs::read_to_string(&f).unwrap();
    let p1 = free_port();
    std::fs::write(&f, as_lanes(&text, &[("g1", p1)])).unwrap();
    let t0 = std::time::Instant::now();
    let mut live = t.spawn_run("inc", &f, None);
    let (e, r) = live.end_with(0);
    let wall = t0.elapsed().as_secs_f64();
    let b = live.bundle.clone();
    let out = text_of(&e.out);
    lanes_put_back(&t, p1, &out);
    live.cleanup();
    verify(&b);
    assert_eq!(r["complete"], true, "{r:#}");
    assert_eq!(r["restoration"]["status"], "passed", "{r:#}");
    assert_eq!(
        r["restoration"]["evidence"], "lanes/g0/restoration-identity.json",
        "{r:#}"
    );
    // inc on its lane; a → g1, b → g0, c → g1 (equal lengths: least loaded, lane order).
    let lanes = r["lanes"].as_array().unwrap();
    assert_eq!(lanes.len(), 2, "{r:#}");
    assert_eq!(lanes[0]["id"], "g0");
    assert_eq!(lanes[0]["incumbent"], "inc");
    assert_eq!(lanes[0]["arms"], serde_json::json!(["inc", "b"]));
    assert_eq!(lanes[1]["id"], "g1");
    assert!(lanes[1]["incumbent"].is_null());
    assert_eq!(lanes[1]["arms"], serde_json::json!(["a", "c"]));
    // Both lanes are on this host: the client ran beside them, no round trip to state.
    for l in lanes {
        assert_eq!(l["client"]["mode"], "same-host", "{l:#}");
        assert!(l["client"]["rtt_ms"].is_null(), "{l:#}");
    }
    assert!(
        !r["notes"].to_string().contains("over the network"),
        "{r:#}"
    );
    for (id, lane) in [("inc", "g0"), ("a", "g1"), ("b", "g0"), ("c", "g1")] {
        let a = arm(&r, id);
        assert_eq!(a["status"], "completed", "{id}: {a:#}");
        let ev = a["evidence"].as_array().unwrap();
        assert!(!ev.is_empty(), "{id}");
        for e in ev {
            let e = e.as_str().unwrap();
            assert!(e.starts_with(&format!("lanes/{lane}/{id}-")), "{id}: {e}");
            assert!(b.join(e).is_file(), "{e}");
        }
        assert!(
            a["warm"]["evidence"]
                .as_str()
                .unwrap()
                .starts_with(&format!("lanes/{lane}/")),
            "{a:#}"
        );
        assert!(out.contains(&format!("on lane {lane}")), "{out}");
    }
    // Progress lines are tagged with their lane.
    assert!(out.contains("lane g1: arm "), "{out}");
    assert!(out.contains("lane g0: arm "), "{out}");
    // The qualification lane stopped and restored nothing.
    assert!(!b.join("lanes/g1/incumbent-shutdown.json").exists());
    assert!(!b.join("lanes/g1/restoration-launch.json").exists());
    assert!(b.join("lanes/g0/incumbent-shutdown.json").is_file());
    // No raw log inside the bundle: each lane's sit beside it.
    assert!(t.path("out.g0.logs").is_dir() && t.path("out.g1.logs").is_dir());
    // One verdict over every arm.
    let d = json(&b.join("decision-summary.json"));
    let mut ids: Vec<&str> = d["arms"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["id"].as_str().unwrap())
        .collect();
    ids.sort_unstable();
    assert_eq!(ids, vec!["a", "b", "c", "inc"], "{d:#}");
    // Arms of different lanes were ranked against each other after a control (the incumbent's
    // recipe) ran on every lane: the verdict gives the spread it measured, in the decision
    // summary and the publication summary.
    let measured = "The card-to-card spread, measured by a short A/A timing of inc's recipe";
    assert!(
        d["limitations"].to_string().contains(measured),
        "{:#}",
        d["limitations"]
    );
    let md = std::fs::read_to_string(b.join("publication-summary.md")).unwrap();
    assert!(md.contains(measured), "{md}");
    assert!(b
        .join("lanes/g1/inc.control-timing-64-c1-warm.json")
        .is_file());
    // Side by side, from the evidence: the lanes' arm spans overlap by more than the stamps'
    // resolution (one after the other they would overlap by at most 1 s).
    let (s0, e0) = arm_span(&b.join("lanes/g0"));
    let (s1, e1) = arm_span(&b.join("lanes/g1"));
    let overlap = e0.min(e1) - s0.max(s1);
    eprintln!(
        "lane g0 arms {:.1} s, lane g1 arms {:.1} s, overlap {overlap:.1} s, run {wall:.1} s",
        e0 - s0,
        e1 - s1
    );
    assert!(overlap >= 2.0, "g0 {s0}..{e0}, g1 {s1}..{e1}");
    // `bakeoff report` renders it again and it still verifies.
    let o = std::process::Command::new(BIN)
        .arg("report")
        .arg(&b)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", text_of(&o));
    verify(&b);
    // report.html's lanes' timeline: g1's run placed where the schedule timed it, the control's
    // copy first there, marked apart, its steps laid end to end from the run's start.
    let page = std::fs::read_to_string(b.join("report.html")).unwrap();
    let r = json(&b.join("campaign-result.json"));
    let (start, end) = run_span(&r, 1, "lanes/g1");
    let (s, e, outcome, control) =
        timeline_bar(&page, "lane-timeline-1", "g1", "lanes/g1", "inc.control");
    let wall = arm_wall_ms(&b.join("lanes/g1"), "inc.control", 1);
    assert!((s - start).abs() < 0.001, "bar at {s}, run at {start}");
    assert!(
        (e - (start + wall)).abs() < 0.01,
        "bar ends {e}, {start} + {wall}"
    );
    assert!(e <= end, "bar ends {e} after its run {end}");
    assert_eq!((outcome.as_str(), control), ("completed", true));
    for (lane, arm) in [("g0", "inc"), ("g0", "b"), ("g1", "a"), ("g1", "c")] {
        let (_, _, outcome, control) = timeline_bar(
            &page,
            "lane-timeline-1",
            lane,
            &format!("lanes/{lane}"),
            arm,
        );
        assert_eq!((outcome.as_str(), control), ("completed", false), "{arm}");
    }
    assert!(!page.contains("lane-timeline-unrecorded"));
    // What is not built for multi-lane bundles says so.
    let locks = t.path("locks");
    let refused = |args: &[&str], code: i32, says: &str| {
        let o = bakeoff_command(&locks, args).output().unwrap();
        let out = text_of(&o);
        assert_eq!(o.status.code(), Some(code), "{args:?}: {out}");
        assert!(out.contains(says), "{args:?}: {out}");
    };
    let bs = b.to_str().unwrap();
    refused(
        &["run", "--resume", bs, "--no-progress"],
        0,
        "is already complete; nothing to resume",
    );
    // A lane's own folder is no bundle of its own to recover or resume.
    refused(
        &["recover", b.join("lanes/g1").to_str().unwrap()],
        2,
        "is one lane's folder of a multi-lane bundle: `bakeoff recover` takes the whole bundle",
    );
    // `compare` reads a multi-lane bundle: each shared arm's lanes beside its figures (the same
    // lane on both sides here, so no card-to-card caveat).
    let o = bakeoff_command(&locks, &["compare", bs, bs, "--json"])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", text_of(&o));
    let doc: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let rows = doc["rows"].as_array().unwrap();
    assert!(!rows.is_empty(), "{doc:#}");
    for r in rows {
        let l = &r["lanes"];
        assert!(l["a"].as_str().is_some_and(|s| s.starts_with("g")), "{r:#}");
        assert_eq!(l["a"], l["b"], "{r:#}");
        assert_eq!(l["other_card"], false, "{r:#}");
    }
    // The history takes it (each arm on its own lane: tests/it/history_fleet.rs).
    let db = t.path("history.sqlite");
    refused(
        &["history", "--db", db.to_str().unwrap(), "add", bs],
        0,
        "added ",
    );
    // The lane still serves the incumbent the test cleaned up: nothing above touched a lane.
    assert!(bakeoff::lane::procnet::find_listeners(p1).is_empty());
}

/// SIGINT while both lanes run arms: every lane stops its arm, the incumbent's lane restores
/// it, the run exits 130 with a sealed bundle that says it was interrupted, and nothing is left
/// serving the qualification lane.
#[test]
fn sigint_reaches_every_lane_and_the_incumbent_is_restored() {
    let _g = shared();
    let t = Camp::new();
    let slow_start = format!("startup_ms = 1000\n{FAST}");
    for p in ["inc", "a", "b"] {
        t.profile(p, &slow_start);
    }
    let f = t.write(&[("inc", "inc"), ("a", "a"), ("b", "b")], "", "");
    let text = std::fs::read_to_string(&f).unwrap();
    let p1 = free_port();
    std::fs::write(&f, as_lanes(&text, &[("g1", p1)])).unwrap();
    let mut live = t.spawn_run("inc", &f, None);
    // Arm `a` is ready on g1 (the incumbent's lane is then measuring `inc`).
    live.wait_for("lanes/g1/a-ready.json", std::time::Duration::from_secs(60));
    // SAFETY: signals the bakeoff process this test started.
    unsafe {
        libc::kill(live.pid() as i32, libc::SIGINT);
    }
    let (e, r) = live.end_with(130);
    let b = live.bundle.clone();
    let out = text_of(&e.out);
    lanes_put_back(&t, p1, &out);
    live.cleanup();
    verify(&b);
    assert_eq!(r["complete"], false);
    assert_eq!(r["restoration"]["status"], "passed", "{r:#}");
    let reason = r["incomplete_reason"].as_str().unwrap();
    assert!(
        reason.contains("lane g1: interrupted by SIGINT during a/"),
        "{reason}"
    );
    for l in r["lanes"].as_array().unwrap() {
        assert_eq!(l["complete"], false, "{l:#}");
        assert!(
            l["incomplete_reason"]
                .as_str()
                .unwrap()
                .starts_with("interrupted by SIGINT"),
            "{l:#}"
        );
    }
    assert_eq!(arm(&r, "a")["status"], "interrupted", "{r:#}");
}

#[test]
fn a_bad_lane_list_names_file_field_and_fix() {
    let t = Camp::new();
    t.profile("inc", FAST);
    let f = t.write(&[("inc", "inc")], "", "");
    let text = std::fs::read_to_string(&f).unwrap();
    let port = t.port;
    let bad = as_lanes(&text, &[("g0", port)]);
    std::fs::write(&f, &bad).unwrap();
    let o = run(&[f.to_str().unwrap(), "--dry-run"]);
    let out = text_of(&o);
    assert!(!o.status.success(), "{out}");
    let file = f.display().to_string();
    let id_line = line_of(&bad, "id = \"g0\"", 1);
    let port_line = line_of(&bad, &format!("port = {port}"), 1);
    assert!(
        out.contains(&format!(
            "{file}:{id_line}: lanes[1].id: lane id `g0` is used twice"
        )),
        "{out}"
    );
    assert!(
        out.contains(&format!(
            "{file}:{port_line}: lanes[1].port: lane `g0` is on 127.0.0.1:{port}"
        )),
        "{out}"
    );
    assert!(
        out.contains("give each lane its own host and port"),
        "{out}"
    );
}

/// One `[[lanes]]` table is the one-lane form: the run, its evidence names and its verdict are
/// those of the same campaign written with `[lane]`.
#[test]
fn one_lanes_table_runs_exactly_like_lane() {
    // Two whole runs whose evidence lists are compared: an arm failing on a loaded machine would
    // change the list, so nothing else times beside them.
    let _g = exclusive();
    let t = Camp::new();
    t.profile("inc", FAST);
    t.profile(
        "fast",
        "ttft_ms = 5\ndecode_tok_s = 600\ncontext_tokens = 4096",
    );
    let f = t.write(&[("inc", "inc"), ("fast", "fast")], "", "");
    let lane_form = t.run_ok("inc", &f);
    let want = manifest_files(&lane_form);
    let first = json(&lane_form.join("campaign-result.json"));
    std::fs::rename(&lane_form, t.path("out-lane")).unwrap();

    let text = std::fs::read_to_string(&f).unwrap();
    std::fs::write(&f, as_lanes(&text, &[])).unwrap();
    let b = t.run_ok("inc", &f);
    verify(&b);
    assert_eq!(manifest_files(&b), want);
    let r = json(&b.join("campaign-result.json"));
    for id in ["inc", "fast"] {
        assert_eq!(arm(&r, id)["status"], arm(&first, id)["status"], "{r}");
    }
    let o = std::process::Command::new(BIN)
        .args(["report"])
        .arg(&b)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", text_of(&o));
}

fn text_of(o: &std::process::Output) -> String {
    text(o)
}

/// An arm that fails on one lane fails there only: its lane goes on with its next arm, the other
/// lane is untouched, and the campaign completes with the failure in its verdict.
#[test]
fn an_arm_failing_on_one_lane_leaves_the_other_arms_running() {
    let _g = shared();
    let t = Camp::new();
    for p in ["inc", "b", "c"] {
        t.profile(p, FAST);
    }
    t.profile(
        "a",
        &format!("fail_at_startup = \"no such device\"\n{FAST}"),
    );
    let f = t.write(
        &[("inc", "inc"), ("a", "a"), ("b", "b"), ("c", "c")],
        "",
        "",
    );
    let text = std::fs::read_to_string(&f).unwrap();
    let p1 = free_port();
    std::fs::write(&f, as_lanes(&text, &[("g1", p1)])).unwrap();
    let mut live = t.spawn_run("inc", &f, None);
    let (_, r) = live.end_with(0);
    let b = live.bundle.clone();
    assert_eq!(listener_model(t.port).as_deref(), Some("inc"));
    live.cleanup();
    verify(&b);
    assert_eq!(r["complete"], true, "{r:#}");
    // a and c on g1, inc and b on g0: a failed, c after it on the same lane still ran.
    assert_eq!(
        r["lanes"][1]["arms"],
        serde_json::json!(["a", "c"]),
        "{r:#}"
    );
    assert_eq!(arm(&r, "a")["status"], "failed", "{r:#}");
    for id in ["inc", "b", "c"] {
        assert_eq!(arm(&r, id)["status"], "completed", "{id}: {r:#}");
    }
    let d = json(&b.join("decision-summary.json"));
    let failures = d["failures"].to_string();
    assert!(failures.contains("lanes/g1/a-"), "{d:#}");
}

/// The incumbent serves its lane (`t.port`) again and nothing serves the qualification lane `p1`.
fn lanes_put_back(t: &Camp, p1: u16, out: &str) {
    assert_eq!(listener_model(t.port).as_deref(), Some("inc"), "{out}");
    assert!(
        bakeoff::lane::procnet::find_listeners(p1).is_empty(),
        "{out}"
    );
}

/// Three lanes, the last made 8 % slower for every arm by its `env` (the reference engine's
/// slowdown): the control (the incumbent's recipe, timed on every lane) measures the spread and
/// names the slow lane, and `quick`, 5 % slower than `peer` as profiled, only looks faster
/// because it ran on a fast lane: a tie "within card-to-card spread", in decision-summary.json
/// and publication-summary.md.
#[test]
fn a_slow_lane_is_measured_and_a_win_by_the_faster_lane_is_a_tie() {
    // Timing figures: nothing else times beside it.
    let _g = exclusive();
    let t = Camp::new();
    t.profile(
        "inc",
        "ttft_ms = 60\ndecode_tok_s = 400\ncontext_tokens = 4096",
    );
    t.profile(
        "quick",
        "ttft_ms = 42\ndecode_tok_s = 400\ncontext_tokens = 4096",
    );
    t.profile(
        "peer",
        "ttft_ms = 40\ndecode_tok_s = 400\ncontext_tokens = 4096",
    );
    let small = Small {
        ranking: r#""ttft""#,
        reps: 6,
        ..Small::default()
    };
    let f = t.write_small(
        "slow-lane",
        &small,
        &[
            ("inc", "incumbent"),
            ("quick", "candidate"),
            ("peer", "candidate"),
        ],
    );
    let text = std::fs::read_to_string(&f).unwrap();
    let (p1, p2) = (free_port(), free_port());
    let text = as_lanes(&text, &[("g1", p1), ("g2", p2)]).replace(
        "id = \"g2\"\n",
        "id = \"g2\"\nenv = { BAKEOFF_REFENGINE_SLOWDOWN = \"1.08\" }\n",
    );
    std::fs::write(&f, text).unwrap();
    let t0 = std::time::Instant::now();
    let mut live = t.spawn_run("inc", &f, None);
    let (e, r) = live.end_with(0);
    let b = live.bundle.clone();
    let out = text_of(&e.out);
    live.cleanup();
    for p in [p1, p2] {
        assert!(
            bakeoff::lane::procnet::find_listeners(p).is_empty(),
            "{out}"
        );
    }
    verify(&b);
    eprintln!(
        "three lanes, slow lane: {:.1} s",
        t0.elapsed().as_secs_f64()
    );
    assert_eq!(r["complete"], true, "{r:#}");
    // inc on its lane; quick → g1, peer → g2 (the slow one).
    let lanes: Vec<&serde_json::Value> = r["lanes"].as_array().unwrap().iter().collect();
    assert_eq!(lanes[1]["arms"], serde_json::json!(["quick"]), "{r:#}");
    assert_eq!(lanes[2]["arms"], serde_json::json!(["peer"]), "{r:#}");
    // The control ran on every lane: the incumbent's own measurement on g0, a copy elsewhere.
    let s = json(&b.join("lane-spread.json"));
    assert_eq!(s, r["lane_spread"], "{s:#}");
    assert!(manifest_files(&b).contains(&"lane-spread.json".to_string()));
    let arms: Vec<&str> = s["lanes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| l["arm"].as_str().unwrap())
        .collect();
    assert_eq!(arms, ["inc", "inc.control", "inc.control"], "{s:#}");
    assert!(b
        .join("lanes/g2/inc.control-timing-64-c1-warm.json")
        .is_file());
    let ttft = &s["spread"]["ttft"];
    let measured = ttft["spread"].as_f64().unwrap() * 100.0;
    eprintln!("measured TTFT spread {measured:.2} % (g2 slowed 8 %): {s:#}");
    assert!((6.0..=10.0).contains(&measured), "{s:#}");
    assert_eq!(ttft["highest"], "g2", "{s:#}");
    let outliers = s["outliers"].to_string();
    assert!(
        outliers.contains("Lane g2's control (inc) differs"),
        "{s:#}"
    );
    // quick measured faster than peer only by its lane: a tie with that reason.
    let d = json(&b.join("decision-summary.json"));
    let why = "within card-to-card spread (";
    assert!(d.to_string().contains(why), "{d:#}");
    assert!(
        d["limitations"].to_string().contains("Lane g2's control"),
        "{d:#}"
    );
    let md = std::fs::read_to_string(b.join("publication-summary.md")).unwrap();
    assert!(md.contains(why), "{md}");
    assert!(
        md.contains("The card-to-card spread, measured by a short A/A timing"),
        "{md}"
    );
}

/// A lane whose port something else takes mid-run is drained (docs/fleet.md "A lane that
/// dies"): the arm whose launch found the port taken and the arm queued after it on that lane
/// run again from their start on a live lane, the moves are recorded with their cause (result,
/// limitations, report.html), what the drained lane measured stays in its folder, and the
/// campaign completes and verifies.
#[test]
fn a_lane_whose_port_is_taken_mid_run_is_drained_and_its_arms_run_elsewhere() {
    let _g = shared();
    let t = Camp::new();
    for p in ["inc", "a", "b", "c", "d"] {
        t.profile(p, FAST);
    }
    let f = t.write(
        &[
            ("inc", "inc"),
            ("a", "a"),
            ("b", "b"),
            ("c", "c"),
            ("d", "d"),
        ],
        "",
        "",
    );
    let text = std::fs::read_to_string(&f).unwrap();
    let (p1, p2) = (free_port(), free_port());
    std::fs::write(&f, as_lanes(&text, &[("g1", p1), ("g2", p2)])).unwrap();
    // a and d on g1, b on g2, inc and c on g0: when a's turn comes on g1, its port is taken.
    let pause = t.path("pause-a");
    let env = [(
        "BAKEOFF_TEST_PAUSE_AT",
        format!("arm-start@a:{}", pause.display()),
    )];
    let mut live = t.spawn_run_env("inc", &f, None, &env);
    wait_for_file(&pause, std::time::Duration::from_secs(60));
    let squatter = std::net::TcpListener::bind(("127.0.0.1", p1)).unwrap();
    std::fs::remove_file(&pause).unwrap();
    // a's turn comes again on the lane it moved to: let it go on there.
    wait_for_file(&pause, std::time::Duration::from_secs(60));
    std::fs::remove_file(&pause).unwrap();
    let (e, r) = live.end_with(0);
    drop(squatter);
    let b = live.bundle.clone();
    let out = text_of(&e.out);
    lanes_put_back(&t, p1, &out);
    assert!(
        bakeoff::lane::procnet::find_listeners(p2).is_empty(),
        "{out}"
    );
    live.cleanup();
    verify(&b);
    assert_eq!(r["complete"], true, "{r:#}");
    for id in ["inc", "a", "b", "c", "d"] {
        assert_eq!(arm(&r, id)["status"], "completed", "{id}: {r:#}");
    }
    // Both of g1's arms moved to g2 (the idle qualification lane) and ran there.
    let moves = r["moves"].as_array().unwrap();
    let moved: Vec<(&str, &str, &str)> = moves
        .iter()
        .map(|m| {
            (
                m["arm"].as_str().unwrap(),
                m["from"].as_str().unwrap(),
                m["to"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(moved, [("a", "g1", "g2"), ("d", "g1", "g2")], "{r:#}");
    let cause = moves[0]["cause"].as_str().unwrap();
    assert!(
        cause.contains(&format!("port 127.0.0.1:{p1} is already in use")),
        "{cause}"
    );
    assert_eq!(moves[0]["folder"], "lanes/g2.moved-1", "{r:#}");
    assert!(arm(&r, "a")["evidence"][0]
        .as_str()
        .unwrap()
        .starts_with("lanes/g2.moved-1/"));
    let g1 = r["lanes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|l| l["id"] == "g1");
    let g1 = g1.unwrap();
    assert_eq!(g1["arms"], serde_json::json!([]), "{r:#}");
    assert!(g1["drained"].as_str().unwrap().contains("already in use"));
    // What a tried on g1 is kept there (its failed launch), not counted.
    let kept = json(&b.join("lanes/g1/a-launch.json"));
    assert_eq!(kept["failure"]["cause"], "port-in-use", "{kept:#}");
    assert!(manifest_files(&b).contains(&"lanes/g1/a-launch.json".to_string()));
    let d = json(&b.join("decision-summary.json"));
    assert!(
        d["limitations"]
            .to_string()
            .contains("Arm a moved from lane g1 to lane g2: lane g1 was drained"),
        "{d:#}"
    );
    let html = std::fs::read_to_string(b.join("report.html")).unwrap();
    assert!(html.contains("Arms moved off drained lanes"));
    // The lanes' timeline draws the moved run on g2's row, its first arm at the run's start.
    let (start, _) = run_span(&r, 1, "lanes/g2.moved-1");
    let (s, _, outcome, _) = timeline_bar(&html, "lane-timeline-1", "g2", "lanes/g2.moved-1", "a");
    assert!((s - start).abs() < 0.001, "bar at {s}, run at {start}");
    assert_eq!(outcome, "completed");
    assert!(out.contains("lane g1 drained"), "{out}");
}
