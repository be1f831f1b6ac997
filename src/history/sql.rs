//! The SQL both backends speak: values, rows, the statement interface, and the few helpers they
//! share (no sibling imports: `store` picks a backend, the backends implement [`Sql`]).

use anyhow::Result;
use std::path::Path;

/// Environment variables the PostgreSQL password is read from, first set wins.
pub const PASSWORD_VARS: &[&str] = &["BAKEOFF_HISTORY_PASSWORD", "PGPASSWORD"];

/// One SQL value; `None` is NULL.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    T(Option<String>),
    I(Option<i64>),
    F(Option<f64>),
}

impl Value {
    pub fn text(s: impl Into<String>) -> Value {
        Value::T(Some(s.into()))
    }
    pub fn str(&self) -> String {
        match self {
            Value::T(Some(s)) => s.clone(),
            Value::I(Some(i)) => i.to_string(),
            Value::F(Some(f)) => f.to_string(),
            _ => String::new(),
        }
    }
    pub fn int(&self) -> Option<i64> {
        match self {
            Value::I(i) => *i,
            Value::F(f) => f.map(|f| f as i64),
            Value::T(t) => t.as_deref().and_then(|s| s.parse().ok()),
        }
    }
    pub fn float(&self) -> Option<f64> {
        match self {
            Value::F(f) => *f,
            Value::I(i) => i.map(|i| i as f64),
            Value::T(t) => t.as_deref().and_then(|s| s.parse().ok()),
        }
    }
}

pub type Row = Vec<Value>;

/// What both backends (and their transactions) run: statements with `?` placeholders.
pub trait Sql {
    fn exec(&mut self, sql: &str, params: &[Value]) -> Result<u64>;
    fn query(&mut self, sql: &str, params: &[Value]) -> Result<Vec<Row>>;
}

/// `?` placeholders as PostgreSQL's `$1, $2, ...` (no statement here has a `?` in a literal).
pub fn numbered(sql: &str) -> String {
    let mut out = String::with_capacity(sql.len() + 8);
    let mut n = 0;
    for ch in sql.chars() {
        if ch == '?' {
            n += 1;
            out.push('$');
            out.push_str(&n.to_string());
        } else {
            out.push(ch);
        }
    }
    out
}

/// The folder a SQLite file goes in must exist; created on first use.
pub fn ensure_parent(p: &Path) -> Result<()> {
    if let Some(d) = p.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(d).map_err(|e| {
            anyhow::anyhow!(
                "cannot create {} for the history database: {e}; pass --db with a writable path",
                d.display()
            )
        })?;
    }
    Ok(())
}

/// A statement's first line, for error messages.
pub fn first_line(sql: &str) -> &str {
    sql.trim().lines().next().unwrap_or("")
}
