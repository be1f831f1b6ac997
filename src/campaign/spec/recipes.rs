//! The recipe tables of an arm (`process`, `container`, `endpoint`, `reference`, `slurm`) and the
//! literal-or-`from_env` values they hold. Each is defined beside its lane kind (`lane/`), which
//! implements [`crate::lane::Recipe`] for it; the campaign file's format is theirs.

pub use crate::lane::{
    ContainerRecipe, EndpointRecipe, EnvValue, ProcessRecipe, ReferenceRecipe, SlurmRecipe, Volume,
};
