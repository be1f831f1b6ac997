//! The whole campaign file ([`Campaign`]), where it came from ([`Source`]), and the questions a
//! consumer asks of it.

use super::arms::{Arm, Role};
use super::gates::Gates;
use super::hashing::{canonical_json, hex_sha256};
use super::identity::{Identity, Lane};
use super::lanes::{names_port, FleetTable, LaneEntry, NamedLane, SINGLE_LANE_ID};
use super::recipes::EnvValue;
use super::workload::Workload;
use crate::evidence::Policy;
use crate::lane::recipe::At;
use serde::{Deserialize, Serialize};
use std::path::PathBuf;

/// A whole campaign file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Campaign {
    /// `[campaign]`: identity and output.
    pub campaign: Identity,
    /// `[lane]`: where every arm runs, one at a time. With `[[lanes]]` instead, load sets it to
    /// the incumbent's lane (the one the restoration steps act on).
    #[serde(default = "Lane::unset")]
    pub lane: Lane,
    /// `[[lanes]]`: several lanes, arms spread over them (empty with `[lane]`; see
    /// [`Campaign::lanes`] for both forms as one list).
    #[serde(rename = "lanes", default, skip_serializing_if = "Vec::is_empty")]
    pub fleet: Vec<LaneEntry>,
    /// `[fleet]`: the multi-lane campaign's own settings (its control recipe).
    #[serde(rename = "fleet", default, skip_serializing_if = "Option::is_none")]
    pub fleet_table: Option<FleetTable>,
    /// `[workload]`: the matched workload every arm gets.
    pub workload: Workload,
    /// `[gates]`: which pass/fail checks run, and their parameters.
    #[serde(default)]
    pub gates: Gates,
    /// `[policy]`: how the verdict is decided.
    #[serde(default)]
    pub policy: Policy,
    /// `[[arms]]`, in file order (the order they run in).
    pub arms: Vec<Arm>,
    /// `[history]`: the history database `bakeoff run` adds its bundle to (`--history` wins).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub history: Option<HistoryTable>,
    /// `[promotion]`: how `bakeoff promote` bakes this campaign's winner (defaults when absent).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub promotion: Option<super::promotion::PromotionTable>,
    /// Where the file came from (set by [`load`](crate::campaign::load), never read from the file).
    #[serde(skip_deserializing, default)]
    pub source: Source,
    /// Validation warnings, one line each (`file:line: field: problem; fix`): the campaign
    /// loads, but these limit what its evidence can show (set by `load`, never read or written).
    #[serde(skip)]
    pub warnings: Vec<String>,
}

/// `[history]`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HistoryTable {
    /// A SQLite file (relative to the campaign file) or a `postgres://USER@HOST:PORT/DATABASE`
    /// URL (its password from `BAKEOFF_HISTORY_PASSWORD`, never in the file).
    pub db: String,
}

/// The campaign file itself.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Source {
    /// The path given to [`load`](crate::campaign::load), made absolute against the directory
    /// bakeoff ran in (a bundle records it, so recovery resolves the same files from anywhere).
    pub path: PathBuf,
    /// The absolute directory relative paths were resolved against.
    pub dir: PathBuf,
    /// SHA-256 (hex) of the file's bytes.
    pub sha256: String,
}

impl Campaign {
    /// The arm with this id.
    pub fn arm(&self, id: &str) -> Option<&Arm> {
        self.arms.iter().find(|a| a.id == id)
    }

    /// `[history] db`, a relative SQLite path resolved against the campaign file's directory.
    pub fn history_db(&self) -> Option<String> {
        let db = &self.history.as_ref()?.db;
        if db.contains("://") || std::path::Path::new(db).is_absolute() {
            return Some(db.clone());
        }
        Some(self.source.dir.join(db).display().to_string())
    }

    /// The incumbent arm (load guarantees exactly one).
    pub fn incumbent(&self) -> &Arm {
        self.arms
            .iter()
            .find(|a| a.role == Role::Incumbent)
            .expect("a loaded campaign has exactly one incumbent")
    }

    /// The matched-prompt shape label (`workload.prompt_label`).
    pub fn prompt_label(&self) -> &str {
        &self.workload.prompt_label
    }

    /// The long-context target (profile name, prompt tokens) of an arm, when retrieval runs.
    pub fn long_context_target<'a>(&'a self, arm: &'a Arm) -> Option<(&'a str, u64)> {
        self.gates.retrieval.as_ref()?;
        let name = arm.long_context_profile.as_deref()?;
        let tokens = *self.workload.long_context_targets.get(name)?;
        Some((name, tokens))
    }

    /// SHA-256 (hex) of the arm's canonical JSON (keys sorted, no whitespace; paths as loaded,
    /// i.e. absolute; `from_env` values as `{"from_env":"NAME"}`, never their values). The
    /// restoration proof compares it before and after.
    pub fn recipe_hash(&self, arm: &Arm) -> String {
        let v = serde_json::to_value(arm).expect("an arm serializes to JSON");
        let mut s = String::new();
        canonical_json(&v, &mut s);
        hex_sha256(s.as_bytes())
    }

    /// Every environment variable name a `from_env` value of any arm (or `api_key_env`) reads,
    /// with the arm id, in file order.
    pub fn secret_env_names(&self) -> Vec<(String, String)> {
        let mut out = Vec::new();
        for arm in &self.arms {
            let env = arm.recipe().env();
            for v in env.into_iter().flat_map(|e| e.values()) {
                if let EnvValue::FromEnv(name) = v {
                    out.push((arm.id.clone(), name.clone()));
                }
            }
            if let Some(k) = &arm.api_key_env {
                out.push((arm.id.clone(), k.clone()));
            }
        }
        out
    }
}

/// The lanes, both forms as one list.
impl Campaign {
    /// Every lane, in file order: the one `[lane]` (id [`SINGLE_LANE_ID`], the incumbent's), or
    /// each `[[lanes]]` table.
    pub fn lanes(&self) -> Vec<NamedLane> {
        if self.fleet.is_empty() {
            let incumbent = self
                .arms
                .iter()
                .find(|a| a.role == Role::Incumbent)
                .map(|a| a.id.clone());
            return vec![NamedLane {
                id: SINGLE_LANE_ID.into(),
                incumbent,
                lane: self.lane.clone(),
            }];
        }
        self.fleet
            .iter()
            .map(|e| NamedLane {
                id: e.id.clone(),
                incumbent: e.incumbent.clone(),
                lane: e.lane(),
            })
            .collect()
    }

    /// The lane an arm's own start command ties it to when there are several: the one lane whose
    /// port the command names on every lane it could start on (a literal `--port 8001` in a
    /// process argv). None when the command follows the lane (a reference arm) or names no
    /// lane's port, and always with one lane.
    pub fn bound_lane(&self, arm: &Arm) -> Option<String> {
        let lanes = self.lanes();
        if lanes.len() < 2 {
            return None;
        }
        let argvs: Vec<Vec<String>> = lanes
            .iter()
            .map(|l| {
                let at = At {
                    campaign_id: &self.campaign.id,
                    arm_id: &arm.id,
                    host: &l.lane.host,
                    port: l.lane.port,
                    gpus: &l.lane.gpus,
                    stop_grace_s: l.lane.stop_grace_s,
                    slurm_node: l.lane.slurm_node.as_deref(),
                    slurm_gres: l.lane.slurm_gres.as_deref(),
                };
                arm.recipe()
                    .command(&at)
                    .map(|c| c.start.argv)
                    .unwrap_or_default()
            })
            .collect();
        let named: Vec<&NamedLane> = lanes
            .iter()
            .filter(|l| argvs.iter().all(|argv| names_port(argv, l.lane.port)))
            .collect();
        match named.as_slice() {
            [one] => Some(one.id.clone()),
            _ => None,
        }
    }

    /// The arm whose recipe runs the card-to-card control on every lane of a multi-lane
    /// campaign (`[fleet] control`, default the incumbent), or why none can: an arm bakeoff does
    /// not start (an endpoint) or one whose start command names one lane's port cannot run on
    /// every lane. Err with one lane too (nothing to compare).
    pub fn control_arm(&self) -> Result<&Arm, String> {
        if !self.multi_lane() {
            return Err("one lane: no card-to-card spread to measure".into());
        }
        let named = self.fleet_table.as_ref().and_then(|f| f.control.as_deref());
        let arm = match named {
            Some(id) => self
                .arm(id)
                .ok_or_else(|| format!("`[fleet] control` names no arm `{id}`"))?,
            None => self.incumbent(),
        };
        if !arm.kind().managed() {
            return Err(format!(
                "the control arm `{}` is not started by bakeoff (an endpoint), so it cannot run on every lane",
                arm.id
            ));
        }
        if let Some(l) = self.bound_lane(arm) {
            return Err(format!(
                "the control arm `{}` names lane `{l}`'s port in its start command, so it cannot run on every lane",
                arm.id
            ));
        }
        Ok(arm)
    }

    /// Whether the campaign runs on more than one lane (evidence names then carry the lane).
    /// `[fleet.slurm]`'s request (the holder job's sbatch argv), the file's own Slurm lanes'
    /// nodes excluded; None without `[fleet.slurm]`.
    pub fn slurm_request(&self) -> Option<Vec<String>> {
        let s = self.fleet_table.as_ref()?.grant.as_ref()?;
        let own: Vec<&str> = self
            .fleet
            .iter()
            .filter(|e| e.granted.is_none())
            .filter_map(|e| e.slurm_node.as_deref())
            .collect();
        Some(s.request(&self.campaign.id, &own))
    }

    /// Whether `lane`'s timed loads run on its Slurm node (docs/fleet.md "Where the client
    /// runs"): a Slurm lane, unless `[fleet] client = "controller"`.
    pub fn client_on_node(&self, lane: &Lane) -> bool {
        let set = self.fleet_table.as_ref().and_then(|f| f.client);
        lane.slurm_node.is_some() && set != Some(super::lanes::ClientPlace::Controller)
    }

    pub fn multi_lane(&self) -> bool {
        self.fleet.len() > 1
    }
}
