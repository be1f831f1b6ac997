//! One file per subcommand.

pub mod bench;
pub mod compare;
pub mod engine;
pub mod gate;
pub mod report;
pub mod run;
pub mod selftest;
pub mod selftest_floor;
pub mod verify;
