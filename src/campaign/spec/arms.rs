//! `[[arms]]`: an arm's identity, role and speculative decoding; its recipe tables are in
//! recipes.rs.

use super::recipes::{
    ContainerRecipe, EndpointRecipe, ProcessRecipe, ReferenceRecipe, SlurmRecipe,
};
use crate::lane::{Recipe, RecipeKind};
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

impl Arm {
    /// The arm's recipe tables, each with its name: the one list of the recipe kinds a
    /// campaign file can declare (load requires exactly one to be present).
    fn recipe_slots(&self) -> [(&'static str, Option<&dyn Recipe>); 5] {
        fn slot<R: Recipe>(r: &Option<R>) -> Option<&dyn Recipe> {
            r.as_ref().map(|r| r as &dyn Recipe)
        }
        [
            ("process", slot(&self.process)),
            ("container", slot(&self.container)),
            ("endpoint", slot(&self.endpoint)),
            ("reference", slot(&self.reference)),
            ("slurm", slot(&self.slurm)),
        ]
    }

    /// The arm's recipe: its kind's implementation of [`Recipe`]. Panics only on an `Arm` that
    /// did not come from [`load`](crate::campaign::load) (which guarantees exactly one recipe
    /// table).
    pub fn recipe(&self) -> &dyn Recipe {
        match self.recipe_slots().into_iter().find_map(|(_, r)| r) {
            Some(r) => r,
            None => panic!(
                "arm {:?} has no recipe (not loaded by campaign::load)",
                self.id
            ),
        }
    }

    pub fn kind(&self) -> RecipeKind {
        self.recipe().kind()
    }

    /// The recipe tables present, in declaration order (load requires exactly one).
    pub(crate) fn recipe_tables(&self) -> Vec<&'static str> {
        self.recipe_slots()
            .into_iter()
            .filter(|(_, r)| r.is_some())
            .map(|(name, _)| name)
            .collect()
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
