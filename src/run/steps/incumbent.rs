//! `stop-incumbent`: frees the lane by stopping whatever serves it, but only when that process
//! runs the incumbent's recipe (anything else is left alone and said so).

use crate::campaign::fingerprint::fingerprint;
use crate::evidence::bundle;
use crate::lane::{self, procnet};
use crate::run::context::Cx;
use crate::run::launch::runs_recipe;
use crate::run::step_outcome::{Done, Outcome};
use serde_json::json;
use std::time::Duration;

/// `again`: a resumed invocation stops the incumbent its last invocation restored; that stop
/// has its own evidence file, written only when something was stopped.
pub async fn stop(cx: &mut Cx, again: bool) -> Done {
    let inc = cx.incumbent();
    let (host, port) = (cx.c().lane.host.clone(), cx.c().lane.port);
    if inc.recipe().job_name().is_some() {
        return stop_jobs(cx, again).await;
    }
    let listeners = procnet::find_listeners(port);
    let Some(l) = listeners.first().cloned() else {
        let free = lane::port_free(&host, port);
        let ev = json!({
            "incumbent": inc.id,
            "listening": !free,
            "detail": if free { "nothing listened on the lane port: the incumbent was not running, nothing to stop" }
                      else { "the lane port is taken but no process could be identified" },
            "at": crate::clock::wall_rfc3339(),
            "recipe_fingerprint": fingerprint(cx.c(), &inc, None),
        });
        return done(again, ev, false, cx);
    };
    let lc = cx.c().launch_command(&inc);
    let matches = runs_recipe(cx.c(), &inc, &l);
    let mut ev = json!({
        "incumbent": inc.id,
        "listening": true,
        "process": l,
        "recipe_argv": lc.as_ref().map(|lc| lc.start.argv.clone()),
        "cmdline_matches_recipe": matches,
        "at": crate::clock::wall_rfc3339(),
    });
    // What the recipe depends on as it stops (files, env digests of the process that served):
    // the restoration identity compares against it.
    let environ = matches.then(|| procnet::environ(l.pid)).flatten();
    ev["recipe_fingerprint"] = json!(fingerprint(cx.c(), &inc, environ.as_deref()));
    if !matches {
        ev["detail"] = json!(
            "the process on the lane port does not run the incumbent's recipe; it was left alone"
        );
        return done(again, ev, false, cx);
    }
    let st = procnet::stop_foreign(&l, cx.lane.stop_grace).await;
    // Test-only: the incumbent is stopped, the step not yet recorded.
    crate::run::testhook::pause("incumbent-stopped").await;
    let free = lane::wait_port_free(&host, port, Duration::from_secs(10)).await;
    cx.rec.checkpoint().incumbent_shutdowns += 1;
    ev["stop"] = json!(st);
    ev["port_free"] = json!(free);
    ev["detail"] = json!(format!(
        "stopped pid {} ({}): SIGTERM{}; port {}",
        l.pid,
        st.target,
        if st.sigkill_sent {
            ", then SIGKILL"
        } else {
            ""
        },
        if free { "free" } else { "still taken" }
    ));
    done(again, ev, true, cx)
}

/// An incumbent that runs as scheduler jobs (a Slurm one): its running jobs (found by job name)
/// are cancelled the Slurm way (`scancel --signal=TERM --full`, then `scancel` after the grace).
async fn stop_jobs(cx: &mut Cx, again: bool) -> Done {
    let inc = cx.incumbent();
    let (host, port) = (cx.c().lane.host.clone(), cx.c().lane.port);
    let lc = cx.c().launch_command(&inc);
    let sbatch = lc
        .as_ref()
        .map(|l| l.start.argv[0].clone())
        .unwrap_or_default();
    let job_name = inc.recipe().job_name().unwrap_or_default().to_string();
    let jobs = lane::slurm::jobs_named(&sbatch, &job_name);
    let mut ev = json!({
        "incumbent": inc.id,
        "slurm_job_name": job_name,
        "at": crate::clock::wall_rfc3339(),
    });
    let jobs = match jobs {
        Ok(j) => j,
        Err(e) => {
            ev["detail"] = json!(format!(
                "could not list the incumbent's Slurm jobs ({e}); nothing stopped"
            ));
            return done(again, ev, false, cx);
        }
    };
    ev["jobs"] = json!(jobs
        .iter()
        .map(|(id, st, node)| json!({"job_id": id, "state": st, "node": node}))
        .collect::<Vec<_>>());
    if jobs.is_empty() {
        ev["detail"] = json!(format!(
            "no Slurm job named {job_name} was running or pending: the incumbent was not running, nothing to stop"
        ));
        return done(again, ev, false, cx);
    }
    let mut stops = Vec::new();
    let mut words = Vec::new();
    for (id, _, _) in &jobs {
        let (job, detail, gone) = lane::slurm::stop_job(&sbatch, id, cx.lane.stop_grace).await;
        words.push(format!(
            "job {id}: {}",
            if gone { "ended" } else { "still listed" }
        ));
        stops.push(json!({"job": job, "detail": detail, "ended": gone}));
    }
    let free = lane::wait_port_free(&host, port, Duration::from_secs(10)).await;
    cx.rec.checkpoint().incumbent_shutdowns += 1;
    ev["stop"] = json!(stops);
    ev["port_free"] = json!(free);
    ev["detail"] = json!(format!(
        "cancelled the incumbent's Slurm job(s) with scancel --signal=TERM --full (scancel after the grace): {}; port {}",
        words.join(", "),
        if free { "free" } else { "still taken" }
    ));
    done(again, ev, true, cx)
}

fn done(again: bool, ev: serde_json::Value, stopped: bool, cx: &Cx) -> Done {
    if !again {
        return Done::ok(ev);
    }
    Done {
        outcome: Outcome::Ok,
        evidence: stopped.then_some(ev),
        file: Some(bundle::incumbent_shutdown_resume(cx.rec.invocation())),
    }
}
