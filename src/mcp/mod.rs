//! `bakeoff mcp`: a Model Context Protocol server on stdio (the official Rust SDK, `rmcp`) over
//! the library the commands use: plan, start, watch, stop and resume a campaign, read its
//! verdict, verify and compare bundles, bench and gate an endpoint with bounded sizes; bundles
//! under the root are resources (docs/agents.md).
//!
//! `paths.rs` the one folder the server writes under; `campaign.rs` the campaign inputs and the
//! plan; `runs.rs` the runs it started (child `bakeoff run` processes, stopped by SIGINT);
//! `bundles.rs` verdict, verify, compare; `endpoint.rs` bench and gate with their bounds;
//! `resources.rs` bundles as resources; `tools.rs` the tools' typed wrappers.
//!
//! Security: no tool runs a shell string (a run is an argv of this same executable); every
//! path written to, and every resource read, resolves under the root; a secret is only ever an
//! environment variable's name.

pub mod bundles;
pub mod campaign;
pub mod endpoint;
pub mod paths;
pub mod resources;
pub mod runs;
mod tools;

use paths::Root;
use rmcp::handler::server::router::tool::ToolRouter;
use rmcp::model::{
    Implementation, ListResourceTemplatesResult, ListResourcesResult, PaginatedRequestParams,
    ReadResourceRequestParams, ReadResourceResponse, ReadResourceResult, ServerCapabilities,
    ServerConfig,
};
use rmcp::service::RequestContext;
use rmcp::{tool_handler, ErrorData, RoleServer, ServerHandler, ServiceExt};
use runs::Runs;
use std::path::Path;
use std::sync::Arc;

#[derive(Clone)]
pub struct Server {
    root: Root,
    runs: Arc<Runs>,
    tool_router: ToolRouter<Server>,
}

impl Server {
    pub fn new(root: Root, runs: Arc<Runs>) -> Server {
        Server {
            root,
            runs,
            tool_router: Server::tool_router(),
        }
    }
}

const INSTRUCTIONS: &str = "bakeoff runs evidence-grade bake-offs of LLM serving configurations. \
Typical session: plan (check a campaign file) → start (a run handle) → watch (wait_s to block) → \
verdict → verify. stop interrupts a run as Ctrl-C does (the incumbent is restored); resume goes on. \
Paths written to must be under the server's --root; secrets are environment variable names only.";

#[tool_handler(router = self.tool_router)]
impl ServerHandler for Server {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(
            ServerCapabilities::builder()
                .enable_tools()
                .enable_resources()
                .build(),
        )
        .with_server_info(Implementation::new("bakeoff", env!("CARGO_PKG_VERSION")))
        .with_instructions(INSTRUCTIONS)
    }

    async fn list_resources(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, ErrorData> {
        let root = self.root.clone();
        let items = tokio::task::spawn_blocking(move || resources::list(&root))
            .await
            .map_err(|e| ErrorData::internal_error(e.to_string(), None))?;
        Ok(ListResourcesResult::with_all_items(items))
    }

    async fn list_resource_templates(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListResourceTemplatesResult, ErrorData> {
        Ok(ListResourceTemplatesResult::with_all_items(
            resources::templates(),
        ))
    }

    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, ErrorData> {
        let root = self.root.clone();
        let uri = request.uri.clone();
        let c = tokio::task::spawn_blocking(move || resources::read(&root, &uri))
            .await
            .map_err(|e| ErrorData::internal_error(e.to_string(), None))?
            .map_err(|e| ErrorData::resource_not_found(e, None))?;
        Ok(ReadResourceResult::new(vec![c]).into())
    }
}

/// The folder under the root that holds each run's stderr and `--json` document.
pub const RUNS_DIR: &str = ".bakeoff-mcp";

/// Serves MCP on stdin/stdout until the client closes it. A run still going then goes on by
/// itself to its end (its incumbent restored, its bundle sealed), as `bakeoff run` would.
pub async fn serve(root: &Path) -> anyhow::Result<()> {
    let root = Root::new(root)?;
    let service = Server::new(root, Arc::new(Runs::default()))
        .serve(rmcp::transport::stdio())
        .await
        .map_err(|e| anyhow::anyhow!("the MCP session did not start: {e}"))?;
    service
        .waiting()
        .await
        .map_err(|e| anyhow::anyhow!("the MCP session ended with an error: {e}"))?;
    Ok(())
}
