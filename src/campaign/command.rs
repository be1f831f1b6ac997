//! The exact commands an arm's recipe runs, as plain data: for the dry-run display, for the
//! argv/env identity hash, and for the lane backends to start.
//!
//! Secrets: a `from_env` value is carried as its variable name only. Nothing here reads the
//! environment; [`Mask::from_process_env`] is the one exception and exists only to scrub values.

use super::spec::{Arm, Campaign};
use crate::lane::recipe::At;

pub use crate::lane::recipe::{shell_quote, CommandLine, LaunchCommand, StopMethod, SELF_PROGRAM};

/// Scrubs secret values from displayed text. The dry-run never reads a secret to show it; a mask
/// built with [`Mask::from_process_env`] additionally replaces the current value of every
/// `from_env` variable with `<masked>` wherever it appears (say, pasted as a literal by mistake).
#[derive(Clone, Default)]
pub struct Mask {
    /// Values to scrub, longest first.
    values: Vec<String>,
}

impl std::fmt::Debug for Mask {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Mask({} values)", self.values.len())
    }
}

impl Mask {
    /// Scrub nothing beyond never resolving `from_env` values.
    pub fn none() -> Mask {
        Mask::default()
    }

    /// Scrub these values (values shorter than 4 characters are ignored: too likely to match
    /// innocent text).
    pub fn values<I: IntoIterator<Item = String>>(values: I) -> Mask {
        let mut v: Vec<String> = values.into_iter().filter(|s| s.len() >= 4).collect();
        v.sort_by(|a, b| b.len().cmp(&a.len()).then(a.cmp(b)));
        v.dedup();
        Mask { values: v }
    }

    /// Scrub the current values of every variable the campaign reads with `from_env` or
    /// `api_key_env`.
    pub fn from_process_env(c: &Campaign) -> Mask {
        Mask::values(
            c.secret_env_names()
                .into_iter()
                .filter_map(|(_, name)| std::env::var(name).ok()),
        )
    }

    pub fn scrub(&self, text: &str) -> String {
        let mut out = text.to_string();
        for v in &self.values {
            if out.contains(v.as_str()) {
                out = out.replace(v.as_str(), "<masked>");
            }
        }
        out
    }
}

impl Campaign {
    /// Where `arm` runs, as its recipe kind builds its commands.
    pub fn at<'a>(&'a self, arm: &'a Arm) -> At<'a> {
        At {
            campaign_id: &self.campaign.id,
            arm_id: &arm.id,
            host: &self.lane.host,
            port: self.lane.port,
            gpus: &self.lane.gpus,
            stop_grace_s: self.lane.stop_grace_s,
            slurm_node: self.lane.slurm_node.as_deref(),
            slurm_gres: self.lane.slurm_gres.as_deref(),
        }
    }

    /// The commands that start and stop `arm` in this campaign's lane (its kind's, see
    /// [`crate::lane::Recipe::command`]); `None` for an endpoint arm (bakeoff neither starts
    /// nor stops it).
    pub fn launch_command(&self, arm: &Arm) -> Option<LaunchCommand> {
        let mut lc = arm.recipe().command(&self.at(arm))?;
        // The lane's `env` reaches every arm started on it; the arm's own value wins.
        for (k, v) in &self.lane.env {
            lc.start
                .env
                .entry(k.clone())
                .or_insert_with(|| crate::lane::recipe::EnvValue::Literal(v.clone()));
        }
        Some(lc)
    }

    /// The shell line that starts `arm` again by hand in this lane, detached, its output appended
    /// to `log`; secrets as the variables the campaign names (the caller scrubs what is left with
    /// its [`Mask`]). `None` for an endpoint arm. Restoration and promotion print it when the
    /// incumbent could not be put back, so the operator can.
    pub fn restart_command(&self, arm: &Arm, log: &std::path::Path) -> Option<String> {
        let lc = self.launch_command(arm)?;
        let st = &lc.start;
        let mut argv = st.argv.clone();
        if st.self_exe {
            if let Ok(e) = std::env::current_exe() {
                argv[0] = e.display().to_string();
            }
        }
        let mut parts: Vec<String> = st
            .env
            .iter()
            .map(|(k, v)| match v {
                crate::lane::recipe::EnvValue::Literal(s) => format!("{k}={}", shell_quote(s)),
                crate::lane::recipe::EnvValue::FromEnv(name) => format!("{k}=\"${name}\""),
            })
            .collect();
        let argv = argv.iter().map(|a| shell_quote(a));
        if arm.recipe().detaches_itself() {
            parts.extend(argv);
            return Some(parts.join(" "));
        }
        parts.push("setsid".into());
        parts.extend(argv);
        let cd = st
            .cwd
            .as_ref()
            .map(|d| format!("cd {} && ", shell_quote(&d.display().to_string())))
            .unwrap_or_default();
        Some(format!(
            "({cd}{} >> {} 2>&1 < /dev/null &)",
            parts.join(" "),
            shell_quote(&log.display().to_string())
        ))
    }

    /// The argv/env identity of how `arm` is started ([`CommandLine::argv_env_hash`]); for an
    /// endpoint arm, the same hash over its URL alone. Never covers a secret value.
    pub fn argv_env_hash(&self, arm: &Arm) -> String {
        arm.recipe().identity_command(&self.at(arm)).argv_env_hash()
    }
}
