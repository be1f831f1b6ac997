//! Tests against real infrastructure that the tests set up themselves through `scripts/infra/`
//! (a Docker engine and a local registry; a Slurm cluster), one module per kind, in one test
//! binary. Each module starts its infrastructure once per run when it is not up already;
//! `scripts/test.sh` tears it down at exit.

#[path = "../support/mod.rs"]
mod support;

mod docker;
mod history_pg;
mod mixed;
mod promote;
mod slurm;
mod slurm_fleet;
mod slurm_grant;
mod slurm_recovery;
