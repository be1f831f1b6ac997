//! `bakeoff history add|list|show|regressions|report`: the flags as typed specs, and printing.
//! The store, series and detection are `crate::history`'s.

use crate::history::changepoint::Params;
use crate::history::regressions::{self, Found};
use crate::history::series::{self, unit, Filter, Series};
use crate::history::{self, Added, DbSpec, Store};
use crate::output::history::{
    AddedPart, BundlePart, ChangePart, HistoryDoc, PointPart, SeriesPart,
};
use anyhow::{bail, Context, Result};
use clap::{Args, Subcommand};
use std::path::{Path, PathBuf};

#[derive(Args, Debug)]
pub struct HistoryArgs {
    /// The history database: a SQLite file, or postgres://USER@HOST:PORT/DATABASE (the password,
    /// when one is needed, from BAKEOFF_HISTORY_PASSWORD or PGPASSWORD, never in the URL).
    /// Default: $XDG_DATA_HOME/bakeoff/history.sqlite (~/.local/share/bakeoff/history.sqlite).
    #[arg(long, global = true, value_name = "PATH|URL")]
    pub db: Option<String>,
    /// Print one JSON document on stdout instead of the lines (`bakeoff.history/1`,
    /// docs/agents.md): what was added or refused, the bundles, the series, the change points.
    #[arg(long, global = true)]
    pub json: bool,
    #[command(subcommand)]
    pub command: HistoryCommand,
}

#[derive(Subcommand, Debug)]
pub enum HistoryCommand {
    /// Verify bundles and add them (keyed by their root digest; adding one twice does nothing).
    Add {
        /// Bundle directories (each must pass `bakeoff verify`).
        #[arg(required = true)]
        bundles: Vec<PathBuf>,
    },
    /// The bundles in the history, oldest first (a multi-lane bundle once per lane, with the arms
    /// that ran there).
    List(FilterArgs),
    /// Each series (figure × recipe × GPU × lane): every run's median, interval and sample count.
    Show(ShowArgs),
    /// The change points of every series; exit 1 on a regression beyond --fail-on.
    Regressions(RegressionArgs),
    /// Write trend charts (intervals, change points, each run linked to its bundle) as HTML.
    Report(ReportArgs),
    /// Time the ingest of N synthetic bundle summaries (docs/benchmarks.md).
    #[command(hide = true)]
    BenchIngest {
        #[arg(long, default_value_t = 1000)]
        count: usize,
    },
}

#[derive(Args, Debug, Clone, Default)]
pub struct FilterArgs {
    /// Only this model (as the arms name it).
    #[arg(long)]
    pub model: Option<String>,
    /// Only this engine (`vllm`, `llama.cpp`, `reference`, ...).
    #[arg(long)]
    pub engine: Option<String>,
    /// Only GPUs whose model contains this (`H200`).
    #[arg(long)]
    pub gpu: Option<String>,
    /// Only this lane (`HOST:PORT`, as `history list` prints it): the arms that ran on it.
    #[arg(long)]
    pub lane: Option<String>,
    /// Only figures starting with this (`ttft`, `decode_tok_s_p50@c1`).
    #[arg(long)]
    pub metric: Option<String>,
    /// Only this arm id.
    #[arg(long)]
    pub arm: Option<String>,
    /// Only campaigns started at or after this (RFC 3339 time or a date, e.g. 2026-11-01).
    #[arg(long, value_name = "TIME")]
    pub since: Option<String>,
}

impl FilterArgs {
    fn spec(&self) -> Filter {
        Filter {
            model: self.model.clone(),
            engine: self.engine.clone(),
            gpu: self.gpu.clone(),
            lane: self.lane.clone(),
            metric: self.metric.clone(),
            arm: self.arm.clone(),
            since: self.since.clone(),
        }
    }
}

#[derive(Args, Debug, Clone)]
pub struct DetectArgs {
    /// Runs required on each side of a change point.
    #[arg(long, default_value_t = 5, value_name = "N")]
    pub min_points: usize,
    /// Smallest change of a series' median that counts, percent.
    #[arg(long, default_value_t = 5.0, value_name = "PCT")]
    pub min_effect: f64,
    /// Largest p-value of the Welch t-test that counts.
    #[arg(long, default_value_t = 0.001)]
    pub alpha: f64,
}

impl DetectArgs {
    fn params(&self) -> Result<Params> {
        if self.min_points < 2 {
            bail!(
                "--min-points {}: a side needs at least 2 runs for a variance",
                self.min_points
            );
        }
        let alpha_ok = self.alpha > 0.0 && self.alpha < 1.0;
        if self.min_effect.is_nan() || self.min_effect < 0.0 || !alpha_ok {
            bail!("--min-effect must be >= 0 and --alpha between 0 and 1");
        }
        Ok(Params {
            min_points: self.min_points,
            min_effect: self.min_effect / 100.0,
            alpha: self.alpha,
        })
    }
}

#[derive(Args, Debug)]
pub struct ShowArgs {
    #[command(flatten)]
    pub filter: FilterArgs,
}

#[derive(Args, Debug)]
pub struct RegressionArgs {
    #[command(flatten)]
    pub filter: FilterArgs,
    #[command(flatten)]
    pub detect: DetectArgs,
    /// Exit 1 when a regression is worse than this, percent (a CI gate).
    #[arg(long, value_name = "PCT")]
    pub fail_on: Option<f64>,
}

#[derive(Args, Debug)]
pub struct ReportArgs {
    /// The HTML file to write.
    #[arg(long, value_name = "FILE")]
    pub html: PathBuf,
    #[command(flatten)]
    pub filter: FilterArgs,
    #[command(flatten)]
    pub detect: DetectArgs,
}

fn spec(db: &Option<String>) -> Result<DbSpec> {
    match db {
        Some(s) => DbSpec::parse(s),
        None => DbSpec::default_path(),
    }
}

pub fn run(args: HistoryArgs) -> Result<()> {
    let out = super::JsonOut::new("history", args.json);
    out.end(history(args, &out))
}

/// A subcommand's end once it has its document: the exit code (0, or 1 done with failures)
/// and, for 1, the line that says why.
type Ended = (u8, Option<String>);

fn history(args: HistoryArgs, out: &super::JsonOut) -> Result<()> {
    let db = super::refused(spec(&args.db))?;
    if let HistoryCommand::BenchIngest { count } = args.command {
        return bench_ingest(&db, count);
    }
    let mut store = Store::open(&db)?;
    let name = match &args.command {
        HistoryCommand::Add { .. } => "add",
        HistoryCommand::List(_) => "list",
        HistoryCommand::Show(_) => "show",
        HistoryCommand::Regressions(_) => "regressions",
        HistoryCommand::Report(_) => "report",
        HistoryCommand::BenchIngest { .. } => unreachable!("handled above"),
    };
    let mut doc = HistoryDoc::new(name, store.describe());
    let text = !out.on();
    let (code, why) = match args.command {
        HistoryCommand::Add { bundles } => add(&mut store, &bundles, &mut doc, text),
        HistoryCommand::List(f) => list(&mut store, &f.spec(), &mut doc, text),
        HistoryCommand::Show(a) => show(&mut store, &a.filter.spec(), &mut doc, text),
        HistoryCommand::Regressions(a) => regressions_cmd(&mut store, &a, &mut doc, text),
        HistoryCommand::Report(a) => report(&mut store, &a, &mut doc, text),
        HistoryCommand::BenchIngest { .. } => unreachable!("handled above"),
    }?;
    doc.exit_code = code;
    out.emit(&doc)?;
    match why {
        Some(m) => Err(super::Exit::with(code, m).into()),
        None => Ok(()),
    }
}

fn short(d: &str) -> &str {
    &d[..12.min(d.len())]
}

fn add(store: &mut Store, bundles: &[PathBuf], doc: &mut HistoryDoc, text: bool) -> Result<Ended> {
    let mut refused = 0;
    for b in bundles {
        let r = history::add_bundle(store, b);
        doc.added.push(AddedPart {
            bundle: b.display().to_string(),
            status: match &r {
                Ok((_, Added::New)) => "added",
                Ok(_) => "present",
                Err(_) => "refused",
            },
            digest: r.as_ref().ok().map(|(s, _)| s.digest.clone()),
            moved_from: match &r {
                Ok((_, Added::Already { moved_from })) => moved_from.clone(),
                _ => None,
            },
            error: r.as_ref().err().map(|e| format!("{e:#}")),
        });
        if !text {
            refused += usize::from(r.is_err());
            continue;
        }
        match r {
            Ok((s, Added::New)) => println!(
                "added    {}  {} started {}  {}",
                short(&s.digest),
                s.campaign_id,
                s.started_at,
                b.display()
            ),
            Ok((s, Added::Already { moved_from: None })) => println!(
                "present  {}  {} (already in the history: nothing written)",
                short(&s.digest),
                b.display()
            ),
            Ok((s, Added::Already { moved_from: Some(old) })) => println!(
                "present  {}  {} (already in the history; it was at {}: its path is updated, the digest is the key)",
                short(&s.digest),
                b.display(),
                old
            ),
            Err(e) => {
                refused += 1;
                eprintln!("refused  {}: {e:#}", b.display());
            }
        }
    }
    if refused > 0 {
        return Ok((
            1,
            Some(format!(
                "{refused} of {} bundle(s) refused; the others are in {}",
                bundles.len(),
                store.describe()
            )),
        ));
    }
    Ok((0, None))
}

fn list(store: &mut Store, f: &Filter, doc: &mut HistoryDoc, text: bool) -> Result<Ended> {
    let rows = series::bundles(store, f)?;
    if !text {
        doc.bundles = rows
            .into_iter()
            .map(|r| BundlePart {
                digest: r.digest,
                campaign_id: r.campaign_id,
                started_at: r.started_at,
                gpu_model: r.gpu_model,
                lane: r.lane,
                arms: r.arms,
                winner: r.winner,
                path: r.path,
            })
            .collect();
        return Ok((0, None));
    }
    if rows.is_empty() {
        println!("no bundle in {} matches", store.describe());
        return Ok((0, None));
    }
    println!(
        "{:<13} {:<22} {:<20} {:<16} {:<22} {:<16} {:<10} path",
        "digest", "started", "campaign", "GPU", "lane", "arms", "winner"
    );
    for r in &rows {
        println!(
            "{:<13} {:<22} {:<20} {:<16} {:<22} {:<16} {:<10} {}",
            short(&r.digest),
            r.started_at,
            r.campaign_id,
            r.gpu_model,
            r.lane,
            r.arms,
            if r.winner.is_empty() { "-" } else { &r.winner },
            r.path
        );
    }
    let mut digests: Vec<&str> = rows.iter().map(|r| r.digest.as_str()).collect();
    digests.dedup();
    println!("{} bundle(s)", digests.len());
    Ok((0, None))
}

fn show(store: &mut Store, f: &Filter, doc: &mut HistoryDoc, text: bool) -> Result<Ended> {
    let all = series::read(store, f)?;
    if !text {
        doc.series = all.iter().map(series_part).collect();
        return Ok((0, None));
    }
    if all.is_empty() {
        println!("no series in {} matches", store.describe());
    }
    for s in &all {
        println!("{}", s.key.describe());
        let u = unit(&s.key.figure);
        for (j, p) in s.points.iter().enumerate() {
            let changed = match j {
                0 => Vec::new(),
                _ => p.facts.changes_from(&s.points[j - 1].facts),
            };
            println!(
                "  {:>3}  {:<22} {:>10.2} {u}  [{}–{}]  n {:<4} {}{}",
                j + 1,
                p.started_at,
                p.value,
                p.lo.map(|v| format!("{v:.2}"))
                    .unwrap_or_else(|| "-".into()),
                p.hi.map(|v| format!("{v:.2}"))
                    .unwrap_or_else(|| "-".into()),
                p.n,
                short(&p.digest),
                if changed.is_empty() {
                    String::new()
                } else {
                    format!("  ({})", changed.join("; "))
                }
            );
        }
    }
    Ok((0, None))
}

/// A series with each run's point, for `--json`.
fn series_part(s: &Series) -> SeriesPart {
    SeriesPart {
        key: s.key.describe(),
        figure: s.key.figure.clone(),
        unit: unit(&s.key.figure),
        gpu_model: s.key.gpu_model.clone(),
        lane: s.key.lane.clone(),
        points: s
            .points
            .iter()
            .enumerate()
            .map(|(j, p)| PointPart {
                digest: p.digest.clone(),
                started_at: p.started_at.clone(),
                value: p.value,
                lo: p.lo,
                hi: p.hi,
                n: p.n,
                changed: match j {
                    0 => Vec::new(),
                    _ => p.facts.changes_from(&s.points[j - 1].facts),
                },
            })
            .collect(),
    }
}

/// One change point in words (the same line `regressions` prints and CI logs keep).
pub fn describe(s: &Series, f: &Found) -> String {
    let u = unit(&s.key.figure);
    let c = &f.change;
    format!(
        "{} {}: {:.2} {u} [{:.2}–{:.2}] over {} runs → {:.2} {u} [{:.2}–{:.2}] over {} runs ({:+.1} %, p {:.1e}); first run after: {} ({}, {}); {}",
        if f.regression { "REGRESSION" } else { "improvement" },
        s.key.describe(),
        c.before.median,
        c.before.lo,
        c.before.hi,
        c.before.points,
        c.after.median,
        c.after.lo,
        c.after.hi,
        c.after.points,
        c.relative * 100.0,
        c.p_value,
        short(&f.digest),
        f.started_at,
        f.path,
        if f.changed.is_empty() {
            "no recorded recipe fact changed there".to_string()
        } else {
            format!("changed there: {}", f.changed.join("; "))
        }
    )
}

fn regressions_cmd(
    store: &mut Store,
    a: &RegressionArgs,
    doc: &mut HistoryDoc,
    text: bool,
) -> Result<Ended> {
    if a.fail_on.is_some_and(|p| p.is_nan() || p < 0.0) {
        return Err(super::Exit::with(2, "--fail-on must be a percentage >= 0").into());
    }
    let params = super::refused(a.detect.params())?;
    let since = a.filter.since.clone();
    // The series are read whole: --since selects change points, not the levels before them.
    let f = Filter {
        since: None,
        ..a.filter.spec()
    };
    let all = series::read(store, &f)?;
    let found = regressions::find(&all, &params, since.as_deref());
    doc.fail_on_pct = a.fail_on;
    for x in &found {
        let line = describe(&all[x.series], x);
        if text {
            println!("{line}");
        }
        doc.change_points.push(ChangePart {
            series: all[x.series].key.describe(),
            regression: x.regression,
            worse_pct: x.worse_pct,
            beyond_fail_on: a.fail_on.is_some_and(|l| x.regression && x.worse_pct > l),
            digest: x.digest.clone(),
            started_at: x.started_at.clone(),
            path: x.path.clone(),
            changed: x.changed.clone(),
            line,
        });
    }
    if text {
        println!(
            "{} series, {} change point(s), {} regression(s)",
            all.len(),
            found.len(),
            found.iter().filter(|x| x.regression).count()
        );
    }
    if let Some(limit) = a.fail_on {
        let bad: Vec<&Found> = found
            .iter()
            .filter(|x| x.regression && x.worse_pct > limit)
            .collect();
        if !bad.is_empty() {
            return Ok((
                1,
                Some(format!(
                    "{} regression(s) beyond --fail-on {limit} %: worst {:.1} % ({})",
                    bad.len(),
                    bad.iter().map(|x| x.worse_pct).fold(0.0, f64::max),
                    all[bad[0].series].key.describe()
                )),
            ));
        }
    }
    Ok((0, None))
}

fn report(store: &mut Store, a: &ReportArgs, doc: &mut HistoryDoc, text: bool) -> Result<Ended> {
    let params = super::refused(a.detect.params())?;
    let all = series::read(store, &a.filter.spec())?;
    let found = regressions::find(&all, &params, None);
    let page = history::page::render(&all, &found, &store.describe());
    crate::evidence::write_atomic(&a.html, page.as_bytes())
        .with_context(|| format!("cannot write {}", a.html.display()))?;
    doc.wrote = Some(super::absolute(&a.html).display().to_string());
    doc.series = all.iter().map(series_part).collect();
    if text {
        println!(
            "wrote {}: {} series, {} change point(s)",
            a.html.display(),
            all.len(),
            found.len()
        );
    }
    Ok((0, None))
}

/// `bakeoff run --history DB`, before the verdict is rendered: each arm's figures of this run
/// against its own history. Writes `history-context.json` (the verdict's limitation lines) and
/// `history-trend.html` (the run's series, this run last) into the sealed bundle and reseals
/// it, so the verdict rendered next carries them. Returns the lines to print after the add; an
/// error is a line too and leaves the bundle as it was (the verdict is then the one without
/// this history: a resume keeps what an earlier invocation wrote).
pub fn before_verdict(db: &str, bundle: &Path) -> Vec<String> {
    let res = context_files(db, bundle).and_then(|(files, lines)| {
        write_sealed(bundle, &files)?;
        Ok(lines)
    });
    res.unwrap_or_else(|e| {
        vec![format!(
            "bakeoff run: history: {e:#}; the verdict has no history lines from it"
        )]
    })
}

/// Files for the bundle: name and bytes.
type Files = Vec<(&'static str, Vec<u8>)>;

/// The files to write into the bundle and the lines to print; touches nothing.
fn context_files(db: &str, bundle: &Path) -> Result<(Files, Vec<String>)> {
    use crate::evidence::{bundle as names, history::HistoryContext};
    let mut store = Store::open(&DbSpec::parse(db)?)?;
    let s = history::summarize(bundle)?;
    let (cx, mine) = history::context_before_add(&mut store, &s)?;
    let found = regressions::find(&mine, &Params::default(), None);
    let page = history::page::render(&mine, &found, &store.describe());
    let context = HistoryContext {
        schema: crate::evidence::history::SCHEMA.into(),
        store: store.describe(),
        written_at: crate::clock::wall_rfc3339(),
        lines: history::context::verdict_lines(&cx.lines, &cx.drifting),
        informational: history::context::informational_lines(&cx.lines),
        trend: Some(names::HISTORY_TREND.into()),
    };
    let files = vec![
        (names::HISTORY_TREND, page.into_bytes()),
        (names::HISTORY_CONTEXT, serde_json::to_vec_pretty(&context)?),
    ];
    let mut out = Vec::new();
    if cx.lines.is_empty() {
        out.push(format!(
            "bakeoff run: history: no arm has {} earlier runs on this GPU and lane yet",
            history::context::MIN_HISTORY
        ));
    }
    out.extend(
        cx.lines
            .iter()
            .filter(|l| l.figure.ends_with("@c1"))
            .map(|l| format!("  history: {}", l.text())),
    );
    out.extend(cx.drifting.iter().map(|d| format!("  history: {d}")));
    out.push(format!(
        "bakeoff run: history: trend of this run's series: {}",
        bundle.join(names::HISTORY_TREND).display()
    ));
    Ok((files, out))
}

/// Writes `files` into the bundle and reseals it; on any failure puts back what was there
/// before (an earlier invocation's files, or none) and reseals again, so the bundle verifies
/// as it did.
fn write_sealed(bundle: &Path, files: &[(&'static str, Vec<u8>)]) -> Result<()> {
    let before: Vec<Option<Vec<u8>>> = files
        .iter()
        .map(|(n, _)| std::fs::read(bundle.join(n)).ok())
        .collect();
    let res = files
        .iter()
        .try_for_each(|(n, b)| crate::evidence::write_atomic(&bundle.join(n), b))
        .and_then(|_| crate::evidence::manifest::write(bundle).map(|_| ()));
    if res.is_err() {
        for ((n, _), old) in files.iter().zip(before) {
            let p = bundle.join(n);
            let _ = match old {
                Some(b) => crate::evidence::write_atomic(&p, &b),
                None => std::fs::remove_file(&p).map_err(Into::into),
            };
        }
        let _ = crate::evidence::manifest::write(bundle);
    }
    res
}

/// `bakeoff run --history DB`, after the verdict: adds the run's final bundle (a complete one
/// only: the resume of an incomplete run is the same run with another digest, which the
/// history refuses, so the complete bundle is the one kept) and returns `context` (from
/// [`before_verdict`]) after the line saying so.
pub fn after_run(db: &str, bundle: &Path, complete: bool, context: Vec<String>) -> Vec<String> {
    let first = if complete {
        let added = DbSpec::parse(db)
            .and_then(|spec| Store::open(&spec))
            .and_then(|mut st| {
                let (s, _) = history::add_bundle(&mut st, bundle)?;
                Ok(format!(
                    "bakeoff run: history: bundle {} added to {}",
                    short(&s.digest),
                    st.describe()
                ))
            });
        added.unwrap_or_else(|e| format!("bakeoff run: history: {e:#}"))
    } else {
        format!(
            "bakeoff run: history: the bundle is incomplete and was not added; `bakeoff run --resume {} --history DB` adds it once complete (or `bakeoff history add` it as it is)",
            bundle.display()
        )
    };
    std::iter::once(first).chain(context).collect()
}

fn bench_ingest(db: &DbSpec, count: usize) -> Result<()> {
    let mut store = Store::open(db)?;
    let t = std::time::Instant::now();
    for i in 0..count {
        history::add(&mut store, &history::ingest::synthetic(i))?;
    }
    let secs = t.elapsed().as_secs_f64();
    println!(
        "ingested {count} bundle summaries (2 arms, {} figures each) into {} in {secs:.2} s ({:.1} ms per bundle)",
        history::ingest::synthetic(0).arms.iter().map(|a| a.figures.len()).sum::<usize>(),
        store.describe(),
        secs * 1e3 / count.max(1) as f64
    );
    Ok(())
}
