//! The integration tests against real llama.cpp servers (SmolLM2-135M on the CPU), in their own
//! test binary. They need the engines that `scripts/engine-setup.sh` installs (see
//! `tests/support/real_engine.rs`); every test here takes `support::exclusive()`, so one real
//! server runs at a time.

#[path = "../support/mod.rs"]
mod support;

mod bench;
mod bench_dataset;
mod campaign_dataset;
mod campaign_run;
mod conversation;
mod gate;
mod lane;
mod mcp_client;
mod prompt;
mod smoke;
