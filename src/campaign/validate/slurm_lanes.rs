//! Slurm lanes (`[[lanes]] slurm_node = "node2"`, docs/fleet.md): a lane that is one Slurm node,
//! every arm's job on it pinned there. Checked after the arms (their recipe kinds).
//!
//! The rules, and why:
//! - every lane is a Slurm lane or none is: a Slurm lane's arms must run as Slurm jobs, and the
//!   scheduler may put any arm on any lane;
//! - every arm bakeoff starts is a Slurm arm (`[arms.slurm]`): a process or container arm would
//!   run on this host, not on the lane's node;
//! - no arm sets its own `nodelist` (the lane pins its jobs), no lane writes `host` (its address
//!   is the node's `NodeAddr`, resolved when the run starts) or `gpus` (bakeoff reads GPU memory
//!   on this host, not on the node: GPUs are asked per arm, `[arms.slurm] gpus`).

use super::common::p;
use crate::campaign::diag::Reporter;
use crate::campaign::spec::Campaign;

/// Whether `name` can be one Slurm node name (no list, no range: one lane is one node).
fn node_name_ok(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 64
        && name
            .chars()
            .all(|ch| ch.is_ascii_alphanumeric() || matches!(ch, '-' | '_' | '.'))
}

pub(super) fn slurm_lanes(c: &Campaign, r: &mut Reporter) {
    let Some(first) = c.fleet.iter().position(|e| e.is_slurm()) else {
        return;
    };
    let first_id = c.fleet[first].id.clone();
    for (i, e) in c.fleet.iter().enumerate() {
        let at = p("lanes").index(i);
        if e.granted.is_some() {
            // Slurm names its node when the run starts.
            continue;
        }
        let Some(node) = &e.slurm_node else {
            r.error(
                &at.key("id"),
                format!(
                    "lane `{}` is a host-and-port lane, but lane `{first_id}` is a Slurm node: arms move between lanes, and a Slurm lane runs only Slurm jobs",
                    e.id
                ),
                "give every [[lanes]] table a `slurm_node`, or none",
            );
            continue;
        };
        if !node_name_ok(node) {
            r.error(
                &at.key("slurm_node"),
                format!("`{node}` is not one Slurm node name"),
                "name one node as `sinfo -N` lists it (e.g. \"node2\"): one lane is one node",
            );
        }
        if r.index.contains(&at.key("host")) {
            r.error(
                &at.key("host"),
                "a Slurm lane's address is its node's `NodeAddr` (resolved when the run starts)",
                "remove `host` from this lane",
            );
        }
        if !e.gpus.is_empty() {
            r.error(
                &at.key("gpus"),
                format!("bakeoff reads GPU memory on this host, not on Slurm node `{node}`"),
                "remove the lane's `gpus` and ask GPUs per arm (`[arms.slurm] gpus`)",
            );
        }
    }
    for (i, a) in c.arms.iter().enumerate() {
        if a.recipe_tables().len() != 1 {
            continue;
        }
        let at = p("arms").index(i);
        if a.recipe().job_name().is_some() {
            // A Slurm arm (its jobs found by name): the lane decides its node.
            if a.recipe().own_nodes().is_some() {
                r.error(
                    &at.key("slurm").key("nodelist"),
                    format!(
                        "arm `{}` names its own nodes, but the lanes are Slurm nodes: each lane pins its arms' jobs to its node",
                        a.id
                    ),
                    "remove `nodelist` (the lane's `slurm_node` decides where the job runs)",
                );
            }
        } else if a.kind().managed() {
            r.error(
                &at,
                format!(
                    "arm `{}` is a {} arm, started on this host, but the lanes are Slurm nodes: it would not run on its lane's node",
                    a.id,
                    a.kind().as_str()
                ),
                "run it as a Slurm job (`[arms.slurm]` with its argv listening on 0.0.0.0 and the lane port)",
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::campaign::parse;
    use std::path::Path;

    const HEAD: &str = "[campaign]\nid = \"slurm-lanes\"\n";
    const TAIL: &str =
        "[workload]\nranking_priority = [\"ttft\"]\nmatched_prompt_tokens = 64\nmax_tokens = 8\n";

    fn slurm_arm(id: &str, role: &str, extra: &str) -> String {
        format!("[[arms]]\nid = \"{id}\"\nrole = \"{role}\"\nengine = \"e\"\nmodel = \"m\"\nserved_model = \"m\"\nserved_context = 8192\n[arms.slurm]\nargv = [\"/bin/sleep\", \"--port\", \"18300\"]\n{extra}")
    }

    fn lane(id: &str, extra: &str) -> String {
        format!("[[lanes]]\nid = \"{id}\"\nport = 18300\n{extra}")
    }

    fn errors(text: &str) -> Vec<String> {
        match parse(text, Path::new("/tmp/sl.toml")) {
            Ok(_) => Vec::new(),
            Err(e) => e.diagnostics.iter().map(|d| d.to_string()).collect(),
        }
    }

    fn two_nodes() -> String {
        format!(
            "{}{}",
            lane("n1", "slurm_node = \"node1\"\nincumbent = \"inc\"\n"),
            lane("n2", "slurm_node = \"node2\"\n")
        )
    }

    #[test]
    fn slurm_lanes_on_one_port_load_and_pin_each_lanes_jobs_to_its_node() {
        let text = format!(
            "{HEAD}{}{TAIL}{}{}",
            two_nodes(),
            slurm_arm("inc", "incumbent", ""),
            slurm_arm("a", "candidate", "")
        );
        let c = parse(&text, Path::new("/tmp/sl.toml")).unwrap_or_else(|e| panic!("{e}"));
        let lanes = c.lanes();
        assert_eq!(lanes[1].lane.slurm_node.as_deref(), Some("node2"));
        // The same port on every lane: no arm is bound to one lane by it.
        assert_eq!(c.bound_lane(c.arm("a").unwrap()), None);
        let plan = crate::campaign::plan(&c);
        let sub = crate::campaign::lane_campaign(&c, "n2").unwrap();
        let argv = |c: &crate::campaign::Campaign, id: &str| {
            c.launch_command(c.arm(id).unwrap()).unwrap().start.argv
        };
        let a = argv(&sub, "a");
        assert_eq!(a[a.len() - 2], "--nodelist=node2", "{a:?}");
        assert!(a.last().unwrap().starts_with("--wrap=exec "), "{a:?}");
        // The arm itself is unchanged (its recipe hash proves a restored incumbent the same).
        assert!(sub
            .arm("a")
            .unwrap()
            .slurm
            .as_ref()
            .unwrap()
            .nodelist
            .is_none());
        assert_eq!(
            sub.recipe_hash(sub.arm("inc").unwrap()),
            c.recipe_hash(c.arm("inc").unwrap())
        );
        // The control's copy on n2 has a job name of its own (the incumbent's finds the incumbent).
        let lp = crate::campaign::lane_plan(&c, &plan.schedule, "n2").unwrap();
        let copy = lp
            .campaign
            .arm("inc.control")
            .unwrap()
            .slurm
            .as_ref()
            .unwrap();
        let copy_argv = argv(&lp.campaign, "inc.control");
        assert!(
            copy_argv.contains(&"--nodelist=node2".to_string()),
            "{copy_argv:?}"
        );
        assert_eq!(copy.job_name, "bakeoff-slurm-lanes-inc-control-n2");
        let inc = lp.campaign.arm("inc").unwrap().slurm.as_ref().unwrap();
        assert_eq!(inc.job_name, "bakeoff-slurm-lanes-inc");
        let out = plan.render(&crate::campaign::Mask::none());
        assert!(
            out.contains(
                "  slurm      node node2: every arm's job pinned there (--nodelist=node2)"
            ),
            "{out}"
        );
    }

    #[test]
    fn slurm_lane_mistakes_name_the_line_field_and_fix() {
        let text = format!(
            "{HEAD}{}{}{}{TAIL}{}{}{}",
            lane(
                "n1",
                "slurm_node = \"node1\"\nincumbent = \"inc\"\nhost = \"10.0.0.1\"\n"
            ),
            lane("n2", "slurm_node = \"node[2-3]\"\ngpus = [\"GPU-1\"]\n"),
            "[[lanes]]\nid = \"h\"\nport = 18301\n",
            slurm_arm("inc", "incumbent", ""),
            slurm_arm("a", "candidate", "nodelist = \"node9\"\n"),
            "[[arms]]\nid = \"b\"\nrole = \"candidate\"\nengine = \"e\"\nmodel = \"m\"\nserved_model = \"m\"\nserved_context = 8192\n[arms.process]\nargv = [\"/bin/sleep\", \"1\"]\n"
        );
        let e = errors(&text);
        let fields: Vec<&str> = e.iter().map(|l| l.split(": ").nth(1).unwrap()).collect();
        assert_eq!(
            fields,
            vec![
                "lanes[0].host",
                "lanes[1].slurm_node",
                "lanes[1].gpus",
                "lanes[2].id",
                "arms[1].slurm.nodelist",
                "arms[2]"
            ],
            "{e:?}"
        );
        assert!(e[0].starts_with("/tmp/sl.toml:"), "{e:?}");
        assert!(e[0].ends_with("; remove `host` from this lane"), "{e:?}");
        assert!(
            e[3].contains("lane `h` is a host-and-port lane, but lane `n1` is a Slurm node"),
            "{e:?}"
        );
        assert!(
            e[5].contains("arm `b` is a process arm, started on this host"),
            "{e:?}"
        );
        // Two lanes on one node and port.
        let twice = format!(
            "{HEAD}{}{}{TAIL}{}",
            lane("n1", "slurm_node = \"node1\"\nincumbent = \"inc\"\n"),
            lane("n2", "slurm_node = \"node1\"\n"),
            slurm_arm("inc", "incumbent", "")
        );
        let e = errors(&twice);
        assert_eq!(e.len(), 1, "{e:?}");
        assert!(
            e[0].contains("lanes[1].slurm_node: lane `n2` is on Slurm node node1 port 18300, which lane `n1` (line 6) already is"),
            "{e:?}"
        );
    }
}
