//! Per-request metrics computed from a trace, with the definitions of ARCHITECTURE.md.

pub mod slo;
pub mod stats;
pub mod summary;

use crate::client::trace::kind;
use crate::client::Trace;
use serde::Serialize;

/// Names and definitions written into every artifact beside the numbers.
pub const DEFINITIONS: &[(&str, &str)] = &[
    ("ttfb_ms", "request sent -> first response byte"),
    (
        "ttfo_ms",
        "request sent -> first chunk carrying generated output (content, reasoning or a tool-call delta)",
    ),
    (
        "ttft_ms",
        "request sent -> first chunk with non-empty visible content (role-only, empty, comment, keep-alive and usage-only chunks never count)",
    ),
    ("e2e_ms", "request sent -> end of stream (data: [DONE])"),
    ("generation_ms", "e2e - ttfo"),
    (
        "decode_tok_s",
        "(usage.completion_tokens - 1) / generation time; null when usage is missing or <= 1 token",
    ),
    ("itl_ms", "generation time / (usage.completion_tokens - 1) (token-normalised)"),
    (
        "chunk_gap_ms",
        "gaps between consecutive chunks carrying generated output (ICL; differs from ITL when a chunk carries several tokens); gaps between chunks one read returned together (the same arrival stamp) are left out and counted in arrival_resolution",
    ),
    ("prompt_tokens", "usage.prompt_tokens reported by the endpoint"),
    ("completion_tokens", "usage.completion_tokens reported by the endpoint"),
    (
        "percentiles",
        "nearest rank over successful samples: sort, rank = ceil(p*n/100), 1-based",
    ),
    (
        "aggregate_output_tok_s",
        "sum of completion tokens of the measured requests / (last completion - first send)",
    ),
];

/// Metrics of one successful request (milliseconds; None where undefined).
#[derive(Debug, Clone, Default, Serialize)]
pub struct RequestMetrics {
    pub ttfb_ms: Option<f64>,
    pub ttfo_ms: Option<f64>,
    pub ttft_ms: Option<f64>,
    pub e2e_ms: Option<f64>,
    pub generation_ms: Option<f64>,
    pub decode_tok_s: Option<f64>,
    pub itl_ms: Option<f64>,
    pub prompt_tokens: Option<u64>,
    pub completion_tokens: Option<u64>,
    pub reasoning_tokens: Option<u64>,
    pub cached_tokens: Option<u64>,
    /// Chunks that carried output (the client's own count of output units).
    pub output_chunks: u64,
}

fn ms(ns: u64) -> f64 {
    ns as f64 / 1e6
}

impl RequestMetrics {
    pub fn from_trace(t: &Trace) -> RequestMetrics {
        let first = |mask: u8| t.events.iter().find(|e| e.kind & mask != 0).map(|e| e.t_ns);
        let ttfo = first(kind::OUTPUT);
        let ttft = first(kind::CONTENT);
        let usage = t.usage.as_ref();
        let completion = usage.and_then(|u| u.completion_tokens);
        let gen = match (t.end_ns, ttfo) {
            (Some(e), Some(o)) if e >= o => Some(e - o),
            _ => None,
        };
        let (decode, itl) = match (completion, gen) {
            (Some(c), Some(g)) if c > 1 && g > 0 => {
                let g = g as f64 / 1e9;
                (Some((c - 1) as f64 / g), Some(g * 1e3 / (c - 1) as f64))
            }
            _ => (None, None),
        };
        RequestMetrics {
            ttfb_ms: t.first_byte_ns.map(ms),
            ttfo_ms: ttfo.map(ms),
            ttft_ms: ttft.map(ms),
            e2e_ms: t.end_ns.map(ms),
            generation_ms: gen.map(ms),
            decode_tok_s: decode,
            itl_ms: itl,
            prompt_tokens: usage.and_then(|u| u.prompt_tokens),
            completion_tokens: completion,
            reasoning_tokens: usage.and_then(|u| u.reasoning_tokens),
            cached_tokens: usage.and_then(|u| u.cached_tokens),
            output_chunks: t
                .events
                .iter()
                .filter(|e| e.kind & kind::OUTPUT != 0)
                .count() as u64,
        }
    }
}

/// Gaps (ns) between consecutive output-bearing chunks of one trace.
pub fn chunk_gaps_ns(t: &Trace) -> impl Iterator<Item = u64> + '_ {
    let mut prev: Option<u64> = None;
    t.events.iter().filter_map(move |e| {
        if e.kind & kind::OUTPUT == 0 {
            return None;
        }
        let gap = prev.map(|p| e.t_ns - p);
        prev = Some(e.t_ns);
        gap
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::client::{Event, Usage};

    fn ev(t_ms: u64, k: u8) -> Event {
        Event {
            t_ns: t_ms * 1_000_000,
            kind: k,
        }
    }

    #[test]
    fn role_and_reasoning_do_not_count_as_first_token() {
        let t = Trace {
            first_byte_ns: Some(2_000_000),
            events: vec![
                ev(2, kind::ROLE),
                ev(0, 0),
                ev(10, kind::REASONING),
                ev(30, kind::CONTENT),
                ev(40, kind::CONTENT),
                ev(50, kind::CONTENT | kind::FINISH),
                ev(51, kind::USAGE),
                ev(51, kind::DONE),
            ],
            end_ns: Some(51_000_000),
            usage: Some(Usage {
                completion_tokens: Some(5),
                prompt_tokens: Some(9),
                ..Default::default()
            }),
            ..Default::default()
        };
        let m = RequestMetrics::from_trace(&t);
        assert_eq!(m.ttfb_ms, Some(2.0));
        assert_eq!(m.ttfo_ms, Some(10.0));
        assert_eq!(m.ttft_ms, Some(30.0));
        assert_eq!(m.e2e_ms, Some(51.0));
        assert_eq!(m.generation_ms, Some(41.0));
        // 4 tokens after the first over 41 ms.
        assert!((m.decode_tok_s.unwrap() - 4.0 / 0.041).abs() < 1e-9);
        assert!((m.itl_ms.unwrap() - 10.25).abs() < 1e-9);
        assert_eq!(m.output_chunks, 4);
        let gaps: Vec<u64> = chunk_gaps_ns(&t).collect();
        assert_eq!(gaps, vec![20_000_000, 10_000_000, 10_000_000]);
    }

    #[test]
    fn decode_is_null_without_usage_or_single_token() {
        let mut t = Trace {
            events: vec![ev(5, kind::CONTENT), ev(6, kind::DONE)],
            end_ns: Some(6_000_000),
            ..Default::default()
        };
        assert_eq!(RequestMetrics::from_trace(&t).decode_tok_s, None);
        t.usage = Some(Usage {
            completion_tokens: Some(1),
            ..Default::default()
        });
        assert_eq!(RequestMetrics::from_trace(&t).decode_tok_s, None);
    }
}
