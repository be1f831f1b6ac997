//! Synthetic campaign results shared by the decide and report tests (`crate::support::decide_fixture`):
//! `seed()` recreates the situation of the reference verdict (decision-summary.example.json) as
//! the seed-replay campaign would record it.
#![allow(dead_code)]

use bakeoff::campaign::{GateName, Policy, QualityRisk, RankingMetric};
use bakeoff::evidence::result::*;
use bakeoff::evidence::{FailureClass, GateStatus, RestorationStatus};
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::path::Path;

/// A warm median of 5 requests (the seed's repetitions) with its interval: the range of the 5,
/// which covers the median 93.75 % (no 95 % interval is possible from 5).
pub fn stat(p50: f64, half: f64) -> Stat {
    Stat {
        p50,
        ci95: [p50 - half, p50 + half],
        p95: p50 + 2.0 * half,
        n: 5,
        ci_method: Some(CiMethod::Range),
        ci_coverage: Some(0.9375),
    }
}

/// A warm median of `n` requests with the order-statistic interval `[p50 − half, p50 + half]`
/// and its exact coverage (`n` from 6 on).
pub fn stat_n(p50: f64, half: f64, n: u64) -> Stat {
    let r = bakeoff::metrics::stats::median_ranks(n as usize);
    Stat {
        n,
        ci_method: CiMethod::parse(r.method),
        ci_coverage: Some(r.coverage),
        ..stat(p50, half)
    }
}

pub fn gate(name: &str, passed: bool, p: u64, t: u64, ev: &str) -> GateRecord {
    GateRecord {
        name: name.parse().unwrap(),
        status: GateStatus::from_passed(passed),
        passed: Some(p),
        total: Some(t),
        detail: String::new(),
        required: true,
        evidence: Some(ev.into()),
        requests: None,
    }
}

/// A completed arm with warm timing, C2, preflight, tools, retrieval and quality passed.
pub fn arm(id: &str, label: &str, role: &str, ctx: u64, ttft: f64, decode: f64) -> ArmResult {
    let profile = if ctx >= 262144 { "full" } else { "bounded-64k" };
    let target = if ctx >= 262144 { 24400 } else { 5350 };
    let e2e = ttft + 63.0 / decode * 1000.0;
    ArmResult {
        id: id.into(),
        label: label.into(),
        role: role.into(),
        engine: "bakeoff reference engine".into(),
        model: format!("example/{id}"),
        served_context: ctx,
        reported_context: Some(ctx),
        long_context_profile: Some(profile.into()),
        status: ArmStatus::Completed,
        cold: Some(TimingRecord {
            evidence: format!("{id}-timing-4k-c1-cold.json"),
            concurrency: 1,
            requests_ok: 1,
            ttft_ms: Some(stat(ttft, 0.0)),
            ..Default::default()
        }),
        warm: Some(TimingRecord {
            evidence: format!("{id}-timing-4k-c1-warm.json"),
            concurrency: 1,
            requests_ok: 5,
            ttft_ms: Some(stat(ttft, ttft * 0.002)),
            decode_tok_s: Some(stat(decode, decode * 0.002)),
            e2e_ms: Some(stat(e2e, e2e * 0.002)),
            aggregate_output_tok_s: Some(64.0 / e2e * 1000.0),
            prompt_tokens_reported: Some(3613),
            ..Default::default()
        }),
        concurrency: BTreeMap::from([(
            "2".to_string(),
            TimingRecord {
                evidence: format!("{id}-timing-4k-c2-warm.json"),
                concurrency: 2,
                requests_ok: 10,
                aggregate_output_tok_s: Some(2.0 * 64.0 / e2e * 1000.0 * 0.95),
                ..Default::default()
            },
        )]),
        long_context: Some(LongContextRecord {
            evidence: format!("{id}-retrieval-{target}.json"),
            target_tokens: target,
            actual_prompt_tokens: vec![target],
            passed: true,
            decode_tok_s: Some(decode * 0.97),
            e2e_ms: Some(ttft + 100.0),
            timing: None,
        }),
        gates: vec![
            gate("smoke", true, 1, 1, &format!("{id}-preflight.json")),
            gate("json", true, 1, 1, &format!("{id}-preflight.json")),
            gate("streaming", true, 1, 1, &format!("{id}-preflight.json")),
            gate(
                "retrieval",
                true,
                3,
                3,
                &format!("{id}-retrieval-{target}.json"),
            ),
            gate("tools", true, 60, 60, &format!("{id}-tools.json")),
            gate("quality", true, 6, 6, &format!("{id}-quality.json")),
        ],
        evidence: vec![format!("{id}-timing-4k-c1-warm.json")],
        ..Default::default()
    }
}

pub fn spec(mut a: ArmResult, control: &str) -> ArmResult {
    a.speculative = Some(SpecRecord {
        method: "mtp".into(),
        control: control.into(),
    });
    a
}

/// The reference situation, as the seed-replay campaign records it.
pub fn seed() -> CampaignResult {
    let mut r = CampaignResult::new("seed-replay");
    r.complete = true;
    r.started_at = "2026-01-01T00:00:00Z".into();
    r.updated_at = "2026-01-01T00:05:00Z".into();
    r.identity = Identity {
        hardware: "CPU only (reference engines)".into(),
        topology: "isolated managed single lane (reference engines)".into(),
        incumbent: "incumbent Unsloth GGUF MTP3".into(),
        incumbent_arm: "incumbent".into(),
        host: "test".into(),
    };
    r.workload = WorkloadRecord {
        ranking_priority: vec![
            RankingMetric::Ttft,
            RankingMetric::DecodeTokensPerSecond,
            RankingMetric::UsableContextAndKv,
            RankingMetric::Concurrency,
        ],
        matched_prompt_tokens: 3613,
        max_tokens: 64,
        warm_repetitions_per_arm: 5,
        concurrency: vec![1, 2],
        long_context_targets: BTreeMap::from([
            ("full".into(), 24400),
            ("bounded-64k".into(), 5350),
        ]),
        sampling: serde_json::json!({"temperature": 0.0, "seed": 7}),
        ..Default::default()
    };
    let mut arms = vec![
        arm(
            "incumbent",
            "incumbent Unsloth GGUF MTP3",
            "incumbent",
            262144,
            232.6,
            88.6,
        ),
        arm(
            "gittensor",
            "Gittensor RTX5090 NVFP4 target-only",
            "candidate",
            262144,
            50.9,
            79.5,
        ),
    ];
    let mut dspark = spec(
        arm(
            "gittensor-dspark",
            "Gittensor target plus DSpark",
            "candidate",
            262144,
            0.0,
            1.0,
        ),
        "gittensor",
    );
    dspark.status = ArmStatus::Failed;
    dspark.failure = Some(Failure {
        class: FailureClass::Compatibility,
        detail: "draft CUDA-graph capture shape mismatch; not OOM".into(),
        evidence: Some("gittensor-dspark-ready.json".into()),
    });
    dspark.cold = None;
    dspark.warm = None;
    dspark.concurrency.clear();
    dspark.long_context = None;
    dspark.gates.clear();
    arms.push(dspark);
    let mut comet = arm(
        "cometkim-mtp3",
        "CometKim NInfer NVFP4Full MTP3",
        "candidate",
        262144,
        326.3,
        228.0,
    );
    comet.gates[4] = GateRecord {
        detail: "required argument `zip` missing".into(),
        ..gate("tools", false, 0, 60, "cometkim-mtp3-tools.json")
    };
    arms.push(comet);
    arms.push(arm(
        "cdiamond-mtp8",
        "cdiamond iMatrix NVFP4 GGUF MTP8",
        "candidate",
        262144,
        223.1,
        96.0,
    ));
    arms.push(spec(
        arm(
            "unsloth-nvfp4-mtp3",
            "Unsloth Dynamic V3 NVFP4 MTP3",
            "candidate",
            65536,
            388.7,
            137.7,
        ),
        "unsloth-nvfp4",
    ));
    arms.push(arm(
        "unsloth-nvfp4",
        "Unsloth Dynamic V3 NVFP4 (no speculation)",
        "control",
        65536,
        395.0,
        80.0,
    ));
    arms.push(spec(
        arm(
            "redhat-nvfp4-mtp4",
            "RedHatAI NVFP4 MTP4",
            "candidate",
            65536,
            390.6,
            118.9,
        ),
        "redhat-nvfp4",
    ));
    arms.push(arm(
        "redhat-nvfp4",
        "RedHatAI NVFP4 (no speculation)",
        "control",
        65536,
        398.0,
        70.0,
    ));
    let mut quasar = spec(
        arm(
            "quasar-mtp2",
            "QUASAR MTP2",
            "candidate",
            262144,
            410.0,
            80.0,
        ),
        "quasar-nospec",
    );
    quasar.long_context.as_mut().unwrap().decode_tok_s = Some(37.5);
    arms.push(quasar);
    let mut qn = arm(
        "quasar-nospec",
        "QUASAR (no speculation)",
        "control",
        262144,
        412.0,
        70.0,
    );
    qn.long_context.as_mut().unwrap().decode_tok_s = Some(66.6);
    arms.push(qn);
    arms[1].quality_risk_lines = vec![
        "WARNING kv_cache: Using KV cache scaling factor 1.0 (no calibrated scales found)".into(),
    ];
    for a in &arms {
        if a.warm.is_some() {
            r.workload
                .matched_prompt_tokens_reported
                .insert(a.id.clone(), 3613);
        }
    }
    r.arms = arms;
    r.restoration = Some(Restoration {
        status: RestorationStatus::Passed,
        detail: "same recipe and argv/env hashes, served model and context; preflight passed"
            .into(),
        evidence: Some("restoration-identity.json".into()),
        preflight: Some(gate("preflight", true, 3, 3, "restoration-preflight.json")),
        ..Default::default()
    });
    r
}

/// The seed-replay policy: manual promotion, withheld until evidence no gate here produces.
pub fn seed_policy() -> Policy {
    Policy {
        required_gates: vec![
            GateName::Smoke, GateName::Json, GateName::Streaming, GateName::Tools,
            GateName::Retrieval, GateName::Quality, GateName::Restoration,
        ],
        required_evidence_labels: vec![
            "functional".into(), "capacity".into(), "matched-performance".into(),
            "bounded-quality".into(), "exact-restoration".into(),
            "calibrated-kv-quality".into(), "agentic-swe-quality".into(), "routed-client".into(),
        ],
        quality_risks: vec![QualityRisk {
            pattern: "Using KV cache scaling factor 1.0".into(),
            limitation: "the FP8 KV cache had no calibrated scales and defaulted them to 1.0, so broad quality equivalence is unproven".into(),
        }],
        ..Default::default()
    }
}

/// Every file a bundle of `r` would hold (for a manifest fixture).
pub fn evidence_files(r: &CampaignResult) -> Vec<String> {
    let mut v: Vec<String> = Vec::new();
    for a in &r.arms {
        v.extend(
            a.cold
                .iter()
                .chain(a.warm.iter())
                .map(|t| t.evidence.clone()),
        );
        v.extend(a.concurrency.values().map(|t| t.evidence.clone()));
        v.extend(a.long_context.iter().map(|l| l.evidence.clone()));
        v.extend(a.gates.iter().filter_map(|g| g.evidence.clone()));
        v.extend(a.failure.iter().filter_map(|f| f.evidence.clone()));
        v.extend(a.evidence.iter().cloned());
    }
    if let Some(x) = &r.restoration {
        v.extend(x.evidence.clone());
        v.extend(x.preflight.as_ref().and_then(|p| p.evidence.clone()));
    }
    v.sort();
    v.dedup();
    v
}

/// The timing record of `r` whose evidence file is `f`.
pub fn timing_record<'a>(r: &'a CampaignResult, f: &str) -> Option<&'a TimingRecord> {
    r.arms.iter().find_map(|a| {
        a.cold
            .iter()
            .chain(a.warm.iter())
            .chain(a.concurrency.values())
            .find(|t| t.evidence == f)
    })
}

/// A step file's `stats` object (the shape `metrics::summary::RunStats` serializes to) that
/// yields exactly the figures of `t`.
pub fn stats_of(t: &TimingRecord) -> Value {
    let mut metrics = serde_json::Map::new();
    for (name, s) in [
        ("ttft_ms", t.ttft_ms),
        ("decode_tok_s", t.decode_tok_s),
        ("e2e_ms", t.e2e_ms),
        ("itl_ms", t.itl_ms),
    ] {
        if let Some(s) = s {
            metrics.insert(
                name.into(),
                json!({"n": s.n, "p50": s.p50, "p95": s.p95, "median_ci": s.ci95,
                       "median_ci_method": s.ci_method, "median_ci_coverage": s.ci_coverage}),
            );
        }
    }
    if let Some(p) = t.prompt_tokens_reported {
        metrics.insert(
            "prompt_tokens".into(),
            json!({"n": t.requests_ok, "p50": p as f64, "p95": p as f64, "min": p as f64, "max": p as f64, "median_ci95": [p as f64, p as f64]}),
        );
    }
    json!({
        "ok": t.requests_ok,
        "failed": t.requests_failed,
        "aggregate_output_tok_s": t.aggregate_output_tok_s,
        "metrics": metrics,
    })
}

/// Writes a bundle of `r`: evidence files (warm timing files with per-request values and GPU
/// memory), campaign-result.json, a campaign.toml copy and the manifest.
pub fn write_bundle(dir: &Path, r: &CampaignResult) {
    for f in evidence_files(r) {
        let warm_of = r
            .arms
            .iter()
            .find(|a| a.warm.as_ref().is_some_and(|w| w.evidence == f));
        let body = if let Some(arm) = warm_of {
            let w = arm.warm.as_ref().unwrap();
            let (t, e) = (w.ttft_ms.unwrap().p50, w.e2e_ms.unwrap().p50);
            let reqs: Vec<Value> = (0..5)
                .map(|i| json!({"index": i, "ok": true, "metrics": {"ttft_ms": t + i as f64 * 0.1, "e2e_ms": e + i as f64 * 0.5}}))
                .collect();
            json!({"requests": reqs, "gpu": {"per_gpu": [{"memory_used_mib_max": 20000 + 100 * arm.id.len()}]}})
        } else {
            json!({"file": f})
        };
        let mut body = body;
        // Every timing file carries the `stats` its record was copied from (as a run writes
        // them): `bakeoff report` cross-checks the record against them.
        if let Some(t) = timing_record(r, &f) {
            body["stats"] = stats_of(t);
        }
        std::fs::write(dir.join(&f), serde_json::to_vec_pretty(&body).unwrap()).unwrap();
    }
    std::fs::write(
        dir.join("campaign-result.json"),
        serde_json::to_vec_pretty(r).unwrap(),
    )
    .unwrap();
    // The bundle's campaign copy: its profile paths do not resolve from the bundle, so only its
    // [policy] table is read.
    std::fs::write(
        dir.join("campaign.toml"),
        r#"[campaign]
id = "seed-replay"
[policy]
promotion = "manual"
required_gates = ["smoke", "json", "streaming", "tools", "retrieval", "quality", "restoration"]
required_evidence_labels = ["functional", "capacity", "matched-performance", "bounded-quality", "exact-restoration", "calibrated-kv-quality", "agentic-swe-quality", "routed-client"]
[[policy.quality_risks]]
pattern = "Using KV cache scaling factor 1.0"
limitation = "the FP8 KV cache had no calibrated scales and defaulted them to 1.0, so broad quality equivalence is unproven"
"#,
    )
    .unwrap();
    bakeoff::evidence::manifest::write(dir).unwrap();
}
