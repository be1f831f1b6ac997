//! `bakeoff engine`: serve the reference engine (docs/reference-engine.md).

use std::path::PathBuf;

/// Serve an OpenAI-compatible reference engine with a declared performance model and faults.
#[derive(clap::Args, Debug)]
pub struct EngineArgs {
    /// Profile file (TOML), one per served model; repeat for several models.
    #[arg(long = "profile", required = true)]
    pub profiles: Vec<PathBuf>,
    /// Address to listen on.
    #[arg(long, default_value = "127.0.0.1")]
    pub host: String,
    /// Port to listen on (0 = any free port; the listening line says which).
    #[arg(long, default_value_t = 8000)]
    pub port: u16,
    /// Seed for every random choice (filler text, speculative acceptance, error_rate).
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// Runtime worker threads (default: the CPU count, between 2 and 8).
    #[arg(long)]
    pub workers: Option<usize>,
}

/// Run the engine until SIGINT or SIGTERM.
pub fn run(args: EngineArgs) -> anyhow::Result<()> {
    let profiles = crate::refengine::load_profiles(&args.profiles)?;
    let slowdown = std::env::var(crate::refengine::SLOWDOWN_ENV).ok();
    let profiles = crate::refengine::slowed(profiles, slowdown.as_deref())?;
    crate::clock::raise_nofile_limit();
    let workers = args.workers.unwrap_or_else(|| {
        std::thread::available_parallelism()
            .map(|n| n.get())
            .unwrap_or(2)
            .clamp(2, 8)
    });
    if workers == 0 {
        anyhow::bail!("--workers must be at least 1");
    }
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(workers)
        .thread_name("bakeoff-engine")
        .enable_all()
        .build()?;
    let result = rt.block_on(async {
        use tokio::signal::unix::{signal, SignalKind};
        let mut term = signal(SignalKind::terminate())?;
        let mut int = signal(SignalKind::interrupt())?;
        let shutdown = async move {
            tokio::select! {
                _ = int.recv() => {}
                _ = term.recv() => {}
            }
        };
        let opts = crate::refengine::Options {
            profiles,
            host: args.host,
            port: args.port,
            seed: args.seed,
        };
        crate::refengine::serve(opts, shutdown).await
    });
    rt.shutdown_timeout(std::time::Duration::from_millis(200));
    result
}
