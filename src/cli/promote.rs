//! `bakeoff promote BUNDLE [--arm ID] [--digest HEX] [--bake DURATION] --dry-run | --confirm`:
//! put a verified verdict's winner in service, bake it, roll back by itself
//! (docs/promotion.md). `bakeoff promote --abort DIR` / `--finish DIR` end a running bake.
//!
//! Exit codes: 0 promoted (the winner serves); 1 rolled back (the incumbent serves again,
//! proven); 2 refused before anything was touched; 4 the rollback failed (CRITICAL: the lane is
//! marked, the restart command printed); 130 a signal ended it (after the rollback).

use crate::evidence::bundle;
use crate::evidence::manifest;
use crate::output::promote::PromoteDoc;
use crate::promote::{self, check, Options, Phase, Source};
use anyhow::{Context, Result};
use clap::Args;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

/// Exit code of a rollback that failed (documented in docs/promotion.md).
pub const ROLLBACK_FAILED: u8 = crate::output::exit::ROLLBACK_FAILED;

#[derive(Args, Debug)]
pub struct PromoteArgs {
    /// The campaign bundle whose verdict names the arm to promote.
    #[arg(required_unless_present_any = ["abort", "finish"])]
    pub bundle: Option<PathBuf>,
    /// The arm to promote (default: the verdict's winner). Another eligible arm needs --confirm.
    #[arg(long)]
    pub arm: Option<String>,
    /// The bundle's root digest as `bakeoff run` printed it: the manifest must be that one.
    #[arg(long, value_name = "HEX")]
    pub digest: Option<String>,
    /// The bake window (`90s`, `10m`, `1h`, or seconds); default `[promotion] bake_s`.
    #[arg(long, value_name = "DURATION")]
    pub bake: Option<String>,
    /// The promotion folder (default: BUNDLE's name with `.promote-ARM` beside it).
    #[arg(long)]
    pub output: Option<PathBuf>,
    /// Check everything and print the whole transaction and its rollback plan; touch nothing.
    #[arg(long, conflicts_with = "confirm")]
    pub dry_run: bool,
    /// A person confirms the promotion (required by a manual policy, or an arm other than the
    /// winner).
    #[arg(long)]
    pub confirm: bool,
    /// End the bake of the promotion running in DIR with a rollback.
    #[arg(long, value_name = "DIR", conflicts_with_all = ["bundle", "finish"])]
    pub abort: Option<PathBuf>,
    /// End the bake of the promotion running in DIR early, keeping the winner.
    #[arg(long, value_name = "DIR", conflicts_with_all = ["bundle", "abort"])]
    pub finish: Option<PathBuf>,
    /// Print one JSON document on stdout at the end (`bakeoff.promote/1`, docs/agents.md): the
    /// phase it ended in and why, the folder and its root digest, a dry run's plan. Progress
    /// stays on stderr.
    #[arg(long)]
    pub json: bool,
}

fn refuse(msg: impl Into<String>) -> anyhow::Error {
    super::Exit::with(2, msg).into()
}

/// `90s`, `10m`, `1h`, `250ms` or plain seconds.
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    let t = s.trim();
    let (num, mul) = if let Some(n) = t.strip_suffix("ms") {
        (n, 0.001)
    } else if let Some(n) = t.strip_suffix('s') {
        (n, 1.0)
    } else if let Some(n) = t.strip_suffix('m') {
        (n, 60.0)
    } else if let Some(n) = t.strip_suffix('h') {
        (n, 3600.0)
    } else {
        (t, 1.0)
    };
    match num.trim().parse::<f64>() {
        Ok(v) if v.is_finite() && v > 0.0 => Ok(Duration::from_secs_f64(v * mul)),
        _ => Err(format!(
            "--bake {s}: not a duration; give e.g. 90s, 10m, 1h or a number of seconds"
        )),
    }
}

pub fn run(a: PromoteArgs) -> Result<()> {
    let out = super::JsonOut::new("promote", a.json);
    out.end(promote(a, &out))
}

fn promote(a: PromoteArgs, json: &super::JsonOut) -> Result<()> {
    if let Some(d) = a.abort.as_deref() {
        return control(d, "abort", json);
    }
    if let Some(d) = a.finish.as_deref() {
        return control(d, "finish", json);
    }
    let dir = super::absolute(a.bundle.as_deref().expect("clap requires BUNDLE"));
    let (source, needs_confirm) = load(&dir, &a)?;
    if !a.dry_run && needs_confirm && !a.confirm {
        return Err(refuse(format!(
            "{}; nothing was touched: pass --confirm to promote (or --dry-run to see the transaction)",
            source.authorization
        )));
    }
    let c = &source.campaign;
    let table = promote::table(c).map_err(refuse)?;
    let bake = match &a.bake {
        Some(b) => parse_duration(b).map_err(refuse)?,
        None => Duration::from_secs_f64(table.bake_s),
    };
    if bake.as_secs_f64() < table.interval_s {
        return Err(refuse(format!(
            "--bake {:.1} s is shorter than one interval ([promotion] interval_s = {}); give a longer bake",
            bake.as_secs_f64(),
            table.interval_s
        )));
    }
    let out = a
        .output
        .clone()
        .map(|o| super::absolute(&o))
        .unwrap_or_else(|| {
            let name = dir
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default();
            dir.with_file_name(format!("{name}.promote-{}", source.arm.id))
        });
    let pid = check::lane_serves_incumbent(c).map_err(refuse)?;
    let (checked, before) = check::rollback(
        c,
        &source.incumbent_evidence(),
        pid,
        &bundle::incumbent_log(&out),
    )
    .map_err(refuse)?;
    let (tx, rx) = tokio::sync::watch::channel::<Option<&'static str>>(None);
    let o = Options {
        out: out.clone(),
        bake,
        table,
        cancel: rx,
        say: Arc::new(|l: &str| say!("bakeoff promote: {l}")),
    };
    let plan = promote::plan_lines(&source, &o, &checked);
    if a.dry_run && json.on() {
        let mut doc = PromoteDoc::new(
            "dry-run",
            out.display().to_string(),
            crate::output::exit::DONE,
            "dry run: nothing was touched".into(),
        );
        doc.arm = Some(source.arm.id.clone());
        doc.plan = plan;
        doc.needs = needs_confirm.then(|| format!("--confirm: {}", source.authorization));
        return json.emit(&doc);
    }
    if a.dry_run {
        for l in &plan {
            println!("{l}");
        }
        if needs_confirm {
            println!(
                "(a real promotion needs --confirm: {})",
                source.authorization
            );
        }
        println!("dry run: nothing was touched");
        return Ok(());
    }
    let lock = promote::txn::lock(
        c,
        &format!("promote {} ({})", source.arm.id, c.campaign.id),
        &out,
    )
    .map_err(refuse)?;
    // Checked again under the lock: a run may have changed the lane in between.
    check::lane_serves_incumbent(c).map_err(refuse)?;
    let rt = crate::load::pace::client_runtime().context("cannot start the async runtime")?;
    let outcome = rt.block_on(async {
        super::signals::cancel_on_signals(tx, "promote", "ending the promotion")?;
        promote::txn::run(&source, &o, plan, before).await
    })?;
    drop(lock);
    let signalled = o.cancel.borrow().is_some();
    let r = ended(&outcome, &out, signalled);
    if json.on() {
        let code = r
            .as_ref()
            .err()
            .and_then(|e| e.downcast_ref::<super::Exit>())
            .map_or(crate::output::exit::DONE, |x| x.code);
        let mut doc = PromoteDoc::new(
            "promote",
            out.display().to_string(),
            code,
            outcome.why.clone(),
        );
        doc.arm = Some(source.arm.id.clone());
        doc.phase = Some(outcome.phase.as_str().to_string());
        doc.root_digest = Some(outcome.root_digest.clone()).filter(|d| !d.is_empty());
        doc.restart = outcome.restart.clone();
        json.emit(&doc)?;
    }
    r
}

/// Verifies the bundle (and the digest), decides its verdict, and picks the arm.
fn load(dir: &Path, a: &PromoteArgs) -> Result<(Source, bool)> {
    let (m, problems) =
        manifest::verify(dir, a.digest.as_deref()).map_err(|e| refuse(format!("{e:#}")))?;
    if !problems.is_empty() {
        let list: Vec<String> = problems.iter().map(|p| p.to_string()).collect();
        return Err(refuse(format!(
            "{} does not verify ({}): nothing is promoted from evidence nobody can vouch for",
            dir.display(),
            list.join("; ")
        )));
    }
    let b = crate::report::load_checked(dir, false).map_err(|e| refuse(format!("{e:#}")))?;
    let v = crate::report::verdict(&b);
    let mut auto = b.policy.clone();
    auto.promotion = crate::evidence::Promotion::Auto;
    let authorized_if_auto = crate::decide::decide(&b.result, &auto).promotion_authorized;
    let bc = super::bundle_campaign_lanes(dir, "bakeoff promote")?;
    for l in &bc.changed {
        say!("bakeoff promote: warning: {l}");
    }
    // A multi-lane bundle: the promotion acts on the lane the incumbent serves, as one lane.
    let (c, home) = if bc.campaign.multi_lane() {
        let (one, home) = promote::lanes::serving(
            dir,
            &bc.campaign,
            &b.result,
            crate::run::slurm_lanes::resolve,
        )
        .map_err(refuse)?;
        (one, Some(home))
    } else {
        (bc.campaign, None)
    };
    let chosen =
        check::choose(&c, &v, &b.result, a.arm.as_deref(), authorized_if_auto).map_err(refuse)?;
    let lanes = home
        .map(|h| promote::lanes::origin(&b.result, &h, &chosen.arm.id))
        .transpose()
        .map_err(refuse)?;
    let measured_in = lanes
        .as_ref()
        .map_or_else(|| dir.to_path_buf(), |l| l.measured_dir(dir));
    let measured = check::winner(&c, &measured_in, &chosen.arm).map_err(refuse)?;
    let table = promote::table(&c).map_err(refuse)?;
    let (canary, bake_checked) =
        check::bake_inputs(&c, &bc.checkpoint, table.canary_every).map_err(refuse)?;
    Ok((
        Source {
            dir: dir.to_path_buf(),
            root_digest: m.root_sha256.unwrap_or_default(),
            campaign: c,
            arm: chosen.arm,
            authorization: chosen.authorization,
            baseline: chosen.baseline,
            measured,
            canary,
            bake_checked,
            lanes,
        },
        chosen.needs_confirm,
    ))
}

/// The last words and the exit code.
fn ended(o: &promote::Outcome, out: &Path, signalled: bool) -> Result<()> {
    say!("bakeoff promote: {}: {}", o.phase.as_str(), o.why);
    say!(
        "bakeoff promote: folder {} (root digest {}; `bakeoff verify {}` checks it)",
        out.display(),
        o.root_digest,
        out.display()
    );
    match o.phase {
        Phase::Promoted => Ok(()),
        Phase::RollbackFailed => {
            say!("bakeoff promote: CRITICAL: the rollback failed; the lane is marked and every run and promote on it is refused until resolved.");
            for c in &o.restart {
                say!("bakeoff promote: start the incumbent by hand: {c}");
            }
            say!(
                "bakeoff promote: then `bakeoff recover {}` proves it serves and clears the mark",
                out.display()
            );
            Err(super::Exit::silent(ROLLBACK_FAILED).into())
        }
        _ if signalled => Err(super::Exit::silent(130).into()),
        _ => Err(super::Exit::silent(1).into()),
    }
}

/// `--abort DIR` / `--finish DIR`: asks the running promotion, and waits until it answered.
fn control(dir: &Path, what: &'static str, json: &super::JsonOut) -> Result<()> {
    let dir = super::absolute(dir);
    let f = promote::record::Folder::open(&dir).map_err(|e| refuse(format!("{e:#}")))?;
    if f.rec.phase != Phase::Baking {
        return Err(refuse(format!(
            "the promotion in {} is not baking (it is {}); nothing to {what}{}",
            dir.display(),
            f.rec.phase.as_str(),
            if f.rec.phase.done() {
                ""
            } else {
                " (if bakeoff died, `bakeoff recover DIR` puts the lane back)"
            }
        )));
    }
    let p = bundle::promotion_control(&dir);
    crate::evidence::write_atomic(&p, what.as_bytes())?;
    let t = std::time::Instant::now();
    let limit = Duration::from_secs_f64(
        f.rec.bake["table"]["interval_s"].as_f64().unwrap_or(30.0) * 2.0 + 10.0,
    );
    while p.exists() && t.elapsed() < limit {
        std::thread::sleep(Duration::from_millis(100));
    }
    if p.exists() {
        let _ = std::fs::remove_file(&p);
        return Err(super::Exit::with(
            1,
            format!(
                "no running promotion answered within {:.0} s; if bakeoff died, `bakeoff recover {}` puts the lane back",
                limit.as_secs_f64(),
                dir.display()
            ),
        )
        .into());
    }
    let why = format!(
        "the promotion in {} took the {what}; it ends its bake now",
        dir.display()
    );
    say!("bakeoff promote: {why}");
    json.emit(&PromoteDoc::new(
        what,
        dir.display().to_string(),
        crate::output::exit::DONE,
        why,
    ))
}

/// `bakeoff recover DIR` on a promotion folder (see `promote::recover`): the campaign is the
/// one of the bundle the promotion acted on (a multi-lane bundle's: its incumbent's lane, where
/// the promotion ran).
pub fn recover(dir: &Path) -> Result<()> {
    let f = promote::record::Folder::open(dir).map_err(|e| refuse(format!("{e:#}")))?;
    let c = super::bundle_campaign_lanes(&f.rec.campaign_bundle, "bakeoff recover")?.campaign;
    let lane = promote::lanes::campaign_incumbent_lane(&c)
        .filter(|_| c.multi_lane())
        .map(str::to_string);
    let c = match lane {
        // The lane is put back wherever its node is now (a node Slurm calls down too).
        Some(l) => promote::lanes::lane_in_service(&c, &l, crate::run::slurm_lanes::resolve_any)
            .map_err(refuse)?,
        None => c,
    };
    let rt = crate::load::pace::client_runtime().context("cannot start the async runtime")?;
    let say: promote::Say = Arc::new(|l: &str| say!("bakeoff recover: {l}"));
    let o = rt
        .block_on(promote::recover::recover(dir, &c, say))
        .map_err(|e| refuse(format!("{e:#}")))?;
    if o.phase == Phase::RollbackFailed {
        return ended(&o, dir, false);
    }
    say!("bakeoff recover: {}: {}", o.phase.as_str(), o.why);
    if !o.root_digest.is_empty() {
        say!(
            "bakeoff recover: folder {} resealed (root digest {})",
            dir.display(),
            o.root_digest
        );
    }
    Ok(())
}

/// `bakeoff report DIR` on a promotion folder: verified (unless `force`), its summary printed
/// from `promotion.json` (the folder is not rewritten: its manifest stays the one sealed).
pub fn report(dir: &Path, force: bool) -> Result<()> {
    let (_, problems) = manifest::verify(dir, None)?;
    if !problems.is_empty() && !force {
        let list: Vec<String> = problems.iter().map(|p| p.to_string()).collect();
        return Err(refuse(format!(
            "{} does not verify ({}); pass --force to print its summary anyway",
            dir.display(),
            list.join("; ")
        )));
    }
    let f = promote::record::Folder::open(dir)?;
    if !problems.is_empty() {
        println!("limitation: printed with --force from a folder that does not verify\n");
    }
    print!("{}", promote::summary::markdown(&f.rec));
    let html = dir.join(crate::evidence::bundle::REPORT_HTML);
    if html.is_file() {
        println!(
            "\nthe bake against its thresholds, charted: {}",
            html.display()
        );
    } else {
        println!("\n(no report.html: the folder was sealed before promotions wrote one)");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    #[test]
    fn bake_durations_parse_with_their_units_and_bad_ones_say_the_form() {
        let d = |s: &str| super::parse_duration(s).map(|d| d.as_secs_f64());
        assert_eq!(d("90s"), Ok(90.0));
        assert_eq!(d("10m"), Ok(600.0));
        assert_eq!(d("1h"), Ok(3600.0));
        assert_eq!(d("250ms"), Ok(0.25));
        assert_eq!(d("2.5"), Ok(2.5));
        assert!(d("0s").unwrap_err().contains("90s, 10m"));
        assert!(d("soon").is_err());
    }
}
