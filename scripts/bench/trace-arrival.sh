#!/usr/bin/env bash
# Trace replay arrival error against issue 24's target (docs/benchmarks.md, "Trace replay:
# arrival error"): a trace replayed at speedup 1 and 4 keeps its schedule within p99 <= 1 ms at
# up to 200 requests/s. The accept check is this benchmark, never a timed test.
#
#   scripts/bench/trace-arrival.sh BIN [OUT_DIR] [REQUESTS] [RUNS] [compare]
#
# BIN: a bakeoff binary (a release build). OUT_DIR: the traces, each run's JSON and log, the
# engine's log (default: a fresh temporary folder). REQUESTS: per trace (default 400). RUNS: runs
# per row (default 1). `compare`: each run is followed by the same replay with
# `--max-concurrency 1000000`, a cap never reached, which makes the client's runtime send each
# request as every open loop did before the send thread (`client::pacer`): a before/after on one
# binary under the same host load (those rows say `runtime`; they do not count for the exit code).
# For each mean rate 50, 100 and 200 req/s and each speedup 1 and 4, a trace is written by
# scripts/make-trace.py at rate / speedup and replayed with `bakeoff bench --trace` against one
# reference engine (TTFT 5 ms, 2,000 tok/s per stream, prefix cache on) on this host. Prints the
# host, the load average before and after, and one line per run: rate, speedup, arrival error
# p50 / p99 / max (ms), whether p99 <= 1 ms, and whether the run warned that the client, not the
# server, was its limit (read lag, or the schedule lag itself at p99 >= 2 ms).
# Exit 0 when every run met the target, 1 when one did not, 2 on a usage or run failure.
set -euo pipefail
usage="usage: trace-arrival.sh BIN [OUT_DIR] [REQUESTS] [RUNS] [BENCH_ARG...]"
bin=${1:?$usage}
out=${2:-$(mktemp -d)}
requests=${3:-400}
runs=${4:-1}
variants=(send)
[ "${5:-}" = compare ] && variants=(send runtime)
here=$(cd "$(dirname "$0")/../.." && pwd)
[ -x "$bin" ] || { echo "trace-arrival: $bin is missing or not executable" >&2; exit 2; }
command -v jq >/dev/null || { echo "trace-arrival: needs jq" >&2; exit 2; }
mkdir -p "$out"
cat >"$out/engine.toml" <<'TOML'
model = "ref"
ttft_ms = 5
prefill_tok_s = 0
decode_tok_s = 2000
context_tokens = 65536
prefix_cache = true
TOML
"$bin" engine --port 0 --profile "$out/engine.toml" >"$out/engine.log" 2>&1 &
engine=$!
trap 'kill $engine 2>/dev/null; wait $engine 2>/dev/null || true' EXIT
url=
for _ in $(seq 1 100); do
    url=$(grep -o 'http://[^ ]*' "$out/engine.log" | head -1 || true)
    [ -n "$url" ] && break
    sleep 0.1
done
[ -n "$url" ] || { echo "trace-arrival: the engine printed no address, see $out/engine.log" >&2; exit 2; }
echo "host: $(nproc) CPUs,$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2-), kernel $(uname -r)"
echo "start: $(date -u +%FT%TZ), load: $(cut -d' ' -f1-3 /proc/loadavg)"
printf '%6s %7s %4s %8s %8s %8s %6s %-12s %s\n' rate speedup run p50_ms p99_ms max_ms met send_thread client_bound
failed=0
for rate in 50 100 200; do
    for speedup in 1 4; do
        trace="$out/trace-r$rate-x$speedup.jsonl"
        python3 "$here/scripts/make-trace.py" --requests "$requests" --block-tokens 64 --seed 3 \
            --rate "$(echo "$rate / $speedup" | bc -l)" >"$trace"
        for run in $(seq 1 "$runs"); do
            for v in "${variants[@]}"; do
                name="r$rate-x$speedup-$run-$v"
                cap=()
                [ "$v" = runtime ] && cap=(--max-concurrency 1000000)
                "$bin" bench "$url" --trace "$trace" --trace-speedup "$speedup" --trace-block-tokens 64 \
                    --ignore-eos --no-progress --json "$out/$name.json" "${cap[@]}" >"$out/$name.log" 2>&1 || {
                    echo "trace-arrival: bench failed ($name), see $out/$name.log" >&2
                    exit 2
                }
                read -r p50 p99 max thread bound < <(jq -r '[.trace.arrival_error_ms.p50, .trace.arrival_error_ms.p99,
                    .trace.arrival_error_ms.max, ([.. | .send_thread? // empty] | first // "runtime"),
                    ([.. | .warnings? // empty | .[] | select(test("the client, not the server"))] | length > 0)] | @tsv' "$out/$name.json")
                met=yes
                if awk -v p="$p99" 'BEGIN { exit !(p > 1.0) }'; then
                    met=no
                    [ "$v" = send ] && failed=1
                fi
                printf '%6s %7s %4s %8.3f %8.3f %8.3f %6s %-12s %s\n' "$rate" "$speedup" "$run" "$p50" "$p99" "$max" "$met" "$thread" "$bound"
            done
        done
    done
done
echo "end: $(date -u +%FT%TZ), load: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "files: $out"
exit $failed
