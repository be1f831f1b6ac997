//! GPU probing: the real probe on this host (with or without a GPU), the nvidia-smi fallback
//! against a stand-in nvidia-smi, and the sampler.

use bakeoff::telemetry::gpu::{self, GpuProbe, ProbeOpts, Status};
use bakeoff::telemetry::sampler::{self, Sampler};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

const H200: &str = "0, GPU-5c1b7f0e-1111-2222-3333-444455556666, NVIDIA H200, 143771, 512, 0, 74.83, 345, 2619, 570.133.20\n\
1, GPU-aaaaaaaa-1111-2222-3333-444455556666, NVIDIA H200, 143771, 80123, 97, 650.12, 1980, 2619, 570.133.20\n";

/// A stand-in nvidia-smi answering the two queries bakeoff makes (or failing like a host whose
/// driver is not loaded).
fn fake_smi(dir: &Path, fail: bool) -> PathBuf {
    let script = if fail {
        "#!/bin/sh\necho \"NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. Make sure that the latest NVIDIA driver is installed and running.\"\nexit 9\n".to_string()
    } else {
        format!(
            "#!/bin/sh\ncase \"$1\" in\n  --query-gpu=*) printf '%s' '{H200}' ;;\n  --query-compute-apps=*) echo 'GPU-aaaaaaaa-1111-2222-3333-444455556666, 4242, 80000' ;;\n  *) exit 2 ;;\nesac\n"
        )
    };
    let p = dir.join("nvidia-smi");
    std::fs::write(&p, script).unwrap();
    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
    p
}

fn opts(smi: PathBuf) -> ProbeOpts {
    ProbeOpts {
        nvml: false,
        nvidia_smi: smi,
        timeout: Duration::from_secs(10),
    }
}

#[test]
fn probe_on_this_host_is_honest() {
    let p = gpu::probe();
    let report = gpu::report_text(&p, &[], 1024);
    println!("{report}");
    let v = gpu::idle_baseline(&p, &[], 1024);
    match &p {
        GpuProbe::NotApplicable { reason } => {
            assert!(reason.contains("NVML"), "{reason}");
            assert!(reason.contains("nvidia-smi"), "{reason}");
            assert_eq!(v.status, Status::NotApplicable);
            assert!(v.per_device.is_empty());
            assert!(report.contains("no NVIDIA GPU on this host: "), "{report}");
            assert!(report.contains("not-applicable"), "{report}");
        }
        GpuProbe::Available {
            source, devices, ..
        } => {
            assert!(source == "nvml" || source == "nvidia-smi");
            assert!(!devices.is_empty());
            for d in devices {
                assert!(
                    d.memory_total_mib > 0 && d.uuid.starts_with("GPU-"),
                    "{d:?}"
                );
            }
            assert_ne!(v.status, Status::NotApplicable);
            assert_eq!(v.per_device.len(), devices.len());
        }
    }
    let json = serde_json::to_value(&p).unwrap();
    assert!(json["status"] == "available" || json["status"] == "not-applicable");
}

#[test]
fn nvidia_smi_fallback_reads_devices_and_processes() {
    let d = tempfile::tempdir().unwrap();
    let p = gpu::probe_with(&opts(fake_smi(d.path(), false)));
    let GpuProbe::Available {
        source,
        driver_version,
        devices,
        notes,
    } = &p
    else {
        panic!("{p:?}")
    };
    assert_eq!(source, "nvidia-smi");
    assert_eq!(driver_version, "570.133.20");
    assert_eq!(
        notes,
        &vec!["NVML: not tried; used nvidia-smi instead".to_string()]
    );
    assert_eq!(devices.len(), 2);
    assert!(devices[0].processes.is_empty() && devices[0].processes_known);
    assert_eq!(devices[1].processes[0].pid, 4242);
    assert_eq!(devices[1].processes[0].used_mib, Some(80000));

    assert_eq!(
        gpu::idle_baseline(
            &p,
            &["GPU-5c1b7f0e-1111-2222-3333-444455556666".into()],
            1024
        )
        .status,
        Status::Passed
    );
    let busy = gpu::idle_baseline(&p, &[], 1024);
    assert_eq!(busy.status, Status::Failed);
    assert!(busy.detail.contains("pid 4242"), "{}", busy.detail);
    let json = serde_json::to_value(&p).unwrap();
    assert_eq!(json["status"], "available");
    assert_eq!(json["devices"][1]["power_w"], 650.12);
}

#[test]
fn no_driver_and_no_nvidia_smi_is_not_applicable_and_says_which() {
    let d = tempfile::tempdir().unwrap();
    let p = gpu::probe_with(&opts(d.path().join("nvidia-smi-missing")));
    let GpuProbe::NotApplicable { reason } = &p else {
        panic!("{p:?}")
    };
    assert!(reason.contains("not found"), "{reason}");
    let p = gpu::probe_with(&opts(fake_smi(d.path(), true)));
    let GpuProbe::NotApplicable { reason } = &p else {
        panic!("{p:?}")
    };
    assert!(
        reason.contains("couldn't communicate with the NVIDIA driver"),
        "{reason}"
    );
    assert!(reason.contains("exit status: 9"), "{reason}");
    let t = gpu::report_text(&p, &[], 1024);
    assert!(t.starts_with("bakeoff "), "{t}");
    assert!(
        t.contains("no NVIDIA GPU on this host: NVML: not tried; "),
        "{t}"
    );
    let r = gpu::reserve_ok(&p, &[], 4096);
    assert_eq!(r.status, Status::NotApplicable);
    assert!(r.ok());
}

#[test]
fn sampler_without_gpu_returns_nothing_and_says_why() {
    let d = tempfile::tempdir().unwrap();
    let s = Sampler::start_with(
        opts(d.path().join("nvidia-smi-missing")),
        &[],
        Duration::from_millis(20),
    );
    std::thread::sleep(Duration::from_millis(100));
    let set = s.stop();
    assert!(set.samples.is_empty());
    assert_eq!(set.source, None);
    assert!(
        set.note.as_deref().unwrap().starts_with("not applicable: "),
        "{set:?}"
    );
    // And with the default probe on this host (a GPU host samples; others say why).
    let set = Sampler::start(&[], Duration::from_millis(50)).stop();
    if gpu::probe().is_available() {
        assert!(!set.samples.is_empty(), "{set:?}");
    } else {
        assert!(set.samples.is_empty() && set.note.is_some(), "{set:?}");
    }
}

#[test]
fn sampler_samples_the_lane_gpus_and_joins_to_a_step() {
    let d = tempfile::tempdir().unwrap();
    let s = Sampler::start_with(
        opts(fake_smi(d.path(), false)),
        &["1".into()],
        Duration::from_millis(50),
    );
    std::thread::sleep(Duration::from_millis(300));
    let set = s.stop();
    assert_eq!(set.source.as_deref(), Some("nvidia-smi"));
    assert!(set.samples.len() >= 3, "{set:?}");
    assert!(set
        .samples
        .iter()
        .all(|x| x.uuid == "GPU-aaaaaaaa-1111-2222-3333-444455556666"));
    assert!(set.samples.windows(2).all(|w| w[0].mono_ns < w[1].mono_ns));
    let sum = sampler::summarize(&set.samples, set.started_ns, set.stopped_ns);
    assert_eq!(sum.len(), 1);
    assert_eq!(sum[0].samples, set.samples.len());
    assert_eq!(sum[0].memory_used_mib_max, 80123);
    assert_eq!(sum[0].power_w_max, Some(650.12));

    // A GPU the host does not have: nothing sampled, and the note names it.
    let set = Sampler::start_with(
        opts(fake_smi(d.path(), false)),
        &["GPU-nope".into()],
        Duration::from_millis(50),
    )
    .stop();
    assert!(set.samples.is_empty());
    assert!(set
        .note
        .unwrap()
        .contains("GPU GPU-nope is not on this host"));
}

#[test]
fn gpu_subcommand_args_parse_and_run_on_this_host() {
    use bakeoff::cli::gpu::{run, GpuArgs};
    use clap::Parser;
    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        gpu: GpuArgs,
    }
    let c = Cli::try_parse_from([
        "bakeoff-gpu",
        "--threshold-mib",
        "512",
        "--gpu",
        "0",
        "--gpu",
        "GPU-abc",
        "--json",
    ])
    .unwrap();
    assert_eq!(c.gpu.threshold_mib, 512);
    assert_eq!(c.gpu.gpus, vec!["0", "GPU-abc"]);
    assert!(c.gpu.json);
    let d = Cli::try_parse_from(["bakeoff-gpu"]).unwrap();
    assert_eq!(
        (d.gpu.threshold_mib, d.gpu.gpus.len(), d.gpu.json),
        (1024, 0, false)
    );
    if !gpu::probe().is_available() {
        // Not applicable is not a failure: exit status 0.
        run(d.gpu).unwrap();
        run(GpuArgs {
            threshold_mib: 1024,
            gpus: vec![],
            json: true,
        })
        .unwrap();
    }
}
