//! Container arms against a stand-in docker CLI (a python3 script that records how it was called).
//! There is no Docker engine where these tests run; the stand-in checks the calls bakeoff makes
//! (argv, the secret passed through the environment only) and plays back container states.

use bakeoff::lane::{self, Cause, ContainerSpec, EnvVal, LaneSpec, LaunchSpec, StopHow};
use std::net::TcpListener;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

const SECRET: &str = "hf_fake_secret_0123456789";

use crate::support::free_port;

/// A fake docker. `mode` picks what the container does:
/// - `oom`: it exits at once, OOM-killed, its log says CUDA out of memory;
/// - `runs`: it keeps running until `docker stop`;
/// - `refuse`: `docker run` fails like docker without a daemon.
fn fake_docker(dir: &Path, mode: &str) -> PathBuf {
    let state = dir.join("docker-state");
    std::fs::create_dir_all(&state).unwrap();
    let script = format!(
        r#"#!/usr/bin/env python3
import json, os, sys
state = {state:?}
mode = {mode:?}
args = sys.argv[1:]
with open(os.path.join(state, "calls.jsonl"), "a") as f:
    f.write(json.dumps({{"argv": args, "secret_in_env": os.environ.get("HF_TOKEN") == {SECRET:?},
                        "level": os.environ.get("LEVEL")}}) + "\n")
def exists(n): return os.path.exists(os.path.join(state, n))
def touch(n): open(os.path.join(state, n), "w").close()
cmd = args[0]
if cmd == "run":
    if mode == "refuse":
        print("docker: Cannot connect to the Docker daemon at unix:///var/run/docker.sock. Is the docker daemon running?", file=sys.stderr)
        sys.exit(125)
    touch("created")
    print("0123456789abcdef")
elif cmd == "inspect":
    if exists("removed") or not exists("created"):
        print("Error: No such object: " + args[-1], file=sys.stderr)
        sys.exit(1)
    if "Labels" in " ".join(args):
        print(json.dumps({{"bakeoff.campaign": "t"}}))
    elif mode == "oom":
        print("false 137 true")
    elif exists("stopped"):
        print("false 0 false")
    else:
        print("true 0 false")
elif cmd == "logs":
    print("INFO loading model")
    print("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB" if mode == "oom" else "INFO shutting down", file=sys.stderr)
elif cmd == "stop":
    touch("stopped")
    print(args[-1])
elif cmd == "rm":
    touch("removed")
    print(args[-1])
"#,
        state = state.display().to_string(),
    );
    let path = dir.join("docker");
    std::fs::write(&path, script).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    path
}

fn calls(dir: &Path) -> Vec<serde_json::Value> {
    std::fs::read_to_string(dir.join("docker-state/calls.jsonl"))
        .unwrap_or_default()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

fn spec(dir: &Path, docker: PathBuf, port: u16) -> LaunchSpec {
    LaunchSpec::Container(ContainerSpec {
        image: "vllm/vllm-openai:v0.11.0".into(),
        args: vec!["--model".into(), "Qwen/Qwen3-8B".into()],
        env: vec![
            ("HF_TOKEN".into(), EnvVal::secret(SECRET)),
            ("LEVEL".into(), EnvVal::literal("debug")),
        ],
        gpu_uuids: vec!["GPU-aaa".into()],
        ports: vec![(port, 8000)],
        volumes: vec![],
        labels: vec![("bakeoff.campaign".into(), "t".into())],
        run_args: vec!["--ipc=host".into()],
        name: "bakeoff-t-arm".into(),
        log_path: dir.join("arm.log"),
        docker,
    })
}

fn lane(port: u16) -> LaneSpec {
    LaneSpec {
        ready_timeout: Duration::from_secs(60),
        stop_grace: Duration::from_secs(2),
        ..LaneSpec::new("127.0.0.1", port)
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn container_that_dies_oom_is_out_of_memory_and_removed() {
    let d = tempfile::tempdir().unwrap();
    let port = free_port();
    let (lane, spec) = (
        lane(port),
        spec(d.path(), fake_docker(d.path(), "oom"), port),
    );
    let t0 = Instant::now();
    let mut running = lane::launch(&lane, &spec).await.expect("docker run");
    assert_eq!(running.container_name(), Some("bakeoff-t-arm"));
    let f = lane::wait_ready(&mut running, &lane).await.unwrap_err();
    // Generous: every stand-in docker call starts a python3, slow on a loaded machine. The point
    // is that the exit is noticed by `docker inspect`, not at the 60 s ready timeout.
    assert!(t0.elapsed() < Duration::from_secs(25), "{:?}", t0.elapsed());
    assert_eq!(f.cause, Cause::OutOfMemory, "{f:?}");
    let exit = f.exit.as_ref().unwrap();
    assert_eq!((exit.code, exit.oom_killed), (Some(137), true));
    assert!(
        f.oom_line
            .as_deref()
            .unwrap()
            .contains("CUDA out of memory"),
        "{f:?}"
    );
    assert!(f.log_tail.iter().any(|l| l.contains("loading model")));
    assert!(f.cleanup.as_ref().unwrap().group_gone, "{f:?}");

    let c = calls(d.path());
    let argvs: Vec<Vec<String>> = c
        .iter()
        .map(|v| serde_json::from_value(v["argv"].clone()).unwrap())
        .collect();
    let run = &argvs[0];
    assert_eq!(
        run,
        &lane::container::run_argv(
            match &spec {
                LaunchSpec::Container(c) => c,
                _ => unreachable!(),
            },
            "127.0.0.1"
        )[1..]
            .to_vec()
    );
    assert!(run.contains(&"HF_TOKEN".to_string()));
    assert!(run.contains(&"\"device=GPU-aaa\"".to_string()));
    assert!(run.contains(&format!("127.0.0.1:{port}:8000")));
    // The secret reached docker through its environment, never its argv.
    assert_eq!(c[0]["secret_in_env"], true);
    assert_eq!(c[0]["level"], "debug");
    for a in &argvs {
        assert!(!a.join(" ").contains(SECRET));
    }
    // Logs were fetched before the container was removed.
    let pos = |cmd: &str| argvs.iter().position(|a| a[0] == cmd);
    assert!(pos("logs").unwrap() < pos("rm").unwrap(), "{argvs:?}");
    assert_eq!(argvs[pos("rm").unwrap()], vec!["rm", "-f", "bakeoff-t-arm"]);
    assert!(!f.message.contains(SECRET) && !format!("{f:?}").contains(SECRET));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn container_stop_is_docker_stop_logs_rm() {
    let d = tempfile::tempdir().unwrap();
    let port = free_port();
    let (lane, spec) = (
        lane(port),
        spec(d.path(), fake_docker(d.path(), "runs"), port),
    );
    let running = lane::launch(&lane, &spec).await.expect("docker run");
    let s = lane::stop(running, Duration::from_millis(1500)).await;
    assert_eq!(s.how, StopHow::Sigterm, "{s:?}");
    assert!(s.group_gone, "{s:?}");
    assert_eq!(s.port_free, Some(true));
    let argvs: Vec<Vec<String>> = calls(d.path())
        .iter()
        .map(|v| serde_json::from_value(v["argv"].clone()).unwrap())
        .collect();
    let cmds: Vec<&str> = argvs.iter().map(|a| a[0].as_str()).collect();
    let stop = argvs.iter().find(|a| a[0] == "stop").unwrap();
    assert_eq!(stop, &vec!["stop", "-t", "2", "bakeoff-t-arm"]);
    let i = |c: &str| cmds.iter().position(|x| *x == c).unwrap();
    assert!(i("stop") < i("logs") && i("logs") < i("rm"), "{cmds:?}");
    let log = std::fs::read_to_string(d.path().join("arm.log")).unwrap();
    assert!(
        log.contains("0123456789abcdef"),
        "docker run's output: {log}"
    );
    assert!(
        log.contains("INFO shutting down"),
        "docker logs appended: {log}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn docker_refusing_to_run_is_spawn_failed_with_its_message() {
    let d = tempfile::tempdir().unwrap();
    let port = free_port();
    let (lane, spec) = (
        lane(port),
        spec(d.path(), fake_docker(d.path(), "refuse"), port),
    );
    let f = lane::launch(&lane, &spec).await.unwrap_err();
    assert_eq!(f.cause, Cause::SpawnFailed, "{f:?}");
    assert!(
        f.message.contains("Cannot connect to the Docker daemon"),
        "{}",
        f.message
    );
    assert!(f.message.contains("exit code 125"), "{}", f.message);

    // No docker CLI at all.
    let spec = match spec {
        LaunchSpec::Container(mut c) => {
            c.docker = d.path().join("no-such-docker");
            LaunchSpec::Container(c)
        }
        _ => unreachable!(),
    };
    let f = lane::launch(&lane, &spec).await.unwrap_err();
    assert_eq!(f.cause, Cause::SpawnFailed);
    assert!(f.message.contains("no-such-docker"), "{}", f.message);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn container_port_in_use_fails_before_docker_runs() {
    let d = tempfile::tempdir().unwrap();
    let taken = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = taken.local_addr().unwrap().port();
    let (lane, spec) = (
        lane(port),
        spec(d.path(), fake_docker(d.path(), "runs"), port),
    );
    let f = lane::launch(&lane, &spec).await.unwrap_err();
    assert_eq!(f.cause, Cause::PortInUse);
    assert!(calls(d.path()).is_empty(), "docker was never called");
}
