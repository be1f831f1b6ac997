#!/usr/bin/env bash
# The seed replay over one and over four Slurm lanes, back to back (issue 22's benchmark;
# docs/benchmarks.md "Fleet: the seed replay over four lanes"). Not a test: its figures are
# ratios within one run of this script.
#
#   scripts/bench/fleet-seed.sh BIN [OUT_DIR] [LANES...]
#
# BIN: a bakeoff binary (a release build). OUT_DIR: the campaigns, bundles, logs and the Slurm
# cluster's folder (default: a fresh temporary folder). LANES: the runs in order (default "1 4":
# the one-lane baseline, then four lanes). Starts its own test cluster
# (scripts/infra/slurm.sh up OUT_DIR/slurm --nodes 4: slurmctld, the host's slurmd and node1..4
# in network namespaces) and takes it down at exit. Each campaign is written by
# scripts/bench/fleet_seed.py: the seed replay's arms, workload, gates and policy, every arm a
# Slurm job of the same reference-engine profile on its lane's node, the incumbent's lane n1.
# Between runs the restored incumbent's job is cancelled, so each run starts from the same state
# (nothing serving).
#
# Prints per run: wall time (the whole `bakeoff run` command), exit code, winner, failure classes
# and whether the bundle verifies; for a multi-lane run the bundle's schedule timing (each lane's
# span, the time no lane was busy within the run) and the time no lane was busy within the whole
# command; then the wall-time ratio of each run against the first and whether the verdicts agree.
set -euo pipefail
usage="usage: fleet-seed.sh BIN [OUT_DIR] [LANES...]"
bin=$(realpath "${1:?$usage}")
out=${2:-$(mktemp -d)}
shift $(( $# >= 2 ? 2 : 1 ))
runs=("$@")
[ ${#runs[@]} -gt 0 ] || runs=(1 4)
here=$(cd "$(dirname "$0")/../.." && pwd)
[ -x "$bin" ] || { echo "fleet-seed: $bin is missing or not executable" >&2; exit 2; }
mkdir -p "$out"
out=$(realpath "$out")
slurm_dir="$out/slurm"
"$here/scripts/infra/slurm.sh" install
trap '"$here/scripts/infra/slurm.sh" down "$slurm_dir" >/dev/null 2>&1 || true' EXIT
"$here/scripts/infra/slurm.sh" up "$slurm_dir" --nodes 4 >"$out/slurm-up.log" 2>&1 ||
  { tail -n 20 "$out/slurm-up.log" >&2; exit 2; }
eval "$("$here/scripts/infra/slurm.sh" env "$slurm_dir")"
echo "host: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //'), $(nproc) CPUs; load $(cut -d' ' -f1-3 /proc/loadavg)"
i=0
for lanes in "${runs[@]}"; do
  i=$((i + 1))
  name="r$i-l$lanes"
  python3 "$here/scripts/bench/fleet_seed.py" "$lanes" "$out/$name" "$bin" 18190 "sf$i" >/dev/null
  start=$(date +%s.%N)
  rc=0
  "$bin" run "$out/$name/campaign.toml" --output "$out/$name/bundle" --no-progress --json \
    >"$out/$name/run.json" 2>"$out/$name/run.log" || rc=$?
  end=$(date +%s.%N)
  echo "$start $end $rc" >"$out/$name/wall"
  vrc=0
  "$bin" verify "$out/$name/bundle" >"$out/$name/verify.log" 2>&1 || vrc=$?
  echo "$vrc" >"$out/$name/verify.rc"
  # The restored incumbent serves on node1: cancelled, so the next run starts from nothing.
  scancel --name="sf$i-incumbent" 2>/dev/null || true
  for _ in $(seq 1 100); do
    [ -z "$(squeue -h -o %i)" ] && break
    sleep 0.2
  done
  echo "run $i ($lanes lane(s)): exit $rc, $(awk '{printf "%.1f", $2 - $1}' "$out/$name/wall") s, verify exit $vrc; load $(cut -d' ' -f1-3 /proc/loadavg)"
done
python3 - "$out" "${runs[@]}" <<'PY'
import json, sys
from pathlib import Path
out, runs = Path(sys.argv[1]), sys.argv[2:]
rows = []
for i, lanes in enumerate(runs, 1):
    d = out / f"r{i}-l{lanes}"
    start, end, rc = (d / "wall").read_text().split()
    wall = float(end) - float(start)
    b = d / "bundle"
    s = json.loads((b / "decision-summary.json").read_text())
    winner = s["decision"].get("winner_arm")
    fails = sorted((f["arm"], f["class"]) for f in s.get("failures", []))
    r = json.loads((b / "campaign-result.json").read_text())
    rows.append((lanes, wall, winner, fails, r))
    print(f"run {i}: {lanes} lane(s), wall {wall:.1f} s, winner {winner}, "
          f"complete {r['complete']}, verify exit {(d / 'verify.rc').read_text().strip()}")
    print(f"  failures: {', '.join(f'{a} {c}' for a, c in fails) or 'none'}")
    for t in r.get("schedule_timing", []):
        print(f"  schedule (invocation {t['invocation']}): some lane busy {t['busy_ms']/1e3:.1f} s of "
              f"{t['wall_ms']/1e3:.1f} s; no lane busy {t['no_lane_busy_ms']/1e3:.2f} s "
              f"({100*t['no_lane_busy_fraction']:.2f} % of the run; "
              f"{100*(wall - t['busy_ms']/1e3)/wall:.2f} % of the whole command's {wall:.1f} s)")
        for sp in t["runs"]:
            print(f"    {sp['folder']}: {sp['start_ms']/1e3:7.2f} s to {sp['end_ms']/1e3:7.2f} s")
    for l in r.get("lanes", []):
        print(f"  lane {l['id']}: {', '.join(l['arms'])}")
base = rows[0]
for lanes, wall, win, fails, _ in rows[1:]:
    same = win == base[2] and fails == base[3]
    print(f"{lanes} lane(s) vs {base[0]}: wall {100*wall/base[1]:.1f} % of the first run's; "
          f"verdict {'the same (winner and failure classes)' if same else 'DIFFERS'}")
PY
