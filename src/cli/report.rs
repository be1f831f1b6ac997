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
    /// Print one JSON document on stdout instead of the lines (`bakeoff.report/1`,
    /// docs/agents.md): the documents written, the verdict, the root digest.
    #[arg(long)]
    pub json: bool,
}

pub fn run(a: ReportArgs) -> anyhow::Result<()> {
    let out = super::JsonOut::new("report", a.json);
    out.end(report(&a, &out))
}

fn report(a: &ReportArgs, out: &super::JsonOut) -> anyhow::Result<()> {
    if crate::promote::is_promotion(&a.dir) {
        if out.on() {
            return Err(super::Exit::with(
                2,
                format!(
                    "{} is a promotion folder: `bakeoff report --json` of a promotion is not built yet; run it without --json",
                    a.dir.display()
                ),
            )
            .into());
        }
        return super::promote::report(&a.dir, a.force);
    }
    let v = if a.force {
        crate::report::render_all_forced(&a.dir)?
    } else {
        crate::report::render_all(&a.dir)?
    };
    let written = [
        crate::report::SUMMARY_FILE,
        crate::report::PUBLICATION_FILE,
        crate::report::HTML_FILE,
        crate::report::CSV_FILE,
    ];
    if out.on() {
        let m = crate::evidence::manifest::read(&a.dir)?;
        let dir = super::absolute(&a.dir);
        return out.emit(&crate::output::report::ReportDoc::new(
            dir.display().to_string(),
            &v,
            a.force,
            written
                .iter()
                .map(|f| dir.join(f).display().to_string())
                .collect(),
            m.root_sha256,
        ));
    }
    for f in written {
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
