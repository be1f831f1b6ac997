//! Lanes with real processes: the reference engine (`bakeoff engine`) and small python3 fixtures.

use bakeoff::lane::{
    self, argv_env_hash, process::group_members, Cause, EnvVal, LaneSpec, LaunchSpec, ProcessSpec,
    ReferenceSpec, StopHow,
};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crate::support::{free_port, BIN};

fn lane_on(port: u16, ready_timeout: Duration, grace: Duration) -> LaneSpec {
    LaneSpec {
        ready_timeout,
        stop_grace: grace,
        ..LaneSpec::new("127.0.0.1", port)
    }
}

fn reference(dir: &Path, profile: &str) -> LaunchSpec {
    let p = dir.join("profile.toml");
    std::fs::write(&p, profile).unwrap();
    LaunchSpec::Reference(ReferenceSpec {
        profile: p,
        log_path: dir.join("arm.log"),
        bin: Some(PathBuf::from(BIN)),
    })
}

fn python(dir: &Path, script: &str, env: Vec<(String, EnvVal)>) -> LaunchSpec {
    LaunchSpec::Process(ProcessSpec {
        argv: vec!["python3".into(), "-u".into(), "-c".into(), script.into()],
        env,
        cwd: Some(dir.to_path_buf()),
        log_path: dir.join("arm.log"),
    })
}

/// Live (non-zombie) process?
fn alive(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(s) => {
            let state = s[s.rfind(')').unwrap() + 1..].split_whitespace().next();
            !matches!(state, Some("Z") | Some("X"))
        }
        Err(_) => false,
    }
}

async fn wait_for_log(path: &Path, needle: &str) {
    let start = Instant::now();
    while !std::fs::read_to_string(path)
        .unwrap_or_default()
        .contains(needle)
    {
        assert!(
            start.elapsed() < Duration::from_secs(20),
            "{needle:?} never appeared in {}",
            path.display()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reference_arm_ready_reports_identity_and_stops_on_sigterm() {
    let d = tempfile::tempdir().unwrap();
    let port = free_port();
    let lane = lane_on(port, Duration::from_secs(30), Duration::from_secs(10));
    let spec = reference(
        d.path(),
        "model = \"m\"\nttft_ms = 20\ndecode_tok_s = 100\ncontext_tokens = 4096\nstartup_ms = 300\n",
    );
    let mut running = lane::launch(&lane, &spec).await.expect("launch");
    let pid = running.pid().unwrap();
    assert_eq!(running.identity, spec.identity(&lane));
    let facts = lane::wait_ready(&mut running, &lane).await.expect("ready");
    assert_eq!(facts.model_ids, vec!["m"]);
    assert_eq!(facts.context_tokens, Some(4096));
    assert_eq!(facts.context_source.as_deref(), Some("max_model_len"));
    assert!(facts.ready_ms >= 300.0, "{facts:?}");
    assert!(facts.polls >= 2, "503 while loading, then 200: {facts:?}");
    assert!(!lane::port_free("127.0.0.1", port));

    let stop = lane::stop(running, lane.stop_grace).await;
    assert_eq!(stop.how, StopHow::Sigterm, "{stop:?}");
    assert_eq!(stop.exit.as_ref().unwrap().code, Some(0), "{stop:?}");
    assert!(
        stop.group_gone && stop.remaining_pids.is_empty(),
        "{stop:?}"
    );
    assert_eq!(stop.port_free, Some(true));
    assert!(group_members(pid).is_empty());
    assert!(lane::port_free("127.0.0.1", port));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn startup_oom_is_compatibility_out_of_memory_within_2s() {
    let d = tempfile::tempdir().unwrap();
    let lane = lane_on(
        free_port(),
        Duration::from_secs(120),
        Duration::from_secs(5),
    );
    let spec = reference(
        d.path(),
        "model = \"m\"\nstartup_ms = 100\nfail_at_startup = \"CUDA out of memory: tried to allocate 2 GiB\"\n",
    );
    let t0 = Instant::now();
    let mut running = lane::launch(&lane, &spec).await.expect("launch");
    let f = lane::wait_ready(&mut running, &lane).await.unwrap_err();
    let took = t0.elapsed();
    assert!(took < Duration::from_secs(2), "took {took:?}: {f:?}");
    assert_eq!(f.class, bakeoff::evidence::FailureClass::Compatibility);
    assert_eq!(f.cause, Cause::OutOfMemory, "{f:?}");
    assert!(f.elapsed_ms < 2000.0);
    assert_eq!(f.exit.as_ref().unwrap().code, Some(1));
    assert_eq!(
        f.oom_line.as_deref(),
        Some("CUDA out of memory: tried to allocate 2 GiB")
    );
    assert!(
        f.log_tail
            .iter()
            .any(|l| l.contains("CUDA out of memory: tried to allocate 2 GiB")),
        "{:?}",
        f.log_tail
    );
    assert!(f.message.contains("exit code 1"), "{}", f.message);
    assert!(f.message.contains("out of memory"), "{}", f.message);
    let json = serde_json::to_value(&f).unwrap();
    assert_eq!(json["cause"], "out-of-memory");
    assert_eq!(json["class"], "compatibility");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn startup_exit_without_oom_is_exited_with_its_code_and_last_lines() {
    let d = tempfile::tempdir().unwrap();
    let log = d.path().join("arm.log");
    std::fs::write(&log, "a line from an earlier launch\n").unwrap();
    let lane = lane_on(
        free_port(),
        Duration::from_secs(120),
        Duration::from_secs(5),
    );
    let spec = python(
        d.path(),
        "import sys\nfor i in range(100): print('line', i)\nprint('error: unknown flag --foo', file=sys.stderr)\nsys.exit(3)",
        vec![],
    );
    let t0 = Instant::now();
    let mut running = lane::launch(&lane, &spec).await.expect("launch");
    let f = lane::wait_ready(&mut running, &lane).await.unwrap_err();
    assert!(t0.elapsed() < Duration::from_secs(5), "{:?}", t0.elapsed());
    assert_eq!(f.cause, Cause::Exited, "{f:?}");
    assert_eq!(f.exit.as_ref().unwrap().code, Some(3));
    assert_eq!(f.log_tail.len(), lane::LOG_TAIL_LINES);
    assert_eq!(f.log_tail[0], "line 61");
    assert_eq!(f.log_tail[38], "line 99");
    assert_eq!(f.log_tail[39], "error: unknown flag --foo");
    assert!(f.message.contains("exit code 3"), "{}", f.message);
    assert!(f.message.contains("unknown flag --foo"), "{}", f.message);
    // This launch's output only; the file itself keeps the earlier launch too (appended).
    assert!(!f.log_tail.iter().any(|l| l.contains("earlier launch")));
    assert!(std::fs::read_to_string(&log)
        .unwrap()
        .starts_with("a line from an earlier launch\n"));
    assert!(f.cleanup.as_ref().unwrap().group_gone);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn never_ready_is_killed_at_its_timeout_without_orphans() {
    let d = tempfile::tempdir().unwrap();
    let port = free_port();
    let lane = lane_on(port, Duration::from_millis(1500), Duration::from_secs(2));
    let spec = reference(d.path(), "model = \"m\"\nstartup_ms = 60000\n");
    let t0 = Instant::now();
    let mut running = lane::launch(&lane, &spec).await.expect("launch");
    let pid = running.pid().unwrap();
    let f = lane::wait_ready(&mut running, &lane).await.unwrap_err();
    let took = t0.elapsed();
    assert_eq!(f.cause, Cause::Timeout, "{f:?}");
    assert!(
        took >= Duration::from_millis(1500) && took < Duration::from_secs(6),
        "{took:?}"
    );
    assert!(
        f.message.contains("HTTP 503"),
        "last probe named: {}",
        f.message
    );
    let c = f.cleanup.as_ref().unwrap();
    // The engine honours SIGTERM.
    assert_eq!(c.how, StopHow::Sigterm, "{c:?}");
    assert!(c.group_gone, "{c:?}");
    assert!(group_members(pid).is_empty());
    assert!(!alive(pid));
    assert!(lane::port_free("127.0.0.1", port));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn timeout_kills_the_whole_process_group() {
    let d = tempfile::tempdir().unwrap();
    let lane = lane_on(
        free_port(),
        Duration::from_millis(1500),
        Duration::from_secs(1),
    );
    // A parent that starts a grandchild and never listens.
    let spec = python(
        d.path(),
        "import subprocess, time\np = subprocess.Popen(['sleep', '300'])\nprint('grandchild', p.pid, flush=True)\ntime.sleep(300)",
        vec![],
    );
    let mut running = lane::launch(&lane, &spec).await.expect("launch");
    let pid = running.pid().unwrap();
    let f = lane::wait_ready(&mut running, &lane).await.unwrap_err();
    assert_eq!(f.cause, Cause::Timeout, "{f:?}");
    let grandchild: u32 = f
        .log_tail
        .iter()
        .find_map(|l| l.strip_prefix("grandchild "))
        .unwrap_or_else(|| panic!("no grandchild line in {:?}", f.log_tail))
        .trim()
        .parse()
        .unwrap();
    let c = f.cleanup.as_ref().unwrap();
    assert!(c.group_gone, "{c:?}");
    assert!(!alive(pid), "the parent is gone");
    assert!(
        !alive(grandchild),
        "the grandchild {grandchild} is gone too"
    );
    assert!(group_members(pid).is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_ignored_gets_sigkill_after_the_grace() {
    let d = tempfile::tempdir().unwrap();
    let lane = lane_on(
        free_port(),
        Duration::from_secs(60),
        Duration::from_millis(700),
    );
    let spec = python(
        d.path(),
        "import signal, time\nsignal.signal(signal.SIGTERM, signal.SIG_IGN)\nprint('ignoring SIGTERM', flush=True)\ntime.sleep(600)",
        vec![],
    );
    let running = lane::launch(&lane, &spec).await.expect("launch");
    let pid = running.pid().unwrap();
    wait_for_log(&d.path().join("arm.log"), "ignoring SIGTERM").await;
    let stop = lane::stop(running, lane.stop_grace).await;
    assert_eq!(stop.how, StopHow::Sigkill, "{stop:?}");
    assert_eq!(stop.exit.as_ref().unwrap().signal, Some(libc::SIGKILL));
    assert!(stop.took_ms >= 700.0 && stop.took_ms < 5000.0, "{stop:?}");
    assert!(stop.group_gone, "{stop:?}");
    assert!(stop.detail.contains("SIGKILL"), "{}", stop.detail);
    assert!(!alive(pid));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn port_in_use_fails_before_anything_starts() {
    let d = tempfile::tempdir().unwrap();
    let taken = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = taken.local_addr().unwrap().port();
    let lane = lane_on(port, Duration::from_secs(60), Duration::from_secs(1));
    let marker = d.path().join("started");
    let spec = python(
        d.path(),
        &format!("open({:?}, 'w').write('x')", marker.display().to_string()),
        vec![],
    );
    let f = lane::launch(&lane, &spec).await.unwrap_err();
    assert_eq!(f.cause, Cause::PortInUse);
    assert_eq!(f.class, bakeoff::evidence::FailureClass::Compatibility);
    assert!(
        f.message
            .contains(&format!("127.0.0.1:{port} is already in use")),
        "{}",
        f.message
    );
    assert!(f.elapsed_ms < 500.0);
    std::thread::sleep(Duration::from_millis(300));
    assert!(!marker.exists(), "nothing was started");
    assert!(
        !d.path().join("arm.log").exists(),
        "not even the log opened"
    );
    assert!(!lane::port_free("127.0.0.1", port));
    drop(taken);
    assert!(lane::wait_port_free("127.0.0.1", port, Duration::from_secs(1)).await);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn missing_program_is_spawn_failed() {
    let d = tempfile::tempdir().unwrap();
    let lane = lane_on(free_port(), Duration::from_secs(60), Duration::from_secs(1));
    let spec = LaunchSpec::Process(ProcessSpec {
        argv: vec![
            "/nonexistent/engine-server".into(),
            "--port".into(),
            "1".into(),
        ],
        env: vec![],
        cwd: None,
        log_path: d.path().join("arm.log"),
    });
    let f = lane::launch(&lane, &spec).await.unwrap_err();
    assert_eq!(f.cause, Cause::SpawnFailed);
    assert!(
        f.message.contains("/nonexistent/engine-server"),
        "{}",
        f.message
    );
    let empty = LaunchSpec::Process(ProcessSpec {
        argv: vec![],
        env: vec![],
        cwd: None,
        log_path: d.path().join("arm.log"),
    });
    assert_eq!(
        lane::launch(&lane, &empty).await.unwrap_err().cause,
        Cause::SpawnFailed
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn secret_env_value_never_appears_in_anything_returned() {
    const SECRET: &str = "sk-test-5ecret-value-77";
    let d = tempfile::tempdir().unwrap();
    let lane = lane_on(free_port(), Duration::from_secs(60), Duration::from_secs(1));
    let spec = python(
        d.path(),
        "import os, sys\nt = os.environ['API_TOKEN']\nprint('token is', t)\nprint('CUDA out of memory while holding', t, file=sys.stderr)\nsys.exit(2)",
        vec![
            ("API_TOKEN".into(), EnvVal::secret(SECRET)),
            ("LOG_LEVEL".into(), EnvVal::literal("debug")),
        ],
    );
    let mut running = lane::launch(&lane, &spec).await.expect("launch");
    let f = lane::wait_ready(&mut running, &lane).await.unwrap_err();
    assert_eq!(f.cause, Cause::OutOfMemory, "{f:?}");
    assert!(
        f.log_tail.contains(&"token is ***".to_string()),
        "{:?}",
        f.log_tail
    );
    assert_eq!(
        f.oom_line.as_deref(),
        Some("CUDA out of memory while holding ***")
    );
    let rendered = [
        format!("{f:?}"),
        f.to_string(),
        serde_json::to_string(&f).unwrap(),
        format!("{spec:?}"),
        spec.describe(&lane).to_string(),
        running.masked_log(),
        running.log_tail(40).join("\n"),
        format!("{running:?}"),
    ];
    for r in &rendered {
        assert!(!r.contains(SECRET), "secret leaked into: {r}");
    }
    let described = spec.describe(&lane);
    assert_eq!(described["env"]["API_TOKEN"], "***");
    assert_eq!(described["env"]["LOG_LEVEL"], "debug");
    assert_eq!(described["secret_env"], serde_json::json!(["API_TOKEN"]));
    // The child did get the real value (it printed it into its own raw log, which is why only
    // `masked_log` goes into a bundle).
    assert!(std::fs::read_to_string(d.path().join("arm.log"))
        .unwrap()
        .contains(SECRET));
}

#[test]
fn identity_hash_covers_argv_and_literals_but_not_secret_values() {
    let argv: Vec<String> = vec!["vllm".into(), "serve".into(), "m".into()];
    let env = |secret: &str, level: &str| {
        vec![
            ("HF_TOKEN".to_string(), EnvVal::secret(secret)),
            ("LEVEL".to_string(), EnvVal::literal(level)),
        ]
    };
    let h = argv_env_hash(&argv, &env("a", "x"));
    assert_eq!(h.len(), 64);
    assert_eq!(h, argv_env_hash(&argv, &env("rotated", "x")));
    assert_ne!(h, argv_env_hash(&argv, &env("a", "y")));
    let mut reversed = env("a", "x");
    reversed.reverse();
    assert_eq!(
        h,
        argv_env_hash(&argv, &reversed),
        "env order does not matter"
    );
    assert_ne!(h, argv_env_hash(&argv[..2], &env("a", "x")));
    // Secret vs literal with the same value are different identities.
    let lit = vec![
        ("HF_TOKEN".to_string(), EnvVal::literal("a")),
        ("LEVEL".to_string(), EnvVal::literal("x")),
    ];
    assert_ne!(h, argv_env_hash(&argv, &lit));
    // No argument boundary ambiguity.
    assert_ne!(
        argv_env_hash(&["ab".into(), "c".into()], &[]),
        argv_env_hash(&["a".into(), "bc".into()], &[])
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn endpoint_arm_is_polled_but_not_managed() {
    let d = tempfile::tempdir().unwrap();
    let port = free_port();
    let lane = lane_on(port, Duration::from_secs(30), Duration::from_secs(5));
    let engine = reference(
        d.path(),
        "model = \"served-elsewhere\"\ncontext_tokens = 2048\n",
    );
    let mut incumbent = lane::launch(&lane, &engine).await.expect("launch");
    lane::wait_ready(&mut incumbent, &lane)
        .await
        .expect("ready");

    // Another lane (its port is irrelevant) pointing at the running server by URL.
    let other = lane_on(free_port(), Duration::from_secs(5), Duration::from_secs(1));
    let spec = LaunchSpec::Endpoint {
        url: format!("http://127.0.0.1:{port}/v1"),
        tls: Default::default(),
    };
    let mut ep = lane::launch(&other, &spec).await.expect("endpoint launch");
    let facts = lane::wait_ready(&mut ep, &other).await.expect("ready");
    assert_eq!(facts.model_ids, vec!["served-elsewhere"]);
    assert_eq!(facts.context_tokens, Some(2048));
    let s = lane::stop(ep, other.stop_grace).await;
    assert_eq!(s.how, StopHow::NotManaged);
    assert!(!lane::port_free("127.0.0.1", port), "still serving");

    let s = lane::stop(incumbent, lane.stop_grace).await;
    assert_eq!(s.how, StopHow::Sigterm);
    // Nothing listens now: the endpoint is not ready and times out without killing anything.
    let mut ep = lane::launch(&other, &spec).await.expect("endpoint launch");
    let f = lane::wait_ready(&mut ep, &other).await.unwrap_err();
    assert_eq!(f.cause, Cause::Timeout);
    assert!(f.cleanup.is_none());
    assert!(f.message.contains("cannot connect"), "{}", f.message);
}
