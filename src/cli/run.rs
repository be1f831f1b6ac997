//! `bakeoff run FILE`: run a campaign (or print its plan with `--dry-run`, or continue an
//! interrupted bundle with `--resume DIR`).
//!
//! Exit codes: 0 complete; 1 incomplete (restoration failed, an error); 2 the campaign file or a
//! precondition was refused before anything started; 130 interrupted by SIGINT/SIGTERM (the
//! incumbent was restored and the bundle written first).

use crate::campaign::{self, Campaign, Mask};
use crate::output::run::{RestorationPart, RunDoc, TimingPart};
use crate::run::{self as runner, session::Purpose, Note, Notify, Options, PortState};
use anyhow::{Context, Result};
use clap::Args;
use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

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
    /// After the run, add its bundle to this history database (a SQLite file or a postgres://
    /// URL, as `bakeoff history --db`) and print each arm's figures against its own history.
    #[arg(long, value_name = "PATH|URL")]
    pub history: Option<String>,
    /// Run although the lane record names another resident than the declared incumbent
    /// (`bakeoff lane status`); recorded as a limitation.
    #[arg(long)]
    pub accept_lane_drift: bool,
    /// Print one JSON document on stdout at the end (`bakeoff.run/1`, docs/agents.md): the
    /// bundle, complete or why not, the verdict, each arm, the restoration, the root digest.
    /// Progress stays on stderr.
    #[arg(long, conflicts_with = "dry_run")]
    pub json: bool,
}

/// Refused before anything started: exit 2 with `msg`.
pub(super) fn refuse(msg: impl Into<String>) -> anyhow::Error {
    super::Exit::with(2, msg).into()
}

fn load(path: &Path) -> Result<Campaign> {
    match campaign::load(path) {
        Ok(c) => {
            for w in &c.warnings {
                say!("warning: {w}");
            }
            Ok(c)
        }
        Err(e) => {
            for d in &e.diagnostics {
                say!("{d}");
            }
            Err(super::Exit::with_details(
                2,
                format!(
                    "the campaign file has {} problem(s); nothing was started",
                    e.diagnostics.len()
                ),
                e.diagnostics.iter().map(|d| d.to_string()).collect(),
            )
            .into())
        }
    }
}

/// The campaign of a bundle being resumed: its copy, its paths resolved against the original
/// campaign file's directory (from any working directory, and from a moved or copied bundle).
fn load_resume(dir: &Path, file: Option<&Path>) -> Result<Campaign> {
    let b = super::bundle_campaign_lanes(dir, "bakeoff run --resume")?;
    if let Some(mut why) = b.unresumable() {
        let last = why.pop().unwrap_or_default();
        for l in &why {
            say!("bakeoff run: {l}");
        }
        return Err(refuse(last));
    }
    if let Some(f) = file {
        let other = load(f)?;
        if other.source.sha256 != b.campaign.source.sha256 {
            return Err(refuse(format!(
                "{} is not the campaign file this bundle was started with; resume without FILE or give the same file",
                f.display()
            )));
        }
    }
    Ok(b.campaign)
}

pub fn run(args: RunArgs) -> Result<()> {
    let out = super::JsonOut::new("run", args.json);
    out.end(run_with(args, &out))
}

fn run_with(args: RunArgs, out: &super::JsonOut) -> Result<()> {
    crate::clock::raise_nofile_limit();
    let Some((c, bundle, resume)) = what_to_run(&args, out)? else {
        return Ok(());
    };
    if c.multi_lane() {
        let ask = super::run_fleet::Ask {
            history: args.history.clone(),
            accept_lane_drift: args.accept_lane_drift,
            resume,
            progress: printer(false),
            ended,
        };
        let doc = super::run_fleet::run(ask, c, bundle)?;
        return finish(out, doc);
    }
    let purpose = if resume {
        Purpose::Resume
    } else {
        Purpose::Run
    };
    // One `[[lanes]]` table on a Slurm node: its address is the node's NodeAddr, asked of Slurm
    // now, as a multi-lane run asks it (nothing to do for any other lane).
    let c = runner::slurm_lanes::resolve(c).map_err(refuse)?;
    let session = match runner::session::begin_with(c, bundle, purpose, args.accept_lane_drift) {
        Ok(s) => s,
        Err(r) => {
            if let Some(rec) = &r.recovery {
                recovery_lines(rec);
            }
            return Err(refuse(r.message));
        }
    };
    started(&session, resume);
    let rt = crate::load::pace::client_runtime().context("cannot start the async runtime")?;
    let progress_bar = !args.no_progress && std::io::stderr().is_terminal();
    let outcome = rt.block_on(execute(&session, resume, progress_bar))?;
    let history = args
        .history
        .clone()
        .or_else(|| session.plan.campaign.history_db());
    let mut doc = ended(
        &session.bundle,
        &outcome,
        history.as_deref(),
        &session.bundle,
    );
    doc.resumed = resume;
    drop(rt);
    drop(session);
    finish(out, doc)
}

/// The document printed (with `--json`) and the run's exit code: 130 interrupted, 1
/// incomplete, 0 complete.
fn finish(out: &super::JsonOut, doc: RunDoc) -> Result<()> {
    out.emit(&doc)?;
    match doc.exit_code {
        0 => Ok(()),
        code => Err(super::Exit::silent(code).into()),
    }
}

/// The campaign, its bundle (absolute) and whether it is a resume; None when there is nothing to run (a
/// dry run printed its plan, or the bundle to resume is already complete).
fn what_to_run(args: &RunArgs, out: &super::JsonOut) -> Result<Option<(Campaign, PathBuf, bool)>> {
    let (mut c, bundle, resume) = match (&args.resume, &args.file) {
        (Some(dir), f) => (load_resume(dir, f.as_deref())?, dir.clone(), true),
        (None, Some(f)) => {
            let c = load(f)?;
            let out = args
                .output
                .clone()
                .unwrap_or_else(|| c.campaign.output.clone());
            (c, out, false)
        }
        (None, None) => {
            return Err(refuse(
                "give a campaign file: bakeoff run FILE (or --resume DIR)",
            ))
        }
    };
    if args.dry_run {
        if let Some(o) = &args.output {
            c.campaign.output = o.clone();
        }
        print!("{}", campaign::plan(&c).render(&Mask::from_process_env(&c)));
        return Ok(None);
    }
    // Its campaign loads from any directory (the bundle records absolute paths), and a file
    // that changed is refused above, even for a bundle with nothing left to run.
    let bundle = super::absolute(&bundle);
    if resume && already_complete(&bundle) {
        say!(
            "bakeoff run: bundle {} is already complete; nothing to resume, the lane was not touched",
            bundle.display()
        );
        if out.on() {
            out.emit(&complete_doc(&bundle)?)?;
        }
        return Ok(None);
    }
    Ok(Some((c, bundle, resume)))
}

/// What the session found before the run touches the lane.
fn started(session: &runner::session::Session, resume: bool) {
    if let Some(n) = session.lock.note() {
        say!("bakeoff run: {n}");
    }
    if let Some(rec) = &session.recovery {
        recovery_lines(rec);
    }
    let c = &session.plan.campaign;
    match &session.port {
        Some(PortState::Free) => say!(
            "bakeoff run: lane {}:{} is free (no incumbent serving)",
            c.lane.host,
            c.lane.port
        ),
        Some(PortState::Incumbent(l)) => say!(
            "bakeoff run: incumbent `{}` serves the lane (pid {})",
            c.incumbent().id,
            l.pid
        ),
        Some(PortState::IncumbentJob(j)) => say!(
            "bakeoff run: incumbent `{}` serves the lane (Slurm {j})",
            c.incumbent().id
        ),
        None => {}
    }
    say!(
        "bakeoff run: campaign {} → {}{}",
        c.campaign.id,
        session.bundle.display(),
        if resume { " (resuming)" } else { "" }
    );
}

/// Runs the session's plan with SIGINT/SIGTERM turned into a cancel (the runner stops the
/// current step and restores the incumbent; a second signal only says to wait).
async fn execute(
    session: &runner::session::Session,
    resume: bool,
    progress_bar: bool,
) -> Result<runner::Outcome> {
    let (tx, rx) = tokio::sync::watch::channel::<Option<&'static str>>(None);
    super::signals::cancel_on_signals(tx, "run", "stopping the current step")?;
    runner::run(
        session.plan.clone(),
        Options {
            bundle: session.bundle.clone(),
            resume,
            notify: printer(progress_bar),
            cancel: rx,
            notes: session.notes(),
            recovery: session.recovery.clone(),
            logs_beside: None,
            lane_probe: None,
        },
    )
    .await
}

/// The run's last words: the verdict documents written, each arm, the restoration (and the
/// restored incumbent's pid, said only here; `restored_in`: the folder holding
/// `restoration-launch.json`, the bundle or its incumbent lane's), the verdict, the root
/// digest, the arms against their history (with `--history` or `[history] db`), the time, the
/// bundle.
pub(super) fn ended(
    bundle: &Path,
    outcome: &runner::Outcome,
    history: Option<&str>,
    restored_in: &Path,
) -> RunDoc {
    // With a history store, this run's figures against its own history go into the bundle
    // first (history-context.json, history-trend.html): the verdict rendered next lists them
    // as limitations and links the trend; its ranking is decided without them.
    let context = history.map(|db| super::history::before_verdict(db, bundle));
    // The verdict from the bundle alone, as `bakeoff report DIR` writes it (decision summary,
    // publication summary, report.html; the manifest is rewritten to cover them).
    let rendered = crate::report::render_all(bundle).map_err(|e| {
        let why = format!(
            "the verdict could not be written ({e:#}); run `bakeoff report {}`",
            bundle.display()
        );
        say!("bakeoff run: {why}");
        why
    });
    let verdict = rendered.as_ref().ok();
    let r = &outcome.result;
    let mut doc = RunDoc::new(
        bundle.display().to_string(),
        r,
        rendered.as_ref().map_err(|e| e.clone()),
        outcome.interrupted.clone(),
    );
    let lane_of = |id: &str| {
        r.lanes
            .iter()
            .find(|l| l.arms.iter().any(|a| a == id))
            .map(|l| format!(" on lane {}", l.id))
            .unwrap_or_default()
    };
    for a in &r.arms {
        let f = a
            .failure
            .as_ref()
            .map(|f| format!(" — {}: {}", f.class, f.detail))
            .unwrap_or_default();
        say!("  arm {:<24} {:?}{}{f}", a.id, a.status, lane_of(&a.id));
    }
    if let Some(rest) = &r.restoration {
        say!("  restoration {}: {}", rest.status, rest.detail);
        // The pid goes stale when the process stops: it is said here, never in the documents.
        use crate::evidence::RestorationStatus as R;
        if matches!(rest.status, R::Passed | R::Unproven) {
            if let Some(p) = restored_pid(restored_in) {
                let stop = crate::output::run::stop_command(p);
                say!("  the restored incumbent keeps serving as pid {p} (its own process group): stop it with `{stop}`");
                doc.restoration = Some(RestorationPart::new(rest, Some(p)));
            }
        }
    }
    if let Some(v) = verdict {
        for line in verdict_lines(v, r) {
            say!("{line}");
        }
    }
    if let Ok(m) = crate::evidence::manifest::read(bundle) {
        say!(
            "bakeoff run: root digest {} (keep it elsewhere: `bakeoff verify {} --digest HEX`)",
            m.root_sha256.as_deref().unwrap_or(""),
            bundle.display()
        );
        doc.root_digest = m.root_sha256;
    }
    // The sealed bundle (its final digest) goes into the history, then what it said is printed.
    if let (Some(db), Some(context)) = (history, context) {
        for line in super::history::after_run(db, bundle, outcome.complete, context) {
            say!("{line}");
            doc.history.push(line);
        }
    }
    let t = &outcome.timing;
    doc.timing = Some(TimingPart {
        total_s: t.total_ms / 1e3,
        engine_lifecycle_s: t.engine_lifecycle_ms / 1e3,
        measurement_s: t.measurement_ms / 1e3,
        overhead_s: t.overhead_ms / 1e3,
        overhead_fraction: t.overhead_fraction,
    });
    let summed = if r.lanes.is_empty() {
        String::new()
    } else {
        format!(" (each summed over the {} lanes)", r.lanes.len())
    };
    say!(
        "bakeoff run: {:.1} s total; engines starting/stopping {:.1} s, measurement {:.1} s, bakeoff overhead {:.2} s ({:.2}%){summed}",
        t.total_ms / 1e3,
        t.engine_lifecycle_ms / 1e3,
        t.measurement_ms / 1e3,
        t.overhead_ms / 1e3,
        t.overhead_fraction * 100.0
    );
    if let Some(s) = r.schedule_timing.last().filter(|_| !r.lanes.is_empty()) {
        say!(
            "bakeoff run: some lane busy {:.1} s of {:.1} s; no lane busy {:.2} s ({:.2}%: taking the lanes, the merge, any gap)",
            s.busy_ms / 1e3,
            s.wall_ms / 1e3,
            s.no_lane_busy_ms / 1e3,
            s.no_lane_busy_fraction * 100.0
        );
    }
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
    doc
}

/// `--resume --json` of a bundle that is already complete: its result, verdict and digest as
/// they stand (read, nothing rewritten).
fn complete_doc(bundle: &Path) -> Result<RunDoc> {
    let b = crate::report::load_checked(bundle, false)?;
    let v = crate::report::verdict(&b);
    let mut doc = RunDoc::standing(
        bundle.display().to_string(),
        &b.result,
        &v,
        b.manifest.root_sha256.clone(),
    );
    doc.resumed = true;
    doc.nothing_to_run = true;
    Ok(doc)
}

/// What a resume's recovery found of the dead run and did.
fn recovery_lines(r: &runner::recover::Recovery) {
    if r.is_empty() {
        return;
    }
    if let Some(d) = &r.died {
        say!("bakeoff run: {d}");
    }
    for l in &r.lines {
        say!("bakeoff run: recovery: {l}");
    }
}

/// The bundle's `campaign-result.json` says complete (a resume has nothing to do).
fn already_complete(bundle: &Path) -> bool {
    std::fs::read(bundle.join(crate::evidence::bundle::RESULT))
        .ok()
        .and_then(|b| serde_json::from_slice::<crate::evidence::result::CampaignResult>(&b).ok())
        .is_some_and(|r| r.complete)
}

/// Shows the runner's notes: a bar on a terminal, else one line per step with an estimate of the
/// time left (from this invocation's pace).
pub(super) fn printer(bar: bool) -> Notify {
    let t0 = Instant::now();
    let bar = bar.then(|| {
        let b = indicatif::ProgressBar::new(0);
        b.set_style(
            indicatif::ProgressStyle::with_template(
                "{spinner} [{elapsed_precise}] {bar:30} {pos}/{len} steps (eta {eta})  {msg}",
            )
            .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
        );
        b
    });
    Arc::new(move |n: Note<'_>| match (n, &bar) {
        (
            Note::Step {
                done, total, what, ..
            },
            Some(b),
        ) => {
            b.set_length(total as u64);
            b.set_position(done as u64);
            b.set_message(what.to_string());
        }
        (
            Note::Step {
                done,
                total,
                this_run,
                what,
            },
            None,
        ) => {
            let el = t0.elapsed().as_secs_f64();
            let est = if this_run > 0 {
                format!(
                    ", about {:.0} s left",
                    el / this_run as f64 * total.saturating_sub(done) as f64
                )
            } else {
                String::new()
            };
            say!(
                "bakeoff run [{el:>7.1} s] step {}/{total}: {what}{est}",
                (done + 1).min(total)
            );
        }
        (Note::Warning(m), Some(b)) => b.suspend(|| say!("warning: {m}")),
        (Note::Warning(m), None) => say!("warning: {m}"),
        (Note::Finished, Some(b)) => b.finish_and_clear(),
        (Note::Finished, None) => {}
    })
}

/// The pid of the incumbent the restoration started (detached process arms; none for a
/// container or an incumbent that already served), from `restoration-launch.json`.
fn restored_pid(bundle: &Path) -> Option<u64> {
    let b = std::fs::read(bundle.join(crate::evidence::bundle::RESTORATION_LAUNCH)).ok()?;
    let v: serde_json::Value = serde_json::from_slice(&b).ok()?;
    // Only a process the restoration started detached has a pid there (a container's or a
    // Slurm job's launch records none).
    if v["detached"] != true {
        return None;
    }
    v["pid"].as_u64()
}

/// The verdict as the run's last words: winner and reason, promotion, failures.
fn verdict_lines(
    v: &crate::decide::Verdict,
    r: &crate::evidence::result::CampaignResult,
) -> Vec<String> {
    let name = |id: &str| {
        r.arm(id)
            .map(|a| {
                if a.label.trim().is_empty() {
                    a.id.clone()
                } else {
                    a.label.clone()
                }
            })
            .unwrap_or_else(|| id.to_string())
    };
    let mut out = Vec::new();
    match &v.winner {
        Some(w) => out.push(format!("bakeoff run: winner {}: {}", name(w), v.reason)),
        None => out.push(format!("bakeoff run: no winner: {}", v.reason)),
    }
    out.push(format!(
        "bakeoff run: promotion {}; next: {}",
        if v.promotion_authorized {
            "authorized by the policy (not performed: the lane still serves the incumbent)"
        } else {
            "not authorized"
        },
        v.next_gate
    ));
    if v.failures.is_empty() {
        out.push("bakeoff run: failures: none".into());
    } else {
        out.push(format!("bakeoff run: failures: {}", v.failures.len()));
        for f in &v.failures {
            out.push(format!(
                "  {} {}: {}{}",
                f.candidate,
                f.class,
                f.detail,
                f.evidence
                    .as_deref()
                    .map(|e| format!(" ({e})"))
                    .unwrap_or_default()
            ));
        }
    }
    out
}
