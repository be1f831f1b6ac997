//! Before anything is launched: the suites load, the lane port is free or serves the incumbent,
//! the output directory is usable. Each refusal is one line naming what to change.

use super::launch::runs_recipe;
use crate::campaign::{Mask, Plan, StepKind};
use crate::evidence::bundle;
use crate::gates::{self, Check};
use crate::lane::{self, procnet};
use std::path::Path;

/// What listens on the lane port before the campaign starts.
#[derive(Debug, Clone)]
pub enum PortState {
    Free,
    Incumbent(procnet::Listener),
    /// A Slurm incumbent serving on another host (a Slurm lane's node): its running job,
    /// `JOBID on NODE`.
    IncumbentJob(String),
}

/// Checks that must pass before anything is launched. Each error is one line.
pub fn preconditions(plan: &Plan, bundle: &Path, resume: bool) -> Result<PortState, String> {
    preconditions_beside(plan, bundle, bundle, resume)
}

/// [`preconditions`] for a bundle whose raw logs go beside `beside` (a lane folder of a
/// multi-lane bundle: beside the whole bundle, never in it).
pub fn preconditions_beside(
    plan: &Plan,
    bundle: &Path,
    beside: &Path,
    resume: bool,
) -> Result<PortState, String> {
    let c = &plan.campaign;
    // Suites load before any arm starts.
    suites(plan)?;
    if lane::port_free(&c.lane.host, c.lane.port) {
        return output_ok(bundle, beside, resume).map(|_| PortState::Free);
    }
    if !plan.restores() {
        let who = procnet::find_listeners(c.lane.port)
            .first()
            .map(|l| format!(" (pid {})", l.pid))
            .unwrap_or_default();
        return Err(format!(
            "port {}:{} of a qualification lane (no incumbent) is in use{who}; nothing may serve it before the campaign: stop it or give the lane another port",
            c.lane.host, c.lane.port
        ));
    }
    let inc = c.incumbent();
    let listeners = procnet::find_listeners(c.lane.port);
    let Some(l) = listeners.first() else {
        // A Slurm incumbent serves on its node, not on this host: its running job is what
        // serves the lane (the stop finds it by its name too).
        let running = super::launch::slurm_jobs(c, inc)
            .into_iter()
            .find(|(_, state, _)| state == "RUNNING");
        if let Some((id, _, node)) = running.filter(|_| inc.recipe().job_name().is_some()) {
            output_ok(bundle, beside, resume)?;
            return Ok(PortState::IncumbentJob(format!("job {id} on {node}")));
        }
        return Err(format!(
            "port {}:{} is in use by something that is not the incumbent (a process bakeoff cannot identify); stop it or give the lane another port",
            c.lane.host, c.lane.port
        ));
    };
    if !(inc.kind().managed() && runs_recipe(c, inc, l)) {
        let mask = Mask::from_process_env(c);
        return Err(mask.scrub(&format!(
            "port {}:{} is in use by something that is not the incumbent `{}` (pid {}: {}); stop it or give the lane another port",
            c.lane.host,
            c.lane.port,
            inc.id,
            l.pid,
            l.cmdline.join(" ")
        )));
    }
    output_ok(bundle, beside, resume)?;
    Ok(PortState::Incumbent(l.clone()))
}

fn output_ok(bundle: &Path, beside: &Path, resume: bool) -> Result<(), String> {
    // Output directory: creatable, writable, and not an existing bundle unless resuming.
    if bundle.exists() && !bundle.is_dir() {
        return Err(format!(
            "output {} exists and is not a directory; give another --output",
            bundle.display()
        ));
    }
    if !resume {
        if let Ok(mut rd) = std::fs::read_dir(bundle) {
            if rd.next().is_some() {
                return Err(format!(
                    "output directory {} is not empty (an earlier bundle?); give another --output, remove it, or continue it with --resume {}",
                    bundle.display(),
                    bundle.display()
                ));
            }
        }
    }
    std::fs::create_dir_all(bundle).map_err(|e| {
        format!(
            "cannot create the output directory {}: {e}; give a writable --output",
            bundle.display()
        )
    })?;
    let probe = bundle.join(".bakeoff-write-probe");
    std::fs::write(&probe, b"probe").map_err(|e| {
        format!(
            "the output directory {} is not writable ({e}); give a writable --output",
            bundle.display()
        )
    })?;
    let _ = std::fs::remove_file(&probe);
    let d = bundle::logs_dir(beside);
    std::fs::create_dir_all(&d).map_err(|e| {
        format!(
            "cannot create {} ({e}) next to the output directory; give a writable --output",
            d.display()
        )
    })?;
    // Raw engine logs may hold unmasked secrets: their directory is the owner's only.
    {
        use std::os::unix::fs::PermissionsExt;
        let _ = std::fs::set_permissions(&d, std::fs::Permissions::from_mode(0o700));
    }
    Ok(())
}

/// Loads the tools and quality suites the plan's steps name (so a bad suite stops the run before
/// any arm starts).
pub fn suites(plan: &Plan) -> Result<(Option<Check>, Option<Check>), String> {
    let (mut tools, mut quality) = (None, None);
    for s in &plan.steps {
        match &s.kind {
            StepKind::Tools {
                suite,
                batch,
                variants,
            } if tools.is_none() => {
                let suite = gates::builtin::load_tools(suite.as_deref())
                    .map_err(|e| format!("tools suite refused: {e}"))?;
                let variants = variants
                    .iter()
                    .map(|v| gates::ToolVariant::parse(v.as_str()))
                    .collect::<Result<Vec<_>, _>>()?;
                tools = Some(Check::Tools(gates::ToolsCheck::new(
                    suite,
                    *batch as usize,
                    variants,
                )?));
            }
            StepKind::Quality {
                suite,
                repetitions,
                reasoning_headroom,
            } if quality.is_none() => {
                let suite = gates::builtin::load_quality(suite.as_deref())
                    .map_err(|e| format!("quality suite refused: {e}"))?;
                let mut qc = gates::QualityCheck::new(suite, *repetitions);
                qc.reasoning_headroom = *reasoning_headroom;
                quality = Some(Check::Quality(qc));
            }
            _ => {}
        }
    }
    Ok((tools, quality))
}
