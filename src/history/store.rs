//! The history database: one [`Store`] over SQLite (embedded, the default) or PostgreSQL (a
//! team's shared server), the same SQL on both, versioned migrations run on open.
//!
//! The DDL uses only types both engines read the same way (`TEXT`, `BIGINT`, `DOUBLE
//! PRECISION`) and statements are written with `?` placeholders, rewritten to `$n` for
//! PostgreSQL, so every query below is one text for both backends.

use super::sql::{Row, Sql, Value, PASSWORD_VARS};
use super::{postgres as pg, sqlite};
use anyhow::{bail, Result};
use std::path::PathBuf;

/// Where the history lives, as `--db` names it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DbSpec {
    Sqlite(PathBuf),
    /// A `postgres://` URL without a password (the password comes from [`PASSWORD_VARS`]).
    Postgres(String),
}

impl DbSpec {
    /// `--db` as given: a `postgres://` / `postgresql://` URL, else a SQLite file path. A URL that
    /// carries a password is refused: argv is visible to every user of the machine (`ps`).
    pub fn parse(s: &str) -> Result<DbSpec> {
        if s.starts_with("postgres://") || s.starts_with("postgresql://") {
            let rest = s.split_once("://").map(|x| x.1).unwrap_or("");
            let auth = rest.split('/').next().unwrap_or("");
            if let Some((userinfo, _)) = auth.rsplit_once('@') {
                if userinfo.contains(':') {
                    bail!(
                        "--db: the URL carries a password; argv is visible to every user (`ps`). Remove it and set {} instead",
                        PASSWORD_VARS[0]
                    );
                }
            }
            if s.contains("password=") {
                bail!(
                    "--db: the URL carries a password parameter; set {} instead",
                    PASSWORD_VARS[0]
                );
            }
            return Ok(DbSpec::Postgres(s.to_string()));
        }
        if s.is_empty() {
            bail!("--db is empty: give a SQLite file path or a postgres:// URL");
        }
        Ok(DbSpec::Sqlite(PathBuf::from(s)))
    }

    /// The default store: `$XDG_DATA_HOME/bakeoff/history.sqlite`, else
    /// `~/.local/share/bakeoff/history.sqlite`.
    pub fn default_path() -> Result<DbSpec> {
        let base = match std::env::var_os("XDG_DATA_HOME").filter(|v| !v.is_empty()) {
            Some(d) => PathBuf::from(d),
            None => match std::env::var_os("HOME").filter(|v| !v.is_empty()) {
                Some(h) => PathBuf::from(h).join(".local/share"),
                None => bail!("neither XDG_DATA_HOME nor HOME is set: pass --db PATH"),
            },
        };
        Ok(DbSpec::Sqlite(base.join("bakeoff").join("history.sqlite")))
    }

    /// How messages name the store (never with a password: the URL holds none).
    pub fn describe(&self) -> String {
        match self {
            DbSpec::Sqlite(p) => p.display().to_string(),
            DbSpec::Postgres(u) => u.clone(),
        }
    }
}

/// An open history database, migrated to [`LATEST`].
pub enum Store {
    Sqlite(rusqlite::Connection, PathBuf),
    Postgres(Box<::postgres::Client>, String),
}

/// The schema, one step per version: a database records the last step applied, and a newer
/// bakeoff applies the rest on open. Never edit a released step; add one.
pub const MIGRATIONS: &[&[&str]] = &[
    &[
        // 1: bundles, their arms, the arms' figures.
        "CREATE TABLE bundles (
        digest TEXT PRIMARY KEY,
        campaign_id TEXT NOT NULL,
        started_at TEXT NOT NULL,
        host TEXT NOT NULL,
        hardware TEXT NOT NULL,
        gpu_model TEXT NOT NULL,
        driver TEXT NOT NULL,
        lane TEXT NOT NULL,
        complete BIGINT NOT NULL,
        workload TEXT NOT NULL,
        winner TEXT NOT NULL,
        reason TEXT NOT NULL,
        path TEXT NOT NULL,
        added_at TEXT NOT NULL,
        UNIQUE (campaign_id, started_at, host, lane))",
        "CREATE TABLE arms (
        digest TEXT NOT NULL REFERENCES bundles(digest),
        arm TEXT NOT NULL,
        role TEXT NOT NULL,
        label TEXT NOT NULL,
        recipe TEXT NOT NULL,
        engine TEXT NOT NULL,
        engine_version TEXT NOT NULL,
        model TEXT NOT NULL,
        quantization TEXT NOT NULL,
        speculative TEXT NOT NULL,
        image TEXT NOT NULL,
        program TEXT NOT NULL,
        status TEXT NOT NULL,
        failure TEXT NOT NULL,
        gates TEXT NOT NULL,
        PRIMARY KEY (digest, arm))",
        "CREATE TABLE figures (
        digest TEXT NOT NULL REFERENCES bundles(digest),
        arm TEXT NOT NULL,
        figure TEXT NOT NULL,
        value DOUBLE PRECISION NOT NULL,
        lo DOUBLE PRECISION,
        hi DOUBLE PRECISION,
        n BIGINT NOT NULL,
        PRIMARY KEY (digest, arm, figure))",
        "CREATE INDEX figures_by_figure ON figures (figure)",
        "CREATE INDEX bundles_by_start ON bundles (started_at)",
    ],
    &[
        // 2: each arm's own lane (a multi-lane bundle's arms ran on several, docs/history.md);
        // every arm already stored ran on its bundle's one lane.
        "ALTER TABLE arms ADD COLUMN lane TEXT NOT NULL DEFAULT ''",
        "UPDATE arms SET lane = (SELECT b.lane FROM bundles b WHERE b.digest = arms.digest)",
        "CREATE INDEX arms_by_lane ON arms (lane)",
    ],
];

/// The schema version this build writes.
pub const LATEST: i64 = MIGRATIONS.len() as i64;

impl Store {
    /// Opens (creating a SQLite file and its folder when missing) and migrates.
    pub fn open(spec: &DbSpec) -> Result<Store> {
        let mut s = match spec {
            DbSpec::Sqlite(p) => Store::Sqlite(sqlite::open(p)?, p.clone()),
            DbSpec::Postgres(u) => Store::Postgres(Box::new(pg::connect(u)?), u.clone()),
        };
        s.migrate()?;
        Ok(s)
    }

    pub fn describe(&self) -> String {
        match self {
            Store::Sqlite(_, p) => p.display().to_string(),
            Store::Postgres(_, u) => u.clone(),
        }
    }

    /// Runs `f` in one transaction that holds the writers' lock (SQLite `BEGIN IMMEDIATE`,
    /// PostgreSQL an exclusive lock on `bundles`): two campaigns finishing at once queue, never
    /// interleave. An error rolls everything back.
    pub fn write<T>(&mut self, f: impl FnOnce(&mut dyn Sql) -> Result<T>) -> Result<T> {
        match self {
            Store::Sqlite(c, p) => sqlite::write(c, p, f),
            Store::Postgres(c, _) => pg::write(c, f),
        }
    }

    /// A read-only statement outside any write.
    pub fn query(&mut self, sql: &str, params: &[Value]) -> Result<Vec<Row>> {
        match self {
            Store::Sqlite(c, _) => Sql::query(c, sql, params),
            Store::Postgres(c, _) => Sql::query(c.as_mut(), sql, params),
        }
    }

    fn migrate(&mut self) -> Result<()> {
        let place = self.describe();
        self.write(|tx| {
            tx.exec(
                "CREATE TABLE IF NOT EXISTS bakeoff_schema (version BIGINT NOT NULL)",
                &[],
            )?;
            let rows = tx.query("SELECT version FROM bakeoff_schema", &[])?;
            let have = match rows.as_slice() {
                [] => {
                    tx.exec("INSERT INTO bakeoff_schema (version) VALUES (0)", &[])?;
                    0
                }
                [r] => r[0].int().unwrap_or(0),
                _ => bail!("{place}: table bakeoff_schema has {} rows, not one: the database was edited by hand; restore it from a backup", rows.len()),
            };
            if have > LATEST {
                bail!(
                    "{place} has history schema version {have}, newer than this bakeoff's {LATEST} ({}): upgrade bakeoff, or use another --db",
                    crate::VERSION
                );
            }
            for (i, step) in MIGRATIONS.iter().enumerate().skip(have as usize) {
                for stmt in step.iter() {
                    tx.exec(stmt, &[])?;
                }
                tx.exec(
                    "UPDATE bakeoff_schema SET version = ?",
                    &[Value::I(Some(i as i64 + 1))],
                )?;
            }
            Ok(())
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_url_with_a_password_is_refused() {
        assert!(DbSpec::parse("postgres://u:secret@h/db").is_err());
        assert!(DbSpec::parse("postgres://h/db?password=x").is_err());
        assert_eq!(
            DbSpec::parse("postgres://u@h:5432/db").unwrap(),
            DbSpec::Postgres("postgres://u@h:5432/db".into())
        );
        assert_eq!(
            DbSpec::parse("h.sqlite").unwrap(),
            DbSpec::Sqlite("h.sqlite".into())
        );
    }

    /// A store written by a bakeoff before arms had lanes (version 1) is migrated on open: every
    /// arm gets its bundle's lane, its series keep that lane, and opening it again applies
    /// nothing.
    #[test]
    fn a_version_1_store_gets_each_arms_lane_from_its_bundle() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("v1.sqlite");
        {
            let c = rusqlite::Connection::open(&p).unwrap();
            c.execute_batch(
                "CREATE TABLE bakeoff_schema (version BIGINT NOT NULL);
                 INSERT INTO bakeoff_schema (version) VALUES (1);",
            )
            .unwrap();
            for stmt in MIGRATIONS[0] {
                c.execute(stmt, []).unwrap();
            }
            for (d, lane) in [("d1", "127.0.0.1:8000"), ("d2", "10.0.0.5:8000 [GPU-a]")] {
                c.execute(
                    "INSERT INTO bundles (digest, campaign_id, started_at, host, hardware, gpu_model, driver, lane, complete, workload, winner, reason, path, added_at) VALUES (?1, 'c', ?1, 'h', 'hw', 'none', '', ?2, 1, '{}', '', '', '/b', 'now')",
                    [d, lane],
                )
                .unwrap();
                for arm in ["inc", "cand"] {
                    c.execute(
                        "INSERT INTO arms (digest, arm, role, label, recipe, engine, engine_version, model, quantization, speculative, image, program, status, failure, gates) VALUES (?1, ?2, 'candidate', ?2, ?2 || '|reference|m||', 'reference', '', 'm', '', '', '', '', 'completed', '', '')",
                        [d, arm],
                    )
                    .unwrap();
                    c.execute(
                        "INSERT INTO figures (digest, arm, figure, value, lo, hi, n) VALUES (?1, ?2, 'ttft_p50@c1', 50.0, 49.0, 51.0, 8)",
                        [d, arm],
                    )
                    .unwrap();
                }
            }
        }
        let spec = DbSpec::Sqlite(p.clone());
        for _ in 0..2 {
            let mut s = Store::open(&spec).unwrap();
            let v = s.query("SELECT version FROM bakeoff_schema", &[]).unwrap();
            assert_eq!(v.len(), 1);
            assert_eq!(v[0][0].int(), Some(LATEST));
            assert_eq!(LATEST, 2);
            let rows = s
                .query(
                    "SELECT digest, arm, lane FROM arms ORDER BY digest, arm",
                    &[],
                )
                .unwrap();
            let got: Vec<(String, String, String)> = rows
                .iter()
                .map(|r| (r[0].str(), r[1].str(), r[2].str()))
                .collect();
            let want = [
                ("d1", "cand", "127.0.0.1:8000"),
                ("d1", "inc", "127.0.0.1:8000"),
                ("d2", "cand", "10.0.0.5:8000 [GPU-a]"),
                ("d2", "inc", "10.0.0.5:8000 [GPU-a]"),
            ]
            .map(|(a, b, c)| (a.to_string(), b.to_string(), c.to_string()));
            assert_eq!(got, want);
            let f = super::super::series::Filter {
                lane: Some("10.0.0.5:8000 [GPU-a]".into()),
                ..Default::default()
            };
            let series = super::super::series::read(&mut s, &f).unwrap();
            assert_eq!(series.len(), 2, "{series:?}");
            assert!(series
                .iter()
                .all(|x| x.key.lane == "10.0.0.5:8000 [GPU-a]" && x.points.len() == 1));
        }
    }

    #[test]
    fn placeholders_are_numbered_for_postgres() {
        assert_eq!(
            super::super::sql::numbered("SELECT a FROM t WHERE b = ? AND c = ?"),
            "SELECT a FROM t WHERE b = $1 AND c = $2"
        );
    }
}
