//! `bakeoff promote` on the real Docker daemon and the real Slurm cluster (docs/promotion.md
//! "Every lane kind"): per kind, one small campaign with a clean winner and a winner that degrades
//! mid-bake, then a promotion of the degrading one (rolled back by itself: its container removed,
//! its job cancelled, the incumbent proven back) and of the clean one (kept: its container or job
//! serves the lane, the lane record names it). The clusters are the ones docker.rs and slurm.rs
//! start; the bake is tests/it/promote.rs's (1.5 s, intervals of 0.5 s).

use crate::docker::{campaign_containers, container_arm, infra, remove_container, SECRET};
use crate::slurm::{cluster, squeue, stop_lane, Leftovers};
use crate::support::campaign::*;
use crate::support::exclusive as serial;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::Instant;

/// `bakeoff ARGS` with the test's lock directory; with the Docker daemon's socket and the
/// container arms' secret when `docker_host` is given.
fn bakeoff(locks: &Path, docker_host: Option<&str>, args: &[&str]) -> Output {
    let mut c: Command = bakeoff_command(locks, args);
    if let Some(h) = docker_host {
        c.env("DOCKER_HOST", h).env("BAKEOFF_TEST_SECRET", SECRET);
    }
    c.output().unwrap()
}

fn phase(dir: &Path) -> String {
    json(&dir.join("promotion.json"))["phase"]
        .as_str()
        .unwrap()
        .to_string()
}

/// The lane record (one lane per lock directory in these tests).
fn record(locks: &Path) -> serde_json::Value {
    let f = std::fs::read_dir(locks)
        .unwrap()
        .flatten()
        .find(|e| e.file_name().to_string_lossy().ends_with(".record.json"))
        .expect("a lane record");
    json(&f.path())
}

/// The degrading winner rolled back by the bake, then the clean winner kept; returns each
/// promotion's wall time.
fn rollback_then_keep(
    t: &Camp,
    locks: &Path,
    docker_host: Option<&str>,
    slow: &str,
    serves: &str,
) -> (f64, f64) {
    let bundle = t.bundle();
    let deg = t.path("deg");
    let t1 = Instant::now();
    let o = bakeoff(
        locks,
        docker_host,
        &[
            "promote",
            bundle.to_str().unwrap(),
            "--arm",
            slow,
            "--confirm",
            "--output",
            deg.to_str().unwrap(),
            "--bake",
            "3s",
        ],
    );
    let deg_s = t1.elapsed().as_secs_f64();
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert_eq!(phase(&deg), "rolled-back", "{}", text(&o));
    let r = json(&deg.join("promotion.json"));
    let iv = r["intervals"].as_array().unwrap();
    assert_eq!(
        iv.last()
            .map(|i| &i["outcome"])
            .unwrap_or_else(|| panic!("no interval ran: {r:#}")),
        "fail",
        "the bake ends at its failed interval: {iv:#?}"
    );
    assert!(
        r["why"].as_str().unwrap().contains("failure limit"),
        "{r:#}"
    );
    assert_eq!(listener_model(t.port).as_deref(), Some("inc"));
    verify(&deg);

    let keep = t.path("keep");
    let t2 = Instant::now();
    let o = bakeoff(
        locks,
        docker_host,
        &[
            "promote",
            bundle.to_str().unwrap(),
            "--confirm",
            "--output",
            keep.to_str().unwrap(),
        ],
    );
    let keep_s = t2.elapsed().as_secs_f64();
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    assert_eq!(phase(&keep), "promoted");
    assert_eq!(listener_model(t.port).as_deref(), Some(serves));
    verify(&keep);
    (deg_s, keep_s)
}

/// The campaign: `head`, the small workload with the promotion table, the reference incumbent,
/// then `arms`.
fn write_campaign(t: &Camp, id: &str, arms: &str) -> PathBuf {
    let small = Small {
        prompt: 32,
        tables: PROMOTION,
        ..Small::default()
    };
    let mut s = t.head(id, "");
    s.push_str(&small.toml());
    s.push_str(&reference_arm("inc", "incumbent", "inc", ""));
    s.push_str(arms);
    let p = t.path("campaign.toml");
    std::fs::write(&p, s).unwrap();
    p
}

#[test]
fn promote_container_arms_on_the_real_daemon_rolls_back_then_keeps() {
    let _g = serial();
    let host = Some(infra().docker_host.as_str());
    let t = Camp::new();
    t.profile("inc", PROMO_INC);
    t.profile("win", PROMO_WIN);
    t.profile("slowwin", PROMO_SLOWWIN);
    let id = "ctr-promote";
    for n in campaign_containers(id) {
        remove_container(&n);
    }
    // Small has no long-context target: the container arms declare none.
    let arms = format!(
        "{}{}",
        container_arm("ctr", "win", t.port, ""),
        container_arm("ctrslow", "slowwin", t.port, "")
    )
    .replace("long_context_profile = \"full\"\n", "");
    let file = write_campaign(&t, id, &arms);
    let locks = t.path("locks");
    let inc = t.start_incumbent("inc");
    let t0 = Instant::now();
    let o = bakeoff(
        &locks,
        host,
        &["run", file.to_str().unwrap(), "--no-progress"],
    );
    let campaign_s = t0.elapsed().as_secs_f64();
    let result = std::panic::catch_unwind(|| {
        assert!(o.status.success(), "{}", text(&o));
        let (deg_s, keep_s) = rollback_then_keep(&t, &locks, host, "ctrslow", "win");
        // The rolled-back winner's container is gone; the kept one serves, detached from bakeoff.
        assert_eq!(
            campaign_containers(id),
            vec![format!("bakeoff-{id}-ctr")],
            "only the promoted winner's container is left"
        );
        // The kept winner's identity read its container back: name, image digest, labels.
        let r = json(&t.path("keep").join("promotion.json"));
        let step = r["steps"]
            .as_array()
            .unwrap()
            .iter()
            .find(|s| s["name"] == "winner-identity" && s["status"] == "ok")
            .unwrap_or_else(|| panic!("no proven winner identity: {r:#}"));
        let seen = &step["facts"]["process"]["running"];
        assert_eq!(seen["name"], format!("bakeoff-{id}-ctr"), "{step:#}");
        assert_eq!(seen["labels"]["bakeoff.arm"], "ctr", "{step:#}");
        let digest = infra().image.rsplit('@').next().unwrap().to_string();
        assert!(
            seen["repo_digests"].to_string().contains(&digest),
            "the recipe's digest among the image's: {step:#}"
        );
        let rec = record(&locks);
        assert_eq!(rec["resident"]["arm"], "ctr", "{rec:#}");
        assert_eq!(rec["set_by"]["kind"], "promotion", "{rec:#}");
        eprintln!(
            "docker promotion: campaign {campaign_s:.1} s, rollback {deg_s:.1} s, keep {keep_s:.1} s"
        );
    });
    for n in campaign_containers(id) {
        remove_container(&n);
    }
    cleanup(&t.bundle(), Some(inc), t.port);
    if let Err(e) = result {
        std::panic::resume_unwind(e);
    }
}

#[test]
fn promote_slurm_arms_on_the_real_cluster_rolls_back_then_keeps() {
    // The cluster's lock, then the timing lock (the bake judges TTFT): always in this order.
    let _g = cluster();
    let _timing = serial();
    let t = Camp::new();
    let name = format!("bo-promo-{}", t.port);
    let _left = Leftovers(name.clone(), t.port);
    t.profile("inc", PROMO_INC);
    t.profile("win", PROMO_WIN);
    t.profile("slowwin", PROMO_SLOWWIN);
    let arms = format!(
        "{}{}",
        crate::slurm::slurm_arm(&t, "win", "candidate", &format!("{name}-win"), ""),
        crate::slurm::slurm_arm(&t, "slowwin", "candidate", &format!("{name}-slow"), "")
    );
    let file = write_campaign(&t, "slurm-promote", &arms);
    let locks = t.path("locks");
    let mut inc = Some(t.start_incumbent("inc"));
    let t0 = Instant::now();
    let o = bakeoff(
        &locks,
        None,
        &["run", file.to_str().unwrap(), "--no-progress"],
    );
    let campaign_s = t0.elapsed().as_secs_f64();
    assert!(o.status.success(), "{}", text(&o));
    let (deg_s, keep_s) = rollback_then_keep(&t, &locks, None, "slowwin", "win");
    // The rolled-back winner's job was cancelled; the kept one runs.
    let jobs = squeue(&name);
    assert_eq!(jobs.len(), 1, "{jobs:?}");
    assert!(
        jobs[0].contains(&format!("{name}-win")) && jobs[0].ends_with("RUNNING"),
        "{jobs:?}"
    );
    let rec = record(&locks);
    assert_eq!(rec["resident"]["arm"], "win", "{rec:#}");
    eprintln!(
        "slurm promotion: campaign {campaign_s:.1} s, rollback {deg_s:.1} s, keep {keep_s:.1} s"
    );
    if let Some(mut c) = inc.take() {
        let _ = c.wait();
    }
    stop_lane(t.port);
}
