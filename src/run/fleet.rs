//! A multi-lane campaign (docs/fleet.md): its lanes run side by side, one arm per lane at a time,
//! into one bundle.
//!
//! ```text
//! begin: the bundle folder, then per lane (file order): lane_plan ─▶ session::begin_lane
//!        (its lock, its lane record, its preconditions, its folder lanes/<id>/)
//! run:   one thread per lane, each the one-lane runner (run::run) over its own plan, Cx and
//!        Recorder in its folder, all on one cancellation watch
//!        ─▶ fleet_merge::merge (one campaign-result.json, every arm, the lane in every
//!           evidence name) ─▶ one manifest over every file of every lane
//! ```
//!
//! Each lane keeps the lane rule as a one-lane run does: its own lock, launch journal and
//! restoration (the incumbent's lane stops, measures and restores it; a qualification lane has
//! nothing to stop or restore). A signal reaches every lane (one watch), and each lane's runner
//! restores before it returns; a lane whose arm fails goes on, as do the others. The verdict is
//! rendered by the caller from the merged bundle, as for one lane.

use super::fleet_merge::{merge, LaneOutcome};
use super::session::{self, Refused, Session};
use super::{Cancel, Drained, Note, Notify, Options, Outcome};
use crate::campaign::checkpoint::InvocationTiming;
use crate::campaign::{lane_plan, Campaign, Plan};
use crate::evidence::bundle;
use crate::evidence::result::{ArmMove, CampaignResult, LaneRun, RunSpan, ScheduleTiming};
use crate::lane::client_path::ClientPath;
use anyhow::Result;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

/// A multi-lane campaign ready to run: every lane's lock is held for as long as this lives.
pub struct Fleet {
    /// The whole campaign's plan (its schedule says which lane runs which arm).
    pub plan: Plan,
    /// The bundle directory, absolute.
    pub bundle: PathBuf,
    pub lanes: Vec<FleetLane>,
    /// When this invocation began taking its lanes: the schedule's clock starts there.
    pub taken_at: Instant,
}

/// One lane of a [`Fleet`].
pub struct FleetLane {
    pub id: String,
    /// Its session: its plan, its folder of the bundle, its lock.
    pub session: Session,
    /// What its raw logs sit beside (`bundle::lane_beside`).
    pub beside: PathBuf,
    /// Where its client runs, measured when the lane is taken.
    pub client: ClientPath,
}

/// Takes every lane of `c` (a `[[lanes]]` campaign with more than one) for a run into `bundle`:
/// the bundle must be new or empty; each lane's lock, lane record and preconditions as for a
/// one-lane run. Refused: nothing was touched (the folders made here are removed again).
pub fn begin(c: &Campaign, bundle: PathBuf, accept_drift: bool) -> Result<Fleet, Refused> {
    let taken_at = Instant::now();
    let existed = bundle.exists();
    if let Ok(mut rd) = std::fs::read_dir(&bundle) {
        if rd.next().is_some() {
            return Err(format!(
                "output directory {} is not empty (an earlier bundle?); give another --output or remove it",
                bundle.display()
            )
            .into());
        }
    }
    let (plan, lanes) = match begin_lanes(c, &bundle, session::Purpose::Run, accept_drift) {
        Ok(x) => x,
        Err((r, lanes, beside)) => {
            // Nothing ran: the empty folders this made go again (locks drop with `lanes`).
            let made: Vec<PathBuf> = lanes.iter().map(|f| f.beside.clone()).collect();
            drop(lanes);
            for b in made.iter().chain([&beside]) {
                let _ = std::fs::remove_dir(bundle::logs_dir(b));
            }
            if !existed {
                let _ = std::fs::remove_dir_all(&bundle);
            } else {
                let _ = std::fs::remove_dir_all(bundle.join(bundle::LANES_DIR));
            }
            return Err(r);
        }
    };
    Ok(Fleet {
        plan,
        bundle,
        lanes,
        taken_at,
    })
}

/// Begins every lane's session in file order for `purpose`. Refused: the reason tagged with its
/// lane, with the lanes begun before it (their locks still held) and the refused lane's
/// `beside`, so the caller can undo what it made.
#[allow(clippy::type_complexity)]
pub(super) fn begin_lanes(
    c: &Campaign,
    bundle: &Path,
    purpose: session::Purpose,
    accept_drift: bool,
) -> Result<(Plan, Vec<FleetLane>), (Refused, Vec<FleetLane>, PathBuf)> {
    let plan = crate::campaign::plan(c);
    let me = crate::telemetry::host::hostname();
    let mut lanes = Vec::new();
    for l in c.lanes() {
        let beside = bundle::lane_beside(bundle, &l.id);
        let dir = bundle.join(bundle::lane_dir(&l.id));
        let lp = lane_plan(c, &plan.schedule, &l.id).expect("every lane of the campaign");
        match session::begin_lane_for(lp, dir, &beside, purpose, accept_drift) {
            Ok(s) => lanes.push(FleetLane {
                id: l.id.clone(),
                session: s,
                beside,
                client: client_path(c, &me, &l.lane),
            }),
            Err(mut r) => {
                r.message = format!("lane {}: {}", l.id, r.message);
                return Err((r, lanes, beside));
            }
        }
    }
    Ok((plan, lanes))
}

/// Where lane `lane`'s client runs: on its Slurm node (each timed step a job step beside the
/// arm, `run::client_node`), or here, measured as same-host or over the network.
fn client_path(c: &Campaign, me: &str, lane: &crate::campaign::Lane) -> ClientPath {
    match &lane.slurm_node {
        Some(node) if c.client_on_node(lane) => ClientPath {
            host: node.clone(),
            mode: crate::lane::client_path::NODE.into(),
            ..Default::default()
        },
        _ => crate::lane::client_path::measure(me, &lane.host, lane.port),
    }
}

impl Fleet {
    /// Lines for the bundle's notes, per lane (a stale lock taken over, a lane record's word).
    pub fn notes(&self) -> Vec<String> {
        self.lanes
            .iter()
            .flat_map(|l| {
                l.session
                    .notes()
                    .into_iter()
                    .map(move |n| format!("lane {}: {n}", l.id))
            })
            .collect()
    }
}

/// `notify` with every line tagged by the lane; a lane's end is not the run's end (the fleet
/// says [`Note::Finished`] once, when every lane is done).
fn tagged(notify: &Notify, lane: &str) -> Notify {
    let n = notify.clone();
    let lane = lane.to_string();
    Arc::new(move |note: Note<'_>| match note {
        Note::Step {
            done,
            total,
            this_run,
            what,
        } => {
            let what = format!("lane {lane}: {what}");
            n(Note::Step {
                done,
                total,
                this_run,
                what: &what,
            })
        }
        Note::Warning(m) => n(Note::Warning(&format!("lane {lane}: {m}"))),
        Note::Finished => {}
    })
}

/// What a lane's thread hands back.
type LaneEnd = Result<Outcome>;

/// One run on a lane: the lane's own plan, or arms moved onto it from a drained lane.
pub(super) struct Unit {
    /// Its lane (an index into `Fleet::lanes`).
    pub lane: usize,
    pub plan: Plan,
    /// Its folder of the bundle (`lanes/<id>`, or `lanes/<id>.moved-<n>`).
    pub folder: String,
    /// The drained lane its arms come from (a moved run).
    pub moved_from: Option<String>,
}

impl Unit {
    fn dir(&self, f: &Fleet) -> PathBuf {
        f.bundle.join(&self.folder)
    }

    /// What its raw logs sit beside (`bundle::lane_beside` of its folder's name).
    fn beside(&self, f: &Fleet) -> PathBuf {
        let name = self.folder.rsplit('/').next().unwrap_or_default();
        bundle::lane_beside(&f.bundle, name)
    }

    /// Its record in the bundle's result, before its outcome is known.
    pub(super) fn record(&self, f: &Fleet) -> LaneRun {
        let l = &f.lanes[self.lane];
        match &self.moved_from {
            None => lane_run(l),
            Some(from) => LaneRun {
                folder: self.folder.clone(),
                arms: self.plan.arm_ids().iter().map(|a| a.to_string()).collect(),
                incumbent: self
                    .plan
                    .restores()
                    .then(|| lane_run(l).incumbent)
                    .flatten(),
                moved_from: Some(from.clone()),
                ..lane_run(l)
            },
        }
    }
}

/// Starts `u` (the `k`-th unit) on a thread and runtime of its own; its end comes on `tx`.
fn spawn(
    f: &Fleet,
    u: &Unit,
    k: usize,
    resume: bool,
    ctx: (&Notify, &Cancel),
    tx: tokio::sync::mpsc::UnboundedSender<(usize, LaneEnd)>,
) -> Result<()> {
    let (notify, cancel) = ctx;
    let l = &f.lanes[u.lane];
    let own = u.moved_from.is_none();
    let dir = u.dir(f);
    // A lane's own folder is made by its session; a moved run's here.
    std::fs::create_dir_all(&dir)?;
    let opts = Options {
        // A lane whose run never opened its folder starts it now.
        resume: resume && dir.join(bundle::CHECKPOINT).is_file(),
        bundle: dir,
        notify: tagged(notify, &l.id),
        cancel: cancel.clone(),
        notes: if own { l.session.notes() } else { Vec::new() },
        recovery: if own {
            l.session.recovery.clone()
        } else {
            None
        },
        logs_beside: Some(u.beside(f)),
        lane_probe: Some(super::fleet_drain::probe(&f.plan.campaign, &l.id)),
    };
    let plan = u.plan.clone();
    std::thread::Builder::new()
        .name(format!("lane-{}", l.id))
        .spawn(move || {
            let end = match crate::load::pace::client_runtime() {
                Ok(rt) => rt.block_on(super::run(plan, opts)),
                Err(e) => Err(anyhow::anyhow!("cannot start the lane's runtime: {e}")),
            };
            let _ = tx.send((k, end));
        })?;
    Ok(())
}

/// Runs every lane at once (one thread and runtime per lane, as a one-lane run has), then
/// merges their results into the bundle's one `campaign-result.json` and seals it with one
/// manifest. Never returns before every lane's runner returned (each restores before it does).
/// A lane that dies is drained (`fleet_drain`): its arms run again, each from its start, on
/// the first live lane that is idle, in a folder of their own. `resume` (`bakeoff run
/// --resume`, `fleet_resume::begin_again`): each run (a lane's own, a moved one) goes on from
/// its own checkpoint, one per lane at a time; a complete or drained one is not run again, and
/// arms no live lane was left for are moved now.
pub async fn run(f: &Fleet, notify: Notify, cancel: Cancel, resume: bool) -> Result<Outcome> {
    // The lanes were taken before this: their time is the schedule's too.
    let t0 = f.taken_at;
    let prev = if resume { read_result(&f.bundle) } else { None };
    let base = first_files(f, resume)?;
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<(usize, LaneEnd)>();
    let mut units = units_of(f, prev.as_ref());
    let mut moves: Vec<ArmMove> = Vec::new();
    // A drained run's lane, its folder, and what it hands on.
    let mut queue: Vec<(usize, String, Drained)> = Vec::new();
    for m in prev.iter().flat_map(|p| &p.moves) {
        if m.to.is_some() {
            moves.push(m.clone());
            continue;
        }
        let from = f.lanes.iter().position(|l| l.id == m.from).unwrap_or(0);
        match queue.iter_mut().find(|q| q.1 == m.left_in) {
            Some(q) => q.2.arms.push(m.arm.clone()),
            None => queue.push((
                from,
                m.left_in.clone(),
                Drained {
                    cause: m.cause.clone(),
                    arms: vec![m.arm.clone()],
                },
            )),
        }
    }
    let mut ends: Vec<Option<LaneEnd>> = Vec::new();
    let mut waiting = Vec::new();
    for (k, u) in units.iter().enumerate() {
        let dir = u.dir(f);
        let drained_before = prev
            .iter()
            .flat_map(|p| &p.moves)
            .any(|m| m.left_in == u.folder);
        let done = if drained_before {
            // Its arms moved on: it is not run again.
            lane_outcome(&dir)
        } else {
            complete_lane(&dir).filter(|_| resume)
        };
        ends.push(done.map(Ok));
        if ends[k].is_none() {
            waiting.push(k);
        }
    }
    let mut busy = vec![false; f.lanes.len()];
    let mut dead = vec![false; f.lanes.len()];
    let restores: Vec<bool> = f.lanes.iter().map(|l| l.session.plan.restores()).collect();
    let mut running = 0usize;
    // (unit, start, end) of each run this invocation started, in ms since t0.
    let mut spans: Vec<(usize, f64, Option<f64>)> = Vec::new();
    loop {
        let go = cancel.borrow().is_none();
        // Runs waiting for their lane (a resume: a lane's own and a moved one), one at a time.
        for k in waiting.clone() {
            let l = units[k].lane;
            if go && !busy[l] && !dead[l] {
                spawn(f, &units[k], k, resume, (&notify, &cancel), tx.clone())?;
                spans.push((k, ms_since(t0), None));
                waiting.retain(|w| *w != k);
                busy[l] = true;
                running += 1;
            }
        }
        while go && !queue.is_empty() {
            let Some(to) = super::fleet_drain::pick(&restores, &busy, &dead) else {
                break;
            };
            let (from, left_in, d) = queue.remove(0);
            let u = moved_unit(f, &units, to, from, &d.arms);
            for a in &d.arms {
                moves.push(ArmMove {
                    arm: a.clone(),
                    from: f.lanes[from].id.clone(),
                    to: Some(f.lanes[to].id.clone()),
                    folder: Some(u.folder.clone()),
                    cause: d.cause.clone(),
                    left_in: left_in.clone(),
                });
            }
            notify(Note::Warning(&format!(
                "lane {} drained ({}): arm(s) {} move to lane {} ({})",
                f.lanes[from].id,
                d.cause,
                d.arms.join(", "),
                f.lanes[to].id,
                u.folder
            )));
            units.push(u);
            ends.push(None);
            running_record(f, &units, &moves);
            let k = units.len() - 1;
            spawn(f, &units[k], k, false, (&notify, &cancel), tx.clone())?;
            spans.push((k, ms_since(t0), None));
            busy[to] = true;
            running += 1;
        }
        if running == 0 {
            break;
        }
        let Some((k, end)) = rx.recv().await else {
            break;
        };
        running -= 1;
        if let Some(sp) = spans.iter_mut().find(|sp| sp.0 == k) {
            sp.2 = Some(ms_since(t0));
        }
        let lane = units[k].lane;
        busy[lane] = false;
        match &end {
            Ok(o) if o.drained.is_some() => {
                dead[lane] = true;
                let d = o.drained.clone().expect("checked");
                if !d.arms.is_empty() {
                    queue.push((lane, units[k].folder.clone(), d));
                }
            }
            Ok(_) => {}
            // A lane whose runner failed takes no other lane's arms.
            Err(_) => dead[lane] = true,
        }
        ends[k] = Some(end);
    }
    unplaced(f, queue, &mut moves);
    notify(Note::Finished);
    let runs = run_spans(f, &units, &spans);
    let earlier = prev.map(|p| p.schedule_timing).unwrap_or_default();
    let ends = units
        .iter()
        .zip(ends)
        .map(|(u, e)| {
            let e = e.unwrap_or_else(|| {
                Err(anyhow::anyhow!(if cancel.borrow().is_some() {
                    "not run: a signal came before its lane was free"
                } else {
                    "not run: its lane was drained before its turn came"
                }))
            });
            (u.record(f), e)
        })
        .collect();
    Ok(seal(f, base, ends, moves, (t0, earlier, runs)))
}

/// Arms no live lane was left for (or a signal came first): recorded as moves, not run.
fn unplaced(f: &Fleet, queue: Vec<(usize, String, Drained)>, moves: &mut Vec<ArmMove>) {
    for (from, left_in, d) in queue {
        for a in d.arms {
            moves.push(ArmMove {
                arm: a,
                from: f.lanes[from].id.clone(),
                to: None,
                folder: None,
                cause: d.cause.clone(),
                left_in: left_in.clone(),
            });
        }
    }
}

/// The spans of the runs this invocation started (`(unit, start, end)` in ms since it began).
fn run_spans(f: &Fleet, units: &[Unit], spans: &[(usize, f64, Option<f64>)]) -> Vec<RunSpan> {
    spans
        .iter()
        .map(|&(k, start_ms, end)| RunSpan {
            lane: f.lanes[units[k].lane].id.clone(),
            folder: units[k].folder.clone(),
            start_ms,
            end_ms: end.unwrap_or(start_ms),
        })
        .collect()
}

/// The run of arms `arms`, moved from lane `from`, on lane `to`: its plan and its folder
/// (`lanes/<to>.moved-<n>`, the lane's n-th).
fn moved_unit(f: &Fleet, units: &[Unit], to: usize, from: usize, arms: &[String]) -> Unit {
    let (to_id, from_id) = (&f.lanes[to].id, &f.lanes[from].id);
    let n = 1 + units
        .iter()
        .filter(|u| u.lane == to && u.moved_from.is_some())
        .count();
    let c = &f.plan.campaign;
    Unit {
        lane: to,
        plan: crate::campaign::lane_plan::moved_plan(c, &f.plan.schedule, to_id, arms, from_id)
            .expect("every lane of the campaign"),
        folder: bundle::moved_dir(to_id, n),
        moved_from: Some(from_id.clone()),
    }
}

/// Every run of the bundle: each lane's own (file order), then the moved runs `prev` (the
/// bundle's result, on a resume or a recovery) lists, each with the plan it ran.
pub(super) fn units_of(f: &Fleet, prev: Option<&CampaignResult>) -> Vec<Unit> {
    let mut units: Vec<Unit> = f
        .lanes
        .iter()
        .enumerate()
        .map(|(i, l)| Unit {
            lane: i,
            plan: l.session.plan.clone(),
            folder: bundle::lane_dir(&l.id),
            moved_from: None,
        })
        .collect();
    let Some(prev) = prev else { return units };
    for r in &prev.lanes {
        let (Some(from), Some(i)) = (&r.moved_from, f.lanes.iter().position(|l| l.id == r.id))
        else {
            continue;
        };
        let arms: Vec<String> = prev
            .moves
            .iter()
            .filter(|m| m.folder.as_deref() == Some(r.folder.as_str()))
            .map(|m| m.arm.clone())
            .collect();
        let c = &f.plan.campaign;
        if let Some(plan) =
            crate::campaign::lane_plan::moved_plan(c, &f.plan.schedule, &r.id, &arms, from)
        {
            units.push(Unit {
                lane: i,
                plan,
                folder: r.folder.clone(),
                moved_from: Some(from.clone()),
            });
        }
    }
    units
}

/// While moved runs go on: the bundle's result lists every run's folder and the moves, so a
/// recovery after bakeoff died finds each run's launch journal.
fn running_record(f: &Fleet, units: &[Unit], moves: &[ArmMove]) {
    if let Some(mut r) = read_result(&f.bundle) {
        r.lanes = units.iter().map(|u| u.record(f)).collect();
        r.moves = moves.to_vec();
        if let Ok(t) = serde_json::to_string_pretty(&r) {
            let _ = crate::evidence::write_atomic(
                &f.bundle.join(bundle::RESULT),
                (t + "\n").as_bytes(),
            );
        }
    }
}

/// The bundle's own first files (the campaign copy, the environment, the plan with its
/// schedule; a resume keeps the first invocation's) and the result a one-lane run of the whole
/// campaign starts from, written as `running` so that a bundle left by a dead run says so.
fn first_files(f: &Fleet, resume: bool) -> Result<CampaignResult> {
    let c = &f.plan.campaign;
    let mask = crate::campaign::Mask::from_process_env(c);
    let write = |name: &str, v: &serde_json::Value| -> Result<()> {
        let text = serde_json::to_string_pretty(v)? + "\n";
        crate::evidence::write_atomic(&f.bundle.join(name), mask.scrub(&text).as_bytes())?;
        Ok(())
    };
    let mut base = base(f);
    if !resume {
        std::fs::create_dir_all(&f.bundle)?;
        let src = std::fs::read(&c.source.path)?;
        crate::evidence::write_atomic(&f.bundle.join(bundle::CAMPAIGN_COPY), &src)?;
        write(bundle::ENVIRONMENT, &super::first_records::environment(c))?;
        let lanes: Vec<serde_json::Value> = f
            .lanes
            .iter()
            .map(|l| serde_json::json!({"lane": l.id, "folder": bundle::lane_dir(&l.id)}))
            .collect();
        write(
            bundle::PLAN,
            &serde_json::json!({
                "campaign_id": c.campaign.id,
                "schedule": f.plan.schedule,
                "lanes": lanes,
            }),
        )?;
    }
    let running = format!(
        "running (pid {}): when no such bakeoff process runs, it died before sealing the bundle; each lane's folder says what it started (its launch journal)",
        std::process::id()
    );
    base.incomplete_reason = Some(running.clone());
    // The lanes are listed from the start, so a bundle left by a dead run is known as a
    // multi-lane one (the commands not built for those refuse it by this list).
    base.lanes = f
        .lanes
        .iter()
        .map(|l| {
            let mut run = lane_run(l);
            run.incomplete_reason = Some(running.clone());
            run
        })
        .collect();
    write(bundle::RESULT, &serde_json::to_value(&base)?)?;
    base.incomplete_reason = None;
    base.lanes.clear();
    Ok(base)
}

fn ms_since(t0: Instant) -> f64 {
    t0.elapsed().as_secs_f64() * 1e3
}

/// The lanes' outcomes merged, written and sealed; the run's outcome.
fn seal(
    f: &Fleet,
    base: CampaignResult,
    ends: Vec<(LaneRun, LaneEnd)>,
    moves: Vec<ArmMove>,
    schedule: (Instant, Vec<ScheduleTiming>, Vec<RunSpan>),
) -> Outcome {
    let (t0, earlier, runs) = schedule;
    let mut invocation = 1;
    let mut lanes = Vec::new();
    let mut interrupted = Vec::new();
    let (mut engine, mut measure, mut overhead, mut lane_total) = (0.0, 0.0, 0.0, 0.0);
    for (run, end) in ends {
        match end {
            Ok(o) => {
                invocation = invocation.max(o.timing.invocation);
                engine += o.timing.engine_lifecycle_ms;
                measure += o.timing.measurement_ms;
                overhead += o.timing.overhead_ms;
                lane_total += o.timing.total_ms;
                if let Some(i) = &o.interrupted {
                    interrupted.push(format!("lane {}: {i}", run.id));
                }
                lanes.push(LaneOutcome {
                    lane: run,
                    result: Some(o.result),
                    error: None,
                });
            }
            Err(e) => lanes.push(LaneOutcome {
                lane: run,
                result: None,
                error: Some(format!("{e:#}")),
            }),
        }
    }
    let control = f.plan.campaign.control_arm().map(|a| a.id.as_str());
    let mut result = merge(base, lanes, control, moves);
    result.updated_at = crate::clock::wall_rfc3339();
    // A resume's invocation number is its lanes' (each counts its own invocations).
    invocation = invocation.max(earlier.last().map_or(0, |t| t.invocation + 1));
    result.schedule_timing = earlier;
    result
        .schedule_timing
        .push(ScheduleTiming::of(invocation, ms_since(t0), runs));
    if let Err(e) = write_sealed(f, &result) {
        result.complete = false;
        result.incomplete_reason = Some(format!(
            "the bundle could not be sealed ({e:#}); its lanes' folders hold their evidence"
        ));
    }
    let total_ms = t0.elapsed().as_secs_f64() * 1e3;
    let timing = InvocationTiming {
        invocation,
        started_at: result.started_at.clone(),
        total_ms,
        engine_lifecycle_ms: engine,
        measurement_ms: measure,
        overhead_ms: overhead,
        // Of the lanes' own time (lane-seconds): the lanes overlap, so of the wall time it
        // would say nothing.
        overhead_fraction: if lane_total > 0.0 {
            overhead / lane_total
        } else {
            0.0
        },
        outcome: result
            .incomplete_reason
            .clone()
            .unwrap_or_else(|| "complete".into()),
    };
    Outcome {
        complete: result.complete,
        interrupted: (!interrupted.is_empty()).then(|| interrupted.join("; ")),
        result,
        timing,
        drained: None,
    }
}

/// The result the bundle's merge starts from: the whole campaign's, every arm pending, its
/// start the first invocation's (kept from the bundle's result when there is one).
pub(super) fn base(f: &Fleet) -> CampaignResult {
    let mut b = super::first_records::new_result(&f.plan);
    if let Some(r) = read_result(&f.bundle) {
        b.started_at = r.started_at;
    }
    // The nodes Slurm granted (`[fleet.slurm]`), as recorded before any arm started.
    b.slurm_allocation = crate::evidence::allocation::read(&f.bundle).ok().flatten();
    b
}

pub(super) fn read_result(dir: &Path) -> Option<CampaignResult> {
    serde_json::from_slice(&std::fs::read(dir.join(bundle::RESULT)).ok()?).ok()
}

/// A lane whose own result says complete: its outcome as the run hands it to the merge (the
/// lane is not run again on a resume).
pub(super) fn complete_lane(dir: &Path) -> Option<Outcome> {
    lane_outcome(dir).filter(|o| o.complete)
}

/// A run's outcome as its own result says it (a drained or complete run not run again).
fn lane_outcome(dir: &Path) -> Option<Outcome> {
    let r = read_result(dir)?;
    Some(Outcome {
        complete: r.complete,
        interrupted: None,
        result: r,
        timing: InvocationTiming::default(),
        drained: None,
    })
}

/// Writes the merged result (and `lane-spread.json` when the lanes measured one) at the top of
/// the bundle, then one manifest over every file of every lane.
pub(super) fn write_sealed(f: &Fleet, result: &CampaignResult) -> Result<()> {
    let mask = crate::campaign::Mask::from_process_env(&f.plan.campaign);
    if let Some(s) = &result.lane_spread {
        let t = serde_json::to_string_pretty(s)? + "\n";
        crate::evidence::write_atomic(
            &f.bundle.join(crate::evidence::lane_spread::FILE),
            t.as_bytes(),
        )?;
    }
    let t = serde_json::to_string_pretty(result)? + "\n";
    crate::evidence::write_atomic(&f.bundle.join(bundle::RESULT), mask.scrub(&t).as_bytes())?;
    crate::evidence::manifest::write(&f.bundle)?;
    Ok(())
}

/// The folder of the lane whose incumbent the run restored (where `restoration-launch.json` is).
pub fn incumbent_folder(bundle_dir: &Path, f: &Fleet) -> Option<PathBuf> {
    f.lanes
        .iter()
        .find(|l| l.session.plan.restores())
        .map(|l| bundle_dir.join(bundle::lane_dir(&l.id)))
}

/// A lane's record in the bundle's result, before its outcome is known.
pub(super) fn lane_run(l: &FleetLane) -> LaneRun {
    let queue = &l.session.plan.schedule.lanes[0];
    LaneRun {
        id: l.id.clone(),
        address: queue.address.clone(),
        incumbent: queue.incumbent.clone(),
        folder: bundle::lane_dir(&l.id),
        arms: queue.arms.iter().map(|a| a.arm.clone()).collect(),
        client: Some(l.client.clone()),
        ..Default::default()
    }
}
