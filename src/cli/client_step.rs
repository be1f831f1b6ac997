//! `bakeoff client-step ORDER OUT` (hidden): the load client on a Slurm lane's node
//! (docs/fleet.md "Where the client runs"). `bakeoff run` starts it through srun as a job step
//! beside the arm; it runs the one timed load the order describes and writes the raw load
//! (per-request traces, never figures) for the controller to check, hash and compute from.

use std::path::PathBuf;

/// Run one ordered timed load here and write its raw traces.
#[derive(clap::Args, Debug)]
pub struct ClientStepArgs {
    /// The order the controller wrote (`<arm>-client-<n>-order.json` in the lane's folder).
    pub order: PathBuf,
    /// Where to write the load (`<arm>-client-<n>-load.json`).
    pub out: PathBuf,
}

pub fn run(args: ClientStepArgs) -> anyhow::Result<()> {
    // The runtime every timed load runs on (its park hook keeps the pacing window).
    let rt = crate::load::pace::client_runtime()?;
    rt.block_on(crate::run::client_step::serve(&args.order, &args.out))
        .map_err(anyhow::Error::msg)
}
