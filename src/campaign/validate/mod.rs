//! Semantic checks of a parsed campaign, and the defaults that depend on other fields, one file
//! per table.
//!
//! Every problem becomes one diagnostic at the line of the field it is about; all are collected.

mod arms;
mod capacity;
mod common;
mod container;
mod fleet_slurm;
mod gates;
mod identity;
mod lanes;
mod open_loop;
mod policy;
mod price;
mod recipes;
mod slurm;
mod slurm_lanes;
mod sources;
mod trace;
mod workload;

use super::diag::{CampaignError, Reporter, SpanIndex};
use super::spec::Campaign;
use std::path::Path;

pub use common::{is_env_name, is_id, looks_secret, token_label};

pub(super) fn resolve_and_validate(
    c: &mut Campaign,
    file: &Path,
    index: &SpanIndex,
) -> Result<(), CampaignError> {
    let mut r = Reporter::new(file, index);
    let dir = c.source.dir.clone();
    identity::identity(c, &dir, &mut r);
    fleet_slurm::expand(c);
    lanes::lanes(c, &mut r);
    price::ranking(c, &mut r);
    sources::sources(c, &dir, &mut r);
    workload::workload(c, &mut r);
    open_loop::open_loop(c, &mut r);
    capacity::capacity(c, &mut r);
    gates::gates(c, &dir, &mut r);
    for i in 0..c.arms.len() {
        arms::arm(c, i, &dir, &mut r);
    }
    arms::across_arms(c, &mut r);
    // After the arms: their served context bounds the trace's requests.
    trace::trace(c, &dir, &mut r);
    lanes::bound_arms(c, &mut r);
    lanes::fleet(c, &mut r);
    slurm_lanes::slurm_lanes(c, &mut r);
    slurm_lanes::fleet_client(c, &mut r);
    fleet_slurm::fleet_slurm(c, &mut r);
    workload::long_context(c, &mut r);
    policy::policy(c, &mut r);
    policy::promotion(c, &mut r);
    workload::interval_support(c, &mut r);
    c.warnings = r.warnings.iter().map(|d| d.to_string()).collect();
    r.finish()
}
