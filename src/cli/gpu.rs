//! `bakeoff gpu`: print the GPU facts bakeoff sees and the idle-baseline verdict.

use crate::telemetry::gpu;

/// Show the GPU facts bakeoff sees (NVML, else nvidia-smi) and the idle-baseline verdict.
#[derive(clap::Args, Debug)]
pub struct GpuArgs {
    /// Idle threshold: a checked GPU using more memory than this fails the idle baseline.
    #[arg(long, default_value_t = 1024)]
    pub threshold_mib: u64,
    /// A GPU to check (UUID, UUID without `GPU-`, or index); repeat for several. Default: all.
    #[arg(long = "gpu")]
    pub gpus: Vec<String>,
    /// Print JSON (`{"probe": …, "idle_baseline": …}`) instead of text.
    #[arg(long)]
    pub json: bool,
}

/// Prints the report. Exit status 0 when the baseline passed or is not applicable (no GPU);
/// an error (exit 1) when it failed, after printing everything.
pub fn run(args: GpuArgs) -> anyhow::Result<()> {
    let probe = gpu::probe();
    let verdict = gpu::idle_baseline(&probe, &args.gpus, args.threshold_mib);
    if args.json {
        let v = serde_json::json!({
            "bakeoff_version": crate::VERSION,
            "probe": probe,
            "idle_baseline": verdict,
        });
        println!("{}", serde_json::to_string_pretty(&v)?);
    } else {
        print!(
            "{}",
            gpu::report_text(&probe, &args.gpus, args.threshold_mib)
        );
    }
    if verdict.status == gpu::Status::Failed {
        anyhow::bail!("idle baseline failed: {}", verdict.detail);
    }
    Ok(())
}
