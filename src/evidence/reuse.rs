//! Prefix-cache reuse per timed step and per conversation turn, read from the step files'
//! request lines (`usage.prompt_tokens`, `usage.cached_tokens`, `turn`, `metrics.ttft_ms`) when a
//! bundle is read, never trusted from a summary. The verdict states each arm's cached share per
//! step and turn, and ranks on first-turn TTFT (`ttft_first_turn`) from these samples.

use super::result::{ArmResult, CacheUse, StepReuse, TimingRecord, TurnReuse};
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::Path;

/// The arm's timed steps that read request lines, each with its name in the verdict: cold, warm,
/// each concurrency level, the long-context timing, then the open-loop rates by key.
pub fn timed_steps(a: &ArmResult) -> Vec<(String, &TimingRecord)> {
    let mut v = a.closed_loop_steps();
    v.extend(a.rates.iter().map(|(k, t)| (k.clone(), t)));
    v
}

/// Adds one successful request's usage to `c`.
fn add(c: &mut CacheUse, usage: &Value) {
    c.requests += 1;
    if let (Some(p), Some(k)) = (
        usage["prompt_tokens"].as_u64(),
        usage["cached_tokens"].as_u64(),
    ) {
        c.requests_reporting += 1;
        c.prompt_tokens += p;
        c.cached_tokens += k;
    }
}

/// One step file's cache use and turn rows (warm-up requests left out, as in its statistics).
pub fn of_step(step: &str, evidence: &str, v: &Value) -> StepReuse {
    let mut s = StepReuse {
        step: step.into(),
        evidence: evidence.into(),
        ..Default::default()
    };
    let mut turns: BTreeMap<u64, TurnReuse> = BTreeMap::new();
    for r in v["requests"].as_array().into_iter().flatten() {
        if r["ok"] != Value::Bool(true) || r["warmup"] == Value::Bool(true) {
            continue;
        }
        add(&mut s.cache, &r["usage"]);
        let Some(k) = r["turn"].as_u64() else {
            continue;
        };
        let t = turns.entry(k).or_insert_with(|| TurnReuse {
            turn: k,
            ..Default::default()
        });
        add(&mut t.cache, &r["usage"]);
        t.ttft_ms.extend(r["metrics"]["ttft_ms"].as_f64());
    }
    s.turns = turns.into_values().collect();
    s
}

/// The arm's steps whose files could be read, in [`timed_steps`] order.
pub fn steps(dir: &Path, a: &ArmResult) -> Vec<StepReuse> {
    timed_steps(a)
        .into_iter()
        .filter_map(|(name, t)| {
            let b = std::fs::read(dir.join(&t.evidence)).ok()?;
            let v: Value = serde_json::from_slice(&b).ok()?;
            Some(of_step(&name, &t.evidence, &v))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn turns_are_counted_apart_and_failures_and_warm_up_left_out() {
        let v = json!({"requests": [
            {"ok": true, "turn": 1, "usage": {"prompt_tokens": 64, "cached_tokens": 0}, "metrics": {"ttft_ms": 50.0}},
            {"ok": true, "turn": 2, "usage": {"prompt_tokens": 90, "cached_tokens": 64}, "metrics": {"ttft_ms": 20.0}},
            {"ok": false, "turn": 2, "usage": null, "metrics": {}},
            {"ok": true, "warmup": true, "turn": 1, "usage": {"prompt_tokens": 64, "cached_tokens": 64}, "metrics": {"ttft_ms": 1.0}},
            {"ok": true, "turn": 1, "usage": {"prompt_tokens": 64}, "metrics": {"ttft_ms": 55.0}},
        ]});
        let s = of_step("warm", "a.json", &v);
        assert_eq!(
            (s.cache.requests, s.cache.requests_reporting),
            (3, 2),
            "{s:?}"
        );
        assert_eq!((s.cache.prompt_tokens, s.cache.cached_tokens), (154, 64));
        assert_eq!(s.last_turn(), 2);
        let t1 = s.turn(1).unwrap();
        assert_eq!(t1.ttft_ms, [50.0, 55.0]);
        assert_eq!(t1.cache.share(), Some(0.0));
        assert_eq!(s.turn(2).unwrap().cache.cached_tokens, 64);
    }
}
