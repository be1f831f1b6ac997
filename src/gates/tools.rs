//! The tools gate: strict tool calls from a suite file, sent as a concurrent batch.
//!
//! Variants: `plain` (non-streaming), `streaming` (tool-call deltas reassembled by index; the
//! stream must end with `finish_reason = tool_calls`), `round-trip` (the call, then the tool's
//! result sent back; the final answer is checked). Every call must be valid JSON, validate against
//! the tool's JSON Schema and match the expected values. The gate passes only when every request of
//! every variant passes.

use super::exchange::{chat_body, send, split_think};
use super::expect::{excerpt, Expect};
use super::suite::{self, item_label, Fields, Here, SuiteError, SuiteFile};
use super::tooldef::{
    check_calls, parse_messages, parse_tool_choice, parse_tools, select, ExpectedCall, ToolDef,
};
use super::{
    join_all, top_reasons, GateContext, GateResult, Observation, Status, SuiteRef, Verdict,
};
use crate::evidence::GateName;
use serde::Serialize;
use serde_json::{json, Map, Value};
use std::path::{Path, PathBuf};

/// `max_tokens` of a case unless the suite or the case says otherwise.
pub const DEFAULT_MAX_TOKENS: u64 = 256;
/// `--tool-batch` default: requests of each variant, all in flight at once.
pub const DEFAULT_BATCH: usize = 20;

/// Defined once in evidence/ (the campaign file's `gates.tools.variants` uses the same type).
pub use crate::evidence::ToolVariant;

/// A case's round trip: the tool result sent back and the check of the final answer.
#[derive(Debug, Clone, Serialize)]
pub struct RoundTrip {
    /// Content of the `tool` message answering each call.
    pub result: String,
    pub expect: Expect,
    /// `tool_choice` of the second request (default "auto").
    pub tool_choice: Value,
    pub max_tokens: u64,
}

/// One case: the messages to send (system, few-shot turns and the question, already in OpenAI
/// form), the tools offered, and what must come back.
#[derive(Debug, Clone, Serialize)]
pub struct ToolCase {
    pub id: String,
    pub messages: Vec<Value>,
    pub tools: Vec<String>,
    pub tool_choice: Value,
    pub max_tokens: u64,
    pub calls: Vec<ExpectedCall>,
    pub round_trip: Option<RoundTrip>,
}

/// A tools suite, validated.
#[derive(Debug, Clone)]
pub struct ToolSuite {
    pub path: PathBuf,
    pub sha256: String,
    pub name: Option<String>,
    pub tools: Vec<ToolDef>,
    pub cases: Vec<ToolCase>,
}

const TOP_FIELDS: &[&str] = &[
    "kind",
    "name",
    "description",
    "system",
    "max_tokens",
    "tool_choice",
    "tools",
    "shots",
    "cases",
];
const CASE_FIELDS: &[&str] = &[
    "id",
    "description",
    "shots",
    "messages",
    "prompt",
    "tools",
    "tool_choice",
    "max_tokens",
    "calls",
    "round_trip",
];
const ROUND_TRIP_FIELDS: &[&str] = &["result", "expect", "tool_choice", "max_tokens"];

impl ToolSuite {
    /// Reads and validates a suite file (TOML, or JSON when it ends in `.json`).
    pub fn load(path: &Path) -> Result<ToolSuite, SuiteError> {
        let f = suite::read(path)?;
        ToolSuite::from_file(f)
    }

    /// Validates a read suite file; errors point at their line in the file.
    pub fn from_file(file: SuiteFile) -> Result<ToolSuite, SuiteError> {
        let text = file.text.clone();
        ToolSuite::checked(file).map_err(|e| e.locate(&text))
    }

    fn checked(file: SuiteFile) -> Result<ToolSuite, SuiteError> {
        suite::check_kind(&file, "tools")?;
        let fname = file.path.display().to_string();
        let top_here = Here::new(&fname, "suite");
        let root = Value::Object(file.root.clone());
        let top = Fields::new(&root, &top_here, "", TOP_FIELDS)?;
        let suite::Common {
            name,
            system,
            max_tokens: default_max,
        } = suite::Common::read(&top, DEFAULT_MAX_TOKENS)?;
        let tool_list = top.opt_array("tools")?.ok_or_else(|| {
            top.err(
                "tools",
                "missing (a [[tools]] list with name, description and parameters)",
            )
        })?;
        let tools = parse_tools(tool_list, &fname)?;
        let all: Vec<&ToolDef> = tools.iter().collect();
        let default_choice = match top.get("tool_choice") {
            Some(v) => parse_tool_choice(v, &top_here, "tool_choice", &all)?,
            None => json!("auto"),
        };
        let mut ids = 0u64;
        let shots = parse_shots(&top, &fname, &mut ids)?;
        let case_list = top
            .opt_array("cases")?
            .ok_or_else(|| top.err("cases", "missing (a [[cases]] list)"))?;
        if case_list.is_empty() {
            return Err(top.err("cases", "the suite has no cases"));
        }
        let mut cases: Vec<ToolCase> = Vec::new();
        for (i, v) in case_list.iter().enumerate() {
            let here = Here::new(&fname, item_label("case", "cases", i, v, "id"));
            let f = Fields::new(v, &here, "", CASE_FIELDS)?;
            let id = f.item_id(|id| cases.iter().any(|c| c.id == id))?;
            f.opt_str("description")?;
            let offered = select(&tools, f.opt_strings("tools")?.as_deref(), &here, "tools")?;
            let tool_choice = case_tool_choice(&f, &here, &default_choice, &offered)?;
            let messages = case_messages(&f, &here, system, &shots, &mut ids)?;
            let max_tokens = f.opt_u64("max_tokens")?.unwrap_or(default_max);
            if max_tokens == 0 {
                return Err(f.err("max_tokens", "must be at least 1"));
            }
            let call_list = f.opt_array("calls")?.ok_or_else(|| {
                f.err(
                    "calls",
                    "missing (the expected call(s): [[cases.calls]] with name and arguments)",
                )
            })?;
            if call_list.is_empty() {
                return Err(f.err("calls", "must list at least one expected call"));
            }
            let calls = call_list
                .iter()
                .enumerate()
                .map(|(j, c)| ExpectedCall::parse(c, &here, &format!("calls[{j}]"), &offered))
                .collect::<Result<Vec<_>, _>>()?;
            if tool_choice == json!("none") {
                return Err(f.err("tool_choice", "\"none\" forbids the expected call"));
            }
            let round_trip = match f.get("round_trip") {
                None => None,
                Some(rv) => Some(parse_round_trip(rv, &here, &offered, max_tokens)?),
            };
            cases.push(ToolCase {
                id: id.to_string(),
                messages,
                tools: offered.iter().map(|t| t.name.clone()).collect(),
                tool_choice,
                max_tokens,
                calls,
                round_trip,
            });
        }
        Ok(ToolSuite {
            path: file.path,
            sha256: file.sha256,
            name,
            tools,
            cases,
        })
    }

    fn offered(&self, case: &ToolCase) -> Vec<&ToolDef> {
        case.tools
            .iter()
            .filter_map(|n| self.tools.iter().find(|t| &t.name == n))
            .collect()
    }
}

/// The suite's `[shots]`: named message lists a case prepends.
fn parse_shots(
    top: &Fields<'_>,
    fname: &str,
    ids: &mut u64,
) -> Result<Map<String, Value>, SuiteError> {
    let mut shots: Map<String, Value> = Map::new();
    if let Some(s) = top.opt_table("shots")? {
        for (k, v) in s {
            let here = Here::new(fname, format!("shots \"{k}\""));
            let list = v
                .as_array()
                .ok_or_else(|| here.err(format!("shots.{k}"), "expected an array of messages"))?;
            let msgs = parse_messages(list, &here, &format!("shots.{k}"), ids)?;
            shots.insert(k.clone(), Value::Array(msgs));
        }
    }
    Ok(shots)
}

/// A case's `tool_choice`, else the suite's (which must name a tool the case offers).
fn case_tool_choice(
    f: &Fields<'_>,
    here: &Here,
    default_choice: &Value,
    offered: &[&ToolDef],
) -> Result<Value, SuiteError> {
    Ok(match f.get("tool_choice") {
        Some(v) => parse_tool_choice(v, here, "tool_choice", offered)?,
        None => {
            if let Some(n) = default_choice
                .pointer("/function/name")
                .and_then(Value::as_str)
            {
                if !offered.iter().any(|t| t.name == n) {
                    return Err(f.err("tool_choice", format!("the suite's tool_choice names \"{n}\", which this case does not offer; set tool_choice here")));
                }
            }
            default_choice.clone()
        }
    })
}

/// A case's conversation: the suite's system prompt, its shots, then `messages` or `prompt`,
/// ending with the user's request.
fn case_messages(
    f: &Fields<'_>,
    here: &Here,
    system: Option<&str>,
    shots: &Map<String, Value>,
    ids: &mut u64,
) -> Result<Vec<Value>, SuiteError> {
    let mut messages = Vec::new();
    if let Some(s) = system {
        messages.push(json!({"role": "system", "content": s}));
    }
    if let Some(s) = f.opt_str("shots")? {
        let m = shots
            .get(s)
            .ok_or_else(|| f.err("shots", format!("no [shots] entry named \"{s}\"")))?;
        messages.extend(m.as_array().cloned().unwrap_or_default());
    }
    match (f.opt_array("messages")?, f.opt_str("prompt")?) {
        (Some(_), Some(_)) => {
            return Err(f.err("prompt", "give either messages or prompt, not both"))
        }
        (Some(list), None) => messages.extend(parse_messages(list, here, "messages", ids)?),
        (None, Some(p)) => messages.push(json!({"role": "user", "content": p})),
        (None, None) => {
            return Err(f.err(
                "messages",
                "missing (give messages = [...] or prompt = \"...\")",
            ))
        }
    }
    if messages
        .last()
        .and_then(|m| m.get("role"))
        .and_then(Value::as_str)
        != Some("user")
    {
        return Err(f.err("messages", "the last message must be the user's request"));
    }
    Ok(messages)
}

/// A case's `round_trip`: the tool's result sent back and the checks of the final answer.
fn parse_round_trip(
    rv: &Value,
    here: &Here,
    offered: &[&ToolDef],
    max_tokens: u64,
) -> Result<RoundTrip, SuiteError> {
    let rf = Fields::new(rv, here, "round_trip", ROUND_TRIP_FIELDS)?;
    let result = match rf.get("result") {
        Some(Value::String(s)) => s.clone(),
        Some(v @ (Value::Object(_) | Value::Array(_))) => v.to_string(),
        Some(v) => {
            return Err(rf.err(
                "result",
                format!(
                    "expected a string or a table, found {}",
                    suite::type_name(v)
                ),
            ))
        }
        None => return Err(rf.err("result", "missing (the tool's result sent back)")),
    };
    let expect = Expect::parse(
        rf.get("expect")
            .ok_or_else(|| rf.err("expect", "missing (checks of the final answer)"))?,
        here,
        "round_trip.expect",
        &[],
    )?;
    let tc = match rf.get("tool_choice") {
        Some(v) => parse_tool_choice(v, here, "round_trip.tool_choice", offered)?,
        None => json!("auto"),
    };
    Ok(RoundTrip {
        result,
        expect,
        tool_choice: tc,
        max_tokens: rf.opt_u64("max_tokens")?.unwrap_or(max_tokens),
    })
}

/// The tools gate's configuration.
#[derive(Debug, Clone)]
pub struct ToolsCheck {
    pub suite: ToolSuite,
    /// Requests per variant, all in flight at once (at least one per case).
    pub batch: usize,
    pub variants: Vec<ToolVariant>,
}

impl ToolsCheck {
    /// Checks the variants can run on this suite (round-trip needs cases with `round_trip`).
    pub fn new(
        suite: ToolSuite,
        batch: usize,
        variants: Vec<ToolVariant>,
    ) -> Result<ToolsCheck, String> {
        if batch == 0 {
            return Err("--tool-batch must be at least 1".into());
        }
        if variants.is_empty() {
            return Err("no tool variants to run".into());
        }
        if variants.contains(&ToolVariant::RoundTrip)
            && suite.cases.iter().all(|c| c.round_trip.is_none())
        {
            return Err(format!(
                "{}: the round-trip variant needs cases with a [cases.round_trip] table (result and expect); add one or pass --tool-variants plain,streaming",
                suite.path.display()
            ));
        }
        Ok(ToolsCheck {
            suite,
            batch,
            variants,
        })
    }
}

struct Outcome {
    verdict: Result<(), (String, String)>,
    exchanges: Vec<super::exchange::ExchangeRecord>,
}

fn fail(class: &str, reason: String) -> Result<(), (String, String)> {
    Err((class.to_string(), reason))
}

async fn one(
    ctx: &GateContext,
    suite: &ToolSuite,
    case: &ToolCase,
    variant: ToolVariant,
    n: usize,
) -> Outcome {
    let offered = suite.offered(case);
    let tools: Vec<Value> = offered.iter().map(|t| t.to_openai()).collect();
    let mut body = chat_body(ctx, case.messages.clone(), case.max_tokens, ctx.seed);
    body.insert("tools".into(), Value::Array(tools.clone()));
    body.insert("tool_choice".into(), case.tool_choice.clone());
    let stream = variant == ToolVariant::Streaming;
    let (req, reply) = send(ctx, body, stream).await;
    let mut exchanges = vec![reply.record(req, ctx.excerpt_chars)];
    let finish = reply.finish_reason.as_deref().unwrap_or("none").to_string();
    let step = if variant == ToolVariant::RoundTrip {
        "the call: "
    } else {
        ""
    };
    if let Some(w) = reply.error_words() {
        return Outcome {
            verdict: fail("request-error", format!("{step}request failed: {w}")),
            exchanges,
        };
    }
    if let Err(m) = check_calls(&case.calls, &offered, &reply.calls) {
        let m = if reply.calls.is_empty() {
            format!("{m} (finish_reason {finish})")
        } else {
            m
        };
        return Outcome {
            verdict: fail("tool-call", format!("{step}{m}")),
            exchanges,
        };
    }
    if stream && reply.finish_reason.as_deref() != Some("tool_calls") {
        return Outcome {
            verdict: fail(
                "finish-reason",
                format!("finish_reason is {finish}, expected tool_calls"),
            ),
            exchanges,
        };
    }
    let Some(rt) = (variant == ToolVariant::RoundTrip)
        .then_some(case.round_trip.as_ref())
        .flatten()
    else {
        return Outcome {
            verdict: Ok(()),
            exchanges,
        };
    };
    // The round trip: the model's own call(s), each answered with the case's result.
    let calls: Vec<Value> = reply
        .calls
        .iter()
        .enumerate()
        .map(|(i, c)| {
            let id = c.id.clone().unwrap_or_else(|| format!("call_{n}_{i}"));
            json!({"id": id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}})
        })
        .collect();
    let mut messages = case.messages.clone();
    let content = if reply.content.trim().is_empty() {
        Value::Null
    } else {
        json!(reply.content)
    };
    messages.push(json!({"role": "assistant", "content": content, "tool_calls": calls}));
    for c in &calls {
        messages.push(json!({"role": "tool", "tool_call_id": c["id"], "content": rt.result}));
    }
    let mut body = chat_body(ctx, messages, rt.max_tokens, ctx.seed);
    body.insert("tools".into(), Value::Array(tools));
    body.insert("tool_choice".into(), rt.tool_choice.clone());
    let (req2, reply2) = send(ctx, body, false).await;
    exchanges.push(reply2.record(req2, ctx.excerpt_chars));
    let finish2 = reply2.finish_reason.as_deref().unwrap_or("none");
    let (visible, _, _) = split_think(&reply2.content);
    let verdict = if let Some(w) = reply2.error_words() {
        fail("request-error", format!("the answer: request failed: {w}"))
    } else if !reply2.calls.is_empty() {
        fail(
            "round-trip",
            format!(
                "the answer: the model called {} again instead of answering",
                reply2
                    .calls
                    .iter()
                    .map(|c| c.name.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        )
    } else if visible.is_empty() {
        fail(
            "round-trip",
            format!("the answer: no visible final answer (finish_reason {finish2})"),
        )
    } else if finish2 != "stop" {
        fail(
            "round-trip",
            format!(
                "the answer: finish_reason is {finish2}, expected stop (answer {:?})",
                excerpt(&visible, 80)
            ),
        )
    } else {
        match rt.expect.check(&visible) {
            Ok(()) => Ok(()),
            Err(m) => fail("round-trip", format!("the answer: {m}")),
        }
    };
    Outcome { verdict, exchanges }
}

/// Runs the tools gate.
pub async fn run(ctx: &GateContext, check: &ToolsCheck) -> GateResult {
    let suite = &check.suite;
    let mut r = GateResult::start(GateName::Tools, ctx);
    r.suite = Some(SuiteRef {
        path: suite.path.display().to_string(),
        name: suite.name.clone(),
        sha256: suite.sha256.clone(),
        cases: suite.cases.len(),
    });
    r.suite_sha256 = Some(suite.sha256.clone());
    let permits = tokio::sync::Semaphore::new(check.batch);
    let mut per_variant = Map::new();
    let mut parts = Vec::new();
    for &variant in &check.variants {
        let cases: Vec<&ToolCase> = suite
            .cases
            .iter()
            .filter(|c| variant != ToolVariant::RoundTrip || c.round_trip.is_some())
            .collect();
        let n = check.batch.max(cases.len());
        let futs: Vec<_> = (0..n)
            .map(|j| {
                let case = cases[j % cases.len()];
                let permits = &permits;
                async move {
                    let _p = permits
                        .acquire()
                        .await
                        .expect("the semaphore is never closed");
                    (case, one(ctx, suite, case, variant, j).await)
                }
            })
            .collect();
        let t0 = crate::clock::mono_ns();
        let outcomes = join_all(futs).await;
        let wall = (crate::clock::mono_ns() - t0) as f64 / 1e9;
        let mut ok = 0;
        for (j, (case, o)) in outcomes.into_iter().enumerate() {
            let (verdict, class, reason) = match o.verdict {
                Ok(()) => {
                    ok += 1;
                    let what = if variant == ToolVariant::RoundTrip {
                        "valid tool call; the final answer passed its checks"
                    } else {
                        "valid tool call with the expected arguments"
                    };
                    (Verdict::Pass, None, what.to_string())
                }
                Err((c, m)) => (Verdict::Fail, Some(c), m),
            };
            r.observations.push(Observation {
                id: format!("{}/{}#{}", case.id, variant.as_str(), j + 1),
                item: Some(case.id.clone()),
                variant: Some(variant.as_str().to_string()),
                attempt: Some(j as u32 + 1),
                verdict,
                class,
                reason,
                exchanges: o.exchanges,
                details: json!({"expected_calls": case.calls}),
            });
        }
        per_variant.insert(
            variant.as_str().into(),
            json!({"passed": ok, "total": n, "concurrency": check.batch.min(n), "cases": cases.len(), "wall_s": wall}),
        );
        parts.push(format!("{} {ok}/{n}", variant.as_str()));
    }
    r.count();
    r.details = json!({
        "batch": check.batch,
        "variants": per_variant,
        "rule": "every request of every variant must return the expected call(s) with arguments that are valid JSON, valid against the tool's JSON Schema and equal to the expected values; streaming also needs finish_reason tool_calls; round-trip also needs a final answer that passes its checks",
    });
    if r.passed == r.total && r.total > 0 {
        r.status = Status::Passed;
        r.reason = format!(
            "{}/{} tool calls valid ({})",
            r.passed,
            r.total,
            parts.join(", ")
        );
    } else {
        r.status = Status::Failed;
        let reasons = top_reasons(
            r.observations
                .iter()
                .filter(|o| !o.passed())
                .map(|o| o.reason.as_str()),
            3,
        );
        r.reason = format!("{}/{} ({}): {reasons}", r.passed, r.total, parts.join(", "));
    }
    r
}
