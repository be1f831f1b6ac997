//! The recipe tables of an arm (`process`, `container`, `endpoint`, `reference`) and the
//! literal-or-`from_env` values they hold.

use serde::de::{self, Deserializer, MapAccess, Visitor};
use serde::{Deserialize, Serialize, Serializer};
use std::collections::BTreeMap;
use std::fmt;
use std::path::PathBuf;

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

/// `[arms.process]`: a command bakeoff starts in its own process group and stops with SIGTERM
/// (SIGKILL after the lane's grace).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProcessRecipe {
    /// Program and arguments, one element each; never a shell string. After load, a relative
    /// program path containing `/` is absolute (resolved against `cwd`); other arguments are
    /// passed verbatim (no `$VAR` expansion) and a relative path among them is relative to `cwd`.
    pub argv: Vec<String>,
    /// Added to bakeoff's own environment.
    #[serde(default)]
    pub env: BTreeMap<String, EnvValue>,
    /// Working directory; default the campaign file's directory; absolute after load.
    #[serde(default)]
    pub cwd: PathBuf,
}

/// `[arms.container]`: `docker run --detach` with the image pinned by digest.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ContainerRecipe {
    /// The CLI (docker or a compatible one such as podman).
    #[serde(default = "default_docker")]
    pub docker: String,
    /// `repository@sha256:<64 hex>` (a tag may precede the digest).
    pub image: String,
    /// Arguments after the image: the engine's own flags.
    #[serde(default)]
    pub args: Vec<String>,
    /// `--env NAME=value`, or `--env NAME` for `from_env` values (the value then travels in the
    /// docker CLI's environment, never on its command line).
    #[serde(default)]
    pub env: BTreeMap<String, EnvValue>,
    /// GPU UUIDs for `--gpus`; default the lane's GPUs (filled by load). Must be lane GPUs.
    #[serde(default)]
    pub gpus: Vec<String>,
    /// The port the engine listens on inside the container; published on `lane.host:lane.port`.
    /// Default (0): the lane port (filled by load).
    #[serde(default)]
    pub container_port: u16,
    #[serde(default)]
    pub volumes: Vec<Volume>,
    /// Extra `--label`s; bakeoff always adds `bakeoff.campaign` and `bakeoff.arm` (ownership).
    #[serde(default)]
    pub labels: BTreeMap<String, String>,
    /// Extra `docker run` options placed before the image (e.g. `--ipc=host`, `--shm-size=16g`).
    #[serde(default)]
    pub run_args: Vec<String>,
    /// `--name`; default `bakeoff-<campaign id>-<arm id>` (filled by load).
    #[serde(default)]
    pub name: String,
}

fn default_docker() -> String {
    "docker".into()
}

/// `[[arms.container.volumes]]`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Volume {
    /// Host path; absolute after load (relative to the campaign file's directory).
    pub host: PathBuf,
    /// Absolute path inside the container.
    pub container: String,
    #[serde(default)]
    pub read_only: bool,
}

/// `[arms.endpoint]`: an already-running server, measured but never started or stopped.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EndpointRecipe {
    /// `http://host:port` or `https://host[:port][/prefix]`; default the lane's address (filled
    /// by load).
    #[serde(default)]
    pub url: String,
    /// `https://` only: trust only the CA certificate(s) of this PEM file instead of the system
    /// store (relative to the campaign file's directory; absolute after load).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ca_file: Option<PathBuf>,
    /// `https://` only: do not verify the server's certificate; recorded as a limitation.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub insecure: bool,
}

impl EndpointRecipe {
    /// How the endpoint's certificate is checked (meaningful for `https://` URLs only).
    pub fn trust(&self) -> crate::client::Trust {
        crate::client::Trust::from_settings(self.ca_file.as_deref(), self.insecure)
    }

    /// The endpoint's request target: the URL with the certificate settings.
    pub fn target(&self) -> Result<crate::client::Target, String> {
        crate::client::Target::parse(&self.url).map(|t| t.with_trust(self.trust()))
    }
}

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
