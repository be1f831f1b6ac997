//! Suite files (tools and quality): reading TOML or JSON, hashing, and errors that name the file,
//! the item and the field.
//!
//! Suites are read into a `serde_json::Value` first and then walked by hand, so every error can say
//! which item (`case "weather"`) and which field (`calls[0].arguments.zip`) is wrong, and unknown
//! fields are refused wherever they appear.

use serde_json::{Map, Value};
use sha2::{Digest, Sha256};
use std::fmt;
use std::path::{Path, PathBuf};

/// A suite file that can't be used: refused before any request is sent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SuiteError {
    pub file: String,
    /// The item (`case "weather"`, `tool "get_weather"`, `suite` for top-level fields).
    pub item: String,
    /// The field inside the item (`calls[0].arguments.zip`); empty when the whole file is at fault.
    pub field: String,
    pub message: String,
    /// The 1-based line the error points at, when it could be found ([`SuiteError::locate`]).
    pub line: Option<u32>,
    /// How to fix it (none: the message says it). Boxed: the error stays small.
    pub fix: Option<Box<str>>,
}

impl fmt::Display for SuiteError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let file = match self.line {
            Some(l) => format!("{}:{l}", self.file),
            None => self.file.clone(),
        };
        match (self.item.is_empty(), self.field.is_empty()) {
            (true, _) => write!(f, "{file}: {}", self.message)?,
            (false, true) => write!(f, "{file}: {}: {}", self.item, self.message)?,
            (false, false) => write!(
                f,
                "{file}: {}: field `{}`: {}",
                self.item, self.field, self.message
            )?,
        }
        if let Some(fix) = &self.fix {
            write!(f, "; {fix}")?;
        }
        Ok(())
    }
}

impl SuiteError {
    /// With a fix.
    pub fn fix(mut self, fix: impl Into<String>) -> SuiteError {
        self.fix = Some(fix.into().into_boxed_str());
        self
    }

    /// Finds the line the error points at in the suite's `text` (TOML or JSON): the item's
    /// `[[list]]` header (or its `"id"`), then the deepest key of the field inside the item.
    pub fn locate(mut self, text: &str) -> SuiteError {
        if self.line.is_none() {
            self.line = locate(text, &self.item, &self.field);
        }
        self
    }
}

/// `tools[2]` from an item label `tool "x" (tools[2])` or `case cases[2]`.
fn list_index(item: &str) -> Option<(&str, usize)> {
    let inner = item.trim_end_matches(')');
    let tail = inner.rsplit([' ', '(']).next()?;
    let (list, rest) = tail.split_once('[')?;
    let i = rest.trim_end_matches(']').parse().ok()?;
    Some((list, i))
}

fn locate(text: &str, item: &str, field: &str) -> Option<u32> {
    let lines: Vec<&str> = text.lines().collect();
    let header = |l: &str| l.trim_start().starts_with('[');
    let (start, end) = match list_index(item) {
        Some((list, i)) => {
            let h = format!("[[{list}]]");
            let starts: Vec<usize> = (0..lines.len()).filter(|&n| lines[n].trim() == h).collect();
            match starts.get(i) {
                Some(&s) => {
                    let e = (s + 1..lines.len())
                        .find(|&n| lines[n].trim_start().starts_with("[["))
                        .unwrap_or(lines.len());
                    (s, e)
                }
                None => {
                    // JSON, or inline arrays: the item's quoted id.
                    let id = item.split('"').nth(1)?;
                    let s = (0..lines.len()).find(|&n| lines[n].contains(&format!("\"{id}\"")))?;
                    (s, lines.len())
                }
            }
        }
        None if item == "suite" => (
            0,
            (0..lines.len())
                .find(|&n| header(lines[n]))
                .unwrap_or(lines.len()),
        ),
        None => return None,
    };
    let keys: Vec<String> = field
        .split('.')
        .map(|k| k.split('[').next().unwrap_or(k).to_string())
        .filter(|k| !k.is_empty())
        .collect();
    for k in keys.iter().rev() {
        let hit = (start..end).find(|&n| {
            let l = lines[n].trim_start();
            l.starts_with(&format!("{k} ="))
                || l.starts_with(&format!("{k}="))
                || l.contains(&format!(" {k} ="))
                || l.contains(&format!("{{{k} ="))
                || l.contains(&format!(".{k}]"))
                || l.contains(&format!("\"{k}\""))
        });
        if let Some(n) = hit {
            return u32::try_from(n + 1).ok();
        }
    }
    u32::try_from(start + 1).ok()
}

impl std::error::Error for SuiteError {}

/// A suite file as read: its bytes' SHA-256 and its content as JSON.
#[derive(Debug, Clone)]
pub struct SuiteFile {
    pub path: PathBuf,
    pub sha256: String,
    pub root: Map<String, Value>,
    /// The file's text (errors are located in it).
    pub text: String,
}

/// Hex SHA-256 of `bytes`.
pub fn sha256_hex(bytes: &[u8]) -> String {
    let d = Sha256::digest(bytes);
    let mut s = String::with_capacity(64);
    for b in d {
        s.push_str(&format!("{b:02x}"));
    }
    s
}

/// Reads a suite: JSON when the name ends in `.json`, TOML otherwise.
pub fn read(path: &Path) -> Result<SuiteFile, SuiteError> {
    let bytes = std::fs::read(path).map_err(|e| SuiteError {
        file: path.display().to_string(),
        item: String::new(),
        field: String::new(),
        message: format!("cannot read the suite file: {e}"),
        line: None,
        fix: Some("give the path of a readable suite file".into()),
    })?;
    from_bytes(path, &bytes)
}

/// Parses suite bytes as if read from `path` (JSON when it ends in `.json`, TOML otherwise).
pub fn from_bytes(path: &Path, bytes: &[u8]) -> Result<SuiteFile, SuiteError> {
    let file = path.display().to_string();
    let whole = |message: String| SuiteError {
        file: file.clone(),
        item: String::new(),
        field: String::new(),
        message,
        line: None,
        fix: None,
    };
    let text =
        std::str::from_utf8(bytes).map_err(|_| whole("the suite file is not UTF-8 text".into()))?;
    let json = path
        .extension()
        .is_some_and(|e| e.eq_ignore_ascii_case("json"));
    let value: Value = if json {
        serde_json::from_str(text).map_err(|e| whole(format!("not valid JSON: {e}")))?
    } else {
        let t: toml::Value = toml::from_str(text).map_err(|e| {
            let mut w = whole(format!(
                "not valid TOML: {}",
                e.message().trim().replace('\n', " ")
            ));
            w.line = e
                .span()
                .and_then(|sp| u32::try_from(text[..sp.start.min(text.len())].matches('\n').count() + 1).ok());
            w.fix("fix the TOML at that line (a duplicate key often means a deleted [[cases]] or [[items]] header above it)")
        })?;
        serde_json::to_value(t).map_err(|e| whole(format!("cannot convert the TOML: {e}")))?
    };
    match value {
        Value::Object(root) => Ok(SuiteFile {
            path: path.to_path_buf(),
            sha256: sha256_hex(bytes),
            root,
            text: text.to_string(),
        }),
        _ => Err(whole("the top level must be a table (object)".into())),
    }
}

/// Where errors point: the file and the item being read.
#[derive(Debug, Clone)]
pub struct Here {
    pub file: String,
    pub item: String,
}

impl Here {
    pub fn new(file: &str, item: impl Into<String>) -> Here {
        Here {
            file: file.to_string(),
            item: item.into(),
        }
    }

    pub fn err(&self, field: impl Into<String>, message: impl Into<String>) -> SuiteError {
        SuiteError {
            file: self.file.clone(),
            item: self.item.clone(),
            field: field.into(),
            message: message.into(),
            line: None,
            fix: None,
        }
    }
}

/// Joins a field prefix and a key: `calls[0]` + `name` = `calls[0].name`.
pub fn join(prefix: &str, key: &str) -> String {
    if prefix.is_empty() {
        key.to_string()
    } else {
        format!("{prefix}.{key}")
    }
}

/// The JSON type of a value, in words.
pub fn type_name(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(n) if n.is_u64() || n.is_i64() => "an integer",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "a table",
    }
}

/// A table being read: refuses keys outside `known`, and reads typed fields with errors that name
/// the field.
pub struct Fields<'a> {
    pub map: &'a Map<String, Value>,
    pub here: &'a Here,
    pub prefix: String,
}

/// The top-level fields every suite kind shares.
pub struct Common<'a> {
    pub name: Option<String>,
    pub system: Option<&'a str>,
    /// `max_tokens`, or `default_max`; at least 1.
    pub max_tokens: u64,
}

impl<'a> Common<'a> {
    /// Reads `name`, `description` (checked, not kept), `system` and `max_tokens` from `top`.
    pub fn read(top: &Fields<'a>, default_max: u64) -> Result<Common<'a>, SuiteError> {
        let name = top.opt_str("name")?.map(str::to_string);
        top.opt_str("description")?;
        let system = top.opt_str("system")?;
        let max_tokens = top.opt_u64("max_tokens")?.unwrap_or(default_max);
        if max_tokens == 0 {
            return Err(top.err("max_tokens", "must be at least 1"));
        }
        Ok(Common {
            name,
            system,
            max_tokens,
        })
    }
}

impl<'a> Fields<'a> {
    /// Checks `v` is a table whose keys are all in `known`.
    pub fn new(
        v: &'a Value,
        here: &'a Here,
        prefix: &str,
        known: &[&str],
    ) -> Result<Fields<'a>, SuiteError> {
        let map = v
            .as_object()
            .ok_or_else(|| here.err(prefix, format!("expected a table, found {}", type_name(v))))?;
        Fields::of(map, here, prefix, known)
    }

    pub fn of(
        map: &'a Map<String, Value>,
        here: &'a Here,
        prefix: &str,
        known: &[&str],
    ) -> Result<Fields<'a>, SuiteError> {
        for k in map.keys() {
            if !known.contains(&k.as_str()) {
                return Err(here
                    .err(
                        join(prefix, k),
                        format!("unknown field (known fields here: {})", known.join(", ")),
                    )
                    .fix("remove it or correct its spelling"));
            }
        }
        Ok(Fields {
            map,
            here,
            prefix: prefix.to_string(),
        })
    }

    pub fn field(&self, key: &str) -> String {
        join(&self.prefix, key)
    }

    pub fn err(&self, key: &str, message: impl Into<String>) -> SuiteError {
        self.here.err(self.field(key), message)
    }

    pub fn get(&self, key: &str) -> Option<&'a Value> {
        self.map.get(key)
    }

    pub fn opt_str(&self, key: &str) -> Result<Option<&'a str>, SuiteError> {
        match self.map.get(key) {
            None => Ok(None),
            Some(Value::String(s)) => Ok(Some(s.as_str())),
            Some(v) => Err(self.err(key, format!("expected a string, found {}", type_name(v)))),
        }
    }

    /// An item's `id`: present, not empty, and not `taken` by an earlier item.
    pub fn item_id(&self, taken: impl Fn(&str) -> bool) -> Result<&'a str, SuiteError> {
        let id = self.str("id")?;
        if id.is_empty() {
            return Err(self.err("id", "must not be empty"));
        }
        if taken(id) {
            return Err(self.err("id", format!("duplicate id \"{id}\"")));
        }
        Ok(id)
    }

    pub fn str(&self, key: &str) -> Result<&'a str, SuiteError> {
        self.opt_str(key)?
            .ok_or_else(|| self.err(key, "missing (this field is required)"))
    }

    pub fn opt_u64(&self, key: &str) -> Result<Option<u64>, SuiteError> {
        match self.map.get(key) {
            None => Ok(None),
            Some(v) => v
                .as_u64()
                .map(Some)
                .ok_or_else(|| self.err(key, format!("expected a whole number ≥ 0, found {v}"))),
        }
    }

    pub fn opt_f64(&self, key: &str) -> Result<Option<f64>, SuiteError> {
        match self.map.get(key) {
            None => Ok(None),
            Some(v) => v
                .as_f64()
                .map(Some)
                .ok_or_else(|| self.err(key, format!("expected a number, found {v}"))),
        }
    }

    pub fn opt_array(&self, key: &str) -> Result<Option<&'a Vec<Value>>, SuiteError> {
        match self.map.get(key) {
            None => Ok(None),
            Some(Value::Array(a)) => Ok(Some(a)),
            Some(v) => Err(self.err(key, format!("expected an array, found {}", type_name(v)))),
        }
    }

    pub fn opt_table(&self, key: &str) -> Result<Option<&'a Map<String, Value>>, SuiteError> {
        match self.map.get(key) {
            None => Ok(None),
            Some(Value::Object(m)) => Ok(Some(m)),
            Some(v) => Err(self.err(key, format!("expected a table, found {}", type_name(v)))),
        }
    }

    /// An array of strings.
    pub fn opt_strings(&self, key: &str) -> Result<Option<Vec<String>>, SuiteError> {
        let Some(a) = self.opt_array(key)? else {
            return Ok(None);
        };
        a.iter()
            .enumerate()
            .map(|(i, v)| {
                v.as_str().map(str::to_string).ok_or_else(|| {
                    self.here.err(
                        format!("{}[{i}]", self.field(key)),
                        format!("expected a string, found {}", type_name(v)),
                    )
                })
            })
            .collect::<Result<Vec<_>, _>>()
            .map(Some)
    }
}

/// Checks the suite's `kind` field (so a quality suite is not run as a tools suite by mistake).
pub fn check_kind(file: &SuiteFile, want: &str) -> Result<(), SuiteError> {
    let here = Here::new(&file.path.display().to_string(), "suite");
    match file.root.get("kind") {
        Some(Value::String(k)) if k == want => Ok(()),
        Some(Value::String(k)) => Err(here.err(
            "kind",
            format!("this is a \"{k}\" suite; the {want} gate needs kind = \"{want}\""),
        )),
        Some(v) => Err(here.err("kind", format!("expected a string, found {}", type_name(v)))),
        None => Err(here.err(
            "kind",
            format!("missing (write kind = \"{want}\" at the top of the file)"),
        )),
    }
}

/// The display name of item `i` of an array whose items carry an `id` (or `name`).
pub fn item_label(what: &str, list: &str, i: usize, v: &Value, key: &str) -> String {
    match v.get(key).and_then(Value::as_str) {
        Some(id) => format!("{what} \"{id}\" ({list}[{i}])"),
        None => format!("{what} {list}[{i}]"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sha256_of_known_text() {
        assert_eq!(
            sha256_hex(b"abc"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
    }

    #[test]
    fn errors_name_file_item_and_field() {
        let here = Here::new("s.toml", "case \"a\" (cases[0])");
        let v = serde_json::json!({"id": "a", "expct": 1});
        let e = Fields::new(&v, &here, "", &["id"]).err().unwrap();
        assert_eq!(
            e.to_string(),
            "s.toml: case \"a\" (cases[0]): field `expct`: unknown field (known fields here: id); remove it or correct its spelling"
        );
        // Located in the text: the item's header, then the key inside it.
        let text = "kind = \"tools\"\n[[cases]]\nid = \"a\"\n[[cases]]\nid = \"b\"\nexpct = 1\n";
        let here = Here::new("s.toml", "case \"b\" (cases[1])");
        let e = here.err("expct", "unknown field").locate(text);
        assert_eq!(e.line, Some(6));
        assert!(e.to_string().starts_with("s.toml:6: case"), "{e}");
    }
}
