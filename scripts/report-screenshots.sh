#!/usr/bin/env bash
# Regenerates the report screenshots in docs/report/: the seed replay's report
# (docs/report/seed-replay.png) and a concurrency sweep's (docs/report/sweep.png, from
# examples/campaigns/report-sweep.toml), taken with headless Chromium.
#
#   scripts/report-screenshots.sh                      # runs both campaigns (~5 min), then shoots
#   scripts/report-screenshots.sh SEED_BUNDLE SWEEP_BUNDLE   # re-renders existing bundles, then shoots
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
trap 'rm -rf "$work"' EXIT

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

# shoot BUNDLE NAME: checks the page rendered every chart, then screenshots the whole page.
shoot() {
  local page="$1/report.html" dom="$work/$2.dom"
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

if [ $# -eq 2 ]; then
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
  echo "usage: $0 [SEED_BUNDLE SWEEP_BUNDLE]" >&2
  exit 2
fi
shoot "$seed" seed-replay
shoot "$sweep" sweep
