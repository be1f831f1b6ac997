//! `report.html`'s per-lane view of a multi-lane bundle (docs/fleet.md): which arm ran on which
//! lane and when (each lane's own checkpoint: every finished step's end stamp and wall time), the
//! lanes' timeline per invocation (`lane_timeline.rs`), and the card-to-card
//! control per lane with the spread it measured (`lane-spread.json`, as the result records it).
//! A one-lane bundle has no such section.

use super::chartkit::esc;
use super::lane_timeline;
use super::markdown::num;
use crate::evidence::bundle;
use crate::evidence::result::{CampaignResult, Stat};
use serde_json::Value;
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::Path;

/// One arm's span on its lane, from the lane's checkpoint.
#[derive(Debug, Clone, PartialEq)]
pub struct Span {
    pub arm: String,
    /// The first finished step's start (its end less its wall time) and the last one's end,
    /// RFC 3339 to the second as the checkpoint stamps them.
    pub from: String,
    pub to: String,
    /// Finished steps, and the invocations they ran in (a resumed arm lists more than one).
    pub steps: usize,
    pub invocations: Vec<u64>,
}

/// The arms of a lane's checkpoint (`checkpoint.json` of its folder), in the order they first
/// finished a step. Steps without an arm (the incumbent's stop, the restoration) are left out.
pub fn spans(checkpoint: &serde_json::Value) -> Vec<Span> {
    let mut out: Vec<(Span, f64, f64)> = Vec::new();
    let steps = checkpoint["steps"]
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or(&[]);
    for s in steps {
        let (Some(arm), Some(at), Some(ms)) = (
            s["arm"].as_str(),
            s["finished_at"].as_str(),
            s["wall_ms"].as_f64(),
        ) else {
            continue;
        };
        let Some(end) = epoch_s(at) else { continue };
        let start = end - ms / 1e3;
        let inv = s["invocation"].as_u64().unwrap_or(1);
        match out.iter_mut().find(|(sp, _, _)| sp.arm == arm) {
            Some((sp, lo, hi)) => {
                sp.steps += 1;
                if !sp.invocations.contains(&inv) {
                    sp.invocations.push(inv);
                }
                if start < *lo {
                    *lo = start;
                }
                if end > *hi {
                    *hi = end;
                    sp.to = at.to_string();
                }
            }
            None => out.push((
                Span {
                    arm: arm.to_string(),
                    from: String::new(),
                    to: at.to_string(),
                    steps: 1,
                    invocations: vec![inv],
                },
                start,
                end,
            )),
        }
    }
    out.into_iter()
        .map(|(mut sp, lo, _)| {
            sp.from = rfc3339(lo);
            sp.invocations.sort_unstable();
            sp
        })
        .collect()
}

/// Seconds since the epoch of a `YYYY-MM-DDTHH:MM:SS…Z` stamp (None: not one).
fn epoch_s(stamp: &str) -> Option<f64> {
    let n = |r: std::ops::Range<usize>| stamp.get(r)?.parse::<i64>().ok();
    let (y, m, d) = (n(0..4)?, n(5..7)?, n(8..10)?);
    let (hh, mm, ss) = (n(11..13)?, n(14..16)?, n(17..19)?);
    // Days from the civil date (Howard Hinnant's algorithm).
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let doy = (153 * ((m + 9) % 12) + 2) / 5 + d - 1;
    let days = era * 146_097 + yoe * 365 + yoe / 4 - yoe / 100 + doy - 719_468;
    Some((days * 86_400 + hh * 3600 + mm * 60 + ss) as f64)
}

/// The stamp of `s` seconds since the epoch, to the second.
fn rfc3339(s: f64) -> String {
    let t = s.floor() as i64;
    let (days, rem) = (t.div_euclid(86_400), t.rem_euclid(86_400));
    // Civil date from days (Howard Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

fn stat(s: &Option<Stat>) -> String {
    s.as_ref().map_or_else(
        || "—".into(),
        |s| format!("{} ({}–{})", num(s.p50), num(s.ci95[0]), num(s.ci95[1])),
    )
}

/// Each run folder's `checkpoint.json` (a lane's own, a moved run's), by folder; one that cannot
/// be read is left out.
fn checkpoints(dir: &Path, r: &CampaignResult) -> BTreeMap<String, Value> {
    let folders = r.lanes.iter().map(|l| &l.folder);
    let runs = r
        .schedule_timing
        .iter()
        .flat_map(|t| t.runs.iter().map(|s| &s.folder));
    folders
        .chain(runs)
        .filter_map(|f| {
            let b = std::fs::read(dir.join(f).join(bundle::CHECKPOINT)).ok()?;
            Some((f.clone(), serde_json::from_slice(&b).ok()?))
        })
        .collect()
}

/// The per-lane section of `report.html` (empty for a one-lane bundle): the lanes, each arm's
/// span on its lane, the lanes' timeline, the control per lane and the spread.
pub fn section(dir: &Path, r: &CampaignResult) -> String {
    if r.lanes.is_empty() {
        return String::new();
    }
    let cks = checkpoints(dir, r);
    let mut o = String::from("<h2 id=\"lanes\">Lanes</h2><p>Each lane ran its arms one at a time, the lanes side by side; the times are each lane's own checkpoint's (the first step's start to the last step's end, to the second).</p><table><tr><th>lane</th><th>address</th><th>incumbent</th><th>arm</th><th>from</th><th>to</th><th>steps</th><th>invocations</th></tr>");
    for l in &r.lanes {
        let sp = cks.get(&l.folder).map(spans).unwrap_or_default();
        let inc = l
            .incumbent
            .as_deref()
            .unwrap_or("none (qualification lane)");
        // A drained lane says why; a run of arms moved onto a lane says from where.
        let said = match (&l.drained, &l.moved_from) {
            (Some(why), _) => format!(
                "<br>drained: {}; its unfinished arms moved (see below)",
                esc(why)
            ),
            (None, Some(from)) => format!(
                "<br>arms moved here from lane {} ({})",
                esc(from),
                esc(&l.folder)
            ),
            _ => String::new(),
        };
        let head = format!(
            "<td rowspan={}>{}{said}</td><td rowspan={0}>{}{}</td><td rowspan={0}>{}</td>",
            sp.len().max(1),
            esc(&l.id),
            esc(&l.address),
            client(l),
            esc(inc)
        );
        if sp.is_empty() {
            let _ = write!(
                o,
                "<tr>{head}<td colspan=5>no step finished{}</td></tr>",
                l.incomplete_reason
                    .as_deref()
                    .map(|w| format!(": {}", esc(w)))
                    .unwrap_or_default()
            );
        }
        for (i, s) in sp.iter().enumerate() {
            let inv: Vec<String> = s.invocations.iter().map(u64::to_string).collect();
            let _ = write!(
                o,
                "<tr>{}<td>{}</td><td>{}</td><td>{}</td><td class=n>{}</td><td class=n>{}</td></tr>",
                if i == 0 { head.as_str() } else { "" },
                esc(&s.arm),
                esc(&s.from),
                esc(&s.to),
                s.steps,
                inv.join(", ")
            );
        }
    }
    o.push_str("</table>");
    o + &lane_timeline::html(r, &cks) + &moves(r) + &control(r)
}

/// Where the lane's client ran, under its address (nothing for bundles that did not record it).
fn client(l: &crate::evidence::result::LaneRun) -> String {
    let Some(c) = &l.client else {
        return String::new();
    };
    if c.mode == crate::evidence::client_path::NODE {
        return format!(
            "<br>client on node {}, a job step beside each arm",
            esc(&c.host)
        );
    }
    if c.mode != crate::evidence::client_path::NETWORK {
        return format!("<br>client on {} (same host)", esc(&c.host));
    }
    let rtt = match (&c.rtt_ms, &c.rtt_error) {
        (Some(r), _) => format!("round trip p50 {:.3} ms, p99 {:.3} ms", r.p50, r.p99),
        (None, e) => format!(
            "round trip not measured{}",
            e.as_deref()
                .map(|e| format!(": {}", esc(e)))
                .unwrap_or_default()
        ),
    };
    format!("<br>client on {}, over the network ({rtt})", esc(&c.host))
}

/// The arms moved off drained lanes: from where, to where, why.
fn moves(r: &CampaignResult) -> String {
    if r.moves.is_empty() {
        return String::new();
    }
    let mut o = String::from("<h3 id=\"lane-moves\">Arms moved off drained lanes</h3><table><tr><th>arm</th><th>from</th><th>to</th><th>cause</th><th>kept, not counted</th></tr>");
    for m in &r.moves {
        let _ = write!(
            o,
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            esc(&m.arm),
            esc(&m.from),
            esc(m.to.as_deref().unwrap_or("not run: no live lane was left")),
            esc(&m.cause),
            esc(&m.left_in)
        );
    }
    o + "</table>"
}

/// The control per lane and the spread (or why it was not measured).
fn control(r: &CampaignResult) -> String {
    let Some(s) = &r.lane_spread else {
        return "<p id=\"lane-control\">Card-to-card control: not measured (see the limitations).</p>".into();
    };
    let mut o = format!(
        "<h3 id=\"lane-control\">Card-to-card control ({}'s recipe, warm c1 medians with their intervals)</h3><table><tr><th>lane</th><th>control arm</th><th>TTFT, ms</th><th>decode, tok/s</th><th>E2E, ms</th><th>evidence</th></tr>",
        esc(&s.control)
    );
    for l in &s.lanes {
        let _ = write!(
            o,
            "<tr><td>{}</td><td>{}</td><td class=n>{}</td><td class=n>{}</td><td class=n>{}</td><td>{}</td></tr>",
            esc(&l.lane),
            esc(&l.arm),
            stat(&l.ttft_ms),
            stat(&l.decode_tok_s),
            stat(&l.e2e_ms),
            esc(&l.evidence)
        );
    }
    o.push_str("</table><table><tr><th>metric</th><th>spread</th><th>lanes</th><th>lowest</th><th>highest</th></tr>");
    for (m, x) in &s.spread {
        let _ = write!(
            o,
            "<tr><td>{}</td><td class=n>{:.1} %</td><td class=n>{}</td><td>{}</td><td>{}</td></tr>",
            esc(m.as_str()),
            x.spread * 100.0,
            x.lanes,
            esc(&x.lowest),
            esc(&x.highest)
        );
    }
    o.push_str("</table>");
    for l in s.outliers.iter().chain(&s.missing) {
        let _ = write!(o, "<p>{}</p>", esc(l));
    }
    o
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stamps_round_trip() {
        for s in [
            "2026-12-02T14:35:20Z",
            "2024-02-29T00:00:00Z",
            "1999-12-31T23:59:59Z",
        ] {
            assert_eq!(rfc3339(epoch_s(s).unwrap()), s);
        }
    }

    #[test]
    fn an_arms_span_runs_from_its_first_start_to_its_last_end() {
        let ck = serde_json::json!({"steps": [
            {"arm": null, "finished_at": "2026-12-02T10:00:01Z", "wall_ms": 500.0, "invocation": 1},
            {"arm": "a", "finished_at": "2026-12-02T10:00:05Z", "wall_ms": 3000.0, "invocation": 1},
            {"arm": "a", "finished_at": "2026-12-02T10:00:09Z", "wall_ms": 1000.0, "invocation": 1},
            {"arm": "c", "finished_at": "2026-12-02T10:00:12Z", "wall_ms": 2000.0, "invocation": 1},
            {"arm": "c", "finished_at": "2026-12-02T10:01:00Z", "wall_ms": 4000.0, "invocation": 3},
            {"arm": "c", "status": "pending"},
        ]});
        let s = spans(&ck);
        assert_eq!(s.len(), 2, "{s:?}");
        assert_eq!(s[0].arm, "a");
        assert_eq!(s[0].from, "2026-12-02T10:00:02Z");
        assert_eq!(s[0].to, "2026-12-02T10:00:09Z");
        assert_eq!((s[0].steps, s[0].invocations.clone()), (2, vec![1]));
        assert_eq!(s[1].from, "2026-12-02T10:00:10Z");
        assert_eq!(s[1].to, "2026-12-02T10:01:00Z");
        assert_eq!(s[1].invocations, vec![1, 3]);
    }
}
