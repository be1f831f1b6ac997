#!/usr/bin/env bash
# Issue 23's acceptance figures for the bake analysis, as separate bakes (docs/benchmarks.md
# "Promotion bake"): CLEAN promotions of a clean winner (none may be rolled back) and DEGRADED
# promotions of a winner whose TTFT rises 20 % after its second bake interval (each must be rolled
# back within 2 intervals of the onset). Reference engines on one lane of this host: run it on a
# quiet machine (a contended CPU fails clean intervals: docs/benchmarks.md).
#
#   scripts/bench/promote-bakes.sh [BAKEOFF] [CLEAN] [DEGRADED]
#
# BAKEOFF: the binary (default target/release/bakeoff); CLEAN default 20, DEGRADED default 5.
# Prints one line per promotion (outcome, intervals with their TTFT p95) and the tally; the
# folders stay in the printed work directory.
set -euo pipefail
bin=$(cd "$(dirname "${1:-target/release/bakeoff}")" && pwd)/$(basename "${1:-target/release/bakeoff}")
clean=${2:-20}
degraded=${3:-5}
work=$(mktemp -d /tmp/promote-bakes.XXXXXX)
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
export BAKEOFF_LOCK_DIR=$work/locks
mkdir -p "$BAKEOFF_LOCK_DIR"
cd "$work"
# The degrading winner slows after its 41st request (the preflight's, then the bake's: in its
# second or third interval): +8 ms on 40 ms is +20 %.
printf 'model = "inc"\nttft_ms = 60\ndecode_tok_s = 200\ncontext_tokens = 4096\n' >inc.toml
printf 'model = "win"\nttft_ms = 40\ndecode_tok_s = 200\ncontext_tokens = 4096\n' >win.toml
printf 'model = "deg"\nttft_ms = 40\ndecode_tok_s = 200\ncontext_tokens = 4096\nslow_after_requests = 41\nslow_ttft_ms = 8\n' >deg.toml
arm() { printf '[[arms]]\nid = "%s"\nrole = "%s"\nengine = "reference"\nmodel = "m"\n[arms.reference]\nprofile = "%s.toml"\n' "$1" "$2" "$1"; }
{
    printf '[campaign]\nid = "bakes"\noutput = "out"\n[lane]\nhost = "127.0.0.1"\nport = %s\n' "$port"
    printf '[workload]\nranking_priority = ["ttft"]\nmatched_prompt_tokens = 64\nmax_tokens = 8\nwarm_repetitions = 20\nconcurrency = [1]\n'
    printf '[promotion]\nbake_s = 6\ninterval_s = 1\nrate = 20\nmin_requests = 10\nfailure_limit = 2\n'
    printf 'ttft_p95_within_pct = 15\ndecode_tok_s_within_pct = 15\ncanary_every = 0\n'
    printf '[gates]\npreflight = ["smoke"]\n[policy]\nrequired_gates = ["smoke", "restoration"]\n'
    arm inc incumbent; arm win candidate; arm deg candidate
} >campaign.toml

serve_incumbent() {
    setsid "$bin" engine --profile "$work/inc.toml" --host 127.0.0.1 --port "$port" \
        >/dev/null 2>&1 </dev/null &
    for _ in $(seq 100); do
        curl -sf "http://127.0.0.1:$port/health" >/dev/null 2>&1 && return 0
        sleep 0.1
    done
    echo "the incumbent did not come up on port $port" >&2
    exit 1
}
# What listens on the lane port (the kept winner) is stopped: the next promotion starts from the
# incumbent again.
free_lane() {
    local pid
    pid=$(ss -ltnpH "sport = :$port" | grep -o 'pid=[0-9]*' | head -n 1 | cut -d= -f2 || true)
    [ -z "$pid" ] || { kill "$pid"; while kill -0 "$pid" 2>/dev/null; do sleep 0.1; done; }
}

serve_incumbent
"$bin" run campaign.toml --no-progress >run.log 2>&1 || { tail -n 20 run.log; exit 1; }
summary() {
    python3 - "$1" <<'EOF'
import json, sys
r = json.load(open(sys.argv[1] + "/promotion.json"))
iv = " ".join(f"{i['outcome']}:{i.get('ttft_p95_ms') or 0:.1f}" for i in r["intervals"])
print(f"{r['phase']:<12} limit {r['bake']['baseline']['ttft_p95_ms'] * 1.15:.1f} ms  {iv}")
EOF
}
kept=0 rolled=0 caught=0
for i in $(seq "$clean"); do
    "$bin" promote out --arm win --confirm --output "clean-$i" >"clean-$i.log" 2>&1 || true
    line=$(summary "clean-$i")
    echo "clean $i: $line"
    case $line in promoted*) kept=$((kept + 1)); free_lane; serve_incumbent ;; *) rolled=$((rolled + 1)) ;; esac
done
for i in $(seq "$degraded"); do
    "$bin" promote out --arm deg --confirm --output "deg-$i" >"deg-$i.log" 2>&1 || true
    line=$(summary "deg-$i")
    echo "degraded $i: $line"
    # Caught within 2 intervals: from the first failed interval (the onset) on, every interval
    # failed and the bake ended at most 2 intervals in.
    ok=$(python3 -c "
import json
o = [i['outcome'] for i in json.load(open('deg-$i/promotion.json'))['intervals']]
k = o.index('fail') if 'fail' in o else len(o)
print(int(0 < len(o) - k <= 2 and set(o[k:]) == {'fail'}))")
    case $line in rolled-back*) caught=$((caught + ok)) ;; *) free_lane; serve_incumbent ;; esac
done
echo "clean winner: $kept of $clean kept, $rolled rolled back"
echo "20 % TTFT degradation: $caught of $degraded rolled back within 2 intervals of the onset"
free_lane
echo "work directory: $work"
