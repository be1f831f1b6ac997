//! `bakeoff mcp` driven by an independent client: the official Python MCP SDK (`mcp`, installed
//! in the engines' venv by `scripts/engine-setup.sh`) runs `scripts/mcp-client-check.py`, which
//! plans, starts, watches, reads the verdict of and verifies a reference-engine campaign over
//! stdio. The Rust SDK's client drives the same server in `tests/it/mcp.rs`.

use crate::support::campaign::{cleanup, listener_model, Camp, Small, BIN};
use crate::support::real_engine::engines_env;
use std::process::Command;

#[test]
fn the_python_sdk_plans_runs_watches_and_reads_a_campaign() {
    let _g = crate::support::shared();
    let py = engines_env()["XLLAMACPP_PYTHON"].clone();
    let t = Camp::new();
    for arm in ["inc", "cand"] {
        t.profile(
            arm,
            "ttft_ms = 5\ndecode_tok_s = 2000\ncontext_tokens = 4096",
        );
    }
    t.write_small(
        "py-mcp",
        &Small::default(),
        &[("inc", "incumbent"), ("cand", "candidate")],
    );
    let inc = t.start_incumbent("inc");
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/scripts/mcp-client-check.py");
    let o = Command::new(&py)
        .arg(script)
        .args([BIN, t.dir.path().to_str().unwrap(), "campaign.toml", "out"])
        .env("BAKEOFF_LOCK_DIR", t.path("locks"))
        .output()
        .unwrap();
    let restored = listener_model(t.port);
    cleanup(&t.bundle(), Some(inc), t.port);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        o.status.success(),
        "{err}\n(is the mcp package missing? run scripts/engine-setup.sh)"
    );
    let seen: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(
        seen["tools"],
        serde_json::json!([
            "bench", "compare", "gate", "plan", "resume", "start", "stop", "verdict", "verify",
            "watch"
        ])
    );
    assert_eq!(seen["exit_code"], 0, "{seen:#}");
    assert_eq!(seen["steps_done"], seen["plan_steps"], "{seen:#}");
    assert_eq!(
        (
            &seen["complete"],
            &seen["verify_ok"],
            &seen["resource_complete"]
        ),
        (&true.into(), &true.into(), &true.into()),
        "{seen:#}"
    );
    assert_eq!(seen["root_digest"].as_str().map(str::len), Some(64));
    assert_eq!(
        restored.as_deref(),
        Some("inc"),
        "the incumbent serves again"
    );
}
