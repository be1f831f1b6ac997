//! Slurm jobs a dead bakeoff run left on the lane: what a run records about each job it submits
//! ([`SlurmMark`]: the job name it gave, the job id sbatch answered, the submitting uid, the
//! wall clock just before the submission), the proof that a job Slurm lists now is that very job
//! ([`judge`], from `scontrol show job -o ID`), and cancelling it the Slurm way ([`cancel`]).
//!
//! A job id alone proves nothing: a controller whose state was reset numbers its jobs from 1
//! again. A job is the run's own only when Slurm lists it with the recorded id AND the recorded
//! name AND the recorded user AND a submit time no earlier than the run's intent to submit it.
//! Nothing is cancelled without that proof. Blocking calls (quick CLI calls and short polls), as
//! the rest of the recovery.

use super::marks::{Adopted, LaneFacts, Launch, State};
use super::slurm::fields;
use serde::Serialize;
use serde_json::{json, Value};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

pub use super::marks::SlurmMark;

/// A job as `scontrol show job -o` lists it (the fields the proof reads).
#[derive(Debug, Clone, Serialize, PartialEq, Eq, Default)]
pub struct Seen {
    pub job_id: String,
    pub job_name: String,
    /// `UserId` as Slurm writes it (`name(uid)`).
    pub user: String,
    pub uid: Option<u32>,
    pub state: String,
    /// `SubmitTime` as Slurm writes it (the controller's local time).
    pub submit_time: String,
    /// `BatchHost`, else the first of `NodeList`.
    pub node: Option<String>,
}

impl Seen {
    /// Parses one `scontrol show job -o` line; `None` without a `JobId` and `JobState`.
    pub fn parse(line: &str) -> Option<Seen> {
        let f = fields(line);
        let some = |k: &str| {
            f.get(k)
                .filter(|v| !v.is_empty() && *v != "None" && *v != "(null)")
                .cloned()
        };
        let user = f.get("UserId").cloned().unwrap_or_default();
        let uid = user
            .rsplit_once('(')
            .and_then(|(_, u)| u.strip_suffix(')'))
            .and_then(|u| u.parse().ok());
        Some(Seen {
            job_id: f.get("JobId")?.clone(),
            job_name: f.get("JobName").cloned().unwrap_or_default(),
            user,
            uid,
            state: f.get("JobState")?.clone(),
            submit_time: f.get("SubmitTime").cloned().unwrap_or_default(),
            node: some("BatchHost").or_else(|| {
                some("NodeList").map(|n| n.split([',', '[']).next().unwrap_or_default().into())
            }),
        })
    }

    /// Still holds (or may still hold) resources: not ended. COMPLETING counts as live (its
    /// processes may still serve).
    pub fn live(&self) -> bool {
        matches!(
            self.state.as_str(),
            "PENDING"
                | "RUNNING"
                | "CONFIGURING"
                | "COMPLETING"
                | "REQUEUED"
                | "RESIZING"
                | "SUSPENDED"
                | "STAGE_OUT"
                | "SIGNALING"
        )
    }
}

/// What became of a recorded job.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Job {
    /// It ended, or Slurm no longer knows it: nothing of it serves.
    Gone(String),
    /// Proven the run's own, and live.
    Own(Seen),
    /// The id names another job now, or the proof could not be made: never cancelled. Why.
    NotOurs(String),
}

/// `SubmitTime` as unix seconds: scontrol is asked for unix seconds (`SLURM_TIME_FORMAT=%s`);
/// a Slurm that ignores that writes `YYYY-MM-DDTHH:MM:SS` in scontrol's local time (this
/// process's time zone, which scontrol inherits).
pub fn submit_unix(s: &str) -> Option<u64> {
    if !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit()) {
        return s.parse().ok();
    }
    let (d, t) = s.split_once('T')?;
    let d: Vec<i32> = d
        .split('-')
        .map(|x| x.parse().ok())
        .collect::<Option<_>>()?;
    let t: Vec<i32> = t
        .split(':')
        .map(|x| x.parse().ok())
        .collect::<Option<_>>()?;
    if d.len() != 3 || t.len() != 3 {
        return None;
    }
    // SAFETY: a zeroed tm is valid; mktime reads and normalizes it.
    let mut tm: libc::tm = unsafe { std::mem::zeroed() };
    tm.tm_year = d[0] - 1900;
    tm.tm_mon = d[1] - 1;
    tm.tm_mday = d[2];
    tm.tm_hour = t[0];
    tm.tm_min = t[1];
    tm.tm_sec = t[2];
    tm.tm_isdst = -1;
    // SAFETY: tm is a valid, initialized struct.
    let secs = unsafe { libc::mktime(&mut tm) };
    (secs >= 0).then_some(secs as u64)
}

/// The proof, from what `scontrol show job -o ID` answered: `Ok(None)` when Slurm said it does
/// not know the id (`Invalid job id`), `Ok(Some(line))` its line, `Err` when scontrol could not
/// answer. Pure: the unit tests feed it fixtures.
pub fn judge(m: &SlurmMark, id: &str, answer: Result<Option<String>, String>) -> Job {
    let line = match answer {
        Ok(None) => {
            return Job::Gone(format!(
                "Slurm no longer knows job {id} (it ended and was purged)"
            ))
        }
        Ok(Some(l)) => l,
        Err(e) => return Job::NotOurs(format!("cannot check Slurm job {id}: {e}")),
    };
    let Some(s) = Seen::parse(&line) else {
        return Job::NotOurs(format!(
            "cannot read scontrol's answer for job {id}: `{}`",
            line.trim()
        ));
    };
    if s.job_id != id {
        return Job::NotOurs(format!(
            "scontrol answered for job {} when asked for job {id}",
            s.job_id
        ));
    }
    if s.job_name != m.job_name {
        return Job::NotOurs(format!(
            "Slurm job {id} is now `{}` of {} ({}), not the run's `{}`: the id was reused",
            s.job_name, s.user, s.state, m.job_name
        ));
    }
    if s.uid != Some(m.uid) {
        return Job::NotOurs(format!(
            "Slurm job {id} `{}` belongs to {}, not to the uid {} that submitted the run's job",
            s.job_name, s.user, m.uid
        ));
    }
    match submit_unix(&s.submit_time) {
        // SubmitTime has whole seconds; the intent was taken just before sbatch ran.
        Some(t) if t + 1 < m.intent_unix => {
            return Job::NotOurs(format!(
                "Slurm job {id} `{}` was submitted at {} ({t}), before the run meant to submit its job (unix {}): another job of the same name",
                s.job_name, s.submit_time, m.intent_unix
            ))
        }
        Some(_) => {}
        None => {
            return Job::NotOurs(format!(
                "Slurm job {id} `{}` has no readable SubmitTime (`{}`): its submission cannot be dated",
                s.job_name, s.submit_time
            ))
        }
    }
    if !s.live() {
        return Job::Gone(format!(
            "Slurm job {id} `{}` has ended ({})",
            s.job_name, s.state
        ));
    }
    Job::Own(s)
}

fn run(program: &Path, args: &[&str]) -> Result<std::process::Output, String> {
    Command::new(program)
        .args(args)
        // Times as unix seconds (see [`submit_unix`]); other commands print none bakeoff reads.
        .env("SLURM_TIME_FORMAT", "%s")
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("cannot run `{}`: {e}", program.display()))
}

/// `scontrol show job -o ID`, as [`judge`] takes it.
fn show(m: &SlurmMark, id: &str) -> Result<Option<String>, String> {
    let o = run(&m.tool("scontrol"), &["show", "job", "-o", id])?;
    let err = String::from_utf8_lossy(&o.stderr);
    if !o.status.success() {
        if err.contains("Invalid job id") {
            return Ok(None);
        }
        return Err(format!("scontrol show job {id}: {}", err.trim()));
    }
    Ok(Some(String::from_utf8_lossy(&o.stdout).trim().to_string()))
}

/// Proves (or not) that job `id` is the one `m` records (see [`judge`]).
pub fn prove(m: &SlurmMark, id: &str) -> Job {
    judge(m, id, show(m, id))
}

/// Live jobs Slurm lists under the recorded name (`squeue -h --name N --states=…`): what a run
/// that died before recording the job id may have submitted. Each is then proven by [`prove`].
pub fn named(m: &SlurmMark) -> Result<Vec<String>, String> {
    let o = run(
        &m.tool("squeue"),
        &[
            "-h",
            "--name",
            &m.job_name,
            "--states=PENDING,RUNNING,CONFIGURING,COMPLETING,SUSPENDED",
            "-o",
            "%i",
        ],
    )?;
    if !o.status.success() {
        return Err(format!(
            "squeue --name {}: {}",
            m.job_name,
            String::from_utf8_lossy(&o.stderr).trim()
        ));
    }
    Ok(String::from_utf8_lossy(&o.stdout)
        .lines()
        .map(|l| l.trim().to_string())
        .filter(|l| !l.is_empty())
        .collect())
}

/// What cancelling a proven job did.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct JobStop {
    pub job_id: String,
    /// The scancel commands run, with their errors.
    pub commands: Vec<String>,
    /// The last state Slurm listed (empty: Slurm no longer knows it).
    pub state: String,
    /// Slurm lists it as ended (or no longer knows it).
    pub ended: bool,
    /// The lane port on the job's node answers no more (`None`: not checked).
    pub port_free: Option<bool>,
    /// Where the port was checked.
    pub port_host: Option<String>,
    pub took_ms: f64,
}

fn scancel(m: &SlurmMark, args: &[&str], id: &str) -> String {
    let mut a = args.to_vec();
    a.push(id);
    let shown = format!("scancel {}", a.join(" "));
    match run(&m.tool("scancel"), &a) {
        Ok(o) if o.status.success() => shown,
        Ok(o) => format!(
            "{shown} failed: {}",
            String::from_utf8_lossy(&o.stderr).trim()
        ),
        Err(e) => format!("{shown}: {e}"),
    }
}

/// Polls until job `id` is ended or unknown (true), or `limit` passes (false); its last state.
fn wait_ended(m: &SlurmMark, id: &str, limit: Duration) -> (bool, String) {
    let t0 = Instant::now();
    let mut state = String::new();
    loop {
        match show(m, id) {
            Ok(None) => return (true, String::new()),
            Ok(Some(l)) => {
                if let Some(s) = Seen::parse(&l) {
                    state = s.state.clone();
                    if !s.live() {
                        return (true, state);
                    }
                }
            }
            Err(_) => {}
        }
        if t0.elapsed() >= limit {
            return (false, state);
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// `NodeAddr` of `node` (`scontrol show node -o`), else the node's name.
fn node_addr(m: &SlurmMark, node: &str) -> String {
    run(&m.tool("scontrol"), &["show", "node", "-o", node])
        .ok()
        .filter(|o| o.status.success())
        .and_then(|o| {
            fields(&String::from_utf8_lossy(&o.stdout))
                .get("NodeAddr")
                .cloned()
        })
        .unwrap_or_else(|| node.to_string())
}

/// Cancels job `seen` (proven the run's own by [`prove`]) the Slurm way: `scancel --signal=TERM
/// --full ID`, up to `grace` for it to end, then `scancel ID` and up to 30 s more; then waits (up
/// to 10 s) until nothing answers on `port` of the job's node.
pub fn cancel(m: &SlurmMark, seen: &Seen, grace: Duration, port: u16) -> JobStop {
    let t0 = Instant::now();
    let id = seen.job_id.as_str();
    let mut commands = vec![scancel(m, &["--signal=TERM", "--full"], id)];
    let (mut ended, mut state) = wait_ended(m, id, grace);
    if !ended {
        commands.push(scancel(m, &[], id));
        (ended, state) = wait_ended(m, id, Duration::from_secs(30));
    }
    let port_host = seen.node.as_deref().map(|n| node_addr(m, n));
    let port_free = port_host.as_deref().filter(|_| ended).map(|h| {
        let t = Instant::now();
        loop {
            if super::port_free(h, port) {
                return true;
            }
            if t.elapsed() >= Duration::from_secs(10) {
                return false;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    });
    JobStop {
        job_id: id.to_string(),
        commands,
        state,
        ended,
        port_free,
        port_host,
        took_ms: t0.elapsed().as_secs_f64() * 1e3,
    }
}

/// One open launch of a Slurm job after the run died: the recorded job id proven (scontrol: id,
/// name, uid, submit time) and cancelled; without a recorded id (the run died before sbatch's
/// answer was recorded), the live jobs of the recorded name, each proven the same way (submitted
/// no earlier than the intent). A restored incumbent's own job is kept.
pub(super) fn leftover(m: &SlurmMark, l: &Launch, lane: &LaneFacts) -> Adopted {
    let who = l.who;
    let by_id = !m.job_id.is_empty();
    let ids = if by_id {
        vec![m.job_id.clone()]
    } else {
        match named(m) {
            Ok(ids) if ids.is_empty() => {
                return Adopted {
                    slurm_jobs: Some(json!([])),
                    ..Adopted::said(
                        Some(State::Gone),
                        format!(
                            "{who}: recorded as about to be submitted as Slurm job `{}` (its id was never recorded), and Slurm lists no live job of that name",
                            m.job_name
                        ),
                    )
                };
            }
            Ok(ids) => ids,
            Err(err) => {
                let msg = format!(
                    "{who}: recorded as about to be submitted as Slurm job `{}` (its id was never recorded), and Slurm cannot be asked ({err}); NOT cancelled: if a job of that name is a leftover of this run, cancel it yourself (`squeue --name {}`, then `scancel ID`)",
                    m.job_name, m.job_name
                );
                return Adopted {
                    unproven: vec![msg.clone()],
                    ..Adopted::said(None, msg)
                };
            }
        }
    };
    let mut a = Adopted::default();
    let mut words = Vec::new();
    let mut facts = Vec::new();
    for id in &ids {
        let (w, f) = leftover_job(m, id, by_id, l, lane, &mut a);
        words.push(w);
        facts.push(f);
    }
    a.words = words.join("; ");
    a.slurm_jobs = Some(json!(facts));
    a
}

/// One job of a Slurm launch: proven, then kept (the restored incumbent's) or cancelled. What
/// was done in words, and the facts for the evidence.
fn leftover_job(
    m: &SlurmMark,
    id: &str,
    by_id: bool,
    l: &Launch,
    lane: &LaneFacts,
    a: &mut Adopted,
) -> (String, Value) {
    let who = l.who;
    match prove(m, id) {
        Job::Gone(why) => {
            a.state.get_or_insert(State::Gone);
            (
                format!("{who}: Slurm job {id} is already gone ({why})"),
                json!({"job_id": id, "found": "gone", "why": why}),
            )
        }
        Job::NotOurs(why) => {
            let msg = format!(
                "{who}: Slurm job {id} NOT cancelled: {why}; bakeoff cancels only a job it can prove the dead run submitted (recorded id, name `{}`, uid {}, submitted after the run meant to); if it is a leftover of this run, cancel it yourself (`scancel {id}`)",
                m.job_name, m.uid
            );
            // Found by name only: a job of that name submitted earlier is not this launch's.
            if by_id {
                a.unproven.push(msg.clone());
            }
            a.state.get_or_insert(State::Gone);
            (
                msg,
                json!({"job_id": id, "found": "not-ours", "why": why}),
            )
        }
        Job::Own(seen) if l.restored => (
            format!(
                "{who}: Slurm job {id} `{}` is still {} (proven by its id, name, user and submit time): kept",
                seen.job_name, seen.state
            ),
            json!({"job_id": id, "found": "own", "seen": seen, "kept": true}),
        ),
        Job::Own(seen) => {
            let st = cancel(m, &seen, lane.grace, lane.port);
            let port = match (st.port_free, &st.port_host) {
                (Some(true), Some(h)) => format!("; port {h}:{} is free", lane.port),
                (Some(false), Some(h)) => format!(
                    "; port {h}:{} still answers 10 s after the job ended",
                    lane.port
                ),
                _ => String::new(),
            };
            let words = format!(
                "{who}: Slurm job {id} `{}` ({}, {}, node {}) left running by the dead run (proven by its id, name, user and submit time): {}; Slurm lists it {}{port}",
                seen.job_name,
                seen.state,
                seen.user,
                seen.node.as_deref().unwrap_or("none yet"),
                st.commands.join(", then "),
                if st.state.is_empty() { "no more" } else { &st.state },
            );
            if st.ended {
                a.state = Some(State::StoppedByRecovery);
                a.cancelled_jobs.push(id.to_string());
            } else {
                a.unproven.push(format!(
                    "{who}: Slurm job {id} is still listed as {} after scancel; check it with `squeue -j {id}` and cancel it with `scancel {id}`",
                    st.state
                ));
                a.state = Some(State::Started);
            }
            (
                words,
                json!({"job_id": id, "found": "own", "seen": seen, "cancel": st}),
            )
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;

    const RUNNING: &str = "JobId=41 JobName=bakeoff-c-a UserId=root(0) GroupId=root(0) JobState=RUNNING Reason=None ExitCode=0:0 SubmitTime=2026-12-01T00:18:01 NodeList=vm BatchHost=vm NumNodes=1";

    fn mark() -> SlurmMark {
        SlurmMark {
            job_name: "bakeoff-c-a".into(),
            job_id: "41".into(),
            uid: 0,
            intent_unix: submit_unix("2026-12-01T00:18:01").unwrap(),
            sbatch: "/usr/bin/sbatch".into(),
            node: None,
        }
    }

    #[test]
    fn parses_scontrol_for_the_proof() {
        let s = Seen::parse(RUNNING).unwrap();
        assert_eq!(s.job_id, "41");
        assert_eq!(s.job_name, "bakeoff-c-a");
        assert_eq!(s.user, "root(0)");
        assert_eq!(s.uid, Some(0));
        assert_eq!(s.node.as_deref(), Some("vm"));
        assert!(s.live());
        let p = Seen::parse(
            "JobId=3 JobName=x UserId=ann(1001) JobState=PENDING NodeList=(null) BatchHost=(null)",
        )
        .unwrap();
        assert_eq!((p.uid, p.node.clone()), (Some(1001), None));
        assert!(p.live());
        assert!(!Seen::parse("JobId=3 JobState=CANCELLED").unwrap().live());
        assert!(Seen::parse("JobName=x").is_none());
        assert!(Seen::parse("garbage").is_none());
        assert_eq!(
            submit_unix("2026-12-01T00:18:01")
                .map(|a| a - submit_unix("2026-12-01T00:17:00").unwrap()),
            Some(61)
        );
        assert_eq!(submit_unix("Unknown"), None);
        assert_eq!(submit_unix("1796085857"), Some(1796085857));
        let epoch = RUNNING.replace(
            "SubmitTime=2026-12-01T00:18:01",
            &format!("SubmitTime={}", mark().intent_unix),
        );
        assert!(matches!(judge(&mark(), "41", Ok(Some(epoch))), Job::Own(_)));
    }

    #[test]
    fn only_a_live_job_with_the_recorded_id_name_user_and_time_is_own() {
        let m = mark();
        let ok = |l: &str| Ok(Some(l.to_string()));
        assert!(matches!(judge(&m, "41", ok(RUNNING)), Job::Own(s) if s.job_id == "41"));
        // Still starting, or completing: live, own.
        let pending = RUNNING.replace("JobState=RUNNING", "JobState=PENDING");
        assert!(matches!(judge(&m, "41", ok(&pending)), Job::Own(_)));
        let completing = RUNNING.replace("JobState=RUNNING", "JobState=COMPLETING");
        assert!(matches!(judge(&m, "41", ok(&completing)), Job::Own(_)));
        // The id now names another job (the controller's state was reset).
        let other = RUNNING.replace("JobName=bakeoff-c-a", "JobName=train-llm");
        assert!(
            matches!(judge(&m, "41", ok(&other)), Job::NotOurs(w) if w.contains("reused") && w.contains("train-llm"))
        );
        // Same name, another user.
        let user = RUNNING.replace("UserId=root(0)", "UserId=ann(1001)");
        assert!(matches!(judge(&m, "41", ok(&user)), Job::NotOurs(w) if w.contains("ann(1001)")));
        // Same name and user, submitted before the run meant to submit it.
        let early = RUNNING.replace(
            "SubmitTime=2026-12-01T00:18:01",
            "SubmitTime=2026-11-30T09:00:00",
        );
        assert!(matches!(judge(&m, "41", ok(&early)), Job::NotOurs(w) if w.contains("before")));
        // The submit time rounds down: a second earlier still counts.
        let m2 = SlurmMark {
            intent_unix: m.intent_unix + 1,
            ..m.clone()
        };
        assert!(matches!(judge(&m2, "41", ok(RUNNING)), Job::Own(_)));
        let undated = RUNNING.replace("SubmitTime=2026-12-01T00:18:01", "SubmitTime=Unknown");
        assert!(matches!(judge(&m, "41", ok(&undated)), Job::NotOurs(_)));
        // An answer about another id.
        assert!(matches!(judge(&m, "42", ok(RUNNING)), Job::NotOurs(_)));
        // Ended: gone (nothing to cancel), whatever the state.
        for st in [
            "COMPLETED",
            "CANCELLED",
            "FAILED",
            "TIMEOUT",
            "NODE_FAIL",
            "OUT_OF_MEMORY",
        ] {
            let l = RUNNING.replace("JobState=RUNNING", &format!("JobState={st}"));
            assert!(
                matches!(judge(&m, "41", ok(&l)), Job::Gone(w) if w.contains(st)),
                "{st}"
            );
        }
        // Slurm no longer knows the id.
        assert!(matches!(judge(&m, "41", Ok(None)), Job::Gone(w) if w.contains("no longer knows")));
        // scontrol could not answer, or answered nonsense: never taken for the run's own.
        assert!(matches!(
            judge(&m, "41", Err("Unable to contact slurm controller".into())),
            Job::NotOurs(w) if w.contains("Unable to contact")
        ));
        assert!(matches!(judge(&m, "41", ok("garbage")), Job::NotOurs(_)));
    }

    #[test]
    fn the_tools_come_from_sbatchs_directory() {
        let m = mark();
        assert_eq!(m.tool("scancel"), PathBuf::from("/usr/bin/scancel"));
        let m = SlurmMark {
            sbatch: "sbatch".into(),
            ..m
        };
        assert_eq!(m.tool("scancel"), PathBuf::from("scancel"));
        let i = SlurmMark::intent("n", "/opt/slurm/bin/sbatch");
        // SAFETY: getuid only reads this process's user id.
        assert_eq!(i.uid, unsafe { libc::getuid() });
        assert!(i.job_id.is_empty() && i.intent_unix > 0);
    }
}
