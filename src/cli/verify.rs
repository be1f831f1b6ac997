//! `bakeoff verify DIR [--digest HEX]`: re-hash an evidence bundle against its manifest and check
//! the manifest's own root digest (and the one the person kept, when given), and that
//! `arm-stats.csv` says what the result and step files say.

use crate::evidence::manifest;
use anyhow::{bail, Result};
use clap::Args;
use std::path::PathBuf;

#[derive(Args, Debug)]
pub struct VerifyArgs {
    /// The evidence bundle directory (it holds artifact-manifest.json).
    pub dir: PathBuf,
    /// The root digest printed at the end of the run (`bakeoff run` and `bakeoff report` print
    /// it): the manifest must be that one, not a rewritten copy.
    #[arg(long, value_name = "HEX")]
    pub digest: Option<String>,
    /// Print one JSON document on stdout instead of the lines (`bakeoff.verify/1`,
    /// docs/agents.md): ok, the files checked, each problem with its kind and file.
    #[arg(long)]
    pub json: bool,
}

pub fn run(args: VerifyArgs) -> Result<()> {
    let out = super::JsonOut::new("verify", args.json);
    out.end(verify(&args, &out))
}

fn verify(args: &VerifyArgs, out: &super::JsonOut) -> Result<()> {
    let (m, mut problems) = manifest::verify(&args.dir, args.digest.as_deref())?;
    // The CSV's cells against the result and step files it is written from (a cell edited and
    // the manifest sealed again).
    problems.extend(crate::report::csv::check(&args.dir));
    if out.on() {
        let doc = crate::output::verify::VerifyDoc::new(
            super::absolute(&args.dir).display().to_string(),
            &m,
            &problems,
            args.digest.as_deref(),
        );
        out.emit(&doc)?;
        return match doc.exit_code {
            0 => Ok(()),
            code => Err(super::Exit::with(
                code,
                format!(
                    "the bundle {} does not verify: {} problem(s)",
                    args.dir.display(),
                    problems.len()
                ),
            )
            .into()),
        };
    }
    if problems.is_empty() {
        println!(
            "ok: {} files in {} match {} (sha256); root digest {}{}",
            m.files.len(),
            args.dir.display(),
            manifest::MANIFEST,
            m.root_sha256.as_deref().unwrap_or(""),
            if args.digest.is_some() {
                " (the one given)"
            } else {
                ""
            }
        );
        return Ok(());
    }
    for p in &problems {
        println!("{p}");
    }
    let mut files: Vec<&str> = problems.iter().map(|p| p.file()).collect();
    files.dedup();
    bail!(
        "the bundle {} does not verify: {} problem(s), in {}",
        args.dir.display(),
        problems.len(),
        files.join(", ")
    )
}
