//! Test support: run the reference engine and `bakeoff bench` as real processes.
#![allow(dead_code)]

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};

#[allow(unused_imports)] // re-exported for its users; a binary may not use them all
pub use super::{text, BIN};

/// A `bakeoff engine` child process, killed on drop.
pub struct Engine {
    child: Child,
    pub url: String,
    pub dir: tempfile::TempDir,
}

impl Engine {
    /// Starts the engine with one profile given as TOML text.
    pub fn start(profile_toml: &str) -> Engine {
        Engine::start_many(&[profile_toml])
    }

    pub fn start_many(profiles: &[&str]) -> Engine {
        let dir = tempfile::tempdir().unwrap();
        let mut cmd = Command::new(BIN);
        cmd.args(["engine", "--port", "0"]);
        for (i, p) in profiles.iter().enumerate() {
            let path = dir.path().join(format!("p{i}.toml"));
            std::fs::write(&path, p).unwrap();
            cmd.arg("--profile").arg(path);
        }
        let mut child = cmd
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        let url = line
            .trim()
            .rsplit_once(' ')
            .map(|(_, u)| u.to_string())
            .unwrap_or_else(|| panic!("engine did not print its address: {line:?}"));
        assert!(url.starts_with("http://"), "{line}");
        Engine { child, url, dir }
    }

    pub fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }
}

impl Drop for Engine {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Runs `bakeoff bench URL args... --json OUT --no-progress`; returns the process output and the
/// parsed summary (None when the run wrote none).
pub fn bench(url: &str, args: &[&str], out: &Path) -> (Output, Option<serde_json::Value>) {
    let o = Command::new(BIN)
        .arg("bench")
        .arg(url)
        .args(args)
        .arg("--json")
        .arg(out)
        .arg("--no-progress")
        .output()
        .unwrap();
    let v = std::fs::read(out)
        .ok()
        .map(|b| serde_json::from_slice(&b).unwrap());
    (o, v)
}

pub fn metric(v: &serde_json::Value, name: &str, stat: &str) -> f64 {
    v["metrics"][name][stat]
        .as_f64()
        .unwrap_or_else(|| panic!("no metrics.{name}.{stat} in {v}"))
}

/// Timing-sensitive tests run one at a time: the binary's one lock (`super::exclusive`).
#[allow(unused_imports)] // re-exported for its users; a binary may not use them all
pub use super::exclusive as serial;
