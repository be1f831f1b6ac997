//! `stop-incumbent`: frees the lane by stopping whatever serves it, but only when that process
//! runs the incumbent's recipe (anything else is left alone and said so).

use crate::campaign::fingerprint::fingerprint;
use crate::evidence::bundle;
use crate::lane::{self, procnet};
use crate::run::cx::{Cx, Done, Outcome};
use crate::run::setup::runs_recipe;
use serde_json::json;
use std::time::Duration;

/// `again`: a resumed invocation stops the incumbent its last invocation restored; that stop
/// has its own evidence file, written only when something was stopped.
pub async fn stop(cx: &mut Cx, again: bool) -> Done {
    let inc = cx.incumbent();
    let (host, port) = (cx.c().lane.host.clone(), cx.c().lane.port);
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
