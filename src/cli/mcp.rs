//! `bakeoff mcp --root DIR`: the MCP server on stdin/stdout (`crate::mcp`, docs/agents.md).
//! stdout carries the protocol only; what the server and its runs say goes to stderr.

use anyhow::{Context, Result};
use clap::Args;
use std::path::PathBuf;

#[derive(Args, Debug)]
pub struct McpArgs {
    /// The one folder the server writes under: every bundle and gate artifact folder a tool
    /// is given must resolve inside it (symlinks followed), and bundles under it are the
    /// server's resources. Relative paths in tool inputs are taken from it.
    #[arg(long, value_name = "DIR")]
    pub root: PathBuf,
}

pub fn run(a: McpArgs) -> Result<()> {
    let root = super::absolute(&a.root);
    // Checked before the session opens: a bad root is a refusal (exit 2).
    super::refused(crate::mcp::paths::Root::new(&root))?;
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    say!(
        "bakeoff mcp: serving MCP on stdio; writes only under {}",
        root.display()
    );
    rt.block_on(crate::mcp::serve(&root))
}
