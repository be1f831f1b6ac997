//! One file per subcommand.

/// Writes a line to stderr, ignoring errors: a closed stderr (the parent went away) must never
/// stop a campaign or a promotion before the incumbent is restored. Defined before the modules
/// so each of them can use it.
macro_rules! say {
    ($($t:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stderr(), $($t)*);
    }};
}

pub mod bench;
pub mod bench_conv;
pub mod bench_output;
pub mod bench_source;
pub mod bench_sweep;
pub mod client_step;
pub mod compare;
pub mod engine;
pub mod gate;
pub mod gpu;
pub mod history;
pub mod lane;
pub mod mcp;
pub mod promote;
pub mod recover;
pub mod report;
pub mod run;
mod run_fleet;
pub mod selftest;
pub mod selftest_floor;
pub mod selftest_source;
mod signals;
pub mod verify;

/// Ends a command with an exit code other than the plain error's 1 (a refusal is 2, an
/// interrupted run 130), or with no further message when the command already said everything.
/// `main.rs` turns it into the process's exit status: only `main` ends the process.
#[derive(Debug)]
pub struct Exit {
    pub code: u8,
    pub message: Option<String>,
    /// The diagnostics behind a refusal (already said on stderr), for `--json`'s error document.
    pub details: Vec<String>,
}

impl Exit {
    pub fn with(code: u8, message: impl Into<String>) -> Exit {
        Exit {
            code,
            message: Some(message.into()),
            details: Vec::new(),
        }
    }
    pub fn silent(code: u8) -> Exit {
        Exit {
            code,
            message: None,
            details: Vec::new(),
        }
    }
    /// [`Exit::with`] and the diagnostics behind it.
    pub fn with_details(code: u8, message: impl Into<String>, details: Vec<String>) -> Exit {
        Exit {
            details,
            ..Exit::with(code, message)
        }
    }
}

impl std::fmt::Display for Exit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.message {
            Some(m) => f.write_str(m),
            None => write!(f, "exit status {}", self.code),
        }
    }
}

impl std::error::Error for Exit {}

/// `--json` of one command: its document printed once on stdout, or, when the command ends
/// without one (refused, or an error on the way), `bakeoff.error/1` in its place.
pub(crate) struct JsonOut {
    command: &'static str,
    on: bool,
    printed: std::cell::Cell<bool>,
}

impl JsonOut {
    pub(crate) fn new(command: &'static str, on: bool) -> JsonOut {
        JsonOut {
            command,
            on,
            printed: std::cell::Cell::new(false),
        }
    }

    pub(crate) fn on(&self) -> bool {
        self.on
    }

    /// Prints `doc` when `--json` was given (nothing otherwise).
    pub(crate) fn emit<T: serde::Serialize>(&self, doc: &T) -> anyhow::Result<()> {
        if self.on && !self.printed.get() {
            println!("{}", serde_json::to_string_pretty(doc)?);
            self.printed.set(true);
        }
        Ok(())
    }

    /// The command's end: an error before its document was printed prints the error document.
    pub(crate) fn end(&self, r: anyhow::Result<()>) -> anyhow::Result<()> {
        if let Err(e) = &r {
            if self.on && !self.printed.get() {
                let doc = match e.downcast_ref::<Exit>() {
                    Some(x) => crate::output::ErrorDoc::new(
                        self.command,
                        x.code,
                        x.message.clone().unwrap_or_default(),
                        x.details.clone(),
                    ),
                    None => crate::output::ErrorDoc::new(
                        self.command,
                        crate::output::exit::FAILED,
                        format!("{e:#}"),
                        Vec::new(),
                    ),
                };
                self.emit(&doc)?;
            }
        }
        r
    }
}

/// A command's checks before it touches anything (its flags, their files): any error they end
/// with is a refusal, exit 2 (README, "Exit codes"), with the same message.
pub(crate) fn refused<T>(r: anyhow::Result<T>) -> anyhow::Result<T> {
    r.map_err(|e| match e.downcast::<Exit>() {
        Ok(x) => x.into(),
        Err(e) => Exit::with(crate::output::exit::REFUSED, format!("{e:#}")).into(),
    })
}

/// `p` made absolute against the current directory.
pub(crate) fn absolute(p: &std::path::Path) -> std::path::PathBuf {
    if p.is_absolute() {
        p.to_path_buf()
    } else {
        std::env::current_dir()
            .map(|d| d.join(p))
            .unwrap_or_else(|_| p.to_path_buf())
    }
}

/// The campaign of bundle `dir` for `command` (`bakeoff run --resume`, `bakeoff recover`,
/// `bakeoff promote`): refused (exit 2, the copy's diagnostics printed) when it does not load. A
/// multi-lane bundle's is its first lane folder's copy (the whole campaign); one lane's folder
/// of it is refused, naming the whole bundle.
pub(crate) fn bundle_campaign_lanes(
    dir: &std::path::Path,
    command: &str,
) -> anyhow::Result<crate::campaign::BundleCampaign> {
    let whole = lanes_of_bundle(dir);
    // A multi-lane bundle's top has no checkpoint: its lanes' folders do, each with the whole
    // campaign's copy and the fingerprints of the files it names.
    let from = match whole {
        Some(_) => lane_with_checkpoint(dir).ok_or_else(|| {
            Exit::with(
                2,
                format!(
                    "no lane of bundle {} began (no lanes/<lane>/checkpoint.json): its run died before any lane started, so nothing was touched; remove it and run the campaign again",
                    dir.display()
                ),
            )
        })?,
        None => dir.to_path_buf(),
    };
    let b = crate::campaign::load_bundle(&from, command).map_err(|r| {
        for d in &r.diagnostics {
            use std::io::Write as _;
            let _ = writeln!(std::io::stderr(), "{d}");
        }
        let details = r.diagnostics.iter().map(|d| d.to_string()).collect();
        anyhow::Error::from(Exit::with_details(2, r.message, details))
    })?;
    // A lane's own folder of a multi-lane bundle: its campaign copy is the whole campaign.
    if b.campaign.multi_lane() && whole.is_none() {
        let top = dir.parent().and_then(|p| p.parent()).unwrap_or(dir);
        return Err(Exit::with(
            2,
            format!(
                "{} is one lane's folder of a multi-lane bundle: `{command}` takes the whole bundle; give {}",
                dir.display(),
                top.display()
            ),
        )
        .into());
    }
    Ok(b)
}

/// The first lane folder of multi-lane bundle `dir` (in its result's order) that has a
/// checkpoint.
fn lane_with_checkpoint(dir: &std::path::Path) -> Option<std::path::PathBuf> {
    let b = std::fs::read(dir.join(crate::evidence::bundle::RESULT)).ok()?;
    let r: crate::evidence::result::CampaignResult = serde_json::from_slice(&b).ok()?;
    r.lanes
        .iter()
        .map(|l| dir.join(&l.folder))
        .find(|d| d.join(crate::evidence::bundle::CHECKPOINT).is_file())
}

/// The lanes of a multi-lane bundle (its `campaign-result.json` lists them); None for a one-lane
/// bundle or one without a readable result.
pub(crate) fn lanes_of_bundle(dir: &std::path::Path) -> Option<usize> {
    let b = std::fs::read(dir.join(crate::evidence::bundle::RESULT)).ok()?;
    let r: crate::evidence::result::CampaignResult = serde_json::from_slice(&b).ok()?;
    (!r.lanes.is_empty()).then_some(r.lanes.len())
}
