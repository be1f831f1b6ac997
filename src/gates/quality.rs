//! The quality gate: a bounded suite of items with deterministic validators, each asked
//! `repetitions` times. An item is *stable* when every attempt passes.
//!
//! Budgets: each item has a visible-answer budget (`max_tokens`) plus a reasoning headroom; the
//! request's `max_tokens` is their sum. Failure classes are kept apart:
//! `request-error`, `reasoning-budget-exhausted` (the budget ran out before any visible answer
//! while the model was reasoning), `no-visible-answer`, `truncated-after-visible-output`
//! (`finish_reason = length` after some visible answer), `unexpected-finish-reason`,
//! `wrong-answer`. A leading `<think>...</think>` in the content counts as reasoning.

use super::exchange::{chat_body, send, split_think};
use super::expect::{excerpt, Expect};
use super::suite::{self, item_label, Fields, Here, SuiteError, SuiteFile};
use super::tooldef::{
    check_calls, parse_messages, parse_tool_choice, parse_tools, select, ExpectedCall, ToolDef,
};
use super::{join_all, GateContext, GateResult, Observation, Status, SuiteRef, Verdict};
use crate::evidence::GateName;
use serde::Serialize;
use serde_json::{json, Map, Value};
use std::path::{Path, PathBuf};

pub const DEFAULT_MAX_TOKENS: u64 = 64;
pub const DEFAULT_REPETITIONS: u32 = 3;
pub const DEFAULT_CONCURRENCY: usize = 4;

/// One item.
#[derive(Debug, Clone, Serialize)]
pub struct QualityItem {
    pub id: String,
    pub messages: Vec<Value>,
    /// The visible-answer budget.
    pub max_tokens: u64,
    /// Extra tokens allowed for reasoning (added to `max_tokens` in the request).
    pub reasoning_headroom: u64,
    pub tools: Vec<String>,
    pub tool_choice: Option<Value>,
    pub expect: Expect,
    /// `expect.tool_call`: a typed tool-call structure instead of (or besides) a text answer.
    pub tool_call: Option<ExpectedCall>,
}

#[derive(Debug, Clone)]
pub struct QualitySuite {
    pub path: PathBuf,
    pub sha256: String,
    pub name: Option<String>,
    /// Fraction of items that must be stable for the gate to pass (default 1: all).
    pub min_stable: f64,
    pub tools: Vec<ToolDef>,
    pub items: Vec<QualityItem>,
}

const TOP_FIELDS: &[&str] = &[
    "kind",
    "name",
    "description",
    "system",
    "max_tokens",
    "reasoning_headroom",
    "min_stable",
    "tools",
    "items",
];
const ITEM_FIELDS: &[&str] = &[
    "id",
    "description",
    "prompt",
    "messages",
    "system",
    "max_tokens",
    "reasoning_headroom",
    "tools",
    "tool_choice",
    "expect",
];

impl QualitySuite {
    pub fn load(path: &Path) -> Result<QualitySuite, SuiteError> {
        QualitySuite::from_file(suite::read(path)?)
    }

    /// Validates a read suite file; errors point at their line in the file.
    pub fn from_file(file: SuiteFile) -> Result<QualitySuite, SuiteError> {
        let text = file.text.clone();
        QualitySuite::checked(file).map_err(|e| e.locate(&text))
    }

    fn checked(file: SuiteFile) -> Result<QualitySuite, SuiteError> {
        suite::check_kind(&file, "quality")?;
        let fname = file.path.display().to_string();
        let top_here = Here::new(&fname, "suite");
        let root = Value::Object(file.root.clone());
        let top = Fields::new(&root, &top_here, "", TOP_FIELDS)?;
        let suite::Common {
            name,
            system,
            max_tokens: default_max,
        } = suite::Common::read(&top, DEFAULT_MAX_TOKENS)?;
        let default_headroom = top.opt_u64("reasoning_headroom")?.unwrap_or(0);
        let min_stable = top.opt_f64("min_stable")?.unwrap_or(1.0);
        if !(0.0..=1.0).contains(&min_stable) {
            return Err(top.err("min_stable", "must be a fraction from 0 to 1"));
        }
        let tools = match top.opt_array("tools")? {
            Some(list) => parse_tools(list, &fname)?,
            None => Vec::new(),
        };
        let list = top
            .opt_array("items")?
            .ok_or_else(|| top.err("items", "missing (an [[items]] list)"))?;
        if list.is_empty() {
            return Err(top.err("items", "the suite has no items"));
        }
        let mut ids = 0u64;
        let mut items: Vec<QualityItem> = Vec::new();
        for (i, v) in list.iter().enumerate() {
            let here = Here::new(&fname, item_label("item", "items", i, v, "id"));
            let f = Fields::new(v, &here, "", ITEM_FIELDS)?;
            let id = f.item_id(|id| items.iter().any(|x| x.id == id))?;
            f.opt_str("description")?;
            let mut messages = Vec::new();
            if let Some(s) = f.opt_str("system")?.or(system) {
                messages.push(json!({"role": "system", "content": s}));
            }
            match (f.opt_array("messages")?, f.opt_str("prompt")?) {
                (Some(_), Some(_)) => {
                    return Err(f.err("prompt", "give either messages or prompt, not both"))
                }
                (Some(l), None) => messages.extend(parse_messages(l, &here, "messages", &mut ids)?),
                (None, Some(p)) => messages.push(json!({"role": "user", "content": p})),
                (None, None) => {
                    return Err(f.err(
                        "prompt",
                        "missing (give prompt = \"...\" or messages = [...])",
                    ))
                }
            }
            let offered: Vec<&ToolDef> = match f.opt_strings("tools")? {
                Some(names) => select(&tools, Some(&names), &here, "tools")?,
                None => Vec::new(),
            };
            let tool_choice = match f.get("tool_choice") {
                Some(_) if offered.is_empty() => {
                    return Err(f.err("tool_choice", "this item offers no tools"))
                }
                Some(v) => Some(parse_tool_choice(v, &here, "tool_choice", &offered)?),
                None => None,
            };
            let ev = f
                .get("expect")
                .ok_or_else(|| f.err("expect", "missing (the checks of the answer)"))?;
            let expect = Expect::parse(ev, &here, "expect", &["tool_call"])?;
            let tool_call = match ev.get("tool_call") {
                None => None,
                Some(tc) => {
                    if offered.is_empty() {
                        return Err(here.err(
                            "expect.tool_call",
                            "the item offers no tools (add tools = [\"name\"])",
                        ));
                    }
                    Some(ExpectedCall::parse(
                        tc,
                        &here,
                        "expect.tool_call",
                        &offered,
                    )?)
                }
            };
            if tool_call.is_some() && !expect.is_empty() {
                return Err(here.err(
                    "expect",
                    "tool_call cannot be combined with text checks in one item",
                ));
            }
            let max_tokens = f.opt_u64("max_tokens")?.unwrap_or(default_max);
            if max_tokens == 0 {
                return Err(f.err("max_tokens", "must be at least 1"));
            }
            items.push(QualityItem {
                id: id.to_string(),
                messages,
                max_tokens,
                reasoning_headroom: f.opt_u64("reasoning_headroom")?.unwrap_or(default_headroom),
                tools: offered.iter().map(|t| t.name.clone()).collect(),
                tool_choice,
                expect,
                tool_call,
            });
        }
        Ok(QualitySuite {
            path: file.path,
            sha256: file.sha256,
            name,
            min_stable,
            tools,
            items,
        })
    }
}

/// The quality gate's configuration.
#[derive(Debug, Clone)]
pub struct QualityCheck {
    pub suite: QualitySuite,
    pub repetitions: u32,
    /// Overrides every item's reasoning headroom when set.
    pub reasoning_headroom: Option<u64>,
    /// Requests in flight at once.
    pub concurrency: usize,
}

impl QualityCheck {
    pub fn new(suite: QualitySuite, repetitions: u32) -> QualityCheck {
        QualityCheck {
            suite,
            repetitions,
            reasoning_headroom: None,
            concurrency: DEFAULT_CONCURRENCY,
        }
    }
}

/// Failure class and reason of one attempt, from what came back. Pure, for tests.
pub fn classify(
    item: &QualityItem,
    offered: &[&ToolDef],
    reply: &super::exchange::Reply,
) -> Result<String, (&'static str, String)> {
    if let Some(w) = reply.error_words() {
        return Err(("request-error", format!("request failed: {w}")));
    }
    let (visible, think, unclosed) = split_think(&reply.content);
    let reasoned = !reply.reasoning.is_empty()
        || !think.is_empty()
        || unclosed
        || reply
            .usage
            .as_ref()
            .and_then(|u| u.reasoning_tokens)
            .unwrap_or(0)
            > 0;
    let finish = reply.finish_reason.as_deref().unwrap_or("none");
    let budget = item.max_tokens + item.reasoning_headroom;
    if let Some(exp) = &item.tool_call {
        if reply.calls.is_empty() && finish == "length" && visible.is_empty() && reasoned {
            return Err((
                "reasoning-budget-exhausted",
                format!("the {budget}-token budget ran out while reasoning, before any tool call"),
            ));
        }
        return match check_calls(std::slice::from_ref(exp), offered, &reply.calls) {
            Ok(()) if finish == "tool_calls" => Ok("the expected tool call".into()),
            Ok(()) => Err((
                "unexpected-finish-reason",
                format!("finish_reason is {finish}, expected tool_calls"),
            )),
            Err(m) if reply.calls.is_empty() => {
                Err(("wrong-answer", format!("{m} (finish_reason {finish})")))
            }
            Err(m) => Err(("wrong-answer", m)),
        };
    }
    if finish == "length" {
        return Err(if !visible.is_empty() {
            (
                "truncated-after-visible-output",
                format!(
                    "the {budget}-token budget ran out after visible output {:?}",
                    excerpt(&visible, 80)
                ),
            )
        } else if reasoned {
            ("reasoning-budget-exhausted", format!(
                "the {budget}-token budget ({} visible + {} reasoning headroom) ran out while reasoning, before any visible answer",
                item.max_tokens, item.reasoning_headroom
            ))
        } else {
            (
                "no-visible-answer",
                format!("no visible answer within {budget} tokens (finish_reason length)"),
            )
        });
    }
    if finish != "stop" {
        return Err((
            "unexpected-finish-reason",
            format!("finish_reason is {finish}, expected stop"),
        ));
    }
    if visible.is_empty() {
        return Err((
            "no-visible-answer",
            "no visible answer (finish_reason stop)".into(),
        ));
    }
    match item.expect.check(&visible) {
        Ok(()) => Ok(format!("answered {:?}", excerpt(&visible, 80))),
        Err(m) => Err(("wrong-answer", m)),
    }
}

pub async fn run(ctx: &GateContext, check: &QualityCheck) -> GateResult {
    let suite = &check.suite;
    let mut r = GateResult::start(GateName::Quality, ctx);
    r.suite = Some(SuiteRef {
        path: suite.path.display().to_string(),
        name: suite.name.clone(),
        sha256: suite.sha256.clone(),
        cases: suite.items.len(),
    });
    r.suite_sha256 = Some(suite.sha256.clone());
    let reps = check.repetitions.max(1);
    let permits = tokio::sync::Semaphore::new(check.concurrency.max(1));
    let mut jobs = Vec::new();
    for item in &suite.items {
        for a in 1..=reps {
            jobs.push((item, a));
        }
    }
    let futs: Vec<_> = jobs
        .iter()
        .map(|&(item, attempt)| {
            let permits = &permits;
            async move {
                let _p = permits
                    .acquire()
                    .await
                    .expect("the semaphore is never closed");
                let mut item = item.clone();
                if let Some(h) = check.reasoning_headroom {
                    item.reasoning_headroom = h;
                }
                let offered: Vec<&ToolDef> = item
                    .tools
                    .iter()
                    .filter_map(|n| suite.tools.iter().find(|t| &t.name == n))
                    .collect();
                let seed = ctx.seed.wrapping_add(attempt as u64 - 1);
                let mut body = chat_body(
                    ctx,
                    item.messages.clone(),
                    item.max_tokens + item.reasoning_headroom,
                    seed,
                );
                if !offered.is_empty() {
                    body.insert(
                        "tools".into(),
                        Value::Array(offered.iter().map(|t| t.to_openai()).collect()),
                    );
                    if let Some(tc) = &item.tool_choice {
                        body.insert("tool_choice".into(), tc.clone());
                    }
                }
                let (req, reply) = send(ctx, body, true).await;
                let verdict = classify(&item, &offered, &reply);
                (item, attempt, reply.record(req, ctx.excerpt_chars), verdict)
            }
        })
        .collect();
    let outcomes = join_all(futs).await;
    let mut classes: Map<String, Value> = Map::new();
    let mut per_item: Vec<(String, u32, u32)> = Vec::new();
    for (item, attempt, rec, verdict) in outcomes {
        let (v, class, reason) = match verdict {
            Ok(m) => (Verdict::Pass, None, m),
            Err((c, m)) => {
                let n = classes.get(c).and_then(Value::as_u64).unwrap_or(0);
                classes.insert(c.to_string(), json!(n + 1));
                (Verdict::Fail, Some(c.to_string()), m)
            }
        };
        match per_item.iter_mut().find(|(id, _, _)| *id == item.id) {
            Some(e) => {
                e.2 += 1;
                e.1 += u32::from(v == Verdict::Pass);
            }
            None => per_item.push((item.id.clone(), u32::from(v == Verdict::Pass), 1)),
        }
        r.observations.push(Observation {
            id: format!("{}#{attempt}", item.id),
            item: Some(item.id.clone()),
            variant: None,
            attempt: Some(attempt),
            verdict: v,
            class,
            reason,
            exchanges: vec![rec],
            details: json!({
                "visible_budget": item.max_tokens,
                "reasoning_headroom": item.reasoning_headroom,
                "expect": item.expect,
                "expected_tool_call": item.tool_call,
            }),
        });
    }
    r.count();
    let stable = per_item.iter().filter(|(_, ok, n)| ok == n).count();
    let items = per_item.len();
    let needed = (suite.min_stable * items as f64).ceil() as usize;
    r.details = json!({
        "repetitions": reps,
        "items": items,
        "stable_items": stable,
        "attempts_passed": r.passed,
        "attempts": r.total,
        "min_stable": suite.min_stable,
        "stable_items_needed": needed,
        "failure_classes": classes,
        "per_item": per_item.iter().map(|(id, ok, n)| json!({"id": id, "passed": ok, "attempts": n, "stable": ok == n})).collect::<Vec<_>>(),
        "rule": "an item is stable when every attempt passes; the gate passes when at least min_stable of the items are stable",
    });
    let summary = format!("{stable}/{items} stable, {}/{} attempts", r.passed, r.total);
    let class_words = classes
        .iter()
        .map(|(k, v)| format!("{k} {v}"))
        .collect::<Vec<_>>()
        .join(", ");
    if stable >= needed && items > 0 {
        r.status = Status::Passed;
        r.reason = if class_words.is_empty() {
            summary
        } else {
            format!("{summary} (failures: {class_words})")
        };
    } else {
        r.status = Status::Failed;
        let top = super::top_reasons(
            r.observations
                .iter()
                .filter(|o| !o.passed())
                .map(|o| o.reason.as_str()),
            2,
        );
        r.reason = format!("{summary}; needs {needed} stable (failures: {class_words}): {top}");
    }
    r
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gates::exchange::Reply;
    use crate::gates::suite::Here;

    fn item() -> QualityItem {
        QualityItem {
            id: "x".into(),
            messages: vec![],
            max_tokens: 8,
            reasoning_headroom: 4,
            tools: vec![],
            tool_choice: None,
            expect: Expect::parse(
                &json!({"exact": "blue"}),
                &Here::new("f", "i"),
                "expect",
                &[],
            )
            .unwrap(),
            tool_call: None,
        }
    }

    fn reply(content: &str, reasoning: &str, finish: Option<&str>) -> Reply {
        Reply {
            content: content.into(),
            reasoning: reasoning.into(),
            finish_reason: finish.map(str::to_string),
            ..Default::default()
        }
    }

    fn class(r: &Reply) -> &'static str {
        classify(&item(), &[], r).err().map_or("pass", |e| e.0)
    }

    #[test]
    fn failure_classes() {
        assert_eq!(class(&reply("Blue.", "", Some("stop"))), "pass");
        assert_eq!(
            class(&reply("<think>hmm</think>blue", "", Some("stop"))),
            "pass"
        );
        assert_eq!(class(&reply("red", "", Some("stop"))), "wrong-answer");
        assert_eq!(
            class(&reply("", "thinking", Some("length"))),
            "reasoning-budget-exhausted"
        );
        assert_eq!(
            class(&reply("<think>still", "", Some("length"))),
            "reasoning-budget-exhausted"
        );
        assert_eq!(
            class(&reply("blue is a", "", Some("length"))),
            "truncated-after-visible-output"
        );
        assert_eq!(class(&reply("", "", Some("length"))), "no-visible-answer");
        assert_eq!(class(&reply("", "", Some("stop"))), "no-visible-answer");
        assert_eq!(
            class(&reply("blue", "", Some("content_filter"))),
            "unexpected-finish-reason"
        );
        assert_eq!(class(&reply("blue", "", None)), "unexpected-finish-reason");
        let mut r = reply("", "", None);
        r.error = Some(crate::client::RequestError::new(
            crate::client::ErrorClass::Stall,
            "no bytes",
        ));
        assert_eq!(class(&r), "request-error");
        let (_, msg) = classify(&item(), &[], &reply("", "x", Some("length"))).unwrap_err();
        assert!(
            msg.contains("12-token budget (8 visible + 4 reasoning headroom)"),
            "{msg}"
        );
    }
}
