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
        ],
        dir.path(),
    );
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert!(
        stdout.contains("missing required string argument: zip"),
        "{stdout}"
    );
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
        &["--checks", checks, flag, p.to_str().unwrap()],
        dir.path(),
    );
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
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
