//! The GPU steps: `gpu-idle-baseline` (lane GPUs with nothing running) and `memory-reserve`
//! (enough lane GPU memory left free with the arm ready). The release check after each arm's
//! stop is part of the stop (steps/lifecycle.rs).

use crate::campaign::{Arm, PlanStep};
use crate::evidence::result::GateRecord;
use crate::evidence::{FailureClass, GateName};
use crate::run::context::Cx;
use crate::run::step_outcome::{fail, Done, Outcome};
use crate::telemetry::gpu;
use serde_json::json;

/// `again`: a resumed invocation takes the baseline again (the release checks need it) but
/// records nothing new.
pub async fn idle_baseline(cx: &mut Cx, s: &PlanStep, max_used_mib: u64, again: bool) -> Done {
    let uuids = cx.c().lane.gpus.clone();
    let p = tokio::task::spawn_blocking(gpu::probe)
        .await
        .unwrap_or(gpu::GpuProbe::NotApplicable {
            reason: "the probe task failed".into(),
        });
    let v = gpu::idle_baseline(&p, &uuids, max_used_mib);
    cx.gpu_baseline = Some(p.clone());
    if again {
        return Done::new(Outcome::Ok, None);
    }
    cx.rec.result().idle_baseline = Some(GateRecord {
        name: GateName::IdleBaseline,
        status: v.status.into(),
        passed: None,
        total: None,
        detail: v.detail.clone(),
        required: cx.required(GateName::IdleBaseline),
        evidence: Some(s.evidence.clone()),
        requests: None,
    });
    Done::ok(json!({"verdict": v, "probe": p}))
}

pub async fn memory_reserve(cx: &mut Cx, arm: &Arm, s: &PlanStep, reserve_mib: u64) -> Done {
    let uuids = cx.c().lane.gpus.clone();
    let probe_uuids = uuids.clone();
    let v = tokio::task::spawn_blocking(move || {
        let p = gpu::probe();
        (gpu::reserve_ok(&p, &probe_uuids, reserve_mib), p)
    })
    .await;
    let (v, p) = match v {
        Ok(x) => x,
        Err(e) => {
            let f = fail(
                FailureClass::Crash,
                format!("GPU probe failed: {e}"),
                &s.evidence,
            );
            return Done::new(Outcome::Fatal(f), None);
        }
    };
    let free: Option<u64> = p
        .devices()
        .iter()
        .filter(|d| uuids.contains(&d.uuid))
        .map(|d| d.memory_total_mib.saturating_sub(d.memory_used_mib))
        .reduce(|a, b| a + b);
    cx.rec.arm_result(&arm.id).gpu_free_after_start_mib = free;
    let rec = GateRecord {
        name: GateName::MemoryReserve,
        status: v.status.into(),
        passed: None,
        total: None,
        detail: v.detail.clone(),
        required: cx.required(GateName::MemoryReserve),
        evidence: Some(s.evidence.clone()),
        requests: None,
    };
    cx.rec.put_gate(&arm.id, rec);
    let ev = json!({"verdict": v});
    if v.ok() {
        Done::ok(ev)
    } else {
        let f = fail(FailureClass::Capacity, v.detail.clone(), &s.evidence);
        Done::new(Outcome::Fatal(f), Some(ev))
    }
}
