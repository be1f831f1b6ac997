//! The layer rules of docs/architecture.md, checked on the source: every `use` line and every
//! `crate::`/`super::` path under src/ is resolved to the module it names, and the rules are
//! applied to those edges. `checker_catches_forbidden_edges` proves the checker fails on the
//! violations it is meant to catch.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// A source file as a module path, e.g. `run::steps::timing` for src/run/steps/timing.rs.
#[derive(Debug, Clone)]
struct File {
    rel: String,
    module: Vec<String>,
    text: String,
}

fn module_of(rel: &str) -> Vec<String> {
    let p = rel.trim_end_matches(".rs");
    let mut parts: Vec<String> = p.split('/').map(str::to_string).collect();
    if parts.last().is_some_and(|l| l == "mod") {
        parts.pop();
    }
    if parts == ["lib"] || parts == ["main"] {
        return vec![];
    }
    parts
}

fn read_src(root: &Path) -> Vec<File> {
    fn walk(dir: &Path, root: &Path, out: &mut Vec<File>) {
        let mut entries: Vec<PathBuf> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().path())
            .collect();
        entries.sort();
        for p in entries {
            if p.is_dir() {
                walk(&p, root, out);
            } else if p.extension().is_some_and(|e| e == "rs") {
                let rel = p
                    .strip_prefix(root)
                    .unwrap()
                    .to_string_lossy()
                    .replace('\\', "/");
                out.push(File {
                    module: module_of(&rel),
                    text: std::fs::read_to_string(&p).unwrap(),
                    rel,
                });
            }
        }
    }
    let mut out = Vec::new();
    walk(root, root, &mut out);
    out
}

/// The code of a file without comments, string literals and `#[cfg(test)]` modules (tests may
/// reach anywhere).
fn code(text: &str) -> String {
    let text = match text.find("#[cfg(test)]\nmod tests") {
        Some(i) => &text[..i],
        None => text,
    };
    let mut out = String::with_capacity(text.len());
    let b = text.as_bytes();
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'/' && b.get(i + 1) == Some(&b'/') {
            while i < b.len() && b[i] != b'\n' {
                i += 1;
            }
        } else if b[i] == b'/' && b.get(i + 1) == Some(&b'*') {
            let from = i;
            i += 2;
            while i + 1 < b.len() && !(b[i] == b'*' && b[i + 1] == b'/') {
                i += 1;
            }
            i += 2;
            newlines(&mut out, &b[from..i.min(b.len())]);
        } else if b[i] == b'r' && (b.get(i + 1) == Some(&b'"') || b.get(i + 1) == Some(&b'#')) {
            // Raw string: r"…" or r#"…"#.
            let mut j = i + 1;
            let mut hashes = 0;
            while b.get(j) == Some(&b'#') {
                hashes += 1;
                j += 1;
            }
            if b.get(j) != Some(&b'"') {
                out.push(b[i] as char);
                i += 1;
                continue;
            }
            j += 1;
            let close: Vec<u8> = std::iter::once(b'"')
                .chain(std::iter::repeat_n(b'#', hashes))
                .collect();
            while j < b.len() && !b[j..].starts_with(&close) {
                j += 1;
            }
            newlines(&mut out, &b[i..j.min(b.len())]);
            i = j + close.len();
            out.push_str("\"\"");
        } else if b[i] == b'"' {
            let from = i;
            i += 1;
            while i < b.len() && b[i] != b'"' {
                if b[i] == b'\\' {
                    i += 1;
                }
                i += 1;
            }
            i += 1;
            newlines(&mut out, &b[from..i.min(b.len())]);
            out.push_str("\"\"");
        } else if b[i] == b'\'' && b.get(i + 2) == Some(&b'\'') {
            // A char literal such as '"'.
            i += 3;
        } else if b[i] == b'\'' && b.get(i + 1) == Some(&b'\\') {
            i += 2;
            while i < b.len() && b[i] != b'\'' {
                i += 1;
            }
            i += 1;
        } else {
            out.push(b[i] as char);
            i += 1;
        }
    }
    out
}

/// The line breaks of a removed comment or literal, so the code keeps its line numbers.
fn newlines(out: &mut String, removed: &[u8]) {
    out.extend(removed.iter().filter(|&&c| c == b'\n').map(|_| '\n'));
}

/// Every path a file's code names, as module-path segments, made absolute (`crate::a::b`,
/// `super::x` resolved against the file's module). `use` groups are expanded.
fn paths(f: &File) -> Vec<Vec<String>> {
    let c = code(&f.text);
    let mut out = Vec::new();
    // `use` statements, with brace groups expanded.
    let mut rest = c.as_str();
    while let Some(i) = rest.find("use ") {
        let before = rest[..i].chars().last();
        rest = &rest[i + 4..];
        if before.is_some_and(|ch| ch.is_alphanumeric() || ch == '_') {
            continue;
        }
        let end = rest.find(';').unwrap_or(rest.len());
        // `a as b`: only the path before the alias is an edge.
        let stmt: String = rest[..end]
            .replace(" as ", " @")
            .chars()
            .filter(|c| !c.is_whitespace())
            .collect();
        for p in expand(&stmt) {
            out.push(p);
        }
        rest = &rest[end..];
    }
    // Inline paths: crate::a::b, super::a.
    for start in ["crate::", "super::"] {
        let mut rest = c.as_str();
        while let Some(i) = rest.find(start) {
            let before = rest[..i].chars().last();
            let tail = &rest[i..];
            let end = tail
                .find(|ch: char| !(ch.is_alphanumeric() || ch == '_' || ch == ':'))
                .unwrap_or(tail.len());
            if !before.is_some_and(|ch| ch.is_alphanumeric() || ch == '_' || ch == ':') {
                out.push(
                    tail[..end]
                        .split("::")
                        .filter(|s| !s.is_empty())
                        .map(str::to_string)
                        .collect(),
                );
            }
            rest = &tail[end.max(1)..];
        }
    }
    out.into_iter()
        .filter_map(|p| {
            absolute(
                &f.module,
                f.rel.ends_with("mod.rs") || !f.rel.contains('/'),
                p,
            )
        })
        .collect()
}

/// `a::{b, c::{d, e}}` → `a::b`, `a::c::d`, `a::c::e`.
fn expand(s: &str) -> Vec<Vec<String>> {
    fn go(prefix: &[String], s: &str, out: &mut Vec<Vec<String>>) {
        if let Some(open) = s.find('{') {
            let head: Vec<String> = s[..open]
                .split("::")
                .filter(|x| !x.is_empty())
                .map(str::to_string)
                .collect();
            let inner = &s[open + 1..s.rfind('}').unwrap_or(s.len())];
            let mut depth = 0;
            let mut last = 0;
            let mut parts = Vec::new();
            for (i, ch) in inner.char_indices() {
                match ch {
                    '{' => depth += 1,
                    '}' => depth -= 1,
                    ',' if depth == 0 => {
                        parts.push(&inner[last..i]);
                        last = i + 1;
                    }
                    _ => {}
                }
            }
            parts.push(&inner[last..]);
            let mut p = prefix.to_vec();
            p.extend(head);
            for part in parts.into_iter().filter(|x| !x.is_empty()) {
                go(&p, part, out);
            }
        } else {
            let mut p = prefix.to_vec();
            let s = s.split('@').next().unwrap_or(s);
            p.extend(
                s.split("::")
                    .filter(|x| !x.is_empty() && *x != "self" && *x != "*")
                    .map(str::to_string),
            );
            out.push(p);
        }
    }
    let mut out = Vec::new();
    go(&[], s, &mut out);
    out
}

/// Resolves `crate::`, `super::` and `self::` against the file's module; other roots (std,
/// external crates, local names) are not edges. `dir_module`: the file is a `mod.rs` (or the
/// crate root), so `super` is its parent directory's module.
fn absolute(module: &[String], dir_module: bool, p: Vec<String>) -> Option<Vec<String>> {
    let first = p.first()?.as_str();
    match first {
        "crate" => Some(p[1..].to_vec()),
        "super" | "self" => {
            // A file's own module for `self`; its parent for `super` (a non-mod.rs file's module
            // is itself, so `super` is one level up).
            let mut base = module.to_vec();
            let mut rest = &p[..];
            while let Some(s) = rest.first() {
                match s.as_str() {
                    "super" => {
                        base.pop();
                        rest = &rest[1..];
                    }
                    "self" => rest = &rest[1..],
                    _ => break,
                }
            }
            let _ = dir_module;
            base.extend(rest.iter().cloned());
            Some(base)
        }
        _ => None,
    }
}

/// The top-level module a path belongs to (`run` for `run::steps::x`), `main` for the root.
fn top(p: &[String]) -> String {
    p.first().cloned().unwrap_or_else(|| "main".into())
}

/// What tells lane kinds apart: a variant of the kind enums, a handle of a running arm, a test
/// of which recipe table an arm has. Outside `lane/` none may appear: every per-kind answer is a
/// method of `lane::Recipe` (or `lane::Running`, `lane::LaunchSpec`).
const LANE_KIND_TOKENS: &[&str] = &[
    "RecipeKind::",
    "RecipeRef::",
    "LaunchSpec::",
    "lane::Handle",
    ".process.is_some()",
    ".container.is_some()",
    ".endpoint.is_some()",
    ".reference.is_some()",
    ".slurm.is_some()",
    ".container.as_ref()",
    ".endpoint.as_ref()",
    ".slurm.as_ref()",
];

/// Violations of the layer rules in `files`.
fn violations(files: &[File]) -> Vec<String> {
    // module → modules it may import (besides itself); None = anything.
    let allowed: BTreeMap<&str, Option<&[&str]>> = [
        ("clock", Some(&[][..])),
        ("netstamp", Some(&["clock"][..])),
        ("refengine", Some(&["clock", "netstamp"][..])),
        ("client", Some(&["clock", "netstamp"][..])),
        // evidence: a distribution becomes the result's `Stat` in one place.
        ("metrics", Some(&["client", "clock", "evidence"][..])),
        (
            "workload",
            Some(&["client", "clock", "metrics", "netstamp"][..]),
        ),
        ("telemetry", Some(&["client", "clock", "evidence"][..])),
        (
            "load",
            Some(
                &[
                    "client",
                    "clock",
                    "metrics",
                    "netstamp",
                    "telemetry",
                    "workload",
                ][..],
            ),
        ),
        (
            "gates",
            Some(&["client", "clock", "evidence", "load", "metrics", "workload"][..]),
        ),
        // The measurement session of bench and campaign timing steps: the measurement floor,
        // nothing above `load` (no campaign, run, decide, report or cli).
        (
            "bench",
            Some(
                &[
                    "client",
                    "clock",
                    "load",
                    "metrics",
                    "netstamp",
                    "telemetry",
                    "workload",
                ][..],
            ),
        ),
        (
            "lane",
            Some(&["client", "clock", "evidence", "refengine"][..]),
        ),
        ("evidence", Some(&["clock"][..])),
        (
            // refengine and gates: to check the profiles and suite files a campaign names at load;
            // metrics: to check `[[workload.slo]]` limits at load with the grammar `bench --slo`
            // uses (metrics is below gates, which may import it); workload: to read a
            // `[workload.dataset]` file and parse `[workload.synthetic]` distributions at load
            // with the code `bench --dataset` / `--input-tokens-dist` use; lane: the recipe
            // tables are the lane kinds' (`lane::Recipe`), which build their own commands.
            "campaign",
            Some(
                &[
                    "client",
                    "clock",
                    "evidence",
                    "gates",
                    "lane",
                    "metrics",
                    "refengine",
                    "workload",
                ][..],
            ),
        ),
        (
            "run",
            Some(
                &[
                    "bench",
                    "campaign",
                    "client",
                    "clock",
                    "evidence",
                    "gates",
                    "lane",
                    "load",
                    "metrics",
                    "telemetry",
                    "workload",
                ][..],
            ),
        ),
        // Beside run, below cli: a promotion reuses the run's launch journal, launch specs,
        // identity and recovery; the verdict it acts on comes from cli (report decides it); its
        // folder's report.html is drawn with report::chartkit.
        (
            "promote",
            Some(
                &[
                    "campaign", "client", "clock", "decide", "evidence", "gates", "lane", "load",
                    "metrics", "report", "run", "workload",
                ][..],
            ),
        ),
        ("decide", Some(&["evidence", "metrics"][..])),
        // bench: its documents (`report/bench/`) read the typed `bench::BenchReport`.
        (
            "report",
            Some(&["bench", "decide", "evidence", "metrics", "workload"][..]),
        ),
        // Beside report, below cli: reads verified bundles (evidence), statistics (metrics),
        // draws with report::chartkit; nothing but cli calls it, so no verdict depends on it.
        (
            "history",
            Some(&["clock", "evidence", "metrics", "report"][..]),
        ),
        // The `--json` documents: plain data from the verdict, the bundle and the gates' results;
        // only cli fills and prints them.
        ("output", Some(&["decide", "evidence", "gates"][..])),
        // The MCP server: beside cli, over the same library calls (never clap types); its runs
        // are child `bakeoff run` processes, so it imports no `run` code.
        (
            "mcp",
            Some(
                &[
                    "bench", "campaign", "client", "evidence", "gates", "load", "output", "report",
                ][..],
            ),
        ),
        ("cli", None),
        ("main", None),
    ]
    .into_iter()
    .collect();
    let mut v = Vec::new();
    let mut top_edges: BTreeSet<(String, String)> = BTreeSet::new();
    let mut sibling_edges: BTreeSet<(String, String)> = BTreeSet::new();
    let by_module: BTreeMap<Vec<String>, &File> =
        files.iter().map(|f| (f.module.clone(), f)).collect();
    for f in files {
        let from = top(&f.module);
        let rules = allowed.get(from.as_str()).copied().unwrap_or_else(|| {
            v.push(format!(
                "{}: module `{from}` has no rule in tests/it/architecture.rs",
                f.rel
            ));
            None
        });
        for p in paths(f) {
            // Sibling files of one directory: the deepest module of the path that is a file.
            if f.module.len() >= 2 && p.len() >= f.module.len() {
                let parent = &f.module[..f.module.len() - 1];
                if p[..parent.len()] == *parent {
                    let sib = p[..f.module.len()].to_vec();
                    if sib != f.module && by_module.contains_key(&sib) {
                        sibling_edges.insert((f.module.join("::"), sib.join("::")));
                    }
                }
            }
            let to = top(&p);
            if to == from || to == "VERSION" {
                continue;
            }
            top_edges.insert((from.clone(), to.clone()));
            if let Some(ok) = rules {
                if !ok.contains(&to.as_str()) {
                    v.push(format!(
                        "{}: `{from}` may not import `{to}` ({})",
                        f.rel,
                        p.join("::")
                    ));
                }
            }
        }
        let c = code(&f.text);
        let engine_fault = f.rel.starts_with("refengine/");
        if f.rel != "main.rs" && !engine_fault && c.contains("process::exit") {
            v.push(format!(
                "{}: ends the process (only main.rs may: return cli::Exit)",
                f.rel
            ));
        }
        // Command-line types stay in cli/: the library below takes typed specs.
        if from != "cli" && from != "main" && (c.contains("clap::") || c.contains("use clap")) {
            v.push(format!(
                "{}: uses clap: only cli/ (and main.rs) hold command-line types",
                f.rel
            ));
        }
        let printer = from == "cli" || from == "main" || f.rel.starts_with("refengine/");
        if !printer {
            for what in [
                "println!",
                "eprintln!",
                "print!",
                "eprint!",
                "io::stdout()",
                "io::stderr()",
                "signal::unix",
                "signal::ctrl_c",
            ] {
                if c.contains(what) {
                    v.push(format!(
                        "{}: `{what}`: only cli/ prints or installs signal handlers",
                        f.rel
                    ));
                }
            }
        }
        if !f.rel.starts_with("lane/") {
            for token in LANE_KIND_TOKENS {
                if c.contains(token) {
                    v.push(format!(
                        "{}: `{token}`: a branch on the lane kind outside lane/ (ask the kind through `lane::Recipe` or `lane::Running`)",
                        f.rel
                    ));
                }
            }
        }
        if f.rel != "evidence/bundle.rs" {
            for name in [
                "\"campaign-result.json\"",
                "\"checkpoint.json\"",
                "\"artifact-manifest.json\"",
                "\"decision-summary.json\"",
                "\"plan.json\"",
                "\"environment.json\"",
            ] {
                // `code` blanks strings: look in the text without its tests and comments.
                let body = match f.text.find("#[cfg(test)]") {
                    Some(i) => &f.text[..i],
                    None => &f.text,
                };
                let hit = body
                    .lines()
                    .any(|l| !l.trim_start().starts_with("//") && l.contains(name));
                if hit {
                    v.push(format!(
                        "{}: bundle file name {name} outside evidence/bundle.rs",
                        f.rel
                    ));
                }
            }
        }
    }
    for (a, b) in &top_edges {
        if a < b && top_edges.contains(&(b.clone(), a.clone())) {
            v.push(format!("import cycle between modules `{a}` and `{b}`"));
        }
    }
    for (a, b) in &sibling_edges {
        if a < b && sibling_edges.contains(&(b.clone(), a.clone())) {
            v.push(format!("import cycle between files `{a}` and `{b}`"));
        }
    }
    v
}

fn src() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

#[test]
fn layers_point_down() {
    let files = read_src(&src());
    assert!(files.len() > 50, "found {} source files", files.len());
    let v = violations(&files);
    assert!(v.is_empty(), "layer rules broken:\n{}", v.join("\n"));
}

#[test]
fn no_source_file_over_800_lines() {
    let long: Vec<String> = read_src(&src())
        .iter()
        .filter(|f| f.text.lines().count() > 800)
        .map(|f| format!("{}: {} lines", f.rel, f.text.lines().count()))
        .collect();
    assert!(long.is_empty(), "split by concern:\n{}", long.join("\n"));
}

/// The longest a function under src/ may be, in lines from `fn` to its closing brace.
const MAX_FN_LINES: usize = 150;

/// The functions allowed to be longer, each with its reason (docs/architecture.md, *Size*):
/// (file under src/, function name, why).
const LONG_FN_ALLOWED: &[(&str, &str, &str)] = &[
    (
        "campaign/dry_run.rs",
        "render",
        "a renderer: one linear walk over the plan",
    ),
    (
        "report/markdown.rs",
        "render",
        "a renderer: the document top to bottom",
    ),
];

/// Every function in a file's code (see [`code`]): its name, first line and length in lines.
/// A `fn` without a body (a trait's declaration) has none.
fn fn_lengths(code: &str) -> Vec<(String, usize, usize)> {
    let b = code.as_bytes();
    let ident = |c: u8| c.is_ascii_alphanumeric() || c == b'_';
    let mut out = Vec::new();
    let mut i = 0;
    while let Some(k) = code[i..].find("fn ") {
        let at = i + k;
        i = at + 3;
        if at > 0 && ident(b[at - 1]) {
            continue;
        }
        let name: String = code[i..]
            .trim_start()
            .chars()
            .take_while(|c| c.is_alphanumeric() || *c == '_')
            .collect();
        if name.is_empty() {
            continue; // `fn(` types
        }
        // The body: the first `{` outside parentheses; a `;` first means no body.
        let mut depth = 0i32;
        let mut j = i;
        while j < b.len() {
            match b[j] {
                b'(' | b'[' => depth += 1,
                b')' | b']' => depth -= 1,
                b';' if depth == 0 => break,
                b'{' if depth == 0 => break,
                _ => {}
            }
            j += 1;
        }
        if j >= b.len() || b[j] == b';' {
            continue;
        }
        let mut open = 0i32;
        let mut end = j;
        while end < b.len() {
            match b[end] {
                b'{' => open += 1,
                b'}' => {
                    open -= 1;
                    if open == 0 {
                        break;
                    }
                }
                _ => {}
            }
            end += 1;
        }
        let first = code[..at].matches('\n').count() + 1;
        let last = code[..end.min(b.len())].matches('\n').count() + 1;
        out.push((name, first, last - first + 1));
    }
    out
}

/// Functions over [`MAX_FN_LINES`] outside the allow-list, as `file:line name (N lines)`.
fn long_functions(files: &[File]) -> Vec<String> {
    let mut v = Vec::new();
    for f in files {
        for (name, line, n) in fn_lengths(&code(&f.text)) {
            let allowed = LONG_FN_ALLOWED
                .iter()
                .any(|(file, fname, _)| *file == f.rel && *fname == name);
            if n > MAX_FN_LINES && !allowed {
                v.push(format!("src/{}:{line} {name} ({n} lines)", f.rel));
            }
        }
    }
    v
}

#[test]
fn no_function_over_150_lines() {
    let files = read_src(&src());
    // An allow-list entry whose function is gone or now short is stale: it would let the next
    // long function of that name through unseen.
    let stale: Vec<String> = LONG_FN_ALLOWED
        .iter()
        .filter(|(rel, name, _)| {
            !files.iter().any(|f| {
                f.rel == *rel
                    && fn_lengths(&code(&f.text))
                        .iter()
                        .any(|(n, _, len)| n == name && *len > MAX_FN_LINES)
            })
        })
        .map(|(rel, name, _)| format!("{rel} {name}"))
        .collect();
    assert!(
        stale.is_empty(),
        "LONG_FN_ALLOWED names functions that are gone or no longer long; remove them here and in docs/architecture.md (Size):\n{}",
        stale.join("\n")
    );
    let long = long_functions(&files);
    assert!(
        long.is_empty(),
        "split by concern, each piece a named function (or, for a renderer or a single linear validator, add it to LONG_FN_ALLOWED with its reason and to docs/architecture.md, Size):\n{}",
        long.join("\n")
    );
}

/// The length check counts what it should: a body of 151 lines fails, 150 passes, braces in
/// strings and comments and a body-less `fn` do not confuse it.
#[test]
fn the_length_check_counts_lines_from_fn_to_its_brace() {
    let body = |n: usize| {
        let mut t = String::from("/// doc\nfn long(a: [u8; 2]) -> u8 {\n    let s = \"}\"; // }\n");
        t.push_str(&"    let _x = 1;\n".repeat(n - 4));
        t.push_str("    a[0]\n}\ntrait T { fn decl(&self); }\n");
        t
    };
    let file = |text: String| File {
        rel: "x/y.rs".into(),
        module: vec!["x".into(), "y".into()],
        text,
    };
    let found = fn_lengths(&code(&body(151)));
    assert_eq!(found, vec![("long".to_string(), 2, 151)], "{found:?}");
    assert_eq!(long_functions(&[file(body(151))]).len(), 1);
    assert!(long_functions(&[file(body(150))]).is_empty());
}

/// The checker on a copy of the tree with forbidden edges added: each must be reported.
#[test]
fn checker_catches_forbidden_edges() {
    let files = read_src(&src());
    let with_all = |added: &[(&str, &str)]| -> Vec<String> {
        let mut fs = files.clone();
        for (rel, line) in added {
            let f = fs.iter_mut().find(|f| f.rel == *rel).unwrap();
            f.text = format!("{line}\n{}", f.text);
        }
        violations(&fs)
    };
    let with = |rel: &str, line: &str| with_all(&[(rel, line)]);
    let has = |v: &[String], needle: &str| v.iter().any(|x| x.contains(needle));
    let v = with("campaign/plan.rs", "use crate::run::Options;");
    assert!(has(&v, "`campaign` may not import `run`"), "{v:?}");
    let v = with("run/recorder.rs", "use crate::report::render_all;");
    assert!(has(&v, "`run` may not import `report`"), "{v:?}");
    let v = with("decide/mod.rs", "use crate::campaign::Policy;");
    assert!(has(&v, "`decide` may not import `campaign`"), "{v:?}");
    let v = with("gates/mod.rs", "fn f() { let _ = crate::run::quiet(); }");
    assert!(has(&v, "`gates` may not import `run`"), "{v:?}");
    let v = with("refengine/server.rs", "use crate::client::Target;");
    assert!(has(&v, "`refengine` may not import `client`"), "{v:?}");
    // The measurement session stays at the measurement floor.
    let v = with("bench/session.rs", "use crate::campaign::Plan;");
    assert!(has(&v, "`bench` may not import `campaign`"), "{v:?}");
    let v = with("bench/sweep.rs", "use crate::cli::bench::BenchArgs;");
    assert!(has(&v, "`bench` may not import `cli`"), "{v:?}");
    let v = with("bench/spec.rs", "use clap::Args;");
    assert!(has(&v, "bench/spec.rs: uses clap"), "{v:?}");
    let v = with("load/mod.rs", "use clap::Args;");
    assert!(has(&v, "load/mod.rs: uses clap"), "{v:?}");
    let v = with("run/mod.rs", "fn f() { std::process::exit(3) }");
    assert!(has(&v, "run/mod.rs: ends the process"), "{v:?}");
    let v = with("lane/mod.rs", "fn f() { println!(\"x\") }");
    assert!(has(&v, "lane/mod.rs: `println!`"), "{v:?}");
    let v = with("evidence/manifest.rs", "use crate::report::html;");
    assert!(
        has(&v, "import cycle between modules `evidence` and `report`"),
        "{v:?}"
    );
    let v = with(
        "campaign/checkpoint.rs",
        "const X: &str = \"campaign-result.json\";",
    );
    assert!(has(&v, "outside evidence/bundle.rs"), "{v:?}");
    // A branch on the lane kind outside lane/.
    let v = with(
        "run/arm.rs",
        "fn f(s: &crate::lane::LaunchSpec) -> bool { matches!(s, crate::lane::LaunchSpec::Endpoint { .. }) }",
    );
    assert!(
        has(
            &v,
            "run/arm.rs: `LaunchSpec::`: a branch on the lane kind outside lane/"
        ),
        "{v:?}"
    );
    let v = with(
        "campaign/dry_run.rs",
        "fn f(a: &Arm) -> bool { a.kind() == crate::lane::RecipeKind::Slurm }",
    );
    assert!(has(&v, "campaign/dry_run.rs: `RecipeKind::`"), "{v:?}");
    // A cycle between sibling files.
    let v = with_all(&[
        ("campaign/plan.rs", "use super::checkpoint::Checkpoint;"),
        ("campaign/checkpoint.rs", "use crate::campaign::plan::Plan;"),
    ]);
    assert!(
        has(
            &v,
            "import cycle between files `campaign::checkpoint` and `campaign::plan`"
        ),
        "{v:?}"
    );
}
