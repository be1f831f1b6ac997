//! The recorder: the only writer of a bundle's evidence, its `campaign-result.json` and its
//! `checkpoint.json`. Every write is atomic and masked (no secret value reaches the bundle); the
//! result and the checkpoint are rewritten after every step, so an interrupted run can resume.

use super::first_records;
use super::journal::{Journal, Journaled};
use crate::campaign::checkpoint::{Checkpoint, ExtraStep, InvocationTiming, StepStatus};
use crate::campaign::{Mask, Plan, PlanStep, StepKind};
use crate::evidence::bundle;
use crate::evidence::result::{ArmResult, ArmStatus, CampaignResult, GateRecord};
use crate::evidence::RestorationStatus;
use anyhow::{anyhow, Result};
use serde_json::{json, Value};
use std::path::{Path, PathBuf};

pub struct Recorder {
    dir: PathBuf,
    /// The path the raw logs and the held-back space sit beside (the bundle itself, or the
    /// whole bundle for a lane folder of a multi-lane one).
    beside: PathBuf,
    mask: Mask,
    result: CampaignResult,
    ck: Checkpoint,
    /// This invocation (1 = the first run, 2 = the first resume, ...).
    inv: u32,
    /// Wall time of the engines starting and stopping, and of measuring, this invocation.
    engine_ms: f64,
    measure_ms: f64,
    notify: super::Notify,
    /// The first write that failed since the runner last looked ([`Recorder::take_write_failure`]).
    write_failure: std::sync::Mutex<Option<String>>,
    /// What this bundle's runs started on the lane (`launch-journal.json`).
    journal: Journal,
    /// Space held back for the final result, checkpoint and manifest ([`super::reserve`]).
    reserve: Option<super::reserve::Reserve>,
}

/// Steps whose time is the engines starting and stopping (the rest is measurement).
fn is_engine_step(k: &StepKind) -> bool {
    matches!(
        k,
        StepKind::Launch
            | StepKind::Ready { .. }
            | StepKind::Stop
            | StepKind::StopIncumbent
            | StepKind::RestoreIncumbent
    )
}

impl Recorder {
    /// A new bundle (its campaign copy, environment and plan written), or the one being resumed.
    pub fn open(
        plan: &Plan,
        dir: PathBuf,
        beside: PathBuf,
        mask: Mask,
        resume: bool,
        notify: super::Notify,
    ) -> Result<Recorder> {
        let (ck, result) = if resume {
            let ck = Checkpoint::load(&dir)?;
            let r: CampaignResult = serde_json::from_slice(
                &std::fs::read(dir.join(bundle::RESULT))
                    .map_err(|e| anyhow!("cannot read {} in the bundle: {e}", bundle::RESULT))?,
            )?;
            (ck, r)
        } else {
            let mut ck = Checkpoint::new(plan);
            // A fresh campaign: its own place to start the prompt nonce numbers.
            ck.nonce_base = Some(crate::workload::filler::random_nonce_base());
            (ck, first_records::new_result(plan))
        };
        let mut rec = Recorder {
            dir,
            beside,
            mask,
            result,
            ck,
            inv: 0,
            engine_ms: 0.0,
            measure_ms: 0.0,
            notify,
            write_failure: std::sync::Mutex::new(None),
            journal: Journal::default(),
            reserve: None,
        };
        if resume {
            rec.journal = read_journal(&rec.dir)?;
        }
        rec.ck.invocations += 1;
        rec.inv = rec.ck.invocations;
        if !resume {
            let c = &plan.campaign;
            let src = std::fs::read(&c.source.path).map_err(|e| {
                anyhow!(
                    "cannot read the campaign file {}: {e}",
                    c.source.path.display()
                )
            })?;
            crate::evidence::write_atomic(&rec.dir.join(bundle::CAMPAIGN_COPY), &src)?;
            rec.write_json(bundle::ENVIRONMENT, &first_records::environment(c))?;
            rec.write_json(
                bundle::PLAN,
                &json!({"campaign_id": c.campaign.id, "steps": plan.steps}),
            )?;
        }
        let bytes = super::reserve::size(plan.steps.len());
        match super::reserve::Reserve::take(&bundle::space_reserve(&rec.beside), bytes) {
            Ok(r) => rec.reserve = Some(r),
            Err(e) => rec.warn(&format!(
                "could not hold back {} KiB beside the bundle for its final result ({e}); on a disk that fills, the bundle may keep a result that says `running`",
                bytes / 1024
            )),
        }
        rec.result.complete = false;
        // Until this invocation ends; a bundle left like this says its run died before sealing.
        // A lane folder of a multi-lane bundle (its logs sit beside the whole bundle) is
        // recovered and resumed through its bundle, never alone.
        let root = Some(rec.dir.as_path())
            .filter(|d| *d != rec.beside)
            .and_then(bundle::bundle_of_lane)
            .unwrap_or(&rec.dir)
            .display()
            .to_string();
        rec.result.incomplete_reason = Some(format!(
            "running (invocation {}, pid {}): when no such bakeoff process runs, it died before sealing the bundle (no manifest); `bakeoff recover {root}` puts the lane back, `bakeoff run --resume {root}` finishes the campaign",
            rec.inv,
            std::process::id(),
        ));
        rec.save();
        Ok(rec)
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// What the raw engine logs sit beside (`bundle::logs_dir`, `bundle::incumbent_log`).
    pub fn beside(&self) -> &Path {
        &self.beside
    }

    pub fn invocation(&self) -> u32 {
        self.inv
    }

    pub fn result(&mut self) -> &mut CampaignResult {
        &mut self.result
    }

    pub fn into_result(self) -> CampaignResult {
        self.result
    }

    pub fn checkpoint(&mut self) -> &mut Checkpoint {
        &mut self.ck
    }

    pub fn finished(&self, number: usize) -> bool {
        self.ck.step(number).status.finished()
    }

    pub fn finished_steps(&self) -> usize {
        self.ck.steps.iter().filter(|s| s.status.finished()).count()
    }

    /// Writes `name` (atomic, masked). A failure is also kept for the runner, which does not
    /// count a step done whose evidence is not on disk ([`Recorder::take_write_failure`]).
    pub fn write_json(&self, name: &str, v: &Value) -> Result<()> {
        let text = serde_json::to_string_pretty(v)? + "\n";
        self.write_text(name, &text)
    }

    /// [`Recorder::write_json`], warning on failure; true when the file was written.
    pub fn write_json_or_warn(&self, name: &str, v: &Value) -> bool {
        match self.write_json(name, v) {
            Ok(()) => true,
            Err(e) => {
                self.warn(&e.to_string());
                false
            }
        }
    }

    pub fn write_text(&self, name: &str, text: &str) -> Result<()> {
        let r =
            crate::evidence::write_atomic(&self.dir.join(name), self.mask.scrub(text).as_bytes());
        if let Err(e) = &r {
            self.note_write_failure(format!("{e:#}"));
        }
        r
    }

    fn note_write_failure(&self, e: String) {
        let mut w = self.write_failure.lock().unwrap_or_else(|p| p.into_inner());
        if w.is_none() {
            *w = Some(e);
        }
    }

    /// The first bundle write that failed since the last call, if any.
    pub fn take_write_failure(&self) -> Option<String> {
        self.write_failure
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take()
    }

    /// A problem that does not stop the run, for whoever shows progress.
    pub fn warn(&self, msg: &str) {
        (self.notify)(super::Note::Warning(msg));
    }

    /// Rewrites `campaign-result.json` and `checkpoint.json`.
    pub fn save(&mut self) {
        self.result.updated_at = crate::clock::wall_rfc3339();
        if let Ok(v) = serde_json::to_value(&self.result) {
            if let Err(e) = self.write_json(bundle::RESULT, &v) {
                self.warn(&e.to_string());
            }
        }
        if let Err(e) = self.ck.save(&self.dir) {
            self.warn(&e.to_string());
            self.note_write_failure(format!("{e:#}"));
        }
    }

    /// The journal, to change before [`Recorder::save_journal`].
    pub fn journal(&mut self) -> &mut Journal {
        &mut self.journal
    }

    pub fn arm_result(&mut self, id: &str) -> &mut ArmResult {
        self.result
            .arms
            .iter_mut()
            .find(|a| a.id == id)
            .expect("every arm has a result entry")
    }

    /// Lists `name` among the arm's evidence (once).
    pub fn add_evidence(&mut self, arm: &str, name: &str) {
        let a = self.arm_result(arm);
        if !a.evidence.iter().any(|e| e == name) {
            a.evidence.push(name.to_string());
        }
    }

    /// Records a gate of an arm (replacing an earlier record of the same gate).
    pub fn put_gate(&mut self, arm: &str, rec: GateRecord) {
        let a = self.arm_result(arm);
        a.gates.retain(|g| g.name != rec.name);
        a.gates.push(rec);
    }

    /// Reserves `n` request indices on the arm's server (distinct across steps and resumes).
    pub fn next_indices(&mut self, arm: &str, n: u64) -> u64 {
        let st = self.ck.arms.entry(arm.to_string()).or_default();
        let first = st.next_index;
        st.next_index += n;
        first
    }

    /// Where this campaign's request numbers start: drawn at random when the campaign began and
    /// kept in `checkpoint.json`, so no two campaigns (and no resume) repeat a prompt on a server.
    /// 0 for a checkpoint written before it was recorded.
    pub fn nonce_base(&self) -> u64 {
        self.ck.nonce_base.unwrap_or(0)
    }

    /// Counts a launch of the arm. The request indices go on where they were (a relaunched
    /// server may keep a cache on disk; numbers never repeat within a campaign).
    pub fn count_launch(&mut self, arm: &str) -> u32 {
        let st = self.ck.arms.entry(arm.to_string()).or_default();
        st.launches += 1;
        st.launches
    }

    pub fn launches(&self, arm: &str) -> u32 {
        self.ck.arms.get(arm).map(|a| a.launches).unwrap_or(1)
    }

    fn add_time(&mut self, engine: bool, wall_ms: f64) {
        if engine {
            self.engine_ms += wall_ms;
        } else {
            self.measure_ms += wall_ms;
        }
    }

    /// Records a finished plan step: checkpoint, the arm's evidence list, then saves.
    pub fn finish_step(&mut self, s: &PlanStep, status: StepStatus, wall_ms: Option<f64>) {
        if let Some(w) = wall_ms {
            self.add_time(is_engine_step(&s.kind), w);
        }
        self.ck.set(s.number, status, wall_ms, self.inv);
        if let (Some(arm), crate::campaign::Phase::Arm) = (&s.arm, s.phase) {
            if status != StepStatus::Skipped {
                let ev = s.evidence.clone();
                self.add_evidence(&arm.clone(), &ev);
            }
        }
        self.save();
    }

    /// A step cancelled by a signal: it runs again on resume.
    pub fn set_interrupted(&mut self, s: &PlanStep, wall_ms: f64) {
        self.ck
            .set(s.number, StepStatus::Interrupted, Some(wall_ms), self.inv);
    }

    /// Work outside the plan's steps (a relaunch, a stop after a signal, a setup step redone).
    pub fn extra(&mut self, arm: Option<&str>, step: &str, evidence: Option<&str>, wall_ms: f64) {
        let engine = step.contains("launch") || step.contains("stop") || step.contains("restore");
        self.add_time(engine, wall_ms);
        self.ck.extra.push(ExtraStep {
            invocation: self.inv,
            arm: arm.map(str::to_string),
            step: step.into(),
            evidence: evidence.map(str::to_string),
            wall_ms,
        });
    }

    /// Ends the invocation: complete or why not, the notes, where the time went; saves.
    /// Gives back the space held for the last words (the disk is full now). False: none held.
    pub fn release_reserve(&mut self) -> bool {
        self.reserve.take().map(|r| r.release()).is_some()
    }

    /// `restores`: the plan restores an incumbent (a qualification lane of a multi-lane
    /// campaign has none, so no restoration is needed for it to be complete).
    pub fn close(
        &mut self,
        interrupted: Option<&str>,
        total_ms: f64,
        lane_has_gpus: bool,
        restores: bool,
    ) -> (bool, InvocationTiming) {
        let missing = missing_files(&self.dir, &self.result);
        let r = &mut self.result;
        unproven_restoration(r, &missing);
        let all_end = r
            .arms
            .iter()
            .all(|a| matches!(a.status, ArmStatus::Completed | ArmStatus::Failed));
        let restored = !restores
            || r.restoration
                .as_ref()
                .is_some_and(|x| x.status == RestorationStatus::Passed);
        let complete = all_end && restored && interrupted.is_none() && missing.is_empty();
        r.complete = complete;
        let unproven = r
            .restoration
            .as_ref()
            .filter(|x| x.status == RestorationStatus::Unproven);
        r.incomplete_reason = if complete {
            None
        } else if let Some(i) = interrupted {
            Some(i.to_string())
        } else if let Some(x) = unproven {
            Some(x.detail.clone())
        } else if !restored {
            Some("the incumbent's restoration failed (see restoration-*.json)".into())
        } else if !missing.is_empty() {
            Some(format!(
                "files the result names are missing from the bundle: {}",
                missing.join(", ")
            ))
        } else {
            Some("not every arm reached an end state".into())
        };
        if !missing.is_empty() {
            let n = format!("missing evidence files: {}", missing.join(", "));
            if !r.notes.contains(&n) {
                r.notes.push(n);
            }
        }
        if let Some(i) = interrupted {
            if !r.notes.iter().any(|n| n == i) {
                r.notes.push(i.to_string());
            }
        }
        if !lane_has_gpus {
            let n = "GPU telemetry not applicable: the lane owns no GPU (idle baseline, memory reserve and GPU samples were not taken)".to_string();
            if !r.notes.contains(&n) {
                r.notes.push(n);
            }
        }
        let overhead = (total_ms - self.engine_ms - self.measure_ms).max(0.0);
        let timing = InvocationTiming {
            invocation: self.inv,
            started_at: r.started_at.clone(),
            total_ms,
            engine_lifecycle_ms: self.engine_ms,
            measurement_ms: self.measure_ms,
            overhead_ms: overhead,
            overhead_fraction: if total_ms > 0.0 {
                overhead / total_ms
            } else {
                0.0
            },
            outcome: r
                .incomplete_reason
                .clone()
                .unwrap_or_else(|| "complete".into()),
        };
        self.ck.timing.push(timing.clone());
        self.save();
        (complete, timing)
    }
}

/// The bundle's launch journal (empty when it has none: nothing was launched, or an older
/// bundle).
pub fn read_journal(dir: &Path) -> Result<Journal> {
    match std::fs::read(dir.join(bundle::LAUNCH_JOURNAL)) {
        Ok(b) => serde_json::from_slice(&b).map_err(|e| {
            anyhow!(
                "{} in the bundle does not parse: {e}",
                bundle::LAUNCH_JOURNAL
            )
        }),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Journal::default()),
        Err(e) => Err(anyhow!(
            "cannot read {} in the bundle: {e}",
            bundle::LAUNCH_JOURNAL
        )),
    }
}

/// Files the result names (every `evidence` field, as `verify` reads them) that are not in the
/// bundle.
/// A restoration whose checks passed but whose evidence is not on disk (`missing`) is not
/// `passed`: it becomes `unproven`, and its detail says so and names the files.
fn unproven_restoration(r: &mut CampaignResult, missing: &[String]) {
    let Some(x) = r.restoration.as_mut() else {
        return;
    };
    let named = [
        x.evidence.as_deref(),
        x.preflight.as_ref().and_then(|p| p.evidence.as_deref()),
    ];
    let lost: Vec<&str> = named
        .into_iter()
        .flatten()
        .filter(|n| missing.iter().any(|m| m == n))
        .collect();
    if x.status != RestorationStatus::Passed || lost.is_empty() {
        return;
    }
    x.status = RestorationStatus::Unproven;
    x.detail = format!(
        "restored, but its proof could not be written ({} missing from the bundle): the incumbent's identity and a fresh preflight passed when checked, yet the bundle cannot show it; free the disk and run `bakeoff recover` on this bundle to take the proof again",
        lost.join(", ")
    );
}

fn missing_files(dir: &Path, r: &CampaignResult) -> Vec<String> {
    let v = serde_json::to_value(r).unwrap_or_default();
    let mut missing: Vec<String> = crate::evidence::manifest::evidence_names(&v)
        .into_iter()
        .filter(|n| !dir.join(n).is_file())
        .collect();
    missing.sort();
    missing.dedup();
    missing
}

impl Journaled for Recorder {
    fn journal_mut(&mut self) -> &mut Journal {
        &mut self.journal
    }

    fn invocation(&self) -> u32 {
        self.inv
    }

    /// Writes `launch-journal.json` (atomic: written, synced, renamed, directory synced).
    fn save_journal(&mut self) -> Result<()> {
        let v = serde_json::to_value(&self.journal)?;
        let r = self.write_json(bundle::LAUNCH_JOURNAL, &v);
        if let Err(e) = &r {
            self.warn(&e.to_string());
        }
        r
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::evidence::result::Restoration;
    use crate::evidence::types::{GateName, GateStatus};

    /// The restoration's own preflight names its evidence one level down; a run that lost that
    /// file must not be called complete (verify names it; the recorder once did not look).
    #[test]
    fn missing_files_sees_every_evidence_field_verify_reads() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("restoration-identity.json"), "{}").unwrap();
        let mut r = CampaignResult::new("c");
        r.restoration = Some(Restoration {
            evidence: Some("restoration-identity.json".into()),
            preflight: Some(GateRecord {
                name: GateName::RestorationPreflight,
                status: GateStatus::Passed,
                passed: None,
                total: None,
                detail: String::new(),
                required: true,
                evidence: Some(bundle::RESTORATION_PREFLIGHT.into()),
                requests: None,
            }),
            ..Default::default()
        });
        assert_eq!(
            missing_files(dir.path(), &r),
            vec![bundle::RESTORATION_PREFLIGHT.to_string()]
        );
        std::fs::write(dir.path().join(bundle::RESTORATION_PREFLIGHT), "{}").unwrap();
        assert!(missing_files(dir.path(), &r).is_empty());
    }
}
