//! `bakeoff promote` on reference engines (docs/promotion.md): one small campaign bundle per test,
//! then promotions of its arms on the same lane. Bakes are short (1.5 s, intervals of 0.5 s) and
//! thresholds loose (a CI machine's noise never fails a clean interval; the degrading winner's
//! fault adds 300 ms to every TTFT, far beyond them).
//!
//! - `promotion_refusals_dry_run_rollback_and_keep`: refusals (tampered bundle, wrong digest,
//!   ineligible arm, the incumbent, manual policy without --confirm, locked lane), the dry run
//!   touches nothing, a winner that degrades mid-bake is rolled back (its report.html charts the
//!   intervals), a winner whose tool calls break is rolled back by the bake's gate canary, a
//!   clean winner is kept (its canaries passed), then the lane record refuses drift (promote) and
//!   a campaign declaring the old incumbent (run).
//! - `promotion_killed_at_each_point_is_recovered`: SIGKILL before the stop, after the stop,
//!   mid-bake and mid-rollback, each followed by `bakeoff recover DIR`; a winner whose recipe
//!   files changed since the bake-off is refused; a winner that cannot start (the lane port taken)
//!   is rolled back; a rollback that fails marks the lane (runs refused) until `recover` proves the
//!   incumbent back.
//! - `a_multi_lane_bundles_winner_is_promoted_where_the_incumbent_serves`: a two-lane bundle whose
//!   winner ran on the qualification lane: a result listing no incumbent lane is refused, the
//!   dry run says where it was measured, a promotion killed mid-bake is recovered, then the winner
//!   is kept on the incumbent's lane, its record saying where it was measured.

use crate::support::campaign::*;
use crate::support::exclusive as serial;
use crate::support::json_doc::doc;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output};
use std::time::{Duration, Instant};

const INC: &str = PROMO_INC;
const WIN: &str = PROMO_WIN;
const SLOWWIN: &str = PROMO_SLOWWIN;
/// Tool calls break from request 13 on: past the bake-off (its tools gate sends 5), during the
/// promotion's second interval (its canary's requests are numbered above 12 from then on).
const TOOLBRK: &str =
    "ttft_ms = 8\ndecode_tok_s = 400\ncontext_tokens = 4096\ntools_break_after_requests = 12";
/// The tools gate in the bake-off, and so the bake's canary of it: the built-in suite's copy
/// beside the campaign (`Lane::with` writes it), so the test can change it after the bake-off.
const TOOLS: &str = "[gates.tools]\nbatch = 2\nvariants = [\"plain\"]\nsuite = \"tools.toml\"\n";
const BAD: &str =
    "ttft_ms = 5\ndecode_tok_s = 400\ncontext_tokens = 4096\nfail_at_startup = \"no GPU\"";

struct Lane {
    t: Camp,
    locks: PathBuf,
    bundle: PathBuf,
    /// The incumbent the test started (the campaign stops it; reaped at the end).
    inc: Option<Child>,
}

impl Lane {
    /// A campaign (`inc` the incumbent, serving) with `arms` (id, profile), run to its bundle.
    fn new(arms: &[(&str, &str)]) -> Lane {
        Lane::with(arms, "")
    }

    /// [`Lane::new`] with `tables` after the `[promotion]` table (e.g. `[gates.tools]`).
    fn with(arms: &[(&str, &str)], tables: &str) -> Lane {
        Lane::build(arms, tables, None)
    }

    /// [`Lane::new`] over two lanes: `g0` (the test's port), where `inc` serves, and the
    /// qualification lane `g1` on port `q` (tests/it/fleet.rs `as_lanes`).
    fn two_lanes(arms: &[(&str, &str)], q: u16) -> Lane {
        Lane::build(arms, "", Some(q))
    }

    fn build(arms: &[(&str, &str)], tables: &str, q: Option<u16>) -> Lane {
        let t = Camp::new();
        if tables.contains("suite = \"tools.toml\"") {
            let builtin = Path::new(env!("CARGO_MANIFEST_DIR")).join("suites/tools.toml");
            std::fs::copy(builtin, t.path("tools.toml")).unwrap();
        }
        t.profile("inc", INC);
        let mut all = vec![("inc", "incumbent")];
        for (id, body) in arms {
            t.profile(id, body);
            all.push((*id, "candidate"));
        }
        let tables = format!("{PROMOTION}{tables}");
        let small = Small {
            prompt: 32,
            tables: &tables,
            ..Small::default()
        };
        let file = t.write_small("promo", &small, &all);
        if let Some(q) = q {
            let text = std::fs::read_to_string(&file).unwrap();
            std::fs::write(&file, crate::fleet::as_lanes(&text, &[("g1", q)])).unwrap();
        }
        let locks = t.path("locks");
        let inc = Some(t.start_incumbent("inc"));
        let o = bakeoff(
            &locks,
            &[
                "run",
                t.path("campaign.toml").to_str().unwrap(),
                "--no-progress",
            ],
        );
        assert!(o.status.success(), "the campaign failed: {}", text(&o));
        let bundle = t.bundle();
        Lane {
            t,
            locks,
            bundle,
            inc,
        }
    }

    fn promote(&self, args: &[&str]) -> Output {
        let mut a = vec!["promote", self.bundle.to_str().unwrap()];
        a.extend_from_slice(args);
        bakeoff(&self.locks, &a)
    }

    fn folder(&self, name: &str) -> PathBuf {
        self.t.path(name)
    }

    /// `bakeoff run` of the same campaign into `again/` (refused while the lane record or a
    /// failed rollback's mark says the lane is not the bundle's).
    fn run_again(&self) -> Output {
        let campaign = self.t.path("campaign.toml");
        let out = self.folder("again");
        bakeoff(
            &self.locks,
            &[
                "run",
                campaign.to_str().unwrap(),
                "--output",
                out.to_str().unwrap(),
                "--no-progress",
            ],
        )
    }

    fn serves(&self) -> Option<String> {
        listener_model(self.t.port)
    }

    fn record(&self) -> serde_json::Value {
        let f = std::fs::read_dir(&self.locks)
            .unwrap()
            .flatten()
            .find(|e| e.file_name().to_string_lossy().ends_with(".record.json"))
            .expect("a lane record");
        json(&f.path())
    }
}

impl Drop for Lane {
    fn drop(&mut self) {
        cleanup(&self.bundle, self.inc.take(), self.t.port);
    }
}

fn bakeoff(locks: &Path, args: &[&str]) -> Output {
    command(locks, args).output().unwrap()
}

fn command(locks: &Path, args: &[&str]) -> Command {
    bakeoff_command(locks, args)
}

fn code(o: &Output) -> i32 {
    o.status.code().unwrap_or(-1)
}

fn phase(dir: &Path) -> String {
    json(&dir.join("promotion.json"))["phase"]
        .as_str()
        .unwrap()
        .to_string()
}

#[test]
fn promotion_refusals_dry_run_rollback_and_keep() {
    let _g = serial();
    let t0 = Instant::now();
    let l = Lane::with(
        &[
            ("win", WIN),
            ("slowwin", SLOWWIN),
            ("bad", BAD),
            ("toolbrk", TOOLBRK),
        ],
        TOOLS,
    );
    let campaign_s = t0.elapsed().as_secs_f64();
    let inc_pid = bakeoff::lane::procnet::find_listeners(l.t.port)[0].pid;

    // A tampered bundle, a digest that is not the bundle's.
    let copy = l.folder("tampered");
    std::fs::create_dir_all(&copy).unwrap();
    for e in std::fs::read_dir(&l.bundle).unwrap().flatten() {
        std::fs::copy(e.path(), copy.join(e.file_name())).unwrap();
    }
    std::fs::write(copy.join("campaign-result.json"), b"{}").unwrap();
    let o = bakeoff(&l.locks, &["promote", copy.to_str().unwrap(), "--confirm"]);
    assert_eq!(code(&o), 2, "{}", text(&o));
    assert!(text(&o).contains("does not verify"), "{}", text(&o));
    let o = l.promote(&["--confirm", "--digest", &"0".repeat(64)]);
    assert_eq!(code(&o), 2, "{}", text(&o));
    assert!(text(&o).contains("does not verify"), "{}", text(&o));
    // An arm the verdict found ineligible, the incumbent, no --confirm under a manual policy.
    let o = l.promote(&["--arm", "bad", "--confirm"]);
    assert!(text(&o).contains("`bad` is not eligible"), "{}", text(&o));
    let o = l.promote(&["--arm", "inc", "--confirm"]);
    assert!(text(&o).contains("is the incumbent"), "{}", text(&o));
    let o = l.promote(&["--json"]);
    assert_eq!(code(&o), 2, "{}", text(&o));
    let d = doc(&o);
    assert_eq!(
        (&d["schema"], &d["refused"]),
        (&"bakeoff.error/1".into(), &true.into())
    );
    assert!(
        text(&o).contains("policy manual") && text(&o).contains("--confirm"),
        "{}",
        text(&o)
    );
    // A locked lane.
    {
        let h = bakeoff::lane::lock::Holder {
            pid: std::process::id(),
            campaign_id: "someone-else".into(),
            ..Default::default()
        };
        let _lock =
            bakeoff::lane::lock::LaneLock::acquire_in(&l.locks, "127.0.0.1", l.t.port, &h).unwrap();
        let o = l.promote(&["--confirm"]);
        assert_eq!(code(&o), 2, "{}", text(&o));
        assert!(text(&o).contains("someone-else"), "{}", text(&o));
    }
    // The bake's gate canary would not run the suite the bake-off's gate ran: an edited suite
    // file and a missing one are refused before anything stops, naming the field and the file.
    let suite = l.folder("tools.toml");
    let kept = std::fs::read_to_string(&suite).unwrap();
    std::fs::write(&suite, format!("{kept}\n# edited after the bake-off\n")).unwrap();
    let o = l.promote(&["--confirm"]);
    assert_eq!(code(&o), 2, "{}", text(&o));
    assert!(
        text(&o).contains("bake check: gates.tools.suite")
            && text(&o).contains(&suite.display().to_string())
            && text(&o).contains("changed since"),
        "{}",
        text(&o)
    );
    std::fs::remove_file(&suite).unwrap();
    let o = l.promote(&["--confirm"]);
    assert_eq!(code(&o), 2, "{}", text(&o));
    assert!(
        text(&o).contains("gates.tools.suite") && text(&o).contains("does not exist"),
        "{}",
        text(&o)
    );
    std::fs::write(&suite, kept).unwrap();
    assert_eq!(
        bakeoff::lane::procnet::find_listeners(l.t.port)[0].pid,
        inc_pid,
        "the refusals touched nothing"
    );

    // The dry run: the transaction and the rollback plan, nothing touched.
    let o = l.promote(&["--dry-run", "--json"]);
    assert!(o.status.success(), "{}", text(&o));
    let d = doc(&o);
    assert_eq!(
        (&d["action"], &d["arm"]),
        (&"dry-run".into(), &"win".into()),
        "{d:#}"
    );
    let mut out: Vec<&str> = d["plan"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| l.as_str().unwrap())
        .collect();
    out.push(d["why"].as_str().unwrap());
    let out = out.join("\n");
    for w in [
        "rollback check (passed)",
        "bake check (passed)",
        "gates.tools.suite",
        "the campaign's matched prompt (32 tokens, sized on the winner) at 30 req/s",
        "stop the incumbent `inc`",
        "launch `win`",
        "rollback plan",
        "nothing was touched",
    ] {
        assert!(out.contains(w), "{w}: {out}");
    }
    assert_eq!(
        bakeoff::lane::procnet::find_listeners(l.t.port)[0].pid,
        inc_pid
    );
    assert!(!l.folder("out.promote-win").exists());

    // A winner that degrades mid-bake: rolled back within the one-interval budget.
    let t1 = Instant::now();
    let deg = l.folder("deg");
    let o = l.promote(&[
        "--arm",
        "slowwin",
        "--confirm",
        "--output",
        deg.to_str().unwrap(),
        "--bake",
        "3s",
        "--json",
    ]);
    let degrade_s = t1.elapsed().as_secs_f64();
    assert_eq!(code(&o), 1, "{}", text(&o));
    let d = doc(&o);
    assert_eq!(
        (&d["phase"], &d["arm"]),
        (&"rolled-back".into(), &"slowwin".into()),
        "{d:#}"
    );
    assert_eq!(phase(&deg), "rolled-back");
    let r = json(&deg.join("promotion.json"));
    let iv = r["intervals"].as_array().unwrap();
    let failed = iv
        .iter()
        .position(|i| i["outcome"] == "fail")
        .expect("a failed interval");
    assert_eq!(
        failed + 1,
        iv.len(),
        "the bake ends at the first failed interval: {iv:#?}"
    );
    assert!(
        iv.len() <= 4,
        "caught within two intervals of the slowdown: {iv:#?}"
    );
    assert!(
        r["why"].as_str().unwrap().contains("failure limit"),
        "{r:#}"
    );
    assert_eq!(l.serves().as_deref(), Some("inc"));
    verify(&deg);
    // Its report.html: each analysed figure charted per interval, the failed one marked.
    let page = std::fs::read_to_string(deg.join("report.html")).unwrap();
    for w in [
        "chart-bake-ttft",
        "chart-bake-decode",
        "chart-bake-errors",
        "failed interval",
        "\"limit\"",
        "Decision:",
    ] {
        assert!(page.contains(w), "{w} not in report.html");
    }
    let specs = page.split("id=\"chart-specs\">").nth(1).unwrap();
    let specs: serde_json::Value =
        serde_json::from_str(&specs[..specs.find("</script>").unwrap()]).unwrap();
    let ttft = &specs.as_array().unwrap()[0]["config"]["data"]["datasets"];
    assert_eq!(
        ttft[0]["data"].as_array().unwrap().len(),
        iv.iter().filter(|i| i["ttft_p95_ms"].is_number()).count(),
        "one point per measured interval: {ttft:#}"
    );

    // A winner whose tool calls break in service: the bake's gate canary fails its interval.
    let t3 = Instant::now();
    let brk = l.folder("toolbrk");
    let o = l.promote(&[
        "--arm",
        "toolbrk",
        "--confirm",
        "--output",
        brk.to_str().unwrap(),
        "--bake",
        "3s",
    ]);
    let toolbrk_s = t3.elapsed().as_secs_f64();
    assert_eq!(code(&o), 1, "{}", text(&o));
    let r = json(&brk.join("promotion.json"));
    let iv = r["intervals"].as_array().unwrap();
    let last = iv.last().unwrap();
    assert_eq!(last["outcome"], "fail", "{iv:#?}");
    assert!(
        last["detail"].as_str().unwrap().contains("canary tools"),
        "{last:#}"
    );
    assert!(iv.len() <= 3, "caught within two intervals: {iv:#?}");
    assert!(
        iv[0]["checks"]
            .as_array()
            .unwrap()
            .iter()
            .any(|c| c["check"] == "canary" && c["gate"] == "tools" && c["met"] == true),
        "the first canary passed: {:#}",
        iv[0]
    );
    assert_eq!(l.serves().as_deref(), Some("inc"));

    // A clean winner: kept; the lane record names it.
    let t2 = Instant::now();
    let keep = l.folder("keep");
    let o = l.promote(&["--confirm", "--output", keep.to_str().unwrap(), "--json"]);
    let keep_s = t2.elapsed().as_secs_f64();
    assert_eq!(code(&o), 0, "{}", text(&o));
    let d = doc(&o);
    assert_eq!(d["phase"], "promoted", "{d:#}");
    assert_eq!(d["folder"], keep.display().to_string());
    assert_eq!(d["root_digest"].as_str().map(str::len), Some(64), "{d:#}");
    assert_eq!(phase(&keep), "promoted");
    assert_eq!(l.serves().as_deref(), Some("win"));
    verify(&keep);
    assert!(r_canary_passed(&keep), "the clean winner's canaries passed");
    let md = std::fs::read_to_string(keep.join("promotion-summary.md")).unwrap();
    assert!(md.contains("decision: **promoted**"), "{md}");
    let o = bakeoff(&l.locks, &["report", keep.to_str().unwrap()]);
    assert!(
        o.status.success() && text(&o).contains("## Bake intervals"),
        "{}",
        text(&o)
    );
    let rec = l.record();
    assert_eq!(rec["resident"]["arm"], "win");
    assert_eq!(rec["set_by"]["kind"], "promotion");
    let o = bakeoff(&l.locks, &["lane", "status", &l.t.port.to_string()]);
    assert!(
        o.status.success() && text(&o).contains("resident: `win`"),
        "{}",
        text(&o)
    );
    // The same as one JSON document (validated against docs/schemas/lane-status.schema.json).
    let v = doc(&bakeoff(
        &l.locks,
        &["lane", "status", &l.t.port.to_string(), "--json"],
    ));
    assert_eq!(v["lanes"][0]["record"]["resident"]["arm"], "win", "{v:#}");
    assert_eq!(v["lanes"][0]["record"]["state"], "serving", "{v:#}");
    assert_eq!(v["lanes"][0]["process_alive"], true, "{v:#}");

    // Drift: the bundle's incumbent no longer serves the lane.
    let o = l.promote(&["--arm", "slowwin", "--confirm"]);
    assert_eq!(code(&o), 2, "{}", text(&o));
    assert!(text(&o).contains("drift"), "{}", text(&o));
    // A campaign declaring the old incumbent is refused by the lane record.
    let o = l.run_again();
    assert_eq!(code(&o), 2, "{}", text(&o));
    assert!(
        text(&o).contains("lane record says") && text(&o).contains("--accept-lane-drift"),
        "{}",
        text(&o)
    );
    eprintln!(
        "timings: campaign {campaign_s:.1} s, degrading promotion {degrade_s:.1} s, tool-breaking promotion {toolbrk_s:.1} s, clean promotion {keep_s:.1} s, whole test {:.1} s",
        t0.elapsed().as_secs_f64()
    );
}

/// Every interval of the folder ran a tools canary and it passed.
fn r_canary_passed(dir: &Path) -> bool {
    let r = json(&dir.join("promotion.json"));
    r["intervals"].as_array().unwrap().iter().all(|i| {
        i["checks"]
            .as_array()
            .unwrap()
            .iter()
            .any(|c| c["check"] == "canary" && c["met"] == true)
    })
}

/// `bakeoff promote` whose winner cannot start: something else listens on the lane port from the
/// incumbent's stop until the rollback (then gone, so the incumbent comes back). `kill`: SIGKILL
/// at the rollback, then `bakeoff recover`; else the promotion ends by itself (exit 1).
fn squat_until_rollback(l: &Lane, name: &str, kill: bool) -> PathBuf {
    let dir = l.folder(name);
    let (stopped, rollback) = (
        l.folder(&format!("{name}.stopped")),
        l.folder(&format!("{name}.rollback")),
    );
    let mut c = paused_promote(
        l,
        &dir,
        &format!(
            "promote-incumbent-stopped:{};promote-rollback:{}",
            stopped.display(),
            rollback.display()
        ),
    );
    let mut child: Child = c
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    wait_for_file(&stopped, Duration::from_secs(30));
    let squatter = std::net::TcpListener::bind(("127.0.0.1", l.t.port)).unwrap();
    std::fs::remove_file(&stopped).unwrap();
    wait_for_file(&rollback, Duration::from_secs(30));
    drop(squatter);
    if kill {
        child.kill().unwrap();
        child.wait().unwrap();
        let o = bakeoff(&l.locks, &["recover", dir.to_str().unwrap()]);
        assert!(o.status.success(), "recover at the rollback: {}", text(&o));
    } else {
        std::fs::remove_file(&rollback).unwrap();
        let o = child.wait_with_output().unwrap();
        assert_eq!(code(&o), 1, "{}", text(&o));
        assert_eq!(doc(&o)["phase"], "rolled-back");
        assert!(text(&o).contains("launch-winner"), "{}", text(&o));
        assert_eq!(phase(&dir), "rolled-back");
    }
    wait_serving(l.t.port, Duration::from_secs(20));
    assert_eq!(l.serves().as_deref(), Some("inc"), "after {name}");
    verify(&dir);
    dir
}

/// `bakeoff promote --confirm --output DIR` of the lane's bundle with `pauses`
/// (`BAKEOFF_TEST_PAUSE_AT`: `POINT:FILE;...`).
fn paused_promote(l: &Lane, dir: &Path, pauses: &str) -> Command {
    let mut c = command(
        &l.locks,
        &[
            "promote",
            l.bundle.to_str().unwrap(),
            "--confirm",
            "--output",
            dir.to_str().unwrap(),
            "--json",
        ],
    );
    c.env("BAKEOFF_TEST_PAUSE_AT", pauses);
    c
}

/// `bakeoff promote` started with a pause at `point`, SIGKILLed there, then `bakeoff recover`.
fn kill_at(l: &Lane, point: &str, name: &str) -> PathBuf {
    let dir = l.folder(name);
    let marker = l.folder(&format!("{name}.paused"));
    let mut c = paused_promote(l, &dir, &format!("{point}:{}", marker.display()));
    let mut child: Child = c.spawn().unwrap();
    wait_for_file(&marker, Duration::from_secs(30));
    child.kill().unwrap();
    child.wait().unwrap();
    let o = bakeoff(&l.locks, &["recover", dir.to_str().unwrap()]);
    assert!(o.status.success(), "recover after {point}: {}", text(&o));
    assert_eq!(phase(&dir), "rolled-back", "after {point}");
    wait_serving(l.t.port, Duration::from_secs(20));
    assert_eq!(l.serves().as_deref(), Some("inc"), "after {point}");
    verify(&dir);
    dir
}

#[test]
fn promotion_killed_at_each_point_is_recovered() {
    let _g = serial();
    let t0 = Instant::now();
    let l = Lane::new(&[("win", WIN)]);
    kill_at(&l, "promote-before-stop", "k1");
    kill_at(&l, "promote-incumbent-stopped", "k2");
    let k3 = kill_at(&l, "promote-baking", "k3");
    let j = json(&k3.join("launch-journal.json"));
    assert!(
        j["entries"]
            .as_array()
            .unwrap()
            .iter()
            .any(|e| e["arm"] == "win"),
        "the winner was journaled before it started: {j:#}"
    );
    assert!(json(&k3.join("promotion.json"))["notes"]
        .to_string()
        .contains("recovered from phase baking"));
    // A winner whose recipe files changed since the bake-off: refused, nothing touched.
    let profile = l.t.path("win.toml");
    let measured = std::fs::read(&profile).unwrap();
    std::fs::write(&profile, format!("model = \"win\"\n{BAD}\n")).unwrap();
    let o = l.promote(&["--confirm"]);
    assert_eq!(code(&o), 2, "{}", text(&o));
    assert!(
        text(&o).contains("not the recipe the bake-off measured")
            && text(&o).contains("win.toml changed since the bake-off launched it"),
        "{}",
        text(&o)
    );
    assert_eq!(l.serves().as_deref(), Some("inc"));
    std::fs::write(&profile, measured).unwrap();
    // A winner that cannot start (another process took the lane port once the incumbent
    // stopped): rolled back (and killed mid-rollback, recovered).
    let k4 = squat_until_rollback(&l, "k4", true);
    assert_eq!(phase(&k4), "rolled-back");
    let nostart = squat_until_rollback(&l, "nostart", false);
    let p = json(&nostart.join("promotion.json"));
    assert!(p.to_string().contains("already in use"), "{p:#}");

    // A rollback that fails: something else takes the lane port while the incumbent is stopped.
    let dir = l.folder("rbfail");
    let marker = l.folder("rbfail.paused");
    let mut c = paused_promote(
        &l,
        &dir,
        &format!("promote-incumbent-stopped:{}", marker.display()),
    );
    let child = c.spawn().unwrap();
    wait_for_file(&marker, Duration::from_secs(30));
    let squatter = std::net::TcpListener::bind(("127.0.0.1", l.t.port)).unwrap();
    std::fs::remove_file(&marker).unwrap();
    let o = child.wait_with_output().unwrap();
    assert_eq!(code(&o), 4, "{}", text(&o));
    let d = doc(&o);
    assert_eq!(d["phase"], "rollback-failed", "{d:#}");
    assert!(!d["restart"].as_array().unwrap().is_empty(), "{d:#}");
    assert!(
        text(&o).contains("CRITICAL") && text(&o).contains("start the incumbent by hand"),
        "{}",
        text(&o)
    );
    assert_eq!(phase(&dir), "rollback-failed");
    verify(&dir);
    let o = bakeoff(&l.locks, &["lane", "status", &l.t.port.to_string()]);
    assert_eq!(code(&o), 4, "{}", text(&o));
    assert!(text(&o).contains("ROLLBACK FAILED"), "{}", text(&o));
    let v = doc(&bakeoff(
        &l.locks,
        &["lane", "status", &l.t.port.to_string(), "--json"],
    ));
    assert_eq!(v["exit_code"], 4, "{v:#}");
    assert_eq!(v["lanes"][0]["record"]["state"], "rollback-failed", "{v:#}");
    assert!(
        !v["lanes"][0]["record"]["restart"]
            .as_array()
            .unwrap()
            .is_empty(),
        "{v:#}"
    );
    let o = l.run_again();
    assert_eq!(code(&o), 2, "{}", text(&o));
    assert!(text(&o).contains("ROLLBACK FAILED"), "{}", text(&o));
    let o = l.promote(&["--confirm"]);
    assert_eq!(code(&o), 2, "{}", text(&o));
    // Resolved: the port given back, `recover` restores and proves the incumbent.
    drop(squatter);
    let o = bakeoff(&l.locks, &["recover", dir.to_str().unwrap()]);
    assert!(o.status.success(), "{}", text(&o));
    assert_eq!(l.serves().as_deref(), Some("inc"));
    let o = bakeoff(&l.locks, &["lane", "status", &l.t.port.to_string()]);
    assert!(
        o.status.success() && text(&o).contains("state: serving"),
        "{}",
        text(&o)
    );
    verify(&dir);
    eprintln!("timings: whole test {:.1} s", t0.elapsed().as_secs_f64());
}

/// The bake sends the campaign's own workload: a `[workload.dataset]` campaign's bake replays its
/// items, sized on the winner as the bake-off's timing steps were (each request its item's own
/// prompt length), the next items in each interval; the plan names the dataset.
#[test]
fn the_bake_replays_the_campaigns_dataset() {
    let _g = crate::support::shared();
    let t = Camp::new();
    let data = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/datasets/sample.jsonl");
    std::fs::copy(data, t.path("d.jsonl")).unwrap();
    t.profile("inc", INC);
    t.profile("win", WIN);
    let small = Small {
        prompt: 32,
        tables: "[workload.dataset]\npath = \"d.jsonl\"\n",
        ..Small::default()
    };
    let file = t.write_small("ds", &small, &[("inc", "incumbent"), ("win", "candidate")]);
    let c = bakeoff::campaign::load(&file).unwrap_or_else(|e| panic!("{e}"));
    let sends = bakeoff::promote::traffic::sends(&c);
    assert!(
        sends.contains("dataset") && sends.contains("d.jsonl"),
        "{sends}"
    );
    let e = crate::support::reference::Engine::start(&format!("model = \"win\"\n{WIN}"));
    let target = bakeoff::client::Target::parse(&e.url).unwrap();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let arm = c.arm("win").unwrap();
    let work = rt
        .block_on(bakeoff::promote::traffic::prepare(&c, arm, &target))
        .unwrap();
    assert_eq!(
        work.record["items"]["strategy"], "dataset",
        "{:#}",
        work.record
    );
    let lengths = |k: u64, sent: u64| {
        let m = rt.block_on(bakeoff::promote::traffic::interval(
            &target,
            work.source(k, sent),
            40.0,
            Duration::from_millis(300),
        ));
        assert!(m.ok >= 8 && m.failed == 0, "{m:?}");
        let p = &m.metrics["prompt_tokens"];
        (p.min, p.max, m.ok)
    };
    let (min, max, sent) = lengths(1, 0);
    assert!(
        min < max && (min, max) != (32.0, 32.0),
        "the items' own prompt lengths, not the matched prompt's: {min}..{max}"
    );
    let (min2, max2, _) = lengths(2, sent);
    assert!(min2 < max2, "{min2}..{max2}");
}

/// `bakeoff promote` of a multi-lane bundle (docs/promotion.md "From a multi-lane bundle"): the
/// winner, measured on the qualification lane g1, goes into service on g0, where the incumbent
/// serves; its plan, output and record say so with the card-to-card spread the bundle measured.
/// A bundle whose result lists no lane with the incumbent is refused, touching nothing; a
/// promotion killed mid-bake is recovered onto g0 (`recover` reads the multi-lane bundle's
/// campaign); nothing ever serves g1.
#[test]
fn a_multi_lane_bundles_winner_is_promoted_where_the_incumbent_serves() {
    let _g = serial();
    let t0 = Instant::now();
    let q = free_port();
    let l = Lane::two_lanes(&[("win", WIN)], q);
    let campaign_s = t0.elapsed().as_secs_f64();
    let r = json(&l.bundle.join("campaign-result.json"));
    let lanes = r["lanes"].as_array().unwrap();
    assert_eq!(
        (&lanes[0]["id"], &lanes[0]["incumbent"], &lanes[1]["id"]),
        (&"g0".into(), &"inc".into(), &"g1".into()),
        "{r:#}"
    );
    assert_eq!(lanes[1]["arms"], serde_json::json!(["win"]), "{r:#}");
    assert!(lanes[1]["incumbent"].is_null(), "{r:#}");
    let inc_pid = bakeoff::lane::procnet::find_listeners(l.t.port)[0].pid;
    let g1_idle = || bakeoff::lane::procnet::find_listeners(q).is_empty();

    // A bundle whose result lists no lane with the incumbent (edited, then sealed again so that
    // it verifies): refused before anything is touched, naming the fix.
    let noinc = l.folder("noinc");
    copy_tree(&l.bundle, &noinc);
    let mut edited = json(&noinc.join("campaign-result.json"));
    for lane in edited["lanes"].as_array_mut().unwrap() {
        lane.as_object_mut().unwrap().remove("incumbent");
    }
    std::fs::write(
        noinc.join("campaign-result.json"),
        serde_json::to_vec_pretty(&edited).unwrap(),
    )
    .unwrap();
    bakeoff::evidence::manifest::write(&noinc).unwrap();
    let o = bakeoff(&l.locks, &["promote", noinc.to_str().unwrap(), "--confirm"]);
    assert_eq!(code(&o), 2, "{}", text(&o));
    assert!(
        text(&o).contains("has no lane where the incumbent `inc` serves")
            && text(&o).contains("each a qualification lane")
            && text(&o).contains("`incumbent = \"inc\"` on the [[lanes]] table"),
        "{}",
        text(&o)
    );
    assert_eq!(
        bakeoff::lane::procnet::find_listeners(l.t.port)[0].pid,
        inc_pid,
        "the refusal touched nothing"
    );

    // The dry run says where the winner was measured and where it goes, with the spread.
    let said = "measured on lane g1, promoted on lane g0 where the incumbent serves";
    let spread = "card-to-card spread measured by inc's control (lane-spread.json): ttft ";
    let o = l.promote(&["--dry-run"]);
    assert!(o.status.success(), "{}", text(&o));
    for w in [said, spread, "promote `win` on lane g0 (127.0.0.1:"] {
        assert!(text(&o).contains(w), "{w}: {}", text(&o));
    }

    // Killed mid-bake (the winner serving g0), then `bakeoff recover` of the promotion folder:
    // the incumbent is back on g0.
    let k = kill_at(&l, "promote-baking", "k");
    assert_eq!(
        json(&k.join("promotion.json"))["lanes"]["promoted_on"],
        "g0"
    );
    assert!(g1_idle(), "nothing serves the qualification lane");

    // A clean promotion: the engine answering on g0 is the winner's.
    let t1 = Instant::now();
    let keep = l.folder("keep");
    let o = l.promote(&["--confirm", "--output", keep.to_str().unwrap(), "--json"]);
    let keep_s = t1.elapsed().as_secs_f64();
    assert_eq!(code(&o), 0, "{}", text(&o));
    assert_eq!(doc(&o)["phase"], "promoted", "{}", text(&o));
    assert!(text(&o).contains(said), "{}", text(&o));
    assert_eq!(l.serves().as_deref(), Some("win"));
    assert!(g1_idle(), "nothing serves the qualification lane");
    let p = json(&keep.join("promotion.json"));
    let ln = &p["lanes"];
    assert_eq!(
        (
            &ln["promoted_on"],
            &ln["measured_on"],
            &ln["measured_in"],
            &ln["incumbent_folder"]
        ),
        (
            &"g0".into(),
            &"g1".into(),
            &"lanes/g1".into(),
            &"lanes/g0".into()
        ),
        "{p:#}"
    );
    assert!(
        ln["spread"]
            .as_str()
            .unwrap()
            .starts_with("card-to-card spread"),
        "{p:#}"
    );
    assert_eq!(p["lane"], format!("127.0.0.1:{}", l.t.port));
    let md = std::fs::read_to_string(keep.join("promotion-summary.md")).unwrap();
    assert!(md.contains(said), "{md}");
    verify(&keep);
    let rec = l.record();
    assert_eq!(rec["resident"]["arm"], "win", "{rec:#}");
    let o = bakeoff(&l.locks, &["lane", "status", &l.t.port.to_string()]);
    assert!(
        o.status.success() && text(&o).contains("resident: `win`"),
        "{}",
        text(&o)
    );
    eprintln!("lanes: {}", ln["words"]);
    eprintln!(
        "timings: two-lane campaign {campaign_s:.1} s, clean promotion {keep_s:.1} s, whole test {:.1} s",
        t0.elapsed().as_secs_f64()
    );
}

/// Copies directory `from` (a bundle, with its lanes' folders) to `to`.
fn copy_tree(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap().flatten() {
        let dest = to.join(e.file_name());
        if e.file_type().unwrap().is_dir() {
            copy_tree(&e.path(), &dest);
        } else {
            std::fs::copy(e.path(), dest).unwrap();
        }
    }
}
