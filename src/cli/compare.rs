//! `bakeoff compare DIR1 DIR2`: the arms two campaigns share, refusing unverified bundles and
//! unlike workloads; labels, JSON output and a regression gate for pipelines.

use clap::Args;
use std::path::PathBuf;

#[derive(Args, Debug)]
pub struct CompareArgs {
    /// The first bundle (A, the baseline).
    pub a: PathBuf,
    /// The second bundle (B, compared against A).
    pub b: PathBuf,
    /// Compare even when a bundle does not verify or the workloads differ (each problem and
    /// difference is printed as a warning; figures then come from the step files).
    #[arg(long)]
    pub force: bool,
    /// A's label (default: its campaign id and run time).
    #[arg(long, value_name = "TEXT")]
    pub label_a: Option<String>,
    /// B's label (default: its campaign id and run time).
    #[arg(long, value_name = "TEXT")]
    pub label_b: Option<String>,
    /// Print the comparison as JSON instead of a table.
    #[arg(long)]
    pub json: bool,
    /// Exit 1 when any shared metric (warm TTFT, decode, E2E medians) of B is worse than A's by
    /// more than PCT percent and the medians' intervals do not overlap (order-statistic CIs, or
    /// ranges below 6 requests; a change inside them is printed, not counted).
    #[arg(long, value_name = "PCT")]
    pub fail_on_regression: Option<f64>,
}

pub fn run(a: CompareArgs) -> anyhow::Result<()> {
    if let Some(p) = a.fail_on_regression {
        if !p.is_finite() || p < 0.0 {
            return Err(super::Exit::with(
                crate::output::exit::REFUSED,
                format!("--fail-on-regression {p}: give a percentage ≥ 0, e.g. 10"),
            )
            .into());
        }
    }
    // Each bundle is verified and its summary cross-checked against its step files first.
    let x = crate::report::load_checked(&a.a, a.force)?;
    let y = crate::report::load_checked(&a.b, a.force)?;
    let mut c = crate::report::compare::compare(&x.result, &y.result, a.force)?;
    if let Some(l) = &a.label_a {
        c.a = l.clone();
    }
    if let Some(l) = &a.label_b {
        c.b = l.clone();
    }
    let regs = a
        .fail_on_regression
        .map(|p| crate::report::compare::regressions(&c, p))
        .unwrap_or_default();
    if a.json {
        let doc = crate::report::compare::ComparisonDoc::full(
            &c,
            &x.notes,
            &y.notes,
            a.fail_on_regression,
        );
        println!("{}", serde_json::to_string_pretty(&doc.to_json())?);
    } else {
        for n in &x.notes {
            println!("warning (A): {n}");
        }
        for n in &y.notes {
            println!("warning (B): {n}");
        }
        for w in crate::report::compare::card_warnings(&c) {
            println!("warning: {w}");
        }
        print!("{}", crate::report::compare::render(&c));
        if let Some(p) = a.fail_on_regression {
            for r in &regs {
                println!(
                    "{}: {} {}: {:.1} → {:.1} ({:.1} % worse, limit {p} %){}",
                    if r.counts() {
                        "regression"
                    } else {
                        "not counted"
                    },
                    r.arm,
                    crate::decide::metric::descriptor(r.metric).field(),
                    r.a_p50,
                    r.b_p50,
                    r.worse_pct,
                    if r.inside_cis {
                        " but inside the medians' intervals".to_string()
                    } else if let Some(w) = &r.within_card_spread {
                        format!(" but {w}: the arm ran on different cards")
                    } else {
                        String::new()
                    }
                );
            }
        }
    }
    let regs: Vec<_> = regs.into_iter().filter(|r| r.counts()).collect();
    if let Some(p) = a.fail_on_regression {
        if !regs.is_empty() {
            return Err(super::Exit::with(
                1,
                format!(
                    "{} metric(s) of B regressed by more than {p} % against A",
                    regs.len()
                ),
            )
            .into());
        }
    }
    Ok(())
}
