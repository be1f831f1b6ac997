//! A command run as a job step of an arm's Slurm job, on the job's node (docs/fleet.md "Where
//! the client runs"): `srun --jobid=<job> --overlap -N1 -n1 -w <node> <argv>`. The step shares
//! the job's resources (`--overlap`), so it starts at once beside the engine the job serves.
//!
//! A step lives as long as its `srun`: dropping the wait (a signal cancelled the run's step)
//! sends srun SIGTERM, which srun forwards to the step's task and then ends, so no client is
//! left loading the engine after bakeoff stopped waiting for it.

use super::slurm::SlurmJob;
use std::process::Stdio;

/// What a finished step said.
#[derive(Debug, Clone)]
pub struct StepRun {
    /// The command line run (srun's argv), for the evidence.
    pub argv: Vec<String>,
    pub success: bool,
    /// `exit code N`, or `signal N`.
    pub status: String,
    pub stderr: String,
}

/// The argv of `argv` as a step of `job` on `node` (srun beside the job's sbatch).
pub fn step_argv(job: &SlurmJob, node: &str, name: &str, argv: &[String]) -> Vec<String> {
    let mut a = vec![
        job.tool("srun").display().to_string(),
        format!("--jobid={}", job.job_id),
        "--overlap".into(),
        "--nodes=1".into(),
        "--ntasks=1".into(),
        format!("--nodelist={node}"),
        format!("--job-name={name}"),
        "--quiet".into(),
    ];
    a.extend(argv.iter().cloned());
    a
}

/// Runs `argv` as a step of `job` on `node` and waits for it to end (never a shell: each argument
/// is its own). Err: srun could not be started.
pub async fn run(
    job: &SlurmJob,
    node: &str,
    name: &str,
    argv: &[String],
) -> Result<StepRun, String> {
    let full = step_argv(job, node, name, argv);
    let mut cmd = tokio::process::Command::new(&full[0]);
    cmd.args(&full[1..])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    let child = cmd
        .spawn()
        .map_err(|e| format!("cannot run `{}`: {e}", full[0]))?;
    let guard = TermOnDrop(child.id());
    let out = child
        .wait_with_output()
        .await
        .map_err(|e| format!("`{}` failed: {e}", full[0]))?;
    std::mem::forget(guard);
    let status = match (
        out.status.code(),
        std::os::unix::process::ExitStatusExt::signal(&out.status),
    ) {
        (Some(c), _) => format!("exit code {c}"),
        (None, Some(s)) => format!("signal {s}"),
        (None, None) => "unknown status".into(),
    };
    Ok(StepRun {
        argv: full,
        success: out.status.success(),
        status,
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    })
}

/// Sends srun SIGTERM when the wait is dropped before the step ended.
struct TermOnDrop(Option<u32>);

impl Drop for TermOnDrop {
    fn drop(&mut self) {
        if let Some(pid) = self.0 {
            // SAFETY: kill(2) on srun's own pid, which this process spawned and has not reaped
            // (the wait was dropped before it returned).
            unsafe {
                libc::kill(pid as libc::pid_t, libc::SIGTERM);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_step_runs_in_the_arms_job_on_the_lanes_node() {
        let job = {
            let mut j = SlurmJob::default();
            j.job_id = "41".into();
            j
        };
        let a = step_argv(
            &job,
            "node2",
            "bakeoff-client",
            &["/x/bakeoff".into(), "client-step".into()],
        );
        assert_eq!(
            a.join(" "),
            "srun --jobid=41 --overlap --nodes=1 --ntasks=1 --nodelist=node2 --job-name=bakeoff-client --quiet /x/bakeoff client-step"
        );
    }
}
