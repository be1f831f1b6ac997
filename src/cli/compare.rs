//! `bakeoff compare DIR1 DIR2`: the arms two campaigns share, refusing unlike workloads.

use clap::Args;
use std::path::PathBuf;

#[derive(Args, Debug)]
pub struct CompareArgs {
    /// The first bundle (A).
    pub a: PathBuf,
    /// The second bundle (B).
    pub b: PathBuf,
    /// Compare even when the workloads differ (each difference is printed as a warning).
    #[arg(long)]
    pub force: bool,
}

pub fn run(a: CompareArgs) -> anyhow::Result<()> {
    let x = crate::report::read_result(&a.a)?;
    let y = crate::report::read_result(&a.b)?;
    let c = crate::report::compare::compare(&x, &y, a.force)?;
    print!("{}", crate::report::compare::render(&c));
    Ok(())
}
