//! `[fleet.slurm]` on the real multi-node cluster (docs/fleet.md "K lanes from Slurm"): bakeoff
//! asks Slurm for K nodes of partition `fleet` with one holder job, runs a lane on each node Slurm
//! grants (beside the incumbent's own `[[lanes]]` lane on node1, which the request excludes),
//! and gives the allocation back on every path out.

use super::slurm::{cluster, job, squeue, Leftovers, FAST};
use super::slurm_fleet::{
    arms_of, assert_clients_on_node, bakeoff_ok, campaign, lane_of, node_lanes, run_paused,
    serve_incumbent,
};
use crate::support::campaign::{json, text, verify, Camp};
use crate::support::BIN;
use std::process::Command;
use std::time::Instant;

/// The holder job's name: `bakeoff-fleet-<campaign id>` (slurm_fleet.rs's campaigns are all
/// `slurm-fleet`; the tests run one at a time).
const HOLDER: &str = "bakeoff-fleet-slurm-fleet";

/// The incumbent's lane n1 on node1, then `[fleet.slurm]` asking for `k` nodes of `fleet`.
fn lanes(port: u16, k: u32, pending_s: u64) -> String {
    format!(
        "{}\n[fleet.slurm]\npartition = \"fleet\"\nlanes = {k}\nport = {port}\ntime_limit = \"10:00\"\npending_timeout_s = {pending_s}\nready_timeout_s = 30\nstop_grace_s = 3\n",
        node_lanes(1, port)
    )
}

/// K = 3 granted by Slurm (node2..node4: node1 is the incumbent's lane, excluded): every arm
/// runs on its granted lane's node, the bundle records the allocation and verifies, and after
/// the run squeue shows no job of the campaign but the restored incumbent.
#[test]
fn three_lanes_granted_by_slurm_run_the_arms_and_are_given_back() {
    let _g = cluster();
    let t = Camp::new();
    let name = format!("bo-gr-{}", t.port);
    let _left = (
        Leftovers(name.clone(), t.port),
        Leftovers(HOLDER.into(), t.port),
    );
    let ids = ["inc", "a", "b", "c"];
    for id in ids {
        t.profile(id, FAST);
    }
    let file = campaign(&t, &lanes(t.port, 3, 20), &arms_of(&t, &name, &ids));
    let o = Command::new(BIN)
        .args(["run", "--dry-run"])
        .arg(&file)
        .output()
        .unwrap();
    let dry = text(&o);
    assert!(o.status.success(), "{dry}");
    assert!(
        dry.contains(&format!("sbatch --parsable --job-name={HOLDER} --nodes=3 --ntasks-per-node=1 --cpus-per-task=1 --partition=fleet --exclude=node1 --time=10:00"))
            && dry.contains("come from Slurm when the run starts, not now"),
        "{dry}"
    );
    assert!(
        squeue(HOLDER).is_empty(),
        "a dry run asks Slurm for nothing"
    );
    serve_incumbent(&t, &name);
    let started = Instant::now();
    let out = bakeoff_ok(&["run"], &file);
    eprintln!(
        "three lanes granted by Slurm: {:.1} s",
        started.elapsed().as_secs_f64()
    );
    assert!(out.contains("given back (scancel "), "{out}");
    let b = t.bundle();
    let r = json(&b.join("campaign-result.json"));
    assert_eq!(r["complete"], true, "{r:#}");
    let a = &r["slurm_allocation"];
    let mut nodes: Vec<&str> = a["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n.as_str().unwrap())
        .collect();
    nodes.sort();
    assert_eq!(nodes, ["node2", "node3", "node4"], "{a:#}");
    assert_eq!(json(&b.join("slurm-allocation.json")), *a);
    // Every arm on a granted lane ran as a job on that lane's node.
    let mut on_granted = 0;
    for g in a["lanes"].as_array().unwrap() {
        let (lane, node) = (g["lane"].as_str().unwrap(), g["node"].as_str().unwrap());
        let l = lane_of(&r, lane);
        for arm in l["arms"].as_array().unwrap() {
            let stop = json(&b.join(format!("lanes/{lane}/{}-stop.json", arm.as_str().unwrap())));
            assert_eq!(stop["stop"]["slurm_job"]["node"], *node, "{stop:#}");
            on_granted += 1;
        }
        // A granted lane is a Slurm lane: its timed steps' client ran on its node.
        assert!(assert_clients_on_node(&b, &r, lane, node) >= 2, "{lane}");
    }
    assert_eq!(on_granted, 3, "{r:#}");
    verify(&b);
    // The allocation is back; only the restored incumbent is left, on node1.
    assert!(squeue(HOLDER).is_empty(), "{:?}", squeue(HOLDER));
    let jobs = squeue(&name);
    assert_eq!(jobs.len(), 1, "{jobs:?}");
    let id = jobs[0].split_whitespace().next().unwrap();
    assert_eq!(job(id)["NodeList"], "node1");
}

/// K = 5 where only three nodes can be granted: the request is cancelled after the pending
/// timeout with squeue's reason, exit 2, no job and no bundle left.
#[test]
fn more_lanes_than_the_partition_gives_is_refused_with_slurms_reason() {
    let _g = cluster();
    let t = Camp::new();
    let name = format!("bo-gk-{}", t.port);
    let _left = (
        Leftovers(name.clone(), t.port),
        Leftovers(HOLDER.into(), t.port),
    );
    let ids = ["inc", "a"];
    for id in ids {
        t.profile(id, FAST);
    }
    let file = campaign(&t, &lanes(t.port, 5, 2), &arms_of(&t, &name, &ids));
    let started = Instant::now();
    let o = Command::new(BIN).arg("run").arg(&file).output().unwrap();
    let out = text(&o);
    eprintln!(
        "K = 5 refused in {:.1} s: {out}",
        started.elapsed().as_secs_f64()
    );
    assert_eq!(o.status.code(), Some(2), "{out}");
    // The test cluster accepts a request larger than the partition (EnforcePartLimits=NO) and
    // leaves it pending; squeue's reason is in the words.
    assert!(
        out.contains("Slurm did not grant 5 node(s) of partition `fleet` within 2 s")
            && out.contains("PENDING (reason: PartitionNodeLimit"),
        "{out}"
    );
    assert!(out.contains("fewer `lanes`"), "{out}");
    assert!(squeue(HOLDER).is_empty(), "{:?}", squeue(HOLDER));
    assert!(squeue(&name).is_empty(), "{:?}", squeue(&name));
    assert!(!t.bundle().exists());
}

/// SIGKILL of bakeoff while arm `b` serves on a granted lane: the allocation outlives it (its id
/// is in the bundle); `bakeoff recover` puts every lane back, then cancels it; `--resume` asks
/// Slurm for a fresh one, completes, and gives that back too.
#[test]
fn sigkill_then_recover_gives_the_allocation_back_and_resume_asks_again() {
    let _g = cluster();
    let t = Camp::new();
    let name = format!("bo-gs-{}", t.port);
    let _left = (
        Leftovers(name.clone(), t.port),
        Leftovers(HOLDER.into(), t.port),
    );
    let ids = ["inc", "a", "b"];
    for id in ids {
        t.profile(id, FAST);
    }
    let file = campaign(&t, &lanes(t.port, 2, 20), &arms_of(&t, &name, &ids));
    serve_incumbent(&t, &name);
    let pause = t.path("pause-b");
    let mut run = run_paused(&file, &pause);
    let b = t.bundle();
    let first = json(&b.join("slurm-allocation.json"));
    let holder = squeue(HOLDER);
    assert_eq!(holder.len(), 1, "{holder:?}");
    assert!(
        holder[0].starts_with(first["job_id"].as_str().unwrap()),
        "{holder:?} {first:#}"
    );
    run.kill().unwrap();
    run.wait().unwrap();
    let _ = std::fs::remove_file(&pause);
    assert_eq!(squeue(HOLDER).len(), 1, "the holder outlives a SIGKILL");
    let o = Command::new(BIN).arg("recover").arg(&b).output().unwrap();
    let out = text(&o);
    assert!(o.status.success(), "{out}");
    assert!(
        out.contains("every lane is back")
            && out.contains(&format!(
                "Slurm allocation {} (",
                first["job_id"].as_str().unwrap()
            ))
            && out.contains("given back"),
        "{out}"
    );
    assert!(squeue(HOLDER).is_empty(), "{:?}", squeue(HOLDER));
    assert_eq!(
        squeue(&name).len(),
        1,
        "only the incumbent: {:?}",
        squeue(&name)
    );
    verify(&b);
    bakeoff_ok(&["run", "--resume"], &b);
    let again = json(&b.join("slurm-allocation.json"));
    assert_eq!(again["invocation"], 2, "{again:#}");
    assert_ne!(again["job_id"], first["job_id"], "{again:#}");
    assert_eq!(json(&b.join("campaign-result.json"))["complete"], true);
    verify(&b);
    assert!(squeue(HOLDER).is_empty(), "{:?}", squeue(HOLDER));
    assert_eq!(
        squeue(&name).len(),
        1,
        "only the incumbent: {:?}",
        squeue(&name)
    );
}
