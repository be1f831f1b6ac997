//! The Slurm lane against a real Slurm cluster (munge, slurmctld, slurmd from Debian's packages,
//! in `target/infra/slurm`, started by `scripts/infra/slurm.sh up --nodes 4` when not up yet: the
//! host's node, where these tests' jobs run, and four namespaced nodes for slurm_fleet.rs;
//! `scripts/test.sh` tears it down at exit). Every campaign here runs the reference engine
//! (`bakeoff engine`) as the job's command.

use crate::support::campaign::{http_get, json, listener_model, text, verify, wait_serving, Camp};
use crate::support::BIN;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::{Mutex, MutexGuard, OnceLock};
use std::time::{Duration, Instant, SystemTime};

pub(crate) const FAST: &str = "ttft_ms = 10\ndecode_tok_s = 400\ncontext_tokens = 4096";
/// A slow decode: the arm's timing steps take seconds, time to act during the arm.
pub(crate) const SLOW: &str = "ttft_ms = 10\ndecode_tok_s = 20\ncontext_tokens = 4096";

/// The cluster's state folder (under the crate's target/).
fn state_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("target/infra/slurm")
}

/// Brings the cluster up once per test process (the script is idempotent) and serializes the
/// tests: the node has 2 CPUs, and each test checks that nothing of its campaign is left in
/// squeue.
pub(crate) fn cluster() -> MutexGuard<'static, ()> {
    static UP: OnceLock<()> = OnceLock::new();
    static ONE: Mutex<()> = Mutex::new(());
    let g = ONE.lock().unwrap_or_else(|e| e.into_inner());
    UP.get_or_init(|| {
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/infra/slurm.sh");
        let t = Instant::now();
        // One cluster for every Slurm test: the host's node (partition `debug`, the default,
        // where the one-node tests' jobs run) and four namespaced nodes (partition `fleet`,
        // slurm_fleet.rs).
        let o = Command::new(&script)
            .arg("up")
            .arg(state_dir())
            .args(["--nodes", "4"])
            .output()
            .unwrap();
        assert!(o.status.success(), "slurm.sh up failed: {}", text(&o));
        eprintln!("slurm cluster up in {:.1} s", t.elapsed().as_secs_f64());
        // Every Slurm command of this process (and the bakeoff runs it starts) uses it.
        std::env::set_var("SLURM_CONF", state_dir().join("slurm.conf"));
    });
    g
}

/// Jobs Slurm lists (any state it still shows in squeue) whose name contains `needle`.
pub(crate) fn squeue(needle: &str) -> Vec<String> {
    let o = Command::new("squeue")
        .args(["-h", "-o", "%i %j %T"])
        .output()
        .unwrap();
    assert!(o.status.success(), "squeue: {}", text(&o));
    String::from_utf8_lossy(&o.stdout)
        .lines()
        .filter(|l| l.contains(needle))
        .map(str::to_string)
        .collect()
}

/// `scontrol show job -o ID` fields.
pub(crate) fn job(id: &str) -> std::collections::BTreeMap<String, String> {
    let o = Command::new("scontrol")
        .args(["show", "job", "-o", id])
        .output()
        .unwrap();
    bakeoff::lane::slurm::fields(&String::from_utf8_lossy(&o.stdout))
}

/// Cancels whatever a test left (its jobs contain `needle`) and stops what serves its lane port,
/// so a failed test leaves nothing running either.
pub(crate) struct Leftovers(pub(crate) String, pub(crate) u16);

impl Drop for Leftovers {
    fn drop(&mut self) {
        for l in squeue(&self.0) {
            if let Some(id) = l.split_whitespace().next() {
                let _ = Command::new("scancel").arg(id).status();
            }
        }
        stop_lane(self.1);
    }
}

/// A campaign: the incumbent first, then the other arms; `arms` are whole `[[arms]]` tables.
pub(crate) fn campaign(t: &Camp, arms: &[String], lane_extra: &str) -> PathBuf {
    let mut s = format!(
        r#"[campaign]
id = "slurm-test"
output = "out"

[lane]
host = "127.0.0.1"
port = {port}
ready_timeout_s = 30
stop_grace_s = 3
{lane_extra}

[workload]
ranking_priority = ["ttft", "decode_tokens_per_second"]
matched_prompt_tokens = 64
max_tokens = 8
warm_repetitions = 2
concurrency = [1]

[gates]
preflight = ["smoke", "streaming"]

[policy]
required_gates = ["smoke", "streaming", "restoration"]
"#,
        port = t.port
    );
    for a in arms {
        s.push_str(a);
    }
    let p = t.path("campaign.toml");
    std::fs::write(&p, s).unwrap();
    p
}

/// A reference-engine process arm (the incumbent the test starts itself).
pub(crate) fn reference_arm(id: &str, role: &str) -> String {
    format!(
        "\n[[arms]]\nid = \"{id}\"\nrole = \"{role}\"\nengine = \"reference\"\nmodel = \"m\"\n[arms.reference]\nprofile = \"{id}.toml\"\n"
    )
}

/// A Slurm arm running `bakeoff engine --profile ID.toml` on the lane port; `extra` goes into
/// `[arms.slurm]`.
pub(crate) fn slurm_arm(t: &Camp, id: &str, role: &str, job_name: &str, extra: &str) -> String {
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
argv = ["{BIN}", "engine", "--profile", "{id}.toml", "--host", "127.0.0.1", "--port", "{port}"]
job_name = "{job_name}"
time_limit = "10:00"
{extra}
"#,
        port = t.port
    )
}

pub(crate) fn arm<'a>(r: &'a serde_json::Value, id: &str) -> &'a serde_json::Value {
    r["arms"]
        .as_array()
        .unwrap()
        .iter()
        .find(|a| a["id"] == id)
        .unwrap_or_else(|| panic!("no arm {id}: {r:#}"))
}

/// Kills the reference incumbent serving the test's lane port (started by the test, or restored
/// by bakeoff as a detached process).
pub(crate) fn stop_lane(port: u16) {
    for l in bakeoff::lane::procnet::find_listeners(port) {
        // SAFETY: signals the process serving this test's own lane port (a reference engine).
        unsafe {
            if l.pgid == Some(l.pid) && l.pid as i32 != libc::getpgrp() {
                libc::kill(-(l.pid as i32), libc::SIGKILL);
            }
            libc::kill(l.pid as i32, libc::SIGKILL);
        }
    }
}

#[test]
fn a_slurm_candidate_runs_end_to_end_and_verifies() {
    let _g = cluster();
    let t = Camp::new();
    let name = format!("bo-e2e-{}", t.port);
    let _left = Leftovers(name.clone(), t.port);
    t.profile("inc", FAST);
    t.profile("sl", FAST);
    let extra = "env = { BAKEOFF_TEST_LEVEL = \"info\", BAKEOFF_TEST_TOKEN = { from_env = \"WF_SLURM_SECRET\" } }\ncpus = 1";
    let file = campaign(
        &t,
        &[
            reference_arm("inc", "incumbent"),
            slurm_arm(&t, "sl", "candidate", &name, extra),
        ],
        "",
    );
    // The dry run shows the job spec.
    let o = Command::new(BIN)
        .args(["run", "--dry-run"])
        .arg(&file)
        .output()
        .unwrap();
    let dry = String::from_utf8_lossy(&o.stdout).to_string();
    assert!(o.status.success(), "{}", text(&o));
    assert!(dry.contains(&format!("Slurm job {name}")), "{dry}");
    assert!(
        dry.contains("--time=10:00") && dry.contains("--cpus-per-task=1"),
        "{dry}"
    );
    assert!(dry.contains("scancel --signal=TERM --full JOBID"), "{dry}");
    let mut inc = Some(t.start_incumbent("inc"));
    let secret = "s3cr3t-slurm-token-value";
    let b = t.bundle();
    let o = Command::new(BIN)
        .arg("run")
        .arg(&file)
        .arg("--no-progress")
        .env("WF_SLURM_SECRET", secret)
        .output()
        .unwrap();
    let r = json(&b.join("campaign-result.json"));
    let sl = arm(&r, "sl");
    assert_eq!(sl["status"], "completed", "{sl:#}\n{}", text(&o));
    assert!(o.status.success(), "{}", text(&o));
    verify(&b);
    // The evidence records the job: id, node, state, exit code.
    let launch = json(&b.join("sl-launch.json"));
    let id = launch["slurm_job"]["job_id"].as_str().unwrap().to_string();
    assert!(id.parse::<u64>().is_ok(), "{launch:#}");
    assert_eq!(launch["spec"]["kind"], "slurm");
    let stop = json(&b.join("sl-stop.json"));
    let sj = &stop["stop"]["slurm_job"];
    assert_eq!(sj["job_id"], id.as_str(), "{stop:#}");
    let host = Command::new("hostname").arg("-s").output().unwrap();
    assert_eq!(
        sj["node"],
        String::from_utf8_lossy(&host.stdout).trim(),
        "{stop:#}"
    );
    assert_eq!(sj["node_addr"], "127.0.0.1", "{stop:#}");
    assert!(
        sj["state"].as_str().is_some() && sj["exit_code"].as_str().is_some(),
        "{stop:#}"
    );
    assert_eq!(stop["stop"]["how"], "sigterm", "{stop:#}");
    assert_eq!(stop["stop"]["group_gone"], true, "{stop:#}");
    assert_eq!(stop["stop"]["port_free"], true, "{stop:#}");
    // Slurm's own view: the job ended, nothing of the campaign is left.
    let j = job(&id);
    assert!(
        j.get("JobState")
            .is_some_and(|s| s != "RUNNING" && s != "PENDING"),
        "{j:?}"
    );
    assert!(squeue(&name).is_empty(), "{:?}", squeue(&name));
    // The job's env reached the engine by name; the secret value is nowhere in the bundle.
    for e in std::fs::read_dir(&b).unwrap().flatten() {
        if e.path().is_file() {
            let body = std::fs::read(e.path()).unwrap();
            assert!(
                !String::from_utf8_lossy(&body).contains(secret),
                "secret in {}",
                e.path().display()
            );
        }
    }
    assert!(!std::fs::read_to_string(b.join("logs/sl-engine.log"))
        .unwrap_or_default()
        .contains(secret));
    assert_eq!(
        r["restoration"]["status"], "passed",
        "{:#}",
        r["restoration"]
    );
    assert_eq!(listener_model(t.port).as_deref(), Some("inc"));
    if let Some(mut c) = inc.take() {
        let _ = c.wait();
    }
    stop_lane(t.port);
}

#[test]
fn a_slurm_job_that_exits_at_start_is_compatibility_within_2_s_with_slurms_reason() {
    let _g = cluster();
    let t = Camp::new();
    let name = format!("bo-dies-{}", t.port);
    let _left = Leftovers(name.clone(), t.port);
    t.profile("inc", FAST);
    let stamp = t.path("exit-stamp");
    // The job writes the wall clock just before it exits (code 3, a last log line).
    let dies = format!(
        r#"
[[arms]]
id = "dies"
role = "candidate"
engine = "reference"
model = "m"
served_model = "dies"
served_context = 4096
[arms.slurm]
argv = ["/bin/sh", "-c", "sleep 0.5; echo 'fatal: no CUDA device' >&2; date +%s.%N > {}; exit 3"]
job_name = "{name}"
"#,
        stamp.display()
    );
    let file = campaign(&t, &[reference_arm("inc", "incumbent"), dies], "");
    let mut inc = Some(t.start_incumbent("inc"));
    let b = t.bundle();
    let o = Command::new(BIN)
        .arg("run")
        .arg(&file)
        .arg("--no-progress")
        .output()
        .unwrap();
    let r = json(&b.join("campaign-result.json"));
    let d = arm(&r, "dies");
    assert_eq!(d["status"], "failed", "{d:#}\n{}", text(&o));
    assert_eq!(d["failure"]["class"], "compatibility", "{d:#}");
    let detail = d["failure"]["detail"].as_str().unwrap_or_default();
    assert!(
        detail.contains("FAILED") && detail.contains("NonZeroExitCode") && detail.contains("3:0"),
        "the scheduler's reason is not in the detail: {detail}"
    );
    assert!(detail.contains("fatal: no CUDA device"), "{detail}");
    let ready = json(&b.join("dies-ready.json"));
    assert_eq!(ready["failure"]["cause"], "exited", "{ready:#}");
    assert_eq!(ready["failure"]["exit"]["code"], 3, "{ready:#}");
    // Detected (and the evidence written) within 2 s of the job's exit.
    let exited: f64 = std::fs::read_to_string(&stamp)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    let written = std::fs::metadata(b.join("dies-ready.json"))
        .unwrap()
        .modified()
        .unwrap()
        .duration_since(SystemTime::UNIX_EPOCH)
        .unwrap()
        .as_secs_f64();
    let lag = written - exited;
    eprintln!("job exit → ready failure written: {lag:.3} s");
    assert!(
        lag < 2.0,
        "the exit was noticed {lag:.2} s after it happened"
    );
    verify(&b);
    assert!(squeue(&name).is_empty());
    assert_eq!(listener_model(t.port).as_deref(), Some("inc"));
    if let Some(mut c) = inc.take() {
        let _ = c.wait();
    }
    stop_lane(t.port);
}

#[test]
fn a_pending_slurm_job_past_its_timeout_is_cancelled_with_the_reason() {
    let _g = cluster();
    let t = Camp::new();
    let name = format!("bo-pend-{}", t.port);
    let _left = Leftovers(name.clone(), t.port);
    t.profile("inc", FAST);
    t.profile("big", FAST);
    // 64 CPUs on a 2-CPU node: Slurm accepts the job and keeps it pending.
    let file = campaign(
        &t,
        &[
            reference_arm("inc", "incumbent"),
            slurm_arm(
                &t,
                "big",
                "candidate",
                &name,
                "cpus = 64\npending_timeout_s = 3",
            ),
        ],
        "",
    );
    let mut inc = Some(t.start_incumbent("inc"));
    let b = t.bundle();
    let t0 = Instant::now();
    let o = Command::new(BIN)
        .arg("run")
        .arg(&file)
        .arg("--no-progress")
        .output()
        .unwrap();
    let r = json(&b.join("campaign-result.json"));
    let big = arm(&r, "big");
    assert_eq!(
        big["failure"]["class"],
        "compatibility",
        "{big:#}\n{}",
        text(&o)
    );
    let ready = json(&b.join("big-ready.json"));
    let f = &ready["failure"];
    assert_eq!(f["cause"], "timeout", "{ready:#}");
    let msg = f["message"].as_str().unwrap();
    assert!(
        msg.contains("PENDING") && msg.contains("cancelled"),
        "{msg}"
    );
    assert!(
        msg.contains("PartitionConfig") || msg.contains("Resources"),
        "no scheduler reason: {msg}"
    );
    let el = f["elapsed_ms"].as_f64().unwrap();
    assert!((3000.0..8000.0).contains(&el), "gave up after {el} ms");
    let id = json(&b.join("big-launch.json"))["slurm_job"]["job_id"]
        .as_str()
        .unwrap()
        .to_string();
    let j = job(&id);
    assert_eq!(
        j.get("JobState").map(String::as_str),
        Some("CANCELLED"),
        "{j:?}"
    );
    assert!(squeue(&name).is_empty(), "{:?}", squeue(&name));
    verify(&b);
    eprintln!("pending campaign: {:.1} s", t0.elapsed().as_secs_f64());
    if let Some(mut c) = inc.take() {
        let _ = c.wait();
    }
    stop_lane(t.port);
}

#[test]
fn a_slurm_job_that_dies_mid_run_is_a_crash() {
    let _g = cluster();
    let t = Camp::new();
    let name = format!("bo-crash-{}", t.port);
    let _left = Leftovers(name.clone(), t.port);
    t.profile("inc", FAST);
    t.profile("cr", &format!("{FAST}\ncrash_after_requests = 4"));
    let file = campaign(
        &t,
        &[
            reference_arm("inc", "incumbent"),
            slurm_arm(&t, "cr", "candidate", &name, ""),
        ],
        "",
    );
    let mut inc = Some(t.start_incumbent("inc"));
    let b = t.bundle();
    let o = Command::new(BIN)
        .arg("run")
        .arg(&file)
        .arg("--no-progress")
        .output()
        .unwrap();
    let r = json(&b.join("campaign-result.json"));
    let cr = arm(&r, "cr");
    assert_eq!(cr["status"], "failed", "{cr:#}\n{}", text(&o));
    assert_eq!(cr["failure"]["class"], "crash", "{cr:#}");
    // The job's end is Slurm's: FAILED with the engine's exit code 70.
    let stop = json(&b.join("cr-stop.json"));
    let sj = &stop["stop"]["slurm_job"];
    assert_eq!(sj["state"], "FAILED", "{stop:#}");
    assert_eq!(sj["exit_code"], "70:0", "{stop:#}");
    assert!(squeue(&name).is_empty());
    assert_eq!(
        r["restoration"]["status"], "passed",
        "{:#}",
        r["restoration"]
    );
    verify(&b);
    if let Some(mut c) = inc.take() {
        let _ = c.wait();
    }
}

fn sigint(child: &std::process::Child) {
    // SAFETY: signals the bakeoff process this test started.
    unsafe {
        libc::kill(child.id() as i32, libc::SIGINT);
    }
}

fn wait_for(p: &Path, limit: Duration) {
    let t = Instant::now();
    while !p.exists() {
        assert!(
            t.elapsed() < limit,
            "{} not written after {limit:?}",
            p.display()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn sigint_during_a_slurm_arm_leaves_the_incumbent_serving_and_no_job() {
    let _g = cluster();
    let t = Camp::new();
    let name = format!("bo-int-{}", t.port);
    let _left = Leftovers(name.clone(), t.port);
    t.profile("inc", FAST);
    t.profile("sl", SLOW);
    let file = campaign(
        &t,
        &[
            reference_arm("inc", "incumbent"),
            slurm_arm(&t, "sl", "candidate", &name, ""),
        ],
        "",
    );
    let mut inc = Some(t.start_incumbent("inc"));
    let b = t.bundle();
    let child = Command::new(BIN)
        .arg("run")
        .arg(&file)
        .arg("--no-progress")
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Interrupt during the Slurm arm's timing (its slow decode makes the step long).
    wait_for(
        &b.join("sl-timing-64-c1-cold.json"),
        Duration::from_secs(120),
    );
    assert_eq!(squeue(&name).len(), 1, "the arm's job runs");
    sigint(&child);
    let o = child.wait_with_output().unwrap();
    assert_eq!(o.status.code(), Some(130), "{}", text(&o));
    assert!(squeue(&name).is_empty(), "{:?}", squeue(&name));
    let r = json(&b.join("campaign-result.json"));
    assert_eq!(r["complete"], false);
    assert_eq!(
        r["restoration"]["status"], "passed",
        "{:#}",
        r["restoration"]
    );
    assert_eq!(listener_model(t.port).as_deref(), Some("inc"));
    verify(&b);
    if let Some(mut c) = inc.take() {
        let _ = c.wait();
    }
    stop_lane(t.port);
}

#[test]
fn a_slurm_incumbent_is_stopped_and_restored_as_a_slurm_job() {
    let _g = cluster();
    let t = Camp::new();
    let name = format!("bo-inc-{}", t.port);
    let _left = Leftovers(name.clone(), t.port);
    t.profile("inc", FAST);
    t.profile("cand", FAST);
    let file = campaign(
        &t,
        &[
            slurm_arm(&t, "inc", "incumbent", &name, ""),
            reference_arm("cand", "candidate"),
        ],
        "",
    );
    // The incumbent serves as a Slurm job submitted like the recipe does.
    let sub = Command::new("sbatch")
        .args(["--parsable", &format!("--job-name={name}")])
        .arg(format!("--chdir={}", t.dir.path().display()))
        .arg(format!("--output={}", t.path("inc-job.log").display()))
        .arg(format!(
            "--wrap=exec {BIN} engine --profile inc.toml --host 127.0.0.1 --port {}",
            t.port
        ))
        .output()
        .unwrap();
    assert!(sub.status.success(), "{}", text(&sub));
    let first = String::from_utf8_lossy(&sub.stdout).trim().to_string();
    wait_serving(t.port, Duration::from_secs(30));
    let b = t.bundle();
    let o = Command::new(BIN)
        .arg("run")
        .arg(&file)
        .arg("--no-progress")
        .output()
        .unwrap();
    let r = json(&b.join("campaign-result.json"));
    assert!(o.status.success(), "{}", text(&o));
    assert_eq!(arm(&r, "cand")["status"], "completed", "{r:#}");
    // Stopped the Slurm way: the first job was cancelled (TERM), not killed by pid.
    let shut = json(&b.join("incumbent-shutdown.json"));
    assert_eq!(shut["jobs"][0]["job_id"], first.as_str(), "{shut:#}");
    assert_eq!(shut["stop"][0]["ended"], true, "{shut:#}");
    assert!(
        shut["detail"]
            .as_str()
            .unwrap()
            .contains("scancel --signal=TERM"),
        "{shut:#}"
    );
    // Restored as a new job of the same name, proven the same recipe, serving again.
    let rl = json(&b.join("restoration-launch.json"));
    let second = rl["slurm_job"]["job_id"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    assert!(!second.is_empty() && second != first, "{rl:#}");
    assert_eq!(
        r["restoration"]["status"], "passed",
        "{:#}",
        r["restoration"]
    );
    let jobs = squeue(&name);
    assert_eq!(jobs.len(), 1, "{jobs:?}");
    assert!(
        jobs[0].starts_with(&second) && jobs[0].ends_with("RUNNING"),
        "{jobs:?}"
    );
    assert_eq!(http_get(t.port, "/health").map(|x| x.0), Some(200));
    assert_eq!(listener_model(t.port).as_deref(), Some("inc"));
    verify(&b);
    // Leftovers cancels the restored job.
}

/// `[arms.slurm]` problems are one line each, `FILE:LINE: field: problem; fix` (no cluster needed).
#[test]
fn slurm_recipe_errors_name_the_line_field_and_fix() {
    let t = Camp::new();
    t.profile("inc", FAST);
    let bad = |extra: &str| {
        let file = campaign(
            &t,
            &[
                reference_arm("inc", "incumbent"),
                slurm_arm(&t, "sl", "candidate", "ok-name", extra),
            ],
            "",
        );
        let text = std::fs::read_to_string(&file).unwrap();
        let e = bakeoff::campaign::load(&file)
            .expect_err("an error")
            .to_string();
        assert!(!e.contains('\n') && e.contains("; "), "{e}");
        (text, e)
    };
    let line =
        |text: &str, needle: &str| text.lines().position(|l| l.contains(needle)).unwrap() + 1;
    let (text, e) = bad("sbatch_args = [\"--qos=high\", \"--time=5\"]");
    assert!(
        e.contains(&format!(
            ":{}: arms[1].slurm.sbatch_args[1]: `--time` is set by bakeoff",
            line(&text, "sbatch_args")
        )) && e.contains("time_limit"),
        "{e}"
    );
    let (text, e) = bad("gpu_type = \"h100\"");
    assert!(
        e.contains(&format!(
            ":{}: arms[1].slurm.gpu_type: gpu_type without gpus",
            line(&text, "gpu_type")
        )),
        "{e}"
    );
    let (_, e) = bad("cpus = 0");
    assert!(e.contains("arms[1].slurm.cpus: cpus = 0"), "{e}");
    let (_, e) = bad("env = { HF_TOKEN = \"hf_abcdefgh\" }");
    assert!(
        e.contains("arms[1].slurm.env") && e.contains("from_env"),
        "{e}"
    );
    // A bad time limit (the recipe's own is replaced by the field under test).
    let file = campaign(
        &t,
        &[
            reference_arm("inc", "incumbent"),
            slurm_arm(&t, "sl", "candidate", "ok-name", "").replace("\"10:00\"", "\"1h\""),
        ],
        "",
    );
    let e = bakeoff::campaign::load(&file)
        .expect_err("an error")
        .to_string();
    assert!(
        e.contains("arms[1].slurm.time_limit: `1h` is not a Slurm time limit"),
        "{e}"
    );
    // The dry run shows every job option: partition, GPUs as --gres, account, the secret by name.
    let file = campaign(
        &t,
        &[
            reference_arm("inc", "incumbent"),
            slurm_arm(
                &t,
                "sl",
                "candidate",
                "ok-name",
                "partition = \"gpu\"\ngpus = 2\ngpu_type = \"h100\"\naccount = \"inf\"\nconstraint = \"nvlink\"\nenv = { HF_TOKEN = { from_env = \"WF_HF\" } }",
            ),
        ],
        "",
    );
    let o = Command::new(BIN)
        .args(["run", "--dry-run"])
        .arg(&file)
        .env("WF_HF", "hf_value_never_shown")
        .output()
        .unwrap();
    let dry = String::from_utf8_lossy(&o.stdout).to_string();
    assert!(o.status.success(), "{}", crate::support::text(&o));
    for want in [
        "--partition=gpu",
        "--gres=gpu:h100:2",
        "--account=inf",
        "--constraint=nvlink",
        "HF_TOKEN=<from $WF_HF, masked>",
        "Slurm job ok-name, partition gpu, constraint nvlink, gres gpu:h100:2",
    ] {
        assert!(dry.contains(want), "{want:?} not in:\n{dry}");
    }
    assert!(!dry.contains("hf_value_never_shown"), "{dry}");
}
