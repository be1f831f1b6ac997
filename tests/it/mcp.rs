//! `bakeoff mcp` driven by the official Rust SDK's client over a child process (the protocol as a
//! client sees it): the tools listed with their schemas, a plan, refused inputs (bounds, a path
//! leaving the root, a broken campaign file), and one reference-engine campaign run through
//! MCP alone: plan → start → watch → stop mid-arm (the incumbent restored) → resume → verdict
//! → verify, with the bundle's files as resources; and a two-lane campaign started and watched
//! lane by lane to its verdict.

use crate::support::campaign::{cleanup, listener_model, wait_for_file, Camp, Small, BIN};
use crate::support::json_doc::schema_errors;
use rmcp::model::{CallToolRequestParams, CallToolResult, ReadResourceRequestParams};
use rmcp::service::RunningService;
use rmcp::transport::{ConfigureCommandExt, TokioChildProcess};
use rmcp::{RoleClient, ServiceExt};
use serde_json::{json, Value};
use std::path::Path;
use std::time::{Duration, Instant};

const FAST: &str = "ttft_ms = 5\ndecode_tok_s = 2000\ncontext_tokens = 4096";

type Client = RunningService<RoleClient, ()>;

/// `bakeoff mcp --root ROOT` with the lane locks under ROOT and `env` (a test pause).
async fn connect(root: &Path, env: &[(&str, String)]) -> Client {
    let env: Vec<(String, String)> = env
        .iter()
        .map(|(k, v)| (k.to_string(), v.clone()))
        .collect();
    let root = root.to_path_buf();
    let t = TokioChildProcess::new(tokio::process::Command::new(BIN).configure(|c| {
        c.arg("mcp")
            .arg("--root")
            .arg(&root)
            .env("BAKEOFF_LOCK_DIR", root.join("locks"))
            .env_remove("BAKEOFF_TEST_PAUSE_AT")
            .envs(env.iter().map(|(k, v)| (k, v)));
    }))
    .unwrap();
    ().serve(t).await.unwrap()
}

async fn call(c: &Client, tool: &str, args: Value) -> CallToolResult {
    let Value::Object(m) = args else {
        panic!("arguments must be an object")
    };
    c.call_tool(CallToolRequestParams::new(tool.to_string()).with_arguments(m))
        .await
        .unwrap_or_else(|e| panic!("{tool}: {e}"))
}

/// The tool's structured result; the test fails on a tool error.
async fn ok(c: &Client, tool: &str, args: Value) -> Value {
    let r = call(c, tool, args).await;
    assert_ne!(r.is_error, Some(true), "{tool}: {}", text(&r));
    r.structured_content
        .unwrap_or_else(|| panic!("{tool}: no structured content"))
}

/// The tool's error text; the test fails when the tool succeeded.
async fn refused(c: &Client, tool: &str, args: Value) -> String {
    let r = call(c, tool, args).await;
    assert_eq!(r.is_error, Some(true), "{tool} was not refused: {r:?}");
    text(&r)
}

fn text(r: &CallToolResult) -> String {
    r.content
        .iter()
        .filter_map(|c| c.as_text().map(|t| t.text.clone()))
        .collect::<Vec<_>>()
        .join("\n")
}

fn small(t: &Camp) -> std::path::PathBuf {
    t.profile("inc", FAST);
    t.profile("cand", FAST);
    t.write_small(
        "mcp",
        &Small::default(),
        &[("inc", "incumbent"), ("cand", "candidate")],
    )
}

/// The async body under the test lock (held outside the runtime: never across an await).
fn under_lock(body: impl std::future::Future<Output = ()>) {
    let _g = crate::support::shared();
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
        .block_on(body);
}

#[test]
fn tools_are_listed_typed_and_refuse_bad_inputs_with_the_cli_words() {
    under_lock(tools_and_refusals());
}

async fn tools_and_refusals() {
    let t = Camp::new();
    small(&t);
    let c = connect(t.dir.path(), &[]).await;
    let tools = c.list_all_tools().await.unwrap();
    let mut names: Vec<&str> = tools.iter().map(|t| t.name.as_ref()).collect();
    names.sort();
    assert_eq!(
        names,
        [
            "bench", "compare", "gate", "plan", "resume", "start", "stop", "verdict", "verify",
            "watch"
        ]
    );
    for tool in &tools {
        assert!(
            tool.output_schema.is_some(),
            "{} has no output schema",
            tool.name
        );
    }
    // The bounds are in the schema an agent reads.
    let bench = tools.iter().find(|t| t.name == "bench").unwrap();
    let req = &bench.input_schema["properties"]["requests"];
    assert_eq!(
        (&req["minimum"], &req["maximum"]),
        (&json!(1), &json!(200)),
        "{req}"
    );

    let p = ok(&c, "plan", json!({"campaign": "campaign.toml"})).await;
    assert_eq!(p["arms"], json!(["inc", "cand"]));
    assert_eq!(
        p["bundle"],
        t.bundle()
            .canonicalize()
            .unwrap_or(t.bundle())
            .display()
            .to_string()
    );
    assert!(
        p["dry_run"]
            .as_str()
            .unwrap()
            .contains("bakeoff dry run of campaign mcp"),
        "{p:#}"
    );
    assert!(p["steps"].as_array().unwrap().len() > 4, "{p:#}");

    // Refused, each naming the field and the fix, nothing started.
    let e = refused(
        &c,
        "start",
        json!({"campaign": "campaign.toml", "output": "../elsewhere"}),
    )
    .await;
    assert!(
        e.starts_with("output: ../elsewhere resolves to")
            && e.contains("outside the server's folder"),
        "{e}"
    );
    std::os::unix::fs::symlink("/tmp", t.path("tmp-link")).unwrap();
    let e = refused(
        &c,
        "start",
        json!({"campaign": "campaign.toml", "output": "tmp-link/out"}),
    )
    .await;
    assert!(e.contains("outside the server's folder"), "{e}");
    assert!(!t.bundle().exists());
    std::fs::write(
        t.path("bad.toml"),
        "[campaign]\nid = \"x\"\noutput = \"o\"\n[lane]\nport = 70000\n",
    )
    .unwrap();
    let e = refused(&c, "plan", json!({"campaign": "bad.toml"})).await;
    assert!(e.starts_with("the campaign file has"), "{e}");
    assert!(e.contains("bad.toml:5: lane.port"), "{e}");
    let e = refused(
        &c,
        "bench",
        json!({"url": "http://127.0.0.1:1", "requests": 1000}),
    )
    .await;
    assert_eq!(e, "requests 1000: must be from 1 to 200");
    let e = refused(
        &c,
        "bench",
        json!({"url": "http://127.0.0.1:1", "api_key_env": "BAKEOFF_MCP_TEST_UNSET"}),
    )
    .await;
    assert!(
        e.starts_with("api_key_env BAKEOFF_MCP_TEST_UNSET: the environment variable"),
        "{e}"
    );
    let e = refused(
        &c,
        "gate",
        json!({"url": "http://127.0.0.1:1", "out": "/tmp/gates"}),
    )
    .await;
    assert!(e.starts_with("out: /tmp/gates resolves to"), "{e}");
    let e = refused(&c, "watch", json!({"run": "run-9"})).await;
    assert!(e.contains("no run run-9"), "{e}");
    let e = refused(&c, "watch", json!({"run": "run-9", "wait_s": 9999})).await;
    assert!(e.starts_with("wait_s 9999: must be from 0 to 600"), "{e}");
    // A wrong type is the protocol's invalid-params error, before the tool runs.
    let r = c
        .call_tool(
            CallToolRequestParams::new("bench").with_arguments(
                json!({"url": "x", "requests": "many"})
                    .as_object()
                    .unwrap()
                    .clone(),
            ),
        )
        .await;
    assert!(
        r.is_err() || r.as_ref().unwrap().is_error == Some(true),
        "{r:?}"
    );
    c.cancel().await.unwrap();
}

/// Polls `watch` until `done` holds of its answer.
async fn watch_until(c: &Client, run: &str, what: &str, done: impl Fn(&Value) -> bool) -> Value {
    let t0 = Instant::now();
    loop {
        let w = ok(c, "watch", json!({"run": run, "wait_s": 0.2})).await;
        if done(&w) {
            return w;
        }
        assert!(
            t0.elapsed() < Duration::from_secs(120),
            "never {what}: {w:#}"
        );
    }
}

fn valid(doc: &Value) {
    let errors = schema_errors(doc);
    assert!(errors.is_empty(), "{errors:#?}\n{doc:#}");
}

#[test]
fn a_campaign_planned_started_watched_stopped_resumed_and_read_through_mcp_alone() {
    under_lock(campaign_through_mcp());
}

async fn campaign_through_mcp() {
    let t = Camp::new();
    small(&t);
    let inc = t.start_incumbent("inc");
    let marker = t.path("paused");
    let pause = format!("arm-ready@cand:{}", marker.display());
    let c = connect(t.dir.path(), &[("BAKEOFF_TEST_PAUSE_AT", pause)]).await;
    let plan = ok(
        &c,
        "plan",
        json!({"campaign": "campaign.toml", "output": "out"}),
    )
    .await;
    let total = plan["steps"].as_array().unwrap().len();

    let s = ok(
        &c,
        "start",
        json!({"campaign": "campaign.toml", "output": "out"}),
    )
    .await;
    assert_eq!(s["state"], "running", "{s:#}");
    let run = s["run"].as_str().unwrap().to_string();
    // The candidate serves, its measurement not begun (the test pause): watch says so.
    let w = watch_until(&c, &run, "in arm cand", |w| {
        w["current_step"]["arm"] == "cand" && w["state"] == "running"
    })
    .await;
    assert_eq!(w["steps_total"], total, "{w:#}");
    wait_for_file(&marker, Duration::from_secs(60));
    let arms: Vec<(&str, &str)> = w["arms"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| (a["id"].as_str().unwrap(), a["status"].as_str().unwrap()))
        .collect();
    assert_eq!(arms, [("inc", "completed"), ("cand", "pending")], "{w:#}");

    // stop = SIGINT: the arm stops, the incumbent is restored, the bundle sealed (exit 130).
    let st = ok(&c, "stop", json!({"run": run, "wait_s": 0})).await;
    assert_eq!(st["run"], run.as_str());
    std::fs::remove_file(&marker).unwrap();
    let end = ok(&c, "watch", json!({"run": run, "wait_s": 120})).await;
    assert_eq!(
        (&end["state"], &end["exit_code"]),
        (&json!("exited"), &json!(130)),
        "{end:#}"
    );
    let d = &end["document"];
    valid(d);
    assert!(
        d["interrupted"]
            .as_str()
            .unwrap()
            .starts_with("interrupted by SIGINT during cand/"),
        "{d:#}"
    );
    assert_eq!(
        listener_model(t.port).as_deref(),
        Some("inc"),
        "the incumbent serves again"
    );

    // Resume: the candidate runs again (its pause once more), the campaign completes.
    let r = ok(&c, "resume", json!({"bundle": "out"})).await;
    let run2 = r["run"].as_str().unwrap().to_string();
    assert_ne!(run2, run);
    // A relaunched candidate may reach its pause again: let it go each time.
    let t0 = Instant::now();
    let end = loop {
        let _ = std::fs::remove_file(&marker);
        let w = ok(&c, "watch", json!({"run": run2, "wait_s": 0.3})).await;
        if w["state"] == "exited" {
            break w;
        }
        assert!(t0.elapsed() < Duration::from_secs(120), "{w:#}");
    };
    assert_eq!(end["exit_code"], 0, "{end:#}");
    assert_eq!(end["steps_done"], total, "{end:#}");
    valid(&end["document"]);

    let v = ok(&c, "verdict", json!({"bundle": "out"})).await;
    valid(&v);
    assert_eq!(
        (&v["complete"], &v["exit_code"]),
        (&json!(true), &json!(0)),
        "{v:#}"
    );
    assert_eq!(v["root_digest"], end["document"]["root_digest"]);
    let f = ok(
        &c,
        "verify",
        json!({"bundle": "out", "digest": v["root_digest"]}),
    )
    .await;
    valid(&f);
    assert_eq!(f["ok"], true, "{f:#}");
    assert_eq!(listener_model(t.port).as_deref(), Some("inc"));

    // The bundle's files are resources; a file outside the root is not.
    let res = c.list_all_resources().await.unwrap();
    let result = res
        .iter()
        .find(|r| r.name == "out/campaign-result.json")
        .unwrap_or_else(|| panic!("{res:?}"));
    let read = c
        .read_resource(ReadResourceRequestParams::new(result.uri.clone()))
        .await
        .unwrap();
    let body = serde_json::to_value(&read.contents[0]).unwrap();
    let r: Value = serde_json::from_str(body["text"].as_str().unwrap()).unwrap();
    assert_eq!(r["complete"], true);
    let e = c
        .read_resource(ReadResourceRequestParams::new("file:///etc/passwd"))
        .await
        .unwrap_err();
    assert!(e.to_string().contains("outside the server's folder"), "{e}");
    c.cancel().await.unwrap();
    cleanup(&t.bundle(), Some(inc), t.port);
}

#[test]
fn a_two_lane_campaign_runs_through_mcp_with_each_lanes_progress() {
    under_lock(two_lanes_through_mcp());
}

/// A campaign over two lanes (docs/fleet.md) started through MCP: `watch` gives each lane run's
/// progress from its folder (two lanes, their steps summing to the run's) and each arm's status
/// from its lane before the merge; the run completes, the verdict and `verify` read the bundle.
async fn two_lanes_through_mcp() {
    let t = Camp::new();
    let slow_start = format!("startup_ms = 600\n{FAST}");
    for p in ["inc", "a", "b"] {
        t.profile(p, &slow_start);
    }
    let f = t.write_small(
        "mcp-lanes",
        &Small::default(),
        &[("inc", "incumbent"), ("a", "candidate"), ("b", "candidate")],
    );
    let text = std::fs::read_to_string(&f).unwrap();
    let p1 = crate::support::free_port();
    std::fs::write(&f, crate::fleet::as_lanes(&text, &[("g1", p1)])).unwrap();
    let inc = t.start_incumbent("inc");
    let c = connect(t.dir.path(), &[]).await;
    let plan = ok(
        &c,
        "plan",
        json!({"campaign": "campaign.toml", "output": "out"}),
    )
    .await;
    assert!(
        plan["dry_run"].as_str().unwrap().contains("lane g1"),
        "{plan:#}"
    );
    let s = ok(
        &c,
        "start",
        json!({"campaign": "campaign.toml", "output": "out"}),
    )
    .await;
    let run = s["run"].as_str().unwrap().to_string();
    // Both lanes under way: each has its folder's progress, and a step running.
    let w = watch_until(&c, &run, "both lanes running", |w| {
        w["lanes"]
            .as_array()
            .is_some_and(|l| l.len() == 2 && l.iter().all(|x| x["current_step"].is_object()))
            || w["state"] == "exited"
    })
    .await;
    assert_eq!(
        w["state"], "running",
        "the run ended before both lanes ran: {w:#}"
    );
    let lanes = w["lanes"].as_array().unwrap();
    assert_eq!(
        (lanes[0]["folder"].as_str(), lanes[1]["folder"].as_str()),
        (Some("lanes/g0"), Some("lanes/g1")),
        "{w:#}"
    );
    let sum: u64 = lanes
        .iter()
        .map(|l| l["steps_total"].as_u64().unwrap())
        .sum();
    assert_eq!(w["steps_total"], sum, "{w:#}");
    assert!(w["current_step"].is_null(), "{w:#}");
    let end = ok(&c, "watch", json!({"run": run, "wait_s": 120})).await;
    assert_eq!(
        (&end["state"], &end["exit_code"]),
        (&json!("exited"), &json!(0)),
        "{end:#}"
    );
    assert_eq!(end["steps_done"], end["steps_total"], "{end:#}");
    let arms: Vec<(&str, &str)> = end["arms"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| (a["id"].as_str().unwrap(), a["status"].as_str().unwrap()))
        .collect();
    assert_eq!(
        arms,
        [("inc", "completed"), ("a", "completed"), ("b", "completed")],
        "{end:#}"
    );
    valid(&end["document"]);
    let v = ok(&c, "verdict", json!({"bundle": "out"})).await;
    valid(&v);
    assert_eq!(v["complete"], true, "{v:#}");
    let f = ok(&c, "verify", json!({"bundle": "out"})).await;
    assert_eq!(f["ok"], true, "{f:#}");
    assert_eq!(listener_model(t.port).as_deref(), Some("inc"));
    assert_eq!(
        listener_model(p1),
        None,
        "nothing serves the qualification lane"
    );
    c.cancel().await.unwrap();
    cleanup(&t.bundle(), Some(inc), t.port);
}
