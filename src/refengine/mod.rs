//! The reference engine: an OpenAI-compatible HTTP/1.1 server with a declared performance model
//! and declared faults. It lets users dry-run campaigns, and it is the ground truth against which
//! the load client proves its timing accuracy (`GET /debug/emissions` gives the CLOCK_MONOTONIC
//! time of every event it wrote). The user-facing reference is docs/reference-engine.md.

pub mod app;
pub mod completion;
pub mod emissions;
pub mod generate;
pub mod http;
pub mod json;
pub mod knowledge;
pub mod profile;
pub mod request;
pub mod server;
pub mod state;
pub mod timer;
pub mod tokenizer;
pub mod tools;

use std::collections::HashSet;
use std::sync::Arc;

pub use profile::{Profile, ToolBehavior};

/// Load every profile; model ids must be unique.
pub fn load_profiles<P: AsRef<std::path::Path>>(
    paths: impl IntoIterator<Item = P>,
) -> anyhow::Result<Vec<Profile>> {
    let mut out = Vec::new();
    let mut seen = HashSet::new();
    for p in paths {
        let prof = Profile::load(p.as_ref())?;
        if !seen.insert(prof.model.clone()) {
            anyhow::bail!(
                "profile {}: field `model`: model id `{}` is already served by another profile",
                p.as_ref().display(),
                prof.model
            );
        }
        out.push(prof);
    }
    if out.is_empty() {
        anyhow::bail!("give at least one --profile FILE");
    }
    Ok(out)
}

/// The environment variable that makes every profile of an engine slower by a factor (a number
/// from 1 up; docs/reference-engine.md "Slowdown"): its fixed TTFT and slow TTFT are multiplied
/// by it, its prefill and decode speeds divided. It stands for a slower card (a fleet lane's `env`).
pub const SLOWDOWN_ENV: &str = "BAKEOFF_REFENGINE_SLOWDOWN";

/// `profiles` slowed by the factor in `value` (the [`SLOWDOWN_ENV`] variable's value; None or
/// empty: unchanged). Err: not a number from 1 to 100, named.
pub fn slowed(mut profiles: Vec<Profile>, value: Option<&str>) -> anyhow::Result<Vec<Profile>> {
    let Some(v) = value.map(str::trim).filter(|v| !v.is_empty()) else {
        return Ok(profiles);
    };
    let f: f64 = v
        .parse()
        .ok()
        .filter(|f: &f64| (1.0..=100.0).contains(f))
        .ok_or_else(|| {
            anyhow::anyhow!(
                "{SLOWDOWN_ENV}={v}: not a slowdown factor; give a number from 1 (as profiled) to 100, e.g. 1.08 for 8 % slower"
            )
        })?;
    for p in &mut profiles {
        p.ttft_ms *= f;
        p.slow_ttft_ms *= f;
        p.prefill_tok_s /= f;
        p.decode_tok_s /= f;
    }
    Ok(profiles)
}

/// Where and how to serve.
#[derive(Debug, Clone)]
pub struct Options {
    pub profiles: Vec<Profile>,
    pub host: String,
    pub port: u16,
    pub seed: u64,
}

/// Bind, print the listening line, serve until `shutdown` resolves (the CLI passes SIGINT or
/// SIGTERM; its handlers are installed before this is called, so a caller may signal as soon as
/// it has read the listening line). Runs inside a tokio runtime.
pub async fn serve(
    opts: Options,
    shutdown: impl std::future::Future<Output = ()>,
) -> anyhow::Result<()> {
    use std::io::Write;
    let start_ns = crate::clock::mono_ns();
    // Resolve without tokio's blocking pool (its idle thread would delay a clean exit).
    let host = opts.host.trim_start_matches('[').trim_end_matches(']');
    let addr = match host.parse::<std::net::IpAddr>() {
        Ok(ip) => std::net::SocketAddr::new(ip, opts.port),
        Err(_) => std::net::ToSocketAddrs::to_socket_addrs(&(host, opts.port))
            .map_err(|e| anyhow::anyhow!("cannot resolve --host {}: {e}", opts.host))?
            .next()
            .ok_or_else(|| anyhow::anyhow!("cannot resolve --host {}", opts.host))?,
    };
    let socket = if addr.is_ipv4() {
        tokio::net::TcpSocket::new_v4()?
    } else {
        tokio::net::TcpSocket::new_v6()?
    };
    socket.set_reuseaddr(true)?;
    socket
        .bind(addr)
        .map_err(|e| anyhow::anyhow!("cannot bind {addr}: {e}"))?;
    let listener = socket.listen(4096)?;
    let local = listener.local_addr()?;
    let shown_host = if local.is_ipv6() {
        format!("[{}]", local.ip())
    } else {
        local.ip().to_string()
    };
    {
        // Errors ignored: a full disk or a closed pipe behind stdout must never stop the server
        // (a restored incumbent outlives the run that started it, and its log's disk).
        let mut out = std::io::stdout().lock();
        let _ = writeln!(
            out,
            "bakeoff engine listening on http://{shown_host}:{}",
            local.port()
        );
        let _ = out.flush();
    }
    for p in &opts.profiles {
        if let Some(line) = p.fail_at_startup.clone() {
            let at = start_ns + (p.startup_ms * 1e6) as u64;
            tokio::spawn(async move {
                timer::sleep_until_ns(at).await;
                log_line(&line);
                std::process::exit(1);
            });
        }
    }
    let app = Arc::new(server::App {
        models: opts
            .profiles
            .into_iter()
            .map(|p| Arc::new(state::Model::new(p)))
            .collect(),
        seed: opts.seed,
        start_ns,
        next_id: std::sync::atomic::AtomicU64::new(0),
    });
    let server = tokio::spawn(server::serve(listener, app));
    shutdown.await;
    server.abort();
    Ok(())
}

/// The arguments after the program that start `bakeoff engine` serving `profile` on
/// `host:port` (campaign arms and lanes start it the same way, so their argv hashes agree).
pub fn command_args(
    profile: &std::path::Path,
    host: &str,
    port: u16,
    seed: Option<u64>,
) -> Vec<String> {
    let mut a = vec![
        "engine".into(),
        "--profile".into(),
        profile.display().to_string(),
        "--host".into(),
        host.to_string(),
        "--port".into(),
        port.to_string(),
    ];
    if let Some(seed) = seed {
        a.extend(["--seed".into(), seed.to_string()]);
    }
    a
}

/// Write one line to stderr (the engine's log); never panics (stderr may be a closed pipe).
pub fn log_line(line: &str) {
    use std::io::Write;
    let mut err = std::io::stderr().lock();
    let _ = writeln!(err, "{line}");
    let _ = err.flush();
}

#[cfg(test)]
mod slowdown_tests {
    use crate::refengine::{slowed, Profile, SLOWDOWN_ENV};

    #[test]
    fn a_slowdown_scales_every_delay_and_refuses_a_bad_factor() {
        let p = Profile::with_model("m");
        let same = slowed(vec![p.clone()], None).unwrap();
        assert_eq!(same[0], p);
        let s = slowed(vec![p.clone()], Some("1.25")).unwrap();
        assert_eq!(s[0].ttft_ms, p.ttft_ms * 1.25);
        assert_eq!(s[0].decode_tok_s, p.decode_tok_s / 1.25);
        for bad in ["0.5", "fast", "1000"] {
            let e = slowed(vec![p.clone()], Some(bad)).unwrap_err().to_string();
            assert!(e.contains(SLOWDOWN_ENV) && e.contains("1.08"), "{e}");
        }
    }
}
