//! Container arms through a real Docker engine (Debian's docker.io, in a private folder) and a
//! local registry: the image is a `FROM scratch` image of this build's `bakeoff` binary, pushed
//! and pinned by digest, serving the reference engine. `scripts/infra/docker.sh` installs and
//! starts it (once per test binary, state under `target/infra/docker`); `scripts/test.sh` stops
//! it at exit (`scripts/infra/docker.sh down target/infra/docker`).
//!
//! The daemon runs with `--bridge=none --iptables=false`: containers use `--network=host`, which
//! is also how these tests check that a recipe's `run_args` reach `docker run`.

use crate::support::campaign::*;
use crate::support::exclusive as serial;
use bakeoff::lane::{self, Cause, ContainerSpec, EnvVal, LaneSpec, LaunchSpec, StopHow};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

pub(crate) const SECRET: &str = "ctr-secret-value-5b9e1d";
const FAST: &str = "ttft_ms = 10\ndecode_tok_s = 400\ncontext_tokens = 4096";

/// The running infrastructure: the daemon's socket, a `docker` wrapper that talks to it, and the
/// digest-pinned image of the reference engine.
pub(crate) struct Infra {
    pub(crate) docker_host: String,
    /// A two-line script running the real docker CLI with `DOCKER_HOST` set, for the tests that
    /// call the lane in this process (the test binary's own environment stays untouched).
    cli: PathBuf,
    pub(crate) image: String,
}

fn script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/infra/docker.sh")
}

fn state_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("target/infra/docker")
}

pub(crate) fn infra() -> &'static Infra {
    static INFRA: OnceLock<Infra> = OnceLock::new();
    INFRA.get_or_init(|| {
        let t = Instant::now();
        let dir = state_dir();
        let up = Command::new(script()).arg("up").arg(&dir).output().unwrap();
        assert!(up.status.success(), "docker.sh up: {}", text(&up));
        let env = String::from_utf8_lossy(&up.stdout).to_string();
        let docker_host = env
            .lines()
            .find_map(|l| l.strip_prefix("export DOCKER_HOST="))
            .unwrap_or_else(|| panic!("no DOCKER_HOST in {env}"))
            .to_string();
        let img = Command::new(script())
            .arg("image")
            .arg(&dir)
            .arg(BIN)
            .output()
            .unwrap();
        assert!(img.status.success(), "docker.sh image: {}", text(&img));
        let image = String::from_utf8_lossy(&img.stdout)
            .lines()
            .last()
            .unwrap_or_default()
            .trim()
            .to_string();
        assert!(
            image.starts_with("127.0.0.1:") && image.contains("@sha256:"),
            "a digest-pinned image in the local registry: {image}"
        );
        let real = String::from_utf8_lossy(
            &Command::new("sh")
                .args(["-c", "command -v docker"])
                .output()
                .unwrap()
                .stdout,
        )
        .trim()
        .to_string();
        let cli = dir.join("docker-cli");
        std::fs::write(
            &cli,
            format!("#!/bin/sh\nDOCKER_HOST='{docker_host}' exec '{real}' \"$@\"\n"),
        )
        .unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&cli, std::fs::Permissions::from_mode(0o755)).unwrap();
        eprintln!(
            "docker infrastructure up in {:.1} s: {image}",
            t.elapsed().as_secs_f64()
        );
        Infra {
            docker_host,
            cli,
            image,
        }
    })
}

/// Runs the real docker CLI against the test daemon.
fn docker(args: &[&str]) -> std::process::Output {
    Command::new(&infra().cli)
        .args(args)
        .stdin(Stdio::null())
        .output()
        .unwrap()
}

/// Names of the containers (running or not) carrying `bakeoff.campaign=ID`.
pub(crate) fn campaign_containers(id: &str) -> Vec<String> {
    let o = docker(&[
        "ps",
        "-a",
        "--filter",
        &format!("label=bakeoff.campaign={id}"),
        "--format",
        "{{.Names}}",
    ]);
    assert!(o.status.success(), "{}", text(&o));
    String::from_utf8_lossy(&o.stdout)
        .lines()
        .map(str::to_string)
        .collect()
}

pub(crate) fn remove_container(name: &str) {
    let _ = docker(&["rm", "-f", name]);
}

/// The container arm: the reference engine in the image, the campaign directory mounted at
/// /profiles, on the host network (run_args).
pub(crate) fn container_arm(id: &str, profile: &str, port: u16, extra: &str) -> String {
    format!(
        r#"
[[arms]]
id = "{id}"
role = "candidate"
engine = "reference in a container"
model = "m"
served_model = "{profile}"
served_context = 4096
long_context_profile = "full"
[arms.container]
image = "{image}"
args = ["engine", "--profile", "/profiles/{profile}.toml", "--host", "127.0.0.1", "--port", "{port}"]
run_args = ["--network=host"]
env = {{ API_TOKEN = {{ from_env = "BAKEOFF_TEST_SECRET" }}, LEVEL = "debug" }}
labels = {{ team = "serving" }}
{extra}
[[arms.container.volumes]]
host = "."
container = "/profiles"
read_only = true
"#,
        image = infra().image
    )
}

/// A campaign with the reference incumbent `inc`, under its own campaign id (container names
/// are `bakeoff-<campaign id>-<arm id>`).
fn campaign(t: &Camp, id: &str, arms: &str) -> PathBuf {
    let file = t.write(&[("inc", "inc")], "", arms);
    let toml = std::fs::read_to_string(&file)
        .unwrap()
        .replace("id = \"test-campaign\"", &format!("id = \"{id}\""));
    std::fs::write(&file, toml).unwrap();
    file
}

fn bakeoff_run(file: &Path) -> Command {
    let mut c = Command::new(BIN);
    c.arg("run")
        .arg(file)
        .arg("--no-progress")
        .env("DOCKER_HOST", &infra().docker_host)
        .env("BAKEOFF_TEST_SECRET", SECRET)
        .stdin(Stdio::null());
    c
}

fn arm_result<'a>(r: &'a serde_json::Value, id: &str) -> &'a serde_json::Value {
    r["arms"]
        .as_array()
        .unwrap()
        .iter()
        .find(|a| a["id"] == id)
        .unwrap_or_else(|| panic!("no arm {id} in {r:#}"))
}

/// Every file of the bundle, as text, for the secret check.
fn no_secret_in(dir: &Path) {
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            no_secret_in(&p);
        } else if let Ok(s) = std::fs::read(&p) {
            assert!(
                !String::from_utf8_lossy(&s).contains(SECRET),
                "secret value in {}",
                p.display()
            );
        }
    }
}

#[test]
fn a_campaign_with_container_arms_runs_through_the_real_daemon() {
    let _g = serial();
    infra();
    let t = Camp::new();
    t.profile("inc", FAST);
    t.profile(
        "fast",
        "ttft_ms = 5\ndecode_tok_s = 600\ncontext_tokens = 4096",
    );
    t.profile(
        "dies",
        &format!("{FAST}\nfail_at_startup = \"engine refused the model: simulated\""),
    );
    let id = "ctr-campaign";
    for n in campaign_containers(id) {
        remove_container(&n);
    }
    let arms = format!(
        "{}{}",
        container_arm("ctr", "fast", t.port, ""),
        container_arm("ctr-dies", "dies", t.port, "")
    );
    let file = campaign(&t, id, &arms);
    let inc = t.start_incumbent("inc");
    let started = Instant::now();
    let o = bakeoff_run(&file).output().unwrap();
    let took = started.elapsed();
    let b = t.bundle();
    let result = std::panic::catch_unwind(|| {
        assert!(o.status.success(), "{}", text(&o));
        let r = json(&b.join("campaign-result.json"));
        assert_eq!(r["complete"], true, "{r:#}");
        verify(&b);

        // The container arm was measured like any arm.
        let ctr = arm_result(&r, "ctr");
        assert_eq!(ctr["status"], "completed", "{ctr:#}");
        assert!(
            ctr["cold"]["ttft_ms"]["p50"].as_f64().unwrap() > 0.0,
            "{ctr:#}"
        );
        // Its launch evidence: the docker argv with run_args before the image, the secret by
        // name only.
        let lv = json(&b.join("ctr-launch.json"));
        let argv: Vec<String> = serde_json::from_value(lv["spec"]["argv"].clone())
            .unwrap_or_else(|_| panic!("no argv in {lv:#}"));
        let at = |s: &str| argv.iter().position(|a| a == s);
        let net = at("--network=host").unwrap_or_else(|| panic!("run_args in {argv:?}"));
        assert!(net < at(&infra().image).unwrap(), "{argv:?}");
        assert!(argv.contains(&"API_TOKEN".to_string()), "{argv:?}");
        assert!(argv.contains(&"bakeoff.campaign=ctr-campaign".to_string()));
        assert!(argv.contains(&"team=serving".to_string()));
        // Its stop: docker stop with the lane's grace, docker rm, the port free.
        let stop = json(&b.join("ctr-stop.json"));
        let s = stop.to_string();
        assert!(s.contains("stop -t 2 bakeoff-ctr-campaign-ctr"), "{stop:#}");
        assert!(s.contains("docker rm -f"), "{stop:#}");

        // The arm whose container exits at start: compatibility, the engine's own last line.
        let dies = arm_result(&r, "ctr-dies");
        assert_eq!(dies["failure"]["class"], "compatibility", "{dies:#}");
        let ready = json(&b.join("ctr-dies-ready.json"));
        assert_eq!(ready["failure"]["cause"], "exited", "{ready:#}");
        let msg = ready["failure"]["message"].as_str().unwrap();
        assert!(msg.contains("engine refused the model: simulated"), "{msg}");
        let el = ready["failure"]["elapsed_ms"].as_f64().unwrap();
        eprintln!("container exit at start failed the arm {el:.0} ms after launch began");
        assert!(el < 5000.0, "{ready:#}");

        // Nothing of the campaign is left in the daemon; the incumbent serves again.
        assert_eq!(campaign_containers(id), Vec::<String>::new());
        assert_eq!(listener_model(t.port).as_deref(), Some("inc"));
        no_secret_in(&b);
        assert!(!String::from_utf8_lossy(&o.stdout).contains(SECRET));
        assert!(!String::from_utf8_lossy(&o.stderr).contains(SECRET));
    });
    eprintln!(
        "campaign with two container arms: {:.1} s",
        took.as_secs_f64()
    );
    for n in campaign_containers(id) {
        remove_container(&n);
    }
    cleanup(&b, Some(inc), t.port);
    if let Err(e) = result {
        std::panic::resume_unwind(e);
    }
}

/// Runs a lane test on its own runtime (the serial guard is held outside it, never across an
/// await).
fn block_on<F: std::future::Future<Output = ()>>(f: F) {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
        .block_on(f)
}

fn lane_spec(port: u16) -> LaneSpec {
    LaneSpec {
        ready_timeout: Duration::from_secs(30),
        stop_grace: Duration::from_secs(2),
        ..LaneSpec::new("127.0.0.1", port)
    }
}

/// A container spec for the lane called in this process, as `run::launch` builds it.
fn spec(dir: &Path, name: &str, args: &[&str], run_args: &[&str]) -> ContainerSpec {
    ContainerSpec {
        image: infra().image.clone(),
        args: args.iter().map(|s| s.to_string()).collect(),
        env: vec![
            ("API_TOKEN".into(), EnvVal::secret(SECRET)),
            ("LEVEL".into(), EnvVal::literal("debug")),
        ],
        gpu_uuids: vec![],
        ports: vec![],
        volumes: vec![format!("{}:/profiles:ro", dir.display())],
        labels: vec![
            ("bakeoff.campaign".into(), "lane-test".into()),
            ("bakeoff.arm".into(), name.into()),
        ],
        run_args: run_args.iter().map(|s| s.to_string()).collect(),
        name: format!("bakeoff-lane-test-{name}"),
        log_path: dir.join(format!("{name}.log")),
        docker: infra().cli.clone(),
    }
}

fn engine_args(port: u16, profile: &str) -> Vec<String> {
    vec![
        "engine".into(),
        "--profile".into(),
        format!("/profiles/{profile}.toml"),
        "--host".into(),
        "127.0.0.1".into(),
        "--port".into(),
        port.to_string(),
    ]
}

fn inspect(name: &str, format: &str) -> Option<String> {
    let o = docker(&["inspect", "-f", format, name]);
    o.status
        .success()
        .then(|| String::from_utf8_lossy(&o.stdout).trim().to_string())
}

#[test]
fn launch_ready_and_stop_a_real_container() {
    let _g = serial();
    block_on(launch_ready_and_stop_a_real_container_body());
}

async fn launch_ready_and_stop_a_real_container_body() {
    infra();
    let t = Camp::new();
    t.profile("fast", FAST);
    let port = t.port;
    let args = engine_args(port, "fast");
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let c = spec(t.dir.path(), "up", &args, &["--network=host", "--init"]);
    remove_container(&c.name);
    let lane = lane_spec(port);
    let launch = LaunchSpec::Container(c.clone());
    let t0 = Instant::now();
    let mut running = lane::launch(&lane, &launch).await.expect("docker run");
    let facts = lane::wait_ready(&mut running, &lane).await.expect("ready");
    eprintln!(
        "container ready {:.2} s after launch ({} polls)",
        t0.elapsed().as_secs_f64(),
        facts.polls
    );
    assert_eq!(listener_model(port).as_deref(), Some("fast"));
    // run_args reached docker run: host network, and docker's init as PID 1.
    assert_eq!(
        inspect(&c.name, "{{.HostConfig.NetworkMode}} {{.HostConfig.Init}}").as_deref(),
        Some("host true")
    );
    // The secret is in the container's environment, passed by name: docker's record of the
    // command line and bakeoff's evidence of it hold only the name.
    let env = inspect(&c.name, "{{json .Config.Env}}").unwrap();
    assert!(env.contains(&format!("API_TOKEN={SECRET}")), "{env}");
    assert!(env.contains("LEVEL=debug"), "{env}");
    let argv = launch.argv(&lane);
    assert!(argv.contains(&"API_TOKEN".to_string()), "{argv:?}");
    assert!(!argv.join(" ").contains(SECRET));
    assert!(!launch.describe(&lane).to_string().contains(SECRET));
    let labels = inspect(&c.name, "{{json .Config.Labels}}").unwrap();
    assert!(labels.contains(r#""bakeoff.arm":"up""#), "{labels}");

    let t1 = Instant::now();
    let s = lane::stop(running, Duration::from_secs(2)).await;
    let took = t1.elapsed();
    // The reference engine ends on SIGTERM within the grace: no kill needed.
    assert_eq!(s.how, StopHow::Sigterm, "{s:?}");
    assert!(s.group_gone && s.port_free == Some(true), "{s:?}");
    assert!(took < Duration::from_secs(10), "{took:?}");
    assert!(s.detail.contains("stop -t 2"), "{s:?}");
    assert!(inspect(&c.name, "{{.Id}}").is_none(), "container removed");
    assert!(listener_model(port).is_none(), "nothing serves the port");
    let log = std::fs::read_to_string(&c.log_path).unwrap();
    assert!(!log.contains(SECRET));
    assert!(
        log.contains("listening") || log.contains("127.0.0.1"),
        "{log}"
    );
}

#[test]
fn a_container_that_exits_at_start_fails_fast_with_its_reason() {
    let _g = serial();
    block_on(a_container_that_exits_at_start_fails_fast_with_its_reason_body());
}

async fn a_container_that_exits_at_start_fails_fast_with_its_reason_body() {
    infra();
    let t = Camp::new();
    t.profile(
        "oom",
        &format!("{FAST}\nfail_at_startup = \"CUDA out of memory: simulated\""),
    );
    let port = t.port;
    let lane = lane_spec(port);

    // 1. The engine dies with an out-of-memory message: out-of-memory, its line quoted.
    let args = engine_args(port, "oom");
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let c = spec(t.dir.path(), "oom", &args, &["--network=host"]);
    remove_container(&c.name);
    let mut running = lane::launch(&lane, &LaunchSpec::Container(c.clone()))
        .await
        .expect("docker run");
    let launched = Instant::now();
    let f = lane::wait_ready(&mut running, &lane).await.unwrap_err();
    let after = launched.elapsed();
    eprintln!("exit at start noticed and cleaned up {after:?} after docker run returned");
    // The container exited right after `docker run -d` returned; the failure, with the
    // container's logs fetched and the container removed, comes within 2 s of that.
    assert!(after < Duration::from_secs(2), "{after:?} {f:?}");
    assert_eq!(f.class, lane::LaunchFailure::CLASS);
    assert_eq!(f.cause, Cause::OutOfMemory, "{f:?}");
    assert!(
        f.oom_line
            .as_deref()
            .unwrap_or("")
            .contains("CUDA out of memory"),
        "{f:?}"
    );
    assert!(
        f.exit.as_ref().unwrap().code.is_some_and(|c| c != 0),
        "{f:?}"
    );
    assert!(f.cleanup.as_ref().unwrap().group_gone, "{f:?}");
    assert!(inspect(&c.name, "{{.Id}}").is_none(), "container removed");

    // 2. The engine cannot start (a profile that is not there): exited, with its last log line
    // and exit code in the message.
    let args = engine_args(port, "missing");
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let c = spec(t.dir.path(), "exits", &args, &["--network=host"]);
    remove_container(&c.name);
    let mut running = lane::launch(&lane, &LaunchSpec::Container(c.clone()))
        .await
        .expect("docker run");
    let launched = Instant::now();
    let f = lane::wait_ready(&mut running, &lane).await.unwrap_err();
    assert!(launched.elapsed() < Duration::from_secs(2), "{f:?}");
    assert_eq!(f.cause, Cause::Exited, "{f:?}");
    assert!(f.message.contains("missing.toml"), "{}", f.message);
    assert!(f.message.contains("last log line"), "{}", f.message);
    assert!(
        f.log_tail.iter().any(|l| l.contains("missing.toml")),
        "{f:?}"
    );
    assert!(inspect(&c.name, "{{.Id}}").is_none(), "container removed");

    // 3. Docker cannot start it (no such entrypoint in the image): docker's own reason, and the
    // container `docker run` created is removed.
    let args = engine_args(port, "oom");
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let c = spec(
        t.dir.path(),
        "noexec",
        &args,
        &["--network=host", "--entrypoint=/no/such/engine"],
    );
    remove_container(&c.name);
    let f = lane::launch(&lane, &LaunchSpec::Container(c.clone()))
        .await
        .unwrap_err();
    assert_eq!(f.class, lane::LaunchFailure::CLASS);
    assert_eq!(f.cause, Cause::SpawnFailed, "{f:?}");
    assert!(f.message.contains("/no/such/engine"), "{}", f.message);
    assert!(f.message.contains("was removed"), "{}", f.message);
    assert!(inspect(&c.name, "{{.Id}}").is_none(), "container removed");

    // 4. The kernel's OOM killer: a memory limit (run_args) the engine cannot load its profile
    // under (a 40 MB profile read into memory, 6 MB allowed).
    let mut big = format!("model = \"big\"\n{FAST}\n");
    let junk = format!("# {}\n", "x".repeat(1000));
    for _ in 0..40_000 {
        big.push_str(&junk);
    }
    std::fs::write(t.path("big.toml"), big).unwrap();
    let args = engine_args(port, "big");
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let c = spec(
        t.dir.path(),
        "memcap",
        &args,
        &["--network=host", "--memory=6m", "--memory-swap=6m"],
    );
    remove_container(&c.name);
    let mut running = lane::launch(&lane, &LaunchSpec::Container(c.clone()))
        .await
        .expect("docker run");
    let launched = Instant::now();
    let f = lane::wait_ready(&mut running, &lane).await.unwrap_err();
    eprintln!(
        "OOM-killed container: {:?} after docker run returned: {f:?}",
        launched.elapsed()
    );
    assert!(launched.elapsed() < Duration::from_secs(5), "{f:?}");
    assert_eq!(f.class, lane::LaunchFailure::CLASS);
    assert_eq!(f.cause, Cause::OutOfMemory, "{f:?}");
    let exit = f.exit.as_ref().unwrap();
    assert_eq!((exit.code, exit.oom_killed), (Some(137), true), "{f:?}");
    assert!(f.message.contains("OOM killer"), "{}", f.message);
    assert!(inspect(&c.name, "{{.Id}}").is_none(), "container removed");
}

#[test]
fn stop_leaves_a_container_without_the_arms_ownership_labels_alone() {
    let _g = serial();
    block_on(stop_leaves_a_container_without_the_arms_ownership_labels_alone_body());
}

async fn stop_leaves_a_container_without_the_arms_ownership_labels_alone_body() {
    infra();
    let t = Camp::new();
    t.profile("fast", FAST);
    let port = t.port;
    let lane = lane_spec(port);
    let args = engine_args(port, "fast");
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let c = spec(t.dir.path(), "owned", &args, &["--network=host"]);
    remove_container(&c.name);
    let mut running = lane::launch(&lane, &LaunchSpec::Container(c.clone()))
        .await
        .expect("docker run");
    lane::wait_ready(&mut running, &lane).await.expect("ready");
    // Someone else's container takes the name (the arm's was removed behind bakeoff's back).
    remove_container(&c.name);
    let mut other: Vec<String> = vec![
        "run".into(),
        "-d".into(),
        "--name".into(),
        c.name.clone(),
        "--label".into(),
        "bakeoff.campaign=someone-else".into(),
        "--network=host".into(),
        "-v".into(),
        format!("{}:/profiles:ro", t.dir.path().display()),
        infra().image.clone(),
    ];
    other.extend(engine_args(port, "fast"));
    let other: Vec<&str> = other.iter().map(String::as_str).collect();
    let o = docker(&other);
    assert!(o.status.success(), "{}", text(&o));
    let s = lane::stop(running, Duration::from_secs(2)).await;
    // Launching the arm again fails on the name, and leaves the other container alone too.
    let again = lane::launch(&lane_spec(free_port()), &LaunchSpec::Container(c.clone())).await;
    let still = inspect(
        &c.name,
        "{{.State.Running}} {{index .Config.Labels \"bakeoff.campaign\"}}",
    );
    remove_container(&c.name);
    assert_eq!(s.how, StopHow::NotOwned, "{s:?}");
    assert!(!s.group_gone, "{s:?}");
    assert!(
        s.detail
            .contains("bakeoff.campaign=someone-else, not lane-test"),
        "{s:?}"
    );
    assert_eq!(still.as_deref(), Some("true someone-else"), "left running");
    let f = again.unwrap_err();
    assert_eq!(f.cause, Cause::SpawnFailed, "{f:?}");
    assert!(f.message.contains("already in use"), "{}", f.message);
    assert!(f.message.contains("left alone"), "{}", f.message);
}

#[test]
fn sigint_during_a_container_arm_leaves_the_incumbent_serving_and_no_container() {
    let _g = serial();
    infra();
    let t = Camp::new();
    t.profile("inc", FAST);
    // Slow decode: the candidate's timing steps are long enough to be interrupted.
    t.profile(
        "slow",
        "ttft_ms = 10\ndecode_tok_s = 20\ncontext_tokens = 4096",
    );
    let id = "ctr-sigint";
    for n in campaign_containers(id) {
        remove_container(&n);
    }
    let file = campaign(&t, id, &container_arm("ctr", "slow", t.port, ""));
    let inc = t.start_incumbent("inc");
    let b = t.bundle();
    let child = bakeoff_run(&file)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let cold = b.join("ctr-timing-64-c1-cold.json");
    let t0 = Instant::now();
    while !cold.exists() && t0.elapsed() < Duration::from_secs(120) {
        std::thread::sleep(Duration::from_millis(50));
    }
    let running_then = campaign_containers(id);
    // SAFETY: signals the bakeoff process this test started.
    unsafe {
        libc::kill(child.id() as i32, libc::SIGINT);
    }
    let o = child.wait_with_output().unwrap();
    let result = std::panic::catch_unwind(|| {
        assert!(
            cold.exists(),
            "the container arm reached its timing: {}",
            text(&o)
        );
        assert_eq!(running_then, vec!["bakeoff-ctr-sigint-ctr".to_string()]);
        assert_eq!(o.status.code(), Some(130), "{}", text(&o));
        let r = json(&b.join("campaign-result.json"));
        assert_eq!(r["complete"], false);
        let reason = r["incomplete_reason"].as_str().unwrap();
        assert!(
            reason.starts_with("interrupted by SIGINT during ctr/"),
            "{reason}"
        );
        verify(&b);
        assert_eq!(listener_model(t.port).as_deref(), Some("inc"));
        assert_eq!(campaign_containers(id), Vec::<String>::new());
        no_secret_in(&b);
    });
    for n in campaign_containers(id) {
        remove_container(&n);
    }
    cleanup(&b, Some(inc), t.port);
    if let Err(e) = result {
        std::panic::resume_unwind(e);
    }
}
