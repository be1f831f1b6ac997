//! `bakeoff gate` as a process: exit codes, the table, artifacts, built-in suites, and suite files
//! refused (naming the file, the item and the field) before any request.

use crate::support::reference;

use reference::{text, Engine, BIN};
use std::path::Path;
use std::process::{Command, Output};

fn gate(url: &str, args: &[&str], out: &Path) -> Output {
    Command::new(BIN)
        .arg("gate")
        .arg(url)
        .args(args)
        .arg("--out")
        .arg(out)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .unwrap()
}

fn read(p: &Path) -> serde_json::Value {
    serde_json::from_slice(&std::fs::read(p).unwrap()).unwrap()
}

#[test]
fn passes_with_exit_0_and_writes_one_artifact_per_gate() {
    let e = Engine::start("model = \"ref\"\nttft_ms = 1\ndecode_tok_s = 5000\n");
    let dir = tempfile::tempdir().unwrap();
    let o = gate(
        &e.url,
        &[
            "--checks",
            "smoke,json,streaming,tools,retrieval",
            "--retrieval-tokens",
            "1000",
            "--tool-batch",
            "4",
        ],
        dir.path(),
    );
    assert!(o.status.success(), "{}", text(&o));
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert!(stdout.contains("gate"), "{stdout}");
    assert!(stdout.contains("tools      passed  14/14"), "{stdout}");
    for g in ["smoke", "json", "streaming", "tools", "retrieval"] {
        let v = read(&dir.path().join(format!("gate-{g}.json")));
        assert_eq!(v["status"], "passed", "{g}: {v}");
        assert_eq!(v["gate"], g);
    }
    let tools = read(&dir.path().join("gate-tools.json"));
    assert_eq!(tools["suite"]["path"], "suites/tools.toml");
    let bytes =
        std::fs::read(Path::new(env!("CARGO_MANIFEST_DIR")).join("suites/tools.toml")).unwrap();
    assert_eq!(
        tools["suite_sha256"],
        bakeoff::gates::suite::sha256_hex(&bytes)
    );
    // `--json`: the same checks as one document on stdout, no table.
    let o = gate(&e.url, &["--checks", "smoke,json", "--json"], dir.path());
    let d = crate::support::json_doc::doc(&o);
    assert_eq!(d["passed"], true, "{d:#}");
    let g: Vec<_> = d["checks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| (c["gate"].clone(), c["status"].clone()))
        .collect();
    assert_eq!(
        g,
        [
            ("smoke".into(), "passed".into()),
            ("json".into(), "passed".into())
        ]
    );
    let ev = std::path::PathBuf::from(d["checks"][0]["evidence"].as_str().unwrap());
    assert_eq!(read(&ev)["gate"], "smoke");
}

#[test]
fn a_failed_gate_exits_non_zero_after_writing_artifacts() {
    let e = Engine::start("model = \"ref\"\nttft_ms = 1\ndecode_tok_s = 5000\ntool_behavior = \"drop_required_arg\"\n");
    let dir = tempfile::tempdir().unwrap();
    let o = gate(
        &e.url,
        &[
            "--checks",
            "smoke,tools",
            "--tools-suite",
            "suites/tools-fewshot.toml",
            "--tool-batch",
            "4",
            "--tool-variants",
            "plain",
            "--json",
        ],
        dir.path(),
    );
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    // `--json`: each check's status, counts, reason and artifact.
    let d = crate::support::json_doc::doc(&o);
    assert_eq!(d["passed"], false, "{d:#}");
    let tools = &d["checks"][1];
    assert_eq!(
        (&tools["gate"], &tools["status"]),
        (&"tools".into(), &"failed".into())
    );
    assert_eq!(
        (tools["passed"].as_u64(), tools["total"].as_u64()),
        (Some(0), Some(4))
    );
    assert!(
        tools["reason"]
            .as_str()
            .unwrap()
            .contains("missing required string argument: zip"),
        "{d:#}"
    );
    assert_eq!(d["checks"][0]["status"], "passed");
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("1 of 2 gates failed: tools"),
        "{}",
        text(&o)
    );
    let v = read(&dir.path().join("gate-tools.json"));
    assert_eq!(
        (v["passed"].as_u64(), v["total"].as_u64()),
        (Some(0), Some(4))
    );
    assert_eq!(
        read(&dir.path().join("gate-smoke.json"))["status"],
        "passed"
    );
}

/// Nothing listens on this URL: a suite error must be reported before any connection is tried.
const DEAD: &str = "http://127.0.0.1:9";

fn refused(suite: &str, name: &str, flag: &str) -> String {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join(name);
    std::fs::write(&p, suite).unwrap();
    let checks = if flag == "--tools-suite" {
        "tools"
    } else {
        "quality"
    };
    let o = gate(
        DEAD,
        &["--checks", checks, flag, p.to_str().unwrap(), "--json"],
        dir.path(),
    );
    // Refused before any request: exit 2, and `--json`'s error document says so.
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    let d = crate::support::json_doc::doc(&o);
    assert_eq!(
        (&d["command"], &d["refused"]),
        (&"gate".into(), &true.into())
    );
    let err = String::from_utf8_lossy(&o.stderr).into_owned();
    assert!(!err.contains("connect"), "{err}");
    assert!(err.contains(p.to_str().unwrap()), "{err}");
    assert!(
        std::fs::read_dir(dir.path()).unwrap().count() == 1,
        "artifacts were written"
    );
    err
}

const TOOL: &str = r#"
[[tools]]
name = "get_forecast"
parameters = { type = "object", properties = { zip = { type = "string" } }, required = ["zip"] }
"#;

#[test]
fn suite_errors_name_the_file_the_item_and_the_field() {
    let unknown =
        format!("kind = \"tools\"\n{TOOL}\n[[cases]]\nid = \"a\"\nprompt = \"zip 1\"\ncals = []\n");
    let e = refused(&unknown, "unknown.toml", "--tools-suite");
    assert!(
        e.contains("case \"a\" (cases[0]): field `cals`: unknown field"),
        "{e}"
    );

    let bad_schema = "kind = \"tools\"\n[[tools]]\nname = \"t\"\nparameters = { type = \"object\", properties = { zip = { type = \"strng\" } } }\n[[cases]]\nid = \"a\"\nprompt = \"x\"\ncalls = [{ name = \"t\" }]\n";
    let e = refused(bad_schema, "schema.toml", "--tools-suite");
    assert!(
        e.contains("tool \"t\" (tools[0]): field `parameters`: not a valid JSON Schema"),
        "{e}"
    );

    let dup = format!(
        "kind = \"tools\"\n{TOOL}\n[[cases]]\nid = \"a\"\nprompt = \"x\"\ncalls = [{{ name = \"get_forecast\" }}]\n[[cases]]\nid = \"a\"\nprompt = \"y\"\ncalls = [{{ name = \"get_forecast\" }}]\n"
    );
    let e = refused(&dup, "dup.toml", "--tools-suite");
    assert!(
        e.contains("case \"a\" (cases[1]): field `id`: duplicate id \"a\""),
        "{e}"
    );

    let bad_arg = format!(
        "kind = \"tools\"\n{TOOL}\n[[cases]]\nid = \"z\"\nprompt = \"x\"\ncalls = [{{ name = \"get_forecast\", arguments = {{ zipp = \"1\" }} }}]\n"
    );
    let e = refused(&bad_arg, "arg.toml", "--tools-suite");
    assert!(
        e.contains("case \"z\" (cases[0]): field `calls[0].arguments.zipp`"),
        "{e}"
    );

    let json =
        r#"{"kind":"quality","items":[{"id":"q","prompt":"x","expect":{"pattern":"(?=x)"}}]}"#;
    let e = refused(json, "q.json", "--quality-suite");
    assert!(
        e.contains("item \"q\" (items[0]): field `expect.pattern`"),
        "{e}"
    );

    let dup_q = "kind = \"quality\"\n[[items]]\nid = \"q\"\nprompt = \"x\"\nexpect = { exact = \"1\" }\n[[items]]\nid = \"q\"\nprompt = \"y\"\nexpect = { exact = \"2\" }\n";
    let e = refused(dup_q, "dupq.toml", "--quality-suite");
    assert!(
        e.contains("item \"q\" (items[1]): field `id`: duplicate id"),
        "{e}"
    );

    let wrong_kind =
        "kind = \"quality\"\n[[items]]\nid = \"q\"\nprompt = \"x\"\nexpect = { exact = \"1\" }\n";
    let e = refused(wrong_kind, "kind.toml", "--tools-suite");
    assert!(e.contains("suite: field `kind`"), "{e}");
}

#[test]
fn shipped_suites_load() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let t = bakeoff::gates::ToolSuite::load(&root.join("suites/tools.toml")).unwrap();
    assert!(t.cases.len() >= 4);
    let f = bakeoff::gates::ToolSuite::load(&root.join("suites/tools-fewshot.toml")).unwrap();
    assert!(
        f.cases.iter().all(|c| c.messages.len() == 5),
        "two few-shot turns, then the question"
    );
    let q = bakeoff::gates::QualitySuite::load(&root.join("suites/quality.toml")).unwrap();
    assert!(q.items.len() >= 6);
}

#[test]
fn documented_examples_load() {
    let doc = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/suites.md"))
        .unwrap();
    let mut loaded = 0;
    for (lang, ext) in [("```toml\n", "toml"), ("```json\n", "json")] {
        for block in doc.split(lang).skip(1) {
            let body = block.split("\n```").next().unwrap();
            if !body.contains("kind") || body.contains("\"gate\"") {
                continue;
            }
            let name = format!("example.{ext}");
            let f = bakeoff::gates::suite::from_bytes(Path::new(&name), body.as_bytes())
                .unwrap_or_else(|e| panic!("{e}\n{body}"));
            let kind = f.root["kind"].as_str().unwrap().to_string();
            match kind.as_str() {
                "tools" => {
                    drop(bakeoff::gates::ToolSuite::from_file(f).unwrap_or_else(|e| panic!("{e}")))
                }
                "quality" => drop(
                    bakeoff::gates::QualitySuite::from_file(f).unwrap_or_else(|e| panic!("{e}")),
                ),
                k => panic!("unknown kind {k}"),
            }
            loaded += 1;
        }
    }
    assert_eq!(
        loaded, 3,
        "the tools example (TOML and JSON) and the quality example"
    );
}

/// The 1-based line of `needle`'s first occurrence in `text` (the `nth`, 0-based).
fn line_of(text: &str, needle: &str, nth: usize) -> usize {
    text.lines()
        .enumerate()
        .filter(|(_, l)| l.contains(needle))
        .nth(nth)
        .unwrap_or_else(|| panic!("{needle:?} not in the suite"))
        .0
        + 1
}

#[test]
fn suite_typos_are_refused_naming_the_file_line_and_key() {
    let shipped = include_str!("../../../suites/tools.toml");
    let one_line = |e: &str| {
        let lines: Vec<&str> = e.lines().filter(|l| l.contains("refused")).collect();
        assert_eq!(lines.len(), 1, "{e}");
        lines[0].to_string()
    };
    // A misspelt JSON Schema keyword: a validator would ignore it.
    let typo = shipped.replacen(
        "additionalProperties = false",
        "additionalPropertiesx = false",
        1,
    );
    let e = one_line(&refused(&typo, "typo.toml", "--tools-suite"));
    let l = line_of(&typo, "additionalPropertiesx", 0);
    assert!(e.contains(&format!("typo.toml:{l}: tool \"get_weather\" (tools[0]): field `parameters.additionalPropertiesx`: `additionalPropertiesx` is not a JSON Schema keyword")), "{e}");
    assert!(e.contains("; check its spelling"), "{e}");
    // An empty enum: no value could pass.
    let empty = shipped.replacen("enum = [\"celsius\", \"fahrenheit\"]", "enum = []", 1);
    let e = one_line(&refused(&empty, "enum.toml", "--tools-suite"));
    let l = line_of(&empty, "enum = []", 0);
    assert!(
        e.contains(&format!(
            "enum.toml:{l}: tool \"get_weather\" (tools[0]): field `parameters.properties.unit.enum`: an empty enum"
        )),
        "{e}"
    );
    // The first [[cases]] header deleted: its keys land in the last tool's schema.
    let first = shipped.replacen("[[cases]]\n", "", 1);
    let e = one_line(&refused(&first, "first.toml", "--tools-suite"));
    assert!(e.contains("tool \"book_room\" (tools[3])"), "{e}");
    assert!(e.contains("is not a JSON Schema keyword"), "{e}");
    let key = e
        .split("properties.room.")
        .nth(1)
        .and_then(|r| r.split('`').next())
        .unwrap_or_else(|| panic!("no key under room: {e}"));
    assert!(
        ["id", "prompt", "calls", "round_trip"].contains(&key),
        "{e}"
    );
    let room = first.find("properties.room]").unwrap();
    let l = first[..room].lines().count()
        + first[room..]
            .lines()
            .position(|x| x.starts_with(&format!("{key} =")))
            .unwrap();
    assert!(
        e.contains(&format!("first.toml:{l}: ")),
        "want line {l}: {e}"
    );
    // A later header deleted: its keys repeat the previous case's: one line, with the line.
    let i = shipped.match_indices("[[cases]]\n").nth(2).unwrap().0;
    let later = format!("{}{}", &shipped[..i], &shipped[i + "[[cases]]\n".len()..]);
    let e = one_line(&refused(&later, "later.toml", "--tools-suite"));
    // The third case's id, now a duplicate of the second's.
    let l = line_of(&later, "id = ", 2);
    assert!(
        e.contains(&format!("later.toml:{l}: not valid TOML: duplicate key")),
        "{e}"
    );
    assert!(e.contains("deleted [[cases]]"), "{e}");
    // A stray field in a case: refused with its line.
    let stray = shipped.replacen(
        "id = \"weather-paris\"",
        "id = \"weather-paris\"\nexpct = 1",
        1,
    );
    let e = one_line(&refused(&stray, "stray.toml", "--tools-suite"));
    let l = line_of(&stray, "expct", 0);
    assert!(
        e.contains(&format!(
            "stray.toml:{l}: case \"weather-paris\" (cases[0]): field `expct`: unknown field"
        )),
        "{e}"
    );
    assert!(e.contains("; remove it"), "{e}");
}
