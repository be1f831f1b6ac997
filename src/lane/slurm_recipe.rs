//! A Slurm arm's recipe (`[arms.slurm]`): its table, its `sbatch` command line, its launch
//! spec, how its jobs are found by name. The lane code that runs it is [`super::slurm`]; after a
//! crash, [`super::adopt_slurm`].

use super::procnet::Listener;
use super::recipe::{
    resolve_env, shell_quote, At, CommandLine, EnvValue, LaunchCommand, Named, Proof, Recipe,
    RecipeKind, StopMethod,
};
use super::{LaunchSpec, SlurmSpec};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// `[arms.slurm]`: the command submitted as a Slurm batch job (`sbatch`), stopped the Slurm way
/// (`scancel --signal=TERM`, then `scancel` after the lane's grace). The engine serves on the job's
/// node, on the lane port.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SlurmRecipe {
    /// Program and arguments the job runs (`exec`'d by the batch script, each argument quoted by
    /// bakeoff); never a shell string. Must listen on the lane port of the job's node.
    pub argv: Vec<String>,
    /// Added to the job's environment. The values travel in sbatch's environment (Slurm exports it
    /// to the job), never on a command line or in the job script; `from_env` values are secrets.
    #[serde(default)]
    pub env: BTreeMap<String, EnvValue>,
    /// The job's working directory (`--chdir`); default the campaign file's directory.
    #[serde(default)]
    pub cwd: PathBuf,
    /// `--partition`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub partition: Option<String>,
    /// `--nodelist` (e.g. "gpu-node-07").
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nodelist: Option<String>,
    /// `--constraint` (node features, e.g. "h100").
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub constraint: Option<String>,
    /// GPUs per node, as `--gres=gpu:N` (`--gres=gpu:TYPE:N` with `gpu_type`); 0 = none.
    #[serde(default)]
    pub gpus: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gpu_type: Option<String>,
    /// `--cpus-per-task`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpus: Option<u32>,
    /// `--mem` (e.g. "64G").
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory: Option<String>,
    /// `--time` (minutes, or `[D-]HH:MM:SS`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub time_limit: Option<String>,
    /// `--account`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub account: Option<String>,
    /// Extra sbatch options (e.g. `--qos=high`); the ones bakeoff sets itself are refused.
    #[serde(default)]
    pub sbatch_args: Vec<String>,
    /// `--job-name`; default `bakeoff-<campaign id>-<arm id>` (filled by load). It is how bakeoff
    /// finds a Slurm incumbent.
    #[serde(default)]
    pub job_name: String,
    /// Longest wait for the job to leave PENDING; past it the job is cancelled and the arm fails
    /// with the scheduler's reason. Default: the lane's ready timeout.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pending_timeout_s: Option<u64>,
}

impl Recipe for SlurmRecipe {
    fn kind(&self) -> RecipeKind {
        RecipeKind::Slurm
    }

    fn env(&self) -> Option<&BTreeMap<String, EnvValue>> {
        Some(&self.env)
    }

    fn command(&self, at: &At) -> Option<LaunchCommand> {
        let mut start = submit(self);
        // A Slurm lane pins the job to its node (load refuses an arm's own `nodelist` there);
        // before `--wrap`, the last argument.
        if let Some(node) = at.slurm_node {
            let at_wrap = start.argv.len().saturating_sub(1);
            start.argv.insert(at_wrap, format!("--nodelist={node}"));
        }
        // A lane Slurm granted gives its GPUs to the arm's job (the holder asks none).
        if let Some(gres) = at.slurm_gres.filter(|_| self.gpus == 0) {
            let at_wrap = start.argv.len().saturating_sub(1);
            start.argv.insert(at_wrap, format!("--gres={gres}"));
        }
        Some(LaunchCommand {
            start,
            stop: StopMethod::Slurm {
                job_name: self.job_name.clone(),
                grace_s: at.stop_grace_s,
            },
        })
    }

    /// A Slurm job runs its argv with its env in its cwd, as a process arm does (the node
    /// shares the submitting host's filesystem, which the lane needs for the job's log too).
    fn named_files(&self) -> Named<'_> {
        Named::Command {
            argv: &self.argv,
            env: &self.env,
            cwd: &self.cwd,
        }
    }

    fn placement_line(&self) -> Option<String> {
        Some(job_line(self))
    }

    fn launch_spec(
        &self,
        _at: &At,
        lc: Option<&LaunchCommand>,
        log_path: &Path,
    ) -> Result<LaunchSpec, String> {
        let lc = lc.ok_or("the arm has no launch command")?;
        Ok(LaunchSpec::Slurm(SlurmSpec {
            sbatch_argv: lc.start.argv.clone(),
            env: resolve_env(&lc.start.env)?,
            cwd: lc.start.cwd.clone(),
            log_path: log_path.to_path_buf(),
            job_name: self.job_name.clone(),
            pending_timeout: self.pending_timeout_s.map(Duration::from_secs),
        }))
    }

    /// Its live jobs (found by its job name); empty when squeue cannot be run.
    fn jobs(&self, lc: Option<&LaunchCommand>) -> Vec<(String, String, String)> {
        match lc {
            Some(lc) => {
                super::slurm::jobs_named(&lc.start.argv[0], &self.job_name).unwrap_or_default()
            }
            None => Vec::new(),
        }
    }

    fn job_name(&self) -> Option<&str> {
        Some(&self.job_name)
    }

    fn own_nodes(&self) -> Option<&str> {
        self.nodelist.as_deref()
    }

    fn partition(&self) -> Option<&str> {
        self.partition.as_deref()
    }

    /// Does a job of its name run?
    fn serves(&self, lc: Option<&LaunchCommand>, _l: &Listener) -> bool {
        self.jobs(lc).iter().any(|j| j.1 == "RUNNING")
    }

    fn detaches_itself(&self) -> bool {
        true
    }

    fn proof(&self) -> Proof {
        Proof::Jobs
    }

    /// `sbatch --test-only` of its own submission: the partition accepts the job (nothing is
    /// submitted).
    fn restart_check(&self, lc: Option<&LaunchCommand>) -> Result<String, String> {
        let lc = lc.ok_or("it has no sbatch command")?;
        let mut argv = lc.start.argv.clone();
        if argv.is_empty() {
            return Err("its sbatch command is empty".into());
        }
        argv.insert(1, "--test-only".into());
        let o = std::process::Command::new(&argv[0])
            .args(&argv[1..])
            .current_dir(
                lc.start
                    .cwd
                    .clone()
                    .unwrap_or_else(|| std::path::PathBuf::from("/")),
            )
            .output()
            .map_err(|e| format!("cannot run {}: {e}", argv[0]))?;
        let said = String::from_utf8_lossy(&o.stderr).trim().to_string();
        if o.status.success() {
            Ok(format!("sbatch --test-only accepts its job ({said})"))
        } else {
            Err(format!("sbatch --test-only refuses its job: {said}"))
        }
    }
}

/// The `sbatch` command line of a Slurm recipe: `sbatch --parsable --job-name=N --chdir=CWD
/// --export=ALL [--partition=…] [--nodelist=…] [--constraint=…] [--gres=gpu:[TYPE:]N]
/// [--cpus-per-task=N] [--mem=…] [--time=…] [--account=…] [sbatch_args…] --wrap=exec ARGV…`
/// (each argument shell-quoted by bakeoff). The env travels in sbatch's environment, which Slurm
/// exports to the job; the lane adds `--output=LOG --open-mode=append` when it submits.
pub fn submit(s: &SlurmRecipe) -> CommandLine {
    let mut argv = vec![
        "sbatch".to_string(),
        "--parsable".into(),
        format!("--job-name={}", s.job_name),
        format!("--chdir={}", s.cwd.display()),
        "--export=ALL".into(),
    ];
    let opt = |argv: &mut Vec<String>, name: &str, v: &Option<String>| {
        if let Some(v) = v {
            argv.push(format!("--{name}={v}"));
        }
    };
    opt(&mut argv, "partition", &s.partition);
    opt(&mut argv, "nodelist", &s.nodelist);
    opt(&mut argv, "constraint", &s.constraint);
    if s.gpus > 0 {
        argv.push(match &s.gpu_type {
            Some(t) => format!("--gres=gpu:{t}:{}", s.gpus),
            None => format!("--gres=gpu:{}", s.gpus),
        });
    }
    opt(&mut argv, "cpus-per-task", &s.cpus.map(|c| c.to_string()));
    opt(&mut argv, "mem", &s.memory);
    opt(&mut argv, "time", &s.time_limit);
    opt(&mut argv, "account", &s.account);
    argv.extend(s.sbatch_args.iter().cloned());
    let quoted: Vec<String> = s.argv.iter().map(|a| shell_quote(a)).collect();
    argv.push(format!("--wrap=exec {}", quoted.join(" ")));
    let mut cmd = CommandLine::new(argv);
    cmd.env = s.env.clone();
    cmd.cwd = Some(s.cwd.clone());
    cmd
}

/// The Slurm job spec in words: name, where it may run, what it asks for, how long it may wait.
fn job_line(s: &SlurmRecipe) -> String {
    let mut parts = vec![format!("Slurm job {}", s.job_name)];
    let mut add = |k: &str, v: Option<String>| {
        if let Some(v) = v {
            parts.push(format!("{k} {v}"));
        }
    };
    add("partition", s.partition.clone());
    add("nodes", s.nodelist.clone());
    add("constraint", s.constraint.clone());
    add(
        "gres",
        (s.gpus > 0).then(|| match &s.gpu_type {
            Some(t) => format!("gpu:{t}:{}", s.gpus),
            None => format!("gpu:{}", s.gpus),
        }),
    );
    add("cpus", s.cpus.map(|c| c.to_string()));
    add("mem", s.memory.clone());
    add("time limit", s.time_limit.clone());
    add("account", s.account.clone());
    add(
        "pending timeout",
        s.pending_timeout_s.map(|t| format!("{t} s")),
    );
    let mut line = parts.join(", ");
    line.push_str("; endpoint on the job's node, lane port");
    line
}
