//! Campaigns: the campaign file (docs/campaign.md), its validation, and its plan.
//!
//! ```text
//! campaign.toml ──load──▶ Campaign ──plan──▶ Plan (arms × steps) ──render──▶ dry-run text
//! ```
//!
//! - [`load`] reads and checks a file; every error is one line
//!   `FILE:LINE: field.path: what is wrong; how to fix`.
//! - [`plan()`] expands it into ordered steps, each naming the evidence file it writes.
//! - [`Campaign::launch_command`] gives the exact argv/env of each recipe; `from_env` values
//!   travel as names only and are resolved by whoever launches.
//!
//! The runner that executes a [`Plan`] is `crate::run`; the checkpoint format lives here.

pub mod capacity;
pub mod checkpoint;
pub mod command;
mod diag;
mod dry_run;
pub mod fingerprint;
pub mod lane_plan;
mod loader;
mod paths;
pub mod plan;
mod resume;
pub mod schedule;
pub mod spec;
mod validate;

pub use command::{shell_quote, CommandLine, LaunchCommand, Mask, StopMethod, SELF_PROGRAM};
pub use diag::{CampaignError, Diagnostic};
pub use dry_run::source_line;
pub use lane_plan::{lane_campaign, lane_plan};
pub use loader::{load, parse};
pub use plan::{plan, Phase, Plan, PlanStep, RequestContract, RunState, StepKind, WorkSource};
pub use resume::{load_bundle, BundleCampaign, Refusal};
pub use spec::{
    canonical_json, hex_sha256, ApiKind, Arm, Campaign, ContainerRecipe, EndpointRecipe, EnvValue,
    FleetSlurm, GateName, Gates, Identity, Lane, Policy, PreflightGate, ProcessRecipe, Promotion,
    PromotionTable, QualityGate, QualityRisk, RankingMetric, Recipe, RecipeKind, ReferenceRecipe,
    RetrievalGate, Role, Sampling, SlurmRecipe, Source, Speculative, ToolVariant, ToolsGate,
    Volume, Workload,
};
pub use spec::{
    in_campaign_words, ArrivalProcess, ConversationSource, DatasetFormat, DatasetSource, OpenLoop,
    OutputTokens, PrefixOrder, SharedPrefixSource, SyntheticSource,
};
pub use validate::{is_env_name, is_id, looks_secret, token_label};
