//! The campaign file's data model (docs/campaign.md), strict parsing, one file per table.
//!
//! Parsing is strict: every table denies unknown fields. `campaign::load` (loader.rs) reads the
//! file, parses it into these types, resolves relative paths against the file's directory, fills
//! defaults that depend on other fields, and runs the semantic checks of validate/. What it returns
//! is complete: a consumer never has to apply a default itself.

mod arms;
mod campaign;
mod capacity;
mod gates;
mod hashing;
mod identity;
mod lanes;
mod promotion;
mod recipes;
mod trace;
mod workload;

pub use crate::lane::{Recipe, RecipeKind};
pub use arms::{Arm, Role, Speculative};
pub use campaign::{Campaign, HistoryTable, Source};
pub use capacity::{Capacity, DEFAULT_PROBE_REQUESTS};
pub use gates::{Gates, PreflightGate, QualityGate, RetrievalGate, ToolsGate};
pub use hashing::{canonical_json, hex_sha256};
pub use identity::{Identity, Lane};
pub use lanes::{
    granted_lane_id, ClientPlace, FleetSlurm, FleetTable, LaneEntry, NamedLane, SINGLE_LANE_ID,
};
pub use promotion::PromotionTable;
pub use recipes::{
    ContainerRecipe, EndpointRecipe, EnvValue, ProcessRecipe, ReferenceRecipe, SlurmRecipe, Volume,
};
pub use trace::Trace;
pub use workload::{
    in_campaign_words, ArrivalProcess, ConversationSource, DatasetFormat, DatasetSource, OpenLoop,
    OutputTokens, PrefixOrder, SharedPrefixSource, SyntheticSource,
};
pub use workload::{ApiKind, Sampling, Workload};
// The domain values and the policy are defined once in evidence/ (the verdict reads them from
// `campaign-result.json` without depending on the campaign module).
pub use crate::evidence::{GateName, Policy, Promotion, QualityRisk, RankingMetric, ToolVariant};
