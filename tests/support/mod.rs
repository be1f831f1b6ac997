//! Test support shared by the integration-test binaries (`tests/it/`, `tests/real/`,
//! `tests/seed_replay.rs`): each includes this module once, as `crate::support`.
#![allow(dead_code)]

pub mod campaign;
pub mod decide_fixture;
pub mod history;
pub mod json_doc;
pub mod real_engine;
pub mod reference;

use std::process::Output;
use std::sync::{RwLock, RwLockReadGuard, RwLockWriteGuard};

pub const BIN: &str = env!("CARGO_BIN_EXE_bakeoff");

/// A port that was free a moment ago (bound to 127.0.0.1:0, read, released).
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("bind 127.0.0.1:0")
        .port()
}

/// A child's exit status and output, for assertion messages.
pub fn text(o: &Output) -> String {
    format!(
        "status {:?}\nstdout:\n{}\nstderr:\n{}",
        o.status.code(),
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// One lock for the whole test binary. Timing-sensitive tests (and, in `tests/real/`, every test
/// that starts a real server) take it exclusively; on a 2-core machine parallel engines and clients
/// would measure each other's load. When each test file was its own binary they never ran beside
/// another file's tests; this keeps that true for them now that the files share one process.
static TIMING: RwLock<()> = RwLock::new(());

/// Runs beside other `shared()` holders, never beside an `exclusive()` one.
pub fn shared() -> RwLockReadGuard<'static, ()> {
    TIMING.read().unwrap_or_else(|e| e.into_inner())
}

/// Runs alone among the tests that take this lock (either way).
pub fn exclusive() -> RwLockWriteGuard<'static, ()> {
    TIMING.write().unwrap_or_else(|e| e.into_inner())
}
