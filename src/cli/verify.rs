//! `bakeoff verify DIR`: re-hash an evidence bundle against its manifest.

use crate::evidence::manifest;
use anyhow::{bail, Result};
use clap::Args;
use std::path::PathBuf;

#[derive(Args, Debug)]
pub struct VerifyArgs {
    /// The evidence bundle directory (it holds artifact-manifest.json).
    pub dir: PathBuf,
}

pub fn run(args: VerifyArgs) -> Result<()> {
    let (m, problems) = manifest::verify(&args.dir)?;
    if problems.is_empty() {
        println!(
            "ok: {} files in {} match {} (sha256)",
            m.files.len(),
            args.dir.display(),
            manifest::MANIFEST
        );
        return Ok(());
    }
    for p in &problems {
        println!("{p}");
    }
    bail!(
        "{} of the bundle's files do not match its manifest",
        problems.len()
    )
}
