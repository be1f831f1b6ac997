//! The integration tests that need no real llama.cpp engine, one module per area, in one test
//! binary (one link of the crate instead of one per file). Real-engine tests: `tests/real/`; the
//! seed-replay example, which needs the machine to itself: `tests/seed_replay.rs`. The report
//! pages checked in headless Chromium run with `--features full-suite` (`scripts/test.sh`
//! installs Chromium); plain `cargo test` needs nothing installed.

#[path = "../support/mod.rs"]
mod support;

mod architecture;
mod bench;
mod bench_conv;
mod bench_conv_combo;
mod bench_dataset;
mod bench_export;
mod bench_failures;
mod bench_load;
mod bench_trace;
mod campaign {
    mod availability;
    mod bounds;
    mod capacity;
    mod disclosure;
    mod dry_run;
    mod energy;
    mod example;
    mod faults;
    mod open_loop;
    mod recovery;
    mod run;
    mod slo;
    mod spec;
    mod trace;
    mod workload_sources;
}
mod client;
mod decide;
mod engine;
mod fleet;
mod fleet_recover;
mod history;
mod history_campaigns;
mod history_fleet;
mod json_schemas;
mod mcp;
mod gate {
    mod cli;
    mod reference;
}
mod lane {
    mod container;
    mod process;
}
mod prompt {
    mod http;
    mod reference;
    mod sizing;
}
mod report {
    #[cfg(feature = "full-suite")]
    mod bench_html;
    #[cfg(feature = "full-suite")]
    mod browser;
    #[cfg(feature = "full-suite")]
    mod history_html;
    #[cfg(feature = "full-suite")]
    mod promote_html;
    mod summary;
}
mod promote;
mod selftest;
mod selftest_dataset;
mod tls;
mod trust_bundle;
mod telemetry {
    mod gpu;
    mod metrics;
}
