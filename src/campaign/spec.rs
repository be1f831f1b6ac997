//! The campaign file's data model (docs/campaign.md), strict parsing and loading.
//!
//! Parsing is strict: every table denies unknown fields. [`load`] reads the file, parses it,
//! resolves relative paths against the file's directory, fills defaults that depend on other
//! fields, and runs the semantic checks of `validate.rs`. What it returns is complete: a
//! consumer never has to apply a default itself.

use super::diag::{self, CampaignError, Diagnostic, SpanIndex};
use serde::de::{self, Deserializer, MapAccess, Visitor};
use serde::{Deserialize, Serialize, Serializer};
use sha2::{Digest, Sha256};
use std::collections::BTreeMap;
use std::fmt;
use std::path::{Component, Path, PathBuf};

// The domain values and the policy are defined once in evidence/ (the verdict reads them from
// `campaign-result.json` without depending on the campaign module).
pub use crate::evidence::{GateName, Policy, Promotion, QualityRisk, RankingMetric, ToolVariant};

/// A whole campaign file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Campaign {
    /// `[campaign]`: identity and output.
    pub campaign: Identity,
    /// `[lane]`: where every arm runs, one at a time.
    pub lane: Lane,
    /// `[workload]`: the matched workload every arm gets.
    pub workload: Workload,
    /// `[gates]`: which pass/fail checks run, and their parameters.
    #[serde(default)]
    pub gates: Gates,
    /// `[policy]`: how the verdict is decided.
    #[serde(default)]
    pub policy: Policy,
    /// `[[arms]]`, in file order (the order they run in).
    pub arms: Vec<Arm>,
    /// Where the file came from (set by [`load`], never read from the file).
    #[serde(skip_deserializing, default)]
    pub source: Source,
}

/// The campaign file itself.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Source {
    /// The path as given to [`load`].
    pub path: PathBuf,
    /// The absolute directory relative paths were resolved against.
    pub dir: PathBuf,
    /// SHA-256 (hex) of the file's bytes.
    pub sha256: String,
}

/// `[campaign]`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Identity {
    /// Lowercase letters, digits and `-`; names the bundle and container names.
    pub id: String,
    /// A description of the hardware, or `"auto"` to detect it at run time (nvidia-smi / CPU).
    #[serde(default = "default_hardware")]
    pub hardware: String,
    /// A label for how arms are isolated, e.g. "isolated direct managed recipe lane".
    #[serde(default = "default_topology")]
    pub topology: String,
    /// Free text for the report.
    #[serde(default)]
    pub description: Option<String>,
    /// Bundle directory. Default `runs/<id>` next to the campaign file; absolute after load.
    #[serde(default)]
    pub output: PathBuf,
}

fn default_hardware() -> String {
    "auto".into()
}
fn default_topology() -> String {
    "isolated managed single lane".into()
}

impl Identity {
    /// Whether the hardware is detected at run time.
    pub fn hardware_is_auto(&self) -> bool {
        self.hardware == "auto"
    }
}

/// `[lane]`: a host port plus the GPUs it owns.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Lane {
    /// Address arms listen on and bakeoff connects to.
    #[serde(default = "default_host")]
    pub host: String,
    /// The lane port (1–65535).
    pub port: u16,
    /// GPU UUIDs the lane owns (`GPU-…` or `MIG-…`, as `nvidia-smi -L` prints). Empty: no GPU,
    /// and the GPU steps (idle baseline, memory reserve) are left out of the plan.
    #[serde(default)]
    pub gpus: Vec<String>,
    /// GPU memory (MiB) that must stay free after an arm is ready; an arm leaving less fails its
    /// memory-reserve check.
    #[serde(default)]
    pub memory_reserve_mib: u64,
    /// The idle baseline (with the incumbent stopped) fails when a lane GPU uses more than this.
    #[serde(default = "default_idle_max")]
    pub idle_baseline_max_mib: u64,
    /// Polled until it answers 200.
    #[serde(default = "default_health")]
    pub health_path: String,
    /// Launch → ready limit.
    #[serde(default = "default_ready_timeout")]
    pub ready_timeout_s: u64,
    /// SIGTERM (or `docker stop`) → SIGKILL grace.
    #[serde(default = "default_stop_grace")]
    pub stop_grace_s: u64,
}

fn default_host() -> String {
    "127.0.0.1".into()
}
fn default_idle_max() -> u64 {
    1024
}
fn default_health() -> String {
    "/health".into()
}
fn default_ready_timeout() -> u64 {
    600
}
fn default_stop_grace() -> u64 {
    30
}

impl Lane {
    /// `http://host:port`.
    pub fn base_url(&self) -> String {
        if self.host.contains(':') {
            format!("http://[{}]:{}", self.host, self.port)
        } else {
            format!("http://{}:{}", self.host, self.port)
        }
    }
}

/// An arm's role in the verdict.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    /// What serves today: stopped first, measured like any arm, restored last.
    Incumbent,
    /// A challenger.
    Candidate,
    /// The matched no-speculation twin of a speculative arm.
    Control,
}

impl Role {
    pub fn as_str(self) -> &'static str {
        match self {
            Role::Incumbent => "incumbent",
            Role::Candidate => "candidate",
            Role::Control => "control",
        }
    }
}

/// `[[arms]]`: one serving configuration. Exactly one of the recipe tables (`process`,
/// `container`, `endpoint`, `reference`) is present; [`Arm::recipe`] says which.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Arm {
    /// Lowercase letters, digits and `-` (it starts every evidence file name of the arm).
    pub id: String,
    pub role: Role,
    /// Display name for reports; default: the id (filled by load).
    #[serde(default)]
    pub label: String,
    /// Engine and build, e.g. "vLLM 0.11.0" or "llama.cpp b6500 (xllamacpp)".
    pub engine: String,
    /// The model (repository or file name).
    pub model: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub quantization: Option<String>,
    /// The model id `/v1/models` must list (identity check). Reference arms: default the profile's
    /// `model`; others: required.
    #[serde(default)]
    pub served_model: String,
    /// The longest prompt + completion one request may use (llama.cpp: `-c` / `-np`). Reference
    /// arms: default the profile's `context_tokens`; others: required.
    #[serde(default)]
    pub served_context: u64,
    /// Speculative decoding, with the arm that serves as its matched control.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub speculative: Option<Speculative>,
    /// Key of `workload.long_context_targets` this arm is tested at. Default: the only key when
    /// there is one (filled by load).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub long_context_profile: Option<String>,
    /// Name of the environment variable holding the API key requests must send (never the key).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub api_key_env: Option<String>,
    /// The served model's tokenizer.json, for exact prompt sizing (else the server's /tokenize,
    /// else calibration against usage). Absolute after load.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tokenizer: Option<PathBuf>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub notes: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub process: Option<ProcessRecipe>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub container: Option<ContainerRecipe>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub endpoint: Option<EndpointRecipe>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reference: Option<ReferenceRecipe>,
}

/// The recipe of an arm, borrowed.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum RecipeRef<'a> {
    Process(&'a ProcessRecipe),
    Container(&'a ContainerRecipe),
    Endpoint(&'a EndpointRecipe),
    Reference(&'a ReferenceRecipe),
}

/// What kind of recipe an arm has.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum RecipeKind {
    Process,
    Container,
    Endpoint,
    Reference,
}

impl RecipeKind {
    pub fn as_str(self) -> &'static str {
        match self {
            RecipeKind::Process => "process",
            RecipeKind::Container => "container",
            RecipeKind::Endpoint => "endpoint",
            RecipeKind::Reference => "reference",
        }
    }

    /// Whether bakeoff starts and stops it (everything but `endpoint`).
    pub fn managed(self) -> bool {
        self != RecipeKind::Endpoint
    }
}

impl Arm {
    /// The arm's recipe. Panics only on an `Arm` that did not come from [`load`] (which
    /// guarantees exactly one recipe table).
    pub fn recipe(&self) -> RecipeRef<'_> {
        if let Some(p) = &self.process {
            RecipeRef::Process(p)
        } else if let Some(c) = &self.container {
            RecipeRef::Container(c)
        } else if let Some(e) = &self.endpoint {
            RecipeRef::Endpoint(e)
        } else if let Some(r) = &self.reference {
            RecipeRef::Reference(r)
        } else {
            panic!(
                "arm {:?} has no recipe (not loaded by campaign::load)",
                self.id
            )
        }
    }

    pub fn kind(&self) -> RecipeKind {
        match self.recipe() {
            RecipeRef::Process(_) => RecipeKind::Process,
            RecipeRef::Container(_) => RecipeKind::Container,
            RecipeRef::Endpoint(_) => RecipeKind::Endpoint,
            RecipeRef::Reference(_) => RecipeKind::Reference,
        }
    }

    /// The recipe tables present, in declaration order (load requires exactly one).
    pub(crate) fn recipe_tables(&self) -> Vec<&'static str> {
        let mut v = Vec::new();
        if self.process.is_some() {
            v.push("process");
        }
        if self.container.is_some() {
            v.push("container");
        }
        if self.endpoint.is_some() {
            v.push("endpoint");
        }
        if self.reference.is_some() {
            v.push("reference");
        }
        v
    }
}

/// `[arms.speculative]`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Speculative {
    /// e.g. "mtp", "eagle3", "draft-model", "ngram".
    pub method: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub draft_model: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub draft_tokens: Option<u32>,
    /// Id of the matched control arm: same model, quantization and context, no speculation.
    pub control: String,
}

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
    /// `http://host:port`; default the lane's address (filled by load).
    #[serde(default)]
    pub url: String,
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

/// Which OpenAI API the timed requests use.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ApiKind {
    #[default]
    Chat,
    Completions,
}

/// `[workload]`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Workload {
    /// Ranking order, most important first.
    pub ranking_priority: Vec<RankingMetric>,
    /// Exact prompt tokens of the matched prompt (checked against `usage.prompt_tokens`).
    pub matched_prompt_tokens: u32,
    /// `max_tokens` of every timed request.
    pub max_tokens: u32,
    /// Warm requests at concurrency 1 after the cold one; also requests per stream at Cn.
    #[serde(default = "default_warm")]
    pub warm_repetitions: u32,
    /// Concurrency levels (1 is the warm run itself; each level above 1 is its own step).
    #[serde(default = "default_concurrency")]
    pub concurrency: Vec<u32>,
    /// Long-context profile name → target prompt tokens for retrieval.
    #[serde(default)]
    pub long_context_targets: BTreeMap<String, u64>,
    /// Shape label of the matched prompt in file names; default from the token count
    /// (`256`, `4k`, …; filled by load).
    #[serde(default)]
    pub prompt_label: String,
    #[serde(default)]
    pub api: ApiKind,
    /// Let the engine's prefix cache see identical prompts (default: a nonce defeats it).
    #[serde(default)]
    pub allow_prefix_cache: bool,
    #[serde(default)]
    pub sampling: Sampling,
}

fn default_warm() -> u32 {
    5
}
fn default_concurrency() -> Vec<u32> {
    vec![1]
}

/// `[workload.sampling]`: always sent explicitly and recorded.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Sampling {
    #[serde(default)]
    pub temperature: f64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub top_p: Option<f64>,
    #[serde(default)]
    pub seed: u64,
    /// Ask the engine to ignore end-of-sequence so every request decodes `max_tokens`.
    #[serde(default)]
    pub ignore_eos: bool,
}

impl Default for Sampling {
    fn default() -> Self {
        Sampling {
            temperature: 0.0,
            top_p: None,
            seed: 0,
            ignore_eos: false,
        }
    }
}

/// A quick gate run right after an arm is ready (and again after restoration).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum PreflightGate {
    Smoke,
    Json,
    Streaming,
}

impl PreflightGate {
    pub fn as_str(self) -> &'static str {
        match self {
            PreflightGate::Smoke => "smoke",
            PreflightGate::Json => "json",
            PreflightGate::Streaming => "streaming",
        }
    }

    pub fn gate(self) -> GateName {
        match self {
            PreflightGate::Smoke => GateName::Smoke,
            PreflightGate::Json => GateName::Json,
            PreflightGate::Streaming => GateName::Streaming,
        }
    }
}

/// `[gates]`. A table that is absent is a gate that does not run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Gates {
    /// Run after each arm is ready and after restoration.
    #[serde(default = "default_preflight")]
    pub preflight: Vec<PreflightGate>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tools: Option<ToolsGate>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retrieval: Option<RetrievalGate>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub quality: Option<QualityGate>,
}

fn default_preflight() -> Vec<PreflightGate> {
    vec![
        PreflightGate::Smoke,
        PreflightGate::Json,
        PreflightGate::Streaming,
    ]
}

impl Default for Gates {
    fn default() -> Self {
        Gates {
            preflight: default_preflight(),
            tools: None,
            retrieval: None,
            quality: None,
        }
    }
}

/// `[gates.tools]`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ToolsGate {
    /// Suite file; absent: the gate's built-in suite. Absolute after load.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub suite: Option<PathBuf>,
    /// Requests per variant.
    #[serde(default = "default_tools_batch")]
    pub batch: u32,
    #[serde(default = "default_variants")]
    pub variants: Vec<ToolVariant>,
}

fn default_tools_batch() -> u32 {
    20
}
fn default_variants() -> Vec<ToolVariant> {
    vec![
        ToolVariant::Plain,
        ToolVariant::Streaming,
        ToolVariant::RoundTrip,
    ]
}

/// `[gates.retrieval]`: needles at depths of a prompt of each arm's long-context target.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RetrievalGate {
    /// Needles planted in the prompt, one question each (1–12).
    #[serde(default = "default_needles")]
    pub needles: u32,
    /// Depth of each needle as a fraction of the prompt (0 = start, 1 = end), one per needle.
    /// Default: evenly spread, `(i + 1) / (needles + 1)` (filled by load).
    #[serde(default)]
    pub depths: Vec<f64>,
    /// `max_tokens` of a retrieval answer (counted against the served context).
    #[serde(default = "default_retrieval_max")]
    pub max_tokens: u32,
}

fn default_needles() -> u32 {
    2
}
fn default_retrieval_max() -> u32 {
    32
}

/// `[gates.quality]`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct QualityGate {
    /// Suite file; absent: the gate's built-in suite. Absolute after load.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub suite: Option<PathBuf>,
    /// Attempts per suite item.
    #[serde(default = "default_quality_reps")]
    pub repetitions: u32,
    /// Tokens added to every item's visible-answer budget for reasoning models (default: the
    /// suite's own setting).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reasoning_headroom: Option<u64>,
}

fn default_quality_reps() -> u32 {
    3
}

impl Campaign {
    /// The arm with this id.
    pub fn arm(&self, id: &str) -> Option<&Arm> {
        self.arms.iter().find(|a| a.id == id)
    }

    /// The incumbent arm (load guarantees exactly one).
    pub fn incumbent(&self) -> &Arm {
        self.arms
            .iter()
            .find(|a| a.role == Role::Incumbent)
            .expect("a loaded campaign has exactly one incumbent")
    }

    /// The matched-prompt shape label (`workload.prompt_label`).
    pub fn prompt_label(&self) -> &str {
        &self.workload.prompt_label
    }

    /// The long-context target (profile name, prompt tokens) of an arm, when retrieval runs.
    pub fn long_context_target<'a>(&'a self, arm: &'a Arm) -> Option<(&'a str, u64)> {
        self.gates.retrieval.as_ref()?;
        let name = arm.long_context_profile.as_deref()?;
        let tokens = *self.workload.long_context_targets.get(name)?;
        Some((name, tokens))
    }

    /// SHA-256 (hex) of the arm's canonical JSON (keys sorted, no whitespace; paths as loaded,
    /// i.e. absolute; `from_env` values as `{"from_env":"NAME"}`, never their values). The
    /// restoration proof compares it before and after.
    pub fn recipe_hash(&self, arm: &Arm) -> String {
        let v = serde_json::to_value(arm).expect("an arm serializes to JSON");
        let mut s = String::new();
        canonical_json(&v, &mut s);
        hex_sha256(s.as_bytes())
    }

    /// Every environment variable name a `from_env` value of any arm (or `api_key_env`) reads,
    /// with the arm id, in file order.
    pub fn secret_env_names(&self) -> Vec<(String, String)> {
        let mut out = Vec::new();
        for arm in &self.arms {
            let env = match arm.recipe() {
                RecipeRef::Process(p) => Some(&p.env),
                RecipeRef::Container(c) => Some(&c.env),
                _ => None,
            };
            for v in env.into_iter().flat_map(|e| e.values()) {
                if let EnvValue::FromEnv(name) = v {
                    out.push((arm.id.clone(), name.clone()));
                }
            }
            if let Some(k) = &arm.api_key_env {
                out.push((arm.id.clone(), k.clone()));
            }
        }
        out
    }
}

/// SHA-256 as lowercase hex.
pub fn hex_sha256(bytes: &[u8]) -> String {
    Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// Canonical JSON: object keys sorted (byte order), no whitespace, serde_json's number and
/// string encoding.
pub fn canonical_json(v: &serde_json::Value, out: &mut String) {
    match v {
        serde_json::Value::Object(m) => {
            let mut keys: Vec<&String> = m.keys().collect();
            keys.sort();
            out.push('{');
            for (i, k) in keys.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                out.push_str(&serde_json::Value::String((*k).clone()).to_string());
                out.push(':');
                canonical_json(&m[*k], out);
            }
            out.push('}');
        }
        serde_json::Value::Array(a) => {
            out.push('[');
            for (i, x) in a.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                canonical_json(x, out);
            }
            out.push(']');
        }
        other => out.push_str(&other.to_string()),
    }
}

/// Reads, parses, resolves and validates a campaign file.
///
/// Errors: a file that cannot be read, or a TOML syntax / type / missing-field / unknown-field
/// error, yields exactly one diagnostic (parsing stops there). Otherwise every semantic problem
/// is reported, one diagnostic (one line) each, sorted by line.
pub fn load(path: &Path) -> Result<Campaign, CampaignError> {
    let bytes = std::fs::read(path).map_err(|e| {
        CampaignError::single(Diagnostic {
            file: path.to_path_buf(),
            line: 0,
            field: "file".into(),
            problem: format!("cannot read the campaign file ({e})"),
            fix: "check the path".into(),
        })
    })?;
    let text = String::from_utf8(bytes).map_err(|e| {
        let offset = e.utf8_error().valid_up_to();
        let line = 1 + e.as_bytes()[..offset]
            .iter()
            .filter(|b| **b == b'\n')
            .count();
        CampaignError::single(Diagnostic {
            file: path.to_path_buf(),
            line,
            field: "file".into(),
            problem: "the file is not valid UTF-8".into(),
            fix: "save it as UTF-8".into(),
        })
    })?;
    parse(&text, path)
}

/// [`load`] for text already read: `path` names the file in errors and its directory anchors
/// relative paths.
pub fn parse(text: &str, path: &Path) -> Result<Campaign, CampaignError> {
    let index = SpanIndex::build(text);
    let mut c: Campaign = toml::from_str(text)
        .map_err(|e| CampaignError::single(diag::from_toml_error(path, text, &index, &e)))?;
    let dir = path
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let dir = absolute(dir);
    c.source = Source {
        path: path.to_path_buf(),
        dir: dir.clone(),
        sha256: hex_sha256(text.as_bytes()),
    };
    super::validate::resolve_and_validate(&mut c, path, &index)?;
    Ok(c)
}

/// `p` made absolute against the current directory, with `.` and `..` removed lexically.
pub(crate) fn absolute(p: &Path) -> PathBuf {
    let joined = if p.is_absolute() {
        p.to_path_buf()
    } else {
        std::env::current_dir()
            .unwrap_or_else(|_| PathBuf::from("/"))
            .join(p)
    };
    normalize(&joined)
}

/// `base.join(p)` with `.` and `..` removed lexically (`p` unchanged when absolute).
pub(crate) fn resolve(base: &Path, p: &Path) -> PathBuf {
    normalize(&base.join(p))
}

fn normalize(p: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for c in p.components() {
        match c {
            Component::CurDir => {}
            Component::ParentDir => {
                if !out.pop() {
                    out.push("..");
                }
            }
            other => out.push(other.as_os_str()),
        }
    }
    out
}
