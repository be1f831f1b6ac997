//! Promotion (`bakeoff promote`): put a verified verdict's winner in service on the lane, bake it
//! under analysis against the figures the bake-off measured, and roll back by itself (docs/promotion.md).
//!
//! ```text
//! checks (arm, authority, drift, rollback check) ─▶ lane lock ─▶ stop incumbent ─▶ launch winner
//!   ─▶ ready (exit watch) ─▶ identity ─▶ preflight ─▶ bake (intervals) ─▶ promoted
//!   any failure, a failed bake, --abort, a signal ─▶ rollback: stop winner ─▶ restore incumbent
//!   ─▶ identity + preflight (the restoration's proof) ─▶ rolled back | rollback failed (lane marked)
//! ```
//!
//! Sits beside `run/`, below `cli/`: it reuses the run's launch journal, launch specs, identity
//! and recovery, and writes a folder of its own (`promotion.json`, the launch journal, a summary,
//! a manifest). The CLI verifies the campaign bundle and decides its verdict (report layer) and
//! hands both here.

pub mod bake;
pub mod canary;
pub mod check;
pub mod lanes;
pub mod page;
pub mod record;
pub mod recover;
pub mod summary;
pub mod traffic;
pub mod txn;

use crate::campaign::{Arm, Campaign, PromotionTable};
use crate::evidence::result::CampaignResult;
use serde::Serialize;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

pub use record::{is_promotion, Phase};

/// The arm's own bake-off figures the bake compares with (its warm timing at concurrency 1).
#[derive(Debug, Clone, Copy, Default, Serialize, PartialEq)]
pub struct Baseline {
    pub ttft_p95_ms: Option<f64>,
    pub decode_tok_s_p50: Option<f64>,
}

impl Baseline {
    pub fn of(r: &CampaignResult, arm: &str) -> Baseline {
        let w = r
            .arms
            .iter()
            .find(|a| a.id == arm)
            .and_then(|a| a.warm.as_ref());
        Baseline {
            ttft_p95_ms: w.and_then(|w| w.ttft_ms.map(|s| s.p95)),
            decode_tok_s_p50: w.and_then(|w| w.decode_tok_s.map(|s| s.p50)),
        }
    }
}

/// The verified campaign bundle a promotion acts on.
pub struct Source {
    /// Absolute.
    pub dir: PathBuf,
    pub root_digest: String,
    pub campaign: Campaign,
    pub arm: Arm,
    pub authorization: String,
    pub baseline: Baseline,
    /// The winner's recipe files as the bake-off measured them (the winner check passed against
    /// it; the launch's identity compares against it again).
    pub measured: crate::campaign::fingerprint::Fingerprint,
    /// The bake's gate canary, loaded and checked before the switch (`check::bake_inputs`;
    /// empty: no canary).
    pub canary: Vec<crate::gates::Check>,
    /// What the bake check proved, in words.
    pub bake_checked: Vec<String>,
    /// A multi-lane bundle: where the arm was measured and the lane it is promoted on (the
    /// incumbent's); None for a one-lane bundle.
    pub lanes: Option<lanes::Lanes>,
}

impl Source {
    /// The bundle folder holding the incumbent's stop evidence (a multi-lane bundle's: its
    /// lane's folder).
    pub fn incumbent_evidence(&self) -> PathBuf {
        match &self.lanes {
            Some(l) => l.incumbent_dir(&self.dir),
            None => self.dir.clone(),
        }
    }
}

/// Progress lines for the CLI (only `cli/` prints).
pub type Say = Arc<dyn Fn(&str) + Send + Sync>;

/// The first signal's name, once one arrived (the bake ends and the incumbent is restored).
pub type Cancel = tokio::sync::watch::Receiver<Option<&'static str>>;

pub struct Options {
    /// The promotion folder (absolute).
    pub out: PathBuf,
    pub bake: Duration,
    pub table: PromotionTable,
    pub cancel: Cancel,
    pub say: Say,
}

/// How a promotion ended.
#[derive(Debug, Clone)]
pub struct Outcome {
    pub phase: Phase,
    pub why: String,
    pub root_digest: String,
    pub restart: Vec<String>,
}

/// The campaign's `[promotion]` table (its defaults when absent), checked.
pub fn table(c: &Campaign) -> Result<PromotionTable, String> {
    let t = c.promotion.clone().unwrap_or_default();
    let p = t.problems();
    if p.is_empty() {
        Ok(t)
    } else {
        Err(format!("{}: {}", c.source.path.display(), p.join("; ")))
    }
}

/// The whole transaction in words, secrets masked: what `--dry-run` prints and the folder keeps.
pub fn plan_lines(s: &Source, o: &Options, rollback_check: &[String]) -> Vec<String> {
    let c = &s.campaign;
    let inc = c.incumbent();
    let mask = crate::campaign::Mask::from_process_env(c);
    let cmd = |a: &Arm| {
        c.launch_command(a)
            .map(|lc| mask.scrub(&lc.start.shown()))
            .unwrap_or_else(|| "(not started by bakeoff)".into())
    };
    let t = &o.table;
    let lane = match &s.lanes {
        Some(l) => format!("{} ({}:{})", l.promoted_on, c.lane.host, c.lane.port),
        None => format!("{}:{}", c.lane.host, c.lane.port),
    };
    let mut l = vec![format!(
        "promote `{}` on lane {lane} from bundle {} (root digest {})",
        s.arm.id,
        s.dir.display(),
        s.root_digest
    )];
    if let Some(x) = &s.lanes {
        l.push(format!("lanes: {}", x.words));
    }
    l.extend([
        format!("authority: {}", s.authorization),
        format!(
            "winner check (passed): the recipe files of `{}` match what the bake-off measured ({} file(s))",
            s.arm.id,
            s.measured.files.len()
        ),
        "rollback check (passed):".into(),
    ]);
    l.extend(rollback_check.iter().map(|x| format!("  - {x}")));
    l.push(
        "bake check (passed): what the bake sends and runs is what the bake-off measured with"
            .into(),
    );
    l.extend(s.bake_checked.iter().map(|x| format!("  - {x}")));
    l.extend([
        "transaction (each action journaled before it is taken):".into(),
        format!("  1. take the lane lock of {}:{}", c.lane.host, c.lane.port),
        format!("  2. stop the incumbent `{}` (SIGTERM to its group, SIGKILL after {} s)", inc.id, c.lane.stop_grace_s),
        format!("  3. launch `{}`: {}", s.arm.id, cmd(&s.arm)),
        format!("  4. readiness with the exit watch (up to {} s); identity: served model `{}`, context {}", c.lane.ready_timeout_s, s.arm.served_model, s.arm.served_context),
        format!("  5. preflight: {}", preflight_names(c).join(", ")),
        format!(
            "  6. bake {} s in intervals of {} s: {} at {} req/s, open loop; an interval fails on TTFT p95 above {} ms (+{} %), decode tok/s below {} (−{} %), more than {} % failed requests, or a broken SLO; fewer than {} requests is inconclusive; {} failed interval(s) roll back",
            o.bake.as_secs_f64(),
            t.interval_s,
            traffic::sends(c),
            t.rate,
            fmt_opt(s.baseline.ttft_p95_ms.map(|b| b * (1.0 + t.ttft_p95_within_pct / 100.0))),
            t.ttft_p95_within_pct,
            fmt_opt(s.baseline.decode_tok_s_p50.map(|b| b * (1.0 - t.decode_tok_s_within_pct / 100.0))),
            t.decode_tok_s_within_pct,
            t.error_budget_pct,
            t.min_requests,
            t.failure_limit
        ),
        if s.canary.is_empty() {
            "     no gate canary (the campaign declares no tools or quality gate, or canary_every = 0)".into()
        } else {
            format!(
                "     with a canary of the {} gate(s) beside the traffic every {} interval(s) (a failed gate fails its interval)",
                s.canary.iter().map(|x| x.name()).collect::<Vec<_>>().join(" and "),
                t.canary_every
            )
        },
        "  7. keep the winner; the lane record names it".into(),
        "rollback plan (any failure in 2-6, a failed bake, --abort, Ctrl-C):".into(),
        format!("  - stop `{}`; start the incumbent `{}` again: {}", s.arm.id, inc.id, cmd(inc)),
        "  - prove it as a campaign's restoration does: the same argv/env hash, served model and context, unchanged files, a fresh preflight".into(),
        "  - if that fails: the lane is marked rollback-failed (every run and promote refused until resolved) and the restart command is printed".into(),
    ]);
    l
}

fn fmt_opt(v: Option<f64>) -> String {
    v.map(|x| format!("{x:.1}"))
        .unwrap_or_else(|| "(not measured)".into())
}

/// The preflight gates the transaction and the restoration run (smoke and streaming when the
/// campaign lists none).
pub fn preflight_names(c: &Campaign) -> Vec<String> {
    if c.gates.preflight.is_empty() {
        vec!["smoke".into(), "streaming".into()]
    } else {
        c.gates
            .preflight
            .iter()
            .map(|g| g.as_str().to_string())
            .collect()
    }
}
