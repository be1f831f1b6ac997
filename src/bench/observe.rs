//! What a bench run tells its caller while it runs: notes (what it is doing, what the reader
//! must know) and a progress count per level. `cli/bench.rs` prints them; tests and campaigns
//! pass [`Quiet`]. The library itself never prints.

use crate::metrics::summary::Collector;

/// Receives a run's notes and makes each level's progress display.
pub trait Observer {
    /// A line for the user (`note: …`, `sizing … `, `running …`).
    fn note(&self, line: &str);
    /// The progress display of a level of `total` requests (None: a spinner), if any.
    fn progress(&self, total: Option<u64>) -> Option<Box<dyn Progress>>;
}

/// A level's progress display; it lives on the collector thread.
pub trait Progress: Send {
    /// One more request finished (`c`: the counts so far).
    fn tick(&mut self, c: &Collector);
    /// The level is over.
    fn done(&mut self);
}

/// No notes, no progress.
pub struct Quiet;

impl Observer for Quiet {
    fn note(&self, _: &str) {}
    fn progress(&self, _: Option<u64>) -> Option<Box<dyn Progress>> {
        None
    }
}
