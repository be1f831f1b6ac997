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

/// The reference profile the bench tests share: TTFT 50 ms, no prefill cost, decode at 80 tok/s
/// (12.5 ms a token), an 8k context.
pub const BENCH_PROFILE: &str =
    "model = \"ref\"\nttft_ms = 50\nprefill_tok_s = 0\ndecode_tok_s = 80\ncontext_tokens = 8192\n";

/// A `bakeoff bench` run that succeeded: its output, its `--json` summary and, when asked for,
/// its `--requests-jsonl` lines.
pub struct Benched {
    pub out: Output,
    pub v: serde_json::Value,
    pub lines: Vec<serde_json::Value>,
}

impl Benched {
    pub fn stdout(&self) -> String {
        String::from_utf8_lossy(&self.out.stdout).into_owned()
    }
}

impl Engine {
    /// Runs `bakeoff bench` against this engine with `args` and `--json NAME.json` in its
    /// folder; asserts it succeeded and wrote its summary.
    pub fn bench_ok(&self, name: &str, args: &[&str]) -> Benched {
        let (out, v) = bench(&self.url, args, &self.path(&format!("{name}.json")));
        assert!(out.status.success(), "{}", text(&out));
        let v = v.expect("a successful run writes its summary");
        Benched {
            out,
            v,
            lines: Vec::new(),
        }
    }

    /// [`Engine::bench_ok`] with `--requests-jsonl NAME.jsonl`: the lines come back too.
    pub fn bench_ok_jsonl(&self, name: &str, args: &[&str]) -> Benched {
        let jl = self.path(&format!("{name}.jsonl"));
        let mut all = args.to_vec();
        all.extend(["--requests-jsonl", jl.to_str().unwrap()]);
        let mut b = self.bench_ok(name, &all);
        b.lines = jsonl(&jl);
        b
    }
}

/// Runs `bakeoff bench ARGS` on a fresh engine with [`BENCH_PROFILE`] and `profile_extra`, alone
/// (the timing lock); asserts it succeeded and returns its summary.
pub fn bench_profile(profile_extra: &str, args: &[&str]) -> serde_json::Value {
    let _g = serial();
    let e = Engine::start(&format!("{BENCH_PROFILE}{profile_extra}"));
    e.bench_ok("bench", args).v
}

/// A command line's words, split on white space: `words("--requests 6 --max-tokens 4")`.
pub fn words(s: &str) -> Vec<&str> {
    s.split_whitespace().collect()
}

/// The JSON lines of a file.
pub fn jsonl(path: &Path) -> Vec<serde_json::Value> {
    std::fs::read_to_string(path)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect()
}

pub fn metric(v: &serde_json::Value, name: &str, stat: &str) -> f64 {
    v["metrics"][name][stat]
        .as_f64()
        .unwrap_or_else(|| panic!("no metrics.{name}.{stat} in {v}"))
}

/// Timing-sensitive tests run one at a time: the binary's one lock (`super::exclusive`).
#[allow(unused_imports)] // re-exported for its users; a binary may not use them all
pub use super::exclusive as serial;
