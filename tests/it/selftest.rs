//! `bakeoff selftest`: the client's timing checked against the reference engine's emission log.
//! Correctness only (every event matched, kernel stamps in use, the floor measured); the timing
//! targets themselves are benchmarks (docs/benchmarks.md), not unit tests.

use std::process::Command;

use crate::support::BIN;

#[test]
fn selftest_matches_every_event_and_uses_kernel_stamps() {
    // Up to 16 streams on both cores: never beside a timing test.
    let _g = crate::support::shared();
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("selftest.json");
    let out = Command::new(BIN)
        .args(["selftest", "--levels", "1,16", "--waves", "2"])
        .args(["--max-tokens", "16", "--json"])
        .arg(&json)
        .output()
        .unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "{text}");
    assert!(
        text.contains("floor: a bare epoll+recvmsg reader"),
        "{text}"
    );
    let v: serde_json::Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    let levels = v["levels"].as_array().unwrap();
    assert_eq!(levels.len(), 2);
    for l in levels {
        let c = l["concurrency"].as_u64().unwrap();
        assert_eq!(l["requests_ok"].as_u64().unwrap(), 2 * c, "{l}");
        assert_eq!(l["requests_failed"], 0, "{l}");
        assert_eq!(l["unmatched_requests"], 0, "{l}");
        // 16 tokens, a role chunk, finish, usage and [DONE] per request.
        assert!(l["chunks"].as_u64().unwrap() >= 2 * c * 16, "{l}");
        // Every read after the first moments is stamped by the kernel.
        assert!(l["kernel_stamped_reads"].as_f64().unwrap() > 0.9, "{l}");
        // Arrival is never before emission by more than clock-conversion noise.
        assert!(l["added_delay_ms"]["min"].as_f64().unwrap() > -0.05, "{l}");
        assert!(l["client_cpu_us_per_chunk"].as_f64().unwrap() > 0.0, "{l}");
        // The engine's own view: TTFT from its log (declared 20 ms + prefill), a decode rate,
        // and its CPU (what the two cores also had to carry).
        assert!(l["engine_ttft_ms"]["p50"].as_f64().unwrap() >= 20.0, "{l}");
        assert!(
            l["engine_decode_tok_s"]["p50"].as_f64().unwrap() > 0.0,
            "{l}"
        );
        assert!(l["engine_cpu_us_per_chunk"].as_f64().unwrap() > 0.0, "{l}");
    }
    assert!(levels[0]["floor_cpu_sys_us_per_chunk"].is_null());
    let floor = levels[1]["floor_cpu_user_us_per_chunk"].as_f64().unwrap()
        + levels[1]["floor_cpu_sys_us_per_chunk"].as_f64().unwrap();
    assert!(floor > 0.0, "{}", levels[1]);
}

#[test]
fn selftest_refuses_bad_levels() {
    let out = Command::new(BIN)
        .args(["selftest", "--levels", "0"])
        .output()
        .unwrap();
    // Refused before the engine starts: exit 2 (README, "Exit codes").
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--levels"));
}

#[test]
fn selftest_port_fixes_the_engine_port_and_a_busy_one_is_named() {
    // Up to 16 streams on both cores: never beside a timing test.
    let _g = crate::support::shared();
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("selftest.json");
    let out = Command::new(BIN)
        .args(["selftest", "--levels", "1", "--waves", "2", "--no-floor"])
        .args(["--max-tokens", "8", "--port", &port.to_string(), "--json"])
        .arg(&json)
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let v: serde_json::Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    assert_eq!(v["engine_url"], format!("http://127.0.0.1:{port}"), "{v}");
    assert_eq!(v["levels"][0]["requests_ok"], 2);

    // The port taken by someone else: one clear error naming it.
    let busy = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = busy.local_addr().unwrap().port();
    let out = Command::new(BIN)
        .args(["selftest", "--levels", "1", "--waves", "2", "--no-floor"])
        .args(["--port", &port.to_string()])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(err.contains(&format!("is port {port} free?")), "{err}");
}
