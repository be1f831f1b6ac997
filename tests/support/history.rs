//! Test support for the history store: made-up bundles that verify (a campaign result, an
//! environment, a lane, the recipe's file digests, sealed by `manifest::write`), and the store
//! cases that run against SQLite (`tests/it/history.rs`) and the real PostgreSQL server
//! (`tests/infra/postgres.rs`) alike.
#![allow(dead_code)]

use bakeoff::evidence::result::{ArmResult, ArmStatus, CampaignResult, Stat, TimingRecord};
use bakeoff::history::changepoint::Params;
use bakeoff::history::series::{self, Filter};
use bakeoff::history::sql::Value;
use bakeoff::history::{self, Added, DbSpec, Store};
use std::path::{Path, PathBuf};
use std::process::Command;

/// One made-up run: the incumbent's and the candidate's warm TTFT medians, the incumbent's
/// profile digest, and the run's start (its identity with the campaign id).
#[derive(Debug, Clone)]
pub struct Run {
    pub n: usize,
    pub inc_ttft: f64,
    pub cand_ttft: f64,
    pub inc_profile: String,
    pub host: String,
}

impl Run {
    pub fn new(n: usize, inc_ttft: f64, cand_ttft: f64) -> Run {
        Run {
            n,
            inc_ttft,
            cand_ttft,
            inc_profile: "a".repeat(64),
            host: "vm".into(),
        }
    }
}

fn stat(v: f64) -> Option<Stat> {
    Some(Stat {
        p50: v,
        ci95: [v * 0.99, v * 1.01],
        p95: v * 1.05,
        n: 8,
        ..Default::default()
    })
}

fn arm(id: &str, role: &str, ttft: f64) -> ArmResult {
    ArmResult {
        id: id.into(),
        label: id.into(),
        role: role.into(),
        engine: "reference".into(),
        model: "m".into(),
        status: ArmStatus::Completed,
        warm: Some(TimingRecord {
            concurrency: 1,
            requests_ok: 8,
            ttft_ms: stat(ttft),
            decode_tok_s: stat(400.0),
            ..Default::default()
        }),
        ..Default::default()
    }
}

/// Writes run `r` as a sealed bundle under `root/run-N` and returns its path.
pub fn bundle(root: &Path, r: &Run) -> PathBuf {
    let dir = root.join(format!("run-{:03}", r.n));
    std::fs::create_dir_all(&dir).unwrap();
    let mut res = CampaignResult::new("hist-camp");
    res.started_at = format!("2026-11-01T00:{:02}:{:02}Z", r.n / 60, r.n % 60);
    res.complete = true;
    res.identity.host = r.host.clone();
    res.arms = vec![
        arm("inc", "incumbent", r.inc_ttft),
        arm("cand", "candidate", r.cand_ttft),
    ];
    let w = |name: &str, v: &serde_json::Value| {
        std::fs::write(dir.join(name), serde_json::to_vec_pretty(v).unwrap()).unwrap()
    };
    w("campaign-result.json", &serde_json::to_value(&res).unwrap());
    w(
        "environment.json",
        &serde_json::json!({"hostname": r.host, "gpu": {"status": "not-applicable"}}),
    );
    w(
        "checkpoint.json",
        &serde_json::json!({"files": [
            {"named_by": "arm `inc`'s reference recipe", "path": "/p/inc.toml", "sha256": r.inc_profile},
            {"named_by": "arm `cand`'s reference recipe", "path": "/p/cand.toml", "sha256": "c".repeat(64)},
        ]}),
    );
    std::fs::write(
        dir.join("campaign.toml"),
        "[campaign]\nid = \"hist-camp\"\n[lane]\nhost = \"127.0.0.1\"\nport = 8000\n",
    )
    .unwrap();
    bakeoff::evidence::manifest::write(&dir).unwrap();
    dir
}

/// Bundles in a store.
pub fn count(store: &mut Store) -> usize {
    series::bundles(store, &Filter::default()).unwrap().len()
}

/// One store case: the database and a scratch folder.
type Case = fn(&DbSpec, &Path);

/// The store cases: each gets a fresh, empty database from `fresh` (a SQLite file or a
/// PostgreSQL database) and a scratch folder.
pub fn all_cases(fresh: &dyn Fn(&str) -> DbSpec, scratch: &Path) {
    let cases: [(&str, Case); 11] = [
        ("verified_once", verified_once),
        ("concurrent_writers", concurrent_writers),
        ("context_of_a_new_run", context_of_a_new_run),
        ("refused_unverified", refused_unverified),
        ("moved_bundle", moved_bundle),
        ("same_run_other_digest", same_run_other_digest),
        ("newer_schema", newer_schema),
        ("all_or_nothing", all_or_nothing),
        ("step_at_20", step_at_20),
        ("multi_lane_bundle", multi_lane_bundle),
        ("migrated_from_version_1", migrated_from_version_1),
    ];
    for (name, case) in cases {
        let dir = scratch.join(name);
        std::fs::create_dir_all(&dir).unwrap();
        eprintln!("history store case {name}");
        case(&fresh(name), &dir);
    }
}

/// A verified bundle is added once; adding it again writes nothing.
pub fn verified_once(db: &DbSpec, dir: &Path) {
    let b = bundle(dir, &Run::new(1, 50.0, 40.0));
    let mut s = Store::open(db).unwrap();
    let (sum, a) = history::add_bundle(&mut s, &b).unwrap();
    assert_eq!(a, Added::New);
    assert_eq!(sum.digest.len(), 64);
    assert_eq!(sum.lane, "127.0.0.1:8000");
    let (_, again) = history::add_bundle(&mut s, &b).unwrap();
    assert_eq!(again, Added::Already { moved_from: None });
    assert_eq!(count(&mut s), 1);
    let all = series::read(
        &mut s,
        &Filter {
            metric: Some("ttft".into()),
            ..Default::default()
        },
    )
    .unwrap();
    assert_eq!(all.len(), 2, "{all:?}");
    assert_eq!(all[1].key.arm(), "inc");
    assert_eq!(all[1].points[0].value, 50.0);
    assert_eq!(all[1].points[0].n, 8);
    assert_eq!(all[1].points[0].lo, Some(49.5));
}

/// A bundle edited after sealing is refused with the file named; nothing is written.
pub fn refused_unverified(db: &DbSpec, dir: &Path) {
    let b = bundle(dir, &Run::new(2, 50.0, 40.0));
    std::fs::write(b.join("environment.json"), "{}").unwrap();
    let mut s = Store::open(db).unwrap();
    let e = format!("{:#}", history::add_bundle(&mut s, &b).unwrap_err());
    assert!(
        e.contains("does not verify") && e.contains("environment.json"),
        "{e}"
    );
    assert_eq!(count(&mut s), 0);
}

/// The path is a hint, the digest the key: a moved bundle is the same bundle, its path updated.
pub fn moved_bundle(db: &DbSpec, dir: &Path) {
    let b = bundle(dir, &Run::new(3, 50.0, 40.0));
    let mut s = Store::open(db).unwrap();
    history::add_bundle(&mut s, &b).unwrap();
    let moved = dir.join("elsewhere");
    std::fs::rename(&b, &moved).unwrap();
    let (_, a) = history::add_bundle(&mut s, &moved).unwrap();
    match a {
        Added::Already {
            moved_from: Some(old),
        } => assert!(old.ends_with("run-003"), "{old}"),
        other => panic!("{other:?}"),
    }
    let rows = series::bundles(&mut s, &Filter::default()).unwrap();
    assert_eq!(rows.len(), 1);
    assert!(rows[0].path.ends_with("elsewhere"), "{rows:?}");
}

/// Two bundles of one run (same campaign id, start, host and lane) with different digests: the
/// second is refused, naming the first; the same campaign and start on another host is added.
pub fn same_run_other_digest(db: &DbSpec, dir: &Path) {
    let a = bundle(&dir.join("a"), &Run::new(4, 50.0, 40.0));
    // The same run's bundle with other evidence (edited and re-sealed, or re-rendered).
    let b = bundle(&dir.join("b"), &Run::new(4, 50.0, 41.0));
    // The same campaign started in the same second on another host is another run.
    let mut elsewhere = Run::new(4, 50.0, 40.0);
    elsewhere.host = "other-host".into();
    let c = bundle(&dir.join("c"), &elsewhere);
    let mut s = Store::open(db).unwrap();
    let (first, _) = history::add_bundle(&mut s, &a).unwrap();
    let e = format!("{:#}", history::add_bundle(&mut s, &b).unwrap_err());
    assert!(
        e.contains("hist-camp") && e.contains(&first.digest) && e.contains("already in"),
        "{e}"
    );
    assert_eq!(count(&mut s), 1);
    let (_, added) = history::add_bundle(&mut s, &c).unwrap();
    assert_eq!(added, Added::New);
}

/// A database written by a newer bakeoff is refused on open, nothing changed.
pub fn newer_schema(db: &DbSpec, _dir: &Path) {
    let mut s = Store::open(db).unwrap();
    s.write(|tx| tx.exec("UPDATE bakeoff_schema SET version = 99", &[]))
        .unwrap();
    drop(s);
    let e = format!("{:#}", Store::open(db).err().expect("refused"));
    assert!(
        e.contains("schema version 99") && e.contains("upgrade bakeoff"),
        "{e}"
    );
}

/// One transaction per bundle: a summary whose last row cannot be written leaves nothing.
pub fn all_or_nothing(db: &DbSpec, dir: &Path) {
    let b = bundle(dir, &Run::new(5, 50.0, 40.0));
    let mut sum = history::summarize(&b).unwrap();
    // The same arm twice: its second insert violates the key after the bundle row is written.
    let dup = sum.arms[0].clone();
    sum.arms.push(dup);
    let mut s = Store::open(db).unwrap();
    assert!(history::add(&mut s, &sum).is_err());
    assert_eq!(count(&mut s), 0);
    let (_, a) = history::add_bundle(&mut s, &b).unwrap();
    assert_eq!(a, Added::New);
}

/// 30 runs, the incumbent's profile and speed change at run 20 (index 20): one regression there,
/// naming the profile change; none on the candidate's unchanged, noisy series.
pub fn step_at_20(db: &DbSpec, dir: &Path) {
    let mut s = Store::open(db).unwrap();
    for n in 0..30 {
        // A deterministic wobble of ±1 % (no two runs alike).
        let wob = ((n * 7919) % 11) as f64 / 10.0 - 0.5;
        let mut r = Run::new(n, if n >= 20 { 60.0 } else { 50.0 } + wob, 40.0 + wob * 0.8);
        if n >= 20 {
            r.inc_profile = "b".repeat(64);
        }
        history::add_bundle(&mut s, &bundle(dir, &r)).unwrap();
    }
    let all = series::read(
        &mut s,
        &Filter {
            metric: Some("ttft_p50@c1".into()),
            ..Default::default()
        },
    )
    .unwrap();
    let found = history::regressions::find(&all, &Params::default(), None);
    assert_eq!(found.len(), 1, "{found:?}");
    let f = &found[0];
    assert_eq!(all[f.series].key.arm(), "inc");
    assert!(f.change.index.abs_diff(20) <= 1, "{f:?}");
    assert!(f.regression && f.worse_pct > 15.0, "{f:?}");
    assert!(
        f.changed
            .iter()
            .any(|c| c.starts_with("profile/program fingerprint")),
        "{f:?}"
    );
    assert!(f.path.ends_with("run-020"), "{f:?}");
}

/// `--db` as the CLI takes it (a PostgreSQL password stays in the environment).
pub fn db_arg(db: &DbSpec) -> String {
    match db {
        DbSpec::Sqlite(p) => p.display().to_string(),
        DbSpec::Postgres(url) => url.clone(),
    }
}

/// Four processes add overlapping sets of 12 bundles at once (each bundle by two of them, in
/// opposite orders, so the two race for it): every process succeeds, exactly one says it added
/// each bundle (the other finds it present), and each bundle is there once, whole: both its arms
/// and every figure of its summary, none twice.
pub fn concurrent_writers(db: &DbSpec, dir: &Path) {
    let dirs: Vec<PathBuf> = (0..12)
        .map(|n| bundle(dir, &Run::new(n, 50.0 + n as f64, 40.0)))
        .collect();
    let sums: Vec<history::Summary> = dirs
        .iter()
        .map(|d| history::summarize(d).unwrap())
        .collect();
    // The schema is created by the first open; the writers then race on the bundles only.
    drop(Store::open(db).unwrap());
    let kids: Vec<_> = (0..4)
        .map(|k| {
            let mut mine: Vec<&PathBuf> = dirs[k * 2..k * 2 + 6].iter().collect();
            if k % 2 == 1 {
                mine.reverse();
            }
            Command::new(super::BIN)
                .args(["history", "add", "--db", &db_arg(db)])
                .args(mine)
                .stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    let mut said = String::new();
    for k in kids {
        let o = k.wait_with_output().unwrap();
        assert!(
            o.status.success(),
            "a concurrent writer failed: {}",
            super::text(&o)
        );
        said += &String::from_utf8_lossy(&o.stdout);
    }
    for s in &sums {
        let short = &s.digest[..12];
        let added = said
            .lines()
            .filter(|l| l.starts_with("added") && l.contains(short))
            .count();
        assert_eq!(added, 1, "bundle {short} added {added} times: {said}");
    }
    let mut st = Store::open(db).unwrap();
    assert_eq!(count(&mut st), 12);
    let n = |st: &mut Store, sql: &str, d: &str| {
        st.query(sql, &[Value::text(d)]).unwrap()[0][0]
            .int()
            .unwrap()
    };
    for s in &sums {
        let figures: usize = s.arms.iter().map(|a| a.figures.len()).sum();
        assert!(figures >= 4, "{s:?}");
        for (sql, want) in [
            ("SELECT COUNT(*) FROM bundles WHERE digest = ?", 1),
            ("SELECT COUNT(*) FROM arms WHERE digest = ?", 2),
            ("SELECT COUNT(*) FROM figures WHERE digest = ?", figures),
        ] {
            assert_eq!(
                n(&mut st, sql, &s.digest),
                want as i64,
                "{sql} ({})",
                &s.digest[..12]
            );
        }
    }
    let figs = st
        .query(
            "SELECT COUNT(*), COUNT(DISTINCT digest || arm || figure) FROM figures",
            &[],
        )
        .unwrap();
    assert_eq!(figs[0][0].int(), figs[0][1].int(), "a figure twice");
}

/// A run not yet added, against its own history: the incumbent 20 % slower than its last four
/// runs is beyond its spread (worse) and drifts its lane; the unchanged candidate lies within.
/// A store that already holds the run (added by hand) does not count it as its own history.
pub fn context_of_a_new_run(db: &DbSpec, dir: &Path) {
    let mut s = Store::open(db).unwrap();
    for (n, t) in [50.0, 50.4, 49.8, 50.2].into_iter().enumerate() {
        history::add_bundle(&mut s, &bundle(dir, &Run::new(n, t, 40.0 + n as f64 * 0.1))).unwrap();
    }
    let today = history::summarize(&bundle(dir, &Run::new(4, 60.0, 40.1))).unwrap();
    let check = |s: &mut Store| {
        let (cx, mine) = history::context_before_add(s, &today).unwrap();
        let inc = cx
            .lines
            .iter()
            .find(|l| l.arm == "inc" && l.figure == "ttft_p50@c1")
            .unwrap_or_else(|| panic!("{:?}", cx.lines));
        assert!(inc.beyond && inc.worse && inc.runs == 4, "{inc:?}");
        assert!((inc.pct - 19.5).abs() < 1.0, "{inc:?}");
        let cand = cx
            .lines
            .iter()
            .find(|l| l.arm == "cand" && l.figure == "ttft_p50@c1")
            .unwrap();
        assert!(!cand.beyond, "{cand:?}");
        assert_eq!(cx.drifting.len(), 1, "{:?}", cx.drifting);
        assert!(cx.drifting[0].starts_with("lane 127.0.0.1:8000: its incumbent `inc`"));
        // Each series of the run ends with today's point.
        assert!(mine
            .iter()
            .all(|x| x.points.last().unwrap().digest == today.digest));
        let v = history::context::verdict_lines(&cx.lines, &cx.drifting);
        assert!(
            v.iter().any(|l| l.starts_with(
                "History: incumbent `inc` ttft_p50@c1 today 60.0 ms; its last 4 runs"
            )),
            "{v:?}"
        );
        // The candidate within its spread: informational, not a limitation.
        assert!(v.iter().all(|l| !l.contains("`cand`")), "{v:?}");
        let info = history::context::informational_lines(&cx.lines);
        assert!(
            info.iter()
                .any(|l| l.starts_with("History: candidate `cand`: its")
                    && l.contains("within its last 4 runs")),
            "{info:?}"
        );
    };
    check(&mut s);
    history::add(&mut s, &today).unwrap();
    check(&mut s);
}

/// A made-up multi-lane bundle of run `n` (docs/fleet.md): lane g0 (the incumbent's,
/// 127.0.0.1:8000) ran `inc`; lane g1 (127.0.0.1:8001, one GPU named) ran `cand` and the
/// control's copy `inc.control`, whose record is in g1's own result; `inc_ttft` is the
/// incumbent's warm TTFT, `copy_ttft` the copy's.
pub fn fleet_bundle(root: &Path, n: usize, inc_ttft: f64, copy_ttft: f64) -> PathBuf {
    use bakeoff::evidence::result::LaneRun;
    let dir = root.join(format!("fleet-{n:03}"));
    std::fs::create_dir_all(dir.join("lanes/g0")).unwrap();
    std::fs::create_dir_all(dir.join("lanes/g1")).unwrap();
    let started = format!("2026-11-02T00:00:{n:02}Z");
    let mut res = CampaignResult::new("fleet-camp");
    res.started_at = started.clone();
    res.complete = true;
    res.identity.host = "vm".into();
    res.arms = vec![
        arm("inc", "incumbent", inc_ttft),
        arm("cand", "candidate", 40.0),
    ];
    let lane = |id: &str, port: u16, arms: &[&str]| LaneRun {
        id: id.into(),
        address: format!("127.0.0.1:{port}"),
        folder: format!("lanes/{id}"),
        arms: arms.iter().map(|a| a.to_string()).collect(),
        complete: true,
        ..Default::default()
    };
    res.lanes = vec![lane("g0", 8000, &["inc"]), lane("g1", 8001, &["cand"])];
    let w = |name: &str, v: &serde_json::Value| {
        std::fs::write(dir.join(name), serde_json::to_vec_pretty(v).unwrap()).unwrap()
    };
    w("campaign-result.json", &serde_json::to_value(&res).unwrap());
    // Lane g1's own result: the control's copy (role candidate there) before its arm.
    let mut g1 = CampaignResult::new("fleet-camp");
    g1.started_at = started;
    g1.arms = vec![
        arm("inc.control", "candidate", copy_ttft),
        arm("cand", "candidate", 40.0),
    ];
    w(
        "lanes/g1/campaign-result.json",
        &serde_json::to_value(&g1).unwrap(),
    );
    w(
        "environment.json",
        &serde_json::json!({"hostname": "vm", "gpu": {"status": "not-applicable"}}),
    );
    w(
        "lanes/g0/checkpoint.json",
        &serde_json::json!({"files": [
            {"named_by": "arm `inc`'s reference recipe", "path": "/p/inc.toml", "sha256": "a".repeat(64)},
        ]}),
    );
    std::fs::write(
        dir.join("campaign.toml"),
        "[campaign]\nid = \"fleet-camp\"\n[[lanes]]\nid = \"g0\"\nport = 8000\nincumbent = \"inc\"\n[[lanes]]\nid = \"g1\"\nport = 8001\ngpus = [\"GPU-1\"]\n",
    )
    .unwrap();
    bakeoff::evidence::manifest::write(&dir).unwrap();
    dir
}

/// A multi-lane bundle: each arm's figures in its own lane's series, the control's copy on
/// its lane as `inc.control` (role control); `list` gives one row per lane with the arms that
/// ran there; adding it twice writes nothing; the same run with another digest is refused; a
/// later run's context names each arm's own lane and the drifting lane's copy.
pub fn multi_lane_bundle(db: &DbSpec, dir: &Path) {
    let (g0, g1) = ("127.0.0.1:8000", "127.0.0.1:8001 [GPU-1]");
    let mut s = Store::open(db).unwrap();
    let b = fleet_bundle(dir, 0, 50.0, 55.0);
    let (sum, a) = history::add_bundle(&mut s, &b).unwrap();
    assert_eq!(a, Added::New);
    assert_eq!(sum.lane, "lanes g0,g1");
    let lanes: Vec<(&str, &str, &str)> = sum
        .arms
        .iter()
        .map(|a| (a.arm.as_str(), a.role.as_str(), a.lane.as_str()))
        .collect();
    assert_eq!(
        lanes,
        [
            ("inc", "incumbent", g0),
            ("cand", "candidate", g1),
            ("inc.control@g1", "control", g1)
        ]
    );
    // The incumbent's profile digest, from its lane's checkpoint.
    assert_eq!(sum.arms[0].program.len(), 12, "{:?}", sum.arms[0]);
    let (_, again) = history::add_bundle(&mut s, &b).unwrap();
    assert_eq!(again, Added::Already { moved_from: None });
    let rows = series::bundles(&mut s, &Filter::default()).unwrap();
    let got: Vec<(&str, &str)> = rows
        .iter()
        .map(|r| (r.lane.as_str(), r.arms.as_str()))
        .collect();
    assert_eq!(got, [(g0, "inc"), (g1, "cand,inc.control@g1")], "{rows:?}");
    assert!(rows.iter().all(|r| r.digest == sum.digest));
    let on = |s: &mut Store, f: Filter| -> Vec<(String, String)> {
        series::read(s, &f)
            .unwrap()
            .iter()
            .map(|x| (x.key.arm().to_string(), x.key.lane.clone()))
            .collect()
    };
    let ttft = |lane: Option<&str>, arm: Option<&str>| Filter {
        metric: Some("ttft_p50@c1".into()),
        lane: lane.map(str::to_string),
        arm: arm.map(str::to_string),
        ..Default::default()
    };
    assert_eq!(
        on(&mut s, ttft(Some(g1), None)),
        [
            ("cand".to_string(), g1.to_string()),
            ("inc.control".to_string(), g1.to_string())
        ]
    );
    assert_eq!(
        on(&mut s, ttft(None, Some("inc"))),
        [("inc".to_string(), g0.to_string())]
    );
    assert_eq!(
        on(&mut s, ttft(None, Some("inc.control"))),
        [("inc.control".to_string(), g1.to_string())]
    );
    // The same run re-sealed with other evidence: refused, naming the first.
    let other = fleet_bundle(&dir.join("other"), 0, 50.0, 56.0);
    let e = format!("{:#}", history::add_bundle(&mut s, &other).unwrap_err());
    assert!(
        e.contains("fleet-camp") && e.contains(&sum.digest) && e.contains("one run has one bundle"),
        "{e}"
    );
    // Three more runs, then one whose copy on g1 is 30 % slower: lane g1 drifts, by its copy.
    for n in 1..4 {
        history::add_bundle(&mut s, &fleet_bundle(dir, n, 50.0, 55.0 + n as f64 * 0.1)).unwrap();
    }
    let today = history::summarize(&fleet_bundle(dir, 4, 50.1, 72.0)).unwrap();
    let (cx, _) = history::context_before_add(&mut s, &today).unwrap();
    let copy = cx
        .lines
        .iter()
        .find(|l| l.arm == "inc.control" && l.figure == "ttft_p50@c1")
        .unwrap_or_else(|| panic!("{:?}", cx.lines));
    assert!(copy.beyond && copy.runs == 4, "{copy:?}");
    assert!(
        copy.text().starts_with(&format!(
            "control `inc.control` on lane {g1} ttft_p50@c1 today 72.0 ms"
        )),
        "{}",
        copy.text()
    );
    let inc = cx
        .lines
        .iter()
        .find(|l| l.arm == "inc" && l.figure == "ttft_p50@c1")
        .unwrap();
    assert!(!inc.beyond && inc.lane == g0, "{inc:?}");
    assert_eq!(cx.drifting.len(), 1, "{:?}", cx.drifting);
    assert!(
        cx.drifting[0].starts_with(&format!("lane {g1}: its control `inc.control` drifts")),
        "{:?}",
        cx.drifting
    );
}

/// A store a bakeoff before per-arm lanes wrote (schema version 1, one bundle) is migrated on
/// open: its arms get the bundle's lane, its series and `--lane` read as before, and a
/// multi-lane bundle is added beside it.
pub fn migrated_from_version_1(db: &DbSpec, dir: &Path) {
    let b = bundle(dir, &Run::new(1, 50.0, 40.0));
    let sum = history::summarize(&b).unwrap();
    let mut s = Store::open(db).unwrap();
    // Back to version 1: the tables as its one step made them, with this bundle in them.
    s.write(|tx| {
        for t in ["figures", "arms", "bundles"] {
            tx.exec(&format!("DROP TABLE {t}"), &[])?;
        }
        for stmt in history::store::MIGRATIONS[0] {
            tx.exec(stmt, &[])?;
        }
        tx.exec("UPDATE bakeoff_schema SET version = 1", &[])?;
        tx.exec(
            "INSERT INTO bundles (digest, campaign_id, started_at, host, hardware, gpu_model, driver, lane, complete, workload, winner, reason, path, added_at) VALUES (?, 'hist-camp', ?, 'vm', '', 'none', '', '127.0.0.1:8000', 1, '{}', '', '', ?, 'then')",
            &[Value::text(&sum.digest), Value::text(&sum.started_at), Value::text(&sum.path)],
        )?;
        for a in &sum.arms {
            tx.exec(
                "INSERT INTO arms (digest, arm, role, label, recipe, engine, engine_version, model, quantization, speculative, image, program, status, failure, gates) VALUES (?, ?, ?, ?, ?, 'reference', '', 'm', '', '', '', '', 'completed', '', '')",
                &[Value::text(&sum.digest), Value::text(&a.arm), Value::text(&a.role), Value::text(&a.arm), Value::text(a.recipe())],
            )?;
            for f in &a.figures {
                tx.exec(
                    "INSERT INTO figures (digest, arm, figure, value, lo, hi, n) VALUES (?, ?, ?, ?, ?, ?, ?)",
                    &[Value::text(&sum.digest), Value::text(&a.arm), Value::text(&f.name), Value::F(Some(f.value)), Value::F(f.lo), Value::F(f.hi), Value::I(Some(f.n as i64))],
                )?;
            }
        }
        Ok(())
    })
    .unwrap();
    drop(s);
    let mut s = Store::open(db).unwrap();
    let v = s.query("SELECT version FROM bakeoff_schema", &[]).unwrap();
    assert_eq!(v[0][0].int(), Some(history::store::LATEST));
    let lanes = s.query("SELECT DISTINCT lane FROM arms", &[]).unwrap();
    assert_eq!(lanes.len(), 1);
    assert_eq!(lanes[0][0].str(), "127.0.0.1:8000");
    let f = Filter {
        lane: Some("127.0.0.1:8000".into()),
        metric: Some("ttft_p50@c1".into()),
        ..Default::default()
    };
    let all = series::read(&mut s, &f).unwrap();
    assert_eq!(all.len(), 2, "{all:?}");
    assert!(all.iter().all(|x| x.points.len() == 1));
    // The migrated store is the same bundle (present) and takes a multi-lane one.
    let (_, a) = history::add_bundle(&mut s, &b).unwrap();
    assert_eq!(a, Added::Already { moved_from: None });
    let (_, a) = history::add_bundle(&mut s, &fleet_bundle(dir, 0, 50.0, 55.0)).unwrap();
    assert_eq!(a, Added::New);
    assert_eq!(
        series::bundles(&mut s, &Filter::default()).unwrap().len(),
        3
    );
}
