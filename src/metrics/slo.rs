//! Service-level objectives: limits on a run's latency statistics (`ttft_p95=500ms`), checked
//! against the run's distributions, and goodput: successful requests per second whose own
//! latencies each meet every limit (the definition `vllm bench serve --goodput` uses).
//!
//! `bakeoff bench --slo` and a campaign's SLO gates both use this module, so a limit means the
//! same thing in both.

use super::stats::Distribution;
use super::RequestMetrics;
use serde::Serialize;
use std::collections::BTreeMap;
use std::fmt;

/// The latency an objective limits (milliseconds).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum SloMetric {
    /// Request sent → first content token.
    Ttft,
    /// A request's mean gap between output tokens after the first (vLLM calls it TPOT; `tpot`
    /// is accepted as a name for it).
    Itl,
    /// Request sent → last byte.
    E2e,
}

impl SloMetric {
    /// The key of this metric in a run's distributions (`RunStats::metrics`).
    pub fn key(self) -> &'static str {
        match self {
            SloMetric::Ttft => "ttft_ms",
            SloMetric::Itl => "itl_ms",
            SloMetric::E2e => "e2e_ms",
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            SloMetric::Ttft => "ttft",
            SloMetric::Itl => "itl",
            SloMetric::E2e => "e2e",
        }
    }

    /// This request's own value, if it has one.
    pub fn of(self, m: &RequestMetrics) -> Option<f64> {
        match self {
            SloMetric::Ttft => m.ttft_ms,
            SloMetric::Itl => m.itl_ms,
            SloMetric::E2e => m.e2e_ms,
        }
    }

    fn parse(s: &str) -> Option<SloMetric> {
        match s {
            "ttft" => Some(SloMetric::Ttft),
            "itl" | "tpot" => Some(SloMetric::Itl),
            "e2e" | "e2el" => Some(SloMetric::E2e),
            _ => None,
        }
    }
}

/// Which statistic of the run's distribution the limit applies to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum SloStat {
    P50,
    P90,
    P95,
    P99,
    P999,
    Mean,
    Max,
}

impl SloStat {
    pub fn name(self) -> &'static str {
        match self {
            SloStat::P50 => "p50",
            SloStat::P90 => "p90",
            SloStat::P95 => "p95",
            SloStat::P99 => "p99",
            SloStat::P999 => "p99.9",
            SloStat::Mean => "mean",
            SloStat::Max => "max",
        }
    }

    pub fn of(self, d: &Distribution) -> f64 {
        match self {
            SloStat::P50 => d.p50,
            SloStat::P90 => d.p90,
            SloStat::P95 => d.p95,
            SloStat::P99 => d.p99,
            SloStat::P999 => d.p999,
            SloStat::Mean => d.mean,
            SloStat::Max => d.max,
        }
    }

    fn parse(s: &str) -> Option<SloStat> {
        match s {
            "p50" | "median" => Some(SloStat::P50),
            "p90" => Some(SloStat::P90),
            "p95" => Some(SloStat::P95),
            "p99" => Some(SloStat::P99),
            "p99.9" | "p999" => Some(SloStat::P999),
            "mean" => Some(SloStat::Mean),
            "max" => Some(SloStat::Max),
            _ => None,
        }
    }
}

/// One objective: `stat(metric) <= limit_ms` over a run.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct SloLimit {
    pub metric: SloMetric,
    pub stat: SloStat,
    pub limit_ms: f64,
}

impl fmt::Display for SloLimit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} {} <= {} ms",
            self.metric.name(),
            self.stat.name(),
            trim(self.limit_ms)
        )
    }
}

fn trim(x: f64) -> String {
    let s = format!("{x:.3}");
    s.trim_end_matches('0').trim_end_matches('.').to_string()
}

const FORM: &str = "write METRIC_STAT=LIMIT, e.g. ttft_p95=500ms,itl_p99=50ms,e2e_p50=2s (metrics: ttft, itl (= tpot), e2e; stats: p50, p90, p95, p99, p99.9, mean, max; limits in ms or s)";

impl SloLimit {
    /// One entry: `ttft_p95=500ms`, `itl_p99=0.05s`, `e2e_mean=2000` (a bare number is ms).
    pub fn parse(entry: &str) -> Result<SloLimit, String> {
        let entry = entry.trim();
        let (name, value) = entry
            .split_once('=')
            .ok_or_else(|| format!("`{entry}`: no `=`; {FORM}"))?;
        let (metric, stat) = name
            .trim()
            .split_once('_')
            .ok_or_else(|| format!("`{entry}`: `{name}` is not METRIC_STAT; {FORM}"))?;
        let metric = SloMetric::parse(metric)
            .ok_or_else(|| format!("`{entry}`: unknown metric `{metric}`; {FORM}"))?;
        let stat = SloStat::parse(stat)
            .ok_or_else(|| format!("`{entry}`: unknown statistic `{stat}`; {FORM}"))?;
        let limit_ms = parse_ms(value.trim())
            .ok_or_else(|| format!("`{entry}`: `{value}` is not a duration; {FORM}"))?;
        if !(limit_ms > 0.0 && limit_ms <= 86_400_000.0) {
            return Err(format!(
                "`{entry}`: the limit must be above 0 and at most 24 h"
            ));
        }
        Ok(SloLimit {
            metric,
            stat,
            limit_ms,
        })
    }

    /// A limit as [`Display`](fmt::Display) writes it (`ttft p95 <= 500 ms`, the form the
    /// evidence records); None for any other text.
    pub fn from_words(words: &str) -> Option<SloLimit> {
        match words.split_whitespace().collect::<Vec<_>>()[..] {
            [metric, stat, "<=", limit, "ms"] => Some(SloLimit {
                metric: SloMetric::parse(metric)?,
                stat: SloStat::parse(stat)?,
                limit_ms: limit.parse().ok().filter(|v: &f64| v.is_finite())?,
            }),
            _ => None,
        }
    }

    /// A comma list of entries; a metric and statistic given twice is an error.
    pub fn parse_list(list: &str) -> Result<Vec<SloLimit>, String> {
        let mut out: Vec<SloLimit> = Vec::new();
        for entry in list.split(',').filter(|e| !e.trim().is_empty()) {
            let l = SloLimit::parse(entry)?;
            if out.iter().any(|o| o.metric == l.metric && o.stat == l.stat) {
                return Err(format!(
                    "`{}`: {} {} is limited twice; give each once",
                    entry.trim(),
                    l.metric.name(),
                    l.stat.name()
                ));
            }
            out.push(l);
        }
        if out.is_empty() {
            return Err(format!("no objective given; {FORM}"));
        }
        Ok(out)
    }

    /// Whether one request's own value meets the limit (the goodput test). A request without
    /// the value (no first token, one output token for ITL) does not meet it.
    pub fn request_meets(&self, m: &RequestMetrics) -> bool {
        self.metric.of(m).is_some_and(|v| v <= self.limit_ms)
    }
}

fn parse_ms(v: &str) -> Option<f64> {
    let (num, scale) = if let Some(n) = v.strip_suffix("ms") {
        (n, 1.0)
    } else if let Some(n) = v.strip_suffix('s') {
        (n, 1000.0)
    } else {
        (v, 1.0)
    };
    let x: f64 = num.trim().parse().ok()?;
    x.is_finite().then_some(x * scale)
}

/// One objective checked against a run.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SloCheck {
    pub limit: SloLimit,
    /// The run's value of the statistic; None when the run has no sample of the metric.
    pub observed_ms: Option<f64>,
    /// False when the value is over the limit or was not measured (an objective nobody could
    /// check is not met).
    pub met: bool,
}

impl fmt::Display for SloCheck {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.observed_ms {
            Some(v) => write!(
                f,
                "{}: {} ms, {}",
                self.limit,
                trim(v),
                if self.met { "met" } else { "BROKEN" }
            ),
            None => write!(f, "{}: not measured, BROKEN", self.limit),
        }
    }
}

/// Checks every limit against a run's distributions (keyed as `RunStats::metrics`).
pub fn check(limits: &[SloLimit], metrics: &BTreeMap<String, Distribution>) -> Vec<SloCheck> {
    limits
        .iter()
        .map(|l| {
            let observed_ms = metrics.get(l.metric.key()).map(|d| l.stat.of(d));
            SloCheck {
                limit: *l,
                observed_ms,
                met: observed_ms.is_some_and(|v| v <= l.limit_ms),
            }
        })
        .collect()
}

/// Goodput of a run: how many successful requests met every limit with their own values, and
/// that count per second of the measured window.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Goodput {
    pub requests_meeting: u64,
    pub requests_ok: u64,
    /// `requests_meeting / window_s`; None without a window.
    pub goodput_req_s: Option<f64>,
}

/// `ok` holds the metrics of the run's successful, measured (not warm-up) requests.
pub fn goodput<'a>(
    limits: &[SloLimit],
    ok: impl IntoIterator<Item = &'a RequestMetrics>,
    window_s: Option<f64>,
) -> Goodput {
    let (mut meeting, mut total) = (0u64, 0u64);
    for m in ok {
        total += 1;
        if limits.iter().all(|l| l.request_meets(m)) {
            meeting += 1;
        }
    }
    Goodput {
        requests_meeting: meeting,
        requests_ok: total,
        goodput_req_s: window_s.filter(|w| *w > 0.0).map(|w| meeting as f64 / w),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_limit_reads_back_from_the_words_it_is_written_in() {
        for entry in ["ttft_p95=500ms", "itl_p99.9=0.05s", "e2e_mean=2500"] {
            let l = SloLimit::parse(entry).unwrap();
            assert_eq!(SloLimit::from_words(&l.to_string()), Some(l), "{l}");
        }
        assert_eq!(SloLimit::from_words("ttft p95 < 500 ms"), None);
        assert_eq!(SloLimit::from_words("failed share <= 5 %"), None);
    }

    fn req(ttft: Option<f64>, itl: Option<f64>, e2e: Option<f64>) -> RequestMetrics {
        RequestMetrics {
            ttft_ms: ttft,
            itl_ms: itl,
            e2e_ms: e2e,
            ..RequestMetrics::default()
        }
    }

    #[test]
    fn entries_parse_with_units_and_aliases() {
        let l = SloLimit::parse_list("ttft_p95=500ms, tpot_p99=0.05s,e2el_mean=2000,itl_p99.9=7ms")
            .unwrap();
        assert_eq!(
            l[0],
            SloLimit {
                metric: SloMetric::Ttft,
                stat: SloStat::P95,
                limit_ms: 500.0
            }
        );
        assert_eq!(
            (l[1].metric, l[1].stat, l[1].limit_ms),
            (SloMetric::Itl, SloStat::P99, 50.0)
        );
        assert_eq!(
            (l[2].metric, l[2].stat, l[2].limit_ms),
            (SloMetric::E2e, SloStat::Mean, 2000.0)
        );
        assert_eq!(l[3].stat, SloStat::P999);
        assert_eq!(l[0].to_string(), "ttft p95 <= 500 ms");
    }

    #[test]
    fn bad_entries_say_what_is_wrong_and_the_form() {
        for (bad, words) in [
            ("ttft_p95", "no `=`"),
            ("ttft=5ms", "not METRIC_STAT"),
            ("tft_p95=5ms", "unknown metric `tft`"),
            ("ttft_p97=5ms", "unknown statistic `p97`"),
            ("ttft_p95=fast", "not a duration"),
            ("ttft_p95=0ms", "above 0"),
            ("ttft_p95=5ms,ttft_p95=6ms", "limited twice"),
            ("", "no objective"),
        ] {
            let e = SloLimit::parse_list(bad).unwrap_err();
            assert!(e.contains(words), "{bad}: {e}");
            // Every error about the form shows the form.
            if !matches!(words, "above 0" | "limited twice") {
                assert!(e.contains("ttft_p95=500ms"), "{bad}: {e}");
            }
        }
    }

    #[test]
    fn checks_compare_the_stat_and_an_unmeasured_metric_is_broken() {
        let limits = SloLimit::parse_list("ttft_p50=20ms,ttft_max=25ms,itl_p99=1ms").unwrap();
        let mut metrics = BTreeMap::new();
        let samples: Vec<f64> = (1..=30).map(f64::from).collect();
        metrics.insert(
            "ttft_ms".to_string(),
            Distribution::from_samples(&samples, 0).unwrap(),
        );
        let c = check(&limits, &metrics);
        assert_eq!(c[0].observed_ms, Some(15.0));
        assert!(c[0].met);
        assert_eq!(c[1].observed_ms, Some(30.0));
        assert!(!c[1].met);
        assert_eq!(c[2].observed_ms, None);
        assert!(!c[2].met);
        assert!(c[2].to_string().contains("not measured"));
    }

    #[test]
    fn goodput_counts_requests_meeting_every_limit_with_their_own_values() {
        let limits = SloLimit::parse_list("ttft_p95=100ms,itl_p99=10ms").unwrap();
        let reqs = [
            req(Some(50.0), Some(5.0), Some(500.0)),   // meets both
            req(Some(150.0), Some(5.0), Some(500.0)),  // TTFT over
            req(Some(50.0), Some(12.0), Some(500.0)),  // ITL over
            req(Some(50.0), None, Some(60.0)),         // one token: no ITL, not met
            req(Some(100.0), Some(10.0), Some(900.0)), // at the limits: met
        ];
        let g = goodput(&limits, reqs.iter(), Some(2.0));
        assert_eq!(g.requests_meeting, 2);
        assert_eq!(g.requests_ok, 5);
        assert_eq!(g.goodput_req_s, Some(1.0));
        assert_eq!(goodput(&limits, reqs.iter(), None).goodput_req_s, None);
    }
}
