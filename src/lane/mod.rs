//! Lanes: launch an arm on a host port (and the GPUs it owns), wait until it is ready, stop it.
//!
//! Plain data in, plain data out: the orchestrator builds a [`LaneSpec`] and a [`LaunchSpec`],
//! calls [`launch`], [`wait_ready`] and [`stop`], and writes what they return into the evidence
//! bundle. Four backends:
//!
//! - [`LaunchSpec::Process`]: an argv (never a shell string) in its own process group, stdout and
//!   stderr appended to a log file;
//! - [`LaunchSpec::Container`]: `docker run -d …` built by the pure [`container::run_argv`];
//! - [`LaunchSpec::Endpoint`]: an endpoint someone else runs (launch and stop only check it);
//! - [`LaunchSpec::Reference`]: `bakeoff engine --profile P --host H --port PORT` as a process.
//!
//! Secrets: an env value marked secret is given to the child's environment and nowhere else. It is
//! never hashed, rendered or returned; every text this module returns (log tails, messages) passes
//! through a [`Masker`] that replaces secret values with `***`. The raw log file is the child's own
//! output and may contain whatever the child printed: put [`Running::masked_log`] in a bundle, not
//! the raw file.

pub mod adopt;
pub mod adopt_slurm;
pub mod client_path;
pub mod container;
pub mod container_identity;
pub mod container_recipe;
pub mod endpoint;
mod facts;
pub mod leftover;
pub mod lock;
pub mod logs;
pub mod marks;
pub mod port;
pub mod process;
pub mod procnet;
mod ready;
pub mod recipe;
pub mod reference;
pub mod resident;
pub mod slurm;
pub mod slurm_alloc;
pub mod slurm_node;
pub mod slurm_recipe;
pub mod slurm_step;

pub use container_recipe::{ContainerRecipe, Volume};
pub use endpoint::EndpointRecipe;
use facts::ms_since;
pub use facts::{Cause, ExitInfo, LaunchFailure, ReadyFacts, StopFacts, StopHow};
pub use logs::Masker;
pub use port::{port_free, wait_port_free};
pub use process::ProcessRecipe;
pub use recipe::{EnvValue, Recipe, RecipeKind};
pub use reference::ReferenceRecipe;
pub use slurm_recipe::SlurmRecipe;

use crate::client::Target;
use sha2::{Digest, Sha256};
use std::fmt;
use std::path::PathBuf;
use std::time::Duration;

/// How many log lines a failure keeps.
pub const LOG_TAIL_LINES: usize = 40;

/// Where arms run: a host port plus the GPUs the lane owns.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LaneSpec {
    /// Address the arm listens on and bakeoff connects to (usually 127.0.0.1).
    pub host: String,
    pub port: u16,
    /// Health path polled until it answers 200 (`/health` on vLLM, SGLang, llama.cpp).
    pub health_path: String,
    /// Launch → ready limit; past it the arm is killed and recorded as `timeout`.
    pub ready_timeout: Duration,
    /// SIGTERM → SIGKILL grace when stopping.
    pub stop_grace: Duration,
    /// GPUs the lane owns (NVML UUIDs); empty on a host without GPUs.
    pub gpu_uuids: Vec<String>,
}

impl LaneSpec {
    /// A lane on `host:port` with `/health`, a 600 s ready timeout and a 30 s stop grace.
    pub fn new(host: &str, port: u16) -> LaneSpec {
        LaneSpec {
            host: host.to_string(),
            port,
            health_path: "/health".to_string(),
            ready_timeout: Duration::from_secs(600),
            stop_grace: Duration::from_secs(30),
            gpu_uuids: Vec::new(),
        }
    }

    /// `http://host:port`.
    pub fn target(&self) -> Target {
        Target {
            host: self.host.clone(),
            port: self.port,
            prefix: String::new(),
            tls: None,
        }
    }
}

/// One environment value: a literal from the campaign file, or a value resolved from a secret
/// environment variable (`secret: true`), which is never rendered, hashed or logged.
#[derive(Clone, PartialEq, Eq)]
pub struct EnvVal {
    pub value: String,
    pub secret: bool,
}

impl EnvVal {
    pub fn literal(v: impl Into<String>) -> EnvVal {
        EnvVal {
            value: v.into(),
            secret: false,
        }
    }

    pub fn secret(v: impl Into<String>) -> EnvVal {
        EnvVal {
            value: v.into(),
            secret: true,
        }
    }

    /// The value as it may be shown: `***` for a secret.
    pub fn shown(&self) -> &str {
        if self.secret {
            "***"
        } else {
            &self.value
        }
    }
}

impl fmt::Debug for EnvVal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.secret {
            f.write_str("EnvVal(secret ***)")
        } else {
            write!(f, "EnvVal({:?})", self.value)
        }
    }
}

/// A command arm: argv\[0\] is the program (a path or a name looked up on PATH).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProcessSpec {
    pub argv: Vec<String>,
    /// Added to bakeoff's own environment (which the child inherits).
    pub env: Vec<(String, EnvVal)>,
    pub cwd: Option<PathBuf>,
    /// stdout and stderr are appended here.
    pub log_path: PathBuf,
}

/// A container arm, run with the docker CLI (see [`container::run_argv`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ContainerSpec {
    pub image: String,
    /// Arguments after the image (the engine's own flags).
    pub args: Vec<String>,
    /// Passed as `-e NAME`; the value travels in the docker CLI's environment, never on its
    /// command line.
    pub env: Vec<(String, EnvVal)>,
    /// `--gpus "device=UUID,UUID"`; empty = no `--gpus` flag.
    pub gpu_uuids: Vec<String>,
    /// (host port, container port) pairs, published on the lane host.
    pub ports: Vec<(u16, u16)>,
    /// `-v` values as docker takes them (`/host:/container[:ro]`).
    pub volumes: Vec<String>,
    /// `--label k=v`, e.g. `("bakeoff.campaign", "…")`. The `bakeoff.*` ones are the ownership
    /// labels: stop checks them before it stops or removes anything.
    pub labels: Vec<(String, String)>,
    /// Extra `docker run` options, placed before the image (e.g. `--network=host`, `--ipc=host`).
    pub run_args: Vec<String>,
    /// `--name`; also how bakeoff inspects, stops and removes it.
    pub name: String,
    /// The docker CLI's output and, at the end, `docker logs` are appended here.
    pub log_path: PathBuf,
    /// The CLI to run: `docker` (looked up on PATH) unless set (e.g. `podman`, or a test double).
    pub docker: PathBuf,
}

/// A reference-engine arm: `BIN engine --profile P --host H --port PORT`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReferenceSpec {
    pub profile: PathBuf,
    pub log_path: PathBuf,
    /// The bakeoff binary; `None` = `std::env::current_exe()`.
    pub bin: Option<PathBuf>,
}

/// A Slurm arm: `sbatch …` (see [`slurm`]), the endpoint on the job's node at the lane port.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SlurmSpec {
    /// The plan's sbatch argv (what the identity covers); the lane adds `--output=LOG`.
    pub sbatch_argv: Vec<String>,
    /// Set in sbatch's environment (exported to the job); never on its command line.
    pub env: Vec<(String, EnvVal)>,
    pub cwd: Option<PathBuf>,
    /// The job's stdout and stderr are appended here.
    pub log_path: PathBuf,
    pub job_name: String,
    /// Longest wait for the job to leave PENDING (`None`: the lane's ready timeout).
    pub pending_timeout: Option<Duration>,
}

/// How an arm is started and stopped.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LaunchSpec {
    Process(ProcessSpec),
    Container(ContainerSpec),
    /// Not managed: launch and stop only check it; readiness polls this URL.
    Endpoint {
        url: String,
        /// How an `https://` endpoint's certificate is checked (unused for `http://`).
        tls: crate::client::Trust,
    },
    Reference(ReferenceSpec),
    Slurm(SlurmSpec),
}

impl LaunchSpec {
    pub fn kind(&self) -> &'static str {
        match self {
            LaunchSpec::Process(_) => "process",
            LaunchSpec::Container(_) => "container",
            LaunchSpec::Endpoint { .. } => "endpoint",
            LaunchSpec::Reference(_) => "reference",
            LaunchSpec::Slurm(_) => "slurm",
        }
    }

    /// Whether bakeoff starts it (and so journals and stops it): every kind but an endpoint.
    pub fn managed(&self) -> bool {
        !matches!(self, LaunchSpec::Endpoint { .. })
    }

    /// The env list (empty for endpoints and reference arms).
    pub fn env(&self) -> &[(String, EnvVal)] {
        match self {
            LaunchSpec::Process(p) => &p.env,
            LaunchSpec::Container(c) => &c.env,
            LaunchSpec::Slurm(s) => &s.env,
            _ => &[],
        }
    }

    /// What the launch journal records before this spec is launched (a container's name and
    /// labels; a Slurm job's name, uid and submission time).
    pub fn intent_marks(&self) -> marks::Marks {
        let mut m = marks::Marks::default();
        match self {
            LaunchSpec::Container(c) => {
                m.container = Some(marks::ContainerMark {
                    name: c.name.clone(),
                    labels: c.labels.iter().cloned().collect(),
                    docker: c.docker.display().to_string(),
                })
            }
            LaunchSpec::Slurm(s) => {
                m.slurm = Some(adopt_slurm::SlurmMark::intent(
                    &s.job_name,
                    s.sbatch_argv
                        .first()
                        .map(String::as_str)
                        .unwrap_or("sbatch"),
                ))
            }
            LaunchSpec::Process(_) | LaunchSpec::Reference(_) | LaunchSpec::Endpoint { .. } => {}
        }
        m
    }

    /// A masker for every secret value of this spec.
    pub fn masker(&self) -> Masker {
        Masker::from_env(self.env())
    }

    /// The argv bakeoff runs for this arm on `lane` (docker's for containers, none for endpoints).
    pub fn argv(&self, lane: &LaneSpec) -> Vec<String> {
        match self {
            LaunchSpec::Process(p) => p.argv.clone(),
            LaunchSpec::Container(c) => container::run_argv(c, &lane.host),
            LaunchSpec::Endpoint { .. } => Vec::new(),
            LaunchSpec::Reference(r) => reference::argv(r, lane),
            LaunchSpec::Slurm(s) => s.sbatch_argv.clone(),
        }
    }

    /// The identity recorded for the restoration proof: [`argv_env_hash`] of what is run, or of
    /// the URL for an endpoint.
    pub fn identity(&self, lane: &LaneSpec) -> String {
        match self {
            LaunchSpec::Endpoint { url, .. } => argv_env_hash(std::slice::from_ref(url), &[]),
            _ => argv_env_hash(&self.argv(lane), self.env()),
        }
    }

    /// A JSON description for evidence: argv, env names with values (`***` for secrets), paths
    /// and the identity hash. Never contains a secret value.
    pub fn describe(&self, lane: &LaneSpec) -> serde_json::Value {
        let env: serde_json::Map<String, serde_json::Value> = self
            .env()
            .iter()
            .map(|(k, v)| (k.clone(), serde_json::Value::from(v.shown())))
            .collect();
        let masker = self.masker();
        let argv: Vec<String> = self.argv(lane).iter().map(|a| masker.mask(a)).collect();
        let mut v = serde_json::json!({
            "kind": self.kind(),
            "argv": argv,
            "env": env,
            "secret_env": self.env().iter().filter(|(_, v)| v.secret).map(|(k, _)| k.clone()).collect::<Vec<_>>(),
            "identity": self.identity(lane),
            "lane": {"host": lane.host, "port": lane.port, "health_path": lane.health_path,
                     "gpu_uuids": lane.gpu_uuids},
        });
        let o = v.as_object_mut().expect("object");
        match self {
            LaunchSpec::Process(p) => {
                o.insert(
                    "cwd".into(),
                    p.cwd.as_ref().map(|c| c.display().to_string()).into(),
                );
                o.insert("log_path".into(), p.log_path.display().to_string().into());
            }
            LaunchSpec::Container(c) => {
                o.insert("image".into(), c.image.clone().into());
                o.insert("name".into(), c.name.clone().into());
                o.insert("log_path".into(), c.log_path.display().to_string().into());
            }
            LaunchSpec::Endpoint { url, tls } => {
                o.insert("url".into(), url.clone().into());
                if url.starts_with("https://") {
                    o.insert("tls".into(), tls.record());
                }
            }
            LaunchSpec::Reference(r) => {
                o.insert("profile".into(), r.profile.display().to_string().into());
                o.insert("log_path".into(), r.log_path.display().to_string().into());
            }
            LaunchSpec::Slurm(s) => {
                o.insert("job_name".into(), s.job_name.clone().into());
                o.insert(
                    "cwd".into(),
                    s.cwd.as_ref().map(|c| c.display().to_string()).into(),
                );
                o.insert("log_path".into(), s.log_path.display().to_string().into());
                o.insert(
                    "pending_timeout_s".into(),
                    s.pending_timeout.map(|d| d.as_secs_f64()).into(),
                );
            }
        }
        v
    }
}

/// SHA-256 (hex) over the argv and the env names and non-secret values, in a length-prefixed
/// encoding (env sorted by name). A secret contributes its name only, so the hash says nothing
/// about its value and does not change when the secret is rotated.
pub fn argv_env_hash(argv: &[String], env: &[(String, EnvVal)]) -> String {
    fn field(h: &mut Sha256, bytes: &[u8]) {
        h.update((bytes.len() as u64).to_le_bytes());
        h.update(bytes);
    }
    let mut h = Sha256::new();
    field(&mut h, b"bakeoff-identity-v1");
    field(&mut h, &(argv.len() as u64).to_le_bytes());
    for a in argv {
        field(&mut h, a.as_bytes());
    }
    let mut env: Vec<&(String, EnvVal)> = env.iter().collect();
    env.sort_by(|a, b| a.0.cmp(&b.0));
    field(&mut h, &(env.len() as u64).to_le_bytes());
    for (name, val) in env {
        field(&mut h, name.as_bytes());
        if val.secret {
            field(&mut h, b"\x00secret");
        } else {
            field(&mut h, b"\x01");
            field(&mut h, val.value.as_bytes());
        }
    }
    h.finalize().iter().map(|b| format!("{b:02x}")).collect()
}

/// A launched arm. Dropping it does not stop it (an incumbent must outlive bakeoff): call
/// [`stop`].
pub struct Running {
    /// What this kind of arm holds (its pid and child, its container, its Slurm job).
    handle: Handle,
    /// CLOCK_MONOTONIC ns at launch.
    pub started_ns: u64,
    /// Wall clock at launch (label only).
    pub started_wall: String,
    /// Where the arm's output goes, and the file offset where this launch's output starts.
    pub log_path: Option<PathBuf>,
    pub log_offset: u64,
    /// Where readiness is polled.
    pub target: Target,
    /// [`argv_env_hash`] of what was launched.
    pub identity: String,
    masker: Masker,
    /// Set once the arm is known to have exited (reaped).
    exit: Option<ExitInfo>,
}

/// The state of a launched arm that only its kind knows: the one list of kinds a [`Running`]
/// can be.
enum Handle {
    Process(process::Handle),
    Reference(process::Handle),
    Container(container::Handle),
    Slurm(slurm::Handle),
    Endpoint,
}

impl fmt::Debug for Running {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Running")
            .field("kind", &self.kind())
            .field("pid", &self.pid())
            .field("container", &self.container_name())
            .field("target", &self.target.to_string())
            .field("identity", &self.identity)
            .field("exit", &self.exit)
            .field("slurm", &self.slurm_job())
            .finish()
    }
}

impl Running {
    /// `process`, `container`, `endpoint`, `reference` or `slurm`.
    pub fn kind(&self) -> &'static str {
        match &self.handle {
            Handle::Process(_) => "process",
            Handle::Reference(_) => "reference",
            Handle::Container(_) => "container",
            Handle::Slurm(_) => "slurm",
            Handle::Endpoint => "endpoint",
        }
    }

    /// Process and reference arms: the child's pid (also its process group id).
    pub fn pid(&self) -> Option<u32> {
        match &self.handle {
            Handle::Process(h) | Handle::Reference(h) => h.pid,
            _ => None,
        }
    }

    /// Container arms: the container name.
    pub fn container_name(&self) -> Option<&str> {
        match &self.handle {
            Handle::Container(h) => Some(&h.name),
            _ => None,
        }
    }

    /// Slurm arms: the job (id, node, state, exit code) as last seen.
    pub fn slurm_job(&self) -> Option<&slurm::SlurmJob> {
        match &self.handle {
            Handle::Slurm(h) => Some(&h.job),
            _ => None,
        }
    }

    /// Did the arm die while it served? (its process group is empty; a Slurm arm: its job
    /// ended; never for containers and endpoints, whose failures the requests see)
    pub fn crashed(&self) -> bool {
        match &self.handle {
            Handle::Process(h) | Handle::Reference(h) => h
                .pid
                .is_some_and(|pid| process::group_members(pid).is_empty()),
            Handle::Slurm(h) => slurm::job_ended(&h.job),
            _ => false,
        }
    }

    /// What the launch step records about the running arm: `pid` and `pgid` (process and
    /// reference arms), `container` (its name), `slurm_job`; null where the kind has none.
    pub fn launch_facts(&self) -> serde_json::Map<String, serde_json::Value> {
        let mut m = serde_json::Map::new();
        m.insert("pid".into(), serde_json::json!(self.pid()));
        m.insert("pgid".into(), serde_json::json!(self.pid()));
        m.insert("container".into(), serde_json::json!(self.container_name()));
        m.insert("slurm_job".into(), serde_json::json!(self.slurm_job()));
        m
    }

    /// What this kind knows about its launch that the launch journal records once it started:
    /// the process mark (pid, start time, argv as `argv`), the Slurm job's id and node.
    pub fn record_started(&self, marks: &mut marks::Marks, argv: &[String]) {
        match &self.handle {
            Handle::Slurm(h) => {
                if let Some(m) = marks.slurm.as_mut() {
                    m.job_id = h.job.job_id.clone();
                    m.node = h.job.node.clone();
                }
            }
            Handle::Process(h) | Handle::Reference(h) => {
                if let (Some(pid), None) = (h.pid, &marks.container) {
                    marks.process = Some(adopt::mark(pid, argv.to_vec()));
                }
            }
            Handle::Container(_) | Handle::Endpoint => {}
        }
    }

    /// Whether bakeoff started it (and so stops it): every kind but an endpoint.
    pub fn managed(&self) -> bool {
        !matches!(self.handle, Handle::Endpoint)
    }

    /// Waits until where the arm serves is known: at once, except a Slurm job (until it runs
    /// on its node; then the target points there).
    async fn wait_placed(&mut self, lane: &LaneSpec) -> slurm::Start {
        match &self.handle {
            Handle::Slurm(_) => slurm::wait_running(self, lane).await,
            _ => slurm::Start::Running,
        }
    }

    /// What a stop at the ready timeout did, in words.
    fn stopped_words(&self, c: &StopFacts) -> String {
        match &self.handle {
            Handle::Container(_) => "the container was stopped and removed".to_string(),
            Handle::Slurm(h) => format!("the job was cancelled: {}", h.job.describe()),
            _ if c.group_gone => "its whole process group was killed".to_string(),
            _ => format!(
                "its process group was killed but {:?} are still alive",
                c.remaining_pids
            ),
        }
    }

    /// Resolves when the arm exits; never for an endpoint.
    async fn wait_exit(&mut self) -> ExitInfo {
        match &self.handle {
            Handle::Endpoint => std::future::pending().await,
            Handle::Container(_) => container::wait_exit(self).await,
            Handle::Slurm(_) => slurm::wait_exit(self).await,
            Handle::Process(_) | Handle::Reference(_) => process::wait_exit(self).await,
        }
    }

    /// The last `n` lines the arm wrote since this launch, masked.
    pub fn log_tail(&self, n: usize) -> Vec<String> {
        match &self.log_path {
            Some(p) => logs::tail(p, self.log_offset, n, &self.masker),
            None => Vec::new(),
        }
    }

    /// Everything the arm wrote since this launch, masked: what belongs in an evidence bundle.
    pub fn masked_log(&self) -> String {
        match &self.log_path {
            Some(p) => self
                .masker
                .mask(&logs::read_since(p, self.log_offset, usize::MAX)),
            None => String::new(),
        }
    }

    /// Secret-masking for any text about this arm.
    pub fn masker(&self) -> &Masker {
        &self.masker
    }

    /// The exit seen so far (None while running, as far as bakeoff knows).
    pub fn exit(&self) -> Option<&ExitInfo> {
        self.exit.as_ref()
    }

    fn elapsed_ms(&self) -> f64 {
        ms_since(self.started_ns)
    }
}

/// Starts an arm. Checks that the lane port is free first (`port-in-use`, nothing started), then
/// spawns the process (own process group) or runs `docker run -d`. Returns as soon as it is
/// started; call [`wait_ready`] next.
pub async fn launch(lane: &LaneSpec, spec: &LaunchSpec) -> Result<Running, LaunchFailure> {
    let started_ns = crate::clock::mono_ns();
    let masker = spec.masker();
    let identity = spec.identity(lane);
    if let LaunchSpec::Endpoint { url, tls } = spec {
        return endpoint::launch(url, tls, identity, masker, started_ns).await;
    }
    let mut ports = vec![lane.port];
    if let LaunchSpec::Container(c) = spec {
        ports.extend(c.ports.iter().map(|p| p.0).filter(|p| *p != lane.port));
    }
    for p in ports {
        if !port_free(&lane.host, p) {
            return Err(LaunchFailure::new(
                Cause::PortInUse,
                format!(
                    "port {}:{p} is already in use before the {} arm was started; stop whatever \
                     listens there (an incumbent that was not stopped?) or give the lane another port",
                    lane.host,
                    spec.kind()
                ),
                ms_since(started_ns),
            ));
        }
    }
    match spec {
        LaunchSpec::Process(p) => process::launch(
            lane,
            process::Start {
                kind: spec.kind(),
                handle: Handle::Process,
                argv: &p.argv,
                env: &p.env,
                cwd: p.cwd.as_deref(),
                log_path: &p.log_path,
                identity,
                masker,
                started_ns,
            },
        ),
        LaunchSpec::Reference(r) => process::launch(
            lane,
            process::Start {
                kind: spec.kind(),
                handle: Handle::Reference,
                argv: &reference::argv(r, lane),
                env: &[],
                cwd: None,
                log_path: &r.log_path,
                identity,
                masker,
                started_ns,
            },
        ),
        LaunchSpec::Container(c) => container::launch(lane, c, identity, masker, started_ns).await,
        LaunchSpec::Slurm(s) => slurm::launch(lane, s, identity, masker, started_ns).await,
        LaunchSpec::Endpoint { .. } => unreachable!("handled above"),
    }
}

/// Polls health (200) and `/v1/models` about every 100 ms until the arm is ready, checking on
/// every poll whether it exited (reported within ~0.2 s, classified `out-of-memory` or `exited`,
/// with its last log lines). Past `lane.ready_timeout` (counted from launch) the arm is killed
/// (whole process group, or the container removed) and the failure is `timeout`.
pub async fn wait_ready(
    running: &mut Running,
    lane: &LaneSpec,
) -> Result<ReadyFacts, LaunchFailure> {
    ready::wait_ready(running, lane).await
}

/// Polls `target`'s health (as [`wait_ready`] does) until it answers, at most `within`: for an
/// arm bakeoff did not launch in this process (a Slurm incumbent found under its job name, maybe
/// still pending or starting). Err: the last probe's words.
pub async fn wait_answers(
    target: &Target,
    lane: &LaneSpec,
    within: Duration,
) -> Result<(), String> {
    ready::wait_answers(target, &lane.health_path, within).await
}

/// Stops an arm: SIGTERM to its whole process group, up to `grace` for everything in it to exit,
/// then SIGKILL to the group; reaps it, verifies no process of the group is left and that the
/// lane port is free again. Containers: `docker stop -t GRACE`, `docker logs` into the log file,
/// `docker rm -f`. Endpoints: nothing (`not-managed`).
pub async fn stop(mut running: Running, grace: Duration) -> StopFacts {
    stop_inner(&mut running, grace).await
}

async fn stop_inner(running: &mut Running, grace: Duration) -> StopFacts {
    match &running.handle {
        Handle::Endpoint => endpoint::stop(),
        Handle::Container(_) => container::stop(running, grace).await,
        Handle::Slurm(_) => slurm::stop(running, grace).await,
        Handle::Process(_) | Handle::Reference(_) => process::stop(running, grace).await,
    }
}
