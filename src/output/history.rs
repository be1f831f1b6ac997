//! `bakeoff history … --json`: `bakeoff.history/1`, one document per subcommand: what `add`
//! added or refused, the bundles `list` found, the series `show` read, the change points
//! `regressions` found (and whether they pass `--fail-on`), the page `report` wrote. Filled by
//! `cli/history.rs` from the store's rows; the parts a subcommand does not fill stay empty.

use serde::Serialize;

#[derive(Debug, Clone, Serialize, Default)]
pub struct HistoryDoc {
    pub schema: &'static str,
    pub exit_code: u8,
    /// `add`, `list`, `show`, `regressions` or `report`.
    pub command: &'static str,
    /// The store (`sqlite:PATH` or the PostgreSQL server, never a password).
    pub store: String,
    pub added: Vec<AddedPart>,
    pub bundles: Vec<BundlePart>,
    pub series: Vec<SeriesPart>,
    pub change_points: Vec<ChangePart>,
    /// `regressions --fail-on PCT`.
    pub fail_on_pct: Option<f64>,
    /// `report --html FILE`: the page written.
    pub wrote: Option<String>,
}

#[derive(Debug, Clone, Serialize)]
pub struct AddedPart {
    pub bundle: String,
    /// `added`, `present` (already in the history: nothing written) or `refused`.
    pub status: &'static str,
    pub digest: Option<String>,
    /// `present`: the bundle's earlier path (its path was updated; the digest is the key).
    pub moved_from: Option<String>,
    /// `refused`: why (it does not verify, …).
    pub error: Option<String>,
}

#[derive(Debug, Clone, Serialize)]
pub struct BundlePart {
    pub digest: String,
    pub campaign_id: String,
    pub started_at: String,
    pub gpu_model: String,
    pub lane: String,
    pub arms: String,
    /// Empty: no winner.
    pub winner: String,
    pub path: String,
}

#[derive(Debug, Clone, Serialize)]
pub struct SeriesPart {
    /// The series in words (`inc (reference, m) ttft_p50@c1 on GPU none, lane …`).
    pub key: String,
    pub figure: String,
    pub unit: &'static str,
    pub gpu_model: String,
    pub lane: String,
    /// Oldest first.
    pub points: Vec<PointPart>,
}

#[derive(Debug, Clone, Serialize)]
pub struct PointPart {
    pub digest: String,
    pub started_at: String,
    pub value: f64,
    pub lo: Option<f64>,
    pub hi: Option<f64>,
    pub n: u64,
    /// What changed in the recipe since the point before.
    pub changed: Vec<String>,
}

#[derive(Debug, Clone, Serialize)]
pub struct ChangePart {
    /// The series in words.
    pub series: String,
    pub regression: bool,
    /// Worse (positive) or better (negative), percent of the level before.
    pub worse_pct: f64,
    /// `--fail-on` given and this regression is beyond it.
    pub beyond_fail_on: bool,
    /// The first bundle after the change.
    pub digest: String,
    pub started_at: String,
    pub path: String,
    /// What changed in the recipe there.
    pub changed: Vec<String>,
    /// The line `bakeoff history regressions` prints for it.
    pub line: String,
}

impl HistoryDoc {
    pub const SCHEMA: &'static str = "bakeoff.history/1";

    pub fn new(command: &'static str, store: String) -> HistoryDoc {
        HistoryDoc {
            schema: Self::SCHEMA,
            command,
            store,
            ..HistoryDoc::default()
        }
    }
}
