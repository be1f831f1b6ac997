//! One file per subcommand.

pub mod bench;
pub mod engine;
pub mod selftest;
pub mod verify;
