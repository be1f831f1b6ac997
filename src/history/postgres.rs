//! The shared backend: a PostgreSQL server (the synchronous `postgres` crate, no TLS: run it on
//! a trusted network or through a local tunnel). The password never travels in argv: it is read
//! from [`PASSWORD_VARS`] and set on the connection's configuration, and no message prints it.

use super::sql::{first_line, numbered, Row, Sql, Value, PASSWORD_VARS};
use ::postgres::types::{ToSql, Type};
use ::postgres::{Client, Config, NoTls};
use anyhow::{Context, Result};
use std::time::Duration;

pub fn connect(url: &str) -> Result<Client> {
    let mut cfg: Config = url.parse().with_context(|| {
        format!("--db {url}: not a PostgreSQL URL (postgres://USER@HOST:PORT/DATABASE)")
    })?;
    if let Some(pw) = PASSWORD_VARS
        .iter()
        .find_map(|v| std::env::var(v).ok().filter(|s| !s.is_empty()))
    {
        cfg.password(pw);
    }
    cfg.connect_timeout(Duration::from_secs(10));
    cfg.application_name("bakeoff-history");
    cfg.connect(NoTls).map_err(|e| {
        anyhow::anyhow!(
            "cannot connect to the history database {url}: {e}; is the server up, and is the password (if one is needed) in {}?",
            PASSWORD_VARS.join(" or ")
        )
    })
}

/// One transaction holding an exclusive lock on `bundles` (created first when the database is
/// new), so concurrent writers queue; an error or a dropped connection rolls it all back.
pub fn write<T>(c: &mut Client, f: impl FnOnce(&mut dyn Sql) -> Result<T>) -> Result<T> {
    let mut tx = c
        .transaction()
        .context("PostgreSQL: cannot start a transaction (connection lost?)")?;
    // Serialise writers (and migrations) on one advisory lock: a table lock cannot be taken
    // before the first migration created the table.
    tx.execute("SELECT pg_advisory_xact_lock(7420250001)", &[])
        .context("PostgreSQL: cannot take the history's write lock")?;
    let out = match f(&mut Tx(&mut tx)) {
        Ok(o) => o,
        Err(e) => {
            drop(tx);
            if c.is_closed() {
                // The server rolls back a transaction whose connection ended.
                return Err(e.context(
                    "the connection to the PostgreSQL server was lost during the write; the server rolled the transaction back, so nothing of it was kept: run the same command again once the server is reachable",
                ));
            }
            return Err(e);
        }
    };
    tx.commit()
        .context("PostgreSQL: the commit failed (connection lost?); nothing of it was kept")?;
    Ok(out)
}

struct Tx<'a, 'b>(&'a mut ::postgres::Transaction<'b>);

fn refs(params: &[Value]) -> Vec<&(dyn ToSql + Sync)> {
    params
        .iter()
        .map(|v| match v {
            Value::T(x) => x as &(dyn ToSql + Sync),
            Value::I(x) => x as &(dyn ToSql + Sync),
            Value::F(x) => x as &(dyn ToSql + Sync),
        })
        .collect()
}

fn rows(rs: Vec<::postgres::Row>) -> Result<Vec<Row>> {
    rs.iter()
        .map(|r| {
            (0..r.len())
                .map(|i| {
                    let t = r.columns()[i].type_();
                    Ok(if *t == Type::INT8 {
                        Value::I(r.try_get(i)?)
                    } else if *t == Type::INT4 {
                        Value::I(r.try_get::<_, Option<i32>>(i)?.map(i64::from))
                    } else if *t == Type::FLOAT8 {
                        Value::F(r.try_get(i)?)
                    } else if *t == Type::FLOAT4 {
                        Value::F(r.try_get::<_, Option<f32>>(i)?.map(f64::from))
                    } else {
                        Value::T(r.try_get(i)?)
                    })
                })
                .collect::<Result<Row>>()
        })
        .collect()
}

impl Sql for Tx<'_, '_> {
    fn exec(&mut self, sql: &str, params: &[Value]) -> Result<u64> {
        self.0
            .execute(numbered(sql).as_str(), &refs(params))
            .with_context(|| format!("PostgreSQL: {}", first_line(sql)))
    }
    fn query(&mut self, sql: &str, params: &[Value]) -> Result<Vec<Row>> {
        let rs = self
            .0
            .query(numbered(sql).as_str(), &refs(params))
            .with_context(|| format!("PostgreSQL: {}", first_line(sql)))?;
        rows(rs)
    }
}

impl Sql for Client {
    fn exec(&mut self, sql: &str, params: &[Value]) -> Result<u64> {
        self.execute(numbered(sql).as_str(), &refs(params))
            .with_context(|| format!("PostgreSQL: {}", first_line(sql)))
    }
    fn query(&mut self, sql: &str, params: &[Value]) -> Result<Vec<Row>> {
        let rs = Client::query(self, numbered(sql).as_str(), &refs(params))
            .with_context(|| format!("PostgreSQL: {}", first_line(sql)))?;
        rows(rs)
    }
}
