//! Reference-engine arms: `bakeoff engine --profile P --host H --port PORT [--seed N]`, run as a
//! process arm (this bakeoff executable).

use super::recipe::{
    At, CommandLine, LaunchCommand, Named, Recipe, RecipeKind, StopMethod, SELF_PROGRAM,
};
use super::{LaneSpec, ReferenceSpec};
use serde::{Deserialize, Serialize};
use std::path::PathBuf;

/// `[arms.reference]`: `bakeoff engine --profile P` on the lane port.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ReferenceRecipe {
    /// A reference-engine profile (docs/reference-engine.md); absolute after load.
    pub profile: PathBuf,
    /// `--seed` (default: none, the engine's default 0).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seed: Option<u64>,
}

impl Recipe for ReferenceRecipe {
    fn kind(&self) -> RecipeKind {
        RecipeKind::Reference
    }

    /// `bakeoff engine --profile P --host H --port PORT [--seed N]`, stopped as a process group.
    fn command(&self, at: &At) -> Option<LaunchCommand> {
        let mut argv = vec![SELF_PROGRAM.to_string()];
        argv.extend(crate::refengine::command_args(
            &self.profile,
            at.host,
            at.port,
            self.seed,
        ));
        let mut start = CommandLine::new(argv);
        start.self_exe = true;
        Some(LaunchCommand {
            start,
            stop: StopMethod::ProcessGroup {
                grace_s: at.stop_grace_s,
            },
        })
    }

    fn named_files(&self) -> Named<'_> {
        Named::Paths(vec![self.profile.clone()])
    }
}

/// The argv of a [`ReferenceSpec`] on `lane`.
pub(super) fn argv(r: &ReferenceSpec, lane: &LaneSpec) -> Vec<String> {
    let bin = r
        .bin
        .clone()
        .or_else(|| std::env::current_exe().ok())
        .unwrap_or_else(|| PathBuf::from("bakeoff"));
    let mut argv = vec![bin.display().to_string()];
    argv.extend(crate::refengine::command_args(
        &r.profile, &lane.host, lane.port, None,
    ));
    argv
}
