#!/usr/bin/env bash
# bakeoff and the peer client vllm-bench, back to back, against vllm-bench's own mock server with
# server-side truth added, at 1, 16, 256 and 1,024 streams (docs/benchmarks.md, "Side by side").
# No network; python3 (standard library only) for the driver.
#
#   scripts/bench/side-by-side.sh BAKEOFF PEER_DIR OUT_DIR [LEVELS]
#
# BAKEOFF: a release build of bakeoff (target/release/bakeoff).
# PEER_DIR: what scripts/bench/build-peer.sh built (target/release/vllm-bench and
#           bench-overhead/mock-server/target/release/mock-llm-server, the latter with the patch).
# OUT_DIR: every client's output, the truth logs, side-by-side.json and side-by-side.md.
# LEVELS: comma-separated stream counts (default 1,16,256,1024).
set -euo pipefail
bakeoff=${1:?usage: side-by-side.sh BAKEOFF PEER_DIR OUT_DIR [LEVELS]}
peer=${2:?usage: side-by-side.sh BAKEOFF PEER_DIR OUT_DIR [LEVELS]}
out=${3:?usage: side-by-side.sh BAKEOFF PEER_DIR OUT_DIR [LEVELS]}
levels=${4:-1,16,256,1024}
vb=$peer/target/release/vllm-bench
mock=$peer/bench-overhead/mock-server/target/release/mock-llm-server
for f in "$bakeoff" "$vb" "$mock"; do
    [ -x "$f" ] || { echo "side-by-side: $f is missing or not executable (see scripts/bench/build-peer.sh)" >&2; exit 2; }
done
# 1,024 streams need 1,024+ descriptors per process.
ulimit -n 65536 2>/dev/null || ulimit -n "$(ulimit -Hn)"
# vllm-bench's tokenizer cache must not reach for the network.
export HF_HUB_OFFLINE=1
mkdir -p "$out"
{ echo "bakeoff: $("$bakeoff" --version 2>/dev/null || echo "$bakeoff")"
  echo "peer commit: $(cat "$peer/PEER_COMMIT" 2>/dev/null || echo unknown)"
  echo "host: $(nproc) CPUs, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2-), kernel $(uname -r)"
  echo "loadavg before: $(cat /proc/loadavg)"; } | tee "$out/host.txt"
python3 "$(dirname "$0")/side_by_side.py" "$bakeoff" "$vb" "$mock" "$out" "$levels"
echo "loadavg after: $(cat /proc/loadavg)" | tee -a "$out/host.txt"
