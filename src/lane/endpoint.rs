//! Endpoint arms: a server someone else runs. Measured, never started or stopped: launch checks
//! its address (and an https certificate), stop does nothing, readiness polls its URL.

use super::recipe::{At, CommandLine, LaunchCommand, Named, Proof, Recipe, RecipeKind};
use super::{LaunchFailure, LaunchSpec, Masker, Running, StopFacts, StopHow};
use crate::client::Target;
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// `[arms.endpoint]`: an already-running server, measured but never started or stopped.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EndpointRecipe {
    /// `http://host:port` or `https://host[:port][/prefix]`; default the lane's address (filled
    /// by load).
    #[serde(default)]
    pub url: String,
    /// `https://` only: trust only the CA certificate(s) of this PEM file instead of the system
    /// store (relative to the campaign file's directory; absolute after load).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ca_file: Option<PathBuf>,
    /// `https://` only: do not verify the server's certificate; recorded as a limitation.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub insecure: bool,
}

impl EndpointRecipe {
    /// How the endpoint's certificate is checked (meaningful for `https://` URLs only).
    pub fn trust(&self) -> crate::client::Trust {
        crate::client::Trust::from_settings(self.ca_file.as_deref(), self.insecure)
    }

    /// The endpoint's request target: the URL with the certificate settings.
    pub fn target(&self) -> Result<crate::client::Target, String> {
        crate::client::Target::parse(&self.url).map(|t| t.with_trust(self.trust()))
    }
}

impl Recipe for EndpointRecipe {
    fn kind(&self) -> RecipeKind {
        RecipeKind::Endpoint
    }

    fn command(&self, _at: &At) -> Option<LaunchCommand> {
        None
    }

    /// The hash over its URL alone.
    fn identity_command(&self, _at: &At) -> CommandLine {
        CommandLine::new(vec![self.url.clone()])
    }

    fn named_files(&self) -> Named<'_> {
        Named::Paths(Vec::new())
    }

    fn other_files(&self) -> Vec<(PathBuf, &'static str)> {
        self.ca_file
            .iter()
            .map(|ca| (ca.clone(), "endpoint.ca_file"))
            .collect()
    }

    fn describe(
        &self,
        _lc: Option<&LaunchCommand>,
        _show: &dyn Fn(&CommandLine) -> String,
    ) -> Vec<String> {
        vec![format!(
            "       endpoint {} (already running; measured, never started or stopped){}",
            self.url,
            if self.url.starts_with("https://") {
                format!(
                    "; TLS certificate checked against {}",
                    self.trust().describe()
                )
            } else {
                String::new()
            }
        )]
    }

    fn launch_spec(
        &self,
        _at: &At,
        _lc: Option<&LaunchCommand>,
        _log_path: &Path,
    ) -> Result<LaunchSpec, String> {
        Ok(LaunchSpec::Endpoint {
            url: self.url.clone(),
            tls: self.trust(),
        })
    }

    fn proof(&self) -> Proof {
        Proof::Planned
    }

    fn serving_target(&self) -> Option<Target> {
        self.target().ok()
    }

    fn routed(&self) -> bool {
        true
    }

    fn limitation(&self, arm_id: &str) -> Option<String> {
        self.insecure.then(|| {
            format!(
                "arm `{arm_id}`: {}",
                crate::client::tls::insecure_note(&self.url)
            )
        })
    }
}

/// "Launches" an endpoint arm: its URL parses and an https certificate verifies (else it never
/// becomes ready: say so now, not at the ready timeout).
pub(super) async fn launch(
    url: &str,
    tls: &crate::client::Trust,
    identity: String,
    masker: Masker,
    started_ns: u64,
) -> Result<Running, LaunchFailure> {
    let fail =
        |e: String| LaunchFailure::spawn_failed(&masker, &format!("endpoint arm: {e}"), started_ns);
    let target = Target::parse(url)
        .map(|t| t.with_trust(tls.clone()))
        .map_err(fail)?;
    crate::client::tls::check_handshake(&target, Duration::from_secs(10))
        .await
        .map_err(fail)?;
    Ok(Running {
        handle: super::Handle::Endpoint,
        started_ns,
        started_wall: crate::clock::wall_rfc3339(),
        log_path: None,
        log_offset: 0,
        target,
        identity,
        masker,
        exit: None,
    })
}

/// Stopping an endpoint arm: nothing (`not-managed`).
pub(super) fn stop() -> StopFacts {
    StopFacts {
        how: StopHow::NotManaged,
        exit: None,
        took_ms: 0.0,
        group_gone: true,
        remaining_pids: Vec::new(),
        port_free: None,
        detail: "endpoint arm: not managed by bakeoff, nothing stopped".into(),
        slurm_job: None,
    }
}
