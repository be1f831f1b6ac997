#!/usr/bin/env bash
# Builds the peer client for scripts/bench/side-by-side.sh: vllm-bench and its own mock server
# (bench-overhead/mock-server) with server-side truth added (mock-truth.patch), from a git
# checkout or mirror of https://github.com/vllm-project/vllm-bench, outside this repository.
#
#   scripts/bench/build-peer.sh GIT_DIR_OR_URL DEST [COMMIT]
#
# GIT_DIR_OR_URL: a clone, a bare mirror, or the URL (the only step that may need the network).
# DEST: an empty or missing folder (e.g. /work/scratch-peer); nothing is written in this repo.
# COMMIT: defaults to the one docs/benchmarks.md was measured with.
set -euo pipefail
src=${1:?usage: build-peer.sh GIT_DIR_OR_URL DEST [COMMIT]}
dest=${2:?usage: build-peer.sh GIT_DIR_OR_URL DEST [COMMIT]}
commit=${3:-f3131823f167aa1e6f31a48be1ae15a18667a534}
here=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$dest"
if [ -d "$src" ]; then
    gd=$src; [ -d "$src/.git" ] && gd=$src/.git
else
    gd=$dest/.peer-git
    [ -d "$gd" ] || git clone --bare "$src" "$gd"
fi
full=$(git --git-dir="$gd" rev-parse "$commit^{commit}")
git --git-dir="$gd" archive "$full" | tar -x -C "$dest"
echo "$full" > "$dest/PEER_COMMIT"
(cd "$dest" && patch -p1 --forward < "$here/mock-truth.patch")
(cd "$dest/bench-overhead/mock-server" && cargo build --release)
(cd "$dest" && cargo build --release)
ls -la "$dest/target/release/vllm-bench" "$dest/bench-overhead/mock-server/target/release/mock-llm-server"
