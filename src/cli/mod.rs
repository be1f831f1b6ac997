//! One file per subcommand.

pub mod bench;
pub mod engine;
pub mod gate;
pub mod run;
pub mod selftest;
pub mod verify;
pub mod compare;
pub mod report;
