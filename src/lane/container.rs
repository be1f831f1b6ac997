//! Container arms through the docker CLI. The argv builders are pure functions; launch, the exit
//! watch and stop run them.
//!
//! Secrets: `-e NAME` carries only the name; the value is set in the docker CLI's own environment,
//! from which docker copies it into the container. It never appears on a command line (visible in
//! `ps`) nor in anything bakeoff renders.

use super::process::{open_arm_log, open_log};
use super::{
    ContainerSpec, ExitInfo, LaneSpec, LaunchFailure, Masker, Running, StopFacts, StopHow,
};
use crate::clock::mono_ns;
use std::io::Write;
use std::net::IpAddr;
use std::path::Path;
use std::time::Duration;

/// `docker inspect` format: running flag, exit code, OOM-killed flag.
pub const INSPECT_FORMAT: &str = "{{.State.Running}} {{.State.ExitCode}} {{.State.OOMKilled}}";

/// `docker run -d --name N --label k=v… --gpus "device=U1,U2" -p HOST:h:c… -v …… -e NAME…
/// run_args… IMAGE args…`. `host` is the lane host: ports are published on it when it is an IP
/// address (so a lane on 127.0.0.1 is not exposed on every interface); `localhost` means
/// 127.0.0.1.
pub fn run_argv(c: &ContainerSpec, host: &str) -> Vec<String> {
    let mut a: Vec<String> = vec![
        c.docker.display().to_string(),
        "run".into(),
        "-d".into(),
        "--name".into(),
        c.name.clone(),
    ];
    for (k, v) in &c.labels {
        a.push("--label".into());
        a.push(format!("{k}={v}"));
    }
    if !c.gpu_uuids.is_empty() {
        // docker reads --gpus as CSV: the quotes keep "device=A,B" one field.
        a.push("--gpus".into());
        a.push(format!("\"device={}\"", c.gpu_uuids.join(",")));
    }
    let bind = publish_host(host);
    for (h, ctr) in &c.ports {
        a.push("-p".into());
        a.push(match &bind {
            Some(ip) => format!("{ip}:{h}:{ctr}"),
            None => format!("{h}:{ctr}"),
        });
    }
    for v in &c.volumes {
        a.push("-v".into());
        a.push(v.clone());
    }
    for (k, _) in &c.env {
        a.push("-e".into());
        a.push(k.clone());
    }
    a.extend(c.run_args.iter().cloned());
    a.push(c.image.clone());
    a.extend(c.args.iter().cloned());
    a
}

fn publish_host(host: &str) -> Option<String> {
    if host.eq_ignore_ascii_case("localhost") {
        return Some("127.0.0.1".into());
    }
    match host.trim_matches(['[', ']']).parse::<IpAddr>() {
        Ok(IpAddr::V4(ip)) => Some(ip.to_string()),
        Ok(IpAddr::V6(ip)) => Some(format!("[{ip}]")),
        Err(_) => None,
    }
}

/// `docker stop -t SECONDS NAME` (the grace rounded up to whole seconds).
pub fn stop_argv(docker: &Path, name: &str, grace: Duration) -> Vec<String> {
    let secs = grace.as_millis().div_ceil(1000);
    vec![
        docker.display().to_string(),
        "stop".into(),
        "-t".into(),
        secs.to_string(),
        name.into(),
    ]
}

/// `docker rm -f NAME`.
pub fn rm_argv(docker: &Path, name: &str) -> Vec<String> {
    vec![
        docker.display().to_string(),
        "rm".into(),
        "-f".into(),
        name.into(),
    ]
}

/// `docker logs NAME` (the container's stdout and stderr).
pub fn logs_argv(docker: &Path, name: &str) -> Vec<String> {
    vec![docker.display().to_string(), "logs".into(), name.into()]
}

/// `docker inspect -f INSPECT_FORMAT NAME`.
pub fn inspect_argv(docker: &Path, name: &str) -> Vec<String> {
    vec![
        docker.display().to_string(),
        "inspect".into(),
        "-f".into(),
        INSPECT_FORMAT.into(),
        name.into(),
    ]
}

/// `docker inspect -f '{{json .Config.Labels}}' NAME`: the labels the ownership check reads.
pub fn labels_argv(docker: &Path, name: &str) -> Vec<String> {
    vec![
        docker.display().to_string(),
        "inspect".into(),
        "-f".into(),
        LABELS_FORMAT.into(),
        name.into(),
    ]
}

/// `docker inspect` format of the ownership check.
pub const LABELS_FORMAT: &str = "{{json .Config.Labels}}";

/// Whether `labels_json` (what [`labels_argv`] prints) carries every `owner` label with its
/// value. `Err` says which label is missing or different.
pub fn check_owner(labels_json: &str, owner: &[(String, String)]) -> Result<(), String> {
    let v: serde_json::Value = serde_json::from_str(labels_json.trim())
        .map_err(|_| format!("unreadable labels `{}`", labels_json.trim()))?;
    for (k, want) in owner {
        match v.get(k).and_then(|x| x.as_str()) {
            Some(got) if got == want => {}
            Some(got) => return Err(format!("label {k}={got}, not {want}")),
            None => return Err(format!("no label {k} (this arm's is {k}={want})")),
        }
    }
    Ok(())
}

/// A container's state as `docker inspect -f INSPECT_FORMAT` prints it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ContainerState {
    pub running: bool,
    pub exit_code: i32,
    pub oom_killed: bool,
}

/// Parses `true 0 false` (running, exit code, OOM-killed).
pub fn parse_inspect(out: &str) -> Option<ContainerState> {
    let mut f = out.split_whitespace();
    let running = f.next()?.parse::<bool>().ok()?;
    let exit_code = f.next()?.parse::<i32>().ok()?;
    let oom_killed = f.next()?.parse::<bool>().ok()?;
    Some(ContainerState {
        running,
        exit_code,
        oom_killed,
    })
}

struct CliOutput {
    ok: bool,
    status: String,
    stdout: String,
    stderr: String,
}

/// Runs a docker CLI argv (argv\[0\] is the CLI) with extra env, within `timeout`.
async fn cli(
    argv: &[String],
    env: &[(String, super::EnvVal)],
    timeout: Duration,
) -> Result<CliOutput, String> {
    let mut cmd = tokio::process::Command::new(&argv[0]);
    cmd.args(&argv[1..])
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true);
    for (k, v) in env {
        cmd.env(k, &v.value);
    }
    let child = cmd
        .spawn()
        .map_err(|e| format!("cannot run `{}`: {e}", argv[0]))?;
    match tokio::time::timeout(timeout, child.wait_with_output()).await {
        Ok(Ok(o)) => Ok(CliOutput {
            ok: o.status.success(),
            status: ExitInfo::from_status(o.status).to_string(),
            stdout: String::from_utf8_lossy(&o.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&o.stderr).into_owned(),
        }),
        Ok(Err(e)) => Err(format!("`{} {}` failed: {e}", argv[0], argv[1])),
        Err(_) => Err(format!(
            "`{} {}` did not finish within {:.0} s",
            argv[0],
            argv[1],
            timeout.as_secs_f64()
        )),
    }
}

async fn inspect(docker: &Path, name: &str) -> Result<ContainerState, String> {
    let o = cli(&inspect_argv(docker, name), &[], Duration::from_secs(20)).await?;
    if !o.ok {
        return Err(o.stderr.trim().to_string());
    }
    parse_inspect(&o.stdout)
        .ok_or_else(|| format!("unexpected docker inspect output: {}", o.stdout))
}

pub(super) async fn launch(
    lane: &LaneSpec,
    c: &ContainerSpec,
    identity: String,
    masker: Masker,
    started_ns: u64,
) -> Result<Running, LaunchFailure> {
    let fail = |msg: String| LaunchFailure::spawn_failed(&masker, &msg, started_ns);
    let (mut log, offset) = open_arm_log(&c.log_path, &masker, started_ns)?;
    let argv = run_argv(c, &lane.host);
    // `docker run -d` may pull the image first: allow the whole ready timeout.
    let out = cli(
        &argv,
        &c.env,
        lane.ready_timeout.max(Duration::from_secs(10)),
    )
    .await;
    let out = match out {
        Ok(o) => o,
        Err(e) => {
            let note = remove_if_owned(c).await;
            return Err(fail(format!("container arm {}: {e}{note}", c.name)));
        }
    };
    let _ = write!(
        log,
        "{}{}",
        masker.mask(&out.stdout),
        masker.mask(&out.stderr)
    );
    if !out.ok {
        let tail = super::logs::last_lines(&masker.mask(&out.stderr), super::LOG_TAIL_LINES);
        // Docker's reason, without its "Run 'docker run --help' for more information" hint.
        let last = tail
            .iter()
            .map(|l| l.trim())
            .filter(|l| !l.is_empty() && (!l.starts_with("Run '") || !l.contains("--help")))
            .collect::<Vec<_>>()
            .join(" ");
        // `docker run -d` creates the container before it starts it: one that could not start
        // (a missing entrypoint, a bad option) is left `Created`. It is removed when it is this
        // arm's; a name conflict with someone else's container leaves theirs alone.
        let note = remove_if_owned(c).await;
        return Err(fail(format!(
            "`docker run` for container {} failed ({}): {last}{note}",
            c.name, out.status
        ))
        .with_log_tail(tail));
    }
    Ok(Running {
        handle: super::Handle::Container(Handle {
            name: c.name.clone(),
            docker: c.docker.clone(),
            owner_labels: owner_labels(c),
        }),
        started_ns,
        started_wall: crate::clock::wall_rfc3339(),
        log_path: Some(c.log_path.clone()),
        log_offset: offset,
        target: lane.target(),
        identity,
        masker,
        exit: None,
    })
}

/// The `bakeoff.*` labels of a spec: what marks a container as this arm's.
fn owner_labels(c: &ContainerSpec) -> Vec<(String, String)> {
    c.labels
        .iter()
        .filter(|(k, _)| k.starts_with("bakeoff."))
        .cloned()
        .collect()
}

/// After a failed `docker run`: removes the container of that name when it carries this arm's
/// ownership labels. Returns a note for the failure message (empty when there was none).
async fn remove_if_owned(c: &ContainerSpec) -> String {
    let t = Duration::from_secs(20);
    let labels = match cli(&labels_argv(&c.docker, &c.name), &[], t).await {
        Ok(o) if o.ok => o.stdout,
        _ => return String::new(),
    };
    match check_owner(&labels, &owner_labels(c)) {
        Ok(()) => match cli(&rm_argv(&c.docker, &c.name), &[], Duration::from_secs(30)).await {
            Ok(o) if o.ok => "; the container it created was removed (docker rm -f)".into(),
            Ok(o) => format!("; `docker rm -f` failed: {}", o.stderr.trim()),
            Err(e) => format!("; {e}"),
        },
        Err(why) => format!(
            "; a container named {} that is not this arm's exists ({why}): left alone",
            c.name
        ),
    }
}

/// What a container arm holds: its name, the CLI that runs it, its ownership labels.
pub(super) struct Handle {
    pub(super) name: String,
    docker: std::path::PathBuf,
    /// The ownership labels (`bakeoff.*`) the container must carry before bakeoff stops or
    /// removes it.
    owner_labels: Vec<(String, String)>,
}

fn handle(running: &Running) -> Option<&Handle> {
    match &running.handle {
        super::Handle::Container(h) => Some(h),
        _ => None,
    }
}

fn names(running: &Running) -> (std::path::PathBuf, String) {
    match handle(running) {
        Some(h) => (h.docker.clone(), h.name.clone()),
        None => (std::path::PathBuf::from("docker"), String::new()),
    }
}

/// Polls `docker inspect` every 100 ms until the container is not running (or is gone).
pub(super) async fn wait_exit(running: &mut Running) -> ExitInfo {
    if let Some(e) = &running.exit {
        return e.clone();
    }
    let (docker, name) = names(running);
    loop {
        match inspect(&docker, &name).await {
            Ok(s) if !s.running => {
                let e = ExitInfo {
                    code: Some(s.exit_code),
                    signal: None,
                    oom_killed: s.oom_killed,
                };
                running.exit = Some(e.clone());
                return e;
            }
            Err(msg) if msg.contains("No such") => {
                let e = ExitInfo {
                    code: None,
                    signal: None,
                    oom_killed: false,
                };
                running.exit = Some(e.clone());
                return e;
            }
            _ => tokio::time::sleep(Duration::from_millis(100)).await,
        }
    }
}

pub(super) async fn stop(running: &mut Running, grace: Duration) -> StopFacts {
    let t0 = mono_ns();
    let (docker, name) = names(running);
    let mut detail = Vec::new();
    // Ownership first: a container of that name that is not this arm's (another campaign's, or
    // an operator's) is never stopped or removed.
    let owners = handle(running)
        .map(|h| h.owner_labels.clone())
        .unwrap_or_default();
    if !owners.is_empty() {
        let o = cli(&labels_argv(&docker, &name), &[], Duration::from_secs(20)).await;
        // Not readable (no such container, no daemon): the steps below find out and say so.
        if let Some(o) = o.ok().filter(|o| o.ok) {
            if let Err(why) = check_owner(&o.stdout, &owners) {
                detail.push(format!(
                    "container {name} is not this arm's ({why}): left alone, nothing stopped or removed"
                ));
                return super::process::finish_stop(
                    running,
                    StopHow::NotOwned,
                    t0,
                    false,
                    Vec::new(),
                    detail,
                )
                .await;
            }
        }
    }
    let state = inspect(&docker, &name).await;
    let how = match &state {
        Err(e) => {
            detail.push(format!("container {name} not found ({})", e.trim()));
            StopHow::AlreadyExited
        }
        Ok(s) if !s.running => {
            detail.push(format!(
                "container {name} had already exited (exit code {})",
                s.exit_code
            ));
            StopHow::AlreadyExited
        }
        Ok(_) => {
            let argv = stop_argv(&docker, &name, grace);
            let limit = grace + Duration::from_secs(30);
            match cli(&argv, &[], limit).await {
                Ok(o) if o.ok => detail.push(argv[1..].join(" ")),
                Ok(o) => detail.push(format!("`docker stop` failed: {}", o.stderr.trim())),
                Err(e) => detail.push(e),
            }
            match inspect(&docker, &name).await {
                Ok(s) if s.exit_code == 137 => StopHow::Sigkill,
                _ => StopHow::Sigterm,
            }
        }
    };
    if let Ok(s) = inspect(&docker, &name).await {
        if running.exit.is_none() || !s.running {
            running.exit = Some(ExitInfo {
                code: (!s.running).then_some(s.exit_code),
                signal: None,
                oom_killed: s.oom_killed,
            });
        }
        if let Some(p) = &running.log_path {
            if let Ok((log, _)) = open_log(p) {
                let log2 = log.try_clone();
                let mut cmd = tokio::process::Command::new(&docker);
                cmd.args(&logs_argv(&docker, &name)[1..])
                    .stdin(std::process::Stdio::null())
                    .stdout(log)
                    .kill_on_drop(true);
                if let Ok(l2) = log2 {
                    cmd.stderr(l2);
                }
                if let Ok(child) = cmd.spawn() {
                    let _ = tokio::time::timeout(Duration::from_secs(30), child.wait_with_output())
                        .await;
                    detail.push("docker logs appended to the log file".into());
                }
            }
        }
        match cli(&rm_argv(&docker, &name), &[], Duration::from_secs(30)).await {
            Ok(o) if o.ok => detail.push("docker rm -f".into()),
            Ok(o) => detail.push(format!("`docker rm -f` failed: {}", o.stderr.trim())),
            Err(e) => detail.push(e),
        }
    }
    let gone = inspect(&docker, &name).await.is_err();
    super::process::finish_stop(running, how, t0, gone, Vec::new(), detail).await
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lane::EnvVal;
    use std::path::PathBuf;

    fn spec() -> ContainerSpec {
        ContainerSpec {
            image: "vllm/vllm-openai:v0.11.0".into(),
            args: vec!["--model".into(), "Qwen/Qwen3-8B".into()],
            env: vec![
                ("HF_TOKEN".into(), EnvVal::secret("hf_supersecret")),
                ("VLLM_LOGGING_LEVEL".into(), EnvVal::literal("DEBUG")),
            ],
            gpu_uuids: vec!["GPU-aaa".into(), "GPU-bbb".into()],
            ports: vec![(8000, 8000)],
            volumes: vec!["/models:/models:ro".into()],
            labels: vec![("bakeoff.campaign".into(), "quant-2026".into())],
            run_args: vec!["--ipc=host".into(), "--shm-size=16g".into()],
            name: "bakeoff-quant-2026-arm-1".into(),
            log_path: PathBuf::from("/tmp/x.log"),
            docker: PathBuf::from("docker"),
        }
    }

    #[test]
    fn run_argv_shape() {
        let a = run_argv(&spec(), "127.0.0.1");
        assert_eq!(
            a,
            vec![
                "docker",
                "run",
                "-d",
                "--name",
                "bakeoff-quant-2026-arm-1",
                "--label",
                "bakeoff.campaign=quant-2026",
                "--gpus",
                "\"device=GPU-aaa,GPU-bbb\"",
                "-p",
                "127.0.0.1:8000:8000",
                "-v",
                "/models:/models:ro",
                "-e",
                "HF_TOKEN",
                "-e",
                "VLLM_LOGGING_LEVEL",
                "--ipc=host",
                "--shm-size=16g",
                "vllm/vllm-openai:v0.11.0",
                "--model",
                "Qwen/Qwen3-8B"
            ]
        );
        assert!(!a.join(" ").contains("hf_supersecret"));
        assert!(
            !a.join(" ").contains("DEBUG"),
            "values never on the command line"
        );
    }

    #[test]
    fn publish_hosts() {
        let mut s = spec();
        s.gpu_uuids.clear();
        let a = run_argv(&s, "gpu-host.example");
        assert!(a.contains(&"8000:8000".to_string()));
        assert!(!a.contains(&"--gpus".to_string()));
        assert!(run_argv(&s, "localhost").contains(&"127.0.0.1:8000:8000".to_string()));
        assert!(run_argv(&s, "::1").contains(&"[::1]:8000:8000".to_string()));
    }

    #[test]
    fn stop_and_inspect() {
        let d = Path::new("docker");
        assert_eq!(
            stop_argv(d, "n", Duration::from_millis(2500)),
            vec!["docker", "stop", "-t", "3", "n"]
        );
        assert_eq!(rm_argv(d, "n"), vec!["docker", "rm", "-f", "n"]);
        assert_eq!(logs_argv(d, "n"), vec!["docker", "logs", "n"]);
        assert_eq!(inspect_argv(d, "n")[3], INSPECT_FORMAT);
        assert_eq!(
            parse_inspect("false 137 true\n"),
            Some(ContainerState {
                running: false,
                exit_code: 137,
                oom_killed: true
            })
        );
        assert!(parse_inspect("true 0 false").unwrap().running);
        assert_eq!(parse_inspect("garbage"), None);
    }

    #[test]
    fn ownership_labels() {
        let owner = vec![
            ("bakeoff.campaign".to_string(), "c1".to_string()),
            ("bakeoff.arm".to_string(), "a".to_string()),
        ];
        let ours = r#"{"bakeoff.arm":"a","bakeoff.campaign":"c1","team":"x"}"#;
        assert_eq!(check_owner(ours, &owner), Ok(()));
        let other = r#"{"bakeoff.arm":"a","bakeoff.campaign":"c2"}"#;
        assert!(check_owner(other, &owner)
            .unwrap_err()
            .contains("bakeoff.campaign=c2, not c1"));
        assert!(check_owner("null", &owner)
            .unwrap_err()
            .contains("no label bakeoff.campaign"));
        assert!(check_owner("true 0 false", &owner).is_err());
        assert_eq!(labels_argv(Path::new("docker"), "n")[3], LABELS_FORMAT);
    }
}
