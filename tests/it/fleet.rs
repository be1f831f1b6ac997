//! Fleet campaigns (docs/fleet.md): `[[lanes]]` beside `[lane]`, the schedule `--dry-run`
//! prints, the errors of a bad lane list, and a one-table `[[lanes]]` campaign running exactly
//! as its `[lane]` twin. Running arms over several lanes is not built yet: `run` refuses it.

use crate::support::campaign::*;
use crate::support::exclusive;
use std::path::Path;

const FAST: &str = "ttft_ms = 10\ndecode_tok_s = 400\ncontext_tokens = 4096";

/// `[lane]` of `Camp::head` turned into `[[lanes]]` tables: the first (`g0`, the campaign's own
/// port) serves the incumbent `inc`; `more` are (id, port) qualification lanes.
fn as_lanes(text: &str, more: &[(&str, u16)]) -> String {
    let mut extra = String::new();
    for (id, port) in more {
        extra.push_str(&format!(
            "\n[[lanes]]\nid = \"{id}\"\nhost = \"127.0.0.1\"\nport = {port}\n"
        ));
    }
    let text = text.replace("[lane]\n", "[[lanes]]\nid = \"g0\"\nincumbent = \"inc\"\n");
    text.replacen("\n[workload]\n", &format!("{extra}\n[workload]\n"), 1)
}

/// Every file the bundle's manifest lists, sorted.
fn manifest_files(bundle: &Path) -> Vec<String> {
    let m = json(&bundle.join(bakeoff::evidence::bundle::MANIFEST));
    let mut files: Vec<String> = m["files"]
        .as_array()
        .unwrap_or_else(|| panic!("the manifest has no files list: {m}"))
        .iter()
        .map(|f| f["path"].as_str().unwrap_or_default().to_string())
        .collect();
    files.sort();
    files
}

#[test]
fn dry_run_prints_each_lane_and_its_arms() {
    let t = Camp::new();
    for p in ["inc", "a", "b", "c"] {
        t.profile(p, FAST);
    }
    let f = t.write(
        &[("inc", "inc"), ("a", "a"), ("b", "b"), ("c", "c")],
        "",
        "",
    );
    let text = std::fs::read_to_string(&f).unwrap();
    let (p1, p2) = (free_port(), free_port());
    std::fs::write(&f, as_lanes(&text, &[("g1", p1), ("g2", p2)])).unwrap();
    let o = run(&[f.to_str().unwrap(), "--dry-run"]);
    let out = text_of(&o);
    assert!(o.status.success(), "{out}");
    assert!(out.contains("lanes        3 lane(s)"), "{out}");
    assert!(
        out.contains(&format!("lane g1      http://127.0.0.1:{p1}")),
        "{out}"
    );
    assert!(
        out.contains("  incumbent  inc (stopped first, restored exactly afterwards)"),
        "{out}"
    );
    // Four arms of equal length: inc on its lane, then a → g1, b → g2, c → g0 (least loaded, in
    // lane order among equals).
    let block = |lane: &str| {
        let start = out.find(&format!("lane {lane:<7}")).unwrap();
        let rest = &out[start + 1..];
        let end = rest
            .find("\nlane ")
            .or_else(|| rest.find("\nworkload"))
            .unwrap();
        rest[..end].to_string()
    };
    assert!(
        block("g0").contains("1. inc (") && block("g0").contains("2. c ("),
        "{out}"
    );
    assert!(block("g1").contains("1. a ("), "{out}");
    assert!(block("g2").contains("1. b ("), "{out}");
}

#[test]
fn running_several_lanes_is_refused_before_anything_starts() {
    let t = Camp::new();
    t.profile("inc", FAST);
    t.profile("a", FAST);
    let f = t.write(&[("inc", "inc"), ("a", "a")], "", "");
    let text = std::fs::read_to_string(&f).unwrap();
    std::fs::write(&f, as_lanes(&text, &[("g1", free_port())])).unwrap();
    let o = run(&[f.to_str().unwrap()]);
    let out = text_of(&o);
    assert_eq!(o.status.code(), Some(2), "{out}");
    assert!(
        out.contains("declares 2 lanes: running arms over several lanes is not built yet"),
        "{out}"
    );
    assert!(!t.bundle().exists(), "nothing is written: {out}");
}

#[test]
fn a_bad_lane_list_names_file_field_and_fix() {
    let t = Camp::new();
    t.profile("inc", FAST);
    let f = t.write(&[("inc", "inc")], "", "");
    let text = std::fs::read_to_string(&f).unwrap();
    let port = t.port;
    let bad = as_lanes(&text, &[("g0", port)]);
    std::fs::write(&f, &bad).unwrap();
    let o = run(&[f.to_str().unwrap(), "--dry-run"]);
    let out = text_of(&o);
    assert!(!o.status.success(), "{out}");
    let file = f.display().to_string();
    let id_line = line_of(&bad, "id = \"g0\"", 1);
    let port_line = line_of(&bad, &format!("port = {port}"), 1);
    assert!(
        out.contains(&format!(
            "{file}:{id_line}: lanes[1].id: lane id `g0` is used twice"
        )),
        "{out}"
    );
    assert!(
        out.contains(&format!(
            "{file}:{port_line}: lanes[1].port: lane `g0` is on 127.0.0.1:{port}"
        )),
        "{out}"
    );
    assert!(
        out.contains("give each lane its own host and port"),
        "{out}"
    );
}

/// One `[[lanes]]` table is the one-lane form: the run, its evidence names and its verdict are
/// those of the same campaign written with `[lane]`.
#[test]
fn one_lanes_table_runs_exactly_like_lane() {
    // Two whole runs whose evidence lists are compared: an arm failing on a loaded machine would
    // change the list, so nothing else times beside them.
    let _g = exclusive();
    let t = Camp::new();
    t.profile("inc", FAST);
    t.profile(
        "fast",
        "ttft_ms = 5\ndecode_tok_s = 600\ncontext_tokens = 4096",
    );
    let f = t.write(&[("inc", "inc"), ("fast", "fast")], "", "");
    let lane_form = t.run_ok("inc", &f);
    let want = manifest_files(&lane_form);
    let first = json(&lane_form.join("campaign-result.json"));
    std::fs::rename(&lane_form, t.path("out-lane")).unwrap();

    let text = std::fs::read_to_string(&f).unwrap();
    std::fs::write(&f, as_lanes(&text, &[])).unwrap();
    let b = t.run_ok("inc", &f);
    verify(&b);
    assert_eq!(manifest_files(&b), want);
    let r = json(&b.join("campaign-result.json"));
    for id in ["inc", "fast"] {
        assert_eq!(arm(&r, id)["status"], arm(&first, id)["status"], "{r}");
    }
    let o = std::process::Command::new(BIN)
        .args(["report"])
        .arg(&b)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", text_of(&o));
}

fn text_of(o: &std::process::Output) -> String {
    text(o)
}
