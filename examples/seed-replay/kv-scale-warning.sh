#!/bin/sh
# Writes the engine log line an SGLang FP8-KV checkpoint without calibrated scales prints, then
# runs the reference engine (`bakeoff engine ARGS`). The campaign declares the line a quality risk.
echo "WARNING kv_cache: Using KV cache scaling factor 1.0 (no calibrated k/v scales found in the checkpoint)" >&2
here=$(dirname "$0")
for b in "$BAKEOFF_BIN" "$here/../../target/debug/bakeoff" "$here/../../target/release/bakeoff" "$(command -v bakeoff)"; do
    if [ -n "$b" ] && [ -x "$b" ]; then exec "$b" engine "$@"; fi
done
echo "kv-scale-warning.sh: no bakeoff executable found; set BAKEOFF_BIN" >&2
exit 127
