use clap::{Parser, Subcommand};

/// Evidence-grade bake-offs of LLM serving configurations.
#[derive(Parser, Debug)]
#[command(name = "bakeoff", version, about, long_about = None)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Measure a streaming OpenAI-compatible endpoint (TTFT, decode speed, chunk gaps, failures).
    Bench(Box<bakeoff::cli::bench::BenchArgs>),
    /// Serve the reference engine: an OpenAI-compatible server with a declared performance model.
    Engine(bakeoff::cli::engine::EngineArgs),
    /// Run pass/fail gates against an endpoint: preflight, tools, long-context retrieval, quality.
    Gate(bakeoff::cli::gate::GateArgs),
    /// Run a campaign: every arm in the lane, gates, evidence bundle, incumbent restored.
    Run(bakeoff::cli::run::RunArgs),
    /// Measure bakeoff's own timing error against the reference engine's emission log.
    Selftest(bakeoff::cli::selftest::SelftestArgs),
    /// Show the GPU facts bakeoff sees (NVML, else nvidia-smi) and the idle-baseline verdict.
    Gpu(bakeoff::cli::gpu::GpuArgs),
    /// Put the lane back after a run died (SIGKILL, OOM, reboot): stop its proven leftovers, restore the incumbent.
    Recover(bakeoff::cli::recover::RecoverArgs),
    /// Re-hash an evidence bundle and name every file that changed, went missing or is unlisted.
    Verify(bakeoff::cli::verify::VerifyArgs),
    /// Re-render the verdict (decision-summary.json, publication-summary.md, report.html) of a bundle.
    Report(bakeoff::cli::report::ReportArgs),
    /// Compare the arms two campaign bundles share; refuses unlike workloads unless --force.
    Compare(bakeoff::cli::compare::CompareArgs),
    /// Keep verified bundles in a database: trends per recipe, GPU and lane, change points, a CI gate.
    History(bakeoff::cli::history::HistoryArgs),
    /// Put a verified verdict's winner in service, bake it under analysis, roll back by itself.
    Promote(bakeoff::cli::promote::PromoteArgs),
    /// What serves each lane, as bakeoff last proved it (`bakeoff lane status [PORT]`).
    Lane(bakeoff::cli::lane::LaneArgs),
    /// Serve the Model Context Protocol on stdio: plan, start, watch, stop and read campaigns.
    Mcp(bakeoff::cli::mcp::McpArgs),
    /// Run one ordered timed load on a Slurm lane's node (started by `bakeoff run` through srun).
    #[command(hide = true)]
    ClientStep(bakeoff::cli::client_step::ClientStepArgs),
}

fn main() -> std::process::ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Bench(a) => bakeoff::cli::bench::run(*a),
        Command::Engine(a) => bakeoff::cli::engine::run(a),
        Command::Gate(a) => bakeoff::cli::gate::run(a),
        Command::Run(a) => bakeoff::cli::run::run(a),
        Command::Selftest(a) => bakeoff::cli::selftest::run(a),
        Command::Verify(a) => bakeoff::cli::verify::run(a),
        Command::Recover(a) => bakeoff::cli::recover::run(a),
        Command::Report(a) => bakeoff::cli::report::run(a),
        Command::Compare(a) => bakeoff::cli::compare::run(a),
        Command::Gpu(a) => bakeoff::cli::gpu::run(a),
        Command::History(a) => bakeoff::cli::history::run(a),
        Command::Promote(a) => bakeoff::cli::promote::run(a),
        Command::Lane(a) => bakeoff::cli::lane::run(a),
        Command::Mcp(a) => bakeoff::cli::mcp::run(a),
        Command::ClientStep(a) => bakeoff::cli::client_step::run(a),
    };
    match result {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => match e.downcast_ref::<bakeoff::cli::Exit>() {
            Some(x) => {
                if let Some(m) = &x.message {
                    eprintln!("error: {m}");
                }
                std::process::ExitCode::from(x.code)
            }
            None => {
                eprintln!("error: {e:#}");
                std::process::ExitCode::FAILURE
            }
        },
    }
}
