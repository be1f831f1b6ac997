//! The reference engine's shared server state, used by the listener (server.rs) and the
//! completion handler (completion.rs).

use std::sync::atomic::AtomicU64;
use std::sync::Arc;

use super::state::Model;
use crate::clock::mono_ns;

/// Shared server state.
pub struct App {
    pub models: Vec<Arc<Model>>,
    /// `--seed`.
    pub seed: u64,
    /// When the engine started (ns); models are loading until start + startup_ms.
    pub start_ns: u64,
    /// Completion ids (`chatcmpl-<n>`, `cmpl-<n>`), shared by every model, 1-based.
    pub next_id: AtomicU64,
}

impl App {
    pub fn model(&self, name: &str) -> Option<&Arc<Model>> {
        self.models.iter().find(|m| m.profile.model == name)
    }

    /// True once every model's startup_ms has passed. A model declared to fail at startup never
    /// loads: the engine exits at its startup_ms instead, and a health poll that lands just
    /// before that exit must not see it ready.
    pub fn loaded(&self) -> bool {
        if self
            .models
            .iter()
            .any(|m| m.profile.fail_at_startup.is_some())
        {
            return false;
        }
        let max_ms = self
            .models
            .iter()
            .map(|m| m.profile.startup_ms)
            .fold(0.0, f64::max);
        mono_ns() >= self.start_ns + (max_ms * 1e6) as u64
    }
}
