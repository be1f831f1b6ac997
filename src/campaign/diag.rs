//! Campaign-file errors: one line each, `FILE:LINE: field.path: what is wrong; how to fix`.
//!
//! Lines come from a span index built by parsing the document a second time into a tree of
//! spanned nodes, so the typed model stays free of span wrappers: a semantic check names a
//! field path (`arms[1].process.argv`) and the index turns it into the line where that key is
//! written (or, when the key is absent, the line of the nearest table that holds it).

use serde::de::{Deserialize, Deserializer, MapAccess, SeqAccess, Visitor};
use std::fmt;
use std::ops::Range;
use std::path::{Path, PathBuf};

/// One segment of a field path.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Seg {
    Key(String),
    Index(usize),
}

/// A field path such as `arms[1].process.env.HF_TOKEN`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct FieldPath(pub Vec<Seg>);

impl FieldPath {
    pub fn root() -> FieldPath {
        FieldPath(Vec::new())
    }

    /// A path from a dotted string of bare keys, e.g. `"workload.max_tokens"`.
    pub fn parse(dotted: &str) -> FieldPath {
        FieldPath(
            dotted
                .split('.')
                .filter(|s| !s.is_empty())
                .map(|s| Seg::Key(s.to_string()))
                .collect(),
        )
    }

    pub fn key(&self, k: &str) -> FieldPath {
        let mut p = self.clone();
        p.0.push(Seg::Key(k.to_string()));
        p
    }

    pub fn index(&self, i: usize) -> FieldPath {
        let mut p = self.clone();
        p.0.push(Seg::Index(i));
        p
    }

    fn parent(&self) -> Option<FieldPath> {
        if self.0.is_empty() {
            None
        } else {
            Some(FieldPath(self.0[..self.0.len() - 1].to_vec()))
        }
    }
}

impl fmt::Display for FieldPath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.0.is_empty() {
            return f.write_str("(top level)");
        }
        for (i, seg) in self.0.iter().enumerate() {
            match seg {
                Seg::Key(k) => {
                    if i > 0 {
                        f.write_str(".")?;
                    }
                    let bare = !k.is_empty()
                        && k.chars()
                            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
                    if bare {
                        f.write_str(k)?;
                    } else {
                        write!(f, "{k:?}")?;
                    }
                }
                Seg::Index(n) => write!(f, "[{n}]")?,
            }
        }
        Ok(())
    }
}

/// One problem in a campaign file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Diagnostic {
    /// The campaign file as the user named it.
    pub file: PathBuf,
    /// 1-based line; 0 when the problem is not on a line (the file could not be read).
    pub line: usize,
    /// The field path, e.g. `arms[1].process.argv`, or `TOML syntax` / `file`.
    pub field: String,
    /// What is wrong.
    pub problem: String,
    /// How to fix it.
    pub fix: String,
}

impl fmt::Display for Diagnostic {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let one = |s: &str| s.replace(['\r', '\n'], " ");
        if self.line > 0 {
            write!(f, "{}:{}: ", self.file.display(), self.line)?;
        } else {
            write!(f, "{}: ", self.file.display())?;
        }
        write!(
            f,
            "{}: {}; {}",
            one(&self.field),
            one(&self.problem),
            one(&self.fix)
        )
    }
}

/// Every problem found in a campaign file. A TOML syntax, type or unknown-field error stops
/// parsing, so it comes alone; semantic checks report every problem they find, in file order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CampaignError {
    pub diagnostics: Vec<Diagnostic>,
}

impl fmt::Display for CampaignError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, d) in self.diagnostics.iter().enumerate() {
            if i > 0 {
                f.write_str("\n")?;
            }
            write!(f, "{d}")?;
        }
        Ok(())
    }
}

impl std::error::Error for CampaignError {}

impl CampaignError {
    pub fn single(d: Diagnostic) -> CampaignError {
        CampaignError {
            diagnostics: vec![d],
        }
    }
}

// The protocol `toml::Spanned` uses to ask the deserializer for a value's span (serde_spanned
// 0.6). Using it directly, instead of `Spanned<Node>`, lets a value *without* a span (an implicit
// table such as `gates` in `[gates.retrieval]`, or `env` in `env.X = ...`) fall back to a plain
// map: `Spanned` rejects those.
const SPANNED_NAME: &str = "$__serde_spanned_private_Spanned";
const SPANNED_START: &str = "$__serde_spanned_private_start";
const SPANNED_END: &str = "$__serde_spanned_private_end";
const SPANNED_VALUE: &str = "$__serde_spanned_private_value";
const SPANNED_FIELDS: &[&str] = &[SPANNED_START, SPANNED_END, SPANNED_VALUE];

/// A TOML value tree where every value keeps its byte span when the parser has one.
struct SNode {
    span: Option<Range<usize>>,
    node: Node,
}

enum Node {
    Table(Vec<(String, SNode)>),
    Array(Vec<SNode>),
    Leaf,
}

/// Deserializes a [`Node`] from any value (no span).
struct NodeVisitor;

impl<'de> Visitor<'de> for NodeVisitor {
    type Value = Node;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("any TOML value")
    }
    fn visit_bool<E>(self, _: bool) -> Result<Node, E> {
        Ok(Node::Leaf)
    }
    fn visit_i64<E>(self, _: i64) -> Result<Node, E> {
        Ok(Node::Leaf)
    }
    fn visit_u64<E>(self, _: u64) -> Result<Node, E> {
        Ok(Node::Leaf)
    }
    fn visit_f64<E>(self, _: f64) -> Result<Node, E> {
        Ok(Node::Leaf)
    }
    fn visit_str<E>(self, _: &str) -> Result<Node, E> {
        Ok(Node::Leaf)
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut s: A) -> Result<Node, A::Error> {
        let mut v = Vec::new();
        while let Some(x) = s.next_element::<SNode>()? {
            v.push(x);
        }
        Ok(Node::Array(v))
    }
    fn visit_map<A: MapAccess<'de>>(self, mut m: A) -> Result<Node, A::Error> {
        let mut v = Vec::new();
        while let Some(k) = m.next_key::<String>()? {
            v.push((k, m.next_value::<SNode>()?));
        }
        Ok(Node::Table(v))
    }
}

impl<'de> Deserialize<'de> for Node {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(NodeVisitor)
    }
}

impl<'de> Deserialize<'de> for SNode {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = SNode;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("any TOML value")
            }
            fn visit_bool<E>(self, _: bool) -> Result<SNode, E> {
                Ok(SNode {
                    span: None,
                    node: Node::Leaf,
                })
            }
            fn visit_i64<E>(self, _: i64) -> Result<SNode, E> {
                Ok(SNode {
                    span: None,
                    node: Node::Leaf,
                })
            }
            fn visit_u64<E>(self, _: u64) -> Result<SNode, E> {
                Ok(SNode {
                    span: None,
                    node: Node::Leaf,
                })
            }
            fn visit_f64<E>(self, _: f64) -> Result<SNode, E> {
                Ok(SNode {
                    span: None,
                    node: Node::Leaf,
                })
            }
            fn visit_str<E>(self, _: &str) -> Result<SNode, E> {
                Ok(SNode {
                    span: None,
                    node: Node::Leaf,
                })
            }
            fn visit_seq<A: SeqAccess<'de>>(self, s: A) -> Result<SNode, A::Error> {
                Ok(SNode {
                    span: None,
                    node: NodeVisitor.visit_seq(s)?,
                })
            }
            fn visit_map<A: MapAccess<'de>>(self, mut m: A) -> Result<SNode, A::Error> {
                let Some(first) = m.next_key::<String>()? else {
                    return Ok(SNode {
                        span: None,
                        node: Node::Table(Vec::new()),
                    });
                };
                if first == SPANNED_START {
                    let start: usize = m.next_value()?;
                    let mut end = start;
                    let mut node = Node::Leaf;
                    while let Some(k) = m.next_key::<String>()? {
                        if k == SPANNED_END {
                            end = m.next_value()?;
                        } else if k == SPANNED_VALUE {
                            node = m.next_value::<Node>()?;
                        } else {
                            m.next_value::<serde::de::IgnoredAny>()?;
                        }
                    }
                    return Ok(SNode {
                        span: Some(start..end),
                        node,
                    });
                }
                // A table the parser has no span for: read it as a plain table.
                let mut v = vec![(first, m.next_value::<SNode>()?)];
                while let Some(k) = m.next_key::<String>()? {
                    v.push((k, m.next_value::<SNode>()?));
                }
                Ok(SNode {
                    span: None,
                    node: Node::Table(v),
                })
            }
        }
        d.deserialize_struct(SPANNED_NAME, SPANNED_FIELDS, V)
    }
}

struct Entry {
    path: FieldPath,
    span: Option<Range<usize>>,
}

/// Field path → where its value is written in the document.
pub struct SpanIndex {
    entries: Vec<Entry>,
    /// Byte offset of the start of each line.
    line_starts: Vec<usize>,
}

impl SpanIndex {
    /// Indexes `text`; an index with no entries when the text is not valid TOML.
    pub fn build(text: &str) -> SpanIndex {
        let mut line_starts = vec![0];
        line_starts.extend(text.match_indices('\n').map(|(i, _)| i + 1));
        let mut idx = SpanIndex {
            entries: Vec::new(),
            line_starts,
        };
        if let Ok(root) = toml::from_str::<SNode>(text) {
            idx.walk(FieldPath::root(), &root);
        }
        idx
    }

    fn walk(&mut self, path: FieldPath, node: &SNode) {
        self.entries.push(Entry {
            path: path.clone(),
            span: node.span.clone(),
        });
        match &node.node {
            Node::Table(items) => {
                for (k, v) in items {
                    self.walk(path.key(k), v);
                }
            }
            Node::Array(items) => {
                for (i, v) in items.iter().enumerate() {
                    self.walk(path.index(i), v);
                }
            }
            Node::Leaf => {}
        }
    }

    /// 1-based line of a byte offset.
    pub fn line_of(&self, offset: usize) -> usize {
        match self.line_starts.binary_search(&offset) {
            Ok(i) => i + 1,
            Err(i) => i,
        }
    }

    /// The line where `path`'s value starts (for a `key = value` line, the key's line; for a
    /// table, its header); for a table the parser gives no span (`gates` when only
    /// `[gates.retrieval]` is written), its first spanned descendant; for a path that is not in
    /// the document, the line of its nearest ancestor that is (1 for the top level).
    pub fn line(&self, path: &FieldPath) -> usize {
        let mut p = Some(path.clone());
        while let Some(cur) = p {
            if cur.0.is_empty() {
                return 1;
            }
            if self.entries.iter().any(|e| e.path == cur) {
                let first = self
                    .entries
                    .iter()
                    .filter(|e| e.path.0.starts_with(&cur.0))
                    .filter_map(|e| e.span.as_ref().map(|s| s.start))
                    .min();
                if let Some(at) = first {
                    return self.line_of(at);
                }
            }
            p = cur.parent();
        }
        1
    }

    /// Whether `path` is written in the document.
    pub fn contains(&self, path: &FieldPath) -> bool {
        self.entries.iter().any(|e| &e.path == path)
    }

    /// The deepest field whose value contains `offset`.
    pub fn path_at(&self, offset: usize) -> Option<FieldPath> {
        self.entries
            .iter()
            .filter(|e| !e.path.0.is_empty())
            .filter(|e| {
                e.span
                    .as_ref()
                    .is_some_and(|r| r.start <= offset && offset < r.end.max(r.start + 1))
            })
            .max_by_key(|e| e.path.0.len())
            .map(|e| e.path.clone())
    }
}

/// Collects diagnostics for one file.
pub struct Reporter<'a> {
    pub file: &'a Path,
    pub index: &'a SpanIndex,
    pub diagnostics: Vec<Diagnostic>,
    /// Things that load but deserve a word (the campaign still runs).
    pub warnings: Vec<Diagnostic>,
}

impl<'a> Reporter<'a> {
    pub fn new(file: &'a Path, index: &'a SpanIndex) -> Reporter<'a> {
        Reporter {
            file,
            index,
            diagnostics: Vec::new(),
            warnings: Vec::new(),
        }
    }

    /// Records a warning at `path`: the campaign is valid, but something limits what its
    /// evidence can show.
    pub fn warn(&mut self, path: &FieldPath, problem: impl Into<String>, fix: impl Into<String>) {
        self.warnings.push(Diagnostic {
            file: self.file.to_path_buf(),
            line: self.index.line(path),
            field: path.to_string(),
            problem: problem.into(),
            fix: fix.into(),
        });
    }

    /// Records a problem at `path`.
    pub fn error(&mut self, path: &FieldPath, problem: impl Into<String>, fix: impl Into<String>) {
        self.diagnostics.push(Diagnostic {
            file: self.file.to_path_buf(),
            line: self.index.line(path),
            field: path.to_string(),
            problem: problem.into(),
            fix: fix.into(),
        });
    }

    /// Problems sorted by line (stable, so problems on one line keep their order).
    pub fn finish(mut self) -> Result<(), CampaignError> {
        if self.diagnostics.is_empty() {
            return Ok(());
        }
        self.diagnostics.sort_by_key(|d| d.line);
        Err(CampaignError {
            diagnostics: self.diagnostics,
        })
    }
}

/// Fields that belong to a recipe table: used to tell a user who wrote `argv` directly under
/// `[[arms]]` where it goes.
const RECIPE_FIELDS: &[(&str, &str)] = &[
    ("argv", "process"),
    ("cwd", "process"),
    ("env", "process"),
    ("image", "container"),
    ("docker", "container"),
    ("volumes", "container"),
    ("labels", "container"),
    ("run_args", "container"),
    ("container_port", "container"),
    ("url", "endpoint"),
    ("profile", "reference"),
    ("seed", "reference"),
    ("partition", "slurm"),
    ("nodelist", "slurm"),
    ("constraint", "slurm"),
    ("sbatch_args", "slurm"),
    ("job_name", "slurm"),
    ("time_limit", "slurm"),
];

/// Turns a `toml::de::Error` (syntax, type, missing or unknown field) into one diagnostic.
pub fn from_toml_error(
    file: &Path,
    text: &str,
    index: &SpanIndex,
    err: &toml::de::Error,
) -> Diagnostic {
    let message = err
        .message()
        .trim()
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect::<Vec<_>>()
        .join(": ");
    let offset = err.span().map(|s| s.start.min(text.len()));
    let line = offset.map_or(1, |o| index.line_of(o));
    let path = offset.and_then(|o| index.path_at(o));
    let quoted = |prefix: &str| -> Option<String> {
        let rest = message.strip_prefix(prefix)?;
        let rest = rest.strip_prefix('`')?;
        Some(rest[..rest.find('`')?].to_string())
    };
    let serde_error = [
        "unknown field",
        "missing field",
        "invalid type",
        "invalid value",
        "unknown variant",
        "invalid length",
    ]
    .iter()
    .any(|p| message.starts_with(p));
    if !serde_error {
        return Diagnostic {
            file: file.to_path_buf(),
            line,
            field: "TOML syntax".to_string(),
            problem: message,
            fix: "fix the TOML syntax on this line (strings need quotes, tables `[name]`, arrays `[a, b]`, each key once)".to_string(),
        };
    }
    // The deepest table or value holding the error (the top level when none does).
    let path = path.unwrap_or_default();
    let mut field = path.clone();
    let fix = if let Some(f) = quoted("unknown field ") {
        // The span is the unknown key; `path` is the table holding it.
        if path.0.last() != Some(&Seg::Key(f.clone())) {
            field = path.key(&f);
        }
        match RECIPE_FIELDS.iter().find(|(name, _)| *name == f) {
            Some((_, table))
                if matches!(field.0.first(), Some(Seg::Key(k)) if k == "arms")
                    && field.0.len() == 3 =>
            {
                format!("`{f}` belongs in the arm's recipe table: put it under [arms.{table}]")
            }
            _ => format!("remove `{f}` or correct its spelling (see docs/campaign.md)"),
        }
    } else if let Some(f) = quoted("missing field ") {
        field = path.key(&f);
        format!("add `{f} = ...` to this table (see docs/campaign.md)")
    } else if message.starts_with("unknown variant") {
        "use one of the listed values".to_string()
    } else if message.starts_with("invalid type") || message.starts_with("invalid value") {
        let last = path.0.iter().rev().find_map(|s| match s {
            Seg::Key(k) => Some(k.as_str()),
            Seg::Index(_) => None,
        });
        match last {
            Some("port" | "container_port") => "give a port number from 1 to 65535".to_string(),
            Some("argv" | "args" | "run_args") => {
                "write an array of strings, one per argument, numbers quoted: [\"--port\", \"8000\"]".to_string()
            }
            _ if message.contains("expected u") => "give a whole number of 0 or more".to_string(),
            _ => "give a value of the expected type (see docs/campaign.md)".to_string(),
        }
    } else if message.contains("duplicate key") {
        "remove the duplicate key".to_string()
    } else {
        "see docs/campaign.md for this field".to_string()
    };
    Diagnostic {
        file: file.to_path_buf(),
        line,
        field: field.to_string(),
        problem: message,
        fix,
    }
}
