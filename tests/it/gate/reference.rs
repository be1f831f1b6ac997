//! Gates against the reference engine (`bakeoff engine`): every declared tool fault fails the tools
//! gate with its reason, retrieval beyond `retrieval_effective_tokens` fails and reports the actual
//! prompt tokens, a target beyond the served context is refused without a request, reasoning that
//! exhausts the budget is classified as such, and HTTP 500s or dropped streams are failed
//! observations while the artifacts are still written.

use crate::support::reference;

use bakeoff::client::control::get_json;
use bakeoff::client::Target;
use bakeoff::gates::suite::from_bytes;
use bakeoff::gates::{
    self, Check, GateContext, GateResult, QualityCheck, QualitySuite, RetrievalCheck, Status,
    ToolSuite, ToolVariant, ToolsCheck,
};
use reference::Engine;
use std::path::Path;
use std::time::Duration;

fn repo(p: &str) -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(p)
}

fn profile(extra: &str) -> String {
    format!("model = \"ref\"\nttft_ms = 1\ndecode_tok_s = 5000\ncontext_tokens = 16384\n{extra}\n")
}

fn ctx(e: &Engine) -> GateContext {
    let mut c = GateContext::new(Target::parse(&e.url).unwrap(), "ref");
    c.timeout = Duration::from_secs(30);
    c.stall = Duration::from_secs(2);
    c
}

fn run(c: &GateContext, checks: &[Check]) -> Vec<GateResult> {
    gates::run_blocking(c, checks).unwrap()
}

fn tools(suite: &str, batch: usize, variants: &[ToolVariant]) -> Check {
    let s = ToolSuite::load(&repo(suite)).unwrap();
    Check::Tools(ToolsCheck::new(s, batch, variants.to_vec()).unwrap())
}

fn quality(toml: &str, reps: u32) -> QualityCheck {
    let f = from_bytes(Path::new("test-quality.toml"), toml.as_bytes()).unwrap();
    QualityCheck::new(QualitySuite::from_file(f).unwrap(), reps)
}

fn emissions(e: &Engine) -> Vec<serde_json::Value> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let t = Target::parse(&e.url).unwrap();
    let (_, v) = rt
        .block_on(get_json(
            &t,
            "/debug/emissions",
            None,
            Duration::from_secs(5),
        ))
        .unwrap();
    v["requests"].as_array().cloned().unwrap_or_default()
}

#[test]
fn preflight_and_tools_pass_on_a_correct_engine() {
    let e = Engine::start(&profile(""));
    let c = ctx(&e);
    let r = run(
        &c,
        &[
            Check::Smoke,
            Check::Json,
            Check::Streaming,
            tools("suites/tools.toml", 20, &ToolVariant::ALL),
            tools("suites/tools-fewshot.toml", 20, &ToolVariant::ALL),
        ],
    );
    for g in &r {
        assert_eq!(g.status, Status::Passed, "{}: {}", g.gate, g.reason);
    }
    let t = &r[3];
    assert_eq!((t.passed, t.total), (60, 60), "{}", t.reason);
    assert_eq!(t.details["variants"]["plain"]["concurrency"], 20);
    // Every observation records the request (tools, sampling) and the response.
    let o = &t.observations[0];
    let req = &o.exchanges[0].request;
    assert!(req["tools"].as_array().unwrap().len() >= 2);
    assert_eq!(req["temperature"], 0.0);
    assert_eq!(req["seed"], 0);
    assert!(req["max_tokens"].as_u64().is_some());
    assert_eq!(
        o.exchanges[0].response.finish_reason.as_deref(),
        Some("tool_calls")
    );
    // Round trips have two exchanges: the call and the answer after the tool result.
    let rt = t
        .observations
        .iter()
        .find(|o| o.variant.as_deref() == Some("round-trip"))
        .unwrap();
    assert_eq!(rt.exchanges.len(), 2);
    let msgs = rt.exchanges[1].request["messages"].as_array().unwrap();
    assert_eq!(msgs.last().unwrap()["role"], "tool");
    assert!(r[4].suite_sha256.as_ref().unwrap().len() == 64);
}

#[test]
fn drop_required_arg_fails_naming_the_argument() {
    let e = Engine::start(&profile("tool_behavior = \"drop_required_arg\""));
    let r = run(
        &ctx(&e),
        &[tools("suites/tools-fewshot.toml", 4, &[ToolVariant::Plain])],
    );
    let t = &r[0];
    assert_eq!(t.status, Status::Failed);
    assert_eq!((t.passed, t.total), (0, 4));
    for o in &t.observations {
        assert_eq!(o.reason, "missing required string argument: zip", "{o:?}");
        assert_eq!(o.class.as_deref(), Some("tool-call"));
    }
    assert!(t.reason.starts_with("0/4"), "{}", t.reason);
    assert!(
        t.reason
            .contains("missing required string argument: zip (×4)"),
        "{}",
        t.reason
    );
}

#[test]
fn malformed_arguments_and_ignored_tools_fail_with_their_reasons() {
    let e = Engine::start(&profile("tool_behavior = \"malformed_arguments\""));
    let r = run(
        &ctx(&e),
        &[tools(
            "suites/tools.toml",
            5,
            &[ToolVariant::Plain, ToolVariant::Streaming],
        )],
    );
    assert_eq!(r[0].status, Status::Failed);
    assert_eq!(r[0].passed, 0);
    for o in &r[0].observations {
        assert!(
            o.reason.starts_with("arguments are not valid JSON: {"),
            "{}",
            o.reason
        );
    }
    let e = Engine::start(&profile("tool_behavior = \"ignore_tools\""));
    let r = run(
        &ctx(&e),
        &[tools("suites/tools-fewshot.toml", 4, &ToolVariant::ALL)],
    );
    assert_eq!(r[0].status, Status::Failed);
    assert_eq!((r[0].passed, r[0].total), (0, 12));
    for o in &r[0].observations {
        assert!(
            o.reason
                .contains("no tool call returned (finish_reason stop)"),
            "{}",
            o.reason
        );
    }
}

#[test]
fn retrieval_is_exact_within_the_effective_length_and_fails_beyond_it() {
    let e = Engine::start(&profile("retrieval_effective_tokens = 3000"));
    let c = ctx(&e);
    let ok = RetrievalCheck::new(2500, 3, vec![0.1, 0.5, 0.9], 11, 32, None).unwrap();
    let bad = RetrievalCheck::new(4000, 2, vec![], 11, 32, None).unwrap();
    let r = run(&c, &[Check::Retrieval(ok), Check::Retrieval(bad)]);
    assert_eq!(r[0].status, Status::Passed, "{}", r[0].reason);
    assert_eq!(
        r[0].details["actual_prompt_tokens"],
        serde_json::json!([2500, 2500, 2500])
    );
    assert_eq!(r[0].details["strategy"], "server-tokenize");
    let b = &r[1];
    assert_eq!(b.status, Status::Failed);
    assert_eq!((b.passed, b.total), (0, 2));
    for o in &b.observations {
        assert_eq!(o.class.as_deref(), Some("wrong-answer"));
        assert!(
            o.reason.contains("at 4000 actual prompt tokens"),
            "{}",
            o.reason
        );
        assert_eq!(o.details["actual_prompt_tokens"], 4000);
        assert_eq!(
            o.exchanges[0]
                .response
                .usage
                .as_ref()
                .unwrap()
                .prompt_tokens,
            Some(4000)
        );
    }
    assert!(
        b.reason.contains("actual prompt tokens 4000, 4000"),
        "{}",
        b.reason
    );
    // The needles and their values come from the recorded seed.
    assert_eq!(b.details["seed"], 11);
    assert_eq!(b.details["needles"].as_array().unwrap().len(), 2);
}

#[test]
fn retrieval_with_a_local_tokenizer_is_never_silently_under_filled() {
    // A tokenizer that is not the engine's: the prompt is sized wrong and the endpoint's usage
    // shows it; the gate fails the observation as under- or over-filled instead of accepting it.
    let dir = tempfile::tempdir().unwrap();
    let tok = dir.path().join("tokenizer.json");
    std::fs::write(
        &tok,
        r#"{"version":"1.0","truncation":null,"padding":null,"added_tokens":[],"normalizer":null,
           "pre_tokenizer":{"type":"Whitespace"},"post_processor":null,"decoder":null,
           "model":{"type":"WordLevel","vocab":{"[UNK]":0},"unk_token":"[UNK]"}}"#,
    )
    .unwrap();
    let e = Engine::start(&profile(""));
    let check = RetrievalCheck::new(1200, 1, vec![0.5], 3, 16, Some(tok)).unwrap();
    let r = run(&ctx(&e), &[Check::Retrieval(check)]);
    assert_eq!(r[0].status, Status::Failed, "{}", r[0].reason);
    let o = &r[0].observations[0];
    assert!(
        matches!(o.class.as_deref(), Some("under-filled" | "over-filled")),
        "{o:?}"
    );
    assert!(o.reason.contains("the target is 1200"), "{}", o.reason);
}

#[test]
fn retrieval_beyond_the_served_context_is_refused_without_a_request() {
    let e = Engine::start("model = \"ref\"\nttft_ms = 1\ncontext_tokens = 2048\n");
    let check = RetrievalCheck::new(4000, 1, vec![], 0, 32, None).unwrap();
    let r = run(&ctx(&e), &[Check::Retrieval(check.clone())]);
    assert_eq!(r[0].status, Status::Failed);
    assert_eq!(r[0].total, 0);
    assert!(
        r[0].reason.starts_with("refused, nothing sent"),
        "{}",
        r[0].reason
    );
    assert!(
        r[0].reason
            .contains("2048 tokens (/v1/models max_model_len)"),
        "{}",
        r[0].reason
    );
    assert!(emissions(&e).is_empty(), "a request was sent");
    // --context-tokens wins over what the endpoint says.
    let mut c = ctx(&e);
    c.context_tokens = Some(1000);
    let small = RetrievalCheck::new(1500, 1, vec![], 0, 32, None).unwrap();
    let r = run(&c, &[Check::Retrieval(small)]);
    assert!(
        r[0].reason.contains("1000 tokens (--context-tokens)"),
        "{}",
        r[0].reason
    );
}

#[test]
fn quality_classes_are_kept_apart() {
    let suite = r#"
kind = "quality"
max_tokens = 6
[[items]]
id = "right"
prompt = "Reply with exactly: blue"
expect = { exact = "blue" }
[[items]]
id = "wrong"
prompt = "Reply with exactly: yes"
expect = { one_of = ["no"] }
[[items]]
id = "truncated"
prompt = "Reply with exactly: one two three four five six seven eight"
expect = { contains_all = ["eight"] }
"#;
    let e = Engine::start(&profile(""));
    let r = run(&ctx(&e), &[Check::Quality(quality(suite, 3))]);
    let q = &r[0];
    assert_eq!(q.status, Status::Failed);
    assert!(
        q.reason.starts_with("1/3 stable, 3/9 attempts"),
        "{}",
        q.reason
    );
    assert_eq!(q.details["failure_classes"]["wrong-answer"], 3);
    assert_eq!(
        q.details["failure_classes"]["truncated-after-visible-output"],
        3
    );
    assert_eq!(q.suite_sha256.as_deref().map(str::len), Some(64));
    // Attempts carry distinct seeds, recorded in each request.
    let seeds: Vec<u64> = q
        .observations
        .iter()
        .filter(|o| o.item.as_deref() == Some("right"))
        .map(|o| o.exchanges[0].request["seed"].as_u64().unwrap())
        .collect();
    assert_eq!(seeds, vec![0, 1, 2]);

    // Reasoning that exhausts the budget is its own class, not a wrong answer; headroom fixes it.
    let e = Engine::start(&profile("reasoning_tokens = 40"));
    let one = "kind = \"quality\"\nmax_tokens = 8\n[[items]]\nid = \"r\"\nprompt = \"Reply with exactly: blue\"\nexpect = { exact = \"blue\" }\n";
    let r = run(&ctx(&e), &[Check::Quality(quality(one, 2))]);
    assert_eq!(r[0].status, Status::Failed);
    for o in &r[0].observations {
        assert_eq!(
            o.class.as_deref(),
            Some("reasoning-budget-exhausted"),
            "{o:?}"
        );
    }
    let mut q = quality(one, 2);
    q.reasoning_headroom = Some(64);
    let r = run(&ctx(&e), &[Check::Quality(q)]);
    assert_eq!(r[0].status, Status::Passed, "{}", r[0].reason);
    assert_eq!(r[0].observations[0].exchanges[0].request["max_tokens"], 72);
    assert!(
        r[0].observations[0].exchanges[0]
            .response
            .reasoning_chars
            .unwrap()
            > 0
    );
}

#[test]
fn http_500_is_a_failed_observation_and_artifacts_are_still_written() {
    let e = Engine::start(&profile("error_rate = 1.0"));
    let c = ctx(&e);
    let q = quality(
        "kind = \"quality\"\n[[items]]\nid = \"a\"\nprompt = \"Reply with exactly: x\"\nexpect = { exact = \"x\" }\n",
        1,
    );
    let r = run(
        &c,
        &[
            Check::Smoke,
            Check::Json,
            Check::Streaming,
            tools("suites/tools-fewshot.toml", 2, &ToolVariant::ALL),
            Check::Retrieval(RetrievalCheck::new(600, 1, vec![], 0, 16, None).unwrap()),
            Check::Quality(q),
        ],
    );
    for g in &r {
        assert_eq!(g.status, Status::Failed, "{}", g.gate);
        assert!(g.reason.contains("HTTP 500"), "{}: {}", g.gate, g.reason);
    }
    for o in r.iter().flat_map(|g| &g.observations) {
        assert_eq!(o.class.as_deref(), Some("request-error"), "{o:?}");
        assert!(
            o.reason.contains("simulated internal error"),
            "{}",
            o.reason
        );
    }
    let dir = tempfile::tempdir().unwrap();
    let paths = gates::write_artifacts(dir.path(), &r).unwrap();
    assert_eq!(paths.len(), 6);
    let v: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.path().join("gate-tools.json")).unwrap())
            .unwrap();
    assert_eq!(v["status"], "failed");
    assert_eq!(
        v["observations"][0]["exchanges"][0]["response"]["status"],
        500
    );
    assert_eq!(v["bakeoff_version"], bakeoff::VERSION);
}

#[test]
fn dropped_and_stalled_streams_are_failed_observations() {
    // A stream that stops after two events and never ends: the stall limit cuts it.
    let e = Engine::start(&profile("stall_after_chunks = 2"));
    let r = run(
        &ctx(&e),
        &[
            Check::Streaming,
            tools("suites/tools-fewshot.toml", 2, &[ToolVariant::Streaming]),
        ],
    );
    assert_eq!(r[0].status, Status::Failed);
    assert!(r[0].reason.contains("stall"), "{}", r[0].reason);
    assert!(
        r[1].observations.iter().all(|o| o.reason.contains("stall")),
        "{}",
        r[1].reason
    );
    // The engine crashes half way through the first answer: the stream is cut before [DONE].
    let e = Engine::start(&profile("crash_after_requests = 1"));
    let r = run(&ctx(&e), &[Check::Streaming, Check::Smoke]);
    assert_eq!(r[0].status, Status::Failed);
    // A cut stream is `incomplete` (closed before [DONE]) or `io` (reset), depending on the kernel.
    let cut = [
        "before data: [DONE]",
        "Connection reset",
        "closed the connection",
    ];
    assert!(
        r[0].reason.starts_with("request failed: "),
        "{}",
        r[0].reason
    );
    assert!(
        cut.iter().any(|c| r[0].reason.contains(c)),
        "{}",
        r[0].reason
    );
    assert_eq!(r[1].status, Status::Failed);
    // The next request finds the engine gone (refused) or dying (reset).
    assert!(
        r[1].reason.starts_with("request failed: "),
        "{}",
        r[1].reason
    );
}
