//! Engine `/metrics` snapshots around a request, against the reference engine run in a lane.

use bakeoff::client::control::post_json;
use bakeoff::lane::{self, LaneSpec, LaunchSpec, ReferenceSpec};
use bakeoff::telemetry::engine_metrics::{diff, scrape};
use std::path::PathBuf;
use std::time::Duration;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn snapshots_before_and_after_a_request_show_its_counts() {
    let d = tempfile::tempdir().unwrap();
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let lane = LaneSpec {
        ready_timeout: Duration::from_secs(30),
        stop_grace: Duration::from_secs(5),
        ..LaneSpec::new("127.0.0.1", port)
    };
    let profile = d.path().join("p.toml");
    std::fs::write(
        &profile,
        "model = \"m\"\nttft_ms = 5\ndecode_tok_s = 2000\n",
    )
    .unwrap();
    let spec = LaunchSpec::Reference(ReferenceSpec {
        profile,
        log_path: d.path().join("arm.log"),
        bin: Some(PathBuf::from(env!("CARGO_BIN_EXE_bakeoff"))),
    });
    let mut running = lane::launch(&lane, &spec).await.unwrap();
    lane::wait_ready(&mut running, &lane).await.unwrap();
    let target = lane.target();

    let before = scrape(&target, "/metrics", Duration::from_secs(5))
        .await
        .unwrap();
    let (status, body) = post_json(
        &target,
        "/v1/completions",
        &serde_json::json!({"model": "m", "prompt": "Hello there", "max_tokens": 12,
                            "ignore_eos": true, "temperature": 0}),
        None,
        Duration::from_secs(10),
    )
    .await
    .unwrap();
    assert_eq!(status, 200, "{body}");
    let after = scrape(&target, "/metrics", Duration::from_secs(5))
        .await
        .unwrap();
    assert!(after.mono_ns > before.mono_ns);
    assert_eq!(after.url, format!("http://127.0.0.1:{port}/metrics"));

    let key = "vllm:num_requests_running{model_name=\"m\"}";
    assert_eq!(after.metrics.values[key], 0.0, "{:?}", after.metrics.values);
    let dlt = diff(&before.metrics, &after.metrics);
    assert_eq!(
        dlt.counter_sum("vllm:request_success_total"),
        1.0,
        "{dlt:?}"
    );
    assert_eq!(
        dlt.counter_sum("vllm:generation_tokens_total"),
        12.0,
        "{dlt:?}"
    );
    assert_eq!(
        dlt.counter_sum("vllm:prompt_tokens_total"),
        body["usage"]["prompt_tokens"].as_f64().unwrap()
    );
    assert!(dlt.gauges.contains_key(key));
    assert!(dlt.resets.is_empty());

    let e = scrape(&target, "/nope", Duration::from_secs(5))
        .await
        .unwrap_err();
    assert!(e.contains("HTTP 404"), "{e}");
    lane::stop(running, lane.stop_grace).await;
    let e = scrape(&target, "/metrics", Duration::from_secs(2))
        .await
        .unwrap_err();
    assert!(e.contains("cannot connect"), "{e}");
}
