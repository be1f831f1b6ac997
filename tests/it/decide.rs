//! The verdict from synthetic campaign results (no I/O): the reference situation, priorities,
//! ties inside CIs, tolerances and the promotion policy.

use crate::support::decide_fixture as fixture;

use bakeoff::campaign::{Policy, Promotion, RankingMetric};
use bakeoff::decide::decide;
use bakeoff::evidence::{FailureClass, GateName, GateStatus, RestorationStatus};
use fixture::*;

fn failure<'a>(
    v: &'a bakeoff::decide::Verdict,
    arm: &str,
) -> Option<&'a bakeoff::decide::FailureItem> {
    v.failures.iter().find(|f| f.arm == arm)
}

#[test]
fn seed_situation_reaches_the_reference_decisions() {
    let v = decide(&seed(), &seed_policy());
    assert_eq!(v.winner.as_deref(), Some("gittensor"), "{v:#?}");
    assert_eq!(v.decided_by, Some(0));
    assert_eq!(
        failure(&v, "gittensor-dspark").unwrap().class,
        FailureClass::Compatibility
    );
    assert_eq!(
        failure(&v, "cometkim-mtp3").unwrap().class,
        FailureClass::ToolSchema
    );
    let q = failure(&v, "quasar-mtp2").unwrap();
    assert_eq!(q.class, FailureClass::WorkloadRegression);
    assert!(
        q.detail.contains("66.6 tok/s without speculation")
            && q.detail.contains("37.5 tok/s with MTP"),
        "{}",
        q.detail
    );
    assert_eq!(v.failures.len(), 3, "{:#?}", v.failures);
    assert!(!v.promotion_authorized);
    assert!(v.complete);
    assert_eq!(v.decision_labels, vec!["challenger", "no-promotion"]);
    assert_eq!(
        v.evidence_labels,
        vec![
            "functional",
            "capacity",
            "matched-performance",
            "bounded-quality",
            "compatibility-failure",
            "exact-restoration"
        ]
    );
    assert!(
        v.reason
            .contains("first priority, warm median TTFT (50.9 ms"),
        "{}",
        v.reason
    );
    assert!(v.reason.contains("tools 60/60"), "{}", v.reason);
    assert!(
        v.next_gate.contains("calibrated-kv-quality"),
        "{}",
        v.next_gate
    );
    let text = |id: &str| v.arms.iter().find(|a| a.id == id).unwrap().decision.clone();
    assert_eq!(
        text("gittensor"),
        "TTFT winner and preferred measured challenger; no promotion"
    );
    assert_eq!(
        text("cometkim-mtp3"),
        "decode winner but rejected as a general-purpose winner after tool-schema failure"
    );
    assert!(
        text("cdiamond-mtp8").starts_with("best full-context balanced fallback"),
        "{}",
        text("cdiamond-mtp8")
    );
    assert!(
        text("unsloth-nvfp4-mtp3")
            .starts_with("best bounded-context arm (65536 tokens); tools 60/60"),
        "{}",
        text("unsloth-nvfp4-mtp3")
    );
    assert!(
        text("incumbent").starts_with("restored incumbent"),
        "{}",
        text("incumbent")
    );
    // Limitations derived from evidence.
    let l = v.limitations.join("\n");
    assert!(l.contains("bounded 65536-token context"), "{l}");
    assert!(
        l.contains("defaulted them to 1.0") && l.contains("Gittensor"),
        "{l}"
    );
    assert!(l.contains("GPU memory was not measured"), "{l}");
}

#[test]
fn decode_first_picks_the_fastest_eligible_arm() {
    let mut r = seed();
    r.workload.ranking_priority = vec![RankingMetric::DecodeTokensPerSecond, RankingMetric::Ttft];
    let v = decide(&r, &seed_policy());
    // CometKim decodes fastest (228 tok/s) but failed tools; the fastest eligible is Unsloth MTP3.
    assert_eq!(
        v.winner.as_deref(),
        Some("unsloth-nvfp4-mtp3"),
        "{:?}",
        v.ranking
    );
    assert!(
        v.reason.contains("warm median decode speed (137.7 tok/s"),
        "{}",
        v.reason
    );
    let t = &v
        .arms
        .iter()
        .find(|a| a.id == "unsloth-nvfp4-mtp3")
        .unwrap()
        .decision;
    assert!(t.starts_with("decode winner and preferred"), "{t}");
}

#[test]
fn a_difference_inside_the_cis_passes_to_the_second_priority() {
    let mut r = seed();
    // Two arms 1 ms apart on TTFT with CIs ±3 ms: a tie; the second priority (decode) decides.
    r.arms
        .retain(|a| a.id == "incumbent" || a.id == "gittensor" || a.id == "cdiamond-mtp8");
    let g = r.arms.iter_mut().find(|a| a.id == "gittensor").unwrap();
    g.warm.as_mut().unwrap().ttft_ms = Some(stat(50.0, 3.0));
    let c = r.arms.iter_mut().find(|a| a.id == "cdiamond-mtp8").unwrap();
    c.warm.as_mut().unwrap().ttft_ms = Some(stat(51.0, 3.0));
    let v = decide(&r, &seed_policy());
    assert_eq!(v.winner.as_deref(), Some("cdiamond-mtp8"), "{v:#?}");
    assert_eq!(v.decided_by, Some(1));
    // 5 requests per arm: the tie rule compared ranges, and the reason says so.
    assert!(v.reason.contains("tied with Gittensor RTX5090 NVFP4 target-only on the first priority, warm median TTFT (ranges overlap: n=5, no 95 % interval possible)"), "{}", v.reason);
    assert!(
        v.reason
            .contains("so the second priority, warm median decode speed (96.0 tok/s"),
        "{}",
        v.reason
    );
    assert!(v
        .arms
        .iter()
        .any(|a| a.id == "cdiamond-mtp8" && a.decision.starts_with("decode winner and preferred")));
}

#[test]
fn a_declared_tolerance_makes_a_tie_too() {
    let mut r = seed();
    r.arms
        .retain(|a| a.id == "incumbent" || a.id == "gittensor" || a.id == "cdiamond-mtp8");
    // 50.9 vs 52.0 ms with tight CIs: separate, unless the campaign declares 5% tolerance.
    let c = r.arms.iter_mut().find(|a| a.id == "cdiamond-mtp8").unwrap();
    c.warm.as_mut().unwrap().ttft_ms = Some(stat(52.0, 0.1));
    assert_eq!(
        decide(&r, &seed_policy()).winner.as_deref(),
        Some("gittensor")
    );
    let mut p = seed_policy();
    p.tie_tolerance.insert(RankingMetric::Ttft, 0.05);
    let v = decide(&r, &p);
    assert_eq!(v.winner.as_deref(), Some("cdiamond-mtp8"));
    assert!(
        v.reason.contains("within the declared 5.0% tolerance"),
        "{}",
        v.reason
    );
}

#[test]
fn auto_policy_authorizes_only_when_every_requirement_holds() {
    let r = seed();
    let mut p = seed_policy();
    p.promotion = Promotion::Auto;
    p.required_evidence_labels.retain(|l| {
        ![
            "calibrated-kv-quality",
            "agentic-swe-quality",
            "routed-client",
        ]
        .contains(&l.as_str())
    });
    let v = decide(&r, &p);
    assert!(v.promotion_authorized, "{}", v.next_gate);
    assert_eq!(v.decision_labels, vec!["challenger"]);
    // Manual never authorizes.
    p.promotion = Promotion::Manual;
    let v = decide(&r, &p);
    assert!(!v.promotion_authorized);
    assert!(v.next_gate.contains("by hand"), "{}", v.next_gate);
    // A failed restoration: incomplete, rollback, and the next gate says so.
    let mut r2 = seed();
    r2.restoration.as_mut().unwrap().status = RestorationStatus::Failed;
    p.promotion = Promotion::Auto;
    let v = decide(&r2, &p);
    assert!(!v.promotion_authorized && !v.complete);
    assert!(v.decision_labels.contains(&"rollback".to_string()));
    assert!(
        v.next_gate.starts_with("Restore the incumbent"),
        "{}",
        v.next_gate
    );
}

#[test]
fn a_failed_required_gate_makes_an_arm_ineligible_with_its_evidence() {
    let mut r = seed();
    let g = r.arms.iter_mut().find(|a| a.id == "gittensor").unwrap();
    g.gates[3] = fixture::gate("retrieval", false, 1, 3, "gittensor-retrieval-24400.json");
    let v = decide(
        &r,
        &Policy {
            required_gates: seed_policy().required_gates,
            ..Default::default()
        },
    );
    let f = failure(&v, "gittensor").unwrap();
    assert_eq!(
        (f.class.as_str(), f.evidence.as_deref()),
        ("retrieval", Some("gittensor-retrieval-24400.json"))
    );
    assert_eq!(v.winner.as_deref(), Some("cdiamond-mtp8"));
}

#[test]
fn no_eligible_arm_means_no_winner() {
    let mut r = seed();
    for a in &mut r.arms {
        if let Some(g) = a.gates.iter_mut().find(|g| g.name == GateName::Tools) {
            g.status = GateStatus::Failed;
        }
    }
    let v = decide(&r, &seed_policy());
    assert_eq!(v.winner, None);
    assert!(v.reason.starts_with("No arm is eligible"), "{}", v.reason);
    assert_eq!(v.decision_labels, vec!["rejected", "no-promotion"]);
}

/// Gittensor and cdiamond 1 ms apart on TTFT with intervals ±3 ms, over `n` warm requests each.
fn close_pair(n: u64) -> bakeoff::evidence::result::CampaignResult {
    let mut r = seed();
    r.arms
        .retain(|a| a.id == "incumbent" || a.id == "gittensor" || a.id == "cdiamond-mtp8");
    for a in &mut r.arms {
        let w = a.warm.as_mut().unwrap();
        w.requests_ok = n;
        w.ttft_ms = w.ttft_ms.map(|d| stat_n(d.p50, d.p50 * 0.002, n));
        w.decode_tok_s = w.decode_tok_s.map(|d| stat_n(d.p50, d.p50 * 0.002, n));
        w.e2e_ms = w.e2e_ms.map(|d| stat_n(d.p50, d.p50 * 0.002, n));
    }
    for (id, ttft) in [("gittensor", 50.0), ("cdiamond-mtp8", 51.0)] {
        let a = r.arms.iter_mut().find(|a| a.id == id).unwrap();
        a.warm.as_mut().unwrap().ttft_ms = Some(stat_n(ttft, 3.0, n));
    }
    r
}

#[test]
fn intervals_are_named_for_what_they_are_and_the_tie_rule_says_which_it_used() {
    // The evidence contract's threshold (validation warns from it) is the statistics' own.
    assert_eq!(
        bakeoff::evidence::result::MIN_N_FOR_95,
        bakeoff::metrics::stats::MIN_N_FOR_95
    );
    // 10 requests: order-statistic CIs (ranks 2 and 9, 97.85 % coverage).
    let v = decide(&close_pair(10), &seed_policy());
    assert_eq!(v.winner.as_deref(), Some("cdiamond-mtp8"), "{v:#?}");
    assert!(
        v.reason
            .contains("warm median TTFT (97.85 % order-statistic CIs overlap)"),
        "{}",
        v.reason
    );
    assert!(
        v.reason
            .contains("96.0 tok/s, 97.85 % CI 95.8–96.2 tok/s (order statistics of 10)"),
        "{}",
        v.reason
    );
    let l = v.limitations.join("\n");
    assert!(!l.contains("no 95 % interval"), "{l}");

    // 2 requests: no 95 % interval exists; the ranges are compared and named as ranges.
    let v = decide(&close_pair(2), &seed_policy());
    assert_eq!(v.winner.as_deref(), Some("cdiamond-mtp8"), "{v:#?}");
    assert!(
        v.reason
            .contains("warm median TTFT (ranges overlap: n=2, no 95 % interval possible)"),
        "{}",
        v.reason
    );
    assert!(
        v.reason.contains("range 95.8–96.2 tok/s (too few requests for a 95 % interval, which needs 6; the range of 2 covers the median 50 %)"),
        "{}",
        v.reason
    );
    for text in [v.reason.clone(), v.limitations.join("\n")] {
        assert!(
            !text.contains("95 % CI") && !text.contains("95% CI"),
            "{text}"
        );
    }
    let l = v.limitations.join("\n");
    assert!(
        l.contains("warm medians over 2 requests: no 95 % interval of a median is possible below 6 requests")
            && l.contains("covering the median 50 %"),
        "{l}"
    );
}

#[test]
fn no_winner_label_for_a_difference_the_tie_rule_calls_a_tie() {
    let mut r = seed();
    // cdiamond decodes 0.01 % faster than CometKim (228.0 tok/s, failed tools), inside both
    // ranges: neither is "the decode winner".
    let c = r.arms.iter_mut().find(|a| a.id == "cdiamond-mtp8").unwrap();
    c.warm.as_mut().unwrap().decode_tok_s = Some(stat(228.02, 0.5));
    let v = decide(&r, &seed_policy());
    let text = |id: &str| v.arms.iter().find(|a| a.id == id).unwrap().decision.clone();
    assert!(
        text("cometkim-mtp3").starts_with("rejected: tool-schema"),
        "{}",
        text("cometkim-mtp3")
    );
    assert!(
        !text("cdiamond-mtp8").contains("winner"),
        "{}",
        text("cdiamond-mtp8")
    );
    // A real lead keeps the label: the seed's CometKim decodes far faster than the rest.
    let v = decide(&seed(), &seed_policy());
    assert!(v
        .arms
        .iter()
        .any(|a| a.id == "cometkim-mtp3" && a.decision.starts_with("decode winner but rejected")));
}

#[test]
fn a_matched_control_is_always_named_as_a_control() {
    let mut r = seed();
    // QUASAR's control becomes the best full-context balance after the winner: still a control.
    let q = r.arms.iter_mut().find(|a| a.id == "quasar-nospec").unwrap();
    let w = q.warm.as_mut().unwrap();
    w.ttft_ms = Some(stat(120.0, 0.2));
    w.decode_tok_s = Some(stat(150.0, 0.3));
    let v = decide(&r, &seed_policy());
    let text = |id: &str| v.arms.iter().find(|a| a.id == id).unwrap().decision.clone();
    assert!(
        text("quasar-nospec").starts_with("matched no-speculation control of QUASAR MTP2; ranked"),
        "{}",
        text("quasar-nospec")
    );
    for a in &v.arms {
        if a.role == "control" {
            assert!(a.decision.contains("control"), "{}: {}", a.id, a.decision);
        }
    }
    assert!(
        text("cdiamond-mtp8").starts_with("best full-context balanced fallback"),
        "{}",
        text("cdiamond-mtp8")
    );
}
