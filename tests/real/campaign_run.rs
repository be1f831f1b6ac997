//! `bakeoff run examples/campaigns/real-cpu.toml` on real llama.cpp servers (CPU): the incumbent
//! is started by the test first (as an operator would: detached, its own process group, on the lane
//! port), stopped and restored by bakeoff, and nothing else the campaign started stays running.
//!
//! The example runs on port 18080 from the repository root; the test runs a copy of it on a free
//! port with the engine paths of `engines.env` (absolute), so it also works with
//! `BAKEOFF_ENGINE_DIR` and next to other tests, and without the example's llama-server arm
//! (below). About 2 minutes on 2 CPU cores.

use crate::support::campaign;
use crate::support::real_engine;

use campaign::*;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// `s` with every `from` replaced, asserting there was one (the example must keep its shape).
fn subst(s: &str, from: &str, to: &str) -> String {
    assert!(
        s.contains(from),
        "examples/campaigns/real-cpu.toml no longer contains {from}"
    );
    s.replace(from, to)
}

/// `s` without the `[[arms]]` table whose id is `id` (up to the next `[[arms]]` or the end).
fn drop_arm(s: &str, id: &str) -> String {
    let head = format!("[[arms]]\nid = {id:?}\n");
    let start = s
        .find(&head)
        .unwrap_or_else(|| panic!("examples/campaigns/real-cpu.toml has no arm {id}"));
    let end = s[start + head.len()..]
        .find("[[arms]]")
        .map_or(s.len(), |i| start + head.len() + i);
    format!("{}{}", &s[..start], &s[end..])
}

/// The process serving `port` on 127.0.0.1 (its pid, from /proc/net/tcp and the fds in /proc).
fn listener_pid(port: u16) -> Option<u32> {
    let mut inodes = Vec::new();
    for t in ["/proc/net/tcp", "/proc/net/tcp6"] {
        for line in std::fs::read_to_string(t)
            .unwrap_or_default()
            .lines()
            .skip(1)
        {
            let f: Vec<&str> = line.split_whitespace().collect();
            let (Some(local), Some(state), Some(inode)) = (f.get(1), f.get(3), f.get(9)) else {
                continue;
            };
            let p = local.rsplit(':').next().unwrap_or("");
            if *state == "0A" && u16::from_str_radix(p, 16).ok() == Some(port) {
                inodes.push(format!("socket:[{inode}]"));
            }
        }
    }
    for e in std::fs::read_dir("/proc").ok()?.flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|n| n.parse::<u32>().ok()) else {
            continue;
        };
        let Ok(fds) = std::fs::read_dir(e.path().join("fd")) else {
            continue;
        };
        for fd in fds.flatten() {
            if let Ok(l) = std::fs::read_link(fd.path()) {
                if inodes.iter().any(|i| Path::new(i) == l) {
                    return Some(pid);
                }
            }
        }
    }
    None
}

fn kill_group(pid: u32) {
    // SAFETY: signals a process (group) this test or its campaign started.
    unsafe {
        libc::kill(-(pid as i32), libc::SIGKILL);
        libc::kill(pid as i32, libc::SIGKILL);
    }
}

#[test]
fn real_cpu_campaign_restores_the_incumbent_and_verifies() {
    let _g = crate::support::exclusive(); // one real server at a time
    let env = real_engine::engines_env(); // panics with the setup command when engines are missing
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let out = tempfile::tempdir().unwrap();
    let bundle = out.path().join("bundle");
    let port = free_port();
    let ps = port.to_string();

    // The example, on the test's port, with absolute paths (cwd, suite, engines).
    let mut s = std::fs::read_to_string(root.join("examples/campaigns/real-cpu.toml")).unwrap();
    s = subst(&s, "port = 18080", &format!("port = {port}"));
    s = subst(&s, "\"18080\"", &format!("\"{port}\""));
    s = subst(
        &s,
        "cwd = \"../..\"",
        &format!("cwd = {:?}", root.display().to_string()),
    );
    s = subst(
        &s,
        "\"../../suites/tools-fewshot.toml\"",
        &format!(
            "{:?}",
            root.join("suites/tools-fewshot.toml").display().to_string()
        ),
    );
    s = subst(
        &s,
        "output = \"../../target/campaigns/real-cpu-smollm2\"",
        &format!("output = {:?}", bundle.display().to_string()),
    );
    for (rel, key) in [
        ("target/engines/venv/bin/python", "XLLAMACPP_PYTHON"),
        ("scripts/xserve.py", "XSERVE"),
        (
            "target/engines/smollm2/SmolLM2-135M-Instruct.Q4_1.gguf",
            "SMOLLM2_GGUF",
        ),
        ("scripts/chatml-tools.jinja", "CHATML_TOOLS_TEMPLATE"),
        ("target/engines/llama-server/llama-server", "LLAMA_SERVER"),
    ] {
        s = subst(&s, &format!("\"{rel}\""), &format!("{:?}", env[key]));
    }
    // One tools variant: the streaming one doubles the grammar-constrained requests on 2 CPU
    // cores, and tests/real/gate.rs checks it on its own.
    s = subst(
        &s,
        "variants = [\"plain\", \"streaming\"]",
        "variants = [\"plain\"]",
    );
    // Two arms: the incumbent and the template-less candidate prove the stop, the gates'
    // failure class, the restoration and verify; the llama-server arm (about a third of the
    // test's time) is measured by tests/real/gate.rs and tests/real/bench.rs.
    s = drop_arm(&s, "llama-server-np2");
    let file = out.path().join("real-cpu.toml");
    std::fs::write(&file, &s).unwrap();

    // The incumbent, exactly as its recipe (the first arm) starts it, before bakeoff runs.
    let inc_argv: Vec<String> = vec![
        env["XSERVE"].clone(),
        "--model".into(),
        env["SMOLLM2_GGUF"].clone(),
        "--host".into(),
        "127.0.0.1".into(),
        "--port".into(),
        ps.clone(),
        "--ctx".into(),
        "8192".into(),
        "--parallel".into(),
        "2".into(),
        "--threads".into(),
        "2".into(),
        "--alias".into(),
        "smollm2-135m".into(),
        "--chat-template-file".into(),
        env["CHATML_TOOLS_TEMPLATE"].clone(),
        "--metrics".into(),
    ];
    assert!(
        s.contains(&format!(
            "argv = [\n  {:?}, {:?},",
            env["XLLAMACPP_PYTHON"], env["XSERVE"]
        )),
        "the incumbent is the first arm, run by xserve.py"
    );
    let inc_log = std::fs::File::create(out.path().join("incumbent-before.log")).unwrap();
    let mut inc = Command::new(&env["XLLAMACPP_PYTHON"])
        .current_dir(root)
        .args(&inc_argv)
        .stdin(Stdio::null())
        .stdout(inc_log.try_clone().unwrap())
        .stderr(inc_log)
        .process_group(0)
        .spawn()
        .unwrap();
    let original = inc.id();
    wait_serving(port, Duration::from_secs(90));
    assert_eq!(listener_pid(port), Some(original));

    let t0 = Instant::now();
    let o = Command::new(BIN)
        .arg("run")
        .arg(&file)
        .arg("--output")
        .arg(&bundle)
        .arg("--no-progress")
        .output()
        .unwrap();
    let took = t0.elapsed().as_secs_f64();
    eprintln!("real campaign took {took:.1} s");
    // Stopped by bakeoff: reap it (a bounded wait, so a failure to stop it can't hang the test).
    let t = Instant::now();
    let original_exited = loop {
        match inc.try_wait() {
            Ok(Some(_)) => break true,
            _ if t.elapsed() > Duration::from_secs(5) => break false,
            _ => std::thread::sleep(Duration::from_millis(50)),
        }
    };
    let restored = listener_pid(port);
    let result = std::panic::catch_unwind(|| {
        let r = json(&bundle.join("campaign-result.json"));
        assert!(o.status.success(), "{}\n{r:#}", text(&o));
        assert_eq!(r["complete"], true, "{r:#}");
        assert!(
            original_exited,
            "bakeoff did not stop the original incumbent"
        );
        verify(&bundle);

        // Restoration: passed in the result and in its own evidence.
        assert_eq!(
            r["restoration"]["status"], "passed",
            "{:#}",
            r["restoration"]
        );
        let id = json(&bundle.join("restoration-identity.json"));
        assert_eq!(id["passed"], true, "{id:#}");
        assert!(
            id["checks"]
                .as_object()
                .unwrap()
                .values()
                .all(|v| v == &serde_json::json!(true)),
            "{id:#}"
        );
        let pre = json(&bundle.join("restoration-preflight.json"));
        for g in pre["gates"].as_array().unwrap() {
            assert_eq!(g["status"], "passed", "{pre:#}");
        }

        // The incumbent serves again, with its model, from a process bakeoff started, which
        // outlives bakeoff.
        let rl = json(&bundle.join("restoration-launch.json"));
        let pid = rl["pid"]
            .as_u64()
            .expect("restoration-launch.json has the pid") as u32;
        assert_ne!(pid, original, "the original incumbent was stopped");
        assert_eq!(
            restored,
            Some(pid),
            "the restored incumbent holds the lane port"
        );
        assert!(pid_alive(pid));
        assert_eq!(listener_model(port).as_deref(), Some("smollm2-135m"));
        let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap();
        let args: Vec<String> = cmdline
            .split(|b| *b == 0)
            .filter(|a| !a.is_empty())
            .map(|a| String::from_utf8_lossy(a).into_owned())
            .collect();
        assert_eq!(
            args[1..],
            inc_argv[..],
            "the restored incumbent runs the same recipe"
        );

        // Nothing else the campaign started is running.
        let arms = r["arms"].as_array().unwrap();
        assert_eq!(arms.len(), 2);
        for a in arms {
            let id = a["id"].as_str().unwrap();
            let l = json(&bundle.join(format!("{id}-launch.json")));
            let p = l["pid"]
                .as_u64()
                .unwrap_or_else(|| panic!("{id}-launch.json: {l:#}"));
            assert!(!pid_alive(p as u32), "arm {id} pid {p} still alive");
        }

        // What the arms did: the template-less arm fails only the tools gate.
        let arm = |id: &str| arms.iter().find(|a| a["id"] == id).unwrap().clone();
        let gate = |a: &serde_json::Value, g: &str| {
            a["gates"]
                .as_array()
                .unwrap()
                .iter()
                .find(|x| x["name"] == g)
                .map(|x| x["status"].clone())
                .unwrap_or_default()
        };
        for id in ["xllamacpp-np2", "xllamacpp-notools"] {
            let a = arm(id);
            assert_eq!(a["status"], "completed", "{a:#}");
            for g in ["smoke", "json", "streaming", "retrieval"] {
                assert_eq!(gate(&a, g), "passed", "{id} {g}: {a:#}");
            }
        }
        let nt = arm("xllamacpp-notools");
        assert_eq!(gate(&nt, "tools"), "failed", "{nt:#}");
        assert_eq!(nt["failure"]["class"], "tool-schema", "{nt:#}");
        let t = arm("xllamacpp-np2");
        assert_eq!(gate(&t, "tools"), "passed", "{t:#}");

        let ck = json(&bundle.join("checkpoint.json"));
        let tm = &ck["timing"][0];
        eprintln!(
            "wall {:.1} s, engine start/stop {:.1} s, measurement {:.1} s, overhead {:.2} s = {:.3}%",
            tm["total_ms"].as_f64().unwrap_or(0.0) / 1e3,
            tm["engine_lifecycle_ms"].as_f64().unwrap_or(0.0) / 1e3,
            tm["measurement_ms"].as_f64().unwrap_or(0.0) / 1e3,
            tm["overhead_ms"].as_f64().unwrap_or(0.0) / 1e3,
            tm["overhead_fraction"].as_f64().unwrap_or(0.0) * 100.0
        );
    });
    // Leave nothing running: the restored incumbent, and the original if it survived.
    if let Some(p) = restored {
        if p != original {
            kill_group(p);
        }
    }
    cleanup(&bundle, Some(inc), port);
    if std::env::var_os("BAKEOFF_KEEP_REAL_BUNDLE").is_some() {
        let keep = root.join("target/campaigns/real-cpu-test");
        let _ = std::fs::remove_dir_all(&keep);
        let _ = std::fs::create_dir_all(root.join("target/campaigns"));
        let _ = Command::new("cp")
            .arg("-r")
            .arg(&bundle)
            .arg(&keep)
            .status();
        eprintln!("bundle kept at {}", keep.display());
    }
    if let Err(e) = result {
        std::panic::resume_unwind(e);
    }
}
