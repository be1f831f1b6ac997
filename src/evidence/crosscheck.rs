//! The deciding figures of `campaign-result.json` checked against the per-step evidence files
//! they were copied from (which the manifest hashes), so an edited summary cannot decide.
//!
//! Checked: every timing record of every arm (cold, warm, each concurrency level, each open-loop
//! rate, the long-context timing, the trace replay: requests ok and failed, TTFT, decode, E2E and
//! ITL statistics, aggregate throughput, reported prompt tokens) against its step file's `stats`,
//! and its SLO checks and goodput against the file's `slo` and `goodput`, and its energy
//! recomputed from the file's GPU readings (`evidence::energy`); the capacity bracket and every
//! probe (its counts, and its energy recomputed from its own entry) against `<arm>-capacity.json`;
//! the long-context decode speed and E2E against the long-context timing file; each gate record's
//! status and passed/total against the gate result its file holds. The step files are read as plain JSON (this layer knows no measurement code).

use super::result::{
    ArmResult, CampaignResult, CapacityRecord, CiMethod, GateRecord, GoodputRecord, SloCheckRecord,
    Stat, TimingRecord,
};
use super::GateStatus;
use serde_json::Value;
use std::path::Path;

/// One figure that differs between `campaign-result.json` and the step file it names.
#[derive(Debug, Clone, PartialEq)]
pub struct Mismatch {
    pub arm: String,
    /// Which record, e.g. `warm`, `concurrency 2`, `long-context`, `gate tools`.
    pub record: String,
    /// The step file (relative to the bundle).
    pub file: String,
    pub field: String,
    /// The value in campaign-result.json and the one the step file holds (JSON text).
    pub summary: String,
    pub step: String,
}

impl std::fmt::Display for Mismatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{}: arm {} {} {}: campaign-result.json says {}, the step file {} says {}",
            self.file, self.arm, self.record, self.field, self.summary, self.file, self.step
        )
    }
}

/// A maker of the mismatches of one record (`record` of arm `arm`, its step file `file`), by
/// field: the summary's value and the step file's.
fn mismatch<'a>(
    arm: &'a str,
    record: &'a str,
    file: &'a str,
) -> impl Fn(&str, String, String) -> Mismatch + 'a {
    move |field, summary, step| Mismatch {
        arm: arm.to_string(),
        record: record.to_string(),
        file: file.to_string(),
        field: field.to_string(),
        summary,
        step,
    }
}

fn read(dir: &Path, file: &str) -> Result<Value, String> {
    let b = std::fs::read(dir.join(file)).map_err(|e| format!("cannot read it: {e}"))?;
    serde_json::from_slice(&b).map_err(|e| format!("not JSON: {e}"))
}

fn stat(stats: &Value, name: &str) -> Option<Stat> {
    let d = stats.get("metrics")?.get(name)?;
    if d.is_null() {
        return None;
    }
    // `median_ci` with its method and coverage; `median_ci95` (a bootstrap) in older bundles.
    let ci = d
        .get("median_ci")
        .or_else(|| d.get("median_ci95"))?
        .as_array()?;
    Some(Stat {
        p50: d.get("p50")?.as_f64()?,
        ci95: [ci.first()?.as_f64()?, ci.get(1)?.as_f64()?],
        p95: d.get("p95")?.as_f64()?,
        n: d.get("n")?.as_u64()?,
        ci_method: d
            .get("median_ci_method")
            .and_then(Value::as_str)
            .and_then(CiMethod::parse),
        ci_coverage: d.get("median_ci_coverage").and_then(Value::as_f64),
    })
}

/// The timing figures a step file's `stats` gives (as `run/timed.rs` records them).
pub fn timing_from_stats(stats: &Value) -> TimingRecord {
    let prompt = stats
        .get("metrics")
        .and_then(|m| m.get("prompt_tokens"))
        .filter(|d| d.get("min") == d.get("max"))
        .and_then(|d| d.get("p50")?.as_f64())
        .map(|x| x as u64);
    TimingRecord {
        requests_ok: stats.get("ok").and_then(Value::as_u64).unwrap_or(0),
        requests_failed: stats.get("failed").and_then(Value::as_u64).unwrap_or(0),
        ttft_ms: stat(stats, "ttft_ms"),
        decode_tok_s: stat(stats, "decode_tok_s"),
        e2e_ms: stat(stats, "e2e_ms"),
        itl_ms: stat(stats, "itl_ms"),
        aggregate_output_tok_s: stats.get("aggregate_output_tok_s").and_then(Value::as_f64),
        prompt_tokens_reported: prompt,
        ..Default::default()
    }
}

fn same_f(a: f64, b: f64) -> bool {
    a == b || (a - b).abs() <= 1e-9 * a.abs().max(b.abs())
}

fn same_stat(a: &Option<Stat>, b: &Option<Stat>) -> bool {
    match (a, b) {
        (None, None) => true,
        (Some(a), Some(b)) => {
            same_f(a.p50, b.p50)
                && same_f(a.p95, b.p95)
                && same_f(a.ci95[0], b.ci95[0])
                && same_f(a.ci95[1], b.ci95[1])
                && a.n == b.n
                // Results written before the interval's method and coverage were recorded
                // carry neither; when the summary states them they must be the step file's.
                && (a.ci_method.is_none() || a.ci_method == b.ci_method)
                && match (a.ci_coverage, b.ci_coverage) {
                    (None, _) => true,
                    (Some(x), Some(y)) => same_f(x, y),
                    (Some(_), None) => false,
                }
        }
        _ => false,
    }
}

fn text<T: serde::Serialize>(v: &T) -> String {
    serde_json::to_string(v).unwrap_or_default()
}

/// Compares one timing record with its step file; with `apply`, the step file's figures replace
/// the record's.
fn timing(dir: &Path, arm: &str, what: &str, r: &mut TimingRecord, apply: bool) -> Vec<Mismatch> {
    let file = r.evidence.clone();
    let mm = mismatch(arm, what, &file);
    let v = match read(dir, &r.evidence) {
        Ok(v) => v,
        Err(e) => return vec![mm("(file)", "figures".into(), e)],
    };
    let Some(stats) = v.get("stats").filter(|s| s.is_object()) else {
        return vec![mm("stats", "figures".into(), "no `stats` object".into())];
    };
    let s = timing_from_stats(stats);
    let mut out = Vec::new();
    if r.requests_ok != s.requests_ok {
        out.push(mm(
            "requests_ok",
            text(&r.requests_ok),
            text(&s.requests_ok),
        ));
    }
    if r.requests_failed != s.requests_failed {
        out.push(mm(
            "requests_failed",
            text(&r.requests_failed),
            text(&s.requests_failed),
        ));
    }
    for (name, a, b) in [
        ("ttft_ms", &r.ttft_ms, &s.ttft_ms),
        ("decode_tok_s", &r.decode_tok_s, &s.decode_tok_s),
        ("e2e_ms", &r.e2e_ms, &s.e2e_ms),
        ("itl_ms", &r.itl_ms, &s.itl_ms),
    ] {
        if !same_stat(a, b) {
            out.push(mm(name, text(a), text(b)));
        }
    }
    let agg_same = match (r.aggregate_output_tok_s, s.aggregate_output_tok_s) {
        (Some(a), Some(b)) => same_f(a, b),
        (a, b) => a == b,
    };
    if !agg_same {
        out.push(mm(
            "aggregate_output_tok_s",
            text(&r.aggregate_output_tok_s),
            text(&s.aggregate_output_tok_s),
        ));
    }
    if r.prompt_tokens_reported != s.prompt_tokens_reported {
        out.push(mm(
            "prompt_tokens_reported",
            text(&r.prompt_tokens_reported),
            text(&s.prompt_tokens_reported),
        ));
    }
    // The SLO checks and goodput (absent from both without SLOs) decide eligibility and rank.
    let step_slo: Vec<SloCheckRecord> = v
        .get("slo")
        .and_then(|x| serde_json::from_value(x.clone()).ok())
        .unwrap_or_default();
    if r.slo != step_slo {
        out.push(mm("slo", text(&r.slo), text(&step_slo)));
    }
    let step_goodput: Option<GoodputRecord> = v
        .get("goodput")
        .and_then(|x| serde_json::from_value(x.clone()).ok());
    if r.goodput != step_goodput {
        out.push(mm("goodput", text(&r.goodput), text(&step_goodput)));
    }
    // The energy ranks too: recomputed from the step file's GPU readings and window.
    let step_energy = super::energy::from_step_file(&v);
    if r.energy != step_energy {
        out.push(mm("energy", text(&r.energy), text(&step_energy)));
    }
    if apply && !out.is_empty() {
        r.energy = step_energy;
        r.slo = step_slo;
        r.goodput = step_goodput;
        r.requests_ok = s.requests_ok;
        r.requests_failed = s.requests_failed;
        r.ttft_ms = s.ttft_ms;
        r.decode_tok_s = s.decode_tok_s;
        r.e2e_ms = s.e2e_ms;
        r.itl_ms = s.itl_ms;
        r.aggregate_output_tok_s = s.aggregate_output_tok_s;
        r.prompt_tokens_reported = s.prompt_tokens_reported;
    }
    out
}

/// The gate result a gate step file holds for `g` (the first object naming that gate with its
/// passed/total counts), if any.
fn find_gate<'a>(v: &'a Value, name: &str) -> Option<&'a Value> {
    match v {
        Value::Object(m) => {
            if m.get("gate").and_then(Value::as_str) == Some(name)
                && m.get("passed").is_some_and(Value::is_u64)
                && m.get("total").is_some_and(Value::is_u64)
            {
                return Some(v);
            }
            m.values().find_map(|x| find_gate(x, name))
        }
        Value::Array(a) => a.iter().find_map(|x| find_gate(x, name)),
        _ => None,
    }
}

fn gate(dir: &Path, arm: &str, g: &mut GateRecord, apply: bool) -> Vec<Mismatch> {
    let (Some(file), Some(passed), Some(total)) = (g.evidence.clone(), g.passed, g.total) else {
        return Vec::new();
    };
    let name = text(&g.name).trim_matches('"').to_string();
    let Ok(v) = read(dir, &file) else {
        return vec![Mismatch {
            arm: arm.into(),
            record: format!("gate {name}"),
            file,
            field: "(file)".into(),
            summary: "a gate result".into(),
            step: "nothing readable".into(),
        }];
    };
    // Gate files of other shapes (GPU checks) hold no k/N to check.
    let Some(r) = find_gate(&v, &name) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    let (p, t) = (r["passed"].as_u64(), r["total"].as_u64());
    if (p, t) != (Some(passed), Some(total)) {
        out.push(Mismatch {
            arm: arm.into(),
            record: format!("gate {name}"),
            file: file.clone(),
            field: "passed/total".into(),
            summary: format!("{passed}/{total}"),
            step: format!("{}/{}", p.unwrap_or(0), t.unwrap_or(0)),
        });
        if apply {
            g.passed = p;
            g.total = t;
        }
    }
    // The gate result's status (`passed` / `failed`) is the record's, same words.
    let step_status: Option<GateStatus> = serde_json::from_value(r["status"].clone()).ok();
    if let Some(st) = step_status.filter(|st| *st != g.status) {
        out.push(Mismatch {
            arm: arm.into(),
            record: format!("gate {name}"),
            file,
            field: "status".into(),
            summary: text(&g.status),
            step: text(&st),
        });
        if apply {
            g.status = st;
        }
    }
    out
}

fn arm(dir: &Path, a: &mut ArmResult, apply: bool) -> Vec<Mismatch> {
    let id = a.id.clone();
    let mut out = Vec::new();
    if let Some(r) = a.cold.as_mut() {
        out.extend(timing(dir, &id, "cold", r, apply));
    }
    if let Some(r) = a.warm.as_mut() {
        out.extend(timing(dir, &id, "warm", r, apply));
    }
    for (level, r) in a.concurrency.iter_mut() {
        out.extend(timing(dir, &id, &format!("concurrency {level}"), r, apply));
    }
    for (key, r) in a.rates.iter_mut() {
        out.extend(timing(dir, &id, &format!("open loop {key}"), r, apply));
    }
    if let Some(t) = a.long_context.as_mut().and_then(|l| l.timing.as_mut()) {
        out.extend(timing(dir, &id, "long-context timing", t, apply));
    }
    if let Some(t) = a.trace.as_mut() {
        out.extend(timing(dir, &id, "trace", &mut t.timing, apply));
    }
    if let Some(c) = a.capacity.as_mut() {
        out.extend(capacity(dir, &id, c, apply));
    }
    if let Some(lc) = a.long_context.as_mut() {
        // Only the long-context timing file carries `stats`; the retrieval file's figures are
        // means over its requests, kept as they are.
        if let Ok(v) = read(dir, &lc.evidence) {
            if let Some(stats) = v.get("stats").filter(|s| s.is_object()) {
                let s = timing_from_stats(stats);
                let step = (s.decode_tok_s.map(|x| x.p50), s.e2e_ms.map(|x| x.p50));
                let same = |a: Option<f64>, b: Option<f64>| match (a, b) {
                    (Some(a), Some(b)) => same_f(a, b),
                    (a, b) => a == b,
                };
                if !same(lc.decode_tok_s, step.0) || !same(lc.e2e_ms, step.1) {
                    out.push(Mismatch {
                        arm: id.clone(),
                        record: "long-context".into(),
                        file: lc.evidence.clone(),
                        field: "decode_tok_s/e2e_ms".into(),
                        summary: text(&(lc.decode_tok_s, lc.e2e_ms)),
                        step: text(&step),
                    });
                    if apply {
                        lc.decode_tok_s = step.0;
                        lc.e2e_ms = step.1;
                    }
                }
            }
        }
    }
    for g in a.gates.iter_mut() {
        out.extend(gate(dir, &id, g, apply));
    }
    out
}

/// The capacity record against its step file (`<arm>-capacity.json`): the bracket as the step
/// recorded it there, and each probe's counts and energy from that probe's own entry (its
/// `stats`, GPU readings and window, recomputed as a timed step's). With `apply`, the file wins.
fn capacity(dir: &Path, arm: &str, c: &mut CapacityRecord, apply: bool) -> Vec<Mismatch> {
    let file = c.evidence.clone();
    let mm = mismatch(arm, "capacity", &file);
    let v = match read(dir, &c.evidence) {
        Ok(v) => v,
        Err(e) => return vec![mm("(file)", "figures".into(), e)],
    };
    let Some(mut want) = v
        .get("capacity")
        .and_then(|x| serde_json::from_value::<CapacityRecord>(x.clone()).ok())
    else {
        return vec![mm(
            "capacity",
            "a bracket".into(),
            "no `capacity` record".into(),
        )];
    };
    let entries = v["probes"].as_array().map(Vec::as_slice).unwrap_or(&[]);
    if entries.len() != want.probes.len() {
        return vec![mm(
            "probes",
            format!("{} probe record(s)", want.probes.len()),
            format!("{} probe entries", entries.len()),
        )];
    }
    for (p, e) in want.probes.iter_mut().zip(entries) {
        let s = timing_from_stats(&e["stats"]);
        (p.requests_ok, p.requests_failed) = (s.requests_ok, s.requests_failed);
        p.energy = super::energy::from_step_file(e);
    }
    let mut out = Vec::new();
    for (field, a, b) in [
        ("held_rate_per_s", c.held_rate_per_s, want.held_rate_per_s),
        (
            "broken_rate_per_s",
            c.broken_rate_per_s,
            want.broken_rate_per_s,
        ),
        (
            "client_bound_rate_per_s",
            c.client_bound_rate_per_s,
            want.client_bound_rate_per_s,
        ),
    ] {
        if a != b {
            out.push(mm(field, text(&a), text(&b)));
        }
    }
    for (field, a, b) in [
        ("broken_by", &c.broken_by, &want.broken_by),
        (
            "client_bound_because",
            &c.client_bound_because,
            &want.client_bound_because,
        ),
    ] {
        if a != b {
            out.push(mm(field, text(a), text(b)));
        }
    }
    if c.stopped_because != want.stopped_because {
        let (a, b) = (&c.stopped_because, &want.stopped_because);
        out.push(mm("stopped_because", text(a), text(b)));
    }
    if c.probes.len() != want.probes.len() {
        out.push(mm(
            "probes",
            format!("{} probe(s)", c.probes.len()),
            format!("{} probe(s)", want.probes.len()),
        ));
    } else {
        for (i, (a, b)) in c.probes.iter().zip(&want.probes).enumerate() {
            let at = |f: &str| format!("probes[{i}] ({} req/s) {f}", b.rate_per_s);
            if a.energy != b.energy {
                out.push(mm(&at("energy"), text(&a.energy), text(&b.energy)));
            }
            let (mut a2, mut b2) = (a.clone(), b.clone());
            (a2.energy, b2.energy) = (None, None);
            if a2 != b2 {
                out.push(mm(&at("figures"), text(&a2), text(&b2)));
            }
        }
    }
    if apply && !out.is_empty() {
        want.evidence = c.evidence.clone();
        *c = want;
    }
    out
}

/// Every deciding figure of `r` that differs from the step file it names. With `apply`, the step
/// files' figures replace the summary's (the step file wins).
pub fn check(dir: &Path, r: &mut CampaignResult, apply: bool) -> Vec<Mismatch> {
    let mut out = Vec::new();
    for a in r.arms.iter_mut() {
        out.extend(arm(dir, a, apply));
    }
    out.extend(lane_controls(dir, r, apply));
    out
}

/// A multi-lane bundle's card-to-card controls: each lane's control figures against its warm
/// step file, and `lane-spread.json` against the result's record (with `apply`, the step files
/// win and the spread is computed again from them).
fn lane_controls(dir: &Path, r: &mut CampaignResult, apply: bool) -> Vec<Mismatch> {
    use super::lane_spread::{LaneSpread, FILE};
    let Some(spread) = r.lane_spread.as_mut() else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for l in spread.lanes.iter_mut() {
        let (arm, record, file) = (
            l.arm.clone(),
            format!("lane {} control", l.lane),
            l.evidence.clone(),
        );
        let mm = mismatch(&arm, &record, &file);
        let s = match read(dir, &l.evidence) {
            Ok(v) => timing_from_stats(v.get("stats").unwrap_or(&Value::Null)),
            Err(e) => {
                out.push(mm("(file)", "figures".into(), e));
                continue;
            }
        };
        let before = out.len();
        for (name, a, b) in [
            ("ttft_ms", &l.ttft_ms, &s.ttft_ms),
            ("decode_tok_s", &l.decode_tok_s, &s.decode_tok_s),
            ("e2e_ms", &l.e2e_ms, &s.e2e_ms),
        ] {
            if !same_stat(a, b) {
                out.push(mm(name, text(a), text(b)));
            }
        }
        if apply && out.len() > before {
            (l.ttft_ms, l.decode_tok_s, l.e2e_ms) = (s.ttft_ms, s.decode_tok_s, s.e2e_ms);
        }
    }
    let again = LaneSpread::of(
        &spread.control,
        spread.lanes.clone(),
        spread.missing.clone(),
    );
    let file: Option<LaneSpread> = read(dir, FILE)
        .ok()
        .and_then(|v| serde_json::from_value(v).ok());
    if file.as_ref() != Some(spread) || (again.spread != spread.spread) {
        out.push(Mismatch {
            arm: spread.control.clone(),
            record: "lane spread".into(),
            file: FILE.into(),
            field: "spread".into(),
            summary: text(&spread.spread),
            step: file.map_or("missing or unreadable".into(), |f| text(&f.spread)),
        });
        if apply {
            *spread = again;
        }
    }
    out
}

/// The arm's prefix-cache use, summed over the successful requests of its timing step files
/// (`requests[].usage`: `prompt_tokens`, `cached_tokens`). None when it has no readable timing
/// file.
pub fn cache_use(dir: &Path, a: &ArmResult) -> Option<super::result::CacheUse> {
    let mut u = super::result::CacheUse::default();
    let mut any = false;
    for t in a
        .cold
        .iter()
        .chain(a.warm.iter())
        .chain(a.concurrency.values())
        .chain(a.rates.values())
    {
        let Ok(v) = read(dir, &t.evidence) else {
            continue;
        };
        any = true;
        for r in v["requests"].as_array().into_iter().flatten() {
            if r["ok"] != Value::Bool(true) {
                continue;
            }
            u.requests += 1;
            let usage = &r["usage"];
            if let (Some(p), Some(c)) = (
                usage["prompt_tokens"].as_u64(),
                usage["cached_tokens"].as_u64(),
            ) {
                u.requests_reporting += 1;
                u.prompt_tokens += p;
                u.cached_tokens += c;
            }
        }
    }
    any.then_some(u)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::evidence::result::ArmResult;
    use serde_json::json;

    #[test]
    fn a_summary_that_disagrees_with_its_step_file_is_named_and_the_step_file_wins() {
        let d = tempfile::tempdir().unwrap();
        let stats = json!({"ok": 5, "failed": 1, "aggregate_output_tok_s": 80.0, "metrics": {
            "ttft_ms": {"n": 5, "p50": 50.0, "p95": 60.0, "median_ci95": [49.0, 51.0]},
            "prompt_tokens": {"n": 5, "p50": 64.0, "min": 64.0, "max": 64.0, "p95": 64.0, "median_ci95": [64.0, 64.0]}}});
        std::fs::write(
            d.path().join("a-timing-64-c1-warm.json"),
            json!({"stats": stats, "requests": [
                {"ok": true, "usage": {"prompt_tokens": 64, "cached_tokens": 48}},
                {"ok": false, "usage": null}]})
            .to_string(),
        )
        .unwrap();
        let mut rec = timing_from_stats(&stats);
        rec.evidence = "a-timing-64-c1-warm.json".into();
        let mut r = CampaignResult::new("c");
        r.arms.push(ArmResult {
            id: "a".into(),
            warm: Some(rec),
            ..Default::default()
        });
        assert!(check(d.path(), &mut r.clone(), false).is_empty());
        let cu = cache_use(d.path(), &r.arms[0]).unwrap();
        assert_eq!(
            (cu.requests, cu.prompt_tokens, cu.cached_tokens),
            (1, 64, 48)
        );

        r.arms[0]
            .warm
            .as_mut()
            .unwrap()
            .ttft_ms
            .as_mut()
            .unwrap()
            .p50 = 5.0;
        r.arms[0].warm.as_mut().unwrap().requests_failed = 0;
        let m = check(d.path(), &mut r, true);
        let fields: Vec<&str> = m.iter().map(|m| m.field.as_str()).collect();
        assert_eq!(fields, vec!["requests_failed", "ttft_ms"], "{m:?}");
        assert!(m[1]
            .to_string()
            .starts_with("a-timing-64-c1-warm.json: arm a warm ttft_ms"));
        let w = r.arms[0].warm.as_ref().unwrap();
        assert_eq!((w.ttft_ms.unwrap().p50, w.requests_failed), (50.0, 1));
        // A missing step file is a mismatch too.
        std::fs::remove_file(d.path().join("a-timing-64-c1-warm.json")).unwrap();
        assert_eq!(check(d.path(), &mut r, false)[0].field, "(file)");
    }

    /// A step file with 100 W read over its 2 s window: 200 J over 4 requests and 400 tokens.
    fn step_with_power(ok: u64) -> Value {
        let s = 1_000_000_000u64;
        json!({
            "stats": {"ok": ok, "failed": 0, "completion_tokens_total": 400, "metrics": {}},
            "window_mono_ns": [10 * s, 12 * s],
            "gpu": {"samples": [
                {"uuid": "GPU-a", "mono_ns": 10 * s, "power_w": 100.0},
                {"uuid": "GPU-a", "mono_ns": 12 * s, "power_w": 100.0}]},
        })
    }

    #[test]
    fn capacity_probes_and_the_trace_replay_have_their_energy_recomputed() {
        use crate::evidence::result::{CapacityProbeRecord, TraceReplayRecord};
        let d = tempfile::tempdir().unwrap();
        let entry = step_with_power(4);
        let energy = crate::evidence::energy::from_step_file(&entry);
        assert_eq!(energy.as_ref().and_then(|e| e.energy_j), Some(200.0));
        let cap = CapacityRecord {
            evidence: "a-capacity.json".into(),
            held_rate_per_s: Some(2.0),
            stopped_because: "held up to max_rate 2 req/s".into(),
            probes: vec![CapacityProbeRecord {
                rate_per_s: 2.0,
                outcome: "held".into(),
                requests_ok: 4,
                energy: energy.clone(),
                ..Default::default()
            }],
            ..Default::default()
        };
        let file = json!({"probes": [entry], "capacity": cap});
        std::fs::write(d.path().join("a-capacity.json"), file.to_string()).unwrap();
        std::fs::write(
            d.path().join("a-trace.json"),
            step_with_power(4).to_string(),
        )
        .unwrap();
        let mut trace = TraceReplayRecord {
            timing: timing_from_stats(&step_with_power(4)["stats"]),
            ..Default::default()
        };
        (trace.timing.evidence, trace.timing.energy) = ("a-trace.json".into(), energy.clone());
        let mut r = CampaignResult::new("c");
        r.arms.push(ArmResult {
            id: "a".into(),
            capacity: Some(cap),
            trace: Some(trace),
            ..Default::default()
        });
        assert!(check(d.path(), &mut r.clone(), false).is_empty());

        // Halved in the summary: both named, and the step files' figures win.
        let a = &mut r.arms[0];
        a.capacity.as_mut().unwrap().probes[0]
            .energy
            .as_mut()
            .unwrap()
            .energy_j = Some(100.0);
        a.trace
            .as_mut()
            .unwrap()
            .timing
            .energy
            .as_mut()
            .unwrap()
            .per_mtok_j = Some(1.0);
        a.capacity.as_mut().unwrap().held_rate_per_s = Some(4.0);
        let m = check(d.path(), &mut r, true);
        let named: Vec<(&str, &str)> = m
            .iter()
            .map(|m| (m.record.as_str(), m.field.as_str()))
            .collect();
        assert_eq!(
            named,
            [
                ("trace", "energy"),
                ("capacity", "held_rate_per_s"),
                ("capacity", "probes[0] (2 req/s) energy"),
            ],
            "{m:?}"
        );
        let a = &r.arms[0];
        assert_eq!(a.capacity.as_ref().unwrap().probes[0].energy, energy);
        assert_eq!(a.capacity.as_ref().unwrap().held_rate_per_s, Some(2.0));
        assert_eq!(a.trace.as_ref().unwrap().timing.energy, energy);
    }

    #[test]
    fn an_interval_relabelled_in_the_summary_is_a_mismatch() {
        let d = tempfile::tempdir().unwrap();
        let stats = json!({"ok": 5, "failed": 0, "metrics": {
            "ttft_ms": {"n": 5, "p50": 50.0, "p95": 60.0, "median_ci": [49.0, 51.0],
                        "median_ci_method": "range", "median_ci_coverage": 0.9375}}});
        let f = "a-timing-64-c1-warm.json";
        std::fs::write(d.path().join(f), json!({ "stats": stats }).to_string()).unwrap();
        let mut rec = timing_from_stats(&stats);
        rec.evidence = f.into();
        let t = rec.ttft_ms.unwrap();
        assert_eq!(
            (t.ci95, t.ci_method, t.ci_coverage),
            ([49.0, 51.0], Some(CiMethod::Range), Some(0.9375))
        );
        let mut r = CampaignResult::new("c");
        r.arms.push(ArmResult {
            id: "a".into(),
            warm: Some(rec),
            ..Default::default()
        });
        assert!(check(d.path(), &mut r.clone(), false).is_empty());
        // A results file from before the method was recorded still checks.
        let mut old = r.clone();
        let t = old.arms[0].warm.as_mut().unwrap().ttft_ms.as_mut().unwrap();
        (t.ci_method, t.ci_coverage) = (None, None);
        assert!(check(d.path(), &mut old, false).is_empty());
        // A range relabelled as a 95 % order-statistic CI is caught.
        let t = r.arms[0].warm.as_mut().unwrap().ttft_ms.as_mut().unwrap();
        (t.ci_method, t.ci_coverage) = (Some(CiMethod::OrderStatistic), Some(0.96875));
        let m = check(d.path(), &mut r, false);
        assert_eq!(m.len(), 1, "{m:?}");
        assert_eq!(m[0].field, "ttft_ms");
    }
}
