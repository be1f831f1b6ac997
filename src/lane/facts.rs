//! What the lane reports: how an arm ended ([`ExitInfo`]), why a launch failed
//! ([`LaunchFailure`], [`Cause`]), what it showed when ready ([`ReadyFacts`]), how it was stopped
//! ([`StopFacts`], [`StopHow`]). Every text in them is masked.

use super::{process, slurm, Masker};
use crate::evidence::FailureClass;
use serde::Serialize;
use std::fmt;

/// How a process or container ended.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ExitInfo {
    pub code: Option<i32>,
    pub signal: Option<i32>,
    /// Docker's `State.OOMKilled` (the kernel OOM killer hit the container).
    pub oom_killed: bool,
}

impl ExitInfo {
    pub fn from_status(s: std::process::ExitStatus) -> ExitInfo {
        use std::os::unix::process::ExitStatusExt;
        ExitInfo {
            code: s.code(),
            signal: s.signal(),
            oom_killed: false,
        }
    }
}

impl fmt::Display for ExitInfo {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (self.code, self.signal) {
            (Some(c), _) => write!(f, "exit code {c}")?,
            (None, Some(s)) => write!(f, "signal {s} ({})", process::signal_name(s))?,
            (None, None) => write!(f, "unknown exit status")?,
        }
        if self.oom_killed {
            write!(f, ", OOM-killed")?;
        }
        Ok(())
    }
}

/// Why a launch failed. Every launch failure is failure class `compatibility`
/// ([`LaunchFailure::CLASS`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Cause {
    /// It exited during startup and its log (or docker) says it ran out of memory.
    OutOfMemory,
    /// It exited during startup for another reason.
    Exited,
    /// Not ready within the lane's ready timeout; it was killed.
    Timeout,
    /// It could not be started at all (program not found, docker refused, bad URL).
    SpawnFailed,
    /// The lane port was taken before launch; nothing was started.
    PortInUse,
}

impl Cause {
    pub fn as_str(self) -> &'static str {
        match self {
            Cause::OutOfMemory => "out-of-memory",
            Cause::Exited => "exited",
            Cause::Timeout => "timeout",
            Cause::SpawnFailed => "spawn-failed",
            Cause::PortInUse => "port-in-use",
        }
    }
}

impl fmt::Display for Cause {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A failed launch or readiness wait. Every text in it is masked.
#[derive(Debug, Clone, Serialize, thiserror::Error)]
#[error("{class} ({cause}): {message}")]
pub struct LaunchFailure {
    /// Always [`LaunchFailure::CLASS`].
    pub class: FailureClass,
    pub cause: Cause,
    pub message: String,
    /// The last [`LOG_TAIL_LINES`] lines the arm wrote since this launch.
    pub log_tail: Vec<String>,
    /// Launch → failure detected.
    pub elapsed_ms: f64,
    pub exit: Option<ExitInfo>,
    /// The log line that matched an out-of-memory pattern, if any.
    pub oom_line: Option<String>,
    /// How bakeoff cleaned up after the failure (process group killed, container removed).
    pub cleanup: Option<StopFacts>,
}

impl LaunchFailure {
    pub const CLASS: FailureClass = FailureClass::Compatibility;

    pub(super) fn new(cause: Cause, message: String, elapsed_ms: f64) -> LaunchFailure {
        LaunchFailure {
            class: Self::CLASS,
            cause,
            message,
            log_tail: Vec::new(),
            elapsed_ms,
            exit: None,
            oom_line: None,
            cleanup: None,
        }
    }

    /// An arm that could not be started at all (`spawn-failed`): `message` masked, the time
    /// since the launch began (`started_ns`, [`crate::clock::mono_ns`]) as `elapsed_ms`.
    pub(super) fn spawn_failed(masker: &Masker, message: &str, started_ns: u64) -> LaunchFailure {
        LaunchFailure::new(
            Cause::SpawnFailed,
            masker.mask(message),
            ms_since(started_ns),
        )
    }

    /// The failure with the arm's last log lines (already masked).
    pub(super) fn with_log_tail(self, log_tail: Vec<String>) -> LaunchFailure {
        LaunchFailure { log_tail, ..self }
    }
}

/// Milliseconds since `started_ns` ([`crate::clock::mono_ns`]).
pub(super) fn ms_since(started_ns: u64) -> f64 {
    crate::clock::mono_ns().saturating_sub(started_ns) as f64 / 1e6
}

/// What an arm showed when it became ready.
#[derive(Debug, Clone, Serialize)]
pub struct ReadyFacts {
    /// Launch → ready.
    pub ready_ms: f64,
    /// Health probes sent.
    pub polls: u32,
    /// Served model ids from `/v1/models`, in order.
    pub model_ids: Vec<String>,
    /// Served context length, when the engine says (see `context_source`).
    pub context_tokens: Option<u64>,
    /// Where `context_tokens` came from: `max_model_len` (vLLM, SGLang, reference), `meta.n_ctx`,
    /// or `/props default_generation_settings.n_ctx` (llama.cpp's per-slot context).
    pub context_source: Option<String>,
    /// llama.cpp's `meta.n_ctx_train` (the model's training context, not the served one).
    pub n_ctx_train: Option<u64>,
    /// The raw `/v1/models` body, for the evidence bundle.
    pub models: serde_json::Value,
}

/// How a stop went.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum StopHow {
    /// It ended within the grace period after SIGTERM (`docker stop` without a kill).
    Sigterm,
    /// It needed SIGKILL after the grace period (docker: exit code 137 after `docker stop`).
    Sigkill,
    /// It had already exited before the stop; leftovers of its group were killed.
    AlreadyExited,
    /// An endpoint bakeoff does not manage: nothing was stopped.
    NotManaged,
    /// A container of that name exists but does not carry this arm's ownership labels: it was
    /// left alone (nothing stopped or removed).
    NotOwned,
}

/// The result of stopping an arm.
#[derive(Debug, Clone, Serialize)]
pub struct StopFacts {
    pub how: StopHow,
    pub exit: Option<ExitInfo>,
    /// Stop called → everything gone (or given up).
    pub took_ms: f64,
    /// No process of the group remains (`kill(-pgid, 0)` fails with ESRCH, or only zombies are
    /// left), or the container no longer exists.
    pub group_gone: bool,
    /// Live processes of the group still there at the end (should be empty).
    pub remaining_pids: Vec<u32>,
    /// Slurm arms: the job's id, node, final state and exit code.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub slurm_job: Option<slurm::SlurmJob>,
    /// The lane port accepted a bind again within 2 s; `None` for endpoints.
    pub port_free: Option<bool>,
    /// What was done, step by step.
    pub detail: String,
}
