//! The tools, each a thin typed wrapper over its concern's module: inputs and outputs are
//! schemars types (their schemas are the tools' `inputSchema` / `outputSchema`); a refused
//! input or a failure is a tool error carrying the same words as the command line.

use super::bundles::{self, BundleInput, CompareInput, CompareOutput, VerifyInput};
use super::campaign::{self as camp, PlanInput, PlanOutput, ResumeInput};
use super::endpoint::{self, BenchInput, BenchOutput, GateInput};
use super::runs::RunStatus;
use super::Server;
use crate::output::gate::GateDoc;
use crate::output::run::RunDoc;
use crate::output::verify::VerifyDoc;
use rmcp::handler::server::wrapper::{Json, Parameters};
use rmcp::{tool, tool_router};
use schemars::JsonSchema;
use serde::Deserialize;
use std::time::Duration;

/// The longest `watch` and `stop` wait for the run to end before answering.
pub const MAX_WAIT_S: f64 = 600.0;

#[derive(Debug, Clone, Deserialize, JsonSchema)]
pub struct WatchInput {
    /// The handle `start` or `resume` returned (`run-1`).
    pub run: String,
    /// Wait up to this many seconds (0 to 600, default 0) for the run to end before
    /// answering; the answer comes at once when it already ended.
    #[schemars(range(min = 0.0, max = 600.0))]
    pub wait_s: Option<f64>,
}

fn wait(w: Option<f64>, default: f64) -> Result<Duration, String> {
    let w = w.unwrap_or(default);
    if !(0.0..=MAX_WAIT_S).contains(&w) {
        return Err(format!(
            "wait_s {w}: must be from 0 to {MAX_WAIT_S} seconds"
        ));
    }
    Ok(Duration::from_secs_f64(w))
}

/// Runs `f` off the server's async threads (file hashing, loading a bundle, a bench's own
/// runtime).
async fn blocking<T: Send + 'static>(
    f: impl FnOnce() -> Result<T, String> + Send + 'static,
) -> Result<T, String> {
    tokio::task::spawn_blocking(f)
        .await
        .map_err(|e| format!("the tool's work failed: {e}"))?
}

#[tool_router(vis = "pub(super)")]
impl Server {
    /// Check a campaign file and give its plan (`bakeoff run --dry-run`): every step with its
    /// parameters, secrets masked. Nothing is started and no request is sent.
    #[tool]
    async fn plan(&self, Parameters(i): Parameters<PlanInput>) -> Result<Json<PlanOutput>, String> {
        let root = self.root.clone();
        blocking(move || camp::plan(&root, &i).map_err(|r| r.text()))
            .await
            .map(Json)
    }

    /// Start a campaign in the background (`bakeoff run FILE --output DIR`, under the lane
    /// lock) and return its run handle at once; follow it with `watch`, interrupt it with
    /// `stop`. The bundle folder must be under the server's root.
    #[tool]
    async fn start(&self, Parameters(i): Parameters<PlanInput>) -> Result<Json<RunStatus>, String> {
        let root = self.root.clone();
        let (args, bundle) =
            blocking(move || camp::start_args(&root, &i).map_err(|r| r.text())).await?;
        self.start_run(args, bundle, false).map(Json)
    }

    /// Go on with an interrupted campaign (`bakeoff run --resume DIR`): finished steps are not
    /// run again. Returns a new run handle at once.
    #[tool]
    async fn resume(
        &self,
        Parameters(i): Parameters<ResumeInput>,
    ) -> Result<Json<RunStatus>, String> {
        let (args, bundle) = camp::resume_args(&self.root, &i).map_err(|r| r.text())?;
        self.start_run(args, bundle, true).map(Json)
    }

    /// A run's progress: running or exited (with its exit code and `bakeoff.run/1` document),
    /// steps done of all, the step running now, each arm's status, its last log lines.
    #[tool]
    async fn watch(
        &self,
        Parameters(i): Parameters<WatchInput>,
    ) -> Result<Json<RunStatus>, String> {
        let w = wait(i.wait_s, 0.0)?;
        self.runs.watch(&i.run, w).await.map(Json)
    }

    /// Interrupt a run as Ctrl-C does (SIGINT): the current step stops, the incumbent is
    /// restored and the bundle sealed (exit 130); `resume` goes on later. Waits up to
    /// `wait_s` (default 120) for it to end.
    #[tool]
    async fn stop(&self, Parameters(i): Parameters<WatchInput>) -> Result<Json<RunStatus>, String> {
        let w = wait(i.wait_s, 120.0)?;
        self.runs.stop(&i.run, w).await.map(Json)
    }

    /// The verdict of a sealed bundle as it stands (`bakeoff.run/1`): complete or why not, the
    /// winner and why, each arm, the failures with their class and evidence, the root digest.
    #[tool]
    async fn verdict(
        &self,
        Parameters(i): Parameters<BundleInput>,
    ) -> Result<Json<RunDoc>, String> {
        let dir = camp::resolve_input(&self.root, &i.bundle);
        blocking(move || bundles::verdict(&dir)).await.map(Json)
    }

    /// Verify a bundle against its manifest (`bakeoff verify --json`, `bakeoff.verify/1`):
    /// every file re-hashed, the root digest, each problem with its kind and file.
    #[tool]
    async fn verify(
        &self,
        Parameters(i): Parameters<VerifyInput>,
    ) -> Result<Json<VerifyDoc>, String> {
        let dir = camp::resolve_input(&self.root, &i.bundle);
        blocking(move || bundles::verify(&dir, i.digest.as_deref()))
            .await
            .map(Json)
    }

    /// Compare two verified bundles' shared arms (`bakeoff compare --json`), with an optional
    /// regression limit in percent.
    #[tool]
    async fn compare(
        &self,
        Parameters(i): Parameters<CompareInput>,
    ) -> Result<Json<CompareOutput>, String> {
        let a = camp::resolve_input(&self.root, &i.a);
        let b = camp::resolve_input(&self.root, &i.b);
        blocking(move || bundles::compare(&a, &b, i.force, i.fail_on_regression))
            .await
            .map(Json)
    }

    /// Measure an endpoint with a bounded closed loop (`bakeoff bench`): at most 200 requests,
    /// 16 in flight, 8192 prompt tokens, 1024 max tokens, 300 s per request.
    #[tool]
    async fn bench(
        &self,
        Parameters(i): Parameters<BenchInput>,
    ) -> Result<Json<BenchOutput>, String> {
        endpoint::bench_spec(&i)?;
        blocking(move || {
            let rt = crate::load::pace::client_runtime()
                .map_err(|e| format!("cannot start the async runtime: {e}"))?;
            rt.block_on(endpoint::bench(&i))
        })
        .await
        .map(Json)
    }

    /// Run pass/fail gates against an endpoint (`bakeoff gate --json`, `bakeoff.gate/1`):
    /// smoke, json, streaming, tools (at most 20 per variant); artifacts under the root.
    #[tool]
    async fn gate(&self, Parameters(i): Parameters<GateInput>) -> Result<Json<GateDoc>, String> {
        let root = self.root.clone();
        blocking(move || {
            let rt = crate::load::pace::client_runtime()
                .map_err(|e| format!("cannot start the async runtime: {e}"))?;
            rt.block_on(endpoint::gate(&root, &i))
        })
        .await
        .map(Json)
    }
}

impl Server {
    fn start_run(
        &self,
        args: Vec<std::ffi::OsString>,
        bundle: std::path::PathBuf,
        resumed: bool,
    ) -> Result<RunStatus, String> {
        if let Some(r) = self.runs.running_on(&bundle) {
            return Err(format!(
                "{}: run {r} of this server is still going on it; `watch` or `stop` it first",
                bundle.display()
            ));
        }
        self.runs.start(
            args,
            bundle,
            resumed,
            &self.root.dir().join(super::RUNS_DIR),
        )
    }
}
