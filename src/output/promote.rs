//! `bakeoff promote --json`: `bakeoff.promote/1`, the promotion's end as data (or its dry
//! run's plan, or which end of a running bake `--abort` / `--finish` asked for).

use serde::Serialize;

#[derive(Debug, Clone, Serialize)]
pub struct PromoteDoc {
    pub schema: &'static str,
    pub exit_code: u8,
    /// `promote`, `dry-run`, `abort` or `finish`: what this invocation did.
    pub action: &'static str,
    /// The promotion folder (absolute).
    pub folder: String,
    /// The arm promoted (None for `--abort` / `--finish`).
    pub arm: Option<String>,
    /// `promoted`, `rolled-back` or `rollback-failed` when the transaction ran (None for a dry
    /// run, `--abort` and `--finish`).
    pub phase: Option<String>,
    /// Why it ended so (or what `--abort` / `--finish` got as an answer).
    pub why: String,
    /// The folder's root digest after sealing (`bakeoff verify DIR --digest HEX`).
    pub root_digest: Option<String>,
    /// A failed rollback: the commands that start the incumbent by hand.
    pub restart: Vec<String>,
    /// A dry run: the whole transaction and its rollback plan, one line each.
    pub plan: Vec<String>,
    /// A dry run: what a real promotion would still need (`--confirm` and why), if anything.
    pub needs: Option<String>,
}

impl PromoteDoc {
    pub const SCHEMA: &'static str = "bakeoff.promote/1";

    pub fn new(action: &'static str, folder: String, exit_code: u8, why: String) -> PromoteDoc {
        PromoteDoc {
            schema: Self::SCHEMA,
            exit_code,
            action,
            folder,
            arm: None,
            phase: None,
            why,
            root_digest: None,
            restart: Vec::new(),
            plan: Vec::new(),
            needs: None,
        }
    }
}
