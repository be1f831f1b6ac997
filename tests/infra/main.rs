//! Tests against real infrastructure that the test command starts itself and tears down: a
//! one-node Slurm cluster (`scripts/infra/slurm.sh`, state under `target/infra/`). One module per
//! kind of infrastructure, in one test binary (`cargo test --test infra`).

#[path = "../support/mod.rs"]
mod support;

mod slurm;
