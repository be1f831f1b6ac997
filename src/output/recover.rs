//! `bakeoff recover --json`: `bakeoff.recover/1`, each lane's outcome.

use serde::Serialize;

#[derive(Debug, Clone, Serialize)]
pub struct RecoverDoc {
    pub schema: &'static str,
    pub exit_code: u8,
    pub bundle: String,
    /// Every lane serves its incumbent again (or, a qualification lane, nothing).
    pub lanes_back: bool,
    /// The bundle was already complete: nothing to resume.
    pub complete: bool,
    /// What finishes the campaign (None when complete or a lane is not back).
    pub next: Option<String>,
    /// One entry for a one-lane bundle (its `id` is None).
    pub lanes: Vec<LanePart>,
    /// The multi-lane bundle's merged result could not be sealed: why.
    pub seal_error: Option<String>,
}

#[derive(Debug, Clone, Serialize)]
pub struct LanePart {
    pub id: Option<String>,
    pub back: bool,
    /// The recovery file written (`recovery-<n>.json`, in the lane's folder), None: untouched.
    pub evidence: Option<String>,
    /// What the recovery found and did, one line each.
    pub lines: Vec<String>,
}

impl RecoverDoc {
    pub const SCHEMA: &'static str = "bakeoff.recover/1";

    pub fn new(
        bundle: String,
        lanes: Vec<LanePart>,
        complete: bool,
        seal_error: Option<String>,
    ) -> Self {
        let back = lanes.iter().all(|l| l.back);
        RecoverDoc {
            schema: Self::SCHEMA,
            exit_code: if back {
                super::exit::DONE
            } else {
                super::exit::FAILED
            },
            next: (back && !complete).then(|| format!("bakeoff run --resume {bundle}")),
            bundle,
            lanes_back: back,
            complete,
            lanes,
            seal_error,
        }
    }
}
