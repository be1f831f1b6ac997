//! bakeoff: evidence-grade bake-offs of LLM serving configurations.
//!
//! The binary is a thin CLI over these modules; integration tests use them directly.

pub mod bench;
pub mod campaign;
pub mod cli;
pub mod client;
pub mod clock;
pub mod decide;
pub mod evidence;
pub mod gates;
pub mod history;
pub mod lane;
pub mod load;
pub mod mcp;
pub mod metrics;
pub mod netstamp;
pub mod output;
pub mod promote;
pub mod refengine;
pub mod report;
pub mod run;
pub mod telemetry;
pub mod workload;

/// The version written into every artifact.
pub const VERSION: &str = env!("CARGO_PKG_VERSION");
