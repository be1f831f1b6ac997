#!/usr/bin/env bash
# A small campaign whose lane owns a real GPU: idle baseline, memory reserve, NVML samples joined
# to the timed steps, memory released after each stop. The arms are reference engines; the two
# candidates run under scripts/gpu-hold.py, which holds GPU memory and keeps the GPU busy the way a
# real engine would (PyTorch with CUDA needed), so every GPU check sees real numbers:
#   baseline     incumbent, no GPU use
#   gpu-engine   holds 8 GiB and runs matrix products while it serves: passes the 4 GiB reserve
#   gpu-hog      holds all but 3 GiB: fails the 4 GiB memory reserve, by design
#
#   scripts/gpu-campaign.sh OUT_DIR              # BAKEOFF=path/to/bakeoff to skip the build
#
# Prints the GPU parts of the evidence; the whole bundle is left in OUT_DIR/bundle. See docs/gpu.md.
set -euo pipefail
root=$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")/.." && pwd)
out=${1:?usage: scripts/gpu-campaign.sh OUT_DIR}
mkdir -p "$out" && out=$(cd "$out" && pwd)
if [[ -n "${BAKEOFF:-}" ]]; then BIN=$(realpath "$BAKEOFF"); else
    (cd "$root" && cargo build --release --quiet); BIN=$root/target/release/bakeoff; fi
command -v nvidia-smi >/dev/null || { echo "no nvidia-smi: this script needs an NVIDIA GPU host" >&2; exit 2; }
uuid=$(nvidia-smi --query-gpu=uuid --format=csv,noheader | head -n1 | tr -d ' ')
total=$(nvidia-smi --query-gpu=memory.total --format=csv,noheader,nounits | head -n1 | tr -d ' ')
[[ -n "$uuid" && -n "$total" ]] || { echo "nvidia-smi lists no GPU" >&2; exit 2; }
port=${PORT:-18190}
hog=$((total - 3072))
py=$(command -v python3)
cp "$root/examples/profiles/reference-50ms-80tps.toml" "$out/incumbent.toml"
cp "$root/examples/campaigns/profiles/ref-fast.toml" "$out/fast.toml"
engine() { printf '"%s", "engine", "--profile", "%s", "--host", "127.0.0.1", "--port", "%s"' "$BIN" "$1" "$port"; }
cat >"$out/campaign.toml" <<TOML
[campaign]
id = "gpu-check-campaign"
hardware = "auto"
description = "Reference engines on a lane that owns one real GPU: every GPU check with real numbers."
output = "bundle"

[lane]
host = "127.0.0.1"
port = $port
gpus = ["$uuid"]
memory_reserve_mib = 4096
idle_baseline_max_mib = 1024
ready_timeout_s = 120
stop_grace_s = 5

[workload]
ranking_priority = ["ttft", "decode_tokens_per_second", "concurrency"]
matched_prompt_tokens = 256
max_tokens = 64
warm_repetitions = 6
concurrency = [1, 4]

[gates]
preflight = ["smoke", "json", "streaming"]

[policy]
promotion = "manual"

[[arms]]
id = "baseline"
role = "incumbent"
engine = "bakeoff reference engine"
model = "reference-50ms-80tps"
[arms.reference]
profile = "incumbent.toml"

[[arms]]
id = "gpu-engine"
role = "candidate"
engine = "bakeoff reference engine under gpu-hold.py (8 GiB held, GPU busy)"
model = "ref-fast"
served_model = "ref-fast"
served_context = 32768
[arms.process]
argv = ["$py", "$root/scripts/gpu-hold.py", "--mib", "8192", "--", $(engine "$out/fast.toml")]

[[arms]]
id = "gpu-hog"
role = "candidate"
engine = "bakeoff reference engine under gpu-hold.py (all but 3 GiB held)"
model = "ref-fast"
served_model = "ref-fast"
served_context = 32768
[arms.process]
argv = ["$py", "$root/scripts/gpu-hold.py", "--mib", "$hog", "--busy-ms", "0", "--", $(engine "$out/fast.toml")]
TOML

echo "== bakeoff gpu (before anything starts)"
"$BIN" gpu || true
echo
echo "== the incumbent starts (reference engine, port $port)"
setsid "$BIN" engine --profile "$out/incumbent.toml" --host 127.0.0.1 --port "$port" >"$out/incumbent-before.log" 2>&1 &
for _ in $(seq 100); do (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null && break; sleep 0.1; done
echo
echo "== bakeoff run"
set +e
"$BIN" run "$out/campaign.toml" ${DRY_RUN:+--dry-run} --output "$out/bundle" --no-progress 2>&1 | tee "$out/run.log"
rc=${PIPESTATUS[0]}
set -e
echo "bakeoff run exit status: $rc"
echo
echo "== GPU evidence"
python3 - "$out/bundle" <<'PY'
import glob, json, os, sys
b = sys.argv[1]
def load(p):
    with open(p) as f: return json.load(f)
for name in ["gpu-idle-baseline.json"] + sorted(os.path.basename(p) for p in glob.glob(b + "/*-memory-reserve.json")):
    p = os.path.join(b, name)
    if os.path.exists(p):
        d = load(p); v = d.get("verdict", d)
        print(f"{name}: {v.get('status')}: {v.get('detail')}")
for p in sorted(glob.glob(b + "/*-timing-*.json")):
    g = load(p).get("gpu") or {}
    rows = g.get("per_gpu") or []
    if not rows:
        print(f"{os.path.basename(p)}: no GPU samples ({g.get('note')})")
    for r in rows:
        print(f"{os.path.basename(p)}: {g.get('source')} every {g.get('interval_ms')} ms, {r.get('samples')} samples; "
              f"max memory {r.get('memory_used_mib_max')} MiB; mean utilization {r.get('utilization_pct_mean')} %; "
              f"power mean {r.get('power_w_mean')} W, max {r.get('power_w_max')} W; mean SM clock {r.get('sm_clock_mhz_mean')} MHz")
# Energy per step (docs/metrics.md "Energy and cost per token"): each timing record of the result.
def records(x):
    if isinstance(x, dict):
        if "evidence" in x and "energy" in x:
            yield x
        for v in x.values():
            yield from records(v)
    elif isinstance(x, list):
        for v in x:
            yield from records(v)
for rec in records(load(os.path.join(b, "campaign-result.json")).get("arms", [])):
    e = rec["energy"] or {}
    if not e or e.get("not_measured"):
        print(f"{rec['evidence']}: energy not measured: {e.get('not_measured', 'no record')}")
        continue
    print(f"{rec['evidence']}: energy {e.get('energy_j')} J over {e.get('window_s')} s; mean power {e.get('mean_power_w')} W "
          f"(idle {e.get('idle_power_w')} W); {e.get('per_request_j')} J/request; {e.get('per_mtok_j')} J per million output tokens")
for p in sorted(glob.glob(b + "/*-stop.json")):
    d = load(p)
    r = d.get("gpu_released") or {}
    print(f"{os.path.basename(p)}: memory-released {r.get('status')}: {r.get('detail')}; "
          + "; ".join(x.get("detail", "") for x in r.get("per_device") or []))
PY
echo
"$BIN" verify "$out/bundle" || true
# The run restored the incumbent; stop it (its pid is in the run's last lines).
pkill -f -- "--port $port" || true
exit "$rc"
