//! A real engine through a lane: llama.cpp's `llama-server` (SmolLM2-135M on the CPU) launched as
//! a process arm, its identity read at readiness, its `/metrics` diffed around a request, and a
//! bad flag reported as `exited` with its log lines. Needs `scripts/engine-setup.sh`.

use crate::support::real_engine;

use bakeoff::client::control::post_json;
use bakeoff::lane::{self, Cause, LaneSpec, LaunchSpec, ProcessSpec, StopHow};
use bakeoff::telemetry::engine_metrics::{diff, scrape};
use std::time::Duration;

fn llama_server(dir: &std::path::Path, port: u16, extra: &[&str]) -> LaunchSpec {
    let env = real_engine::engines_env();
    let mut argv: Vec<String> = vec![
        env["LLAMA_SERVER"].clone(),
        "-m".into(),
        env["SMOLLM2_GGUF"].clone(),
        "--host".into(),
        "127.0.0.1".into(),
        "--port".into(),
        port.to_string(),
        "-c".into(),
        "2048".into(),
        "-np".into(),
        "1".into(),
        "-t".into(),
        "2".into(),
        "-a".into(),
        "smollm2-135m".into(),
    ];
    argv.extend(extra.iter().map(|s| s.to_string()));
    LaunchSpec::Process(ProcessSpec {
        argv,
        env: vec![],
        cwd: None,
        log_path: dir.join("llama-server.log"),
    })
}

fn lane_on(port: u16) -> LaneSpec {
    LaneSpec {
        ready_timeout: Duration::from_secs(120),
        stop_grace: Duration::from_secs(10),
        ..LaneSpec::new("127.0.0.1", port)
    }
}

// One real server at a time: the guard is held on the test's own thread (block_on), not a worker.
#[allow(clippy::await_holding_lock)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn llama_server_arm_ready_identity_metrics_and_stop() {
    let _g = crate::support::exclusive();
    let d = tempfile::tempdir().unwrap();
    let port = real_engine::free_port();
    let lane = lane_on(port);
    let spec = llama_server(d.path(), port, &["--metrics"]);
    let mut running = lane::launch(&lane, &spec).await.expect("launch");
    let pid = running.pid().unwrap();
    let facts = match lane::wait_ready(&mut running, &lane).await {
        Ok(f) => f,
        Err(f) => panic!("{f:#?}"),
    };
    assert_eq!(facts.model_ids, vec!["smollm2-135m"]);
    assert_eq!(facts.context_tokens, Some(2048), "{facts:?}");
    assert_eq!(facts.context_source.as_deref(), Some("meta.n_ctx"));
    assert_eq!(facts.n_ctx_train, Some(8192));

    let target = lane.target();
    let before = scrape(&target, "/metrics", Duration::from_secs(10))
        .await
        .unwrap();
    assert!(before
        .metrics
        .values
        .contains_key("llamacpp:prompt_tokens_total"));
    let (status, body) = post_json(
        &target,
        "/v1/completions",
        &serde_json::json!({"model": "smollm2-135m", "prompt": "The capital of France is",
                            "max_tokens": 8, "temperature": 0, "ignore_eos": true}),
        None,
        Duration::from_secs(60),
    )
    .await
    .unwrap();
    assert_eq!(status, 200, "{body}");
    let after = scrape(&target, "/metrics", Duration::from_secs(10))
        .await
        .unwrap();
    let dlt = diff(&before.metrics, &after.metrics);
    assert_eq!(
        dlt.counter_sum("llamacpp:tokens_predicted_total"),
        body["usage"]["completion_tokens"].as_f64().unwrap(),
        "{dlt:?}"
    );

    let stop = lane::stop(running, lane.stop_grace).await;
    assert_eq!(stop.how, StopHow::Sigterm, "{stop:?}");
    assert!(stop.group_gone, "{stop:?}");
    assert_eq!(stop.port_free, Some(true));
    assert!(lane::process::group_members(pid).is_empty());
}

// One real server at a time: the guard is held on the test's own thread (block_on), not a worker.
#[allow(clippy::await_holding_lock)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn llama_server_bad_flag_is_exited_with_its_log() {
    let _g = crate::support::exclusive();
    let d = tempfile::tempdir().unwrap();
    let port = real_engine::free_port();
    let lane = lane_on(port);
    let spec = llama_server(d.path(), port, &["--no-such-flag"]);
    let t0 = std::time::Instant::now();
    let mut running = lane::launch(&lane, &spec).await.expect("launch");
    let f = lane::wait_ready(&mut running, &lane).await.unwrap_err();
    assert!(t0.elapsed() < Duration::from_secs(10), "{:?}", t0.elapsed());
    assert_eq!(f.cause, Cause::Exited, "{f:#?}");
    assert_ne!(f.exit.as_ref().unwrap().code, Some(0));
    assert!(
        f.log_tail.iter().any(|l| l.contains("--no-such-flag")),
        "{:?}",
        f.log_tail
    );
}
