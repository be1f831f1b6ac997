//! The `--json` documents of the commands that end with a result (`run`, `gate`, `verify`,
//! `report`, `recover`, `promote`, `lane status`; docs/agents.md). Plain serde data built from the values each command
//! already holds, never from its prose, so a script (or a later MCP server) reads what the
//! terminal lines say. One document per invocation, on stdout; its `schema` field names the
//! JSON Schema under docs/schemas/ (`bakeoff.<command>/1` → `docs/schemas/<command>.schema.json`).

pub mod gate;
pub mod history;
pub mod lane;
pub mod promote;
pub mod recover;
pub mod report;
pub mod run;
pub mod verify;

use serde::Serialize;

/// The exit codes every command keeps (README, "Exit codes").
pub mod exit {
    /// Done: the command did what was asked (a run complete, a bundle verified, every gate passed).
    pub const DONE: u8 = 0;
    /// Done with failures, or no verdict reached: a run incomplete, a gate failed, a bundle that
    /// does not verify, a lane not back, a regression found, any other error.
    pub const FAILED: u8 = 1;
    /// Refused before anything was touched: a bad flag or campaign file, a precondition.
    pub const REFUSED: u8 = 2;
    /// A promotion's rollback failed (the lane is marked), or `lane status` finds such a mark.
    pub const ROLLBACK_FAILED: u8 = 4;
    /// Interrupted by SIGINT or SIGTERM (what must be restored was restored first).
    pub const INTERRUPTED: u8 = 130;
}

/// `bakeoff.error/1`: printed instead of the command's own document when it ended before it
/// had one (refused, or an error on the way).
#[derive(Debug, Clone, Serialize)]
pub struct ErrorDoc {
    pub schema: &'static str,
    /// The subcommand (`run`, `verify`, …).
    pub command: String,
    pub exit_code: u8,
    /// Exit 2: nothing was touched.
    pub refused: bool,
    /// The error line the command printed on stderr.
    pub message: String,
    /// The file's diagnostics behind a refusal (file:line: field: problem; fix), when any.
    pub diagnostics: Vec<String>,
}

impl ErrorDoc {
    pub const SCHEMA: &'static str = "bakeoff.error/1";

    pub fn new(command: &str, exit_code: u8, message: String, diagnostics: Vec<String>) -> Self {
        ErrorDoc {
            schema: Self::SCHEMA,
            command: command.to_string(),
            exit_code,
            refused: exit_code == exit::REFUSED,
            message,
            diagnostics,
        }
    }
}
