//! The `--json` documents (docs/agents.md): what a command printed on stdout, parsed as ONE
//! JSON document and validated against its schema under docs/schemas/, with its `exit_code`
//! equal to the process's.

use serde_json::Value;
use std::process::Output;

/// The schema of document `v` (`"schema": "bakeoff.<name>/1"` → `docs/schemas/<name>.schema.json`).
fn schema_of(v: &Value) -> Value {
    let id = v["schema"]
        .as_str()
        .unwrap_or_else(|| panic!("no `schema` field: {v:#}"));
    let name = id
        .strip_prefix("bakeoff.")
        .and_then(|s| s.strip_suffix("/1"))
        .unwrap_or_else(|| panic!("schema {id} is not bakeoff.<name>/1"));
    let p = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("docs/schemas")
        .join(format!("{name}.schema.json"));
    serde_json::from_slice(&std::fs::read(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display())))
        .unwrap()
}

/// The errors of `v` against its schema (empty: it validates).
pub fn schema_errors(v: &Value) -> Vec<String> {
    let schema = schema_of(v);
    let validator = jsonschema::validator_for(&schema).expect("the schema compiles");
    validator
        .iter_errors(v)
        .map(|e| format!("{e} at {}", e.instance_path()))
        .collect()
}

/// The document `o` printed: stdout holds nothing else, it validates, and its `exit_code` is
/// the exit status.
pub fn doc(o: &Output) -> Value {
    let out = String::from_utf8_lossy(&o.stdout);
    let v: Value = serde_json::from_str(&out).unwrap_or_else(|e| {
        panic!(
            "stdout is not one JSON document ({e}):\n{out}\nstderr:\n{}",
            String::from_utf8_lossy(&o.stderr)
        )
    });
    let errors = schema_errors(&v);
    assert!(errors.is_empty(), "{errors:#?}\n{v:#}");
    assert_eq!(
        v["exit_code"].as_i64(),
        o.status.code().map(i64::from),
        "{v:#}\nstderr:\n{}",
        String::from_utf8_lossy(&o.stderr)
    );
    v
}
