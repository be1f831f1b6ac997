//! The history of multi-lane bundles (docs/history.md, docs/fleet.md): a real two-lane
//! reference-engine campaign run with a history store (its `[history] db`, then `--history`)
//! goes into the history after its seal, each arm in its own lane's series and the control's
//! copy in the qualification lane's; adding the bundle again writes nothing, the same run
//! sealed again with another digest is refused, and a second run of the campaign makes each
//! series two runs long on its own lane.

use super::fleet::as_lanes;
use crate::support::campaign::*;
use crate::support::json_doc::doc;
use crate::support::shared;
use std::path::Path;
use std::process::Output;

const FAST: &str = "ttft_ms = 10\ndecode_tok_s = 400\ncontext_tokens = 4096";

/// `bakeoff history --db DB ARGS --json`: its document (validated against its schema).
fn history(db: &Path, args: &[&str]) -> (Output, serde_json::Value) {
    let o = std::process::Command::new(BIN)
        .arg("history")
        .arg("--db")
        .arg(db)
        .args(args)
        .arg("--json")
        .output()
        .unwrap();
    let d = doc(&o);
    (o, d)
}

/// Each series of `ttft_p50@c1` (on `lane`, or every lane): its arm (from its words), lane and
/// number of runs.
fn ttft_series(db: &Path, lane: Option<&str>) -> Vec<(String, String, usize)> {
    let mut args = vec!["show", "--metric", "ttft_p50@c1"];
    if let Some(l) = lane {
        args.extend(["--lane", l]);
    }
    let (o, d) = history(db, &args);
    assert!(o.status.success(), "{}", text(&o));
    d["series"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| {
            let key = s["key"].as_str().unwrap();
            (
                key.split(' ').next().unwrap().to_string(),
                s["lane"].as_str().unwrap().to_string(),
                s["points"].as_array().unwrap().len(),
            )
        })
        .collect()
}

#[test]
fn a_two_lane_campaign_goes_into_the_history_each_arm_on_its_own_lane() {
    let _g = shared();
    let t = Camp::new();
    for p in ["inc", "a"] {
        t.profile(p, FAST);
    }
    let small = Small {
        ranking: r#""ttft""#,
        max_tokens: 4,
        tables: "[history]\ndb = \"history.sqlite\"\n",
        ..Small::default()
    };
    let f = t.write_small(
        "fleet-history",
        &small,
        &[("inc", "incumbent"), ("a", "candidate")],
    );
    let text0 = std::fs::read_to_string(&f).unwrap();
    let p1 = free_port();
    std::fs::write(&f, as_lanes(&text0, &[("g1", p1)])).unwrap();
    let db = t.path("history.sqlite");
    let locks = t.path("locks");
    let (g0, g1) = (format!("127.0.0.1:{}", t.port), format!("127.0.0.1:{p1}"));
    // Run 1 by the campaign's `[history] db`, run 2 by `--history`.
    let run_once = |n: usize| {
        let out = t.path(&format!("out-{n}"));
        let mut args = vec![f.to_str().unwrap(), "--output", out.to_str().unwrap()];
        if n == 2 {
            args.extend(["--history", db.to_str().unwrap()]);
        }
        let started = std::time::Instant::now();
        let o = run_command(&locks, &args).output().unwrap();
        let all = text(&o);
        eprintln!(
            "two-lane run {n} with history: {:.1} s",
            started.elapsed().as_secs_f64()
        );
        if !o.status.success() || !all.contains("bakeoff run: history: bundle ") {
            cleanup(&out.join("lanes/g0"), None, t.port);
            panic!("run {n}: {all}");
        }
        assert!(all.contains("history.sqlite"), "run {n}: {all}");
        (out, all)
    };
    let (out1, said1) = run_once(1);
    // Written into the sealed bundle before the verdict, which still verifies.
    assert!(out1.join("history-context.json").is_file(), "{said1}");
    assert!(out1.join("history-trend.html").is_file(), "{said1}");
    verify(&out1);
    let r = json(&out1.join("campaign-result.json"));
    assert_eq!(r["lanes"][0]["arms"], serde_json::json!(["inc"]), "{r:#}");
    assert_eq!(r["lanes"][1]["arms"], serde_json::json!(["a"]), "{r:#}");

    // `list`: one row per lane, each with the arms that ran there (the copy of the control on
    // the qualification lane).
    let (o, d) = history(&db, &["list"]);
    assert!(o.status.success(), "{}", text(&o));
    let rows: Vec<(String, String, String)> = d["bundles"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| {
            (
                b["digest"].as_str().unwrap().to_string(),
                b["lane"].as_str().unwrap().to_string(),
                b["arms"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    assert_eq!(rows.len(), 2, "{d:#}");
    assert_eq!(rows[0].0, rows[1].0, "one bundle: {d:#}");
    let mut by_lane: Vec<(String, String)> =
        rows.iter().map(|r| (r.1.clone(), r.2.clone())).collect();
    by_lane.sort();
    let mut want = vec![
        (g0.clone(), "inc".to_string()),
        (g1.clone(), "a,inc.control@g1".to_string()),
    ];
    want.sort();
    assert_eq!(by_lane, want, "{d:#}");
    let digest = rows[0].0.clone();
    // The text list says it is one bundle.
    let o = std::process::Command::new(BIN)
        .args(["history", "list", "--db"])
        .arg(&db)
        .output()
        .unwrap();
    assert!(text(&o).contains("1 bundle(s)"), "{}", text(&o));

    // `show`: each arm's series on its own lane; the copy on g1 under the control's name.
    let mut one = ttft_series(&db, None);
    one.sort();
    let mut want = vec![
        ("a".to_string(), g1.clone(), 1),
        ("inc".to_string(), g0.clone(), 1),
        ("inc.control".to_string(), g1.clone(), 1),
    ];
    want.sort();
    assert_eq!(one, want);

    // Added twice: nothing written.
    let (o, d) = history(&db, &["add", out1.to_str().unwrap()]);
    assert!(o.status.success(), "{}", text(&o));
    assert_eq!(d["added"][0]["status"], "present", "{d:#}");
    assert_eq!(d["added"][0]["digest"], digest.as_str(), "{d:#}");

    // Run 2: each series two runs long, on its own lane; `--lane` selects a lane's arms.
    // The history keeps one bundle per run, a run being its campaign, host, lanes and start
    // time to the second (docs/history.md "One run, one bundle"): this campaign takes under a
    // second, so run 2 starts in a later second than run 1, as any two real runs do.
    let first: serde_json::Value = json(&out1.join("campaign-result.json"));
    while bakeoff::clock::wall_rfc3339() == first["started_at"].as_str().unwrap() {
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let (out2, said2) = run_once(2);
    cleanup(&out2.join("lanes/g0"), None, t.port);
    assert!(
        bakeoff::lane::procnet::find_listeners(p1).is_empty(),
        "{said2}"
    );
    verify(&out2);
    let mut two = ttft_series(&db, None);
    two.sort();
    let want: Vec<(String, String, usize)> = want.into_iter().map(|(a, l, _)| (a, l, 2)).collect();
    assert_eq!(two, want, "{said2}");
    let mut on_g1 = ttft_series(&db, Some(&g1));
    on_g1.sort();
    assert_eq!(
        on_g1,
        [
            ("a".to_string(), g1.clone(), 2),
            ("inc.control".to_string(), g1.clone(), 2)
        ]
    );

    // One run, one bundle: the same run edited and sealed again (another root digest, and it
    // verifies) is refused.
    std::fs::write(
        out2.join("operator-note.txt"),
        "edited after it was added\n",
    )
    .unwrap();
    bakeoff::evidence::manifest::write(&out2).unwrap();
    verify(&out2);
    let (o, d) = history(&db, &["add", out2.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert_eq!(d["added"][0]["status"], "refused", "{d:#}");
    assert!(
        d["added"][0]["error"]
            .as_str()
            .unwrap()
            .contains("one run has one bundle"),
        "{d:#}"
    );
}
