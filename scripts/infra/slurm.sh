#!/usr/bin/env bash
# A real one-node Slurm cluster in a private folder, for the Slurm lane's tests.
#
#   scripts/infra/slurm.sh install    apt-get install slurmctld slurmd slurm-client munge (idempotent)
#   scripts/infra/slurm.sh up DIR     munged + slurmctld + slurmd with their state, sockets, pids and
#                                     logs under DIR, on free ports; waits until the node is idle
#   scripts/infra/slurm.sh env DIR    prints `export SLURM_CONF=DIR/slurm.conf` (eval it)
#   scripts/infra/slurm.sh down DIR   cancels every job, stops the three daemons by pid, leaves
#                                     nothing running
#
# Nothing of the system's own munge or Slurm services is used or touched: the daemons run from
# DIR only (munge on its own socket, Slurm with SLURM_CONF=DIR/slurm.conf).
set -euo pipefail

die() { echo "slurm.sh: $*" >&2; exit 1; }

install() {
  local missing=()
  for b in slurmctld slurmd sbatch munged; do
    command -v "$b" >/dev/null 2>&1 || missing+=("$b")
  done
  [ ${#missing[@]} -eq 0 ] && return 0
  local sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  echo "installing Debian's slurmctld slurmd slurm-client munge (missing: ${missing[*]}) ..." >&2
  local log=/tmp/bakeoff-slurm-install.log
  if ! { $sudo apt-get install -y -qq slurmctld slurmd slurm-client munge ||
         { $sudo apt-get update -qq && $sudo apt-get install -y -qq slurmctld slurmd slurm-client munge; }; } \
       >"$log" 2>&1 </dev/null; then
    tail -n 20 "$log" >&2
    die "could not install Slurm: run 'apt-get install -y slurmctld slurmd slurm-client munge' and retry"
  fi
  # The packages may start their system services; this script never uses them.
  for s in slurmctld slurmd munge; do
    $sudo systemctl stop "$s" >/dev/null 2>&1 || true
  done
}

# A TCP port nothing listens on (and no other port of this cluster uses).
free_port() {
  local used=" $* "
  while :; do
    local p=$(( (RANDOM % 20000) + 30000 ))
    case "$used" in *" $p "*) continue ;; esac
    if ! ss -Htln "sport = :$p" 2>/dev/null | grep -q .; then
      echo "$p"; return
    fi
  done
}

alive() { [ -f "$1" ] && kill -0 "$(cat "$1")" 2>/dev/null; }

up() {
  local d="$1"
  mkdir -p "$d"
  d="$(cd "$d" && pwd)"
  install
  if alive "$d/slurmctld.pid" && alive "$d/slurmd.pid" && alive "$d/munge/munged.pid"; then
    echo "slurm.sh: already up in $d" >&2
    return 0
  fi
  down "$d" >/dev/null 2>&1 || true
  mkdir -p "$d/state" "$d/spool" "$d/munge"
  chown munge:munge "$d/munge"
  chmod 0755 "$d/munge"
  local host; host="$(hostname -s)"
  local p1 p2 p3
  p1=$(free_port); p2=$(free_port "$p1"); p3=$(free_port "$p1" "$p2")
  runuser -u munge -- /usr/sbin/munged --socket "$d/munge/munge.sock" \
    --pid-file "$d/munge/munged.pid" --log-file "$d/munge/munged.log" \
    --seed-file "$d/munge/munged.seed" --key-file /etc/munge/munge.key
  cat >"$d/slurm.conf" <<EOF
ClusterName=bakeoff
SlurmctldHost=$host(127.0.0.1)
SlurmctldPort=$p1
SlurmdPort=$p2
SrunPortRange=$p3-$((p3 + 20))
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket=$d/munge/munge.sock
CredType=cred/munge
StateSaveLocation=$d/state
SlurmdSpoolDir=$d/spool
SlurmctldPidFile=$d/slurmctld.pid
SlurmdPidFile=$d/slurmd.pid
SlurmctldLogFile=$d/slurmctld.log
SlurmdLogFile=$d/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
ReturnToService=2
SchedulerParameters=sched_interval=1
MinJobAge=600
KillWait=5
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
NodeName=$host NodeAddr=127.0.0.1 CPUs=$(nproc) RealMemory=1000 State=UNKNOWN
PartitionName=debug Nodes=$host Default=YES MaxTime=INFINITE State=UP
EOF
  export SLURM_CONF="$d/slurm.conf"
  setsid slurmctld -D -i -f "$SLURM_CONF" >>"$d/slurmctld.out" 2>&1 </dev/null &
  setsid slurmd -D -N "$host" -f "$SLURM_CONF" >>"$d/slurmd.out" 2>&1 </dev/null &
  local i
  for i in $(seq 1 300); do
    if sinfo -h -o '%t' 2>/dev/null | grep -qx 'idle'; then
      echo "slurm.sh: up in $d (slurmctld :$p1, slurmd :$p2, node $host idle)" >&2
      return 0
    fi
    sleep 0.1
  done
  tail -n 20 "$d"/slurmctld.log "$d"/slurmd.log >&2 || true
  down "$d" || true
  die "the node did not become idle within 30 s (logs above)"
}

stop_pid() {
  local f="$1"
  [ -f "$f" ] || return 0
  local pid; pid="$(cat "$f")"
  if kill -0 "$pid" 2>/dev/null; then
    kill -TERM "$pid" 2>/dev/null || true
    local i
    for i in $(seq 1 100); do
      kill -0 "$pid" 2>/dev/null || break
      sleep 0.1
    done
    kill -0 "$pid" 2>/dev/null && kill -KILL "$pid" 2>/dev/null || true
  fi
  rm -f "$f"
}

down() {
  local d="$1"
  [ -d "$d" ] || return 0
  d="$(cd "$d" && pwd)"
  if [ -f "$d/slurm.conf" ] && alive "$d/slurmctld.pid"; then
    export SLURM_CONF="$d/slurm.conf"
    scancel --full --signal=KILL --user="$(id -un)" >/dev/null 2>&1 || true
    scancel --user="$(id -un)" >/dev/null 2>&1 || true
    local i
    for i in $(seq 1 100); do
      [ -z "$(squeue -h -o %i 2>/dev/null)" ] && break
      sleep 0.1
    done
  fi
  stop_pid "$d/slurmd.pid"
  # slurmstepd of a job slurmd could not end: they name DIR's spool on their command line.
  pkill_spool "$d"
  stop_pid "$d/slurmctld.pid"
  stop_pid "$d/munge/munged.pid"
  echo "slurm.sh: down ($d)" >&2
}

# Ends the slurmstepd processes of this cluster only, by pid (read from /proc).
pkill_spool() {
  local d="$1" p
  for p in /proc/[0-9]*; do
    [ -r "$p/cmdline" ] || continue
    if tr '\0' ' ' <"$p/cmdline" 2>/dev/null | grep -q "^slurmstepd" &&
       tr '\0' '\n' <"$p/environ" 2>/dev/null | grep -qx "SLURM_CONF=$d/slurm.conf"; then
      kill -KILL "${p#/proc/}" 2>/dev/null || true
    fi
  done
}

case "${1:-}" in
  install) install ;;
  up) [ -n "${2:-}" ] || die "usage: slurm.sh up DIR"; up "$2" ;;
  down) [ -n "${2:-}" ] || die "usage: slurm.sh down DIR"; down "$2" ;;
  env) [ -n "${2:-}" ] || die "usage: slurm.sh env DIR"; echo "export SLURM_CONF=$(cd "$2" && pwd)/slurm.conf" ;;
  *) die "usage: slurm.sh install | up DIR | down DIR | env DIR" ;;
esac
