//! `[fleet.slurm]` (docs/fleet.md "K lanes from Slurm"): K lanes Slurm grants when the run
//! starts. Load makes them `[[lanes]]` entries `slurm-1..K` (no node yet), so the schedule, the
//! lane plans and the dry run see every lane; the run sets each one's node from the allocation.
//!
//! The rules, and why:
//! - the incumbent serves on a node the operator knows, not one Slurm will grant: `[fleet.slurm]`
//!   comes with `[[lanes]]` (Slurm nodes, one of them the incumbent's), never with `[lane]`;
//! - every Slurm arm's `partition` is the request's: an arm's job is pinned to a granted node,
//!   and Slurm refuses a node outside the job's partition;
//! - the request's values go to sbatch as one argument each, `time_limit` in Slurm's forms.

use super::common::p;
use super::identity::lane_settings;
use super::slurm::{time_limit_ok, word_ok};
use crate::campaign::diag::Reporter;
use crate::campaign::spec::Campaign;

/// The most lanes one request may ask for (a typo's 1000 nodes would pend for nothing).
pub const MAX_LANES: u32 = 64;
/// The longest `pending_timeout_s` (a day): past it, the request is a queue, not a bake-off.
pub const MAX_PENDING_S: u64 = 86_400;

/// Adds the K granted lanes to `c.fleet` when `[[lanes]]` are written (without them the file is
/// refused by [`fleet_slurm`]). Before the lane checks: ids and the schedule count them.
pub(super) fn expand(c: &mut Campaign) {
    let Some(s) = c.fleet_table.as_ref().and_then(|t| t.grant.as_ref()) else {
        return;
    };
    if c.fleet.is_empty() || !(1..=MAX_LANES).contains(&s.lanes) {
        return;
    }
    let more = s.entries();
    c.fleet.extend(more);
}

pub(super) fn fleet_slurm(c: &Campaign, r: &mut Reporter) {
    let Some(s) = c.fleet_table.as_ref().and_then(|t| t.grant.as_ref()) else {
        return;
    };
    let at = p("fleet").key("slurm");
    if !c.fleet.iter().any(|e| e.granted.is_none()) {
        r.error(
            &at,
            "`[fleet.slurm]` grants qualification lanes, but the incumbent serves on a node of its own, which Slurm will not grant",
            "declare the incumbent's lane as a `[[lanes]]` table with its `slurm_node`, `port` and `incumbent` (and `[fleet.slurm]` beside it)",
        );
    }
    if !(1..=MAX_LANES).contains(&s.lanes) {
        r.error(
            &at.key("lanes"),
            format!(
                "{} lanes: one request asks for 1 to {MAX_LANES} nodes",
                s.lanes
            ),
            "ask for as many nodes as lanes you want Slurm to grant, e.g. `lanes = 3`",
        );
    }
    if !word_ok(&s.partition) {
        r.error(
            &at.key("partition"),
            format!("`{}` is not one Slurm partition name", s.partition),
            "name the partition the lanes' nodes come from, as `sinfo` lists it",
        );
    }
    for (key, v) in [
        ("constraint", &s.constraint),
        ("gres", &s.gres),
        ("account", &s.account),
    ] {
        if v.as_deref().is_some_and(|v| !word_ok(v)) {
            r.error(
                &at.key(key),
                format!(
                    "`{}` is empty or holds whitespace",
                    v.as_deref().unwrap_or_default()
                ),
                format!(
                    "give `{key}` as sbatch takes it after `--{key}=` (one word), or leave it out"
                ),
            );
        }
    }
    if let Some(t) = s.time_limit.as_deref().filter(|t| !time_limit_ok(t)) {
        r.error(
            &at.key("time_limit"),
            format!("`{t}` is not a Slurm time limit"),
            "use minutes, `MM:SS`, `HH:MM:SS`, `D-HH`, `D-HH:MM` or `D-HH:MM:SS` (e.g. \"2:00:00\")",
        );
    }
    if !(1..=MAX_PENDING_S).contains(&s.pending_timeout_s) {
        r.error(
            &at.key("pending_timeout_s"),
            format!("{} s is outside 1..={MAX_PENDING_S}", s.pending_timeout_s),
            "give how long Slurm may take to grant the nodes before the run gives up, e.g. 120",
        );
    }
    // The granted lanes' settings, checked once (they are alike but for their id).
    let one = crate::campaign::FleetSlurm {
        lanes: 1,
        ..s.clone()
    };
    lane_settings(&one.entries()[0].lane(), &at, r);
    for k in s.env.keys().filter(|k| !super::common::is_env_name(k)) {
        r.error(
            &at.key("env"),
            format!("`{k}` is not an environment variable name"),
            "use letters, digits and `_`, not starting with a digit",
        );
    }
    for (i, a) in c.arms.iter().enumerate() {
        // A Slurm arm (its jobs found by name); other kinds are refused on Slurm lanes.
        if a.recipe_tables().len() != 1 || a.recipe().job_name().is_none() {
            continue;
        }
        let asked = a.recipe().partition();
        if asked != Some(s.partition.as_str()) {
            r.error(
                &p("arms").index(i).key("slurm").key("partition"),
                format!(
                    "arm `{}` asks partition {}, but the lanes Slurm grants come from partition `{}`: its job could not be pinned to one of them",
                    a.id,
                    asked.map_or("(the default)".into(), |x| format!("`{x}`")),
                    s.partition
                ),
                format!("set `partition = \"{}\"` in the arm's `[arms.slurm]`", s.partition),
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::campaign::parse;
    use std::path::Path;

    const HEAD: &str = "[campaign]\nid = \"fs\"\n[[lanes]]\nid = \"n1\"\nslurm_node = \"node1\"\nport = 18300\nincumbent = \"inc\"\n";
    const TAIL: &str =
        "[workload]\nranking_priority = [\"ttft\"]\nmatched_prompt_tokens = 64\nmax_tokens = 8\n";

    fn arm(id: &str, role: &str, partition: &str) -> String {
        format!("[[arms]]\nid = \"{id}\"\nrole = \"{role}\"\nengine = \"e\"\nmodel = \"m\"\nserved_model = \"m\"\nserved_context = 8192\n[arms.slurm]\nargv = [\"/bin/sleep\", \"--port\", \"18300\"]\n{partition}")
    }

    fn file(head: &str, table: &str, part: &str) -> String {
        format!(
            "{head}[fleet.slurm]\n{table}{TAIL}{}{}",
            arm("inc", "incumbent", part),
            arm("a", "candidate", part)
        )
    }

    #[test]
    fn k_lanes_are_made_at_load_and_the_request_excludes_the_files_own_nodes() {
        let text = file(
            HEAD,
            "partition = \"fleet\"\nlanes = 2\nport = 18300\ngres = \"gpu:1\"\ntime_limit = \"1:00:00\"\nstop_grace_s = 3\n",
            "partition = \"fleet\"\n",
        );
        let mut c = parse(&text, Path::new("/tmp/fs.toml")).unwrap_or_else(|e| panic!("{e}"));
        let ids: Vec<String> = c.lanes().iter().map(|l| l.id.clone()).collect();
        assert_eq!(ids, ["n1", "slurm-1", "slurm-2"]);
        assert_eq!(c.lanes()[2].lane.stop_grace_s, 3);
        assert_eq!(
            c.slurm_request().unwrap().join(" "),
            "sbatch --parsable --job-name=bakeoff-fleet-fs --nodes=2 --ntasks-per-node=1 --cpus-per-task=1 --partition=fleet --exclude=node1 --time=1:00:00 --output=/dev/null --wrap=exec sleep infinity"
        );
        let out = crate::campaign::plan(&c).render(&crate::campaign::Mask::none());
        assert!(
            out.contains("come from Slurm when the run starts, not now"),
            "{out}"
        );
        assert!(out.contains("a node Slurm grants at run time"), "{out}");
        // Once granted, a granted lane pins its arms' jobs to its node and gives them its gres.
        c.fleet[2].slurm_node = Some("node3".into());
        let sub = crate::campaign::lane_campaign(&c, "slurm-2").unwrap();
        let argv = sub
            .launch_command(sub.arm("a").unwrap())
            .unwrap()
            .start
            .argv;
        assert!(
            argv.contains(&"--nodelist=node3".to_string())
                && argv.contains(&"--gres=gpu:1".to_string()),
            "{argv:?}"
        );
        let own = crate::campaign::lane_campaign(&c, "n1").unwrap();
        let argv = own
            .launch_command(own.arm("a").unwrap())
            .unwrap()
            .start
            .argv;
        assert!(!argv.iter().any(|a| a.starts_with("--gres")), "{argv:?}");
    }

    #[test]
    fn fleet_slurm_mistakes_name_the_field_and_fix() {
        let bad = file(
            HEAD,
            "partition = \"\"\nlanes = 0\nport = 0\nconstraint = \"a b\"\ntime_limit = \"1h\"\npending_timeout_s = 0\nenv = { \"1X\" = \"y\" }\n",
            "",
        );
        let e = match parse(&bad, Path::new("/tmp/fs.toml")) {
            Ok(_) => panic!("loaded"),
            Err(e) => e
                .diagnostics
                .iter()
                .map(|d| d.to_string())
                .collect::<Vec<_>>(),
        };
        let fields: Vec<&str> = e.iter().map(|l| l.split(": ").nth(1).unwrap()).collect();
        for f in [
            "fleet.slurm.lanes",
            "fleet.slurm.partition",
            "fleet.slurm.constraint",
            "fleet.slurm.time_limit",
            "fleet.slurm.pending_timeout_s",
            "fleet.slurm.port",
            "fleet.slurm.env",
            "arms[0].slurm.partition",
            "arms[1].slurm.partition",
        ] {
            assert!(fields.contains(&f), "{f}: {e:#?}");
        }
        assert!(
            e.iter().any(|l| l.starts_with("/tmp/fs.toml:")
                && l.contains("`1h` is not a Slurm time limit; use minutes")),
            "{e:#?}"
        );
        // Without [[lanes]]: the incumbent's lane is asked for.
        let lone = file(
            "[campaign]\nid = \"fs\"\n",
            "partition = \"fleet\"\nlanes = 2\nport = 18300\n",
            "partition = \"fleet\"\n",
        );
        let e = parse(&lone, Path::new("/tmp/fs.toml"))
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("fleet.slurm: `[fleet.slurm]` grants qualification lanes"),
            "{e}"
        );
    }
}
