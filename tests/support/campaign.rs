//! Test support for `bakeoff run`: reference-engine campaigns in a temp dir, a detached incumbent
//! on the lane port, and bundle checks.
#![allow(dead_code)]

use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

#[allow(unused_imports)] // re-exported for its users; a binary may not use them all
pub use super::{free_port, text, BIN};

/// A campaign directory: `campaign.toml`, profiles `<name>.toml`, the bundle at `out/`.
pub struct Camp {
    pub dir: tempfile::TempDir,
    pub port: u16,
}

impl Camp {
    pub fn new() -> Camp {
        Camp {
            dir: tempfile::tempdir().unwrap(),
            port: free_port(),
        }
    }

    pub fn path(&self, p: &str) -> PathBuf {
        self.dir.path().join(p)
    }

    pub fn profile(&self, name: &str, body: &str) {
        std::fs::write(
            self.path(&format!("{name}.toml")),
            format!("model = \"{name}\"\n{body}\n"),
        )
        .unwrap();
    }

    pub fn bundle(&self) -> PathBuf {
        self.path("out")
    }

    /// The `[campaign]` (bundle at `out/`) and `[lane]` tables of a campaign on this lane;
    /// `lane_extra` goes after `[lane]`'s keys (e.g. `ready_timeout_s = 2` overrides the 20).
    pub fn head(&self, id: &str, lane_extra: &str) -> String {
        format!(
            r#"[campaign]
id = "{id}"
output = "out"

[lane]
host = "127.0.0.1"
port = {port}
ready_timeout_s = 20
stop_grace_s = 2
{lane_extra}
"#,
            port = self.port
        )
    }

    /// A campaign: `arms` are (id, profile name) with the first the incumbent; `extra` goes
    /// after `[lane]`'s keys (e.g. `ready_timeout_s = 2`).
    pub fn write(&self, arms: &[(&str, &str)], lane_extra: &str, tail: &str) -> PathBuf {
        let mut s = self.head("test-campaign", lane_extra);
        s.push_str(
            r#"
[workload]
ranking_priority = ["ttft", "decode_tokens_per_second"]
matched_prompt_tokens = 64
max_tokens = 8
warm_repetitions = 2
concurrency = [1, 2]
long_context_targets = { full = 600 }

[gates]
preflight = ["smoke", "json", "streaming"]
[gates.tools]
batch = 2
variants = ["plain", "streaming"]
[gates.retrieval]
needles = 1
max_tokens = 16

[policy]
required_gates = ["smoke", "json", "streaming", "tools", "retrieval", "restoration"]
[[policy.quality_risks]]
pattern = "simulated crash"
limitation = "crashed"
"#,
        );
        for (i, (id, prof)) in arms.iter().enumerate() {
            let role = if i == 0 { "incumbent" } else { "candidate" };
            s.push_str(&reference_arm(
                id,
                role,
                prof,
                "long_context_profile = \"full\"\n",
            ));
        }
        s.push_str(tail);
        let p = self.path("campaign.toml");
        std::fs::write(&p, s).unwrap();
        p
    }

    /// A campaign whose arms each run a profile of their own name: `arms` are (id, profile body),
    /// the first the incumbent; no extra `[lane]` keys, nothing after the arms.
    pub fn write_profiled(&self, arms: &[(&str, &str)]) -> PathBuf {
        for (id, body) in arms {
            self.profile(id, body);
        }
        let ids: Vec<(&str, &str)> = arms.iter().map(|(id, _)| (*id, *id)).collect();
        self.write(&ids, "", "")
    }

    /// Starts the incumbent as the campaign's recipe would (own process group), waits for it.
    pub fn start_incumbent(&self, profile: &str) -> Child {
        let prof = self.path(&format!("{profile}.toml"));
        let child = Command::new(BIN)
            .args(["engine", "--profile"])
            .arg(&prof)
            .args(["--host", "127.0.0.1", "--port", &self.port.to_string()])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .process_group(0)
            .spawn()
            .unwrap();
        wait_serving(self.port, Duration::from_secs(20));
        child
    }
}

/// One `[[arms]]` table of a reference-engine arm (model `m`) running `<profile>.toml`; `extra`
/// lines go before `[arms.reference]`.
pub fn reference_arm(id: &str, role: &str, profile: &str, extra: &str) -> String {
    format!(
        "\n[[arms]]\nid = \"{id}\"\nrole = \"{role}\"\nengine = \"reference\"\nmodel = \"m\"\n{extra}[arms.reference]\nprofile = \"{profile}.toml\"\n"
    )
}

/// Waits until `GET /health` on the port answers 200.
pub fn wait_serving(port: u16, limit: Duration) {
    let t = Instant::now();
    while t.elapsed() < limit {
        if let Some((200, _)) = http_get(port, "/health") {
            return;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    panic!("nothing serves port {port} after {limit:?}");
}

pub fn http_get(port: u16, path: &str) -> Option<(u16, String)> {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n"
    )
    .ok()?;
    let mut buf = String::new();
    s.read_to_string(&mut buf).ok()?;
    let code = buf.split_whitespace().nth(1)?.parse().ok()?;
    let body = buf.split_once("\r\n\r\n").map(|x| x.1.to_string())?;
    Some((code, body))
}

/// Runs `bakeoff run ARGS --no-progress`.
pub fn run(args: &[&str]) -> Output {
    Command::new(BIN)
        .arg("run")
        .args(args)
        .arg("--no-progress")
        .output()
        .unwrap()
}

pub fn json(p: &Path) -> serde_json::Value {
    serde_json::from_slice(&std::fs::read(p).unwrap_or_else(|e| panic!("{}: {e}", p.display())))
        .unwrap()
}

/// `bakeoff verify BUNDLE --json` passes (its document validates against its schema).
pub fn verify(bundle: &Path) {
    let o = Command::new(BIN)
        .arg("verify")
        .arg(bundle)
        .arg("--json")
        .output()
        .unwrap();
    assert!(o.status.success(), "verify failed: {}", text(&o));
    let d = super::json_doc::doc(&o);
    assert_eq!(d["ok"], true, "{d:#}");
    assert!(d["files_checked"].as_u64().unwrap() > 0, "{d:#}");
}

/// The pid serving the port (via /proc), if any.
pub fn listener_model(port: u16) -> Option<String> {
    let (code, body) = http_get(port, "/v1/models")?;
    if code != 200 {
        return None;
    }
    let v: serde_json::Value = serde_json::from_str(&body).ok()?;
    v["data"][0]["id"].as_str().map(str::to_string)
}

/// Kills whatever bakeoff restored on the lane (its pid from restoration-launch.json, and any
/// process still listening on the lane port: a resumed run restores more than once) and reaps the
/// test's own incumbent child.
pub fn cleanup(bundle: &Path, mut child: Option<Child>, port: u16) {
    for l in bakeoff::lane::procnet::find_listeners(port) {
        // SAFETY: signals the process (group) serving this test's own lane port.
        unsafe {
            // Only a group the listener leads, never the test runner's own.
            if l.pgid == Some(l.pid) && l.pid as i32 != libc::getpgrp() {
                libc::kill(-(l.pid as i32), libc::SIGKILL);
            }
            libc::kill(l.pid as i32, libc::SIGKILL);
        }
    }
    if let Ok(b) = std::fs::read(bundle.join("restoration-launch.json")) {
        let v: serde_json::Value = serde_json::from_slice(&b).unwrap_or_default();
        let pid = v["pid"].as_u64().or_else(|| v["process"]["pid"].as_u64());
        if let Some(pid) = pid {
            // SAFETY: signals a process group this test's campaign started.
            unsafe {
                libc::kill(-(pid as i32), libc::SIGKILL);
                libc::kill(pid as i32, libc::SIGKILL);
            }
        }
    }
    if let Some(c) = child.as_mut() {
        let _ = c.kill();
        let _ = c.wait();
    }
}

pub fn pid_alive(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Err(_) => false,
        Ok(s) => {
            let st = s
                .rfind(')')
                .map(|i| s[i + 2..].chars().next().unwrap_or('X'));
            !matches!(st, Some('Z') | Some('X'))
        }
    }
}

/// The arm `id` in a campaign-result.json.
pub fn arm<'a>(r: &'a serde_json::Value, id: &str) -> &'a serde_json::Value {
    r["arms"]
        .as_array()
        .unwrap()
        .iter()
        .find(|a| a["id"] == id)
        .unwrap_or_else(|| panic!("no arm {id} in the result: {r:#}"))
}

/// `bakeoff ARGS` with the lane lock directory `locks`, no test pause, stdin closed, stdout and
/// stderr piped (spawn it, or take its output).
pub fn bakeoff_command(locks: &Path, args: &[&str]) -> Command {
    let mut c = Command::new(BIN);
    c.args(args)
        .env("BAKEOFF_LOCK_DIR", locks)
        .env_remove("BAKEOFF_TEST_PAUSE_AT")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    c
}

/// `bakeoff run ARGS --no-progress` with the lane lock directory `locks`, stdin closed, stdout and
/// stderr piped (spawn it, or take its output). A `BAKEOFF_TEST_PAUSE_AT` the caller set stays.
pub fn run_command(locks: &Path, args: &[&str]) -> Command {
    let mut c = Command::new(BIN);
    c.arg("run")
        .args(args)
        .arg("--no-progress")
        .env("BAKEOFF_LOCK_DIR", locks)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    c
}

/// Waits until the file `p` exists.
pub fn wait_for_file(p: &Path, limit: Duration) {
    let t = Instant::now();
    while !p.exists() {
        assert!(t.elapsed() < limit, "{} never appeared", p.display());
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// A `bakeoff run` in progress on a campaign whose incumbent the test started: the fault tests
/// start one, act on the lane or the disk while it runs, then check how it ended.
pub struct LiveRun {
    child: Option<Child>,
    incumbent: Option<Child>,
    pub bundle: PathBuf,
    pub locks: PathBuf,
    port: u16,
}

/// How a `bakeoff run` ended.
pub struct Ended {
    pub out: Output,
    /// Its stderr, as text.
    pub err: String,
}

impl Ended {
    /// Asserts the exit code.
    pub fn code(&self, code: i32) -> &Ended {
        assert_eq!(self.out.status.code(), Some(code), "{}", text(&self.out));
        self
    }
}

impl Camp {
    /// Starts the incumbent from its profile `incumbent`, runs `bakeoff run FILE` to its end,
    /// stops what the run left on the lane, and checks that the run succeeded: its bundle.
    pub fn run_ok(&self, incumbent: &str, file: &Path) -> PathBuf {
        self.run_ok_text(incumbent, file).0
    }

    /// [`Camp::run_ok`], with the run's stdout and stderr.
    pub fn run_ok_text(&self, incumbent: &str, file: &Path) -> (PathBuf, String) {
        let inc = self.start_incumbent(incumbent);
        let o = run(&[file.to_str().unwrap()]);
        let b = self.bundle();
        cleanup(&b, Some(inc), self.port);
        assert!(o.status.success(), "{}", text(&o));
        (b, text(&o))
    }
}

impl Camp {
    /// Starts the incumbent from its profile `incumbent`, then spawns `bakeoff run FILE` with the
    /// lock directory `locks/` and the bundle at `output` (the campaign's `out/` when `None`).
    pub fn spawn_run(&self, incumbent: &str, file: &Path, output: Option<&Path>) -> LiveRun {
        self.spawn_run_env(incumbent, file, output, &[])
    }

    /// [`Camp::spawn_run`] with extra environment variables for bakeoff (e.g. the test-only
    /// pause `BAKEOFF_TEST_PAUSE_AT`).
    pub fn spawn_run_env(
        &self,
        incumbent: &str,
        file: &Path,
        output: Option<&Path>,
        env: &[(&str, String)],
    ) -> LiveRun {
        let inc = self.start_incumbent(incumbent);
        let locks = self.path("locks");
        let bundle = output.map_or_else(|| self.bundle(), Path::to_path_buf);
        // Every spawned run prints its `--json` document; [`LiveRun::end`] validates it.
        let mut args = vec![file.to_str().unwrap(), "--json"];
        if let Some(o) = output {
            args.extend(["--output", o.to_str().unwrap()]);
        }
        let mut cmd = run_command(&locks, &args);
        for (k, v) in env {
            cmd.env(k, v);
        }
        let child = cmd.spawn().unwrap();
        LiveRun {
            child: Some(child),
            incumbent: Some(inc),
            bundle,
            locks,
            port: self.port,
        }
    }
}

impl LiveRun {
    /// The running bakeoff's pid.
    pub fn pid(&self) -> u32 {
        self.child.as_ref().expect("the run already ended").id()
    }

    /// Waits until the bundle file `name` exists.
    pub fn wait_for(&self, name: &str, limit: Duration) {
        wait_for_file(&self.bundle.join(name), limit);
    }

    /// Waits for the run to end, then reaps the incumbent the test started (the run stopped it:
    /// every fault test acts after the incumbent's stop).
    pub fn end(&mut self) -> Ended {
        let out = self
            .child
            .take()
            .expect("the run already ended")
            .wait_with_output()
            .unwrap();
        if let Some(mut c) = self.incumbent.take() {
            reap_stopped(&mut c);
        }
        // A run that ended by itself (not killed) printed one document: its schema holds, its
        // `exit_code` is the exit status.
        if out.status.code().is_some() {
            super::json_doc::doc(&out);
        }
        let err = String::from_utf8_lossy(&out.stderr).to_string();
        Ended { out, err }
    }

    /// Ends the run, asserts its exit code and reads its campaign-result.json.
    pub fn end_with(&mut self, code: i32) -> (Ended, serde_json::Value) {
        let e = self.end();
        let p = self.bundle.join("campaign-result.json");
        let r = std::fs::read(&p)
            .ok()
            .and_then(|b| serde_json::from_slice::<serde_json::Value>(&b).ok());
        assert_eq!(
            e.out.status.code(),
            Some(code),
            "{}\n{}",
            text(&e.out),
            r.as_ref()
                .map_or_else(|| "no result".into(), |r| format!("{r:#}"))
        );
        let r = r.unwrap_or_else(|| panic!("{}: missing or not JSON", p.display()));
        (e, r)
    }

    /// `cleanup` of the lane (whatever bakeoff restored) and of the incumbent if not yet reaped.
    pub fn cleanup(mut self) {
        cleanup(&self.bundle, self.incumbent.take(), self.port);
    }
}

/// Reaps a child the run stopped; one still running 30 s after the run ended was never stopped:
/// killed, and the test fails.
fn reap_stopped(c: &mut Child) {
    let t = Instant::now();
    while c.try_wait().unwrap().is_none() {
        if t.elapsed() > Duration::from_secs(30) {
            let _ = c.kill();
            let _ = c.wait();
            panic!(
                "the incumbent (pid {}) still ran after the run ended",
                c.id()
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// A valid campaign of one process arm (`/bin/sleep`: these campaigns are loaded, never run); the
/// validation tests change one thing in it at a time.
pub const ONE_ARM_CAMPAIGN: &str = r#"[campaign]
id = "validation-test"

[lane]
port = 18998

[workload]
ranking_priority = ["ttft"]
matched_prompt_tokens = 100
max_tokens = 10
warm_repetitions = 2
concurrency = [1, 2]

[[arms]]
id = "inc"
role = "incumbent"
engine = "llama.cpp"
model = "m"
served_model = "m-served"
served_context = 4096
[arms.process]
argv = ["/bin/sleep", "1000"]
"#;

/// A campaign text written to `campaign.toml` in a temp dir of its own (removed on drop).
pub struct CampaignFile {
    _dir: tempfile::TempDir,
    pub path: PathBuf,
    pub text: String,
}

pub fn campaign_file(text: &str) -> CampaignFile {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("campaign.toml");
    std::fs::write(&path, text).expect("write campaign");
    CampaignFile {
        _dir: dir,
        path,
        text: text.to_string(),
    }
}

/// 1-based number of the `nth` (0-based) line of `text` containing `needle`.
pub fn line_of(text: &str, needle: &str, nth: usize) -> usize {
    text.lines()
        .enumerate()
        .filter(|(_, l)| l.contains(needle))
        .nth(nth)
        .unwrap_or_else(|| panic!("{needle:?} (#{nth}) not in the campaign text"))
        .0
        + 1
}

impl CampaignFile {
    /// Loads the file: `None` when it loads, else its error, checked to be exactly one
    /// diagnostic on one line.
    pub fn load_error(&self) -> Option<String> {
        let err = bakeoff::campaign::load(&self.path).err()?;
        let msg = err.to_string();
        assert_eq!(err.diagnostics.len(), 1, "expected one error, got:\n{msg}");
        assert!(!msg.contains('\n'), "not one line: {msg}");
        Some(msg)
    }
}

/// Loads `text`, expects exactly one error, checks it is one line `FILE:LINE: FIELD: problem; fix`
/// with LINE the `nth` (0-based) line holding `needle`; returns the file (still on disk) and the
/// error line.
pub fn one_error_in_file(
    text: &str,
    (needle, nth): (&str, usize),
    field: &str,
) -> (CampaignFile, String) {
    let f = campaign_file(text);
    let msg = f
        .load_error()
        .unwrap_or_else(|| panic!("expected an error for field {field}, got none"));
    let line = line_of(&f.text, needle, nth);
    let want = format!("{}:{line}: {field}: ", f.path.display());
    assert!(msg.starts_with(&want), "want prefix {want:?}\n got {msg:?}");
    assert!(msg.contains("; "), "no fix after `; `: {msg}");
    (f, msg)
}

/// `one_error_in_file`, for a test that needs only the error line.
pub fn one_error(text: &str, needle: (&str, usize), field: &str) -> String {
    one_error_in_file(text, needle, field).1
}

/// The `[workload]`, `[gates]` and `[policy]` tables of a small reference-engine campaign: the
/// smoke gate only, restoration required, a few requests per arm. For tests that need a campaign
/// to run in seconds (promotion, history, open-loop and workload-source tests).
pub struct Small<'a> {
    /// The body of `ranking_priority = [...]`.
    pub ranking: &'a str,
    pub prompt: u32,
    pub max_tokens: u32,
    pub reps: u32,
    /// The body of `concurrency = [...]`.
    pub concurrency: &'a str,
    /// Lines inside `[workload]`, after the keys above.
    pub workload: &'a str,
    /// `[workload.sampling] ignore_eos = true`.
    pub ignore_eos: bool,
    /// Further tables (`[workload.open_loop]`, `[promotion]`, `[history]`, ...).
    pub tables: &'a str,
}

impl Default for Small<'_> {
    fn default() -> Self {
        Small {
            ranking: r#""ttft", "decode_tokens_per_second""#,
            prompt: 64,
            max_tokens: 8,
            reps: 3,
            concurrency: "1",
            workload: "",
            ignore_eos: false,
            tables: "",
        }
    }
}

impl Small<'_> {
    pub fn toml(&self) -> String {
        let sampling = if self.ignore_eos {
            "[workload.sampling]\nignore_eos = true\n"
        } else {
            ""
        };
        format!(
            r#"
[workload]
ranking_priority = [{}]
matched_prompt_tokens = {}
max_tokens = {}
warm_repetitions = {}
concurrency = [{}]
{}
{sampling}{}
[gates]
preflight = ["smoke"]

[policy]
required_gates = ["smoke", "restoration"]
"#,
            self.ranking,
            self.prompt,
            self.max_tokens,
            self.reps,
            self.concurrency,
            self.workload,
            self.tables
        )
    }
}

impl Camp {
    /// `campaign.toml` from [`Camp::head`], `small` and a reference arm per `(id, role)` (each
    /// with the profile of its own name).
    pub fn write_small(&self, id: &str, small: &Small, arms: &[(&str, &str)]) -> PathBuf {
        let mut s = self.head(id, "");
        s.push_str(&small.toml());
        for (arm, role) in arms {
            s.push_str(&reference_arm(arm, role, arm, ""));
        }
        let p = self.path("campaign.toml");
        std::fs::write(&p, s).unwrap();
        p
    }
}

/// The `[promotion]` table of the promotion tests: a short bake at a rate a 2-core machine keeps,
/// thresholds loose enough that a CI machine's noise never fails a clean interval (a degrading
/// winner's fault adds 300 ms to every TTFT, far beyond them).
pub const PROMOTION: &str = r#"
[promotion]
bake_s = 1.5
interval_s = 0.5
rate = 30
min_requests = 4
failure_limit = 1
ttft_p95_within_pct = 400
decode_tok_s_within_pct = 90
error_budget_pct = 0
"#;

/// A promotion test's profiles: the incumbent, a clean winner, and a winner fast in the bake-off
/// (it serves fewer than 25 requests there) that is 300 ms slower from request 25 on.
pub const PROMO_INC: &str = "ttft_ms = 30\ndecode_tok_s = 400\ncontext_tokens = 4096";
pub const PROMO_WIN: &str = "ttft_ms = 5\ndecode_tok_s = 400\ncontext_tokens = 4096";
pub const PROMO_SLOWWIN: &str =
    "ttft_ms = 12\ndecode_tok_s = 400\ncontext_tokens = 4096\nslow_after_requests = 25\nslow_ttft_ms = 300";
