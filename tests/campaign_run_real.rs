//! `bakeoff run examples/campaigns/real-cpu.toml` on real llama.cpp servers (CPU): the incumbent
//! is started by the test first, restored by bakeoff at the end, and nothing else stays running.

#[path = "support/campaign.rs"]
mod campaign;
#[path = "support/real_engine.rs"]
mod real_engine;

use campaign::*;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

#[test]
fn real_cpu_campaign_restores_the_incumbent_and_verifies() {
    let _ = real_engine::engines_env(); // panics with the setup command when engines are missing
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let file = root.join("examples/campaigns/real-cpu.toml");
    let out = tempfile::tempdir().unwrap();
    let bundle = out.path().join("bundle");
    let port = 18080u16;
    assert!(
        http_get(port, "/health").is_none(),
        "port {port} is busy before the test"
    );
    // The incumbent, as its recipe starts it (cwd = the repository root).
    let inc_log = std::fs::File::create(out.path().join("incumbent-before.log")).unwrap();
    let mut inc = Command::new(root.join("target/engines/venv/bin/python"))
        .current_dir(root)
        .args([
            "scripts/xserve.py",
            "--model",
            "target/engines/smollm2/SmolLM2-135M-Instruct.Q4_1.gguf",
            "--host",
            "127.0.0.1",
            "--port",
            "18080",
            "--ctx",
            "8192",
            "--parallel",
            "2",
            "--threads",
            "2",
            "--alias",
            "smollm2-135m",
            "--chat-template-file",
            "scripts/chatml-tools.jinja",
            "--metrics",
        ])
        .stdin(Stdio::null())
        .stdout(inc_log.try_clone().unwrap())
        .stderr(inc_log)
        .process_group(0)
        .spawn()
        .unwrap();
    wait_serving(port, Duration::from_secs(90));
    let t0 = Instant::now();
    let o = Command::new(BIN)
        .arg("run")
        .arg(&file)
        .arg("--output")
        .arg(&bundle)
        .arg("--no-progress")
        .output()
        .unwrap();
    eprintln!("real campaign took {:.1} s", t0.elapsed().as_secs_f64());
    let _ = inc.wait(); // stopped by bakeoff: reap it
    let r = json(&bundle.join("campaign-result.json"));
    let result = std::panic::catch_unwind(|| {
        assert!(o.status.success(), "{}\n{r:#}", text(&o));
        assert_eq!(r["complete"], true, "{r:#}");
        verify(&bundle);
        assert_eq!(
            r["restoration"]["status"], "passed",
            "{:#}",
            r["restoration"]
        );
        // The incumbent serves again, with its model.
        assert_eq!(listener_model(port).as_deref(), Some("smollm2-135m"));
        let rl = json(&bundle.join("restoration-launch.json"));
        let pid = rl["pid"].as_u64().unwrap() as u32;
        assert!(pid_alive(pid));
        // Nothing else the campaign started is running.
        for a in r["arms"].as_array().unwrap() {
            let id = a["id"].as_str().unwrap();
            if let Ok(b) = std::fs::read(bundle.join(format!("{id}-launch.json"))) {
                let l: serde_json::Value = serde_json::from_slice(&b).unwrap();
                if let Some(p) = l["pid"].as_u64() {
                    assert!(!pid_alive(p as u32), "arm {id} pid {p} still alive");
                }
            }
        }
        let files: Vec<String> = std::fs::read_dir(&bundle)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        eprintln!("bundle: {files:?}");
        eprintln!(
            "overhead {:.3}%",
            json(&bundle.join("checkpoint.json"))["timing"][0]["overhead_fraction"]
                .as_f64()
                .unwrap()
                * 100.0
        );
    });
    cleanup(&bundle, None);
    if let Err(e) = result {
        std::panic::resume_unwind(e);
    }
}
