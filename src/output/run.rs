//! `bakeoff run --json`: `bakeoff.run/1`, the run's last words as data.

use crate::decide::Verdict;
use crate::evidence::result::{CampaignResult, Restoration};
use serde::Serialize;

#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct RunDoc {
    pub schema: &'static str,
    pub exit_code: u8,
    /// The bundle (absolute).
    pub bundle: String,
    /// `--resume`: this invocation went on from the bundle's checkpoint.
    pub resumed: bool,
    /// This invocation ran nothing: the bundle to resume was already complete.
    pub nothing_to_run: bool,
    pub complete: bool,
    /// Why the campaign is not complete (None when complete).
    pub incomplete_reason: Option<String>,
    /// `interrupted by SIGINT during <arm>/<step>` when a signal ended the run.
    pub interrupted: Option<String>,
    /// The winner's arm id (None: no winner, or no verdict).
    pub winner: Option<String>,
    /// None when the verdict could not be written (`verdict_error` says why).
    pub verdict: Option<VerdictPart>,
    pub verdict_error: Option<String>,
    pub arms: Vec<ArmPart>,
    /// None when the campaign restores nothing (no incumbent to put back).
    pub restoration: Option<RestorationPart>,
    /// The manifest's root digest (`bakeoff verify DIR --digest HEX`).
    pub root_digest: Option<String>,
    /// This invocation's time split (None when it ran nothing).
    pub timing: Option<TimingPart>,
    /// What the history store said of the run's figures (`--history` / `[history] db`).
    pub history: Vec<String>,
}

#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct VerdictPart {
    pub winner: Option<String>,
    pub reason: String,
    /// The policy authorizes promoting the winner; `bakeoff run` never promotes (the lane still
    /// serves the incumbent): `bakeoff promote` does.
    pub promotion_authorized: bool,
    pub next_gate: String,
    pub failures: Vec<FailurePart>,
}

#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct FailurePart {
    pub arm: String,
    /// `compatibility`, `capacity`, `crash`, … (docs/verdict.md).
    pub class: String,
    pub detail: String,
    /// The bundle file that shows it.
    pub evidence: Option<String>,
}

#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct ArmPart {
    pub id: String,
    pub label: String,
    /// `pending`, `completed`, `failed`, `interrupted`.
    pub status: String,
    /// The lane it ran on (multi-lane campaigns).
    pub lane: Option<String>,
    pub failure: Option<FailurePart>,
}

#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct RestorationPart {
    /// `passed`, `unproven`, `failed`, `not-attempted`.
    pub status: String,
    pub detail: String,
    pub evidence: Option<String>,
    /// The process the restoration started, which keeps serving (None: a container, a Slurm
    /// job, or an incumbent that already served). Stale once it stops: never in the bundle.
    pub incumbent_pid: Option<u64>,
    /// How to stop that process (its own process group).
    pub stop_command: Option<String>,
}

#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct TimingPart {
    pub total_s: f64,
    pub engine_lifecycle_s: f64,
    pub measurement_s: f64,
    pub overhead_s: f64,
    pub overhead_fraction: f64,
}

impl RunDoc {
    pub const SCHEMA: &'static str = "bakeoff.run/1";

    /// The document of a sealed bundle as it stands, read and nothing run (`--resume` of a
    /// complete bundle, the MCP server's `verdict`): its result, its verdict, its root digest.
    pub fn standing(
        bundle: String,
        r: &CampaignResult,
        v: &Verdict,
        root: Option<String>,
    ) -> RunDoc {
        let mut doc = RunDoc::new(bundle, r, Ok(v), None);
        doc.root_digest = root;
        doc
    }

    /// The document of a run whose result is `r` (the verdict, or why it could not be written).
    pub fn new(
        bundle: String,
        r: &CampaignResult,
        verdict: Result<&Verdict, String>,
        interrupted: Option<String>,
    ) -> RunDoc {
        let exit_code = exit_code(r.complete, interrupted.is_some());
        let (verdict, verdict_error) = match verdict {
            Ok(v) => (Some(VerdictPart::new(v)), None),
            Err(e) => (None, Some(e)),
        };
        RunDoc {
            schema: Self::SCHEMA,
            exit_code,
            bundle,
            resumed: false,
            nothing_to_run: false,
            complete: r.complete,
            incomplete_reason: r.incomplete_reason.clone().filter(|_| !r.complete),
            interrupted,
            winner: verdict.as_ref().and_then(|v| v.winner.clone()),
            verdict,
            verdict_error,
            arms: arms(r),
            restoration: r
                .restoration
                .as_ref()
                .map(|x| RestorationPart::new(x, None)),
            root_digest: None,
            timing: None,
            history: Vec::new(),
        }
    }
}

/// The exit code of a run: 130 interrupted, 1 incomplete, 0 complete (failed arms included:
/// their failures are the verdict's).
pub fn exit_code(complete: bool, interrupted: bool) -> u8 {
    if interrupted {
        super::exit::INTERRUPTED
    } else if complete {
        super::exit::DONE
    } else {
        super::exit::FAILED
    }
}

impl VerdictPart {
    pub fn new(v: &Verdict) -> VerdictPart {
        VerdictPart {
            winner: v.winner.clone(),
            reason: v.reason.clone(),
            promotion_authorized: v.promotion_authorized,
            next_gate: v.next_gate.clone(),
            failures: v
                .failures
                .iter()
                .map(|f| FailurePart {
                    arm: f.arm.clone(),
                    class: f.class.to_string(),
                    detail: f.detail.clone(),
                    evidence: f.evidence.clone(),
                })
                .collect(),
        }
    }
}

impl RestorationPart {
    pub fn new(x: &Restoration, pid: Option<u64>) -> RestorationPart {
        RestorationPart {
            status: x.status.to_string(),
            detail: x.detail.clone(),
            evidence: x.evidence.clone(),
            incumbent_pid: pid,
            stop_command: pid.map(stop_command),
        }
    }
}

/// The command that stops a restored incumbent started in its own process group.
pub fn stop_command(pid: u64) -> String {
    format!("kill -TERM -- -{pid}")
}

fn arms(r: &CampaignResult) -> Vec<ArmPart> {
    r.arms
        .iter()
        .map(|a| ArmPart {
            id: a.id.clone(),
            label: a.label.clone(),
            status: serde_json::to_value(a.status)
                .ok()
                .and_then(|v| v.as_str().map(str::to_string))
                .unwrap_or_default(),
            lane: r
                .lanes
                .iter()
                .find(|l| l.arms.iter().any(|x| x == &a.id))
                .map(|l| l.id.clone()),
            failure: a.failure.as_ref().map(|f| FailurePart {
                arm: a.id.clone(),
                class: f.class.to_string(),
                detail: f.detail.clone(),
                evidence: f.evidence.clone(),
            }),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_exit_code_puts_an_interrupt_before_an_incomplete_run() {
        assert_eq!(exit_code(true, false), 0);
        assert_eq!(exit_code(false, false), 1);
        // An interrupted run is incomplete too: 130 says which.
        assert_eq!(exit_code(false, true), 130);
    }

    #[test]
    fn each_arm_carries_its_status_lane_and_failure_class() {
        let mut r = CampaignResult::default();
        r.arms.push(crate::evidence::result::ArmResult {
            id: "a".into(),
            status: crate::evidence::result::ArmStatus::Failed,
            failure: Some(crate::evidence::result::Failure {
                class: crate::evidence::FailureClass::Crash,
                detail: "died".into(),
                evidence: Some("a-ready.json".into()),
            }),
            ..Default::default()
        });
        let d = RunDoc::new("/b".into(), &r, Err("no verdict".into()), None);
        assert_eq!((d.exit_code, d.verdict.is_none()), (1, true));
        assert_eq!(d.verdict_error.as_deref(), Some("no verdict"));
        let a = &d.arms[0];
        assert_eq!((a.status.as_str(), a.lane.as_deref()), ("failed", None));
        assert_eq!(a.failure.as_ref().map(|f| f.class.as_str()), Some("crash"));
    }
}
