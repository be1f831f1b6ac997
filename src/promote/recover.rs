//! `bakeoff recover DIR` on a promotion folder: after bakeoff died mid-promotion (or after a
//! rollback that failed), bring the lane to a proven state. What the folder's launch journal
//! proves the dead promotion started (the winner) is stopped, by the run's own recovery code;
//! what it cannot prove is left alone and named; then the incumbent is restored and proven
//! exactly as a rollback does. It never guesses: a winner that was not yet promoted is never
//! kept (the bake did not hold), and a promotion that ended is left as it is.

use super::record::{Folder, Phase};
use super::txn;
use super::{Outcome, Say};
use crate::campaign::fingerprint::Fingerprint;
use crate::campaign::Campaign;
use crate::evidence::bundle;
use crate::lane::procnet;
use crate::lane::resident::{self, SetBy};
use serde_json::json;
use std::path::Path;

pub async fn recover(dir: &Path, c: &Campaign, say: Say) -> anyhow::Result<Outcome> {
    let mut f = Folder::open(dir)?;
    if matches!(f.rec.phase, Phase::Promoted | Phase::RolledBack) {
        return Ok(Outcome {
            phase: f.rec.phase,
            why: format!(
                "nothing to recover: this promotion ended ({}: {})",
                f.rec.phase.as_str(),
                f.rec.why
            ),
            root_digest: String::new(),
            restart: Vec::new(),
        });
    }
    let _lock = txn::lock(c, "bakeoff recover (promotion)", dir).map_err(anyhow::Error::msg)?;
    let was = f.rec.phase;
    let found = crate::run::recover::leftovers(dir, c)?;
    for l in &found.lines {
        say(l);
    }
    let n = (1..)
        .find(|n| !dir.join(bundle::promotion_recovery(*n)).exists())
        .unwrap_or(1);
    let ev =
        json!({"phase_found": was, "found": found.evidence, "at": crate::clock::wall_rfc3339()});
    crate::evidence::write_atomic(
        &dir.join(bundle::promotion_recovery(n)),
        &serde_json::to_vec_pretty(&ev)?,
    )?;
    f.rec.notes.push(format!(
        "recovered from phase {} (see {}): {}",
        was.as_str(),
        bundle::promotion_recovery(n),
        found.lines.join("; ")
    ));
    for u in &found.unproven {
        f.rec
            .notes
            .push(format!("left alone (not proven the promotion's own): {u}"));
    }
    let _ = f.set_phase(Phase::RollingBack);
    let before: Option<Fingerprint> =
        serde_json::from_value(f.rec.bake["incumbent_fingerprint"].clone()).ok();
    let lane = crate::run::launch::lane_spec(c);
    let by = SetBy {
        kind: "promotion".into(),
        id: c.campaign.id.clone(),
        dir: dir.to_path_buf(),
    };
    Ok(
        match txn::restore(c, &mut f, &lane, before.as_ref()).await {
            Ok(words) => {
                let pid = procnet::find_listeners(c.lane.port).first().map(|l| l.pid);
                let rec = crate::run::lanerecord::record_for(c, c.incumbent(), pid, by);
                if let Err(e) = resident::write(rec) {
                    f.rec.notes.push(e);
                }
                let why = format!(
                "recovered after the promotion stopped in phase {}: the incumbent is back; {words}",
                was.as_str()
            );
                txn::finish(&mut f, Phase::RolledBack, why, Vec::new())
            }
            Err(e) => {
                let mut why = format!("recovery after phase {}: {e}", was.as_str());
                if !found.unproven.is_empty() {
                    why.push_str(&format!("; left alone: {}", found.unproven.join("; ")));
                }
                txn::failed(c, &mut f, by, why)
            }
        },
    )
}
