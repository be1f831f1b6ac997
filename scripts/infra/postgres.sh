#!/usr/bin/env bash
# A real PostgreSQL server in a private folder, for the history store's tests (tests/infra).
#
#   scripts/infra/postgres.sh install    apt-get install postgresql when initdb is missing (idempotent)
#   scripts/infra/postgres.sh up DIR     initdb + pg_ctl start as the postgres user, data, socket and
#                                        log under DIR, on a free port on 127.0.0.1; password
#                                        authentication (scram-sha-256) for role `bakeoff`, its
#                                        password in DIR/password (mode 600); prints the env line
#   scripts/infra/postgres.sh env DIR    prints `export BAKEOFF_TEST_POSTGRES=postgres://bakeoff@127.0.0.1:PORT/postgres`
#   scripts/infra/postgres.sh down DIR   pg_ctl stop (fast, then immediate) and removes DIR
#
# PostgreSQL refuses to run as root: the server runs as `postgres`, and DIR belongs to it. The
# system's own cluster (if any) is neither used nor touched.
set -euo pipefail

die() { echo "postgres.sh: $*" >&2; exit 1; }

bindir() {
  if command -v initdb >/dev/null 2>&1; then dirname "$(command -v initdb)"; return; fi
  local d
  for d in /usr/lib/postgresql/*/bin; do
    [ -x "$d/initdb" ] && { echo "$d"; return; }
  done
  return 1
}

install() {
  bindir >/dev/null && return 0
  local sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  echo "installing Debian's postgresql (initdb is missing) ..." >&2
  local log=/tmp/bakeoff-postgres-install.log
  if ! { $sudo apt-get install -y -qq postgresql ||
         { $sudo apt-get update -qq && $sudo apt-get install -y -qq postgresql; }; } \
       >"$log" 2>&1 </dev/null; then
    tail -n 20 "$log" >&2
    die "could not install PostgreSQL: run 'apt-get install -y postgresql' and retry"
  fi
}

free_port() {
  while :; do
    local p=$(( (RANDOM % 20000) + 30000 ))
    if ! ss -Htln "sport = :$p" 2>/dev/null | grep -q .; then
      echo "$p"; return
    fi
  done
}

as_pg() { runuser -u postgres -- "$@"; }

running() { [ -f "$1/data/postmaster.pid" ] && as_pg "$B/pg_ctl" -D "$1/data" status >/dev/null 2>&1; }

env_line() { echo "export BAKEOFF_TEST_POSTGRES=postgres://bakeoff@127.0.0.1:$(cat "$1/port")/postgres"; }

up() {
  local d="$1"
  install
  B="$(bindir)" || die "initdb not found after install"
  mkdir -p "$d"
  d="$(cd "$d" && pwd)"
  if running "$d"; then
    echo "postgres.sh: already up in $d" >&2
    env_line "$d"
    return 0
  fi
  rm -rf "$d/data"
  chown postgres:postgres "$d"
  chmod 0700 "$d"
  head -c 18 /dev/urandom | base64 | tr -d '/+=' >"$d/password"
  chown postgres:postgres "$d/password"
  chmod 0600 "$d/password"
  as_pg "$B/initdb" -D "$d/data" -A scram-sha-256 -U bakeoff --pwfile="$d/password" >"$d/initdb.log" 2>&1 ||
    { tail -n 20 "$d/initdb.log" >&2; die "initdb failed (log: $d/initdb.log)"; }
  local port; port=$(free_port)
  echo "$port" >"$d/port"
  as_pg "$B/pg_ctl" -D "$d/data" -w -t 30 -l "$d/log" \
    -o "-p $port -k $d -c listen_addresses=127.0.0.1 -c fsync=off" start >/dev/null ||
    { tail -n 20 "$d/log" >&2; die "the server did not start (log: $d/log)"; }
  echo "postgres.sh: up on 127.0.0.1:$port ($d)" >&2
  env_line "$d"
}

down() {
  local d="$1"
  [ -d "$d" ] || return 0
  d="$(cd "$d" && pwd)"
  B="$(bindir)" || true
  if [ -n "${B:-}" ] && [ -f "$d/data/postmaster.pid" ]; then
    as_pg "$B/pg_ctl" -D "$d/data" -m fast -w -t 20 stop >/dev/null 2>&1 ||
      as_pg "$B/pg_ctl" -D "$d/data" -m immediate -w -t 10 stop >/dev/null 2>&1 || true
  fi
  rm -rf "$d"
  echo "postgres.sh: down ($d)" >&2
}

case "${1:-}" in
  install) install ;;
  up) [ -n "${2:-}" ] || die "usage: postgres.sh up DIR"; up "$2" ;;
  down) [ -n "${2:-}" ] || die "usage: postgres.sh down DIR"; down "$2" ;;
  env) [ -n "${2:-}" ] || die "usage: postgres.sh env DIR"; env_line "$(cd "$2" && pwd)" ;;
  *) die "usage: postgres.sh install | up DIR | down DIR | env DIR" ;;
esac
