//! The nodes a `[fleet.slurm]` campaign asks Slurm for (docs/fleet.md "K lanes from Slurm"): a
//! holder job submitted with `sbatch -N K`, waited for until it runs (its `NodeList` expanded by
//! `scontrol show hostnames`), cancelled with `scancel` when the run ends. bakeoff never picks a
//! node: Slurm grants them. Each granted node then becomes a lane exactly as `slurm_node` does.

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// How often the pending request is asked about.
const POLL: Duration = Duration::from_millis(200);

/// A Slurm command's output, or its words when it failed.
fn slurm(tool: &str, args: &[&str]) -> Result<String, String> {
    let o = Command::new(tool)
        .args(args)
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("cannot run {tool}: {e}"))?;
    let out = String::from_utf8_lossy(&o.stdout).trim().to_string();
    if !o.status.success() {
        let err = String::from_utf8_lossy(&o.stderr).trim().to_string();
        return Err(format!(
            "{tool} {} failed: {}",
            args.join(" "),
            if err.is_empty() { &out } else { &err }
        ));
    }
    Ok(out)
}

/// Submits the request (`argv[0]` is sbatch, `--parsable`): the holder job's id.
pub fn submit(argv: &[String]) -> Result<String, String> {
    let (tool, args) = argv.split_first().ok_or("an empty request")?;
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let out = slurm(tool, &args).map_err(|e| format!("Slurm refused the request: {e}"))?;
    // `--parsable` prints `ID` or `ID;CLUSTER`.
    let id = out.split(';').next().unwrap_or_default().trim().to_string();
    if id.is_empty() || !id.chars().all(|c| c.is_ascii_digit()) {
        return Err(format!("sbatch printed no job id: «{out}»"));
    }
    Ok(id)
}

/// Where the request stands.
#[derive(Debug, Clone, PartialEq)]
pub enum Wait {
    /// The holder runs: the nodes Slurm granted.
    Granted(Vec<String>),
    /// Still pending past the timeout: Slurm's state and reason (squeue's `%T` and `%r`).
    Pending { state: String, reason: String },
    /// It ended before it ran (cancelled by someone, failed): its state and reason.
    Ended { state: String, reason: String },
    /// A signal came first.
    Cancelled,
}

/// `squeue -j ID`'s state, reason and node list (`%T|%r|%N`); None when squeue no longer lists it.
fn state(job: &str) -> Result<Option<(String, String, String)>, String> {
    let out = slurm("squeue", &["-h", "-j", job, "-o", "%T|%r|%N"]).or_else(|e| {
        if e.contains("Invalid job id") {
            Ok(String::new())
        } else {
            Err(e)
        }
    })?;
    let Some(line) = out.lines().next() else {
        return Ok(None);
    };
    let mut f = line.splitn(3, '|').map(|s| s.trim().to_string());
    Ok(Some((
        f.next().unwrap_or_default(),
        f.next().unwrap_or_default(),
        f.next().unwrap_or_default(),
    )))
}

/// The node names of a Slurm node list (`node[2-4]` → node2, node3, node4).
pub fn hostnames(list: &str) -> Result<Vec<String>, String> {
    let out = slurm("scontrol", &["show", "hostnames", list])?;
    Ok(out.lines().map(str::to_string).collect())
}

/// Waits until the holder `job` runs (its nodes), at most `timeout`; `cancelled` is asked
/// between polls (a signal ends the wait).
pub async fn wait_granted(
    job: &str,
    timeout: Duration,
    cancelled: impl Fn() -> bool,
) -> Result<Wait, String> {
    let t0 = Instant::now();
    let mut last = (String::from("PENDING"), String::from("None"));
    loop {
        if cancelled() {
            return Ok(Wait::Cancelled);
        }
        match state(job)? {
            Some((s, _, nodes)) if s == "RUNNING" => return hostnames(&nodes).map(Wait::Granted),
            Some((s, r, _)) if s == "PENDING" || s == "CONFIGURING" => last = (s, r),
            Some((s, r, _)) => {
                return Ok(Wait::Ended {
                    state: s,
                    reason: r,
                })
            }
            None => {
                return Ok(Wait::Ended {
                    state: "gone from squeue".into(),
                    reason: last.1,
                })
            }
        }
        if t0.elapsed() >= timeout {
            return Ok(Wait::Pending {
                state: last.0,
                reason: last.1,
            });
        }
        tokio::time::sleep(POLL).await;
    }
}

/// Cancels the holder `job` if Slurm still calls it `name` (a recorded id may have been reused
/// after the controller's state was reset), and waits (at most 10 s) until squeue no longer
/// lists it running. Ok(false): there was nothing of that name to cancel.
pub fn release(job: &str, name: &str) -> Result<bool, String> {
    let named = slurm("squeue", &["-h", "-j", job, "-o", "%j"]).unwrap_or_default();
    if named.lines().next().map(str::trim) != Some(name) {
        return Ok(false);
    }
    slurm("scancel", &[job])?;
    let t0 = Instant::now();
    while t0.elapsed() < Duration::from_secs(10) {
        match state(job) {
            Ok(Some((s, _, _)))
                if matches!(
                    s.as_str(),
                    "RUNNING" | "PENDING" | "COMPLETING" | "CONFIGURING"
                ) => {}
            _ => return Ok(true),
        }
        std::thread::sleep(POLL);
    }
    Err(format!(
        "scancel {job} was sent, but Slurm still lists the job after 10 s; check `squeue -j {job}`"
    ))
}
