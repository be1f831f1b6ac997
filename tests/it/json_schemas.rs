//! The `--json` documents' schemas (docs/schemas/, docs/agents.md): each is a draft 2020-12
//! schema that compiles, refuses a document missing its fields or naming another schema, and
//! accepts every example docs/agents.md shows (taken from real runs). The real outputs are
//! validated where the commands run (`support::json_doc::doc`).

use crate::support::json_doc::schema_errors;
use serde_json::{json, Value};
use std::path::Path;

fn docs() -> &'static Path {
    Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/docs"))
}

#[test]
fn each_schema_compiles_and_refuses_what_it_does_not_describe() {
    let mut names = Vec::new();
    for e in std::fs::read_dir(docs().join("schemas")).unwrap() {
        let p = e.unwrap().path();
        let s: Value = serde_json::from_slice(&std::fs::read(&p).unwrap()).unwrap();
        assert_eq!(
            s["$schema"],
            "https://json-schema.org/draft/2020-12/schema",
            "{}",
            p.display()
        );
        jsonschema::meta::validate(&s).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
        let name = p.file_name().unwrap().to_str().unwrap();
        let name = name.strip_suffix(".schema.json").unwrap().to_string();
        // Only the schema field: every other required field is missing.
        let bare = json!({ "schema": format!("bakeoff.{name}/1") });
        assert!(!schema_errors(&bare).is_empty(), "{name} accepts {bare}");
        names.push(name);
    }
    names.sort();
    assert_eq!(
        names,
        [
            "error",
            "gate",
            "history",
            "lane-status",
            "promote",
            "recover",
            "report",
            "run",
            "verify"
        ]
    );
}

#[test]
fn every_example_in_the_agents_doc_validates() {
    let text = std::fs::read_to_string(docs().join("agents.md")).unwrap();
    let mut seen = std::collections::BTreeSet::new();
    for block in text.split("```json\n").skip(1) {
        let body = block.split("\n```").next().unwrap();
        // Examples shortened with `{ … }` are not whole documents: only whole ones are checked.
        if body.contains('…') && body.contains("{ …") {
            continue;
        }
        let v: Value = serde_json::from_str(body).unwrap_or_else(|e| panic!("{e}:\n{body}"));
        let errors = schema_errors(&v);
        assert!(errors.is_empty(), "{errors:#?}\n{body}");
        seen.insert(v["schema"].as_str().unwrap().to_string());
    }
    for s in [
        "bakeoff.run/1",
        "bakeoff.verify/1",
        "bakeoff.gate/1",
        "bakeoff.recover/1",
        "bakeoff.error/1",
    ] {
        assert!(
            seen.contains(s),
            "docs/agents.md has no whole example of {s}"
        );
    }
    // A document that names another schema is refused by its own.
    let mut v: Value = serde_json::from_str(
        text.split("```json\n")
            .nth(1)
            .unwrap()
            .split("\n```")
            .next()
            .unwrap(),
    )
    .unwrap();
    v["exit_code"] = 3.into();
    assert!(
        !schema_errors(&v).is_empty(),
        "an exit code outside the table passed"
    );
}
