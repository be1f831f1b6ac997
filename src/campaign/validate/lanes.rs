//! `[lane]` or `[[lanes]]`: which form the file uses, each lane's settings, the rules across
//! lanes (ids, addresses) and which lane the incumbent serves.

use super::common::{is_id, p};
use super::identity::lane_settings;
use crate::campaign::diag::Reporter;
use crate::campaign::spec::{Campaign, Role};
use std::collections::HashMap;

/// Checks the lane tables and sets `c.lane` to the incumbent's lane when the file declares
/// `[[lanes]]` (the lane the stop and restoration steps act on).
pub(super) fn lanes(c: &mut Campaign, r: &mut Reporter) {
    let written = r.index.contains(&p("lane"));
    if c.fleet.is_empty() {
        if written {
            lane_settings(&c.lane.clone(), &p("lane"), r);
        } else {
            r.error(
                &p("lane"),
                "no lane: the file has neither `[lane]` nor `[[lanes]]`",
                "add `[lane]` with `port = …` (one lane), or one `[[lanes]]` table per lane with `id`, `port` and the lane's `incumbent`",
            );
        }
        return;
    }
    if written {
        r.error(
            &p("lane"),
            "`[lane]` and `[[lanes]]` are both written",
            "keep one form: `[lane]` for one lane, or `[[lanes]]` tables (each with its `id`) for several",
        );
    }
    across_lanes(c, r);
    // A granted lane's settings are `[fleet.slurm]`'s, checked there.
    for (i, e) in c
        .fleet
        .iter()
        .enumerate()
        .filter(|(_, e)| e.granted.is_none())
    {
        lane_settings(&e.lane(), &p("lanes").index(i), r);
    }
    incumbents(c, r);
    let incumbent = c.fleet.iter().find(|e| e.incumbent.is_some());
    c.lane = incumbent.unwrap_or(&c.fleet[0]).lane();
}

/// `[fleet]` (its control arm) and each lane's `env` names: after the arms are checked (the
/// control's recipe must be one bakeoff starts on any lane).
pub(super) fn fleet(c: &Campaign, r: &mut Reporter) {
    for (i, e) in c
        .fleet
        .iter()
        .enumerate()
        .filter(|(_, e)| e.granted.is_none())
    {
        for k in e.env.keys() {
            let ok = k
                .chars()
                .next()
                .is_some_and(|ch| ch.is_ascii_alphabetic() || ch == '_')
                && k.chars().all(|ch| ch.is_ascii_alphanumeric() || ch == '_');
            if !ok {
                r.error(
                    &p("lanes").index(i).key("env"),
                    format!("`{k}` is not an environment variable name"),
                    "use letters, digits and `_`, not starting with a digit",
                );
            }
        }
    }
    let Some(t) = &c.fleet_table else {
        return;
    };
    if !c.multi_lane() {
        r.error(
            &p("fleet"),
            "`[fleet]` is for a campaign with two or more `[[lanes]]`",
            "remove `[fleet]`, or declare the lanes as `[[lanes]]` tables",
        );
        return;
    }
    let at = p("fleet").key("control");
    if let Some(id) = &t.control {
        match c.arm(id) {
            None => {
                r.error(
                    &at,
                    format!("`{id}` is not an arm of this campaign"),
                    "name one of the `[[arms]]` ids, or leave `control` out for the incumbent",
                );
                return;
            }
            Some(a) if a.speculative.is_some() => {
                r.error(
                    &at,
                    format!("`{id}` is a speculative arm: its figures depend on its draft's acceptance, not only on the card"),
                    "name a plain arm (its matched control, or the incumbent)",
                );
                return;
            }
            Some(_) => {}
        }
    }
    if let Err(why) = c.control_arm() {
        r.error(
            &at,
            why,
            "name an arm bakeoff starts with the lane's port (a reference, process, container or Slurm arm that does not write a lane's port literally)",
        );
    }
}

/// With several lanes: an arm whose start command names one lane's port (a literal port) must
/// be able to run there: the incumbent names its own lane's, and a speculative arm and its
/// control (which share a lane) do not name two different lanes.
pub(super) fn bound_arms(c: &Campaign, r: &mut Reporter) {
    if !c.multi_lane() || c.arms.iter().any(|a| a.recipe_tables().len() != 1) {
        return;
    }
    let lanes = c.lanes();
    for (i, a) in c.arms.iter().enumerate() {
        let Some(bound) = c.bound_lane(a) else {
            continue;
        };
        let at = p("arms").index(i);
        if let Some(home) = lanes
            .iter()
            .find(|l| l.incumbent.as_deref() == Some(a.id.as_str()))
            .filter(|l| l.id != bound)
        {
            r.error(
                &at,
                format!(
                    "the incumbent `{}` serves lane `{}`, but its start command names the port of lane `{bound}`",
                    a.id, home.id
                ),
                format!("start it on lane `{}`'s port, or set `incumbent` on lane `{bound}`", home.id),
            );
        }
        let control = a.speculative.as_ref().and_then(|s| c.arm(&s.control));
        if let Some(other) = control
            .and_then(|ctl| c.bound_lane(ctl))
            .filter(|o| *o != bound)
        {
            r.error(
                &at,
                format!(
                    "speculative arm `{}` names the port of lane `{bound}`, its control the port of lane `{other}`: they run on one lane to be compared",
                    a.id
                ),
                "start both on the same lane's port",
            );
        }
    }
}

/// Lane ids valid and distinct, and no two lanes on one host and port.
fn across_lanes(c: &Campaign, r: &mut Reporter) {
    let mut ids: HashMap<&str, usize> = HashMap::new();
    let mut addresses: HashMap<(String, u16), usize> = HashMap::new();
    for (i, e) in c.fleet.iter().enumerate() {
        let at = p("lanes").index(i);
        if !is_id(&e.id) {
            r.error(
                &at.key("id"),
                format!(
                    "`{}` is not a valid lane id (it tags the lane's evidence files)",
                    e.id
                ),
                "use lowercase letters, digits and `-`, e.g. \"gpu0\"",
            );
        } else if let Some(first) = ids.insert(e.id.as_str(), i) {
            r.error(
                &at.key("id"),
                format!(
                    "lane id `{}` is used twice (also lanes[{first}], line {})",
                    e.id,
                    r.index.line(&p("lanes").index(first).key("id"))
                ),
                "give every [[lanes]] table an id of its own",
            );
        }
        if e.granted.is_some() {
            // Its node is Slurm's to grant, never one of the file's (the request excludes them).
            continue;
        }
        // A Slurm lane is where its node is (its address is resolved when the run starts).
        if let Some(node) = &e.slurm_node {
            if let Some(first) = addresses.insert((format!("slurm node {node}"), e.port), i) {
                r.error(
                    &at.key("slurm_node"),
                    format!(
                        "lane `{}` is on Slurm node {node} port {}, which lane `{}` (line {}) already is: two lanes on one port would stop each other's arms",
                        e.id,
                        e.port,
                        c.fleet[first].id,
                        r.index.line(&p("lanes").index(first).key("slurm_node"))
                    ),
                    "give each Slurm lane its own node",
                );
            }
            continue;
        }
        let host = if loopback(&e.host) {
            "127.0.0.1"
        } else {
            e.host.as_str()
        };
        if let Some(first) = addresses.insert((host.to_string(), e.port), i) {
            r.error(
                &at.key("port"),
                format!(
                    "lane `{}` is on {}:{}, which lane `{}` (line {}) already is: two lanes on one port would stop each other's arms",
                    e.id,
                    e.host,
                    e.port,
                    c.fleet[first].id,
                    r.index.line(&p("lanes").index(first).key("port"))
                ),
                "give each lane its own host and port",
            );
        }
    }
}

/// The same address by another loopback name (`localhost`, `127.0.0.1`, `::1`).
fn loopback(host: &str) -> bool {
    matches!(host, "localhost" | "::1") || host.starts_with("127.")
}

/// Each lane's `incumbent` names the incumbent arm; exactly one lane names it.
fn incumbents(c: &Campaign, r: &mut Reporter) {
    let mut serving: Vec<usize> = Vec::new();
    for (i, e) in c.fleet.iter().enumerate() {
        let Some(id) = &e.incumbent else { continue };
        let at = p("lanes").index(i).key("incumbent");
        match c.arms.iter().find(|a| &a.id == id) {
            None => r.error(
                &at,
                format!("no arm has id `{id}`"),
                "name the [[arms]] table with role = \"incumbent\" that serves this lane today, or leave `incumbent` out for a qualification lane",
            ),
            Some(a) if a.role != Role::Incumbent => r.error(
                &at,
                format!("arm `{id}` is a {}, not the incumbent", a.role.as_str()),
                "name the arm with role = \"incumbent\" (what serves this lane today), or leave `incumbent` out",
            ),
            Some(_) if !serving.is_empty() => r.error(
                &at,
                format!(
                    "the incumbent `{id}` already serves lane `{}`",
                    c.fleet[serving[0]].id
                ),
                "an incumbent serves one lane: leave `incumbent` out here (a qualification lane)",
            ),
            Some(_) => serving.push(i),
        }
    }
    if serving.is_empty() {
        if let Some(inc) = c.arms.iter().find(|a| a.role == Role::Incumbent) {
            r.error(
                &p("lanes"),
                format!("no lane says it is served by the incumbent `{}`", inc.id),
                format!(
                    "set `incumbent = \"{}\"` on the [[lanes]] table of the lane it serves today (it is stopped there first and restored there last)",
                    inc.id
                ),
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::campaign::parse;
    use std::path::Path;

    const HEAD: &str = "[campaign]\nid = \"fleet-test\"\n";
    const TAIL: &str =
        "[workload]\nranking_priority = [\"ttft\"]\nmatched_prompt_tokens = 64\nmax_tokens = 8\n";

    fn arm(id: &str, role: &str, extra: &str) -> String {
        format!("[[arms]]\nid = \"{id}\"\nrole = \"{role}\"\nengine = \"e\"\nmodel = \"m\"\nserved_model = \"m\"\nserved_context = 8192\n{extra}[arms.process]\nargv = [\"/bin/sleep\", \"100\"]\n")
    }

    fn lane(id: &str, port: u16, extra: &str) -> String {
        format!("[[lanes]]\nid = \"{id}\"\nport = {port}\n{extra}")
    }

    fn file(lanes: &str) -> String {
        format!(
            "{HEAD}{lanes}{TAIL}{}{}{}",
            arm("inc", "incumbent", ""),
            arm("a", "candidate", ""),
            arm("b", "candidate", "")
        )
    }

    fn errors(text: &str) -> Vec<String> {
        match parse(text, Path::new("/tmp/fleet.toml")) {
            Ok(_) => Vec::new(),
            Err(e) => e.diagnostics.iter().map(|d| d.to_string()).collect(),
        }
    }

    #[test]
    fn lanes_load_and_the_incumbents_lane_is_the_lane() {
        let text = file(&format!(
            "{}{}",
            lane("g0", 18101, ""),
            lane("g1", 18102, "incumbent = \"inc\"\ngpus = [\"GPU-1\"]\n")
        ));
        let c = parse(&text, Path::new("/tmp/fleet.toml")).unwrap_or_else(|e| panic!("{e}"));
        assert!(c.multi_lane());
        assert_eq!(c.lane.port, 18102);
        assert_eq!(c.lane.gpus, vec!["GPU-1".to_string()]);
        let lanes = c.lanes();
        assert_eq!(lanes.len(), 2);
        assert_eq!(lanes[0].incumbent, None);
        assert_eq!(lanes[1].incumbent.as_deref(), Some("inc"));
    }

    #[test]
    fn the_one_lane_form_is_a_list_of_one() {
        let text = file("[lane]\nport = 18103\n");
        let c = parse(&text, Path::new("/tmp/fleet.toml")).unwrap_or_else(|e| panic!("{e}"));
        assert!(!c.multi_lane());
        let lanes = c.lanes();
        assert_eq!(lanes.len(), 1);
        assert_eq!(lanes[0].id, "lane");
        assert_eq!(lanes[0].incumbent.as_deref(), Some("inc"));
        // Serialized as before: no `lanes` key.
        let v = serde_json::to_value(&c).unwrap();
        assert!(v.get("lanes").is_none());
    }

    #[test]
    fn duplicate_lane_ids_name_the_field_and_the_fix() {
        let text = file(&format!(
            "{}{}",
            lane("g0", 18104, "incumbent = \"inc\"\n"),
            lane("g0", 18105, "")
        ));
        let e = errors(&text);
        assert_eq!(e.len(), 1, "{e:?}");
        assert!(e[0].starts_with("/tmp/fleet.toml:8: lanes[1].id: lane id `g0` is used twice (also lanes[0], line 4); give every [[lanes]] table an id of its own"), "{e:?}");
    }

    #[test]
    fn two_lanes_on_one_address_are_refused() {
        let text = file(&format!(
            "{}{}",
            lane("g0", 18106, "incumbent = \"inc\"\n"),
            lane("g1", 18106, "host = \"localhost\"\n")
        ));
        let e = errors(&text);
        assert_eq!(e.len(), 1, "{e:?}");
        assert!(e[0].contains("lanes[1].port: lane `g1` is on localhost:18106, which lane `g0` (line 5) already is"), "{e:?}");
        assert!(
            e[0].ends_with("give each lane its own host and port"),
            "{e:?}"
        );
    }

    #[test]
    fn lane_and_lanes_together_are_refused() {
        let text = file(&format!(
            "[lane]\nport = 18107\n{}",
            lane("g0", 18108, "incumbent = \"inc\"\n")
        ));
        let e = errors(&text);
        assert_eq!(e.len(), 1, "{e:?}");
        assert!(
            e[0].starts_with(
                "/tmp/fleet.toml:3: lane: `[lane]` and `[[lanes]]` are both written; keep one form"
            ),
            "{e:?}"
        );
    }

    #[test]
    fn no_lane_at_all_is_refused() {
        let e = errors(&file(""));
        assert_eq!(e.len(), 1, "{e:?}");
        assert!(
            e[0].contains("lane: no lane: the file has neither `[lane]` nor `[[lanes]]`"),
            "{e:?}"
        );
    }

    #[test]
    fn the_incumbent_must_serve_exactly_one_lane() {
        let none = errors(&file(&format!(
            "{}{}",
            lane("g0", 18109, ""),
            lane("g1", 18110, "")
        )));
        assert_eq!(none.len(), 1, "{none:?}");
        assert!(none[0].contains("lanes: no lane says it is served by the incumbent `inc`; set `incumbent = \"inc\"`"), "{none:?}");
        let twice = errors(&file(&format!(
            "{}{}",
            lane("g0", 18111, "incumbent = \"inc\"\n"),
            lane("g1", 18112, "incumbent = \"inc\"\n")
        )));
        assert_eq!(twice.len(), 1, "{twice:?}");
        assert!(
            twice[0].contains("lanes[1].incumbent: the incumbent `inc` already serves lane `g0`"),
            "{twice:?}"
        );
        let candidate = errors(&file(&format!(
            "{}{}",
            lane("g0", 18113, "incumbent = \"inc\"\n"),
            lane("g1", 18114, "incumbent = \"a\"\n")
        )));
        assert_eq!(candidate.len(), 1, "{candidate:?}");
        assert!(
            candidate[0].contains("lanes[1].incumbent: arm `a` is a candidate, not the incumbent"),
            "{candidate:?}"
        );
    }

    #[test]
    fn a_lanes_own_settings_are_checked_at_its_table() {
        let text = file(&format!(
            "{}{}",
            lane("g0", 18115, "incumbent = \"inc\"\n"),
            lane("G 1", 0, "health_path = \"health\"\n")
        ));
        let e = errors(&text);
        let fields: Vec<&str> = e.iter().map(|l| l.split(": ").nth(1).unwrap()).collect();
        assert_eq!(
            fields,
            vec!["lanes[1].id", "lanes[1].port", "lanes[1].health_path"],
            "{e:?}"
        );
    }

    #[test]
    fn dry_run_prints_the_lanes_and_the_schedule() {
        let text = file(&format!(
            "{}{}{}",
            lane("g0", 18116, "incumbent = \"inc\"\n"),
            lane("g1", 18117, ""),
            lane("g2", 18118, "")
        ));
        let c = parse(&text, Path::new("/tmp/fleet.toml")).unwrap_or_else(|e| panic!("{e}"));
        let p = crate::campaign::plan(&c);
        let out = p.render(&crate::campaign::Mask::from_process_env(&c));
        assert!(out.contains("lanes        3 lane(s)"), "{out}");
        assert!(out.contains("lane g0      http://127.0.0.1:18116"), "{out}");
        assert!(
            out.contains("  incumbent  none (a qualification lane"),
            "{out}"
        );
        let lanes: Vec<&str> = ["inc", "a", "b"]
            .iter()
            .map(|a| p.schedule.lane_of(a).unwrap())
            .collect();
        assert_eq!(lanes, vec!["g0", "g1", "g2"]);
        assert!(out.contains("    1. inc ("), "{out}");
        assert!(
            out.contains("the lane's incumbent, measured where it serves"),
            "{out}"
        );
    }

    fn process_arm(id: &str, role: &str, port: u16) -> String {
        format!("[[arms]]\nid = \"{id}\"\nrole = \"{role}\"\nengine = \"e\"\nmodel = \"m\"\nserved_model = \"m\"\nserved_context = 8192\n[arms.process]\nargv = [\"/bin/sleep\", \"--port\", \"{port}\"]\n")
    }

    #[test]
    fn an_arm_started_on_a_literal_port_is_scheduled_on_that_lane() {
        let lanes = format!(
            "{}{}",
            lane("g0", 18120, "incumbent = \"inc\"\n"),
            lane("g1", 18121, "")
        );
        let text = format!(
            "{HEAD}{lanes}{TAIL}{}{}{}",
            process_arm("inc", "incumbent", 18120),
            process_arm("a", "candidate", 18120),
            process_arm("b", "candidate", 18120)
        );
        let c = parse(&text, Path::new("/tmp/fleet.toml")).unwrap_or_else(|e| panic!("{e}"));
        let p = crate::campaign::plan(&c);
        // Both candidates name g0's port: g1 stays empty rather than start them on the wrong port.
        assert_eq!(p.schedule.lane_of("a"), Some("g0"));
        assert_eq!(p.schedule.lane_of("b"), Some("g0"));
        assert!(p.schedule.lanes[1].arms.is_empty());
        assert_eq!(
            p.schedule.lanes[0].arms[1].why,
            crate::campaign::schedule::Why::NamesPort
        );

        let wrong = format!(
            "{HEAD}{lanes}{TAIL}{}{}",
            process_arm("inc", "incumbent", 18121),
            process_arm("a", "candidate", 18120)
        );
        let e = errors(&wrong);
        assert_eq!(e.len(), 1, "{e:?}");
        assert!(e[0].contains("arms[0]: the incumbent `inc` serves lane `g0`, but its start command names the port of lane `g1`"), "{e:?}");
    }

    #[test]
    fn the_fleet_control_and_lane_env_are_checked_at_load() {
        let two = format!(
            "{}{}",
            lane("g0", 18122, "incumbent = \"inc\"\n"),
            lane("g1", 18123, "env = { SLOW = \"1.08\" }\n")
        );
        let ok = file(&format!("{two}[fleet]\ncontrol = \"a\"\n"));
        let c = parse(&ok, Path::new("/tmp/fleet.toml")).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(c.control_arm().unwrap().id, "a");
        let out = crate::campaign::plan(&c).render(&crate::campaign::Mask::none());
        assert!(
            out.contains("  control    a's own warm c1 timing serves"),
            "{out}"
        );
        assert!(
            out.contains("  control    first, a.control = a's recipe"),
            "{out}"
        );
        assert!(
            out.contains("  env        SLOW=1.08 (every arm on this lane)"),
            "{out}"
        );
        let e = errors(&file(&format!("{two}[fleet]\ncontrol = \"nope\"\n")));
        assert_eq!(e.len(), 1, "{e:?}");
        assert!(e[0].contains("fleet.control: `nope` is not an arm of this campaign; name one of the `[[arms]]` ids"), "{e:?}");
        let e = errors(&file("[lane]\nport = 18124\n[fleet]\ncontrol = \"a\"\n"));
        assert_eq!(e.len(), 1, "{e:?}");
        assert!(
            e[0].contains("fleet: `[fleet]` is for a campaign with two or more `[[lanes]]`"),
            "{e:?}"
        );
        let bad_env = file(&format!(
            "{}{}",
            lane("g0", 18125, "incumbent = \"inc\"\n"),
            lane("g1", 18126, "env = { \"1X\" = \"a\" }\n")
        ));
        let e = errors(&bad_env);
        assert_eq!(e.len(), 1, "{e:?}");
        assert!(
            e[0].contains("lanes[1].env: `1X` is not an environment variable name"),
            "{e:?}"
        );
        // A control started on one lane's literal port cannot run on the others.
        let lanes = format!(
            "{}{}",
            lane("g0", 18127, "incumbent = \"inc\"\n"),
            lane("g1", 18128, "")
        );
        let bound = format!(
            "{HEAD}{lanes}{TAIL}[fleet]\ncontrol = \"inc\"\n{}{}",
            process_arm("inc", "incumbent", 18127),
            arm("a", "candidate", "")
        );
        let e = errors(&bound);
        assert_eq!(e.len(), 1, "{e:?}");
        assert!(
            e[0].contains("fleet.control: the control arm `inc` names lane `g0`'s port"),
            "{e:?}"
        );
        // By default the same campaign loads: the verdict says the spread was not measured.
        let default = bound.replace("[fleet]\ncontrol = \"inc\"\n", "");
        let c = parse(&default, Path::new("/tmp/fleet.toml")).unwrap_or_else(|e| panic!("{e}"));
        assert!(c.control_arm().is_err());
    }
}
