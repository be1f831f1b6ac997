//! A recipe kind, as the campaign file declares it: the one interface every lane kind
//! implements ([`Recipe`]), and the plain data its commands are ([`CommandLine`],
//! [`LaunchCommand`], [`StopMethod`]).
//!
//! Each kind's recipe table lives with the rest of that kind (`process.rs`, `reference.rs`,
//! `container_recipe.rs`, `slurm_recipe.rs`, `endpoint.rs`) and answers everything the layers
//! above ask of a kind: its commands (secrets as names only), the files it names (for the
//! fingerprint), its dry-run lines, its launch spec, whether what serves the lane is it, how the
//! restoration proves it is back. Nothing outside `lane/` branches on the kind.
//!
//! Secrets: a `from_env` value is carried as its variable name only; nothing here reads the
//! environment except [`resolve_env`], which builds a launch spec.

use super::procnet::Listener;
use super::{EnvVal, LaunchSpec};
use crate::client::Target;
use serde::de::{self, Deserializer, MapAccess, Visitor};
use serde::{Deserialize, Serialize, Serializer};
use sha2::{Digest, Sha256};
use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};

/// A string value that is either literal or read from an environment variable at launch.
/// In the file: `"literal"` or `{ from_env = "NAME" }`. A `from_env` value is never read while
/// loading, planning or rendering; only its name is shown or hashed.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum EnvValue {
    Literal(String),
    FromEnv(String),
}

impl EnvValue {
    /// Whether the value comes from the environment (and is treated as a secret).
    pub fn is_from_env(&self) -> bool {
        matches!(self, EnvValue::FromEnv(_))
    }
}

impl Serialize for EnvValue {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            EnvValue::Literal(v) => s.serialize_str(v),
            EnvValue::FromEnv(name) => {
                use serde::ser::SerializeMap;
                let mut m = s.serialize_map(Some(1))?;
                m.serialize_entry("from_env", name)?;
                m.end()
            }
        }
    }
}

impl<'de> Deserialize<'de> for EnvValue {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = EnvValue;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a string, a number, a boolean, or { from_env = \"NAME\" }")
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<EnvValue, E> {
                Ok(EnvValue::Literal(v.to_string()))
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<EnvValue, E> {
                Ok(EnvValue::Literal(v.to_string()))
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<EnvValue, E> {
                Ok(EnvValue::Literal(v.to_string()))
            }
            fn visit_f64<E: de::Error>(self, v: f64) -> Result<EnvValue, E> {
                Ok(EnvValue::Literal(v.to_string()))
            }
            fn visit_bool<E: de::Error>(self, v: bool) -> Result<EnvValue, E> {
                Ok(EnvValue::Literal(v.to_string()))
            }
            fn visit_map<A: MapAccess<'de>>(self, mut m: A) -> Result<EnvValue, A::Error> {
                let mut name = None;
                while let Some(k) = m.next_key::<String>()? {
                    if k != "from_env" {
                        return Err(de::Error::unknown_field(&k, &["from_env"]));
                    }
                    if name.is_some() {
                        return Err(de::Error::duplicate_field("from_env"));
                    }
                    name = Some(m.next_value::<String>()?);
                }
                name.map(EnvValue::FromEnv)
                    .ok_or_else(|| de::Error::missing_field("from_env"))
            }
        }
        d.deserialize_any(V)
    }
}

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
    pub fn new(argv: Vec<String>) -> CommandLine {
        CommandLine {
            argv,
            env: BTreeMap::new(),
            cwd: None,
            self_exe: false,
        }
    }

    /// `NAME=value … argv…`, shell-quoted for display only (bakeoff never runs it through a
    /// shell). A `from_env` value shows as `NAME=<from $NAME, masked>`; scrub the result of any
    /// secret value that would still appear (`campaign::Mask`).
    pub fn shown(&self) -> String {
        let mut parts: Vec<String> = Vec::new();
        for (k, v) in &self.env {
            parts.push(match v {
                EnvValue::Literal(s) => format!("{k}={}", shell_quote(s)),
                EnvValue::FromEnv(name) => format!("{k}=<from ${name}, masked>"),
            });
        }
        parts.extend(self.argv.iter().map(|a| shell_quote(a)));
        parts.join(" ")
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

/// What kind of recipe an arm has.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum RecipeKind {
    Process,
    Container,
    Endpoint,
    Reference,
    Slurm,
}

impl RecipeKind {
    pub fn as_str(self) -> &'static str {
        match self {
            RecipeKind::Process => "process",
            RecipeKind::Container => "container",
            RecipeKind::Endpoint => "endpoint",
            RecipeKind::Reference => "reference",
            RecipeKind::Slurm => "slurm",
        }
    }

    /// Whether bakeoff starts and stops it (everything but `endpoint`).
    pub fn managed(self) -> bool {
        self != RecipeKind::Endpoint
    }
}

/// Where a recipe runs, as its kind needs it to build its commands.
#[derive(Debug, Clone, Copy)]
pub struct At<'a> {
    pub campaign_id: &'a str,
    pub arm_id: &'a str,
    /// The lane's address and port.
    pub host: &'a str,
    pub port: u16,
    /// The lane's GPUs (NVML UUIDs).
    pub gpus: &'a [String],
    pub stop_grace_s: u64,
    /// A Slurm lane's node: a Slurm arm's job is pinned there (`--nodelist`).
    pub slurm_node: Option<&'a str>,
    /// A lane Slurm granted: the `--gres` a Slurm arm's job there asks when its arm asks no GPUs.
    pub slurm_gres: Option<&'a str>,
}

/// The files a recipe names, for its fingerprint.
pub enum Named<'a> {
    /// A command run on this host's filesystem: its program, arguments and literal env values
    /// that are files (relative paths against `cwd`).
    Command {
        argv: &'a [String],
        env: &'a BTreeMap<String, EnvValue>,
        cwd: &'a Path,
    },
    /// These paths.
    Paths(Vec<PathBuf>),
}

/// How the restoration proves that what serves the lane again is the incumbent's recipe.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Proof {
    /// Nothing to look at (bakeoff does not run it): the planned identity stands.
    Planned,
    /// A batch job of the recipe's name runs (its identity is then the planned one).
    Jobs,
    /// The process serving the lane: its argv and env are read back; `planned_hash`: its
    /// identity is the planned one once it is found (what serves is a proxy, e.g. docker's).
    Process { planned_hash: bool },
}

/// One kind of recipe: everything the campaign, the plan, the runner, the restoration and the
/// dry run ask of a kind. One implementation per kind, beside that kind's lane code.
pub trait Recipe: fmt::Debug + Sync {
    fn kind(&self) -> RecipeKind;

    /// The environment it sets (`from_env` values are secrets); none for kinds without one.
    fn env(&self) -> Option<&BTreeMap<String, EnvValue>> {
        None
    }

    /// The commands that start and stop it on `at`; `None`: bakeoff neither starts nor stops it.
    fn command(&self, at: &At) -> Option<LaunchCommand>;

    /// The command its argv/env identity is computed over (the start command, or for an
    /// endpoint its URL alone).
    fn identity_command(&self, at: &At) -> CommandLine {
        self.command(at)
            .map(|l| l.start)
            .unwrap_or_else(|| CommandLine::new(Vec::new()))
    }

    /// The files it names (the fingerprint digests the ones that exist).
    fn named_files(&self) -> Named<'_>;

    /// Other files the arm depends on, with the field that names them (`endpoint.ca_file`).
    fn other_files(&self) -> Vec<(PathBuf, &'static str)> {
        Vec::new()
    }

    /// Whether the env of the process serving the lane is its env (a container's lives in the
    /// container's config, not in the docker proxy on the lane port).
    fn env_compared(&self) -> bool {
        true
    }

    /// The dry run's lines for it (after the arm's header), each command rendered by `show`.
    fn describe(
        &self,
        lc: Option<&LaunchCommand>,
        show: &dyn Fn(&CommandLine) -> String,
    ) -> Vec<String> {
        let Some(l) = lc else {
            return Vec::new();
        };
        let mut out = Vec::new();
        if let Some(cwd) = &l.start.cwd {
            out.push(format!("       cwd   {}", cwd.display()));
        }
        let self_note = if l.start.self_exe {
            "  (bakeoff = this executable)"
        } else {
            ""
        };
        out.push(format!("       start {}{self_note}", show(&l.start)));
        out.extend(self.placement_line().map(|j| format!("       job   {j}")));
        out.extend(l.stop.lines(show));
        out
    }

    /// Where it may run and what it asks for, when the kind has a scheduler (a Slurm job).
    fn placement_line(&self) -> Option<String> {
        None
    }

    /// The lane's launch spec for it: secrets resolved from the environment, `lc` its
    /// [`Recipe::command`], output appended to `log_path`.
    fn launch_spec(
        &self,
        _at: &At,
        lc: Option<&LaunchCommand>,
        log_path: &Path,
    ) -> Result<LaunchSpec, String> {
        let lc = lc.ok_or("the arm has no launch command")?;
        process_spec(lc, log_path)
    }

    /// Its live jobs, when it runs as scheduler jobs found by name: (job id, state, node).
    fn jobs(&self, _lc: Option<&LaunchCommand>) -> Vec<(String, String, String)> {
        Vec::new()
    }

    /// The name its jobs are found by (then the incumbent is its jobs, not the process on the
    /// lane port).
    fn job_name(&self) -> Option<&str> {
        None
    }

    /// The nodes it names itself (a Slurm job's `nodelist`): a Slurm lane refuses them, it
    /// pins its arms' jobs to its own node.
    fn own_nodes(&self) -> Option<&str> {
        None
    }

    /// The partition its jobs ask (`[arms.slurm] partition`): a lane Slurm grants takes only
    /// jobs of its request's partition. None: it names none, or it is not a batch job.
    fn partition(&self) -> Option<&str> {
        None
    }

    /// Does `l` (what listens on the lane port) run this recipe? (A batch job: does one of its
    /// name run?)
    fn serves(&self, lc: Option<&LaunchCommand>, l: &Listener) -> bool {
        match lc {
            Some(lc) => super::procnet::matches(
                l,
                &lc.start.argv,
                lc.start.self_exe,
                lc.start.cwd.as_deref(),
            ),
            None => false,
        }
    }

    /// Whether its start command leaves it running on its own (`docker run --detach`,
    /// `sbatch`); else a hand restart runs it detached with `setsid` and its output redirected.
    fn detaches_itself(&self) -> bool {
        false
    }

    /// How the restoration proves it serves again.
    fn proof(&self) -> Proof {
        Proof::Process {
            planned_hash: false,
        }
    }

    /// The kind's own proof that what runs is this recipe on `at`, beyond the process on the
    /// lane port (a container: the container of its name runs its image digest with its
    /// labels). None: the kind has none (the process proof is all); Some(Err): why it is not.
    fn running_identity(&self, _at: &At) -> Option<Result<serde_json::Value, String>> {
        None
    }

    /// Where requests go when it is not the lane's own address (an endpoint's URL).
    fn serving_target(&self) -> Option<Target> {
        None
    }

    /// Measured through a path bakeoff does not run (an endpoint: `routed`).
    fn routed(&self) -> bool {
        false
    }

    /// A limitation of the verdict it brings (an endpoint measured without certificate
    /// verification), for arm `arm_id`.
    fn limitation(&self, _arm_id: &str) -> Option<String> {
        None
    }

    /// Before a promotion stops what serves as this recipe: could it be started again? (its
    /// program exists; a container's image is present; a Slurm partition accepts the job.) Ok:
    /// what was checked, in words; Err: why not, with the fix.
    fn restart_check(&self, lc: Option<&LaunchCommand>) -> Result<String, String> {
        program_check(lc)
    }
}

/// The start command's program exists and is executable (a bare name: found on `PATH`).
pub fn program_check(lc: Option<&LaunchCommand>) -> Result<String, String> {
    let lc = lc.ok_or("it has no start command bakeoff could run")?;
    let prog = if lc.start.self_exe {
        self_exe()?
    } else {
        let a = lc.start.argv.first().ok_or("its start command is empty")?;
        let p = PathBuf::from(a);
        if p.components().count() > 1 {
            match (&lc.start.cwd, p.is_relative()) {
                (Some(d), true) => d.join(p),
                _ => p,
            }
        } else {
            std::env::var_os("PATH")
                .and_then(|path| {
                    std::env::split_paths(&path)
                        .map(|d| d.join(&p))
                        .find(|c| c.is_file())
                })
                .ok_or_else(|| {
                    format!("its program `{a}` is not on PATH; install it or name it by path")
                })?
        }
    };
    use std::os::unix::fs::PermissionsExt;
    match std::fs::metadata(&prog) {
        Ok(m) if m.is_file() && m.permissions().mode() & 0o111 != 0 => Ok(format!(
            "its program {} exists and is executable",
            prog.display()
        )),
        Ok(_) => Err(format!(
            "its program {} is not an executable file",
            prog.display()
        )),
        Err(e) => Err(format!(
            "its program {} cannot be found ({e})",
            prog.display()
        )),
    }
}

impl StopMethod {
    /// The dry run's stop lines, each command rendered by `show`.
    pub fn lines(&self, show: &dyn Fn(&CommandLine) -> String) -> Vec<String> {
        match self {
            StopMethod::ProcessGroup { grace_s } => vec![format!(
                "       stop  SIGTERM to the process group, SIGKILL after {grace_s} s"
            )],
            StopMethod::Commands { commands } => commands
                .iter()
                .map(|c| format!("       stop  {}", show(c)))
                .collect(),
            StopMethod::NotManaged => Vec::new(),
            StopMethod::Slurm { job_name, grace_s } => vec![format!(
                "       stop  scancel --signal=TERM --full JOBID (job {job_name}), scancel JOBID after {grace_s} s"
            )],
        }
    }
}

/// A process spec for a command run on this host (process and reference arms).
pub(super) fn process_spec(lc: &LaunchCommand, log_path: &Path) -> Result<LaunchSpec, String> {
    let mut argv = lc.start.argv.clone();
    if lc.start.self_exe {
        argv[0] = self_exe()?.display().to_string();
    }
    Ok(LaunchSpec::Process(super::ProcessSpec {
        argv,
        env: resolve_env(&lc.start.env)?,
        cwd: lc.start.cwd.clone(),
        log_path: log_path.to_path_buf(),
    }))
}

/// The env with `from_env` values read from bakeoff's environment (as secrets).
pub fn resolve_env(env: &BTreeMap<String, EnvValue>) -> Result<Vec<(String, EnvVal)>, String> {
    env.iter()
        .map(|(k, v)| match v {
            EnvValue::Literal(s) => Ok((k.clone(), EnvVal::literal(s))),
            EnvValue::FromEnv(name) => match std::env::var(name) {
                Ok(val) => Ok((k.clone(), EnvVal::secret(val))),
                Err(_) => Err(format!(
                    "the environment variable {name} (read by {k} = {{ from_env = \"{name}\" }}) is not set; export it before the run"
                )),
            },
        })
        .collect()
}

/// This bakeoff executable. When it was replaced on disk while running (a rebuild during a
/// campaign), Linux reports `PATH (deleted)`, which cannot be started: `/proc/self/exe` still
/// starts the very binary this run uses, so every arm, and the restored incumbent, runs the same
/// bakeoff.
pub fn self_exe() -> Result<PathBuf, String> {
    let exe =
        std::env::current_exe().map_err(|e| format!("cannot find the bakeoff executable: {e}"))?;
    if exe.to_string_lossy().ends_with(" (deleted)") {
        let proc_exe = PathBuf::from("/proc/self/exe");
        if proc_exe.exists() {
            return Ok(proc_exe);
        }
    }
    Ok(exe)
}
