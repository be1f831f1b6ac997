//! Gates against a real llama.cpp server (xllamacpp) running SmolLM2-135M-Instruct on the CPU.
//! The engines are installed by scripts/engine-setup.sh (see tests/support/real_engine.rs); these
//! tests are never skipped. Sampling: temperature 0, seed 0. Cost on 2 cores: about a minute.

use crate::support::real_engine;

use bakeoff::client::Target;
use bakeoff::gates::retrieval::{self, Needle};
use bakeoff::gates::{
    self, Check, GateContext, GateResult, RetrievalCheck, Status, ToolSuite, ToolVariant,
    ToolsCheck, Verdict,
};
use real_engine::{RealEngine, RealServer, ServerOpts};
use std::path::Path;
use std::time::{Duration, Instant};

/// One real server at a time in this binary: two on 2 cores would slow each other down.
use crate::support::exclusive as serial;

fn ctx(s: &RealServer) -> GateContext {
    let mut c = GateContext::new(Target::parse(&s.base_url).unwrap(), "smollm2-135m");
    c.timeout = Duration::from_secs(600);
    c.stall = Duration::from_secs(300);
    c
}

fn fewshot() -> ToolSuite {
    ToolSuite::load(&Path::new(env!("CARGO_MANIFEST_DIR")).join("suites/tools-fewshot.toml"))
        .unwrap()
}

fn tools(batch: usize, variants: &[ToolVariant]) -> Check {
    Check::Tools(ToolsCheck::new(fewshot(), batch, variants.to_vec()).unwrap())
}

fn run(c: &GateContext, checks: &[Check]) -> Vec<GateResult> {
    let t0 = Instant::now();
    let r = gates::run_blocking(c, checks).unwrap();
    eprint!("{}", gates::table(&r));
    eprintln!("({:.1} s)", t0.elapsed().as_secs_f64());
    r
}

#[test]
fn fewshot_tools_pass_20_of_20_at_concurrency_20_with_the_tool_template() {
    let _g = serial();
    // llama-server: the same llama.cpp tool-call path, about 4x faster on this CPU than the
    // xllamacpp wheel (187 s against about 50 s for this test); xllamacpp's tool calls are
    // exercised by the real campaign (its incumbent serves with the tool template).
    let server = RealServer::start(
        RealEngine::LlamaServer,
        ServerOpts {
            tools_template: true,
            ..ServerOpts::default()
        },
    );
    let c = ctx(&server);
    // The plain batch at concurrency 20; the streaming and round-trip variants in a smaller batch
    // (they need to be exercised, not repeated 20 times on 2 CPU cores).
    let r = run(
        &c,
        &[
            tools(20, &[ToolVariant::Plain]),
            tools(4, &[ToolVariant::Streaming, ToolVariant::RoundTrip]),
            Check::Json,
            Check::Streaming,
        ],
    );
    let plain = &r[0];
    assert_eq!((plain.passed, plain.total), (20, 20), "{}", plain.reason);
    assert_eq!(plain.status, Status::Passed);
    assert_eq!(plain.details["variants"]["plain"]["concurrency"], 20);
    for o in &plain.observations {
        let call = &o.exchanges[0].response.tool_calls[0];
        assert_eq!(call.name, "get_forecast");
    }
    let sr = &r[1];
    for v in ["streaming", "round-trip"] {
        let obs: Vec<_> = sr
            .observations
            .iter()
            .filter(|o| o.variant.as_deref() == Some(v))
            .collect();
        assert_eq!(obs.len(), 4, "{v}");
        for o in obs {
            assert_eq!(o.verdict, Verdict::Pass, "{v}: {}", o.reason);
        }
    }
    let stream = sr
        .observations
        .iter()
        .find(|o| o.variant.as_deref() == Some("streaming"))
        .unwrap();
    assert_eq!(
        stream.exchanges[0].response.finish_reason.as_deref(),
        Some("tool_calls")
    );
    assert_eq!(stream.exchanges[0].response.done, Some(true));
    let rt = sr
        .observations
        .iter()
        .find(|o| o.variant.as_deref() == Some("round-trip"))
        .unwrap();
    assert_eq!(
        rt.exchanges.len(),
        2,
        "the call and the answer after the tool result"
    );
    // Grammar-constrained JSON and a plain stream with usage work on llama.cpp.
    assert_eq!(r[2].status, Status::Passed, "{}", r[2].reason);
    assert_eq!(r[3].status, Status::Passed, "{}", r[3].reason);
}

#[test]
fn tools_fail_with_the_models_own_template_because_no_call_is_returned() {
    let _g = serial();
    let server = RealServer::start(RealEngine::XLlamaCpp, ServerOpts::default());
    let r = run(&ctx(&server), &[tools(4, &[ToolVariant::Plain])]);
    let t = &r[0];
    assert_eq!(t.status, Status::Failed);
    assert_eq!((t.passed, t.total), (0, 4));
    for o in &t.observations {
        assert!(
            o.reason.starts_with("no tool call returned"),
            "{}",
            o.reason
        );
        assert_eq!(o.class.as_deref(), Some("tool-call"));
    }
    assert!(t.reason.contains("no tool call returned"), "{}", t.reason);
}

#[test]
fn retrieval_reports_the_servers_prompt_tokens_and_its_verdict_matches_the_answer() {
    let _g = serial();
    // -c 8192 -np 2: 4,096 tokens a slot.
    let server = RealServer::start(RealEngine::XLlamaCpp, ServerOpts::default());
    let c = ctx(&server);
    let fits = RetrievalCheck::new(1500, 2, vec![0.25, 0.75], 0, 24, None).unwrap();
    let beyond = RetrievalCheck::new(5000, 1, vec![], 0, 24, None).unwrap();
    let r = run(&c, &[Check::Retrieval(fits), Check::Retrieval(beyond)]);
    let g = &r[0];
    assert_eq!(g.details["strategy"], "server-tokenize");
    assert_eq!(g.details["served_context"]["tokens"], 4096);
    assert_eq!(g.total, 2);
    let needles: Vec<Needle> =
        serde_json::from_value::<Vec<serde_json::Value>>(g.details["needles"].clone())
            .unwrap()
            .iter()
            .map(|n| Needle {
                key: n["key"].as_str().unwrap().into(),
                value: n["value"].as_str().unwrap().into(),
                depth: n["depth"].as_f64().unwrap(),
                word_index: n["word_index"].as_u64().unwrap(),
            })
            .collect();
    for (o, n) in g.observations.iter().zip(&needles) {
        let resp = &o.exchanges[0].response;
        assert!(resp.error.is_none(), "{:?}", resp.error);
        // The server's own count is the one reported, and it is exact.
        assert_eq!(resp.usage.as_ref().unwrap().prompt_tokens, Some(1500));
        assert_eq!(o.details["actual_prompt_tokens"], 1500);
        // The verdict is the model's real answer, scored.
        let right = retrieval::matches(&resp.content, n);
        assert_eq!(
            o.verdict == Verdict::Pass,
            right,
            "answer {:?} for {:?}: {}",
            resp.content,
            n.value,
            o.reason
        );
        eprintln!(
            "needle {} = {}: answered {:?} -> {:?}",
            n.key, n.value, resp.content, o.verdict
        );
    }
    assert!(
        g.reason.contains("actual prompt tokens 1500, 1500"),
        "{}",
        g.reason
    );
    // Beyond the slot: refused with the reason, never sent (the server would answer 400).
    let b = &r[1];
    assert_eq!(b.status, Status::Failed);
    assert_eq!(b.total, 0);
    assert!(
        b.reason.starts_with("refused, nothing sent"),
        "{}",
        b.reason
    );
    assert!(
        b.reason.contains("4096 tokens (/v1/models meta.n_ctx"),
        "{}",
        b.reason
    );
    // A wrong --context-tokens lets it through: the server's 400 is a failed observation.
    let mut wrong = c.clone();
    wrong.context_tokens = Some(8192);
    let over = RetrievalCheck::new(4500, 1, vec![], 0, 24, None).unwrap();
    let r = run(&wrong, &[Check::Retrieval(over)]);
    let o = &r[0].observations[0];
    assert_eq!(o.class.as_deref(), Some("request-error"), "{}", o.reason);
    assert!(o.reason.contains("HTTP 400"), "{}", o.reason);
    assert!(
        o.reason.contains("exceed_context_size_error"),
        "{}",
        o.reason
    );
}
