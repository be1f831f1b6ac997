#!/usr/bin/env bash
# A real one-node Slurm cluster in a private folder, for the Slurm lane's tests.
#
#   scripts/infra/slurm.sh install    apt-get install slurmctld slurmd slurm-client munge (idempotent)
#   scripts/infra/slurm.sh up DIR     munged + slurmctld + slurmd with their state, sockets, pids and
#                                     logs under DIR, on free ports; waits until the node is idle
#   scripts/infra/slurm.sh up DIR --nodes N
#                                     the same host node (partition `debug`, the default: one-node
#                                     campaigns run there unchanged) plus N nodes (node1..nodeN,
#                                     partition `fleet`), each slurmd in its own network namespace
#                                     with its own address on a private bridge that exists only
#                                     inside this machine; DIR/nodes lists "NAME ADDRESS" per
#                                     namespaced node, DIR/net.env what `down` removes
#   scripts/infra/slurm.sh env DIR    prints `export SLURM_CONF=DIR/slurm.conf` (eval it)
#   scripts/infra/slurm.sh down DIR   cancels every job, stops the daemons by pid, removes the
#                                     namespaces, veth pairs and bridge it made; leaves nothing
#                                     running
#
# Nothing of the system's own munge or Slurm services is used or touched: the daemons run from
# DIR only (munge on its own socket, Slurm with SLURM_CONF=DIR/slurm.conf).
set -euo pipefail

die() { echo "slurm.sh: $*" >&2; exit 1; }

install() {
  local missing=()
  # ip (iproute2) and nsenter (util-linux): the multi-node cluster's namespaces.
  for b in slurmctld slurmd sbatch munged ip nsenter; do
    command -v "$b" >/dev/null 2>&1 || missing+=("$b")
  done
  [ ${#missing[@]} -eq 0 ] && return 0
  local sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  echo "installing Debian's slurmctld slurmd slurm-client munge iproute2 (missing: ${missing[*]}) ..." >&2
  local log=/tmp/bakeoff-slurm-install.log
  if ! { $sudo apt-get install -y -qq slurmctld slurmd slurm-client munge iproute2 util-linux ||
         { $sudo apt-get update -qq && $sudo apt-get install -y -qq slurmctld slurmd slurm-client munge iproute2 util-linux; }; } \
       >"$log" 2>&1 </dev/null; then
    tail -n 20 "$log" >&2
    die "could not install Slurm: run 'apt-get install -y slurmctld slurmd slurm-client munge iproute2' and retry"
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

# Which bridge, namespaces and subnet a multi-node cluster in DIR uses: named from DIR's path
# (interface names stay under 15 characters), so two clusters on one machine never share one.
net_names() {
  local d="$1" h
  h="$(printf '%s' "$d" | md5sum | cut -c1-4)"
  BR="bk${h}br"
  NSP="bk${h}n"
  VP="bk${h}v"
  local o=$(( (16#$h % 200) + 20 ))
  # Something else already on that /24: take the next one.
  while ip -o -4 addr show 2>/dev/null | grep -q " 10\.213\.$o\."; do o=$(( o % 250 + 1 )); done
  SUBNET="10.213.$o"
}

alive_all() {
  local d="$1" f
  alive "$d/slurmctld.pid" && alive "$d/munge/munged.pid" || return 1
  for f in "$d"/slurmd*.pid; do alive "$f" || return 1; done
}

up() {
  local d="$1" nodes="${2:-0}"
  mkdir -p "$d"
  d="$(cd "$d" && pwd)"
  install
  if alive_all "$d" && [ "$(cat "$d/nodes.count" 2>/dev/null || echo 0)" = "$nodes" ]; then
    echo "slurm.sh: already up in $d" >&2
    return 0
  fi
  down "$d" >/dev/null 2>&1 || true
  mkdir -p "$d/state" "$d/spool" "$d/munge"
  chown munge:munge "$d/munge"
  chmod 0755 "$d/munge"
  local host; host="$(hostname -s)"
  local ctl_addr=127.0.0.1
  if [ "$nodes" -gt 0 ]; then
    net_names "$d"
    ctl_addr="$SUBNET.1"
    network_up "$d" "$nodes"
  fi
  echo "$nodes" >"$d/nodes.count"
  local p1 p2 p3
  p1=$(free_port); p2=$(free_port "$p1"); p3=$(free_port "$p1" "$p2")
  runuser -u munge -- /usr/sbin/munged --socket "$d/munge/munge.sock" \
    --pid-file "$d/munge/munged.pid" --log-file "$d/munge/munged.log" \
    --seed-file "$d/munge/munged.seed" --key-file /etc/munge/munge.key
  local spool="$d/spool" slurmd_pid="$d/slurmd.pid" slurmd_log="$d/slurmd.log"
  if [ "$nodes" -gt 0 ]; then
    # Per node (%n); bakeoff's own record of each slurmd's pid is DIR/slurmd-NODE.pid.
    spool="$d/spool-%n"; slurmd_pid="$d/spool-%n/slurmd.pid"; slurmd_log="$d/slurmd-%n.log"
    mkdir -p "$d/spool-$host"
  fi
  cat >"$d/slurm.conf" <<CONF
ClusterName=bakeoff
SlurmctldHost=$host($ctl_addr)
SlurmctldPort=$p1
SlurmdPort=$p2
SrunPortRange=$p3-$((p3 + 20))
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket=$d/munge/munge.sock
CredType=cred/munge
StateSaveLocation=$d/state
SlurmdSpoolDir=$spool
SlurmctldPidFile=$d/slurmctld.pid
SlurmdPidFile=$slurmd_pid
SlurmctldLogFile=$d/slurmctld.log
SlurmdLogFile=$slurmd_log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
# 1: a node set DOWN by scontrol stays down until `state=resume` (tests/infra/slurm_fleet.rs
# marks one down mid-run and must find it down); one that stopped responding returns on its own.
ReturnToService=1
SchedulerParameters=sched_interval=1
MinJobAge=600
KillWait=5
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
CONF
  local k
  # The host's own node (root namespace, 127.0.0.1) in the default partition, with or without
  # namespaced nodes: one-node campaigns run on it the same either way.
  echo "NodeName=$host NodeAddr=127.0.0.1 CPUs=$(nproc) RealMemory=1000 State=UNKNOWN" >>"$d/slurm.conf"
  echo "PartitionName=debug Nodes=$host Default=YES MaxTime=INFINITE State=UP" >>"$d/slurm.conf"
  if [ "$nodes" -gt 0 ]; then
    : >"$d/nodes"
    for k in $(seq 1 "$nodes"); do
      echo "NodeName=node$k NodeAddr=$SUBNET.$((10 + k)) CPUs=$(nproc) RealMemory=1000 State=UNKNOWN" >>"$d/slurm.conf"
      echo "node$k $SUBNET.$((10 + k))" >>"$d/nodes"
      mkdir -p "$d/spool-node$k"
    done
    echo "PartitionName=fleet Nodes=node[1-$nodes] MaxTime=INFINITE State=UP" >>"$d/slurm.conf"
  fi
  export SLURM_CONF="$d/slurm.conf"
  setsid slurmctld -D -i -f "$SLURM_CONF" >>"$d/slurmctld.out" 2>&1 </dev/null &
  if [ "$nodes" -gt 0 ]; then
    # nsenter --net, not `ip netns exec`: the latter remounts /sys and slurmd then finds no
    # cgroup filesystem. nsenter execs slurmd, so $! is slurmd's own pid: recorded here because
    # slurmd removes its pid file on SIGTERM.
    for k in $(seq 1 "$nodes"); do
      setsid nsenter --net="/run/netns/${NSP}$k" slurmd -D -N "node$k" -f "$SLURM_CONF" \
        >>"$d/slurmd-node$k.out" 2>&1 </dev/null &
      echo $! >"$d/slurmd-node$k.pid"
    done
    setsid slurmd -D -N "$host" -f "$SLURM_CONF" >>"$d/slurmd-$host.out" 2>&1 </dev/null &
    echo $! >"$d/slurmd-$host.pid"
  else
    setsid slurmd -D -N "$host" -f "$SLURM_CONF" >>"$d/slurmd.out" 2>&1 </dev/null &
  fi
  local i want=$((nodes + 1))
  for i in $(seq 1 300); do
    if [ "$(sinfo -h -N -o '%t' 2>/dev/null | grep -cx 'idle')" -ge "$want" ]; then
      echo "slurm.sh: up in $d (slurmctld :$p1, slurmd :$p2, $want node(s) idle)" >&2
      return 0
    fi
    sleep 0.1
  done
  tail -n 20 "$d"/slurmctld.log "$d"/slurmd*.log >&2 || true
  down "$d" || true
  die "the nodes did not become idle within 30 s (logs above)"
}

# The private network of a multi-node cluster: a bridge holding the controller's address and,
# per node, a namespace joined to it by a veth pair. The names are written to DIR/net.env before
# any is made, so `down` removes them even after a failed `up`.
network_up() {
  local d="$1" nodes="$2" k
  command -v ip >/dev/null 2>&1 || die "the multi-node cluster needs 'ip' (apt-get install -y iproute2)"
  {
    echo "BR=$BR"
    echo "NSP=$NSP"
    echo "VP=$VP"
    echo "NODES=$nodes"
  } >"$d/net.env"
  ip link add "$BR" type bridge
  ip addr add "$SUBNET.1/24" dev "$BR"
  ip link set "$BR" up
  for k in $(seq 1 "$nodes"); do
    ip netns add "${NSP}$k"
    ip link add "${VP}$k" type veth peer name "${VP}${k}p"
    ip link set "${VP}$k" master "$BR" up
    ip link set "${VP}${k}p" netns "${NSP}$k"
    ip -n "${NSP}$k" addr add "$SUBNET.$((10 + k))/24" dev "${VP}${k}p"
    ip -n "${NSP}$k" link set "${VP}${k}p" up
    ip -n "${NSP}$k" link set lo up
    ip -n "${NSP}$k" route add default via "$SUBNET.1"
  done
}

network_down() {
  local d="$1" k
  [ -f "$d/net.env" ] || return 0
  # shellcheck disable=SC1091
  . "$d/net.env"
  for k in $(seq 1 "$NODES"); do
    ip netns del "${NSP}$k" 2>/dev/null || true
    ip link del "${VP}$k" 2>/dev/null || true
  done
  ip link del "$BR" 2>/dev/null || true
  rm -f "$d/net.env"
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
  local f
  for f in "$d"/slurmd*.pid; do stop_pid "$f"; done
  # slurmstepd of a job slurmd could not end: they name DIR's spool on their command line.
  pkill_spool "$d"
  stop_pid "$d/slurmctld.pid"
  stop_pid "$d/munge/munged.pid"
  # The processes first: a namespace still holding a slurmd would outlive `ip netns del`.
  network_down "$d"
  rm -f "$d/nodes" "$d/nodes.count"
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
  up)
    [ -n "${2:-}" ] || die "usage: slurm.sh up DIR [--nodes N]"
    n=0
    if [ "${3:-}" = "--nodes" ]; then
      n="${4:-}"
      [[ "$n" =~ ^[1-9][0-9]?$ ]] || die "--nodes takes a node count from 1 to 99 (got '${n}')"
    elif [ -n "${3:-}" ]; then
      die "usage: slurm.sh up DIR [--nodes N] (unknown argument '$3')"
    fi
    up "$2" "$n" ;;
  down) [ -n "${2:-}" ] || die "usage: slurm.sh down DIR"; down "$2" ;;
  env) [ -n "${2:-}" ] || die "usage: slurm.sh env DIR"; echo "export SLURM_CONF=$(cd "$2" && pwd)/slurm.conf" ;;
  *) die "usage: slurm.sh install | up DIR [--nodes N] | down DIR | env DIR" ;;
esac
