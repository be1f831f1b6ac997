//! After a run died: what each kind does about a launch its journal left open. The marks
//! ([`Marks`]) say what kind it was; each kind proves ownership its own way and stops what is
//! proven the run's own ([`super::adopt`] for process groups and containers,
//! [`super::adopt_slurm`] for Slurm jobs). Never signals what it cannot prove.

use super::adopt::{self, Found};
use super::marks::{Adopted, ContainerMark, LaneFacts, Launch, Marks, ProcessMark, State};
use super::procnet;
use std::time::{Duration, Instant};

impl Marks {
    /// Proves the recorded launch is the dead run's own and stops it (a restored incumbent
    /// that serves is kept), each kind its own way.
    pub fn adopt(&self, l: &Launch, lane: &LaneFacts) -> Adopted {
        if let Some(m) = &self.slurm {
            return super::adopt_slurm::leftover(m, l, lane);
        }
        if let Some(ct) = &self.container {
            return container(ct, l);
        }
        process(self.process.as_ref(), l, lane)
    }
}

/// A container: proven by its labels, removed; the restored incumbent's is kept.
fn container(ct: &ContainerMark, l: &Launch) -> Adopted {
    let who = l.who;
    if l.restored {
        // The restored incumbent: kept (the lane check after the recovery sees if it serves).
        return match adopt::container_labels(&ct.docker, &ct.name) {
            Ok(None) => Adopted::said(
                Some(State::Gone),
                format!("{who}: container `{}` is gone", ct.name),
            ),
            Ok(Some(_)) => Adopted::said(
                None,
                format!("{who}: container `{}` is there: kept", ct.name),
            ),
            Err(e) => Adopted::said(
                None,
                format!("{who}: container `{}` could not be checked: {e}", ct.name),
            ),
        };
    }
    match adopt::adopt_container(&ct.docker, &ct.name, &ct.labels) {
        Found::Gone(why) => {
            Adopted::said(Some(State::Gone), format!("{who}: already gone ({why})"))
        }
        Found::Own(_) => Adopted::said(
            Some(State::StoppedByRecovery),
            format!(
                "{who}: container `{}` left running by the dead run (its labels match): removed",
                ct.name
            ),
        ),
        Found::NotOurs(why) => {
            let msg = format!(
                "{who}: NOT stopped: {why}; if it is a leftover of this run, remove it yourself (`{} rm -f {}`)",
                ct.docker, ct.name
            );
            Adopted {
                unproven: vec![msg.clone()],
                ..Adopted::said(None, msg)
            }
        }
    }
}

/// A process group (process and reference arms): the recorded mark, or (killed between the
/// intent and the pid's record) what started with that argv since.
fn process(mark: Option<&ProcessMark>, l: &Launch, lane: &LaneFacts) -> Adopted {
    let who = l.who;
    let marks = match mark {
        Some(m) => vec![m.clone()],
        None => {
            let found = match l.intent_ticks {
                Some(t) if l.boot_id == adopt::boot_id() => adopt::started_after(l.argv, t),
                _ => Vec::new(),
            };
            if found.is_empty() {
                return Adopted::said(
                    Some(State::Gone),
                    format!("{who}: recorded as about to start, but no process with its argv started since then is running"),
                );
            }
            found
        }
    };
    let mut a = Adopted::default();
    let mut words = Vec::new();
    for m in &marks {
        words.push(process_one(m, l, lane, &mut a));
    }
    a.words = words.join("; ");
    a
}

/// One recorded process: proven, then kept (a restored incumbent that listens) or stopped.
fn process_one(m: &ProcessMark, l: &Launch, lane: &LaneFacts, a: &mut Adopted) -> String {
    let who = l.who;
    match adopt::prove(m) {
        Found::Gone(why) => {
            a.state.get_or_insert(State::Gone);
            format!("{who}: already gone ({why})")
        }
        Found::NotOurs(why) => {
            let msg = format!(
                "{who}: NOT stopped: {why}; bakeoff stops only what it can prove it started; if it is a leftover of this run, stop it yourself (`kill -TERM -- -{}`)",
                m.pgid
            );
            a.unproven.push(msg.clone());
            a.state.get_or_insert(State::Gone);
            msg
        }
        Found::Own(pids) if l.restored => {
            if wait_listening(lane.port, m.pgid, lane.ready_timeout) {
                format!(
                    "{who}: still runs (pid {}, proven by its start time and argv) and serves the lane: kept",
                    m.pid
                )
            } else {
                let st = adopt::stop_group(m.pgid, lane.grace);
                a.state = Some(State::StoppedByRecovery);
                format!(
                    "{who}: runs (pids {pids:?}) but never listened on the lane port: stopped ({})",
                    stop_words(&st)
                )
            }
        }
        Found::Own(pids) => {
            let st = adopt::stop_group(m.pgid, lane.grace);
            a.state = Some(if st.gone {
                State::StoppedByRecovery
            } else {
                a.unproven.push(format!(
                    "{who}: processes {:?} survived SIGKILL",
                    st.remaining_pids
                ));
                State::Started
            });
            format!(
                "{who}: left running by the dead run (pid {}, started at tick {}, argv as recorded; group members {pids:?}): stopped ({})",
                m.pid,
                m.start_ticks,
                stop_words(&st)
            )
        }
    }
}

fn stop_words(st: &adopt::GroupStop) -> String {
    format!(
        "SIGTERM to process group {}{}; {}",
        st.pgid,
        if st.sigkill_sent {
            ", then SIGKILL"
        } else {
            ""
        },
        if st.gone {
            "nothing of it is left".to_string()
        } else {
            format!("still alive: {:?}", st.remaining_pids)
        }
    )
}

/// Waits until a process of group `pgid` listens on `port`.
fn wait_listening(port: u16, pgid: u32, limit: Duration) -> bool {
    let t = Instant::now();
    loop {
        let ls = procnet::find_listeners(port);
        if ls.iter().any(|l| l.pgid == Some(pgid)) {
            return true;
        }
        if t.elapsed() >= limit || super::process::group_members(pgid).is_empty() {
            return false;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}
