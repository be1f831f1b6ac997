//! The verdict's SLO gates, goodput ranking, the named concurrency level and speculative arms
//! against their control at every level, on small synthetic results.

use crate::decide::{decide, metric};
use crate::evidence::result::*;
use crate::evidence::{FailureClass, Policy, RankingMetric};
use std::collections::BTreeMap;

fn stat(p50: f64, half: f64) -> Stat {
    Stat {
        p50,
        ci95: [p50 - half, p50 + half],
        p95: p50 + half,
        n: 8,
        ci_method: Some(CiMethod::OrderStatistic),
        ci_coverage: Some(0.9922),
    }
}

/// A level's record: TTFT and E2E medians, aggregate throughput, and (when given) one SLO check
/// and goodput.
fn level(ev: &str, n: u64, ttft: f64, e2e: f64, tput: f64) -> TimingRecord {
    TimingRecord {
        evidence: ev.into(),
        concurrency: n,
        requests_ok: 8,
        ttft_ms: Some(stat(ttft, 1.0)),
        decode_tok_s: Some(stat(50.0, 1.0)),
        e2e_ms: Some(stat(e2e, 2.0)),
        aggregate_output_tok_s: Some(tput),
        ..Default::default()
    }
}

fn with_slo(mut t: TimingRecord, limit: &str, observed: f64, met: bool, good: f64) -> TimingRecord {
    t.slo = vec![SloCheckRecord {
        limit: limit.into(),
        observed_ms: Some(observed),
        met,
    }];
    t.goodput = Some(GoodputRecord {
        requests_meeting: (good * 2.0) as u64,
        requests_ok: 8,
        goodput_req_s: Some(good),
    });
    t
}

fn arm(id: &str, ttft: f64, c2: TimingRecord, c4: TimingRecord) -> ArmResult {
    ArmResult {
        id: id.into(),
        label: id.into(),
        role: "candidate".into(),
        served_context: 4096,
        status: ArmStatus::Completed,
        warm: Some(level(
            &format!("{id}-timing-64-c1-warm.json"),
            1,
            ttft,
            900.0,
            60.0,
        )),
        concurrency: BTreeMap::from([("2".into(), c2), ("4".into(), c4)]),
        ..Default::default()
    }
}

fn result(prios: Vec<RankingMetric>, arms: Vec<ArmResult>) -> CampaignResult {
    let mut r = CampaignResult::new("slo");
    r.complete = true;
    r.workload.ranking_priority = prios;
    r.workload.concurrency = vec![1, 2, 4];
    r.arms = arms;
    r
}

fn c(id: &str, n: u64) -> String {
    format!("{id}-timing-64-c{n}-warm.json")
}

#[test]
fn an_arm_that_breaks_an_slo_at_a_level_is_ineligible_with_its_own_class() {
    let limit = "ttft p95 <= 500 ms";
    let a = arm(
        "fast",
        40.0,
        level(&c("fast", 2), 2, 50.0, 1000.0, 100.0),
        with_slo(
            level(&c("fast", 4), 4, 400.0, 1200.0, 180.0),
            limit,
            812.25,
            false,
            1.0,
        ),
    );
    let b = arm(
        "steady",
        60.0,
        level(&c("steady", 2), 2, 70.0, 1000.0, 90.0),
        with_slo(
            level(&c("steady", 4), 4, 300.0, 1300.0, 150.0),
            limit,
            420.0,
            true,
            3.0,
        ),
    );
    let mut r = result(vec![RankingMetric::Ttft], vec![a, b]);
    r.workload.slo = vec![SloGate {
        limit: "ttft_p95=500ms".into(),
        concurrency: Some(4),
    }];
    let v = decide(&r, &Policy::default());
    assert_eq!(v.ranking, ["steady"], "{:?}", v.failures);
    let f = v.failures.iter().find(|f| f.arm == "fast").unwrap();
    assert_eq!(f.class, FailureClass::SloViolated);
    assert_eq!(
        f.detail,
        "ttft p95 <= 500 ms broken at C4: observed 812.2 ms"
    );
    assert_eq!(f.evidence.as_deref(), Some("fast-timing-64-c4-warm.json"));
    let fast = v.arms.iter().find(|a| a.id == "fast").unwrap();
    assert!(fast.decision.contains("slo-violated"), "{}", fast.decision);
}

#[test]
fn an_slo_at_a_level_a_failed_arm_never_reached_is_covered_by_its_failure() {
    let mut a = arm(
        "crashy",
        40.0,
        level(&c("crashy", 2), 2, 50.0, 1000.0, 100.0),
        level(&c("crashy", 4), 4, 50.0, 1000.0, 100.0),
    );
    a.concurrency.remove("4");
    a.status = ArmStatus::Failed;
    a.failure = Some(Failure {
        class: FailureClass::Crash,
        detail: "the process exited during timing 64-c4-warm".into(),
        evidence: Some(c("crashy", 4)),
    });
    let mut r = result(vec![RankingMetric::Ttft], vec![a]);
    r.workload.slo = vec![SloGate {
        limit: "ttft_p95=500ms".into(),
        concurrency: Some(4),
    }];
    let v = decide(&r, &Policy::default());
    assert_eq!(v.failures.len(), 1, "{:?}", v.failures);
    assert_eq!(v.failures[0].class, FailureClass::Crash);
    assert!(
        v.limitations
            .iter()
            .any(|l| l.contains("not measured at C4") && l.contains("already makes it ineligible")),
        "{:?}",
        v.limitations
    );
}

#[test]
fn goodput_ranks_at_the_named_level_and_the_reason_names_it() {
    let limit = "ttft p95 <= 500 ms";
    // `many` has more goodput at C2, `few` at C4: the named level decides.
    let many = arm(
        "many",
        40.0,
        with_slo(
            level(&c("many", 2), 2, 50.0, 1000.0, 100.0),
            limit,
            100.0,
            true,
            3.5,
        ),
        with_slo(
            level(&c("many", 4), 4, 50.0, 1000.0, 100.0),
            limit,
            200.0,
            true,
            2.0,
        ),
    );
    let few = arm(
        "few",
        40.0,
        with_slo(
            level(&c("few", 2), 2, 50.0, 1000.0, 100.0),
            limit,
            100.0,
            true,
            1.5,
        ),
        with_slo(
            level(&c("few", 4), 4, 50.0, 1000.0, 100.0),
            limit,
            200.0,
            true,
            3.0,
        ),
    );
    let mut r = result(vec![RankingMetric::Goodput], vec![many, few]);
    r.workload.slo = vec![SloGate {
        limit: "ttft_p95=500ms".into(),
        concurrency: None,
    }];
    r.workload.concurrency_priority_level = Some(2);
    let v = decide(&r, &Policy::default());
    assert_eq!(v.ranking, ["many", "few"]);
    assert!(
        v.reason.contains("goodput under the SLOs at C2 (3.5 req/s"),
        "{}",
        v.reason
    );
    assert!(
        v.reason.contains("within every limit at C2"),
        "{}",
        v.reason
    );
    r.workload.concurrency_priority_level = Some(4);
    let v = decide(&r, &Policy::default());
    assert_eq!(v.ranking, ["few", "many"]);
    assert!(v.reason.contains("at C4 (3.0 req/s"), "{}", v.reason);
    // Not named: the highest level with goodput.
    r.workload.concurrency_priority_level = None;
    assert_eq!(decide(&r, &Policy::default()).ranking, ["few", "many"]);
    assert_eq!(metric::GOODPUT.unit, "req/s");
    assert!(metric::GOODPUT.higher_is_better());
}

#[test]
fn the_concurrency_priority_compares_the_named_level() {
    // `wide` leads at C4 (the highest, the old rule), `narrow` at C2.
    let wide = arm(
        "wide",
        40.0,
        level(&c("wide", 2), 2, 50.0, 1000.0, 80.0),
        level(&c("wide", 4), 4, 50.0, 1000.0, 200.0),
    );
    let narrow = arm(
        "narrow",
        40.0,
        level(&c("narrow", 2), 2, 50.0, 1000.0, 120.0),
        level(&c("narrow", 4), 4, 50.0, 1000.0, 150.0),
    );
    let mut r = result(vec![RankingMetric::Concurrency], vec![wide, narrow]);
    let v = decide(&r, &Policy::default());
    assert_eq!(v.ranking, ["wide", "narrow"]);
    assert!(
        v.reason.contains("at the highest concurrency"),
        "{}",
        v.reason
    );
    assert!(v.reason.contains("requests at C4"), "{}", v.reason);
    r.workload.concurrency_priority_level = Some(2);
    let v = decide(&r, &Policy::default());
    assert_eq!(v.ranking, ["narrow", "wide"]);
    assert!(
        v.reason.contains("aggregate throughput at C2 (120.0 tok/s"),
        "{}",
        v.reason
    );
    // Level 1 is the warm run.
    r.workload.concurrency_priority_level = Some(1);
    let a = r.arm("wide").unwrap();
    assert_eq!(
        metric::measure_at(a, RankingMetric::Concurrency, Some(1)).map(|m| m.value),
        Some(60.0)
    );
}

#[test]
fn a_speculative_arm_that_regresses_only_at_c2_is_not_credited() {
    let ctl = arm(
        "ctl",
        60.0,
        level(&c("ctl", 2), 2, 70.0, 1000.0, 100.0),
        level(&c("ctl", 4), 4, 80.0, 1100.0, 160.0),
    );
    // Faster at C1 and C4; 37 % less throughput at C2.
    let mut spec = arm(
        "spec",
        40.0,
        level(&c("spec", 2), 2, 60.0, 1000.0, 63.0),
        level(&c("spec", 4), 4, 70.0, 1000.0, 170.0),
    );
    spec.speculative = Some(SpecRecord {
        method: "eagle".into(),
        control: "ctl".into(),
    });
    let r = result(vec![RankingMetric::Ttft], vec![ctl.clone(), spec.clone()]);
    let v = decide(&r, &Policy::default());
    assert_eq!(v.ranking, ["ctl"], "{:?}", v.failures);
    let f = v.failures.iter().find(|f| f.arm == "spec").unwrap();
    assert_eq!(f.class, FailureClass::WorkloadRegression);
    assert!(
        f.detail.starts_with("37 % less C2 throughput than its control: 63.0 tok/s with EAGLE against 100.0 tok/s without speculation (ctl)"),
        "{}",
        f.detail
    );
    assert_eq!(f.evidence.as_deref(), Some("spec-timing-64-c2-warm.json"));
    // Within a declared 40 % concurrency tolerance it is credited and wins on TTFT.
    let p = Policy {
        tie_tolerance: BTreeMap::from([(RankingMetric::Concurrency, 0.4)]),
        ..Default::default()
    };
    assert_eq!(decide(&r, &p).ranking, ["spec", "ctl"]);
    // An E2E regression at C4 alone (intervals apart, beyond the floor) is one too.
    let mut spec4 = spec;
    spec4
        .concurrency
        .get_mut("2")
        .unwrap()
        .aggregate_output_tok_s = Some(100.0);
    spec4.concurrency.get_mut("4").unwrap().e2e_ms = Some(stat(1500.0, 2.0));
    let r = result(vec![RankingMetric::Ttft], vec![ctl, spec4]);
    let v = decide(&r, &Policy::default());
    let f = v.failures.iter().find(|f| f.arm == "spec").unwrap();
    assert_eq!(
        f.detail,
        "C4 median E2E rose from 1100.0 ms without speculation (ctl) to 1500.0 ms with EAGLE"
    );
}
