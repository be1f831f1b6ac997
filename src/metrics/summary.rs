//! Aggregation of a run: per-request metrics in, one summary out. Pure: no I/O.

use super::stats::Distribution;
use super::{chunk_gaps_ns, RequestMetrics, DEFINITIONS};
use crate::client::{ErrorClass, Trace};
use serde::Serialize;
use std::collections::BTreeMap;

/// Failures of one class: how many, and the first message seen (messages of one class repeat).
#[derive(Debug, Clone, Serialize)]
pub struct FailureClass {
    pub count: u64,
    pub example: String,
}

/// Accumulates measured requests. Keeps one small record per request and 4 bytes per chunk gap;
/// chunk offsets and text are dropped once a trace is folded in.
#[derive(Default)]
pub struct Collector {
    pub metrics: Vec<RequestMetrics>,
    /// Output chunk gaps in microseconds (f32 is exact to well under 1 µs below 16 s).
    pub gaps_us: Vec<f32>,
    pub failures: BTreeMap<ErrorClass, FailureClass>,
    pub failed: u64,
    pub warmup: u64,
    pub first_send_ns: Option<u64>,
    pub last_end_ns: Option<u64>,
    /// Requests whose usage.prompt_tokens differed from the matched prompt's target.
    pub prompt_mismatches: u64,
    pub prompt_mismatch_example: Option<String>,
    /// Open loop: actual minus intended send time, ms.
    pub lag_ms: Vec<f64>,
    pub engine_decode_tok_s: Vec<f64>,
    pub cache: PrefixCacheUse,
    pub resolution: ArrivalResolution,
}

/// How well the client could tell events' arrivals apart. Events that one read returned share
/// that read's stamp: the client cannot know how far apart they arrived, so a gap between two
/// such output chunks is left out of `chunk_gap_ms` (never reported as 0 ms) and counted here.
#[derive(Debug, Clone, Default, Serialize)]
pub struct ArrivalResolution {
    /// SSE events of the measured successful requests.
    pub events: u64,
    /// Events stamped the same as the event before them (one read returned both).
    pub shared_read_events: u64,
    /// shared_read_events / events (null without events).
    pub shared_read_share: Option<f64>,
    /// Gaps between output chunks that one read returned together: left out of chunk_gap_ms.
    pub unresolved_chunk_gaps: u64,
    /// unresolved / (unresolved + gaps in chunk_gap_ms) (null without gaps).
    pub unresolved_chunk_gap_share: Option<f64>,
}

/// What the server said about its prefix cache, from `usage.prompt_tokens_details.cached_tokens`.
#[derive(Debug, Clone, Default, Serialize)]
pub struct PrefixCacheUse {
    /// Successful requests whose usage carried `cached_tokens`.
    pub requests_reporting: u64,
    /// Requests with at least half of their prompt tokens served from the cache (a shared chat
    /// template or nonce prefix alone stays below that).
    pub requests_served_from_cache: u64,
    pub cached_tokens_total: u64,
    /// The first request served from cache, in words.
    pub example: Option<String>,
}

impl PrefixCacheUse {
    fn add(&mut self, index: u64, m: &RequestMetrics) {
        let Some(cached) = m.cached_tokens else {
            return;
        };
        self.requests_reporting += 1;
        self.cached_tokens_total += cached;
        if let Some(prompt) = m.prompt_tokens {
            if cached > 0 && cached * 2 >= prompt {
                self.requests_served_from_cache += 1;
                self.example.get_or_insert_with(|| {
                    format!("request {index}: {cached} of {prompt} prompt tokens cached")
                });
            }
        }
    }

    /// The warning for a run whose prompts were meant to defeat the prefix cache; `None` when no
    /// request was served from it.
    pub fn defeated_cache_warning(&self) -> Option<String> {
        (self.requests_served_from_cache > 0).then(|| {
            format!(
                "{} of {} requests were served from the server's prefix cache although every prompt carried a fresh nonce ({}); their TTFT is not the uncached prefill",
                self.requests_served_from_cache,
                self.requests_reporting,
                self.example.as_deref().unwrap_or("")
            )
        })
    }
}

impl Collector {
    /// Folds one trace in. `expected_prompt_tokens`: the matched prompt's target, when sized.
    pub fn add(&mut self, t: &Trace, expected_prompt_tokens: Option<u64>) {
        if t.warmup {
            self.warmup += 1;
            return;
        }
        self.first_send_ns = Some(self.first_send_ns.map_or(t.send_ns, |f| f.min(t.send_ns)));
        if let Some(i) = t.intended_ns {
            self.lag_ms.push(t.send_ns.saturating_sub(i) as f64 / 1e6);
        }
        if let Some(e) = &t.error {
            self.failed += 1;
            let f = self
                .failures
                .entry(e.class)
                .or_insert_with(|| FailureClass {
                    count: 0,
                    example: e.message.clone(),
                });
            f.count += 1;
            return;
        }
        let m = RequestMetrics::from_trace(t);
        if let Some(end) = t.end_ns {
            let abs = t.send_ns + end;
            self.last_end_ns = Some(self.last_end_ns.map_or(abs, |l| l.max(abs)));
        }
        if let (Some(exp), Some(got)) = (expected_prompt_tokens, m.prompt_tokens) {
            if exp != got {
                self.prompt_mismatches += 1;
                self.prompt_mismatch_example.get_or_insert_with(|| {
                    format!(
                        "request {} : target {exp} tokens, endpoint reported {got}",
                        t.index
                    )
                });
            }
        }
        if let Some(p) = t.usage.as_ref().and_then(|u| u.engine_decode_tok_s) {
            self.engine_decode_tok_s.push(p);
        }
        for g in chunk_gaps_ns(t) {
            if g == 0 {
                self.resolution.unresolved_chunk_gaps += 1;
            } else {
                self.gaps_us.push((g as f64 / 1e3) as f32);
            }
        }
        self.resolution.events += t.events.len() as u64;
        self.resolution.shared_read_events += t
            .events
            .windows(2)
            .filter(|w| w[1].t_ns == w[0].t_ns)
            .count() as u64;
        self.cache.add(t.index, &m);
        self.metrics.push(m);
    }

    pub fn ok(&self) -> u64 {
        self.metrics.len() as u64
    }

    pub fn summarize(&self, seed: u64) -> RunStats {
        let dist = |f: &dyn Fn(&RequestMetrics) -> Option<f64>| {
            let v: Vec<f64> = self.metrics.iter().filter_map(f).collect();
            Distribution::from_samples(&v, seed)
        };
        let mut metrics = BTreeMap::new();
        let mut put = |name: &str, d: Option<Distribution>| {
            if let Some(d) = d {
                metrics.insert(name.to_string(), d);
            }
        };
        put("ttfb_ms", dist(&|m| m.ttfb_ms));
        put("ttfo_ms", dist(&|m| m.ttfo_ms));
        put("ttft_ms", dist(&|m| m.ttft_ms));
        put("e2e_ms", dist(&|m| m.e2e_ms));
        put("generation_ms", dist(&|m| m.generation_ms));
        put("decode_tok_s", dist(&|m| m.decode_tok_s));
        put("itl_ms", dist(&|m| m.itl_ms));
        put(
            "prompt_tokens",
            dist(&|m| m.prompt_tokens.map(|x| x as f64)),
        );
        put(
            "completion_tokens",
            dist(&|m| m.completion_tokens.map(|x| x as f64)),
        );
        put(
            "reasoning_tokens",
            dist(&|m| m.reasoning_tokens.map(|x| x as f64)),
        );
        put(
            "cached_tokens",
            dist(&|m| m.cached_tokens.map(|x| x as f64)),
        );
        let gaps: Vec<f64> = self.gaps_us.iter().map(|&g| g as f64 / 1e3).collect();
        put("chunk_gap_ms", Distribution::from_samples(&gaps, seed));
        put(
            "schedule_lag_ms",
            Distribution::from_samples(&self.lag_ms, seed),
        );
        put(
            "engine_reported_decode_tok_s",
            Distribution::from_samples(&self.engine_decode_tok_s, seed),
        );
        let window_s = match (self.first_send_ns, self.last_end_ns) {
            (Some(a), Some(b)) if b > a => Some((b - a) as f64 / 1e9),
            _ => None,
        };
        let completion: u64 = self
            .metrics
            .iter()
            .filter_map(|m| m.completion_tokens)
            .sum();
        let missing_usage = self
            .metrics
            .iter()
            .filter(|m| m.completion_tokens.is_none())
            .count() as u64;
        let prompt: u64 = self.metrics.iter().filter_map(|m| m.prompt_tokens).sum();
        RunStats {
            ok: self.ok(),
            failed: self.failed,
            warmup_excluded: self.warmup,
            failures_by_class: self
                .failures
                .iter()
                .map(|(k, v)| (k.as_str().to_string(), v.clone()))
                .collect(),
            window_s,
            completion_tokens_total: completion,
            requests_without_usage: missing_usage,
            aggregate_output_tok_s: window_s.map(|w| completion as f64 / w),
            prompt_tokens_total: prompt,
            aggregate_total_tok_s: window_s.map(|w| (prompt + completion) as f64 / w),
            request_rate_per_s: window_s.map(|w| self.ok() as f64 / w),
            prompt_token_mismatches: self.prompt_mismatches,
            prompt_token_mismatch_example: self.prompt_mismatch_example.clone(),
            prefix_cache: self.cache.clone(),
            arrival_resolution: {
                let mut r = self.resolution.clone();
                let share = |a: u64, b: u64| (b > 0).then(|| a as f64 / b as f64);
                r.shared_read_share = share(r.shared_read_events, r.events);
                r.unresolved_chunk_gap_share = share(
                    r.unresolved_chunk_gaps,
                    r.unresolved_chunk_gaps + self.gaps_us.len() as u64,
                );
                r
            },
            metrics,
            definitions: DEFINITIONS
                .iter()
                .chain(EXTRA_DEFINITIONS)
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        }
    }
}

/// Definitions of the metrics computed here from the per-request ones (beside `DEFINITIONS`).
pub const EXTRA_DEFINITIONS: &[(&str, &str)] = &[
    (
        "p999",
        "the 99.9th percentile, nearest rank (equals the maximum below 1000 samples)",
    ),
    (
        "std",
        "sample standard deviation (n - 1 in the denominator; 0 for one sample)",
    ),
    (
        "aggregate_total_tok_s",
        "(sum of prompt tokens + sum of completion tokens of the measured requests) / (last completion - first send)",
    ),
];

/// The statistics part of a bench summary.
#[derive(Debug, Clone, Serialize)]
pub struct RunStats {
    pub ok: u64,
    pub failed: u64,
    pub warmup_excluded: u64,
    pub failures_by_class: BTreeMap<String, FailureClass>,
    /// First send to last completion of the measured requests, seconds.
    pub window_s: Option<f64>,
    pub completion_tokens_total: u64,
    /// Successful requests whose stream carried no usage (token metrics are null for them).
    pub requests_without_usage: u64,
    pub aggregate_output_tok_s: Option<f64>,
    /// `usage.prompt_tokens` summed over the successful measured requests.
    pub prompt_tokens_total: u64,
    /// Input plus output tokens per second of the window (vLLM's "total token throughput").
    pub aggregate_total_tok_s: Option<f64>,
    pub request_rate_per_s: Option<f64>,
    pub prompt_token_mismatches: u64,
    pub prompt_token_mismatch_example: Option<String>,
    /// The server's prefix-cache use as its usage reported it.
    pub prefix_cache: PrefixCacheUse,
    /// Events the client could not tell apart (see [`ArrivalResolution`]).
    pub arrival_resolution: ArrivalResolution,
    pub metrics: BTreeMap<String, Distribution>,
    pub definitions: BTreeMap<String, String>,
}

impl RunStats {
    /// A plain-text table for the terminal.
    pub fn table(&self) -> String {
        let mut s = String::new();
        s.push_str(&format!(
            "{:<22}{:>10}{:>10}{:>10}{:>10}{:>10}{:>10}{:>10}{:>10}{:>10}   {}
",
            "metric",
            "p50",
            "p90",
            "p95",
            "p99",
            "p99.9",
            "mean",
            "std",
            "min",
            "max",
            "median interval (coverage)"
        ));
        const ORDER: &[&str] = &[
            "ttft_ms",
            "ttfo_ms",
            "ttfb_ms",
            "e2e_ms",
            "decode_tok_s",
            "itl_ms",
            "chunk_gap_ms",
            "prompt_tokens",
            "completion_tokens",
            "reasoning_tokens",
            "cached_tokens",
            "schedule_lag_ms",
            "engine_reported_decode_tok_s",
        ];
        for name in ORDER {
            if let Some(d) = self.metrics.get(*name) {
                s.push_str(&format!(
                    "{:<22}{:>10}{:>10}{:>10}{:>10}{:>10}{:>10}{:>10}{:>10}{:>10}   [{}, {}] ({:.1}% {})
",
                    name,
                    num(d.p50),
                    num(d.p90),
                    num(d.p95),
                    num(d.p99),
                    num(d.p999),
                    num(d.mean),
                    num(d.std),
                    num(d.min),
                    num(d.max),
                    num(d.median_ci[0]),
                    num(d.median_ci[1]),
                    d.median_ci_coverage * 100.0,
                    d.median_ci_method
                ));
            }
        }
        if self.metrics.contains_key("itl_ms") || self.metrics.contains_key("chunk_gap_ms") {
            s.push_str(LEGEND);
            s.push('\n');
        }
        s
    }
}

/// Printed under the table: the names people from other tools look for.
pub const LEGEND: &str = "itl_ms is the time per output token after the first (vLLM's TPOT, AIPerf's ITL); chunk_gap_ms is the gap between chunks (vLLM's ITL, AIPerf's ICL); docs/metrics.md maps every name";

fn num(x: f64) -> String {
    if x.abs() >= 1000.0 {
        format!("{x:.1}")
    } else if x.abs() >= 10.0 {
        format!("{x:.2}")
    } else {
        format!("{x:.3}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::client::trace::kind;
    use crate::client::{Event, RequestError, Usage};

    fn ok_trace(i: u64, send: u64, ttft_ms: u64, toks: u64) -> Trace {
        let mut events = vec![];
        for k in 0..toks {
            events.push(Event {
                t_ns: (ttft_ms + 10 * k) * 1_000_000,
                kind: kind::CONTENT,
            });
        }
        let end = (ttft_ms + 10 * (toks - 1)) * 1_000_000;
        events.push(Event {
            t_ns: end,
            kind: kind::DONE,
        });
        Trace {
            index: i,
            send_ns: send,
            events,
            end_ns: Some(end),
            usage: Some(Usage {
                prompt_tokens: Some(100),
                completion_tokens: Some(toks),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    #[test]
    fn failures_never_enter_percentiles_and_warmup_is_excluded() {
        let mut c = Collector::default();
        let mut w = ok_trace(0, 0, 900, 3);
        w.warmup = true;
        c.add(&w, Some(100));
        c.add(&ok_trace(1, 0, 50, 11), Some(100));
        c.add(&ok_trace(2, 1_000_000, 60, 11), Some(99));
        let mut bad = Trace {
            index: 3,
            send_ns: 0,
            ..Default::default()
        };
        bad.error = Some(RequestError::new(ErrorClass::HttpStatus, "HTTP 500: boom"));
        c.add(&bad, Some(100));
        let s = c.summarize(1);
        assert_eq!((s.ok, s.failed, s.warmup_excluded), (2, 1, 1));
        assert_eq!(s.failures_by_class["http-status"].count, 1);
        let ttft = &s.metrics["ttft_ms"];
        assert_eq!((ttft.min, ttft.max), (50.0, 60.0));
        assert_eq!(s.metrics["decode_tok_s"].p50, 100.0);
        assert_eq!(s.metrics["chunk_gap_ms"].p50, 10.0);
        // 22 tokens over first send (0) to last end (1 ms + 160 ms).
        assert_eq!(s.completion_tokens_total, 22);
        assert!((s.aggregate_output_tok_s.unwrap() - 22.0 / 0.161).abs() < 1e-6);
        assert_eq!(s.prompt_token_mismatches, 1);
        assert!(s.table().contains("ttft_ms"));
        let table = s.table();
        assert!(table.contains("p99.9") && table.contains(LEGEND), "{table}");
        assert!(s.definitions["p999"].contains("nearest rank"));
        assert_eq!(s.prefix_cache.requests_reporting, 0);
        assert!(s.prefix_cache.defeated_cache_warning().is_none());
    }

    #[test]
    fn events_one_read_returned_give_no_zero_gap() {
        let mut c = Collector::default();
        // Content at 10, 20, 20, 20 (one read), 30 ms; then finish, usage and [DONE] together.
        let ev = |ms: u64, kind| Event {
            t_ns: ms * 1_000_000,
            kind,
        };
        let mut t = ok_trace(0, 0, 10, 1);
        t.events = vec![
            ev(10, kind::CONTENT),
            ev(20, kind::CONTENT),
            ev(20, kind::CONTENT),
            ev(20, kind::CONTENT),
            ev(30, kind::CONTENT),
            ev(31, kind::FINISH),
            ev(31, kind::USAGE),
            ev(31, kind::DONE),
        ];
        c.add(&t, None);
        let s = c.summarize(1);
        let g = &s.metrics["chunk_gap_ms"];
        assert_eq!((g.n, g.min, g.max), (2, 10.0, 10.0));
        let r = &s.arrival_resolution;
        assert_eq!(
            (r.events, r.shared_read_events, r.unresolved_chunk_gaps),
            (8, 4, 2)
        );
        assert_eq!(r.shared_read_share, Some(0.5));
        assert_eq!(r.unresolved_chunk_gap_share, Some(0.5));
    }

    #[test]
    fn requests_served_from_the_prefix_cache_are_counted() {
        let mut c = Collector::default();
        for (i, cached) in [(0, 0), (1, 16), (2, 96)] {
            let mut t = ok_trace(i, 0, 50, 3);
            t.usage.as_mut().unwrap().cached_tokens = Some(cached);
            c.add(&t, Some(100));
        }
        c.add(&ok_trace(3, 0, 50, 3), Some(100));
        let p = c.summarize(1).prefix_cache;
        assert_eq!(p.requests_reporting, 3);
        // A 16-token shared prefix is not "served from cache"; 96 of 100 is.
        assert_eq!(p.requests_served_from_cache, 1);
        assert_eq!(p.cached_tokens_total, 112);
        let w = p.defeated_cache_warning().unwrap();
        assert!(
            w.contains("1 of 3 requests") && w.contains("request 2: 96 of 100"),
            "{w}"
        );
    }
}
