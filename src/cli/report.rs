//! `bakeoff report DIR`: re-renders the verdict of an existing bundle.

use clap::Args;
use std::path::PathBuf;

#[derive(Args, Debug)]
pub struct ReportArgs {
    /// The evidence bundle (the directory holding campaign-result.json).
    pub dir: PathBuf,
}

pub fn run(a: ReportArgs) -> anyhow::Result<()> {
    let v = crate::report::render_all(&a.dir)?;
    for f in [
        crate::report::SUMMARY_FILE,
        crate::report::PUBLICATION_FILE,
        crate::report::HTML_FILE,
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
    Ok(())
}
