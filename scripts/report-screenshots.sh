#!/usr/bin/env bash
# Regenerates the report screenshots in docs/report/: the seed replay's report
# (docs/report/seed-replay.png), a concurrency sweep's (docs/report/sweep.png, from
# examples/campaigns/report-sweep.toml) and `bakeoff bench --html` of a rate sweep against the
# reference engine with --slo and --find-saturation (docs/report/bench-rate-sweep.png, ~20 s),
# taken with headless Chromium.
#
#   scripts/report-screenshots.sh                      # runs both campaigns (~5 min), then shoots
#   scripts/report-screenshots.sh SEED_BUNDLE SWEEP_BUNDLE   # re-renders existing bundles, then shoots
#   scripts/report-screenshots.sh --bench-only         # only the bench rate sweep
#
# Runs the campaigns with target/debug/bakeoff (built first; BAKEOFF_BIN overrides), stops the
# incumbent each run restores, checks that every chart of each page rendered (the page's title is
# `ok` only then; its #chart-status says which chart failed) and sizes each screenshot to the page.
# Installs Debian's chromium with apt-get when it is missing.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
out="$root/docs/report"
mkdir -p "$out"

if ! command -v chromium >/dev/null 2>&1; then
  echo "installing Debian's chromium ..." >&2
  SUDO=""
  [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq chromium >/dev/null
fi
chromium_bin=$(command -v chromium)

if [ -z "${BAKEOFF_BIN:-}" ]; then
  cargo build --quiet
  BAKEOFF_BIN="$root/target/debug/bakeoff"
fi
export BAKEOFF_BIN

work=$(mktemp -d /tmp/bakeoff-screenshots.XXXXXX)
engine_pid=""
cleanup() {
  if [ -n "$engine_pid" ]; then kill "$engine_pid" 2>/dev/null || true; fi
  rm -rf "$work"
}
trap cleanup EXIT

# Stops the incumbent a finished run restored (its process group, from restoration-launch.json).
stop_restored() {
  local pid
  pid=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1])).get("pid") or "")' "$1/restoration-launch.json" 2>/dev/null || true)
  if [ -n "$pid" ]; then kill -TERM -- "-$pid" 2>/dev/null || kill -TERM "$pid" 2>/dev/null || true; fi
}

# run_campaign FILE BUNDLE: runs it; the bundle must come out complete.
run_campaign() {
  echo "running $1 (bundle $2) ..." >&2
  local rc=0
  "$BAKEOFF_BIN" run "$1" --output "$2" --no-progress >"$2.run.log" 2>&1 || rc=$?
  stop_restored "$2"
  if [ "$rc" -ne 0 ]; then
    tail -n 20 "$2.run.log" >&2
    echo "bakeoff run $1 failed (exit $rc)" >&2
    exit 1
  fi
}

chrome() {
  local profile="$work/profile-$RANDOM"
  timeout 120 "$chromium_bin" --headless --no-sandbox --disable-gpu --no-first-run \
    --disable-background-networking --disable-component-update --disable-sync \
    --hide-scrollbars --virtual-time-budget=5000 --user-data-dir="$profile" "$@" 2>/dev/null
}

# shoot BUNDLE NAME: checks the bundle's report.html rendered every chart, then screenshots it.
shoot() {
  shoot_page "$1/report.html" "$2"
}

# shoot_page PAGE NAME: checks the page rendered every chart, then screenshots the whole page.
shoot_page() {
  local page="$1" dom="$work/$2.dom"
  chrome --window-size=1280,1000 --dump-dom "file://$page" >"$dom"
  local height
  height=$(python3 - "$dom" <<'EOF'
import html, json, re, sys
dom = open(sys.argv[1]).read()
title = re.search(r"<title>(.*?)</title>", dom, re.S)
status = re.search(r'<pre id="chart-status" hidden="">(.*?)</pre>', dom, re.S)
if not title or title.group(1) != "ok" or not status:
    sys.exit("the report did not render every chart: %s\n%s" % (
        title.group(1) if title else "no title", html.unescape(status.group(1)) if status else "no #chart-status"))
s = json.loads(html.unescape(status.group(1)))
print(int(s["page_height"]) + 16)
EOF
)
  chrome --window-size="1280,$height" --screenshot="$out/$2.png" "file://$page"
  echo "$out/$2.png: 1280x$height, $(wc -c <"$out/$2.png") bytes" >&2
}

# A rate sweep of `bakeoff bench --html` against a reference engine that serves two requests at a
# time (its KV cache holds two), each ~30 ms to the first token and 24 tokens at 200 tok/s: the
# lower rates hold the TTFT SLO, the higher ones queue and break it.
bench_sweep() {
  echo "running a bench rate sweep against the reference engine ..." >&2
  printf '%s\n' 'model = "ref"' 'ttft_ms = 30' 'prefill_tok_s = 0' 'decode_tok_s = 200' \
    'concurrency_slowdown = 0.2' 'context_tokens = 8192' 'kv_tokens = 200' >"$work/ref.toml"
  "$BAKEOFF_BIN" engine --port 0 --profile "$work/ref.toml" >"$work/engine.out" 2>"$work/engine.err" &
  engine_pid=$!
  local url=""
  for _ in $(seq 1 100); do
    url=$(grep -o 'http://[0-9.:]*' "$work/engine.out" 2>/dev/null | head -n1 || true)
    [ -n "$url" ] && break
    sleep 0.1
  done
  [ -n "$url" ] || { cat "$work/engine.err" >&2; echo "the reference engine did not start" >&2; exit 1; }
  "$BAKEOFF_BIN" bench "$url" --rate 2,4,8,16,32 --requests 32 --max-tokens 24 --prompt-tokens 64 \
    --ignore-eos --seed 1 --slo ttft_p95=100ms,e2e_p99=600ms --find-saturation --no-progress \
    --html "$work/bench-rate-sweep.html" >"$work/bench.log" 2>&1 || { tail -n 20 "$work/bench.log" >&2; exit 1; }
  kill "$engine_pid" 2>/dev/null || true
  wait "$engine_pid" 2>/dev/null || true
  engine_pid=""
}

if [ "${1:-}" = "--bench-only" ]; then
  bench_sweep
  shoot_page "$work/bench-rate-sweep.html" bench-rate-sweep
  exit 0
elif [ $# -eq 2 ]; then
  seed="$work/seed-replay" sweep="$work/sweep"
  cp -r "$1" "$seed"
  cp -r "$2" "$sweep"
  "$BAKEOFF_BIN" report "$seed" >/dev/null
  "$BAKEOFF_BIN" report "$sweep" >/dev/null
elif [ $# -eq 0 ]; then
  seed="$work/seed-replay" sweep="$work/sweep"
  run_campaign examples/seed-replay/campaign.toml "$seed"
  run_campaign examples/campaigns/report-sweep.toml "$sweep"
else
  echo "usage: $0 [SEED_BUNDLE SWEEP_BUNDLE | --bench-only]" >&2
  exit 2
fi
shoot "$seed" seed-replay
shoot "$sweep" sweep
bench_sweep
shoot_page "$work/bench-rate-sweep.html" bench-rate-sweep
