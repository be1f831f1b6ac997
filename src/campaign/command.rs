//! The exact commands an arm's recipe runs, as plain data: for the dry-run display, for the
//! argv/env identity hash, and for the lane backends to start.
//!
//! Secrets: a `from_env` value is carried as its variable name only. Nothing here reads the
//! environment; [`Mask::from_process_env`] is the one exception and exists only to scrub values.

use super::spec::{Arm, Campaign, EnvValue, RecipeRef};
use sha2::{Digest, Sha256};
use std::collections::BTreeMap;
use std::path::PathBuf;

/// The program name that stands for this bakeoff executable (reference arms).
pub const SELF_PROGRAM: &str = "bakeoff";

/// One command: argv (never a shell string), the environment it adds, its working directory.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct CommandLine {
    /// argv\[0\] is the program: a path, a name looked up on PATH, or [`SELF_PROGRAM`] when
    /// `self_exe` is set.
    pub argv: Vec<String>,
    /// Added to bakeoff's own environment, which the child inherits.
    pub env: BTreeMap<String, EnvValue>,
    pub cwd: Option<PathBuf>,
    /// argv\[0\] means this bakeoff executable (`std::env::current_exe()`).
    pub self_exe: bool,
}

/// How an arm is stopped.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(tag = "how", rename_all = "kebab-case")]
pub enum StopMethod {
    /// SIGTERM to the process group, SIGKILL after `grace_s`.
    ProcessGroup { grace_s: u64 },
    /// These commands, in order (containers: `docker stop`, then `docker rm`).
    Commands { commands: Vec<CommandLine> },
    /// An endpoint: bakeoff does not stop it.
    NotManaged,
    /// A Slurm job (found by its job id, named `job_name`): `scancel --signal=TERM --full JOBID`,
    /// up to `grace_s` for it to end, then `scancel JOBID`.
    Slurm { job_name: String, grace_s: u64 },
}

/// How an arm is started and stopped.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct LaunchCommand {
    pub start: CommandLine,
    pub stop: StopMethod,
}

impl CommandLine {
    fn new(argv: Vec<String>) -> CommandLine {
        CommandLine {
            argv,
            env: BTreeMap::new(),
            cwd: None,
            self_exe: false,
        }
    }

    /// `NAME=value … argv…`, shell-quoted for display only (bakeoff never runs it through a
    /// shell). A `from_env` value shows as `NAME=<from $NAME, masked>`; `mask` scrubs any
    /// secret value that would still appear.
    pub fn display(&self, mask: &Mask) -> String {
        let mut parts: Vec<String> = Vec::new();
        for (k, v) in &self.env {
            parts.push(match v {
                EnvValue::Literal(s) => format!("{k}={}", shell_quote(s)),
                EnvValue::FromEnv(name) => format!("{k}=<from ${name}, masked>"),
            });
        }
        parts.extend(self.argv.iter().map(|a| shell_quote(a)));
        mask.scrub(&parts.join(" "))
    }

    /// The argv/env identity: SHA-256 (hex) over the argv and the env names and literal values,
    /// length-prefixed, env sorted by name; a `from_env` entry contributes its name only (never a
    /// value, so rotating a secret does not change it). Same encoding as
    /// `lane::argv_env_hash`, so for process arms it equals the identity the lane records when the
    /// command is launched unchanged.
    pub fn argv_env_hash(&self) -> String {
        fn field(h: &mut Sha256, bytes: &[u8]) {
            h.update((bytes.len() as u64).to_le_bytes());
            h.update(bytes);
        }
        let mut h = Sha256::new();
        field(&mut h, b"bakeoff-identity-v1");
        field(&mut h, &(self.argv.len() as u64).to_le_bytes());
        for a in &self.argv {
            field(&mut h, a.as_bytes());
        }
        field(&mut h, &(self.env.len() as u64).to_le_bytes());
        for (name, val) in &self.env {
            field(&mut h, name.as_bytes());
            match val {
                EnvValue::FromEnv(_) => field(&mut h, b"\x00secret"),
                EnvValue::Literal(v) => {
                    field(&mut h, b"\x01");
                    field(&mut h, v.as_bytes());
                }
            }
        }
        h.finalize().iter().map(|b| format!("{b:02x}")).collect()
    }
}

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

/// Single-quotes `s` for a POSIX shell unless it is made only of safe characters.
pub fn shell_quote(s: &str) -> String {
    let safe = !s.is_empty()
        && s.chars().all(|c| {
            c.is_ascii_alphanumeric()
                || matches!(c, '_' | '-' | '.' | '/' | ':' | ',' | '=' | '@' | '+' | '%')
        });
    if safe {
        s.to_string()
    } else {
        format!("'{}'", s.replace('\'', "'\\''"))
    }
}

/// The `sbatch` command line of a Slurm recipe: `sbatch --parsable --job-name=N --chdir=CWD
/// --export=ALL [--partition=…] [--nodelist=…] [--constraint=…] [--gres=gpu:[TYPE:]N]
/// [--cpus-per-task=N] [--mem=…] [--time=…] [--account=…] [sbatch_args…] --wrap=exec ARGV…`
/// (each argument shell-quoted by bakeoff). The env travels in sbatch's environment, which Slurm
/// exports to the job; the lane adds `--output=LOG --open-mode=append` when it submits.
pub fn slurm_submit(s: &super::spec::SlurmRecipe) -> CommandLine {
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

impl Campaign {
    /// The commands that start and stop `arm` in this campaign's lane; `None` for an endpoint
    /// arm (bakeoff neither starts nor stops it).
    ///
    /// - process: the argv and env as loaded, `cwd` set; `CUDA_VISIBLE_DEVICES` = the lane's GPU
    ///   UUIDs is added when the lane has GPUs and the arm does not set it;
    /// - container: `docker run --detach --name … --label bakeoff.campaign=… --label
    ///   bakeoff.arm=… [--gpus "device=UUID,…"] --publish HOST:PORT:CPORT [--volume …]
    ///   [--env NAME=value | --env NAME] [run_args] IMAGE [args]`; a `from_env` value is passed as
    ///   `--env NAME` with the value in the docker CLI's environment; stop: `docker stop --time
    ///   GRACE NAME`, then `docker rm --force NAME`;
    /// - reference: `bakeoff engine --profile P --host H --port PORT [--seed N]`.
    pub fn launch_command(&self, arm: &Arm) -> Option<LaunchCommand> {
        let lane = &self.lane;
        let group = StopMethod::ProcessGroup {
            grace_s: lane.stop_grace_s,
        };
        match arm.recipe() {
            RecipeRef::Process(p) => {
                let mut cmd = CommandLine::new(p.argv.clone());
                cmd.env = p.env.clone();
                if !lane.gpus.is_empty() && !cmd.env.contains_key("CUDA_VISIBLE_DEVICES") {
                    cmd.env.insert(
                        "CUDA_VISIBLE_DEVICES".into(),
                        EnvValue::Literal(lane.gpus.join(",")),
                    );
                }
                cmd.cwd = Some(p.cwd.clone());
                Some(LaunchCommand {
                    start: cmd,
                    stop: group,
                })
            }
            RecipeRef::Container(c) => {
                let mut argv = vec![c.docker.clone(), "run".into(), "--detach".into()];
                argv.extend(["--name".into(), c.name.clone()]);
                let mut labels = vec![
                    ("bakeoff.campaign".to_string(), self.campaign.id.clone()),
                    ("bakeoff.arm".to_string(), arm.id.clone()),
                ];
                labels.extend(c.labels.iter().map(|(k, v)| (k.clone(), v.clone())));
                for (k, v) in labels {
                    argv.extend(["--label".into(), format!("{k}={v}")]);
                }
                if !c.gpus.is_empty() {
                    argv.extend(["--gpus".into(), format!("\"device={}\"", c.gpus.join(","))]);
                }
                let host = if lane.host.contains(':') {
                    format!("[{}]", lane.host)
                } else {
                    lane.host.clone()
                };
                argv.extend([
                    "--publish".into(),
                    format!("{host}:{}:{}", lane.port, c.container_port),
                ]);
                for v in &c.volumes {
                    let ro = if v.read_only { ":ro" } else { "" };
                    argv.extend([
                        "--volume".into(),
                        format!("{}:{}{ro}", v.host.display(), v.container),
                    ]);
                }
                let mut cli_env = BTreeMap::new();
                for (k, v) in &c.env {
                    match v {
                        EnvValue::Literal(s) => argv.extend(["--env".into(), format!("{k}={s}")]),
                        EnvValue::FromEnv(_) => {
                            argv.extend(["--env".into(), k.clone()]);
                            cli_env.insert(k.clone(), v.clone());
                        }
                    }
                }
                argv.extend(c.run_args.iter().cloned());
                argv.push(c.image.clone());
                argv.extend(c.args.iter().cloned());
                let mut start = CommandLine::new(argv);
                start.env = cli_env;
                let stop = vec![
                    CommandLine::new(vec![
                        c.docker.clone(),
                        "stop".into(),
                        "--time".into(),
                        lane.stop_grace_s.to_string(),
                        c.name.clone(),
                    ]),
                    CommandLine::new(vec![
                        c.docker.clone(),
                        "rm".into(),
                        "--force".into(),
                        c.name.clone(),
                    ]),
                ];
                Some(LaunchCommand {
                    start,
                    stop: StopMethod::Commands { commands: stop },
                })
            }
            RecipeRef::Endpoint(_) => None,
            RecipeRef::Slurm(s) => Some(LaunchCommand {
                start: slurm_submit(s),
                stop: StopMethod::Slurm {
                    job_name: s.job_name.clone(),
                    grace_s: lane.stop_grace_s,
                },
            }),
            RecipeRef::Reference(r) => {
                let mut argv = vec![SELF_PROGRAM.to_string()];
                argv.extend(crate::refengine::command_args(
                    &r.profile, &lane.host, lane.port, r.seed,
                ));
                let mut start = CommandLine::new(argv);
                start.self_exe = true;
                Some(LaunchCommand { start, stop: group })
            }
        }
    }

    /// The argv/env identity of how `arm` is started ([`CommandLine::argv_env_hash`]); for an
    /// endpoint arm, the same hash over its URL alone. Never covers a secret value.
    pub fn argv_env_hash(&self, arm: &Arm) -> String {
        match (self.launch_command(arm), arm.recipe()) {
            (Some(l), _) => l.start.argv_env_hash(),
            (None, RecipeRef::Endpoint(e)) => CommandLine::new(vec![e.url.clone()]).argv_env_hash(),
            (None, _) => unreachable!("only endpoint arms have no launch command"),
        }
    }
}
