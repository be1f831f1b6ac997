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
//!   on this host, not on the node: GPUs are asked per arm, `[arms.slurm] gpus`);
//! - `[fleet] client = "node"` needs Slurm lanes (a host:port lane's client can only run here),
//!   and a client on the node cannot replay conversations (each turn is built from the replies
//!   before it, so the requests cannot be ordered ahead; docs/fleet.md "Where the client runs").

use super::common::p;
use crate::campaign::diag::Reporter;
use crate::campaign::spec::{Campaign, ClientPlace};

/// Whether `name` can be one Slurm node name (no list, no range: one lane is one node).
fn node_name_ok(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 64
        && name
            .chars()
            .all(|ch| ch.is_ascii_alphanumeric() || matches!(ch, '-' | '_' | '.'))
}

/// `[fleet] client`: where each lane's client runs (checked with the lanes, after the arms).
pub(super) fn fleet_client(c: &Campaign, r: &mut Reporter) {
    let set = c.fleet_table.as_ref().and_then(|t| t.client);
    let at = p("fleet").key("client");
    let slurm = c.fleet.iter().any(|e| e.is_slurm());
    if set == Some(ClientPlace::Node) && !slurm {
        r.error(
            &at,
            "`node` runs each lane's client on its Slurm node, but these lanes are host-and-port lanes: their client runs in bakeoff, on this host",
            "remove `client` (or write \"controller\"), or make the lanes Slurm nodes (`slurm_node`, `[fleet.slurm]`)",
        );
    }
    if slurm && set != Some(ClientPlace::Controller) && c.workload.conversation.is_some() {
        r.error(
            &at,
            "a client on each Slurm lane's node (the default) cannot run `[workload.conversation]`: each turn is built from the replies before it, so its requests cannot be ordered ahead to the node",
            "set `[fleet] client = \"controller\"` (measured from bakeoff over the network, the round trip recorded), or drop the conversation",
        );
    }
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
    fn the_fleet_client_is_where_each_lanes_load_runs_and_is_checked_at_load() {
        let arms = format!(
            "{}{}",
            slurm_arm("inc", "incumbent", ""),
            slurm_arm("a", "candidate", "")
        );
        let with =
            |fleet: &str, tail: &str| format!("{HEAD}{}{fleet}{TAIL}{tail}{arms}", two_nodes());
        let c = parse(&with("", ""), Path::new("/tmp/sl.toml")).unwrap_or_else(|e| panic!("{e}"));
        let lanes = c.lanes();
        assert!(
            c.client_on_node(&lanes[1].lane),
            "a Slurm lane's client is on its node"
        );
        let sub = crate::campaign::lane_campaign(&c, "n2").unwrap();
        assert!(sub.client_on_node(&sub.lane));
        let ctl = "[fleet]\nclient = \"controller\"\n";
        let c = parse(&with(ctl, ""), Path::new("/tmp/sl.toml")).unwrap_or_else(|e| panic!("{e}"));
        assert!(!c.client_on_node(&c.lanes()[1].lane));
        let conv = "[workload.conversation]\nturns = 2\n";
        let e = errors(&with("", conv));
        assert_eq!(e.len(), 1, "{e:?}");
        assert!(e[0].contains("fleet.client: a client on each Slurm lane's node (the default) cannot run `[workload.conversation]`") && e[0].contains("set `[fleet] client = \"controller\"`"), "{e:?}");
        assert!(errors(&with(ctl, conv)).is_empty());
        let e = errors(&with("[fleet]\nclient = \"nodes\"\n", ""));
        assert!(
            e[0].contains("fleet.client") || e[0].contains("client"),
            "{e:?}"
        );
        // Host-and-port lanes: the client can only run here.
        let hp = format!(
            "{HEAD}{}{}[fleet]\nclient = \"node\"\n{TAIL}[[arms]]\nid = \"inc\"\nrole = \"incumbent\"\nengine = \"e\"\nmodel = \"m\"\nserved_model = \"m\"\nserved_context = 8192\n[arms.endpoint]\nurl = \"http://127.0.0.1:18301\"\n",
            lane("g0", "incumbent = \"inc\"\n"),
            "[[lanes]]\nid = \"g1\"\nport = 18302\n"
        );
        let e = errors(&hp);
        assert!(
            e.iter().any(|l| l.contains("fleet.client: `node` runs each lane's client on its Slurm node, but these lanes are host-and-port lanes")),
            "{e:?}"
        );
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
