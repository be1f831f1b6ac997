//! `bakeoff lane status [PORT] [--host HOST]`: what the lane record says serves each lane (or one
//! lane): the resident recipe, its fingerprint, since when, set by which campaign or promotion,
//! and a failed rollback's mark with the commands that restart the incumbent.
//!
//! Exit codes: 0; 4 when a lane shown is marked rollback-failed (the same code as the promotion
//! whose rollback failed).

use crate::lane::lock::lock_dir;
use crate::lane::resident::{self, LaneRecord, LaneState};
use anyhow::Result;
use clap::{Args, Subcommand};

#[derive(Args, Debug)]
pub struct LaneArgs {
    #[command(subcommand)]
    pub command: LaneCommand,
}

#[derive(Subcommand, Debug)]
pub enum LaneCommand {
    /// Print what serves the lane(s), as bakeoff last proved it.
    Status(StatusArgs),
}

#[derive(Args, Debug)]
pub struct StatusArgs {
    /// The lane port (default: every lane with a record).
    pub port: Option<u16>,
    /// The lane host.
    #[arg(long, default_value = "127.0.0.1")]
    pub host: String,
    /// Print one JSON document (`bakeoff.lane-status/1`, docs/agents.md) on stdout instead of
    /// the lines.
    #[arg(long)]
    pub json: bool,
}

pub fn run(a: LaneArgs) -> Result<()> {
    match a.command {
        LaneCommand::Status(s) => {
            let out = super::JsonOut::new("lane status", s.json);
            out.end(status(s, &out))
        }
    }
}

fn status(a: StatusArgs, out: &super::JsonOut) -> Result<()> {
    let dir = lock_dir();
    let records: Vec<LaneRecord> = match a.port {
        Some(p) => resident::read(&a.host, p)
            .map_err(anyhow::Error::msg)?
            .into_iter()
            .collect(),
        None => {
            let mut v = Vec::new();
            for e in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
                let n = e.file_name().to_string_lossy().into_owned();
                if n.ends_with(".record.json") {
                    if let Ok(r) = serde_json::from_slice::<LaneRecord>(
                        &std::fs::read(e.path()).unwrap_or_default(),
                    ) {
                        v.push(r);
                    }
                }
            }
            v.sort_by_key(|r| (r.host.clone(), r.port));
            v
        }
    };
    if out.on() {
        let lanes = records
            .iter()
            .map(|r| crate::output::lane::LaneEntry {
                record: serde_json::to_value(r).unwrap_or_default(),
                process_alive: r.resident.process.as_ref().map(|_| r.process_alive()),
                summary: r.summary(),
                marked: r.state == LaneState::RollbackFailed,
            })
            .collect();
        let doc = crate::output::lane::LaneStatusDoc::new(dir.display().to_string(), lanes);
        out.emit(&doc)?;
        return match doc.exit_code {
            0 => Ok(()),
            code => Err(super::Exit::silent(code).into()),
        };
    }
    if records.is_empty() {
        println!(
            "no lane record{} in {} (a record is written when a campaign restores its incumbent or a promotion ends)",
            a.port.map(|p| format!(" for {}:{p}", a.host)).unwrap_or_default(),
            dir.display()
        );
        return Ok(());
    }
    let mut marked = false;
    for r in &records {
        print(r);
        marked |= r.state == LaneState::RollbackFailed;
    }
    if marked {
        return Err(super::Exit::silent(super::promote::ROLLBACK_FAILED).into());
    }
    Ok(())
}

fn print(r: &LaneRecord) {
    println!("lane {}:{}", r.host, r.port);
    println!(
        "  state: {}",
        match r.state {
            LaneState::Serving => "serving",
            LaneState::RollbackFailed =>
                "ROLLBACK FAILED (unresolved: runs and promotions on this lane are refused)",
        }
    );
    let x = &r.resident;
    println!(
        "  resident: `{}` (model {}, {} recipe)",
        x.arm, x.served_model, x.kind
    );
    println!(
        "  recipe hash: {}; argv/env hash: {}",
        x.recipe_hash, x.argv_env_hash
    );
    let files = x.fingerprint["files"]
        .as_array()
        .map(|f| f.len())
        .unwrap_or(0);
    println!("  fingerprint: {files} file(s) digested");
    match &x.process {
        Some(p) => println!(
            "  process: pid {} ({})",
            p.pid,
            if r.process_alive() {
                "running"
            } else {
                "no longer running: this record says what served then"
            }
        ),
        None => println!("  process: none recorded"),
    }
    println!("  since: {}", r.since);
    println!(
        "  set by: {} `{}` ({})",
        r.set_by.kind,
        r.set_by.id,
        r.set_by.dir.display()
    );
    if r.state == LaneState::RollbackFailed {
        println!("  why: {}", r.detail);
        for c in &r.restart {
            println!("  restart the incumbent by hand: {c}");
        }
        println!(
            "  resolve: once it serves, `bakeoff recover {}` proves it (identity + preflight) and clears the mark",
            r.set_by.dir.display()
        );
    }
    if let Some(p) = &r.previous {
        println!("  before: {p}");
    }
}
