//! The embedded backend: one SQLite file (rusqlite, SQLite compiled in).

use super::sql::{ensure_parent, first_line, Row, Sql, Value};
use anyhow::{Context, Result};
use rusqlite::types::ValueRef;
use rusqlite::{Connection, TransactionBehavior};
use std::path::Path;
use std::time::Duration;

/// A writer waits this long for another writer's transaction (two campaigns finishing at once).
const BUSY: Duration = Duration::from_secs(30);

/// Opens the file and proves it is a SQLite database before anything is written to it.
pub fn open(p: &Path) -> Result<Connection> {
    ensure_parent(p)?;
    let c = Connection::open(p)
        .with_context(|| format!("cannot open the history database {}", p.display()))?;
    c.busy_timeout(BUSY)?;
    // SQLite reads a file lazily: a corrupt or foreign file is only noticed by the first read.
    let probe: rusqlite::Result<i64> = c.query_row("PRAGMA schema_version", [], |r| r.get(0));
    if let Err(e) = probe {
        anyhow::bail!(
            "{} is not a usable history database (SQLite: {e}); it is corrupt or not a SQLite file: move it aside and pass --db with a new file (or restore a backup)",
            p.display()
        );
    }
    // Durable commits that survive a crash mid-ingest: the default rollback journal, full sync.
    c.pragma_update(None, "synchronous", "FULL")?;
    c.pragma_update(None, "foreign_keys", "ON")?;
    Ok(c)
}

/// Runs `f` in a `BEGIN IMMEDIATE` transaction (the write lock taken first, so concurrent
/// writers queue for [`BUSY`] instead of failing halfway).
pub fn write<T>(
    c: &mut Connection,
    p: &Path,
    f: impl FnOnce(&mut dyn Sql) -> Result<T>,
) -> Result<T> {
    let tx = c
        .transaction_with_behavior(TransactionBehavior::Immediate)
        .with_context(|| format!("cannot start a write on {}", p.display()))?;
    let out = f(&mut Conn(&tx))?;
    tx.commit()
        .with_context(|| format!("cannot commit to {}", p.display()))?;
    Ok(out)
}

struct Conn<'a>(&'a Connection);

impl Sql for Conn<'_> {
    fn exec(&mut self, sql: &str, params: &[Value]) -> Result<u64> {
        exec(self.0, sql, params)
    }
    fn query(&mut self, sql: &str, params: &[Value]) -> Result<Vec<Row>> {
        query(self.0, sql, params)
    }
}

impl Sql for Connection {
    fn exec(&mut self, sql: &str, params: &[Value]) -> Result<u64> {
        exec(self, sql, params)
    }
    fn query(&mut self, sql: &str, params: &[Value]) -> Result<Vec<Row>> {
        query(self, sql, params)
    }
}

fn bind(params: &[Value]) -> Vec<rusqlite::types::Value> {
    use rusqlite::types::Value as V;
    params
        .iter()
        .map(|v| match v {
            Value::T(Some(s)) => V::Text(s.clone()),
            Value::I(Some(i)) => V::Integer(*i),
            Value::F(Some(f)) => V::Real(*f),
            _ => V::Null,
        })
        .collect()
}

fn exec(c: &Connection, sql: &str, params: &[Value]) -> Result<u64> {
    let n = c
        .prepare_cached(sql)
        .and_then(|mut s| s.execute(rusqlite::params_from_iter(bind(params))))
        .with_context(|| format!("SQLite: {}", first_line(sql)))?;
    Ok(n as u64)
}

fn query(c: &Connection, sql: &str, params: &[Value]) -> Result<Vec<Row>> {
    let mut s = c
        .prepare_cached(sql)
        .with_context(|| format!("SQLite: {}", first_line(sql)))?;
    let cols = s.column_count();
    let rows = s
        .query_map(rusqlite::params_from_iter(bind(params)), |r| {
            (0..cols)
                .map(|i| {
                    Ok(match r.get_ref(i)? {
                        ValueRef::Null => Value::T(None),
                        ValueRef::Integer(i) => Value::I(Some(i)),
                        ValueRef::Real(f) => Value::F(Some(f)),
                        ValueRef::Text(t) => Value::T(Some(String::from_utf8_lossy(t).into())),
                        ValueRef::Blob(b) => Value::T(Some(String::from_utf8_lossy(b).into())),
                    })
                })
                .collect::<rusqlite::Result<Row>>()
        })
        .and_then(|it| it.collect::<rusqlite::Result<Vec<Row>>>())
        .with_context(|| format!("SQLite: {}", first_line(sql)))?;
    Ok(rows)
}
