//! The per-turn and per-group rows of a multi-turn or shared-prefix load (its cache effect):
//! requests, prompt and cached tokens, TTFT per turn or group. `bakeoff bench` folds them as
//! traces arrive (`bench/session.rs`), a campaign's timing step over the step's traces.

use crate::client::Trace;
use crate::metrics::stats::nearest_rank;
use serde_json::{json, Value};
use std::collections::{BTreeMap, BTreeSet};

/// The request-line fields of a request with a place: conversation, turn, group, and the
/// prompt and cached tokens the server reported (nothing for a request without a place).
pub fn place_fields(line: &mut Value, t: &Trace) {
    let Some(p) = t.place else { return };
    if let Some(c) = p.conversation {
        line["conversation"] = json!(c);
    }
    if let Some(k) = p.turn {
        line["turn"] = json!(k);
    }
    if let Some(g) = p.prefix_group {
        line["prefix_group"] = json!(g);
    }
    let u = t.usage.as_ref();
    line["prompt_tokens"] = json!(u.and_then(|u| u.prompt_tokens));
    line["cached_tokens"] = json!(u.and_then(|u| u.cached_tokens));
}

/// The samples of one turn or group.
#[derive(Debug, Default)]
struct Row {
    requests: u64,
    ok: u64,
    prompt: Vec<f64>,
    cached: Vec<f64>,
    ttft: Vec<f64>,
    /// Cached tokens of the row's first successful request (in arrival order).
    first_cached: Option<Option<u64>>,
    hits: u64,
}

impl Row {
    fn json(&self) -> Value {
        let p50 = |v: &[f64]| {
            let mut v = v.to_vec();
            v.sort_by(f64::total_cmp);
            (!v.is_empty()).then(|| nearest_rank(&v, 50.0))
        };
        json!({
            "requests": self.requests,
            "ok": self.ok,
            "prompt_tokens_p50": p50(&self.prompt),
            "cached_tokens_p50": p50(&self.cached),
            "ttft_ms_p50": p50(&self.ttft),
            "requests_with_cached_tokens": self.hits,
            "first_request_cached_tokens": self.first_cached.flatten(),
        })
    }
}

/// What a structured load's summary describes.
#[derive(Debug, Clone, Copy)]
pub struct Shape {
    /// Multi-turn: (turns per conversation, think time ms).
    pub multi_turn: Option<(u32, f64)>,
    /// Shared prefix: (prefix tokens, groups).
    pub shared_prefix: Option<(u64, u32)>,
}

/// The per-turn and per-group rows of the measured requests with a place.
#[derive(Debug, Default)]
pub struct PlaceSummary {
    turns: BTreeMap<u32, Row>,
    groups: BTreeMap<u32, Row>,
    conversations: BTreeSet<u64>,
    prompt_sum: u64,
    cached_sum: u64,
    reporting: u64,
}

impl PlaceSummary {
    /// Adds a trace (warm-up requests and requests without a place are left out).
    pub fn fold(&mut self, t: &Trace) {
        let Some(place) = t.place.filter(|_| !t.warmup) else {
            return;
        };
        let usage = t.usage.as_ref();
        let prompt = usage.and_then(|u| u.prompt_tokens);
        let cached = usage.and_then(|u| u.cached_tokens);
        let ttft = crate::metrics::RequestMetrics::from_trace(t).ttft_ms;
        if t.ok() {
            if let (Some(p), Some(c)) = (prompt, cached) {
                self.prompt_sum += p;
                self.cached_sum += c;
                self.reporting += 1;
            }
        }
        if let Some(c) = place.conversation {
            self.conversations.insert(c);
        }
        let keys = [
            place.turn.map(|k| (true, k)),
            place.prefix_group.map(|g| (false, g)),
        ];
        for (is_turn, k) in keys.into_iter().flatten() {
            let row = if is_turn {
                self.turns.entry(k).or_default()
            } else {
                self.groups.entry(k).or_default()
            };
            row.requests += 1;
            if !t.ok() {
                continue;
            }
            row.ok += 1;
            row.prompt.extend(prompt.map(|x| x as f64));
            row.cached.extend(cached.map(|x| x as f64));
            row.ttft.extend(ttft);
            row.hits += u64::from(cached.unwrap_or(0) > 0);
            row.first_cached.get_or_insert(cached);
        }
    }

    /// The `workload` record: the cached-token share, and the per-turn (`multi_turn`) and
    /// per-group (`shared_prefix`) rows.
    pub fn summary(&self, shape: Shape) -> Value {
        let rows = |m: &BTreeMap<u32, Row>, key: &str| {
            m.iter()
                .map(|(k, r)| {
                    let mut v = r.json();
                    v[key] = json!(k);
                    v
                })
                .collect::<Vec<_>>()
        };
        let share = (self.prompt_sum > 0).then(|| self.cached_sum as f64 / self.prompt_sum as f64);
        let mut v = json!({
            "cached_tokens_share": share,
            "cached_tokens_share_what": "sum of usage cached_tokens over sum of usage prompt_tokens, successful measured requests reporting both",
            "requests_reporting_cached_tokens": self.reporting,
        });
        if let Some((t, think)) = shape.multi_turn {
            v["multi_turn"] = json!({
                "turns": t,
                "think_time_ms": think,
                "conversations": self.conversations.len(),
                "per_turn": rows(&self.turns, "turn"),
            });
        }
        if let Some((p, groups)) = shape.shared_prefix {
            v["shared_prefix"] = json!({
                "tokens": p,
                "groups": groups,
                "per_group": rows(&self.groups, "group"),
            });
        }
        v
    }
}
