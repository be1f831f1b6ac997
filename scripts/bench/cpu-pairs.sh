#!/usr/bin/env bash
# Client CPU per chunk against the bare-reader floor, two builds run alternately
# (docs/benchmarks.md, "CPU per chunk"). Each run is one `bakeoff selftest --levels LEVEL`; the
# floor is measured inside each run, so the ratio client ÷ floor is compared run by run.
#
#   scripts/bench/cpu-pairs.sh OLD NEW N [OUT_DIR] [LEVEL]
#
# OLD, NEW: two bakeoff binaries (release builds). N: pairs (OLD then NEW, N times).
# OUT_DIR: each run's selftest JSON, OLD-i.json / NEW-i.json (default: a fresh temporary folder).
# LEVEL: the stream count (default 256).
# Prints one line per run and the medians per build: client CPU per chunk (µs, user+sys), its
# user part, the floor's, client ÷ floor, and the added delay p99 (ms). python3, standard library.
set -euo pipefail
usage="usage: cpu-pairs.sh OLD NEW N [OUT_DIR] [LEVEL]"
old=${1:?$usage}
new=${2:?$usage}
n=${3:?$usage}
out=${4:-$(mktemp -d)}
level=${5:-256}
for f in "$old" "$new"; do
    [ -x "$f" ] || { echo "cpu-pairs: $f is missing or not executable" >&2; exit 2; }
done
ulimit -n 65536 2>/dev/null || ulimit -n "$(ulimit -Hn)"
mkdir -p "$out"
echo "host: $(nproc) CPUs,$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2-), kernel $(uname -r)"
echo "start: $(date -u +%FT%TZ), load: $(cut -d' ' -f1-3 /proc/loadavg)"
for i in $(seq 1 "$n"); do
    for b in old new; do
        bin=$old
        [ "$b" = new ] && bin=$new
        "$bin" selftest --levels "$level" --json "$out/$b-$i.json" >"$out/$b-$i.log" 2>&1 || {
            echo "cpu-pairs: $bin selftest failed (run $i), see $out/$b-$i.log" >&2
            exit 1
        }
    done
done
echo "end: $(date -u +%FT%TZ), load: $(cut -d' ' -f1-3 /proc/loadavg)"
python3 - "$out" "$n" <<'PY'
import json, statistics, sys
out, n = sys.argv[1], int(sys.argv[2])
rows = {"old": [], "new": []}
print(f"{'run':>8} {'client µs':>10} {'user µs':>8} {'floor µs':>9} {'ratio':>6} {'add p99 ms':>10}")
for i in range(1, n + 1):
    for b in ("old", "new"):
        lv = json.load(open(f"{out}/{b}-{i}.json"))["levels"][0]
        floor = lv["floor_cpu_user_us_per_chunk"] + lv["floor_cpu_sys_us_per_chunk"]
        r = (lv["client_cpu_us_per_chunk"], lv["client_cpu_user_us_per_chunk"], floor,
             lv["client_cpu_us_per_chunk"] / floor, lv["added_delay_ms"]["p99"])
        rows[b].append(r)
        print(f"{b}-{i:<4} {r[0]:10.2f} {r[1]:8.2f} {r[2]:9.2f} {r[3]:6.2f} {r[4]:10.3f}")
print("median:")
for b in ("old", "new"):
    cols = list(zip(*rows[b]))
    m = [statistics.median(c) for c in cols]
    lo, hi = min(cols[3]), max(cols[3])
    print(f"{b:>8} {m[0]:10.2f} {m[1]:8.2f} {m[2]:9.2f} {m[3]:6.2f} {m[4]:10.3f}   ratio range {lo:.2f}-{hi:.2f}")
print(f"files: {out}")
PY
