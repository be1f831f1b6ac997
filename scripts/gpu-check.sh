#!/usr/bin/env bash
# GPU check: prints the GPU facts bakeoff sees (NVML through nvml-wrapper, else nvidia-smi) and its
# idle-baseline verdict, after the host and nvidia-smi's own view for comparison. See docs/gpu.md.
#
#   scripts/gpu-check.sh                          # every GPU, idle threshold 1024 MiB
#   scripts/gpu-check.sh --gpu 0 --threshold-mib 512
#   scripts/gpu-check.sh --json                   # bakeoff's part as JSON
#   BAKEOFF=/path/to/bakeoff scripts/gpu-check.sh # use that binary instead of building
#
# Arguments go to `bakeoff gpu`. Exit status: 0 when the baseline passed or is not applicable (a
# host without an NVIDIA GPU: it says so plainly), 1 when the baseline failed, 2 on a usage error.
set -euo pipefail
cd -- "$(dirname -- "${BASH_SOURCE[0]}")/.."

if [[ -n "${BAKEOFF:-}" ]]; then
    BIN=$BAKEOFF
else
    # Incremental: a no-op when the release binary is up to date.
    cargo build --release --quiet
    BIN=target/release/bakeoff
fi

echo "== host"
echo "$(uname -srm) ($(hostname)), $(date -u +%Y-%m-%dT%H:%M:%SZ)"
echo "bakeoff: $("$BIN" --version)"
echo
echo "== nvidia-smi (for comparison)"
if command -v nvidia-smi >/dev/null 2>&1; then
    nvidia-smi --query-gpu=index,uuid,name,memory.total,memory.used,utilization.gpu,power.draw,clocks.sm,clocks.mem,driver_version \
        --format=csv || echo "(nvidia-smi failed with status $?)"
    nvidia-smi --query-compute-apps=gpu_uuid,pid,used_memory --format=csv || true
else
    echo "nvidia-smi: not on PATH"
fi
echo
echo "== bakeoff gpu $*"
set +e
"$BIN" gpu "$@"
rc=$?
set -e
if [[ $rc -ne 0 ]] && ! "$BIN" gpu --help >/dev/null 2>&1; then
    echo "this bakeoff binary has no 'gpu' subcommand: wire bakeoff::telemetry::cli::{GpuArgs, run} into src/main.rs" >&2
fi
exit $rc
