//! A verified bundle's summary, and adding it to the store: one transaction per bundle, keyed by
//! the bundle's root digest.
//!
//! Only a bundle that passes `evidence::manifest::verify` is read; its figures come from the
//! typed `campaign-result.json` (the step files' copies, cross-checked by `verify`'s manifest),
//! its facts from `environment.json`, the campaign copy's `[lane]` and the checkpoint's file
//! digests (what a recipe's profile or program was), its verdict from `decision-summary.json`.
//!
//! A multi-lane bundle (docs/fleet.md) is read the same way, each arm with the lane it ran on
//! (`lanes` of its result: the run that lists the arm, a moved arm's the lane it completed on),
//! its launch record and checkpoint from that run's folder; each lane's control copy
//! (`<control>.control`, from the lane's own result) is kept too, as that lane's A/A figures.

use super::sql::{Sql, Value};
use super::store::Store;
use crate::evidence::bundle;
use crate::evidence::manifest;
use crate::evidence::result::{ArmResult, CampaignResult, Stat, TimingRecord};
use crate::metrics::stats::Distribution;
use anyhow::{bail, Context, Result};
use serde_json::Value as J;
use sha2::{Digest, Sha256};
use std::path::Path;

/// One figure of one arm: a median (or a throughput) with its interval and sample count.
#[derive(Debug, Clone, PartialEq)]
pub struct Figure {
    pub name: String,
    pub value: f64,
    pub lo: Option<f64>,
    pub hi: Option<f64>,
    pub n: u64,
}

/// An arm's recipe identity and its figures.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ArmSummary {
    pub arm: String,
    pub role: String,
    pub label: String,
    pub engine: String,
    /// Empty when the bundle records none.
    pub engine_version: String,
    pub model: String,
    pub quantization: String,
    pub speculative: String,
    /// A container arm's image (pinned by digest in the recipe).
    pub image: String,
    /// SHA-256 over the digests of the files the recipe names (profile, program, config), short.
    pub program: String,
    pub status: String,
    pub failure: String,
    /// `name=status` of each gate, comma-separated.
    pub gates: String,
    /// The lane it ran on (`host:port [gpus]`, as [`Summary::lane`] names one lane): the
    /// bundle's lane, or in a multi-lane bundle its own. Its series are this lane's.
    pub lane: String,
    pub figures: Vec<Figure>,
}

impl ArmSummary {
    /// What a series is keyed by: the recipe as the operator names it, without the facts that
    /// may change under it (engine version, image, profile digest), which a change point names.
    /// A lane's control copy (`inc.control@g1`) is keyed by its arm without the lane
    /// (`inc.control`): the lane is the series' own key.
    pub fn recipe(&self) -> String {
        format!(
            "{}|{}|{}|{}|{}",
            self.arm.split('@').next().unwrap_or(&self.arm),
            self.engine,
            self.model,
            self.quantization,
            self.speculative
        )
    }
}

/// What the history keeps of one bundle.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Summary {
    pub digest: String,
    pub campaign_id: String,
    pub started_at: String,
    pub host: String,
    pub hardware: String,
    pub gpu_model: String,
    pub driver: String,
    /// The lane (`host:port [gpus]`); a multi-lane bundle's is `lanes <id>,<id>` (its lanes' ids:
    /// the same on a resume, whichever nodes Slurm granted), which only the one-run rule reads:
    /// each arm's series are its own lane's ([`ArmSummary::lane`]).
    pub lane: String,
    pub complete: bool,
    pub workload: String,
    pub winner: String,
    pub reason: String,
    pub path: String,
    pub arms: Vec<ArmSummary>,
}

/// Reads a bundle for the history: refuses one that does not verify, naming each problem.
pub fn summarize(dir: &Path) -> Result<Summary> {
    let (m, problems) = manifest::verify(dir, None)?;
    if !problems.is_empty() {
        let list: Vec<String> = problems.iter().map(|p| p.to_string()).collect();
        bail!(
            "{} does not verify ({}); the history holds verified bundles only. Run `bakeoff verify {}` for the list",
            dir.display(),
            list.join("; "),
            dir.display()
        );
    }
    let digest = m
        .root_sha256
        .clone()
        .context("a verified manifest has a root digest")?;
    let r: CampaignResult = read_json(dir, bundle::RESULT)
        .and_then(|v| serde_json::from_value(v).map_err(anyhow::Error::from))
        .with_context(|| {
            format!(
                "{}: {} is not a campaign result",
                dir.display(),
                bundle::RESULT
            )
        })?;
    let env = read_json(dir, bundle::ENVIRONMENT).unwrap_or(J::Null);
    let ck = read_json(dir, bundle::CHECKPOINT).unwrap_or(J::Null);
    let decision = read_json(dir, bundle::DECISION_SUMMARY).unwrap_or(J::Null);
    let (gpu_model, driver) = gpu_facts(&env);
    let path = std::fs::canonicalize(dir).unwrap_or_else(|_| dir.to_path_buf());
    let (lane, arms) = if r.lanes.is_empty() {
        let lane = lane(dir);
        let arms = r
            .arms
            .iter()
            .map(|a| arm(dir, "", a, &env, &ck, &lane))
            .collect();
        (lane, arms)
    } else {
        (fleet_lane(&r), fleet_arms(dir, &r, &env)?)
    };
    Ok(Summary {
        digest,
        campaign_id: r.campaign_id.clone(),
        started_at: r.started_at.clone(),
        host: r.identity.host.clone(),
        hardware: r.identity.hardware.clone(),
        gpu_model,
        driver,
        lane,
        complete: r.complete,
        workload: serde_json::json!({
            "matched_prompt_tokens": r.workload.matched_prompt_tokens,
            "max_tokens": r.workload.max_tokens,
            "warm_repetitions": r.workload.warm_repetitions_per_arm,
            "concurrency": r.workload.concurrency,
            "api": r.workload.api,
        })
        .to_string(),
        winner: decision["decision"]["winner_arm"]
            .as_str()
            .unwrap_or("")
            .to_string(),
        reason: decision["decision"]["reason"]
            .as_str()
            .unwrap_or("")
            .to_string(),
        path: path.display().to_string(),
        arms,
    })
}

fn read_json(dir: &Path, name: &str) -> Result<J> {
    let p = dir.join(name);
    let b = std::fs::read(&p).with_context(|| format!("cannot read {}", p.display()))?;
    serde_json::from_slice(&b).with_context(|| format!("{} is not JSON", p.display()))
}

/// The first GPU's name and the driver, or `none` on a CPU-only machine.
fn gpu_facts(env: &J) -> (String, String) {
    let g = &env["gpu"];
    let name = g["devices"][0]["name"].as_str();
    let driver = g["driver_version"].as_str();
    match name {
        Some(n) => (n.to_string(), driver.unwrap_or("").to_string()),
        None => ("none".to_string(), String::new()),
    }
}

/// The campaign copy as TOML (Null when absent or unreadable: the lane is then named without
/// its GPUs).
fn campaign_copy(dir: &Path) -> toml::Value {
    std::fs::read_to_string(dir.join(bundle::CAMPAIGN_COPY))
        .ok()
        .and_then(|t| toml::from_str::<toml::Value>(&t).ok())
        .unwrap_or(toml::Value::Integer(0))
}

/// The GPUs a lane table (`[lane]`, a `[[lanes]]` entry) names.
fn gpus_of(l: &toml::Value) -> Vec<String> {
    l.get("gpus")
        .and_then(|g| g.as_array())
        .map(|a| {
            a.iter()
                .filter_map(|g| g.as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}

/// `host:port`, and the GPUs when there are any: one lane as every series names it.
fn lane_name(address: &str, gpus: &[String]) -> String {
    if gpus.is_empty() {
        address.to_string()
    } else {
        format!("{address} [{}]", gpus.join(","))
    }
}

/// The lane as the campaign copy declares it: `host:port`, and its GPUs when it names any.
fn lane(dir: &Path) -> String {
    let v = campaign_copy(dir);
    if v.as_integer().is_some() {
        return String::new();
    }
    let l = &v.get("lane").cloned().unwrap_or(toml::Value::Integer(0));
    let host = l.get("host").and_then(|h| h.as_str()).unwrap_or("");
    let port = l.get("port").and_then(|p| p.as_integer()).unwrap_or(0);
    lane_name(&format!("{host}:{port}"), &gpus_of(l))
}

/// A multi-lane bundle's own lane for the one-run rule: its lanes' ids (the lanes' own runs, not
/// moved runs), which a resume keeps even when Slurm grants it other nodes.
fn fleet_lane(r: &CampaignResult) -> String {
    let mut ids: Vec<&str> = Vec::new();
    for l in r.lanes.iter().filter(|l| l.moved_from.is_none()) {
        if !ids.contains(&l.id.as_str()) {
            ids.push(&l.id);
        }
    }
    format!("lanes {}", ids.join(","))
}

/// Where an arm of a multi-lane result ran: its lane's id and the folder of the run that holds
/// its evidence. The run whose `arms` lists it (a moved arm: the moved run, on the lane it
/// completed on; the merge took it off the drained run's list); an arm moved off a drained
/// lane with no live lane left, the drained lane and folder it started in; None for an arm no
/// lane took.
pub fn ran_on<'a>(r: &'a CampaignResult, arm: &str) -> Option<(&'a str, &'a str)> {
    if let Some(l) = r
        .lanes
        .iter()
        .rev()
        .find(|l| l.arms.iter().any(|a| a == arm))
    {
        return Some((&l.id, &l.folder));
    }
    r.moves
        .iter()
        .rev()
        .find(|m| m.arm == arm)
        .map(|m| (m.from.as_str(), m.left_in.as_str()))
}

/// Whether `arm` is a lane's copy of the card-to-card control (`<control>.control`, named by
/// `campaign::lane_plan::control_copy_id`; no arm id has a `.`).
fn is_control_copy(arm: &str) -> bool {
    arm.ends_with(".control")
}

/// The arms of a multi-lane bundle, each on its own lane, then each lane's control copy: a
/// short A/A timing of the control's recipe on that lane (its warm c1 figures), role `control`
/// (so a copy beyond its own history names its lane as drifting, as an incumbent does), stored
/// as `<control>.control@<lane id>` (one row per lane) with the recipe `<control>.control|…`
/// (its series per lane, never mixed with the control arm's own full run).
fn fleet_arms(dir: &Path, r: &CampaignResult, env: &J) -> Result<Vec<ArmSummary>> {
    let copy = campaign_copy(dir);
    let tables: Vec<toml::Value> = copy
        .get("lanes")
        .and_then(|l| l.as_array())
        .cloned()
        .unwrap_or_default();
    // Each lane's name from its own run's record: the address it ran at (a Slurm lane's node's),
    // with the GPUs its `[[lanes]]` table names.
    let name = |id: &str| -> String {
        let address = r
            .lanes
            .iter()
            .find(|l| l.id == id && l.moved_from.is_none())
            .or_else(|| r.lanes.iter().find(|l| l.id == id))
            .map(|l| l.address.as_str())
            .unwrap_or("");
        let gpus = tables
            .iter()
            .find(|t| t.get("id").and_then(|i| i.as_str()) == Some(id))
            .map(gpus_of)
            .unwrap_or_default();
        lane_name(address, &gpus)
    };
    let checkpoint =
        |folder: &str| read_json(&dir.join(folder), bundle::CHECKPOINT).unwrap_or(J::Null);
    let mut out = Vec::new();
    for a in &r.arms {
        let (lane, folder) = match ran_on(r, &a.id) {
            Some((id, folder)) => (name(id), folder),
            // Never placed on a lane (a bundle left before its lanes were taken): no figures,
            // listed under the bundle's lanes.
            None => (fleet_lane(r), ""),
        };
        out.push(arm(dir, folder, a, env, &checkpoint(folder), &lane));
    }
    for l in r.lanes.iter().filter(|l| l.moved_from.is_none()) {
        let lane_dir = dir.join(&l.folder);
        if !lane_dir.join(bundle::RESULT).is_file() {
            continue; // the lane's run never opened its folder: no copy ran there
        }
        let own: CampaignResult = read_json(&lane_dir, bundle::RESULT)
            .and_then(|v| serde_json::from_value(v).map_err(anyhow::Error::from))
            .with_context(|| {
                format!(
                    "{}: {}/{} is not a campaign result",
                    dir.display(),
                    l.folder,
                    bundle::RESULT
                )
            })?;
        for c in own.arms.iter().filter(|c| is_control_copy(&c.id)) {
            let mut s = arm(&lane_dir, "", c, env, &checkpoint(&l.folder), &name(&l.id));
            s.arm = format!("{}@{}", c.id, l.id);
            s.role = "control".into();
            if s.program.is_empty() {
                // The checkpoint may name the recipe's files as the control arm's.
                let control = c.id.trim_end_matches(".control");
                s.program = program_fingerprint(&checkpoint(&l.folder), control);
            }
            out.push(s);
        }
    }
    Ok(out)
}

/// One arm's summary; `folder`: the bundle folder its run's launch record lies in (`""` for a
/// one-lane bundle, `lanes/<id>` for a multi-lane one), `ck` that run's checkpoint.
fn arm(dir: &Path, folder: &str, a: &ArmResult, env: &J, ck: &J, lane: &str) -> ArmSummary {
    let launch =
        read_json(&dir.join(folder), &bundle::step_file(&a.id, "launch", None)).unwrap_or(J::Null);
    let version = env["engines"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|e| e["arm"].as_str() == Some(a.id.as_str()))
        .and_then(|e| e["version"].as_str())
        .unwrap_or("")
        .to_string();
    ArmSummary {
        arm: a.id.clone(),
        role: a.role.clone(),
        label: a.label.clone(),
        engine: a.engine.clone(),
        engine_version: version,
        model: a.model.clone(),
        quantization: a.quantization.clone().unwrap_or_default(),
        speculative: a
            .speculative
            .as_ref()
            .map(|s| s.method.clone())
            .unwrap_or_default(),
        image: launch["spec"]["image"].as_str().unwrap_or("").to_string(),
        program: program_fingerprint(ck, &a.id),
        status: serde_json::to_value(a.status)
            .ok()
            .and_then(|v| v.as_str().map(str::to_string))
            .unwrap_or_default(),
        failure: a
            .failure
            .as_ref()
            .map(|f| f.class.to_string())
            .unwrap_or_default(),
        gates: a
            .gates
            .iter()
            .map(|g| format!("{}={}", g.name, g.status))
            .collect::<Vec<_>>()
            .join(","),
        lane: lane.to_string(),
        figures: {
            let mut f = figures(a);
            first_turn(&mut f, dir, a);
            f
        },
    }
}

/// The warm run's first conversation turns' median TTFT (`ttft_first_turn_p50@c1`), from its
/// step file's requests: the like-for-like figure when later turns hit a prefix cache.
fn first_turn(out: &mut Vec<Figure>, dir: &Path, a: &ArmResult) {
    let steps = crate::evidence::reuse::steps(dir, a);
    let turn = steps
        .iter()
        .find(|s| s.step == "warm")
        .and_then(|s| s.turn(1));
    if let Some(d) = turn.and_then(|t| Distribution::from_samples(&t.ttft_ms, 0)) {
        stat(out, "ttft_first_turn_p50@c1".into(), &Some(d.median_stat()));
    }
}

/// The digests of the files the checkpoint records as named by this arm's recipe, hashed
/// together (12 hex digits): it changes when the profile, program or a config file does.
fn program_fingerprint(ck: &J, arm: &str) -> String {
    let tag = format!("arm `{arm}`'s");
    let mut ds: Vec<&str> = ck["files"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|f| f["named_by"].as_str().is_some_and(|n| n.contains(&tag)))
        .filter_map(|f| f["sha256"].as_str())
        .collect();
    if ds.is_empty() {
        return String::new();
    }
    ds.sort_unstable();
    let h = Sha256::digest(ds.join("\n").as_bytes());
    h.iter().take(6).map(|b| format!("{b:02x}")).collect()
}

fn stat(out: &mut Vec<Figure>, name: String, s: &Option<Stat>) {
    if let Some(s) = s.filter(|s| s.n > 0 && s.p50.is_finite()) {
        out.push(Figure {
            name,
            value: s.p50,
            lo: Some(s.ci95[0]),
            hi: Some(s.ci95[1]),
            n: s.n,
        });
    }
}

fn timing(out: &mut Vec<Figure>, level: &str, t: &TimingRecord) {
    stat(out, format!("ttft_p50@{level}"), &t.ttft_ms);
    stat(out, format!("decode_tok_s_p50@{level}"), &t.decode_tok_s);
    stat(out, format!("e2e_p50@{level}"), &t.e2e_ms);
    stat(out, format!("itl_p50@{level}"), &t.itl_ms);
    if let Some(v) = t.aggregate_output_tok_s.filter(|v| v.is_finite()) {
        out.push(Figure {
            name: format!("aggregate_tok_s@{level}"),
            value: v,
            lo: None,
            hi: None,
            n: t.requests_ok,
        });
    }
}

/// The ranking figures of an arm: warm medians at concurrency 1 (`@c1`), each higher level's
/// (`@c4`), with intervals and sample counts.
pub fn figures(a: &ArmResult) -> Vec<Figure> {
    let mut out = Vec::new();
    if let Some(w) = &a.warm {
        timing(&mut out, "c1", w);
    }
    for (level, t) in &a.concurrency {
        timing(&mut out, &format!("c{level}"), t);
    }
    out
}

/// What [`add`] did with a bundle.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Added {
    New,
    /// The digest was there: nothing written; `moved_from` when the bundle now lies elsewhere
    /// (the path is a hint, updated; the digest is the key).
    Already {
        moved_from: Option<String>,
    },
}

/// Adds a summary in one transaction: all of it or nothing.
pub fn add(store: &mut Store, s: &Summary) -> Result<Added> {
    let place = store.describe();
    store.write(|tx| add_in(tx, s, &place))
}

fn add_in(tx: &mut dyn Sql, s: &Summary, place: &str) -> Result<Added> {
    let have = tx.query(
        "SELECT path FROM bundles WHERE digest = ?",
        &[Value::text(&s.digest)],
    )?;
    if let Some(row) = have.first() {
        let old = row[0].str();
        if old == s.path {
            return Ok(Added::Already { moved_from: None });
        }
        tx.exec(
            "UPDATE bundles SET path = ? WHERE digest = ?",
            &[Value::text(&s.path), Value::text(&s.digest)],
        )?;
        return Ok(Added::Already {
            moved_from: Some(old),
        });
    }
    // One run: the campaign, its start (seconds) and where it ran (cron may start one campaign
    // file on several lanes in the same second).
    let twin = tx.query(
        "SELECT digest, path FROM bundles WHERE campaign_id = ? AND started_at = ? AND host = ? AND lane = ?",
        &[
            Value::text(&s.campaign_id),
            Value::text(&s.started_at),
            Value::text(&s.host),
            Value::text(&s.lane),
        ],
    )?;
    if let Some(t) = twin.first() {
        bail!(
            "{}: campaign `{}` started {} on {} ({}) is already in {place} as another bundle (root digest {}, at {}); one run has one bundle, so one of the two changed after it was added (re-rendered, resumed or edited). Compare them with `bakeoff verify`; the history keeps the first",
            s.path,
            s.campaign_id,
            s.started_at,
            s.host,
            s.lane,
            t[0].str(),
            t[1].str()
        );
    }
    tx.exec(
        "INSERT INTO bundles (digest, campaign_id, started_at, host, hardware, gpu_model, driver, lane, complete, workload, winner, reason, path, added_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        &[
            Value::text(&s.digest),
            Value::text(&s.campaign_id),
            Value::text(&s.started_at),
            Value::text(&s.host),
            Value::text(&s.hardware),
            Value::text(&s.gpu_model),
            Value::text(&s.driver),
            Value::text(&s.lane),
            Value::I(Some(s.complete as i64)),
            Value::text(&s.workload),
            Value::text(&s.winner),
            Value::text(&s.reason),
            Value::text(&s.path),
            Value::text(crate::clock::wall_rfc3339()),
        ],
    )?;
    for a in &s.arms {
        // A summary made without arm lanes (the ingest benchmark's): the bundle's lane.
        let lane = if a.lane.is_empty() { &s.lane } else { &a.lane };
        tx.exec(
            "INSERT INTO arms (digest, arm, role, label, recipe, engine, engine_version, model, quantization, speculative, image, program, status, failure, gates, lane) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            &[
                Value::text(&s.digest),
                Value::text(&a.arm),
                Value::text(&a.role),
                Value::text(&a.label),
                Value::text(a.recipe()),
                Value::text(&a.engine),
                Value::text(&a.engine_version),
                Value::text(&a.model),
                Value::text(&a.quantization),
                Value::text(&a.speculative),
                Value::text(&a.image),
                Value::text(&a.program),
                Value::text(&a.status),
                Value::text(&a.failure),
                Value::text(&a.gates),
                Value::text(lane),
            ],
        )?;
        for f in &a.figures {
            tx.exec(
                "INSERT INTO figures (digest, arm, figure, value, lo, hi, n) VALUES (?, ?, ?, ?, ?, ?, ?)",
                &[
                    Value::text(&s.digest),
                    Value::text(&a.arm),
                    Value::text(&f.name),
                    Value::F(Some(f.value)),
                    Value::F(f.lo),
                    Value::F(f.hi),
                    Value::I(Some(f.n as i64)),
                ],
            )?;
        }
    }
    Ok(Added::New)
}

/// The summary of a made-up bundle `i` (two arms, figures at two levels), for the ingest
/// benchmark (`bakeoff history bench-ingest`): what `add` writes for a typical campaign.
pub fn synthetic(i: usize) -> Summary {
    let arm = |id: &str, role: &str, base: f64| ArmSummary {
        arm: id.into(),
        role: role.into(),
        label: id.into(),
        engine: "vllm".into(),
        engine_version: "0.11.0".into(),
        model: "m".into(),
        quantization: "fp8".into(),
        program: "0123456789ab".into(),
        status: "completed".into(),
        gates: "smoke=passed,tools=passed".into(),
        figures: ["c1", "c4"]
            .iter()
            .flat_map(|l| {
                [
                    "ttft_p50",
                    "decode_tok_s_p50",
                    "e2e_p50",
                    "itl_p50",
                    "aggregate_tok_s",
                ]
                .iter()
                .map(move |f| Figure {
                    name: format!("{f}@{l}"),
                    value: base + (i % 7) as f64,
                    lo: Some(base - 1.0),
                    hi: Some(base + 8.0),
                    n: 8,
                })
            })
            .collect(),
        ..Default::default()
    };
    Summary {
        digest: format!("{:064x}", i + 1),
        campaign_id: "bench".into(),
        started_at: format!("2026-01-01T00:00:00Z#{i:06}"),
        host: "vm".into(),
        hardware: "single NVIDIA H200".into(),
        gpu_model: "NVIDIA H200".into(),
        driver: "580.1".into(),
        lane: "127.0.0.1:8000".into(),
        complete: true,
        workload: "{}".into(),
        winner: "cand".into(),
        reason: String::new(),
        path: format!("/bundles/{i}"),
        arms: vec![
            arm("inc", "incumbent", 50.0),
            arm("cand", "candidate", 45.0),
        ],
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn first_turns_become_their_own_figure_and_plain_runs_get_none() {
        let dir = tempfile::tempdir().unwrap();
        let mut a = ArmResult {
            id: "conv".into(),
            warm: Some(TimingRecord {
                evidence: "conv-warm.json".into(),
                ..Default::default()
            }),
            ..Default::default()
        };
        // Turns 1 and 2 of three conversations; the warm-up and a failed request do not count.
        let req = |turn: u64, ttft: f64| serde_json::json!({"ok": true, "turn": turn, "metrics": {"ttft_ms": ttft}});
        let file = serde_json::json!({"requests": [
            {"ok": true, "warmup": true, "turn": 1, "metrics": {"ttft_ms": 99.0}},
            {"ok": false, "turn": 1},
            req(1, 30.0), req(2, 10.0), req(1, 32.0), req(2, 11.0), req(1, 31.0), req(2, 12.0),
        ]});
        std::fs::write(
            dir.path().join("conv-warm.json"),
            serde_json::to_vec(&file).unwrap(),
        )
        .unwrap();
        let mut out = Vec::new();
        first_turn(&mut out, dir.path(), &a);
        assert_eq!(out.len(), 1, "{out:?}");
        assert_eq!(out[0].name, "ttft_first_turn_p50@c1");
        assert_eq!((out[0].value, out[0].n), (31.0, 3));
        // Requests without turns (no conversation workload): no figure.
        std::fs::write(
            dir.path().join("conv-warm.json"),
            br#"{"requests": [{"ok": true, "metrics": {"ttft_ms": 5.0}}]}"#,
        )
        .unwrap();
        let mut none = Vec::new();
        first_turn(&mut none, dir.path(), &a);
        assert!(none.is_empty(), "{none:?}");
        a.warm = None;
        first_turn(&mut none, dir.path(), &a);
        assert!(none.is_empty());
    }

    /// Each arm's lane in a multi-lane result: the run that lists it; an arm moved off a
    /// drained lane, the lane it completed on (its moved run), not the drained one; an arm
    /// stranded by a drain (no live lane left), the drained lane and folder it started in; the
    /// one-run key names the lanes' own runs only.
    #[test]
    fn an_arm_is_on_the_lane_it_completed_on() {
        use crate::evidence::result::{ArmMove, LaneRun};
        let run = |id: &str, folder: &str, arms: &[&str], moved: Option<&str>| LaneRun {
            id: id.into(),
            address: format!("10.0.0.{}:8000", id.len()),
            folder: folder.into(),
            arms: arms.iter().map(|a| a.to_string()).collect(),
            moved_from: moved.map(str::to_string),
            ..Default::default()
        };
        let r = CampaignResult {
            lanes: vec![
                run("g0", "lanes/g0", &["inc", "b"], None),
                // g1 drained: `a` moved to g0, `d` stranded (the merge took both off its list).
                run("g1", "lanes/g1", &["c"], None),
                run("g0", "lanes/g0.moved-1", &["a"], Some("g1")),
            ],
            moves: vec![
                ArmMove {
                    arm: "a".into(),
                    from: "g1".into(),
                    to: Some("g0".into()),
                    folder: Some("lanes/g0.moved-1".into()),
                    left_in: "lanes/g1".into(),
                    ..Default::default()
                },
                ArmMove {
                    arm: "d".into(),
                    from: "g1".into(),
                    to: None,
                    left_in: "lanes/g1".into(),
                    ..Default::default()
                },
            ],
            ..Default::default()
        };
        assert_eq!(ran_on(&r, "inc"), Some(("g0", "lanes/g0")));
        assert_eq!(ran_on(&r, "c"), Some(("g1", "lanes/g1")));
        assert_eq!(ran_on(&r, "a"), Some(("g0", "lanes/g0.moved-1")));
        assert_eq!(ran_on(&r, "d"), Some(("g1", "lanes/g1")));
        assert_eq!(ran_on(&r, "never"), None);
        assert_eq!(fleet_lane(&r), "lanes g0,g1");
        assert!(is_control_copy("inc.control") && !is_control_copy("inc"));
        assert_eq!(
            lane_name("10.0.0.2:8000", &["GPU-a".into(), "GPU-b".into()]),
            "10.0.0.2:8000 [GPU-a,GPU-b]"
        );
        let copy = ArmSummary {
            arm: "inc.control@g1".into(),
            engine: "vllm".into(),
            model: "m".into(),
            ..Default::default()
        };
        assert_eq!(copy.recipe(), "inc.control|vllm|m||");
    }
}
