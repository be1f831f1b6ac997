//! History: every verified bundle in a database (SQLite embedded, PostgreSQL shared), series per
//! recipe identity × GPU model × lane, change points, and what a run's figures are against its
//! own history. See `docs/history.md`.
//!
//! Layering: reads bundles through `evidence` (verify, the typed result), statistics from
//! `metrics`, draws with `report::chartkit`; only `cli` calls it (`bakeoff history`, `bakeoff
//! run --history`), so the verdict's ranking never depends on it.

pub mod changepoint;
pub mod context;
pub mod ingest;
pub mod page;
pub mod postgres;
pub mod regressions;
pub mod series;
pub mod sql;
pub mod sqlite;
pub mod store;

pub use ingest::{add, summarize, Added, Summary};
pub use store::{DbSpec, Store};

use anyhow::Result;
use std::path::Path;

/// Verifies and adds one bundle: the summary is read (and verified) before the database is
/// touched, then written in one transaction.
pub fn add_bundle(store: &mut Store, dir: &Path) -> Result<(Summary, Added)> {
    let s = summarize(dir)?;
    let a = add(store, &s)?;
    Ok((s, a))
}

/// What a run just added reads against its history: the lines per arm and figure (`@c1`
/// medians and the ranked figures), and the lanes whose control drifts.
pub struct RunContext {
    pub lines: Vec<context::Line>,
    pub drifting: Vec<String>,
}

/// The context of bundle `digest`, from the series of its own arms on its GPU and lane.
pub fn run_context(store: &mut Store, s: &Summary) -> Result<RunContext> {
    let f = series::Filter {
        lane: Some(s.lane.clone()),
        gpu: None,
        ..Default::default()
    };
    let all = series::read(store, &f)?;
    let mine: Vec<series::Series> = all
        .into_iter()
        .filter(|x| x.key.gpu_model == s.gpu_model && x.points.iter().any(|p| p.digest == s.digest))
        .collect();
    let lines = context::lines(&mine, &s.digest);
    let drifting = context::drifting_lanes(&mine, &lines);
    Ok(RunContext { lines, drifting })
}
