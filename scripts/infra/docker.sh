#!/usr/bin/env bash
# A real Docker engine and a local registry for the container-lane tests, in a private folder.
#
#   scripts/infra/docker.sh install        docker.io + docker-registry from Debian (skipped when present)
#   scripts/infra/docker.sh up DIR         dockerd + registry under DIR (idempotent); prints the env
#   scripts/infra/docker.sh image DIR [BIN]
#                                          builds a FROM scratch image of BIN (default
#                                          target/debug/bakeoff) and its libraries, pushes it to the
#                                          registry, prints the digest-pinned reference
#   scripts/infra/docker.sh env DIR        prints `export DOCKER_HOST=…` and `BAKEOFF_REGISTRY=…`
#   scripts/infra/docker.sh status DIR     exit 0 when the daemon and registry under DIR answer
#   scripts/infra/docker.sh down DIR       stops everything by pid, removes DIR's state, checks
#                                          that no daemon, container, interface or firewall rule
#                                          is left (idempotent)
#
# No system service is used: dockerd runs with its own data root, exec root and socket under DIR,
# `--bridge=none --iptables=false --ip6tables=false`, so it creates no network interface and no
# firewall rule (containers use `--network=host`). The registry listens on 127.0.0.1 only.
set -euo pipefail

die() {
  echo "docker.sh: $*" >&2
  exit 1
}

cmd=${1:-}
dir=${2:-}
need_dir() {
  [ -n "$dir" ] || die "usage: $0 $cmd DIR"
  mkdir -p "$dir"
  dir=$(cd "$dir" && pwd)
}

alive() { [ -n "${1:-}" ] && kill -0 "$1" 2>/dev/null; }
pid_of() { [ -f "$1" ] && tr -dc 0-9 <"$1" || true; }

install() {
  local missing=()
  command -v dockerd >/dev/null 2>&1 || missing+=(docker.io)
  command -v docker-registry >/dev/null 2>&1 || missing+=(docker-registry)
  command -v docker >/dev/null 2>&1 || missing+=(docker.io)
  [ ${#missing[@]} -eq 0 ] && return 0
  local sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  echo "installing Debian's ${missing[*]} (the container-lane tests run a real Docker engine) ..." >&2
  # No service may start from the package scripts: the tests start their own daemon. A
  # policy-rc.d that refuses is put in place for the install when none is there.
  local policy=/usr/sbin/policy-rc.d added=""
  if [ ! -e "$policy" ]; then
    printf '#!/bin/sh\nexit 101\n' | $sudo tee "$policy" >/dev/null
    $sudo chmod 755 "$policy"
    added=1
  fi
  local log=/tmp/bakeoff-docker-install.log rc=0
  { $sudo apt-get update -qq &&
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"; } >"$log" 2>&1 || rc=$?
  [ -z "$added" ] || $sudo rm -f "$policy"
  if [ $rc -ne 0 ]; then
    tail -n 20 "$log" >&2
    die "could not install ${missing[*]}: run 'apt-get install -y docker.io docker-registry' and retry"
  fi
}

free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}

daemon_ok() { DOCKER_HOST="unix://$dir/docker.sock" docker version --format '{{.Server.Version}}' >/dev/null 2>&1; }
registry_ok() {
  local port
  port=$(cat "$dir/registry.port" 2>/dev/null) || return 1
  python3 - "$port" <<'EOF' 2>/dev/null
import sys, urllib.request
urllib.request.urlopen("http://127.0.0.1:%s/v2/" % sys.argv[1], timeout=2).read()
EOF
}

print_env() {
  echo "export DOCKER_HOST=unix://$dir/docker.sock"
  echo "export BAKEOFF_REGISTRY=127.0.0.1:$(cat "$dir/registry.port")"
}

up() {
  install
  exec 9>"$dir/.lock"
  flock 9
  if ! (alive "$(pid_of "$dir/dockerd.pid")" && daemon_ok); then
    stop_daemon
    mkdir -p "$dir/data" "$dir/exec"
    # setsid: the daemon does not belong to the caller's process group (a Ctrl-C in a test
    # run must not take it down halfway; `down` stops it).
    setsid dockerd --data-root "$dir/data" --exec-root "$dir/exec" -H "unix://$dir/docker.sock" \
      --pidfile "$dir/dockerd.pid" --bridge=none --iptables=false --ip6tables=false --ip-masq=false \
      --userland-proxy=false >"$dir/dockerd.log" 2>&1 </dev/null 9>&- &
    local i
    for i in $(seq 1 300); do
      daemon_ok && break
      sleep 0.1
    done
    daemon_ok || {
      tail -n 20 "$dir/dockerd.log" >&2
      die "dockerd did not answer on $dir/docker.sock within 30 s (log: $dir/dockerd.log)"
    }
  fi
  if ! (alive "$(pid_of "$dir/registry.pid")" && registry_ok); then
    local rp
    rp=$(pid_of "$dir/registry.pid")
    if alive "$rp"; then kill "$rp" 2>/dev/null || true; fi
    local port
    port=$(free_port)
    mkdir -p "$dir/registry"
    cat >"$dir/registry.yml" <<EOF
version: 0.1
log:
  level: warn
storage:
  filesystem:
    rootdirectory: $dir/registry
http:
  addr: 127.0.0.1:$port
EOF
    echo "$port" >"$dir/registry.port"
    setsid docker-registry serve "$dir/registry.yml" >"$dir/registry.log" 2>&1 </dev/null 9>&- &
    echo $! >"$dir/registry.pid"
    local i
    for i in $(seq 1 100); do
      registry_ok && break
      sleep 0.1
    done
    registry_ok || {
      tail -n 20 "$dir/registry.log" >&2
      die "the registry did not answer on 127.0.0.1:$port within 10 s (log: $dir/registry.log)"
    }
  fi
  print_env
}

image() {
  local bin=${3:-target/debug/bakeoff}
  [ -x "$bin" ] || die "no executable $bin: build it first (cargo build)"
  bin=$(cd "$(dirname "$bin")" && pwd)/$(basename "$bin")
  exec 9>"$dir/.lock"
  flock 9
  daemon_ok && registry_ok || die "the daemon under $dir is not up: run '$0 up $dir' first"
  export DOCKER_HOST="unix://$dir/docker.sock"
  local reg tag ref_file
  reg=127.0.0.1:$(cat "$dir/registry.port")
  tag=$(sha256sum "$bin" | cut -c1-16)
  ref_file="$dir/image-$tag.ref"
  if [ -s "$ref_file" ] && docker image inspect "$(cat "$ref_file")" >/dev/null 2>&1; then
    cat "$ref_file"
    return 0
  fi
  local ctx="$dir/ctx"
  rm -rf "$ctx"
  mkdir -p "$ctx/usr/local/bin" "$ctx/profiles"
  # Without its debug sections (a debug build is ~270 MB, stripped ~30 MB): the same code.
  if command -v strip >/dev/null 2>&1; then
    strip --strip-debug -o "$ctx/usr/local/bin/bakeoff" "$bin"
  else
    cp "$bin" "$ctx/usr/local/bin/bakeoff"
  fi
  local lib
  for lib in $(ldd "$bin" | grep -o '/[^ ]*'); do
    mkdir -p "$ctx$(dirname "$lib")"
    cp -L "$lib" "$ctx$lib"
  done
  cat >"$ctx/Dockerfile" <<'EOF'
FROM scratch
COPY . /
ENTRYPOINT ["/usr/local/bin/bakeoff"]
EOF
  printf 'Dockerfile\n' >"$ctx/.dockerignore"
  local name="$reg/bakeoff-reference:$tag"
  DOCKER_BUILDKIT=0 docker build -q -t "$name" "$ctx" >"$dir/build.log" 2>&1 || {
    tail -n 20 "$dir/build.log" >&2
    die "docker build failed (log: $dir/build.log)"
  }
  docker push "$name" >"$dir/push.log" 2>&1 || {
    tail -n 20 "$dir/push.log" >&2
    die "docker push to $reg failed (log: $dir/push.log)"
  }
  local digest
  digest=$(grep -o 'sha256:[0-9a-f]\{64\}' "$dir/push.log" | tail -n 1)
  [ -n "$digest" ] || die "docker push printed no digest (log: $dir/push.log)"
  rm -rf "$ctx"
  echo "$name@$digest" | tee "$ref_file"
}

# Stops dockerd (SIGTERM: it stops its containers and its containerd), then anything it left
# under DIR (containerd, shims), by pid.
stop_daemon() {
  local pid
  pid=$(pid_of "$dir/dockerd.pid")
  if alive "$pid"; then
    kill -TERM "$pid" 2>/dev/null || true
    local i
    for i in $(seq 1 200); do
      alive "$pid" || break
      sleep 0.1
    done
    alive "$pid" && kill -KILL "$pid" 2>/dev/null || true
  fi
  # containerd and its shims that dockerd started for this folder (their command lines name it).
  local p
  for p in $(leftover_pids); do
    kill -TERM "$p" 2>/dev/null || true
  done
  sleep 0.5
  for p in $(leftover_pids); do
    kill -KILL "$p" 2>/dev/null || true
  done
  rm -f "$dir/dockerd.pid" "$dir/docker.sock"
}

leftover_pids() {
  local f p
  for f in /proc/[0-9]*/cmdline; do
    p=${f#/proc/}
    p=${p%/cmdline}
    [ "$p" = "$$" ] && continue
    if { tr '\0' ' ' <"$f"; } 2>/dev/null | grep -q -- "$dir/\(exec\|data\|docker.sock\|registry\)"; then
      echo "$p"
    fi
  done
}

down() {
  [ -d "$dir" ] || return 0
  exec 9>"$dir/.lock"
  flock 9
  local rp
  rp=$(pid_of "$dir/registry.pid")
  if alive "$rp"; then
    kill -TERM "$rp" 2>/dev/null || true
    for _ in $(seq 1 50); do
      alive "$rp" || break
      sleep 0.1
    done
    alive "$rp" && kill -KILL "$rp" 2>/dev/null || true
  fi
  stop_daemon
  # Mounts dockerd left under the folder (overlay layers, its exec root), innermost first.
  local m
  for m in $(awk -v d="$dir/" 'index($2, d) == 1 {print $2}' /proc/self/mounts | sort -r); do
    umount -l "$m" 2>/dev/null || true
  done
  rm -rf "$dir/data" "$dir/exec" "$dir/registry" "$dir/ctx" "$dir"/*.pid "$dir"/*.ref \
    "$dir/registry.port" "$dir/registry.yml" "$dir/docker.sock"
  check_clean
}

# Nothing of ours is left: no process, no mount, no docker0 interface, no DOCKER firewall chain.
check_clean() {
  local bad=()
  [ -z "$(leftover_pids)" ] || bad+=("processes $(leftover_pids | tr '\n' ' ')")
  awk -v d="$dir/" 'index($2, d) == 1 {found=1} END {exit !found}' /proc/self/mounts && bad+=("mounts under $dir")
  ip link show docker0 >/dev/null 2>&1 && bad+=("interface docker0")
  if command -v iptables >/dev/null 2>&1; then
    iptables -S 2>/dev/null | grep -q DOCKER && bad+=("iptables DOCKER chains")
    iptables -S FORWARD 2>/dev/null | grep -q -- '-P FORWARD DROP' && bad+=("iptables FORWARD policy DROP")
  fi
  if [ ${#bad[@]} -gt 0 ]; then
    die "left behind after down: ${bad[*]}"
  fi
  echo "docker.sh: down: no daemon, container, mount, interface or firewall rule left" >&2
}

case "$cmd" in
install) install ;;
up)
  need_dir
  up
  ;;
image)
  need_dir
  image "$@"
  ;;
env)
  need_dir
  [ -f "$dir/registry.port" ] || die "nothing is up under $dir"
  print_env
  ;;
status)
  need_dir
  daemon_ok && registry_ok
  ;;
down)
  [ -n "$dir" ] || die "usage: $0 down DIR"
  [ -d "$dir" ] && dir=$(cd "$dir" && pwd)
  down
  ;;
*)
  sed -n '2,14p' "$0" >&2
  exit 2
  ;;
esac
