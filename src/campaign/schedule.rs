//! Which lane each arm runs on, and in what order: the schedule of a campaign's arms over its
//! lanes (docs/fleet.md).
//!
//! Plain data, no I/O. The rules, in order:
//!
//! 1. An arm and the arms compared with it as a pair (a speculative arm and its matched control)
//!    form one unit: they run on the same lane, so their comparison carries no card-to-card
//!    difference.
//! 2. The unit holding a lane's incumbent runs on that lane (the incumbent is measured where it
//!    serves).
//! 3. Every other unit, longest expected first (its arms' step counts from the plan; file order
//!    among equals), goes to the lane with the least expected work so far (file order among
//!    equals): the longest-processing-time rule.
//! 4. On a lane, arms run one at a time in file order (with one lane: exactly today's order).

use serde::Serialize;

/// One lane's queue.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct LaneQueue {
    /// The lane id (`[[lanes]] id`, or `lane` for a `[lane]` campaign).
    pub lane: String,
    /// `host:port`.
    pub address: String,
    /// The incumbent serving the lane today, if any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub incumbent: Option<String>,
    /// Its arms, in the order they run.
    pub arms: Vec<Placed>,
}

impl LaneQueue {
    /// The lane's expected work: the steps of its arms.
    pub fn steps(&self) -> usize {
        self.arms.iter().map(|a| a.steps).sum()
    }
}

/// An arm on its lane.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Placed {
    pub arm: String,
    /// Its steps in the plan (the expected length the rule sorts by).
    pub steps: usize,
    /// Why it is on this lane.
    pub why: Why,
}

/// The rule that put an arm on its lane.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case", tag = "rule", content = "arm")]
pub enum Why {
    /// The lane's incumbent, measured where it serves.
    Incumbent,
    /// Its start command names this lane's port.
    NamesPort,
    /// Paired with another arm (a speculative arm and its control) that is here for a reason
    /// of its own.
    PairedWith(String),
    /// The least-loaded lane when its turn came (longest first).
    LeastLoaded,
    /// Moved here from a lane that died during the run (docs/fleet.md "A lane that dies").
    Moved(String),
}

impl Why {
    /// The dry run's words.
    pub fn words(&self) -> String {
        match self {
            Why::Incumbent => "the lane's incumbent, measured where it serves".into(),
            Why::NamesPort => "its start command names this lane's port".into(),
            Why::PairedWith(a) => format!("paired with `{a}` (speculative arm and its control)"),
            Why::LeastLoaded => "least-loaded lane when its turn came (longest first)".into(),
            Why::Moved(l) => format!("moved here from lane {l}, drained during the run"),
        }
    }
}

/// Every lane's queue, in lane order.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Schedule {
    pub lanes: Vec<LaneQueue>,
}

impl Schedule {
    /// The lane an arm is scheduled on.
    pub fn lane_of(&self, arm: &str) -> Option<&str> {
        self.lanes
            .iter()
            .find(|q| q.arms.iter().any(|a| a.arm == arm))
            .map(|q| q.lane.as_str())
    }
}

/// A lane as the scheduler sees it.
#[derive(Debug, Clone)]
pub struct LaneSlot {
    pub id: String,
    pub address: String,
    pub incumbent: Option<String>,
}

/// An arm as the scheduler sees it, in file order.
#[derive(Debug, Clone)]
pub struct ArmLoad {
    pub id: String,
    /// Its steps in the plan.
    pub steps: usize,
    /// The arm it must share a lane with (a speculative arm's control).
    pub paired_with: Option<String>,
    /// The lane its own command ties it to (`Campaign::bound_lane`: a literal port).
    pub bound_to: Option<String>,
}

/// The schedule of `arms` (file order) over `lanes` (file order); see the module docs.
pub fn assign(lanes: &[LaneSlot], arms: &[ArmLoad]) -> Schedule {
    let units = units(arms);
    let mut queues: Vec<Vec<(usize, Why)>> = vec![Vec::new(); lanes.len()];
    let mut load = vec![0usize; lanes.len()];
    let weight = |u: &[usize]| u.iter().map(|&i| arms[i].steps).sum::<usize>();
    let mut free: Vec<&Vec<usize>> = Vec::new();
    for u in &units {
        let serves = |l: &LaneSlot| {
            l.incumbent
                .as_ref()
                .is_some_and(|inc| u.iter().any(|&i| &arms[i].id == inc))
        };
        let bound = |l: &LaneSlot| u.iter().any(|&i| arms[i].bound_to.as_ref() == Some(&l.id));
        let home = lanes
            .iter()
            .position(serves)
            .or_else(|| lanes.iter().position(bound));
        match home {
            Some(l) => {
                load[l] += weight(u);
                let lane = &lanes[l];
                queues[l].extend(placed(arms, u, |i| {
                    if lane.incumbent.as_deref() == Some(&arms[i].id) {
                        Some(Why::Incumbent)
                    } else if arms[i].bound_to.as_ref() == Some(&lane.id) {
                        Some(Why::NamesPort)
                    } else {
                        None
                    }
                }));
            }
            None => free.push(u),
        }
    }
    // Longest first; the sort is stable, so file order among equals.
    free.sort_by_key(|u| std::cmp::Reverse(weight(u)));
    for u in free {
        let l = (0..lanes.len()).min_by_key(|&l| load[l]).unwrap_or(0);
        load[l] += weight(u);
        queues[l].extend(placed(arms, u, |_| None));
    }
    Schedule {
        lanes: lanes
            .iter()
            .zip(queues)
            .map(|(l, mut q)| {
                q.sort_by_key(|(i, _)| *i);
                LaneQueue {
                    lane: l.id.clone(),
                    address: l.address.clone(),
                    incumbent: l.incumbent.clone(),
                    arms: q
                        .into_iter()
                        .map(|(i, why)| Placed {
                            arm: arms[i].id.clone(),
                            steps: arms[i].steps,
                            why,
                        })
                        .collect(),
                }
            })
            .collect(),
    }
}

/// A unit's arms with their reasons: `lead` gives the reason of an arm that is there on its own
/// account (else the unit's first such arm is least-loaded); the others are paired with it.
fn placed(
    arms: &[ArmLoad],
    unit: &[usize],
    lead: impl Fn(usize) -> Option<Why>,
) -> Vec<(usize, Why)> {
    let leader = unit
        .iter()
        .copied()
        .find(|&i| lead(i).is_some())
        .unwrap_or(unit[0]);
    unit.iter()
        .map(|&i| {
            let why = if i == leader {
                lead(i).unwrap_or(Why::LeastLoaded)
            } else {
                Why::PairedWith(arms[leader].id.clone())
            };
            (i, why)
        })
        .collect()
}

/// The arms grouped by pairing (union of each arm with its `paired_with`), each unit in file
/// order, units ordered by their first arm.
fn units(arms: &[ArmLoad]) -> Vec<Vec<usize>> {
    let mut group: Vec<usize> = (0..arms.len()).collect();
    fn root(g: &mut [usize], mut i: usize) -> usize {
        while g[i] != i {
            g[i] = g[g[i]];
            i = g[i];
        }
        i
    }
    for (i, a) in arms.iter().enumerate() {
        if let Some(j) = a
            .paired_with
            .as_ref()
            .and_then(|p| arms.iter().position(|b| &b.id == p))
        {
            let (ri, rj) = (root(&mut group, i), root(&mut group, j));
            group[ri.max(rj)] = ri.min(rj);
        }
    }
    let mut out: Vec<Vec<usize>> = Vec::new();
    let mut first_of: Vec<Option<usize>> = vec![None; arms.len()];
    for i in 0..arms.len() {
        let r = root(&mut group, i);
        match first_of[r] {
            Some(u) => out[u].push(i),
            None => {
                first_of[r] = Some(out.len());
                out.push(vec![i]);
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lanes(spec: &[(&str, Option<&str>)]) -> Vec<LaneSlot> {
        spec.iter()
            .enumerate()
            .map(|(i, (id, inc))| LaneSlot {
                id: id.to_string(),
                address: format!("127.0.0.1:{}", 9000 + i),
                incumbent: inc.map(str::to_string),
            })
            .collect()
    }

    fn arms(spec: &[(&str, usize, Option<&str>)]) -> Vec<ArmLoad> {
        spec.iter()
            .map(|(id, steps, p)| ArmLoad {
                id: id.to_string(),
                steps: *steps,
                paired_with: p.map(str::to_string),
                bound_to: None,
            })
            .collect()
    }

    #[test]
    fn an_arm_whose_command_names_a_lanes_port_runs_there() {
        let mut a = arms(&[("inc", 5, None), ("big", 20, None), ("p", 1, None)]);
        a[2].bound_to = Some("y".into());
        let s = assign(&lanes(&[("x", Some("inc")), ("y", None), ("z", None)]), &a);
        // `p` is on y by its port (before the free units), so `big` takes the emptiest lane, z.
        assert_eq!(ids(&s), vec![vec!["inc"], vec!["p"], vec!["big"]]);
        assert_eq!(s.lanes[1].arms[0].why, Why::NamesPort);
    }

    fn ids(s: &Schedule) -> Vec<Vec<&str>> {
        s.lanes
            .iter()
            .map(|q| q.arms.iter().map(|a| a.arm.as_str()).collect())
            .collect()
    }

    #[test]
    fn one_lane_keeps_file_order() {
        let s = assign(
            &lanes(&[("lane", Some("inc"))]),
            &arms(&[("inc", 5, None), ("b", 9, None), ("a", 7, None)]),
        );
        assert_eq!(ids(&s), vec![vec!["inc", "b", "a"]]);
        assert_eq!(s.lanes[0].arms[0].why, Why::Incumbent);
        assert_eq!(s.lanes[0].steps(), 21);
    }

    #[test]
    fn longest_first_to_the_least_loaded_lane() {
        // inc (10) pinned to g0. Then by length: d 12 → g1 (0), c 9 → g2 (0); loads are then
        // g0 10, g1 12, g2 9, so b 8 → g2 (17) and a 3 → g0 (13).
        let s = assign(
            &lanes(&[("g0", Some("inc")), ("g1", None), ("g2", None)]),
            &arms(&[
                ("inc", 10, None),
                ("a", 3, None),
                ("b", 8, None),
                ("c", 9, None),
                ("d", 12, None),
            ]),
        );
        assert_eq!(ids(&s), vec![vec!["inc", "a"], vec!["d"], vec!["b", "c"]]);
        assert_eq!(s.lane_of("b"), Some("g2"));
        assert!(s.lanes[1..]
            .iter()
            .flat_map(|q| &q.arms)
            .all(|a| a.why == Why::LeastLoaded));
    }

    #[test]
    fn equal_lengths_fill_lanes_in_order() {
        let s = assign(
            &lanes(&[("x", None), ("y", None)]),
            &arms(&[
                ("a", 4, None),
                ("b", 4, None),
                ("c", 4, None),
                ("d", 4, None),
            ]),
        );
        assert_eq!(ids(&s), vec![vec!["a", "c"], vec!["b", "d"]]);
    }

    #[test]
    fn a_speculative_arm_and_its_control_share_a_lane() {
        // spec (6) pairs with ctl (6): one unit of 12, longest, to the emptiest lane.
        let s = assign(
            &lanes(&[("g0", Some("inc")), ("g1", None)]),
            &arms(&[
                ("inc", 6, None),
                ("ctl", 6, None),
                ("other", 6, None),
                ("spec", 6, Some("ctl")),
            ]),
        );
        assert_eq!(ids(&s), vec![vec!["inc", "other"], vec!["ctl", "spec"]]);
        assert_eq!(s.lanes[1].arms[0].why, Why::LeastLoaded);
        assert_eq!(s.lanes[1].arms[1].why, Why::PairedWith("ctl".into()));
    }

    #[test]
    fn a_speculative_arm_whose_control_is_the_incumbent_runs_on_its_lane() {
        let s = assign(
            &lanes(&[("g0", None), ("g1", Some("inc"))]),
            &arms(&[("spec", 6, Some("inc")), ("inc", 6, None), ("c", 2, None)]),
        );
        assert_eq!(ids(&s), vec![vec!["c"], vec!["spec", "inc"]]);
        assert_eq!(s.lanes[1].arms[0].why, Why::PairedWith("inc".into()));
        assert_eq!(s.lanes[1].arms[1].why, Why::Incumbent);
    }

    #[test]
    fn every_arm_is_placed_once() {
        let a: Vec<(String, usize, Option<String>)> = (0..11)
            .map(|i| (format!("a{i}"), 3 + (i * 7) % 5, None))
            .collect();
        let spec: Vec<(&str, usize, Option<&str>)> =
            a.iter().map(|(id, n, _)| (id.as_str(), *n, None)).collect();
        let s = assign(
            &lanes(&[("p", None), ("q", None), ("r", None)]),
            &arms(&spec),
        );
        let mut all: Vec<&str> = ids(&s).concat();
        all.sort_unstable();
        let mut want: Vec<&str> = spec.iter().map(|a| a.0).collect();
        want.sort_unstable();
        assert_eq!(all, want);
        // LPT on 3 lanes: no lane more than the longest arm above another.
        let loads: Vec<usize> = s.lanes.iter().map(LaneQueue::steps).collect();
        let (lo, hi) = (loads.iter().min().unwrap(), loads.iter().max().unwrap());
        assert!(hi - lo <= 7, "{loads:?}");
    }
}
