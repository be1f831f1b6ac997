//! The campaign's side of the lane record ([`crate::lane::resident`]): refused before the lane is
//! touched when the record is current and names another resident than the campaign's declared
//! incumbent (or says a rollback failed); rewritten once the restoration proved the incumbent
//! back.

use super::context::Cx;
use crate::campaign::fingerprint::fingerprint;
use crate::campaign::{Arm, Campaign, Mask};
use crate::lane::procnet;
use crate::lane::resident::{self, LaneRecord, LaneState, Resident, SetBy};

/// The lane record's word before a campaign touches the lane: Err refuses (one line with the
/// fix); Ok(Some) is a note for the bundle (an out-of-date record, or drift accepted).
pub fn check(c: &Campaign, accept_drift: bool) -> Result<Option<String>, String> {
    let Some(rec) = resident::read(&c.lane.host, c.lane.port)? else {
        return Ok(None);
    };
    rollback_failed(c, &rec)?;
    let inc = c.incumbent();
    let same = rec.resident.argv_env_hash == c.argv_env_hash(inc);
    if !rec.current() {
        return Ok(Some(format!(
            "the lane record ({}) is out of date: the process it names no longer runs; it is replaced when this campaign restores its incumbent",
            rec.summary()
        )));
    }
    if same {
        return Ok(None);
    }
    let what = format!(
        "the lane record says {}, but this campaign declares `{}` as its incumbent (another recipe)",
        rec.summary(),
        inc.id
    );
    if accept_drift {
        return Ok(Some(format!(
            "limitation: {what}; accepted with --accept-lane-drift: the campaign restores `{}`, not what served before it",
            inc.id
        )));
    }
    Err(format!(
        "{what}; declare the resident as the incumbent, or pass --accept-lane-drift to run anyway (recorded as a limitation)"
    ))
}

/// The lane record's word before a campaign runs arms on one of its qualification lanes (no
/// incumbent: nothing is stopped, restored or recorded there): a failed rollback refuses, as on
/// any lane; a record naming a resident is a note (the port itself must be free: the
/// preconditions refuse a busy one).
pub fn check_qualification(c: &Campaign) -> Result<Option<String>, String> {
    let Some(rec) = resident::read(&c.lane.host, c.lane.port)? else {
        return Ok(None);
    };
    rollback_failed(c, &rec)?;
    Ok(Some(format!(
        "the lane record of qualification lane {} says {}; the campaign neither stops nor restores anything there and leaves the record as it is",
        c.lane.address(),
        rec.summary()
    )))
}

fn rollback_failed(c: &Campaign, rec: &LaneRecord) -> Result<(), String> {
    if rec.state == LaneState::RollbackFailed {
        return Err(format!(
            "{}; nothing runs on this lane until it is resolved: start the resident by hand ({}), then `bakeoff lane resolve {}` proves it serves and clears the mark",
            rec.summary(),
            if rec.restart.is_empty() { "as you usually do".to_string() } else { rec.restart.join("; ") },
            c.lane.port
        ));
    }
    Ok(())
}

/// The record of `arm` serving the lane as `pid` (None: not a local process), set by `set_by`.
pub fn record_for(c: &Campaign, arm: &Arm, pid: Option<u32>, set_by: SetBy) -> LaneRecord {
    let mask = Mask::from_process_env(c);
    let environ = pid.and_then(procnet::environ);
    let fp = fingerprint(c, arm, environ.as_deref());
    let process = pid.map(|p| {
        let argv = procnet::describe(p)
            .cmdline
            .iter()
            .map(|a| mask.scrub(a))
            .collect();
        resident::mark_of(p, argv)
    });
    LaneRecord {
        host: c.lane.host.clone(),
        port: c.lane.port,
        state: LaneState::Serving,
        resident: Resident {
            arm: arm.id.clone(),
            served_model: arm.served_model.clone(),
            kind: arm.kind().as_str().to_string(),
            recipe_hash: c.recipe_hash(arm),
            argv_env_hash: c.argv_env_hash(arm),
            fingerprint: serde_json::to_value(fp).unwrap_or_default(),
            process,
            name: arm.recipe().job_name().map(str::to_string),
        },
        since: crate::clock::wall_rfc3339(),
        set_by,
        detail: String::new(),
        restart: Vec::new(),
        previous: None,
    }
}

/// After a restoration that proved the incumbent back: the lane record names it. A record that
/// cannot be written is a warning in the bundle, never the run's failure.
pub fn restored(cx: &Cx) {
    let c = cx.c();
    let inc = c.incumbent();
    if !inc.kind().managed() {
        return;
    }
    let pid = cx
        .restore
        .pid
        .or_else(|| procnet::find_listeners(c.lane.port).first().map(|l| l.pid));
    let rec = record_for(
        c,
        inc,
        pid,
        SetBy {
            kind: "campaign".into(),
            id: c.campaign.id.clone(),
            dir: cx.rec.dir().to_path_buf(),
        },
    );
    if let Err(e) = resident::write(rec) {
        cx.rec.warn(&e);
    }
}
