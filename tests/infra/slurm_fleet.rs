//! Slurm lanes on the real multi-node cluster (docs/fleet.md "Slurm lanes"): the shared cluster
//! of `slurm.rs` has four nodes (node1..node4, partition `fleet`), each a slurmd in its own
//! network namespace with its own address. A campaign's `[[lanes]]` are nodes; every arm is a
//! Slurm job pinned to its lane's node, the reference engine listening on the node's address.

use super::slurm::{cluster, job, squeue, Leftovers, FAST};
use crate::support::campaign::{json, text, verify, Camp};
use crate::support::BIN;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

/// A node's address, from the cluster's `nodes` file ("NAME ADDRESS" per line).
fn node_addr(node: &str) -> String {
    let nodes = Path::new(env!("CARGO_MANIFEST_DIR")).join("target/infra/slurm/nodes");
    let all = std::fs::read_to_string(&nodes).unwrap();
    all.lines()
        .find_map(|l| l.strip_prefix(&format!("{node} ")))
        .unwrap_or_else(|| panic!("no {node} in {}: {all}", nodes.display()))
        .to_string()
}

/// `GET /health` at `host:port`: the status line's code.
fn health(host: &str, port: u16) -> Option<u16> {
    let addr = format!("{host}:{port}").parse().ok()?;
    let mut s = TcpStream::connect_timeout(&addr, Duration::from_millis(300)).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(2))).ok()?;
    write!(
        s,
        "GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
    )
    .ok()?;
    let mut out = String::new();
    let _ = s.read_to_string(&mut out);
    out.split_whitespace().nth(1)?.parse().ok()
}

/// A Slurm arm on the lanes' port, listening on every address of its node's namespace.
fn arm(t: &Camp, id: &str, role: &str, job_name: &str) -> String {
    format!(
        r#"
[[arms]]
id = "{id}"
role = "{role}"
engine = "reference"
model = "m"
served_model = "{id}"
served_context = 4096
[arms.slurm]
argv = ["{BIN}", "engine", "--profile", "{id}.toml", "--host", "0.0.0.0", "--port", "{port}"]
job_name = "{job_name}"
partition = "fleet"
time_limit = "10:00"
"#,
        port = t.port
    )
}

fn campaign(t: &Camp, lanes: &str, arms: &[String]) -> PathBuf {
    let mut s = format!(
        r#"[campaign]
id = "slurm-fleet"
output = "out"
{lanes}
[workload]
ranking_priority = ["ttft", "decode_tokens_per_second"]
matched_prompt_tokens = 64
max_tokens = 8
warm_repetitions = 6
concurrency = [1]

[gates]
preflight = ["smoke", "streaming"]

[policy]
required_gates = ["smoke", "streaming", "restoration"]
"#
    );
    for a in arms {
        s.push_str(a);
    }
    let p = t.path("campaign.toml");
    std::fs::write(&p, s).unwrap();
    p
}

/// Six arms over four Slurm nodes, node4 slowed by 8 % through its lane `env`: every arm runs
/// as a job on its lane's node, the bundle verifies and names each arm's node, the incumbent's
/// job is back on node1 and nothing else is left in squeue; the control's spread is measured.
#[test]
fn six_arms_over_four_slurm_nodes_complete_verify_and_measure_a_slow_node() {
    let _g = cluster();
    let t = Camp::new();
    let name = format!("bo-fl-{}", t.port);
    let _left = Leftovers(name.clone(), t.port);
    // A TTFT long enough that 8 % of it stands above a loaded machine's noise.
    let profile = "ttft_ms = 60\ndecode_tok_s = 400\ncontext_tokens = 4096";
    let ids = ["inc", "a", "b", "c", "d", "e"];
    let mut arms = Vec::new();
    for (i, id) in ids.iter().enumerate() {
        t.profile(id, if i < 1 { profile } else { FAST });
        let role = if i == 0 { "incumbent" } else { "candidate" };
        arms.push(arm(&t, id, role, &format!("{name}-{id}")));
    }
    let mut lanes = String::new();
    for k in 1..=4 {
        lanes.push_str(&format!(
            "\n[[lanes]]\nid = \"n{k}\"\nslurm_node = \"node{k}\"\nport = {}\nready_timeout_s = 30\nstop_grace_s = 3\n{}{}",
            t.port,
            if k == 1 { "incumbent = \"inc\"\n" } else { "" },
            if k == 4 { "env = { BAKEOFF_REFENGINE_SLOWDOWN = \"1.08\" }\n" } else { "" },
        ));
    }
    let file = campaign(&t, &lanes, &arms);
    let o = Command::new(BIN)
        .args(["run", "--dry-run"])
        .arg(&file)
        .output()
        .unwrap();
    let dry = String::from_utf8_lossy(&o.stdout).to_string();
    assert!(o.status.success(), "{}", text(&o));
    assert!(
        dry.contains("node node3: every arm's job pinned there (--nodelist=node3)"),
        "{dry}"
    );
    // The incumbent serves on node1 as a job of its name, as bakeoff would submit it.
    let inc_job = format!("{name}-inc");
    let sub = Command::new("sbatch")
        .args(["--parsable", "--partition=fleet", "--nodelist=node1"])
        .arg(format!("--job-name={inc_job}"))
        .arg(format!("--chdir={}", t.dir.path().display()))
        .arg(format!("--output={}", t.path("inc-job.log").display()))
        .arg(format!(
            "--wrap=exec {BIN} engine --profile inc.toml --host 0.0.0.0 --port {}",
            t.port
        ))
        .output()
        .unwrap();
    assert!(sub.status.success(), "{}", text(&sub));
    let first = String::from_utf8_lossy(&sub.stdout).trim().to_string();
    let n1 = node_addr("node1");
    let deadline = Instant::now() + Duration::from_secs(30);
    while health(&n1, t.port) != Some(200) {
        assert!(
            Instant::now() < deadline,
            "the incumbent's job {first} never served on {n1}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    let b = t.bundle();
    let started = Instant::now();
    let o = Command::new(BIN)
        .arg("run")
        .arg(&file)
        .arg("--no-progress")
        .output()
        .unwrap();
    let wall = started.elapsed().as_secs_f64();
    eprintln!("six arms over four Slurm nodes: {wall:.1} s");
    let out = text(&o);
    assert!(o.status.success(), "{out}");
    assert!(
        out.contains(&format!(
            "incumbent `inc` serves it (Slurm job {first} on node1)"
        )),
        "{out}"
    );
    let r = json(&b.join("campaign-result.json"));
    assert_eq!(r["complete"], true, "{r:#}");
    // Every arm ran on its lane's node: its Slurm job's node in its lane's evidence.
    for l in r["lanes"].as_array().unwrap() {
        let lane = l["id"].as_str().unwrap();
        let node = format!("node{}", &lane[1..]);
        assert_eq!(
            l["address"].as_str().unwrap(),
            format!("{}:{}", node_addr(&node), t.port),
            "{l:#}"
        );
        for a in l["arms"].as_array().unwrap() {
            let a = a.as_str().unwrap();
            let arm = r["arms"].as_array().unwrap().iter().find(|x| x["id"] == a);
            assert_eq!(arm.unwrap()["status"], "completed", "{r:#}");
            let stop = json(&b.join(format!("lanes/{lane}/{a}-stop.json")));
            assert_eq!(
                stop["stop"]["slurm_job"]["node"].as_str(),
                Some(node.as_str()),
                "{a} on {lane}: {stop:#}"
            );
        }
    }
    let on: usize = r["lanes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| l["arms"].as_array().unwrap().len())
        .sum();
    assert_eq!(on, ids.len(), "{r:#}");
    verify(&b);
    // The restored incumbent is the only job of the campaign left: running on node1.
    let jobs = squeue(&name);
    assert_eq!(jobs.len(), 1, "{jobs:?}");
    let restored = jobs[0].split_whitespace().next().unwrap().to_string();
    assert!(
        restored != first && jobs[0].ends_with("RUNNING"),
        "{jobs:?}"
    );
    assert_eq!(job(&restored)["NodeList"], "node1");
    assert_eq!(health(&n1, t.port), Some(200));
    // The slow node: its control's TTFT spread (8 % set; the figure is reported, only a clear
    // margin above noise is asserted: the machine is shared while tests run).
    let s = json(&b.join("lane-spread.json"));
    let ttft = &s["spread"]["ttft"];
    let measured = ttft["spread"].as_f64().unwrap() * 100.0;
    eprintln!(
        "measured TTFT spread {measured:.2} % over four Slurm nodes (node4 slowed 8 %): {ttft}"
    );
    assert!(measured > 3.0, "{s:#}");
    assert_eq!(ttft["highest"], "n4", "{s:#}");
}

/// A lane whose node Slurm calls DOWN (`scontrol update … state=down`), or does not know, is
/// refused before anything starts: exit 2 with Slurm's word, no bundle, no job.
#[test]
fn a_slurm_lane_on_a_down_or_unknown_node_is_refused_before_anything_starts() {
    let _g = cluster();
    let t = Camp::new();
    let name = format!("bo-fd-{}", t.port);
    let _left = Leftovers(name.clone(), t.port);
    let lanes = |second: &str| {
        format!(
            "\n[[lanes]]\nid = \"n1\"\nslurm_node = \"node1\"\nport = {p}\nincumbent = \"inc\"\n\n[[lanes]]\nid = \"n3\"\nslurm_node = \"{second}\"\nport = {p}\n",
            p = t.port
        )
    };
    let arms = [
        arm(&t, "inc", "incumbent", &format!("{name}-inc")),
        arm(&t, "a", "candidate", &format!("{name}-a")),
    ];
    let down = |state: &str| {
        let o = Command::new("scontrol")
            .args(["update", "nodename=node3", &format!("state={state}")])
            .args(if state == "down" {
                &["reason=slurm_fleet test"][..]
            } else {
                &[][..]
            })
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", text(&o));
    };
    down("down");
    let file = campaign(&t, &lanes("node3"), &arms);
    let o = Command::new(BIN).arg("run").arg(&file).output().unwrap();
    down("resume");
    let out = text(&o);
    assert_eq!(o.status.code(), Some(2), "{out}");
    assert!(
        out.contains("lane n3: slurm_node node3: Slurm says node node3 is DOWN")
            && out.contains("reason: slurm_fleet"),
        "{out}"
    );
    let file = campaign(&t, &lanes("node9"), &arms);
    let o = Command::new(BIN).arg("run").arg(&file).output().unwrap();
    let out = text(&o);
    assert_eq!(o.status.code(), Some(2), "{out}");
    assert!(
        out.contains("lane n3: slurm_node node9: Slurm does not know node node9"),
        "{out}"
    );
    assert!(!t.bundle().exists());
    assert!(squeue(&name).is_empty());
}
