//! A promotion from a multi-lane bundle (docs/promotion.md "From a multi-lane bundle"): the arm
//! goes into service on the lane the incumbent serves (the lane in service), whichever lane the
//! campaign measured it on. The promotion acts on that lane's one-lane campaign
//! (`campaign::lane_campaign`: the lane's address, timeouts and env as `[lane]`), so its checks,
//! transaction, bake, rollback and `recover` are the one-lane promotion's, unchanged; only the
//! evidence it reads (the incumbent's stop, the arm's launch) sits in the lanes' folders.

use crate::campaign::{lane_campaign, Campaign};
use crate::evidence::lane_spread::FILE as LANE_SPREAD_FILE;
use crate::evidence::result::{CampaignResult, LaneRun};
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

/// Gives a Slurm lane its node's address (`run::slurm_lanes::resolve`, or `resolve_any` for a
/// recovery).
pub type Resolve = fn(Campaign) -> Result<Campaign, String>;

/// Where a multi-lane bundle's arm was measured and where it is promoted (`promotion.json`
/// `lanes`).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Lanes {
    /// The incumbent's lane: where the arm is put in service.
    pub promoted_on: String,
    /// That lane's folder in the bundle (the incumbent's stop evidence).
    pub incumbent_folder: String,
    /// The lane whose run measured the arm (a moved arm's: the lane it moved to).
    pub measured_on: String,
    /// That run's folder in the bundle (the arm's launch evidence).
    pub measured_in: String,
    /// The card-to-card spread the bundle measured (`lane-spread.json`), in words; None: none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spread: Option<String>,
    /// The line the output, the plan and the summary say.
    pub words: String,
}

impl Lanes {
    /// The incumbent's lane folder of bundle `dir`.
    pub fn incumbent_dir(&self, dir: &Path) -> PathBuf {
        dir.join(&self.incumbent_folder)
    }

    /// The folder of bundle `dir` that measured the arm.
    pub fn measured_dir(&self, dir: &Path) -> PathBuf {
        dir.join(&self.measured_in)
    }
}

/// The id of the lane multi-lane campaign `c` says its incumbent serves.
pub fn campaign_incumbent_lane(c: &Campaign) -> Option<&str> {
    c.fleet
        .iter()
        .find(|e| e.incumbent.is_some())
        .map(|e| e.id.as_str())
}

/// The one-lane campaign of lane `lane` of `c`: that lane as `[lane]`, its address resolved
/// by `resolve` when it is a Slurm node.
pub fn lane_in_service(c: &Campaign, lane: &str, resolve: Resolve) -> Result<Campaign, String> {
    let mut only = c.clone();
    // Only this lane's node is asked for: the qualification lanes' (down, or granted for the
    // run alone by `[fleet.slurm]`) are no concern of the promotion.
    only.fleet.retain(|e| e.id == lane);
    if only.fleet.is_empty() {
        return Err(format!(
            "the bundle's campaign has no lane `{lane}`; give the bundle `bakeoff run` wrote"
        ));
    }
    let only = resolve(only)?;
    lane_campaign(&only, lane).ok_or_else(|| format!("the bundle's campaign has no lane `{lane}`"))
}

/// The incumbent's lane of multi-lane bundle `dir` (its result `r`, its campaign `c`) and that
/// lane's one-lane campaign. Err: no lane of the bundle has the incumbent (every lane a
/// qualification lane), or its result and its campaign name different lanes; each says what
/// to do.
pub fn serving(
    dir: &Path,
    c: &Campaign,
    r: &CampaignResult,
    resolve: Resolve,
) -> Result<(Campaign, LaneRun), String> {
    let inc = &c.incumbent().id;
    // The lane's own run (a run of arms moved onto it has its own folder and no stop of it).
    let Some(home) = r
        .lanes
        .iter()
        .find(|l| l.incumbent.as_deref() == Some(inc.as_str()) && l.moved_from.is_none())
    else {
        let ids: Vec<&str> = r.lanes.iter().map(|l| l.id.as_str()).collect();
        return Err(format!(
            "bundle {} has no lane where the incumbent `{inc}` serves: its campaign-result.json lists lane(s) {}, each a qualification lane (no incumbent). A promotion puts the arm in service where the incumbent serves (stopped there, restored there on a rollback), and a qualification lane has nothing to stop or restore; nothing was touched: run the bake-off with `incumbent = \"{inc}\"` on the [[lanes]] table of the lane it serves, then promote that bundle",
            dir.display(),
            ids.join(", ")
        ));
    };
    if campaign_incumbent_lane(c) != Some(home.id.as_str()) {
        return Err(format!(
            "bundle {}: its campaign-result.json says the incumbent `{inc}` serves lane {}, its campaign copy says lane {}: the bundle is not as `bakeoff run` wrote it; nothing was touched: promote from a bundle `bakeoff run` wrote",
            dir.display(),
            home.id,
            campaign_incumbent_lane(c).unwrap_or("(none)")
        ));
    }
    Ok((lane_in_service(c, &home.id, resolve)?, home.clone()))
}

/// Where `arm` was measured (the last run of `r` that lists it: a moved arm's record is its
/// moved run's) against `home`, the lane it is promoted on, in words.
pub fn origin(r: &CampaignResult, home: &LaneRun, arm: &str) -> Result<Lanes, String> {
    let Some(run) = r
        .lanes
        .iter()
        .rev()
        .find(|l| l.arms.iter().any(|a| a == arm))
    else {
        return Err(format!(
            "`{arm}` ran on no lane of the bundle (its campaign-result.json lanes list no run of it), so what would be promoted cannot be compared with what was measured; promote an arm that ran"
        ));
    };
    let spread = spread_words(r);
    let words = if run.id == home.id {
        format!(
            "measured on lane {}, promoted on that lane, where the incumbent serves",
            run.id
        )
    } else {
        let beside = match &spread {
            Some(s) => s.clone(),
            None => "the card-to-card spread between the lanes was not measured".into(),
        };
        format!(
            "measured on lane {}, promoted on lane {} where the incumbent serves; the bake judges it against the figures measured on lane {}'s card; {beside}",
            run.id, home.id, run.id
        )
    };
    Ok(Lanes {
        promoted_on: home.id.clone(),
        incumbent_folder: home.folder.clone(),
        measured_on: run.id.clone(),
        measured_in: run.folder.clone(),
        spread,
        words,
    })
}

/// The spread the bundle's control measured, per metric, in words (None: not measured).
fn spread_words(r: &CampaignResult) -> Option<String> {
    let s = r.lane_spread.as_ref()?;
    if s.spread.is_empty() {
        return None;
    }
    let figures: Vec<String> = s
        .spread
        .iter()
        .map(|(m, x)| {
            format!(
                "{} {:.1} % (lowest lane {}, highest {})",
                m.as_str(),
                x.spread * 100.0,
                x.lowest,
                x.highest
            )
        })
        .collect();
    Some(format!(
        "card-to-card spread measured by {}'s control ({LANE_SPREAD_FILE}): {} across {} lanes",
        s.control,
        figures.join(", "),
        s.lanes.len()
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::evidence::lane_spread::{LaneControl, LaneSpread};
    use crate::evidence::result::Stat;

    const TEXT: &str = r#"
[campaign]
id = "promo-lanes"
[[lanes]]
id = "g0"
port = 18391
incumbent = "inc"
env = { A = "0" }
[[lanes]]
id = "g1"
port = 18392
ready_timeout_s = 7
[workload]
ranking_priority = ["ttft"]
matched_prompt_tokens = 64
max_tokens = 8
[[arms]]
id = "inc"
role = "incumbent"
engine = "e"
model = "m"
served_model = "m"
served_context = 4096
[arms.process]
argv = ["/bin/sleep", "1000"]
[[arms]]
id = "win"
role = "candidate"
engine = "e"
model = "m"
served_model = "w"
served_context = 4096
[arms.process]
argv = ["/bin/sleep", "1001"]
"#;

    fn campaign() -> Campaign {
        crate::campaign::parse(TEXT, Path::new("/tmp/promo-lanes.toml"))
            .unwrap_or_else(|e| panic!("{e}"))
    }

    fn run(id: &str, incumbent: Option<&str>, arms: &[&str]) -> LaneRun {
        LaneRun {
            id: id.into(),
            incumbent: incumbent.map(str::to_string),
            folder: format!("lanes/{id}"),
            arms: arms.iter().map(|a| a.to_string()).collect(),
            complete: true,
            ..Default::default()
        }
    }

    fn result(lanes: Vec<LaneRun>) -> CampaignResult {
        CampaignResult {
            lanes,
            ..Default::default()
        }
    }

    fn ok(c: Campaign) -> Result<Campaign, String> {
        Ok(c)
    }

    #[test]
    fn the_incumbents_lane_is_the_one_promoted_on_with_its_own_settings() {
        let c = campaign();
        let r = result(vec![
            run("g0", Some("inc"), &["inc"]),
            run("g1", None, &["win"]),
        ]);
        let (one, home) = serving(Path::new("/b"), &c, &r, ok).unwrap();
        assert!(!one.multi_lane() && one.fleet.is_empty());
        assert_eq!(
            (one.lane.port, one.lane.env.get("A").map(String::as_str)),
            (18391, Some("0"))
        );
        assert_eq!(home.id, "g0");
        let l = origin(&r, &home, "win").unwrap();
        assert_eq!(
            (
                l.promoted_on.as_str(),
                l.measured_on.as_str(),
                l.measured_in.as_str()
            ),
            ("g0", "g1", "lanes/g1")
        );
        assert!(
            l.words
                .starts_with("measured on lane g1, promoted on lane g0 where the incumbent serves")
                && l.words.contains("was not measured"),
            "{}",
            l.words
        );
        assert_eq!(l.incumbent_dir(Path::new("/b")), Path::new("/b/lanes/g0"));
        // The lane's settings, not the other lane's: g1's ready timeout stays g1's.
        let g1 = lane_in_service(&c, "g1", ok).unwrap();
        assert_eq!((g1.lane.port, g1.lane.ready_timeout_s), (18392, 7));
    }

    #[test]
    fn the_spread_is_said_beside_an_arm_measured_on_another_lane() {
        let stat = |p50: f64| Stat {
            p50,
            ci95: [p50 * 0.99, p50 * 1.01],
            p95: p50,
            n: 6,
            ..Default::default()
        };
        let control = |lane: &str, ttft: f64| LaneControl {
            lane: lane.into(),
            arm: "inc".into(),
            evidence: String::new(),
            ttft_ms: Some(stat(ttft)),
            decode_tok_s: None,
            e2e_ms: None,
        };
        let mut r = result(vec![
            run("g0", Some("inc"), &["inc", "b"]),
            run("g1", None, &["win"]),
        ]);
        r.lane_spread = Some(LaneSpread::of(
            "inc",
            vec![control("g0", 30.0), control("g1", 31.5)],
            vec![],
        ));
        let home = r.lanes[0].clone();
        let l = origin(&r, &home, "win").unwrap();
        assert!(
            l.words.contains(
                "card-to-card spread measured by inc's control (lane-spread.json): ttft 5.0 % (lowest lane g0, highest g1) across 2 lanes"
            ),
            "{}",
            l.words
        );
        // An arm measured on the lane itself: said, no spread needed.
        let same = origin(&r, &home, "b").unwrap();
        assert_eq!(
            same.words,
            "measured on lane g0, promoted on that lane, where the incumbent serves"
        );
        // A moved arm: the run it moved to measured it.
        let mut moved = run("g0", None, &["win"]);
        moved.folder = "lanes/g0.moved-1".into();
        moved.moved_from = Some("g1".into());
        r.lanes[1].arms.clear();
        r.lanes.push(moved);
        let l = origin(&r, &home, "win").unwrap();
        assert_eq!(
            (l.measured_on.as_str(), l.measured_in.as_str()),
            ("g0", "lanes/g0.moved-1")
        );
        assert!(origin(&r, &home, "nosuch").is_err());
    }

    #[test]
    fn a_bundle_without_an_incumbent_lane_is_refused_with_the_fix() {
        let c = campaign();
        let r = result(vec![run("g0", None, &["inc"]), run("g1", None, &["win"])]);
        let e = serving(Path::new("/b"), &c, &r, ok)
            .map(|_| ())
            .unwrap_err();
        assert!(
            e.contains("has no lane where the incumbent `inc` serves")
                && e.contains("lane(s) g0, g1, each a qualification lane")
                && e.contains("nothing was touched")
                && e.contains("`incumbent = \"inc\"` on the [[lanes]] table"),
            "{e}"
        );
        // The result and the campaign naming different lanes: refused too.
        let r = result(vec![run("g0", None, &[]), run("g1", Some("inc"), &["win"])]);
        let e = serving(Path::new("/b"), &c, &r, ok)
            .map(|_| ())
            .unwrap_err();
        assert!(
            e.contains("serves lane g1, its campaign copy says lane g0"),
            "{e}"
        );
    }
}
