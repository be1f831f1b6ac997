//! `bakeoff report DIR [--force]`: re-renders the verdict of an existing bundle, after verifying
//! it and cross-checking its summary against the step files.

use clap::Args;
use std::path::PathBuf;

#[derive(Args, Debug)]
pub struct ReportArgs {
    /// The evidence bundle (the directory holding campaign-result.json).
    pub dir: PathBuf,
    /// Render even when the bundle does not verify or campaign-result.json disagrees with the
    /// step files: the step files' figures decide and every problem is written into the
    /// documents as a limitation.
    #[arg(long)]
    pub force: bool,
}

pub fn run(a: ReportArgs) -> anyhow::Result<()> {
    if crate::promote::is_promotion(&a.dir) {
        return super::promote::report(&a.dir, a.force);
    }
    let v = if a.force {
        crate::report::render_all_forced(&a.dir)?
    } else {
        crate::report::render_all(&a.dir)?
    };
    for f in [
        crate::report::SUMMARY_FILE,
        crate::report::PUBLICATION_FILE,
        crate::report::HTML_FILE,
        crate::report::CSV_FILE,
    ] {
        println!("wrote {}", a.dir.join(f).display());
    }
    println!(
        "winner: {}; promotion authorized: {}; {}",
        v.winner.as_deref().unwrap_or("none"),
        v.promotion_authorized,
        v.reason
    );
    println!("next gate: {}", v.next_gate);
    if a.force {
        for l in v.limitations.iter().filter(|l| l.contains("--force")) {
            println!("limitation: {l}");
        }
    }
    let m = crate::evidence::manifest::read(&a.dir)?;
    println!(
        "root digest: {} (keep it elsewhere; `bakeoff verify {} --digest HEX` checks the manifest is this one)",
        m.root_sha256.as_deref().unwrap_or(""),
        a.dir.display()
    );
    Ok(())
}
