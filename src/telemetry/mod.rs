//! Telemetry: GPU facts and checks (NVML, nvidia-smi), GPU sampling during timed steps, and engine
//! `/metrics` snapshots.

pub mod engine_metrics;
pub mod gpu;
pub mod host;
pub mod sampler;

pub use gpu::{
    idle_baseline, probe, released, report_text, reserve_ok, BaselineVerdict, GpuDevice, GpuProbe,
    Status, Verdict,
};
pub use sampler::{GpuSample, SampleSet, Sampler};
