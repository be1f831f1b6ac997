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

/// The lanes the summary's arms ran on (one for a one-lane bundle), each once, in arm order.
fn arm_lanes(s: &Summary) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for a in &s.arms {
        let l = if a.lane.is_empty() { &s.lane } else { &a.lane };
        if !out.contains(l) {
            out.push(l.clone());
        }
    }
    out
}

/// The store's series on the summary's GPU model and its arms' lanes.
fn series_of(store: &mut Store, s: &Summary) -> Result<Vec<series::Series>> {
    let mut all = Vec::new();
    for lane in arm_lanes(s) {
        let f = series::Filter {
            lane: Some(lane),
            ..Default::default()
        };
        all.extend(
            series::read(store, &f)?
                .into_iter()
                .filter(|x| x.key.gpu_model == s.gpu_model),
        );
    }
    Ok(all)
}

/// The lines of `series` for run `digest`, each naming its lane when the run's arms ran on
/// more than one (a multi-lane bundle: a control copy is on every lane under one name).
fn context_of(series: &[series::Series], digest: &str, lanes: usize) -> RunContext {
    let mut lines = context::lines(series, digest);
    if lanes > 1 {
        for l in lines.iter_mut() {
            l.name_lane = true;
        }
    }
    let drifting = context::drifting_lanes(&lines);
    RunContext { lines, drifting }
}

/// The context of bundle `digest`, from the series of its own arms on its GPU and their lanes.
pub fn run_context(store: &mut Store, s: &Summary) -> Result<RunContext> {
    let mine: Vec<series::Series> = series_of(store, s)?
        .into_iter()
        .filter(|x| x.points.iter().any(|p| p.digest == s.digest))
        .collect();
    Ok(context_of(&mine, &s.digest, arm_lanes(s).len()))
}

/// The context of a run before its bundle is added (its verdict is not rendered yet, so its
/// final root digest is not known): the store's series of its arms on its GPU and their lanes,
/// each with today's point appended from `s`. Points of the same run already in the store (an
/// earlier bundle of it, added by hand) are left out: a run is not its own history. Also
/// returns those series, for the run's trend page.
pub fn context_before_add(
    store: &mut Store,
    s: &Summary,
) -> Result<(RunContext, Vec<series::Series>)> {
    let mut all = series_of(store, s)?;
    for x in all.iter_mut() {
        x.points
            .retain(|p| !(p.campaign_id == s.campaign_id && p.started_at == s.started_at));
    }
    let mut mine = Vec::new();
    for a in &s.arms {
        for fig in &a.figures {
            let key = series::Key {
                figure: fig.name.clone(),
                recipe: a.recipe(),
                gpu_model: s.gpu_model.clone(),
                lane: if a.lane.is_empty() {
                    s.lane.clone()
                } else {
                    a.lane.clone()
                },
            };
            let mut x = match all.iter().position(|x| x.key == key) {
                Some(i) => all.swap_remove(i),
                None => series::Series {
                    key,
                    points: Vec::new(),
                },
            };
            x.points.push(series::Point {
                digest: s.digest.clone(),
                campaign_id: s.campaign_id.clone(),
                started_at: s.started_at.clone(),
                path: s.path.clone(),
                role: a.role.clone(),
                value: fig.value,
                lo: fig.lo,
                hi: fig.hi,
                n: fig.n,
                facts: series::Facts {
                    engine_version: a.engine_version.clone(),
                    driver: s.driver.clone(),
                    image: a.image.clone(),
                    program: a.program.clone(),
                },
            });
            mine.push(x);
        }
    }
    mine.sort_by(|a, b| a.key.cmp(&b.key));
    Ok((context_of(&mine, &s.digest, arm_lanes(s).len()), mine))
}
