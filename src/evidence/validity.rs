//! The validity block: per arm, what could weaken its figures, gathered from its timed step files
//! (never recomputed from a summary): the client's overload signals, open-loop schedule lag, the
//! cached share of prompt tokens, output-length shortfall, failed requests, and the clock checks
//! (reads the kernel did not stamp), and the trace replay's arrival error and failures apart (its
//! figures are not ranked, and its shared prefixes hit the cache by design, so its cached share
//! is not counted). Recorded in the manifest and cross-checked by `verify`; the
//! publication summary lists its lines ([`ArmValidity::weakens`]).

use super::result::{CacheUse, CampaignResult};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::Path;

/// Schedule lag p99 at or above this (ms) is the client's overload signal (`load::session`).
const LAG_SIGNAL_MS: f64 = 2.0;
/// A cached share at or above this is said to weaken uncached figures.
const CACHED_SIGNAL: f64 = 0.05;

/// One arm's validity block.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct ArmValidity {
    /// Timed step files read.
    pub steps: u64,
    /// Steps whose client overload warning fired (`client_limit_warning`), by step name.
    pub client_limited: Vec<String>,
    /// The largest open-loop schedule lag p99 of its steps, ms; None without open-loop steps.
    pub schedule_lag_p99_ms: Option<f64>,
    /// Prompt and cached tokens of its successful timed requests.
    pub cache: CacheUse,
    /// Requests checked against `max_tokens` (`ignore_eos`) and those that stopped short.
    pub output_checked: u64,
    pub output_short: u64,
    /// Timed requests sent and failed.
    pub requests_sent: u64,
    pub requests_failed: u64,
    /// Clock checks: reads stamped by the kernel, and reads timed by the read itself.
    pub kernel_stamped_reads: u64,
    pub read_time_reads: u64,
    /// The trace replay step (`[workload.trace]`), when the arm ran one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trace: Option<TraceValidity>,
}

/// The trace replay's own signals, from its step file.
#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize, PartialEq)]
pub struct TraceValidity {
    /// Actual send minus the trace's schedule, p99, ms (`stats.metrics.schedule_lag_ms`).
    pub arrival_error_p99_ms: Option<f64>,
    /// Measured requests sent and failed.
    pub requests_sent: u64,
    pub requests_failed: u64,
}

impl ArmValidity {
    /// What weakens the arm's figures, one phrase each; empty when nothing does.
    pub fn weakens(&self) -> Vec<String> {
        let mut w = Vec::new();
        if !self.client_limited.is_empty() {
            w.push(format!(
                "the client was the limit at {} (its overload signals fired)",
                self.client_limited.join(", ")
            ));
        }
        if let Some(l) = self.schedule_lag_p99_ms.filter(|l| *l >= LAG_SIGNAL_MS) {
            w.push(format!("open-loop schedule lag p99 {l:.1} ms"));
        }
        if let Some(s) = self.cache.share().filter(|s| *s >= CACHED_SIGNAL) {
            w.push(format!(
                "{:.1} % of its timed prompt tokens came from its prefix cache",
                s * 100.0
            ));
        }
        if self.output_short > 0 {
            w.push(format!(
                "{} of {} requests stopped short of max_tokens",
                self.output_short, self.output_checked
            ));
        }
        if self.requests_failed > 0 {
            w.push(format!(
                "{} of {} timed requests failed",
                self.requests_failed, self.requests_sent
            ));
        }
        // A stray unstamped read (an EOF, a reconnect) moves no figure; 1 % of reads does.
        let reads = self.read_time_reads + self.kernel_stamped_reads;
        if self.read_time_reads > 0 && self.read_time_reads * 100 >= reads {
            w.push(format!(
                "{} of {} reads had no kernel receive stamp (timed at the read)",
                self.read_time_reads, reads
            ));
        }
        if let Some(t) = &self.trace {
            if let Some(e) = t.arrival_error_p99_ms.filter(|e| *e >= LAG_SIGNAL_MS) {
                w.push(format!(
                    "trace replay arrival error p99 {e:.1} ms behind the trace's schedule"
                ));
            }
            if t.requests_failed > 0 {
                w.push(format!(
                    "{} of {} trace replay requests failed",
                    t.requests_failed, t.requests_sent
                ));
            }
        }
        w
    }
}

/// Adds one step file's signals to `v`.
fn add_step(v: &mut ArmValidity, step: &str, ev: &Value) {
    v.steps += 1;
    if ev["client_limit_warning"].is_string() {
        v.client_limited.push(step.to_string());
    }
    if let Some(l) = ev["stats"]["metrics"]["schedule_lag_ms"]["p99"].as_f64() {
        v.schedule_lag_p99_ms = Some(v.schedule_lag_p99_ms.map_or(l, |x: f64| x.max(l)));
    }
    let c = super::reuse::of_step(step, "", ev).cache;
    v.cache.requests += c.requests;
    v.cache.requests_reporting += c.requests_reporting;
    v.cache.prompt_tokens += c.prompt_tokens;
    v.cache.cached_tokens += c.cached_tokens;
    let clock = &ev["arrival_clock"];
    v.kernel_stamped_reads += clock["kernel_stamped_reads"].as_u64().unwrap_or(0);
    v.read_time_reads += clock["read_time_reads"].as_u64().unwrap_or(0);
}

/// The trace step's signals from its file (a client-limit warning goes with the other steps').
fn trace_of(v: &mut ArmValidity, ev: &Value) -> TraceValidity {
    if ev["client_limit_warning"].is_string() {
        v.client_limited.push("trace replay".into());
    }
    let measured = ev["requests"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|r| r["warmup"] != Value::Bool(true));
    let (mut sent, mut failed) = (0, 0);
    for r in measured {
        sent += 1;
        failed += u64::from(r["ok"] != Value::Bool(true));
    }
    TraceValidity {
        arrival_error_p99_ms: ev["stats"]["metrics"]["schedule_lag_ms"]["p99"].as_f64(),
        requests_sent: sent,
        requests_failed: failed,
    }
}

/// Every arm's validity block from the bundle's `campaign-result.json` and its timed step
/// files; empty when the folder holds no campaign result (a promotion folder).
pub fn gather(dir: &Path) -> BTreeMap<String, ArmValidity> {
    let mut out = BTreeMap::new();
    let Some(r) = std::fs::read(dir.join(super::bundle::RESULT))
        .ok()
        .and_then(|b| serde_json::from_slice::<CampaignResult>(&b).ok())
    else {
        return out;
    };
    for a in &r.arms {
        let mut v = ArmValidity::default();
        for (step, t) in super::reuse::timed_steps(a) {
            v.requests_sent += t.requests_ok + t.requests_failed;
            v.requests_failed += t.requests_failed;
            if let Some(o) = t.output_length {
                v.output_checked += o.requests;
                v.output_short += o.short;
            }
            let ev = std::fs::read(dir.join(&t.evidence))
                .ok()
                .and_then(|b| serde_json::from_slice::<Value>(&b).ok());
            if let Some(ev) = ev {
                add_step(&mut v, &step, &ev);
            }
        }
        if let Some(t) = &a.trace {
            let ev = std::fs::read(dir.join(&t.timing.evidence))
                .ok()
                .and_then(|b| serde_json::from_slice::<Value>(&b).ok());
            v.trace = Some(trace_of(&mut v, ev.as_ref().unwrap_or(&Value::Null)));
        }
        if v.steps > 0 || v.requests_sent > 0 || v.trace.is_some() {
            out.insert(a.id.clone(), v);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn each_signal_is_said_and_a_clean_arm_says_nothing() {
        let mut v = ArmValidity::default();
        add_step(
            &mut v,
            "r8",
            &json!({"client_limit_warning": "the client, not the server, was the limit",
                "stats": {"metrics": {"schedule_lag_ms": {"p99": 3.5}}},
                "arrival_clock": {"kernel_stamped_reads": 90, "read_time_reads": 10},
                "requests": [{"ok": true, "usage": {"prompt_tokens": 100, "cached_tokens": 50}}]}),
        );
        (v.requests_sent, v.requests_failed) = (10, 1);
        (v.output_checked, v.output_short) = (10, 2);
        let w = v.weakens();
        assert_eq!(
            w,
            [
                "the client was the limit at r8 (its overload signals fired)",
                "open-loop schedule lag p99 3.5 ms",
                "50.0 % of its timed prompt tokens came from its prefix cache",
                "2 of 10 requests stopped short of max_tokens",
                "1 of 10 timed requests failed",
                "10 of 100 reads had no kernel receive stamp (timed at the read)",
            ]
        );
        let mut clean = ArmValidity::default();
        add_step(
            &mut clean,
            "warm",
            &json!({"client_limit_warning": null, "arrival_clock": {"kernel_stamped_reads": 9, "read_time_reads": 0},
                "requests": [{"ok": true, "usage": {"prompt_tokens": 100, "cached_tokens": 0}}]}),
        );
        assert!(clean.weakens().is_empty(), "{:?}", clean.weakens());
    }

    #[test]
    fn the_trace_replay_is_judged_apart_and_its_cache_hits_are_not_counted() {
        let mut v = ArmValidity::default();
        let t = trace_of(
            &mut v,
            &json!({"client_limit_warning": "the client, not the server, was the limit",
                "stats": {"metrics": {"schedule_lag_ms": {"p99": 4.25}}},
                "requests": [
                    {"ok": true, "warmup": true, "usage": {"prompt_tokens": 100, "cached_tokens": 90}},
                    {"ok": true, "usage": {"prompt_tokens": 100, "cached_tokens": 90}},
                    {"ok": false},
                    {"ok": true}]}),
        );
        assert_eq!(
            t,
            TraceValidity {
                arrival_error_p99_ms: Some(4.25),
                requests_sent: 3,
                requests_failed: 1
            }
        );
        v.trace = Some(t);
        assert_eq!(
            v.weakens(),
            [
                "the client was the limit at trace replay (its overload signals fired)",
                "trace replay arrival error p99 4.2 ms behind the trace's schedule",
                "1 of 3 trace replay requests failed",
            ]
        );
        assert_eq!(v.cache, CacheUse::default());
        // On schedule, nothing failed: nothing said.
        let mut quiet = ArmValidity::default();
        quiet.trace = Some(trace_of(
            &mut quiet,
            &json!({"stats": {"metrics": {"schedule_lag_ms": {"p99": 0.4}}}, "requests": [{"ok": true}]}),
        ));
        assert!(quiet.weakens().is_empty(), "{:?}", quiet.weakens());
    }
}
