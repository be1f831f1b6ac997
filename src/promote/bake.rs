//! The bake: the winner serves the lane under the campaign's workload for the bake window; each
//! interval is judged against the campaign's SLOs, the error budget and the arm's own bake-off
//! figures (`[promotion]` thresholds). An interval with too few requests is inconclusive: said,
//! never a pass. `failure_limit` failed intervals, the winner's exit, `--abort` or a signal end
//! it with a rollback; `--finish` keeps the winner.

use super::record::{Folder, Interval};
use super::traffic::{self, Measured};
use super::{Baseline, Options, Source};
use crate::campaign::PromotionTable;
use crate::evidence::bundle;
use crate::lane::Running;
use serde_json::{json, Value};
use std::time::{Duration, Instant};

/// How the bake ended.
pub enum BakeEnd {
    /// Every interval of the window ran and fewer than `failure_limit` failed.
    Passed(String),
    /// `bakeoff promote --finish`: kept early.
    Finished(String),
    /// Failed intervals, the winner's exit, `--abort`, a signal.
    Failed(String),
}

/// What `--abort` / `--finish` asked (read from the control file beside the folder).
fn control(o: &Options) -> Option<String> {
    let p = bundle::promotion_control(&o.out);
    let s = std::fs::read_to_string(&p).ok()?;
    let _ = std::fs::remove_file(&p);
    Some(s.trim().to_string())
}

/// Resolves once a signal arrived.
async fn cancelled(mut rx: super::Cancel) {
    loop {
        if rx.borrow_and_update().is_some() {
            return;
        }
        if rx.changed().await.is_err() {
            std::future::pending::<()>().await;
        }
    }
}

pub async fn run(s: &Source, o: &Options, f: &mut Folder, running: &mut Running) -> BakeEnd {
    let t = &o.table;
    let target = running.target.clone();
    // Sized on the winner before the window opens, as the bake-off's timing steps were.
    let work = match traffic::prepare(&s.campaign, &s.arm, &target).await {
        Ok(w) => w,
        Err(e) => {
            return BakeEnd::Failed(format!(
                "the bake cannot send the campaign's workload to `{}`: {e}",
                s.arm.id
            ))
        }
    };
    f.rec.bake["workload"] = work.record.clone();
    let _ = f.save();
    let started = Instant::now();
    let length = Duration::from_secs_f64(t.interval_s);
    let slo = s.campaign.workload.slo_at(1);
    // Loaded and checked before the switch (`check::bake_inputs`).
    let canary_checks = &s.canary;
    let gate_ctx = super::canary::context(&s.campaign, &s.arm, &target);
    let (mut failed, mut passed, mut inconclusive) = (0u32, 0u32, 0u32);
    let mut index = 0;
    let mut sent = 0u64;
    (o.say)(&format!(
        "baking `{}` for {:.0} s",
        s.arm.id,
        o.bake.as_secs_f64()
    ));
    while started.elapsed() + length <= o.bake + Duration::from_millis(50) {
        index += 1;
        let at = crate::clock::wall_rfc3339();
        // The canary runs beside the interval's traffic, every `canary_every`-th interval.
        let canary_now = !canary_checks.is_empty() && index % t.canary_every == 0;
        let measure = async {
            let src = work.source(u64::from(index), sent);
            let traffic = traffic::interval(&target, src, t.rate, length);
            if canary_now {
                let (m, c) = tokio::join!(traffic, super::canary::run(&gate_ctx, canary_checks));
                (m, Some(c))
            } else {
                (traffic.await, None)
            }
        };
        let (m, canary) = tokio::select! {
            m = measure => m,
            _ = cancelled(o.cancel.clone()) => {
                let sig = o.cancel.borrow().unwrap_or("a signal");
                return BakeEnd::Failed(format!("{sig} arrived during the bake (interval {index})"));
            }
        };
        sent += m.ok + m.failed;
        let mut iv = judge(index, at, length, &m, &s.baseline, t, &slo);
        if let Some(c) = canary {
            with_canary(&mut iv, c);
        }
        (o.say)(&format!("interval {index}: {} ({})", iv.outcome, iv.detail));
        match iv.outcome.as_str() {
            "fail" => failed += 1,
            "pass" => passed += 1,
            _ => inconclusive += 1,
        }
        f.rec.intervals.push(iv);
        let _ = f.save();
        if index == 1 {
            crate::run::testhook::pause("promote-baking").await;
        }
        if running.crashed() {
            return BakeEnd::Failed(format!(
                "`{}` exited during the bake (interval {index})",
                s.arm.id
            ));
        }
        if failed >= t.failure_limit {
            return BakeEnd::Failed(format!(
                "{failed} failed bake interval(s) of {index} reached the failure limit {}",
                t.failure_limit
            ));
        }
        match control(o).as_deref() {
            Some("abort") => return BakeEnd::Failed(format!("the operator aborted the bake (bakeoff promote --abort) after interval {index}")),
            Some("finish") => return BakeEnd::Finished(format!("the operator ended the bake early (bakeoff promote --finish) after interval {index}: {passed} passed, {failed} failed, {inconclusive} inconclusive")),
            _ => {}
        }
    }
    if passed == 0 {
        return BakeEnd::Failed(format!(
            "no bake interval passed ({index} ran: {failed} failed, {inconclusive} inconclusive): nothing shows the winner holds; raise the bake's rate or length"
        ));
    }
    BakeEnd::Passed(format!(
        "the bake held: {index} interval(s), {passed} passed, {failed} failed (limit {}), {inconclusive} inconclusive",
        t.failure_limit
    ))
}

/// One interval's verdict from what it measured.
pub fn judge(
    index: u32,
    started_at: String,
    length: Duration,
    m: &Measured,
    base: &Baseline,
    t: &PromotionTable,
    slo: &[crate::metrics::slo::SloLimit],
) -> Interval {
    let ttft = m.metrics.get("ttft_ms").map(|d| d.p95);
    let decode = m.metrics.get("decode_tok_s").map(|d| d.p50);
    let total = m.ok + m.failed;
    let mut checks: Vec<Value> = Vec::new();
    let mut bad: Vec<String> = Vec::new();
    let fail_pct = if total > 0 {
        m.failed as f64 * 100.0 / total as f64
    } else {
        0.0
    };
    let budget_ok = fail_pct <= t.error_budget_pct;
    checks.push(json!({"check": "error_budget", "failed_pct": fail_pct, "limit_pct": t.error_budget_pct, "met": budget_ok}));
    if !budget_ok {
        bad.push(format!(
            "{} of {total} requests failed ({fail_pct:.1} % > {} %){}",
            m.failed,
            t.error_budget_pct,
            m.errors
                .first()
                .map(|e| format!(": {e}"))
                .unwrap_or_default()
        ));
    }
    if (m.ok as f64) < t.min_requests as f64 {
        let detail = format!(
            "{} successful request(s), fewer than min_requests {}",
            m.ok, t.min_requests
        );
        // Too few samples to judge latency; failed requests still fail the interval.
        let outcome = if budget_ok || total == 0 {
            "inconclusive"
        } else {
            "fail"
        };
        return interval(
            index,
            started_at,
            length,
            m,
            ttft,
            decode,
            outcome,
            checks,
            if bad.is_empty() {
                detail
            } else {
                format!("{}; {detail}", bad.join("; "))
            },
        );
    }
    if let (Some(b), Some(x)) = (base.ttft_p95_ms, ttft) {
        let limit = b * (1.0 + t.ttft_p95_within_pct / 100.0);
        let met = x <= limit;
        checks.push(json!({"check": "ttft_p95_ms", "observed": x, "bake_off": b, "limit": limit, "met": met}));
        if !met {
            bad.push(format!(
                "TTFT p95 {x:.1} ms > {limit:.1} ms (bake-off {b:.1} ms +{} %)",
                t.ttft_p95_within_pct
            ));
        }
    }
    if let (Some(b), Some(x)) = (base.decode_tok_s_p50, decode) {
        let limit = b * (1.0 - t.decode_tok_s_within_pct / 100.0);
        let met = x >= limit;
        checks.push(json!({"check": "decode_tok_s_p50", "observed": x, "bake_off": b, "limit": limit, "met": met}));
        if !met {
            bad.push(format!(
                "decode {x:.1} tok/s < {limit:.1} (bake-off {b:.1} −{} %)",
                t.decode_tok_s_within_pct
            ));
        }
    }
    for ck in crate::metrics::slo::check(slo, &m.metrics) {
        checks.push(json!({"check": "slo", "slo": ck.to_string(), "met": ck.met}));
        if !ck.met {
            bad.push(format!("SLO {ck}"));
        }
    }
    let (outcome, detail) = if bad.is_empty() {
        ("pass", format!("{} requests; every check met", m.ok))
    } else {
        ("fail", bad.join("; "))
    };
    interval(
        index, started_at, length, m, ttft, decode, outcome, checks, detail,
    )
}

/// Adds the canary's gates to an interval: a failed gate fails it (also an inconclusive one: a
/// broken tool call is evidence however few requests the traffic had).
pub fn with_canary(iv: &mut Interval, c: super::canary::Outcome) {
    iv.checks.extend(c.checks);
    if c.failures.is_empty() {
        return;
    }
    let failures = c.failures.join("; ");
    iv.detail = if iv.outcome == "fail" {
        format!("{}; {failures}", iv.detail)
    } else {
        failures
    };
    iv.outcome = "fail".into();
}

#[allow(clippy::too_many_arguments)]
fn interval(
    index: u32,
    started_at: String,
    length: Duration,
    m: &Measured,
    ttft: Option<f64>,
    decode: Option<f64>,
    outcome: &str,
    checks: Vec<Value>,
    detail: String,
) -> Interval {
    Interval {
        index,
        started_at,
        seconds: length.as_secs_f64(),
        requests_ok: m.ok,
        requests_failed: m.failed,
        ttft_p95_ms: ttft,
        decode_tok_s_p50: decode,
        outcome: outcome.into(),
        checks,
        detail,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metrics::stats::Distribution;

    fn measured(ok: u64, failed: u64, ttft: f64) -> Measured {
        let mut m = Measured {
            ok,
            failed,
            ..Default::default()
        };
        let v: Vec<f64> = (0..ok).map(|_| ttft).collect();
        if let Some(d) = Distribution::from_samples(&v, 0) {
            m.metrics.insert("ttft_ms".into(), d);
        }
        m
    }

    #[test]
    fn an_interval_is_judged_against_the_bake_off_and_says_inconclusive() {
        let t = PromotionTable {
            min_requests: 5,
            ttft_p95_within_pct: 20.0,
            ..Default::default()
        };
        let base = Baseline {
            ttft_p95_ms: Some(100.0),
            decode_tok_s_p50: None,
        };
        let l = Duration::from_secs(1);
        let j = |m: &Measured| judge(1, String::new(), l, m, &base, &t, &[]);
        assert_eq!(j(&measured(10, 0, 110.0)).outcome, "pass");
        let slow = j(&measured(10, 0, 121.0));
        assert_eq!(slow.outcome, "fail");
        assert!(
            slow.detail.contains("TTFT p95 121.0 ms > 120.0 ms"),
            "{}",
            slow.detail
        );
        let few = j(&measured(3, 0, 500.0));
        assert_eq!(
            few.outcome, "inconclusive",
            "too few requests never pass nor fail on latency"
        );
        assert_eq!(
            j(&measured(3, 2, 100.0)).outcome,
            "fail",
            "failed requests still count"
        );
        assert_eq!(j(&measured(0, 0, 0.0)).outcome, "inconclusive");

        // A failed canary gate fails the interval, also one with too few requests.
        let canary = |fail: bool| crate::promote::canary::Outcome {
            checks: vec![serde_json::json!({"check": "canary", "gate": "tools", "met": !fail})],
            failures: if fail {
                vec!["canary tools: 0/2 calls valid".into()]
            } else {
                vec![]
            },
        };
        let mut few = j(&measured(3, 0, 100.0));
        with_canary(&mut few, canary(true));
        assert_eq!(
            (few.outcome.as_str(), few.detail.as_str()),
            ("fail", "canary tools: 0/2 calls valid")
        );
        let mut ok = j(&measured(10, 0, 110.0));
        with_canary(&mut ok, canary(false));
        assert_eq!(ok.outcome, "pass");
        assert_eq!(ok.checks.last().unwrap()["gate"], "tools");
    }
}
