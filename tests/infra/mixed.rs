//! One campaign over every managed lane kind at once: a process incumbent, a container candidate
//! (real Docker daemon, digest-pinned image) and a Slurm candidate (real one-node cluster). Each
//! arm stops the way its lane does, the incumbent is restored, and the bundle verifies.

use crate::docker::{campaign_containers, container_arm, infra, SECRET};
use crate::slurm::{arm, campaign, cluster, squeue, stop_lane, Leftovers, FAST};
use crate::support::campaign::{json, listener_model, text, verify, Camp};
use crate::support::BIN;
use std::process::{Command, Stdio};

#[test]
fn a_process_incumbent_a_container_and_a_slurm_candidate_run_in_one_campaign() {
    let _g = cluster();
    let t = Camp::new();
    let id = format!("mixed-{}", t.port);
    let job = format!("bo-mixed-{}", t.port);
    let _left = Leftovers(job.clone(), t.port);
    t.profile("inc", FAST);
    t.profile("ctr", FAST);
    t.profile("sl", FAST);
    let port = t.port;
    let incumbent = format!(
        r#"
[[arms]]
id = "inc"
role = "incumbent"
engine = "reference"
model = "m"
served_model = "inc"
served_context = 4096
[arms.process]
argv = ["{BIN}", "engine", "--profile", "{prof}", "--host", "127.0.0.1", "--port", "{port}"]
"#,
        prof = t.path("inc.toml").display()
    );
    let container =
        container_arm("ctr", "ctr", port, "").replace("long_context_profile = \"full\"\n", "");
    let slurm = crate::slurm::slurm_arm(&t, "sl", "candidate", &job, "cpus = 1");
    let file = campaign(&t, &[incumbent, container, slurm], "");
    let toml = std::fs::read_to_string(&file)
        .unwrap()
        .replace("id = \"slurm-test\"", &format!("id = \"{id}\""));
    std::fs::write(&file, toml).unwrap();

    let mut inc = t.start_incumbent("inc");
    let o = Command::new(BIN)
        .arg("run")
        .arg(&file)
        .arg("--no-progress")
        .env("DOCKER_HOST", &infra().docker_host)
        .env("BAKEOFF_TEST_SECRET", SECRET)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let b = t.bundle();
    let r = json(&b.join("campaign-result.json"));
    for a in ["inc", "ctr", "sl"] {
        assert_eq!(
            arm(&r, a)["status"],
            "completed",
            "{a}: {:#}\n{}",
            arm(&r, a),
            text(&o)
        );
    }
    assert!(o.status.success(), "{}", text(&o));
    assert_eq!(r["complete"], true, "{}", text(&o));
    verify(&b);
    // Each arm was launched and stopped by its own lane.
    assert_eq!(json(&b.join("inc-launch.json"))["spec"]["kind"], "process");
    assert_eq!(
        json(&b.join("ctr-launch.json"))["spec"]["kind"],
        "container"
    );
    assert_eq!(json(&b.join("sl-launch.json"))["spec"]["kind"], "slurm");
    let ctr_stop = json(&b.join("ctr-stop.json"));
    assert_eq!(ctr_stop["stop"]["port_free"], true, "{ctr_stop:#}");
    let sl_stop = json(&b.join("sl-stop.json"));
    assert!(
        sl_stop["stop"]["slurm_job"]["job_id"].is_string(),
        "{sl_stop:#}"
    );
    assert_eq!(sl_stop["stop"]["port_free"], true, "{sl_stop:#}");
    // Nothing of the campaign is left: no container, no job; the incumbent serves again.
    assert!(
        campaign_containers(&id).is_empty(),
        "{:?}",
        campaign_containers(&id)
    );
    assert!(squeue(&job).is_empty(), "{:?}", squeue(&job));
    assert_eq!(
        r["restoration"]["status"], "passed",
        "{:#}",
        r["restoration"]
    );
    assert_eq!(listener_model(port).as_deref(), Some("inc"));
    let _ = inc.wait();
    stop_lane(port);
}
