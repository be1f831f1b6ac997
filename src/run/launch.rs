//! The lane and launch specs the lane module takes, from the campaign: the lane, how an arm is
//! started, its scheduler jobs, whether a listener runs its recipe.

use crate::campaign::{Arm, Campaign};
use crate::lane::{procnet, LaneSpec, LaunchSpec};
use std::path::Path;
use std::time::Duration;

/// The lane as the lane module wants it.
pub fn lane_spec(c: &Campaign) -> LaneSpec {
    LaneSpec {
        host: c.lane.host.clone(),
        port: c.lane.port,
        health_path: c.lane.health_path.clone(),
        ready_timeout: Duration::from_secs(c.lane.ready_timeout_s),
        stop_grace: Duration::from_secs(c.lane.stop_grace_s),
        gpu_uuids: c.lane.gpus.clone(),
    }
}

/// How the arm is started: the lane's launch spec (secrets resolved from the environment), as
/// its recipe kind builds it.
pub fn launch_spec(c: &Campaign, arm: &Arm, log_path: &Path) -> Result<LaunchSpec, String> {
    let lc = c.launch_command(arm);
    arm.recipe().launch_spec(&c.at(arm), lc.as_ref(), log_path)
}

/// The live jobs of an arm that runs as scheduler jobs found by name (a Slurm arm): (job id,
/// state, node); empty for other arms or when they cannot be listed.
pub fn slurm_jobs(c: &Campaign, arm: &Arm) -> Vec<(String, String, String)> {
    arm.recipe().jobs(c.launch_command(arm).as_ref())
}

/// Does the process listening as `l` run the incumbent's recipe? (A Slurm arm: does a job of
/// its name run?)
pub fn runs_recipe(c: &Campaign, arm: &Arm, l: &procnet::Listener) -> bool {
    arm.recipe().serves(c.launch_command(arm).as_ref(), l)
}
