//! `[[arms]]`: an arm's identity, role and speculative decoding; its recipe tables are in
//! recipes.rs.

use super::recipes::{
    ContainerRecipe, EndpointRecipe, ProcessRecipe, ReferenceRecipe, SlurmRecipe,
};
use serde::{Deserialize, Serialize};
use std::path::PathBuf;

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
/// `container`, `endpoint`, `reference`, `slurm`) is present; [`Arm::recipe`] says which.
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
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub slurm: Option<SlurmRecipe>,
}

/// The recipe of an arm, borrowed.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum RecipeRef<'a> {
    Process(&'a ProcessRecipe),
    Container(&'a ContainerRecipe),
    Endpoint(&'a EndpointRecipe),
    Reference(&'a ReferenceRecipe),
    Slurm(&'a SlurmRecipe),
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

impl Arm {
    /// The arm's recipe. Panics only on an `Arm` that did not come from [`load`](crate::campaign::load) (which
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
        } else if let Some(s) = &self.slurm {
            RecipeRef::Slurm(s)
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
            RecipeRef::Slurm(_) => RecipeKind::Slurm,
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
        if self.slurm.is_some() {
            v.push("slurm");
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
