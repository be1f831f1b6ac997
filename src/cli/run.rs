//! `bakeoff run FILE`: run a campaign (or print its plan with `--dry-run`, or continue an
//! interrupted bundle with `--resume DIR`).
//!
//! Exit codes: 0 complete; 1 incomplete (restoration failed, an error); 2 the campaign file or a
//! precondition was refused before anything started; 130 interrupted by SIGINT/SIGTERM (the
//! incumbent was restored and the bundle written first).

/// Writes a line to stderr, ignoring errors: a closed stderr (the parent went away) must never
/// stop the campaign before the incumbent is restored.
macro_rules! say {
    ($($t:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stderr(), $($t)*);
    }};
}

use crate::campaign::checkpoint::Checkpoint;
use crate::campaign::orchestrator::{self, Options, PortState};
use crate::campaign::{self, Campaign, Mask};
use anyhow::{Context, Result};
use clap::Args;
use std::io::IsTerminal;
use std::path::{Path, PathBuf};

#[derive(Args, Debug, Clone)]
pub struct RunArgs {
    /// The campaign file (TOML; see docs/campaign.md). With --resume, optional: the bundle's copy
    /// is used (and FILE, when given, must be the same file).
    pub file: Option<PathBuf>,
    /// The bundle directory (default: the campaign's `output`).
    #[arg(long)]
    pub output: Option<PathBuf>,
    /// Load, check and print the plan; start nothing and send no request.
    #[arg(long)]
    pub dry_run: bool,
    /// Continue an interrupted campaign in this bundle: finished steps are not run again.
    #[arg(long, conflicts_with = "output")]
    pub resume: Option<PathBuf>,
    /// Plain progress lines instead of a progress bar.
    #[arg(long)]
    pub no_progress: bool,
}

fn refuse(msg: &str) -> ! {
    say!("error: {msg}");
    std::process::exit(2)
}

fn load(path: &Path) -> Campaign {
    match campaign::load(path) {
        Ok(c) => c,
        Err(e) => {
            for d in &e.diagnostics {
                say!("{d}");
            }
            say!(
                "error: the campaign file has {} problem(s); nothing was started",
                e.diagnostics.len()
            );
            std::process::exit(2)
        }
    }
}

/// The campaign of a bundle being resumed: its copy, anchored at the original file's directory.
fn load_resume(dir: &Path, file: Option<&Path>) -> Campaign {
    let ck = Checkpoint::load(dir).unwrap_or_else(|e| refuse(&format!("{e:#}")));
    let copy = dir.join("campaign.toml");
    let text = std::fs::read_to_string(&copy)
        .unwrap_or_else(|e| refuse(&format!("cannot read {}: {e}", copy.display())));
    let c = match campaign::parse(&text, &ck.campaign_file) {
        Ok(c) => c,
        Err(e) => {
            for d in &e.diagnostics {
                say!("{d}");
            }
            refuse("the bundle's campaign.toml copy no longer loads");
        }
    };
    if c.source.sha256 != ck.campaign_sha256 {
        refuse("the bundle's campaign.toml differs from the one the run started with");
    }
    if let Some(f) = file {
        let other = load(f);
        if other.source.sha256 != c.source.sha256 {
            refuse(&format!(
                "{} is not the campaign file this bundle was started with; resume without FILE or give the same file",
                f.display()
            ));
        }
    }
    c
}

pub fn run(args: RunArgs) -> Result<()> {
    crate::clock::raise_nofile_limit();
    let (c, bundle, resume) = match (&args.resume, &args.file) {
        (Some(dir), f) => (load_resume(dir, f.as_deref()), dir.clone(), true),
        (None, Some(f)) => {
            let c = load(f);
            let out = args
                .output
                .clone()
                .unwrap_or_else(|| c.campaign.output.clone());
            (c, out, false)
        }
        (None, None) => refuse("give a campaign file: bakeoff run FILE (or --resume DIR)"),
    };
    if args.dry_run {
        let mut c = c;
        if let Some(o) = &args.output {
            c.campaign.output = o.clone();
        }
        print!("{}", campaign::plan(&c).render(&Mask::from_process_env(&c)));
        return Ok(());
    }
    let bundle = absolute(&bundle);
    let port = orchestrator::preconditions(&c, &bundle, resume).unwrap_or_else(|e| refuse(&e));
    match &port {
        PortState::Free => say!(
            "bakeoff run: lane {}:{} is free (no incumbent serving)",
            c.lane.host,
            c.lane.port
        ),
        PortState::Incumbent(l) => say!(
            "bakeoff run: incumbent `{}` serves the lane (pid {})",
            c.incumbent().id,
            l.pid
        ),
    }
    say!(
        "bakeoff run: campaign {} → {}{}",
        c.campaign.id,
        bundle.display(),
        if resume { " (resuming)" } else { "" }
    );
    let rt = crate::load::pace::client_runtime().context("cannot start the async runtime")?;
    let progress_bar = !args.no_progress && std::io::stderr().is_terminal();
    let outcome = rt.block_on(async {
        let (tx, rx) = tokio::sync::watch::channel::<Option<&'static str>>(None);
        use tokio::signal::unix::{signal, SignalKind};
        let mut int = signal(SignalKind::interrupt()).context("cannot install a SIGINT handler")?;
        let mut term =
            signal(SignalKind::terminate()).context("cannot install a SIGTERM handler")?;
        tokio::spawn(async move {
            loop {
                let name = tokio::select! {
                    _ = int.recv() => "SIGINT",
                    _ = term.recv() => "SIGTERM",
                };
                if tx.borrow().is_none() {
                    say!("bakeoff run: {name}: stopping the current step, then restoring the incumbent ...");
                    let _ = tx.send(Some(name));
                } else {
                    say!("bakeoff run: {name} again: still restoring the incumbent; please wait");
                }
            }
        });
        orchestrator::run(
            c,
            Options {
                bundle: bundle.clone(),
                resume,
                progress_bar,
                cancel: rx,
            },
        )
        .await
    })?;
    let r = &outcome.result;
    for a in &r.arms {
        let f = a
            .failure
            .as_ref()
            .map(|f| format!(" — {}: {}", f.class, f.detail))
            .unwrap_or_default();
        say!("  arm {:<24} {:?}{f}", a.id, a.status);
    }
    if let Some(rest) = &r.restoration {
        say!("  restoration {}: {}", rest.status, rest.detail);
    }
    let t = &outcome.timing;
    say!(
        "bakeoff run: {:.1} s total; engines starting/stopping {:.1} s, measurement {:.1} s, bakeoff overhead {:.2} s ({:.2}%)",
        t.total_ms / 1e3,
        t.engine_lifecycle_ms / 1e3,
        t.measurement_ms / 1e3,
        t.overhead_ms / 1e3,
        t.overhead_fraction * 100.0
    );
    say!(
        "bakeoff run: bundle {} ({})",
        bundle.display(),
        if outcome.complete {
            "complete".to_string()
        } else {
            format!(
                "incomplete: {}",
                r.incomplete_reason.as_deref().unwrap_or("")
            )
        }
    );
    drop(rt);
    if outcome.interrupted.is_some() {
        std::process::exit(130);
    }
    if !outcome.complete {
        std::process::exit(1);
    }
    Ok(())
}

fn absolute(p: &Path) -> PathBuf {
    if p.is_absolute() {
        p.to_path_buf()
    } else {
        std::env::current_dir()
            .map(|d| d.join(p))
            .unwrap_or_else(|_| p.to_path_buf())
    }
}
