//! SIGINT and SIGTERM turned into a cancel for the commands that must put a lane back before
//! they exit (`run`, `promote`): the first signal is sent on the watch, a second only says to
//! wait, since leaving now would leave the lane without its incumbent.

use anyhow::{Context, Result};
use tokio::signal::unix::{signal, SignalKind};
use tokio::sync::watch::Sender;

/// Installs the handlers (inside a tokio runtime) and returns at once. `cmd` names the command
/// in what is said (`bakeoff run: SIGINT: ...`); `doing` what the first signal starts.
pub fn cancel_on_signals(
    tx: Sender<Option<&'static str>>,
    cmd: &'static str,
    doing: &'static str,
) -> Result<()> {
    let mut int = signal(SignalKind::interrupt()).context("cannot install a SIGINT handler")?;
    let mut term = signal(SignalKind::terminate()).context("cannot install a SIGTERM handler")?;
    tokio::spawn(async move {
        loop {
            let name = tokio::select! {
                _ = int.recv() => "SIGINT",
                _ = term.recv() => "SIGTERM",
            };
            if tx.borrow().is_none() {
                say!("bakeoff {cmd}: {name}: {doing}, then restoring the incumbent ...");
                let _ = tx.send(Some(name));
            } else {
                say!("bakeoff {cmd}: {name} again: still restoring the incumbent; please wait");
            }
        }
    });
    Ok(())
}
