#!/usr/bin/env bash
# A single-node Slurm on localhost, for testing the scale-out scripts (scripts/slurm/*.sbatch).
#
#   scripts/slurm/local_cluster.sh start    # write slurm.conf, start slurmctld + slurmd, wait for idle
#   scripts/slurm/local_cluster.sh status   # sinfo / squeue of the local cluster
#   scripts/slurm/local_cluster.sh stop     # stop both daemons (jobs still running are killed)
#   scripts/slurm/local_cluster.sh env      # print `export SLURM_CONF=...` for the client commands
#
# Everything lives in one directory, WACO_SLURM_DIR (default /tmp/waco-slurm): slurm.conf, state,
# spool, logs, pid files. /etc/slurm is not touched; client commands find this cluster through
# SLURM_CONF=$WACO_SLURM_DIR/slurm.conf (printed by `start` and `env`).
#
# Needs Debian's Slurm daemons (apt-get install slurmctld slurmd slurm-client) and root (slurmd
# launches jobs as their users). Authentication: auth/none + cred/none when the installed Slurm has
# those plugins (Debian 12's 22.05 does: no munge daemon needed), else munge (a private munged).
# The node is this machine as `slurmd -C` reports it (CPUs, sockets, cores, memory).
#
# Environment: WACO_SLURM_DIR, WACO_SLURM_PORT (slurmctld port, default 6917; slurmd uses +1),
# WACO_SLURM_TIMEOUT (seconds to wait for the node to become idle, default 60),
# WACO_SLURM_AUTH (none | munge, default: none when available).
# Exit codes: 0 ok, 1 failure, 77 Slurm cannot run here (not installed, not root) - the reason is
# printed on stderr.
set -euo pipefail

DIR=${WACO_SLURM_DIR:-/tmp/waco-slurm}
PORT=${WACO_SLURM_PORT:-6917}
TIMEOUT=${WACO_SLURM_TIMEOUT:-60}
CONF=$DIR/slurm.conf
PLUGINDIR=""

say() { echo "local_cluster: $*" >&2; }
cannot() { say "cannot run Slurm here: $*"; exit 77; }

usage() {
  sed -n '2,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'
}

find_plugindir() {
  local d
  for d in /usr/lib/x86_64-linux-gnu/slurm-wlm /usr/lib/aarch64-linux-gnu/slurm-wlm \
           /usr/lib/*/slurm-wlm /usr/lib64/slurm /usr/lib/slurm; do
    [ -e "$d/auth_munge.so" ] || [ -e "$d/auth_none.so" ] && { PLUGINDIR=$d; return 0; }
  done
  return 1
}

check_can_run() {
  command -v slurmctld >/dev/null || cannot "slurmctld is not installed (apt-get install slurmctld slurmd slurm-client)"
  command -v slurmd >/dev/null || cannot "slurmd is not installed (apt-get install slurmd)"
  if ! command -v sinfo >/dev/null || ! command -v sbatch >/dev/null; then
    cannot "the Slurm client commands are not installed (apt-get install slurm-client)"
  fi
  [ "$(id -u)" -eq 0 ] || cannot "slurmd must run as root (run as root or through sudo)"
  find_plugindir || cannot "no Slurm plugin directory found (looked for auth_*.so)"
}

pick_auth() {
  local want=${WACO_SLURM_AUTH:-}
  if [ -z "$want" ]; then
    if [ -e "$PLUGINDIR/auth_none.so" ] && [ -e "$PLUGINDIR/cred_none.so" ]; then want=none
    else want=munge; fi
  fi
  case $want in
    none)
      [ -e "$PLUGINDIR/auth_none.so" ] || cannot "WACO_SLURM_AUTH=none but $PLUGINDIR has no auth_none.so"
      AUTH=none ;;
    munge)
      command -v munged >/dev/null || cannot "this Slurm needs munge and munged is not installed (apt-get install munge)"
      [ -r /etc/munge/munge.key ] || cannot "munge has no key (/etc/munge/munge.key; apt-get install munge creates one)"
      AUTH=munge ;;
    *) say "error: WACO_SLURM_AUTH must be none or munge"; exit 1 ;;
  esac
}

write_conf() {
  local host node
  host=$(hostname -s)
  # This machine as slurmd sees it, e.g. "NodeName=vm CPUs=2 Boards=1 ... RealMemory=24105".
  node=$(slurmd -C 2>/dev/null | head -1) || true
  [[ $node == NodeName=* ]] || { say "error: slurmd -C printed no node line"; exit 1; }
  node="NodeName=$host ${node#NodeName=* }"
  mkdir -p "$DIR/state" "$DIR/spool/$host" "$DIR/log" "$DIR/run"
  cat >"$CONF" <<EOF
# Written by scripts/slurm/local_cluster.sh: a single-node test cluster on localhost.
ClusterName=waco-local
SlurmctldHost=$host(127.0.0.1)
SlurmctldPort=$PORT
SlurmdPort=$((PORT + 1))
SlurmUser=root
SlurmdUser=root
AuthType=auth/$AUTH
CredType=cred/$AUTH
PluginDir=$PLUGINDIR
StateSaveLocation=$DIR/state
SlurmdSpoolDir=$DIR/spool/%n
SlurmctldPidFile=$DIR/run/slurmctld.pid
SlurmdPidFile=$DIR/run/slurmd.pid
SlurmctldLogFile=$DIR/log/slurmctld.log
SlurmdLogFile=$DIR/log/slurmd.log
SlurmctldDebug=info
SlurmdDebug=info
# No cgroups (containers and VMs often lack a writable cgroup tree): plain process tracking.
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
MpiDefault=none
SwitchType=switch/none
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
ReturnToService=2
MailProg=/bin/true
SlurmctldTimeout=30
SlurmdTimeout=60
InactiveLimit=0
KillWait=10
MinJobAge=600
$node State=UNKNOWN
PartitionName=local Nodes=$host Default=YES MaxTime=INFINITE State=UP OverSubscribe=NO
EOF
}

pid_alive() { [ -s "$1" ] && kill -0 "$(cat "$1")" 2>/dev/null; }

start() {
  check_can_run
  pick_auth
  if pid_alive "$DIR/run/slurmctld.pid" || pid_alive "$DIR/run/slurmd.pid"; then
    say "already running in $DIR (stop it first: $0 stop)"; exit 1
  fi
  write_conf
  export SLURM_CONF=$CONF
  if [ "$AUTH" = munge ]; then
    mkdir -p "$DIR/munge"
    # A private munged with its own socket, so that a system munged (if any) is left alone.
    munged --socket="$DIR/munge/munge.socket" --pid-file="$DIR/run/munged.pid" \
           --log-file="$DIR/log/munged.log" --seed-file="$DIR/munge/seed" --force \
      || cannot "munged did not start (see $DIR/log/munged.log)"
    echo "AuthInfo=socket=$DIR/munge/munge.socket" >>"$CONF"
  fi
  # -c: a clean start, forgetting jobs of an earlier run of this test cluster.
  slurmctld -c -f "$CONF" || { say "error: slurmctld did not start (see $DIR/log/slurmctld.log)"; exit 1; }
  slurmd -f "$CONF" || { say "error: slurmd did not start (see $DIR/log/slurmd.log)"; stop_daemons; exit 1; }
  local t0=$SECONDS state=""
  while (( SECONDS - t0 < TIMEOUT )); do
    state=$(timeout 10 sinfo -h -N -o '%T' 2>/dev/null | head -1 || true)
    case $state in
      idle) break ;;
      drain*|down*)  # a node left down by an earlier run: bring it back
        timeout 10 scontrol update nodename="$(hostname -s)" state=resume >/dev/null 2>&1 || true ;;
    esac
    sleep 1
  done
  if [ "$state" != idle ]; then
    say "error: node not idle after ${TIMEOUT}s (state: ${state:-no answer}); logs in $DIR/log"
    tail -n 5 "$DIR/log/slurmctld.log" "$DIR/log/slurmd.log" >&2 || true
    stop_daemons; exit 1
  fi
  say "up in $((SECONDS - t0))s (auth/$AUTH, $DIR); use: export SLURM_CONF=$CONF"
  timeout 10 sinfo
}

stop_one() {  # stop_one NAME PIDFILE: SIGTERM, wait up to 15 s, then SIGKILL
  local name=$1 pidfile=$2 pid
  [ -s "$pidfile" ] || return 0
  pid=$(cat "$pidfile")
  if kill -0 "$pid" 2>/dev/null; then
    kill -TERM "$pid" 2>/dev/null || true
    for _ in $(seq 1 30); do kill -0 "$pid" 2>/dev/null || break; sleep 0.5; done
    if kill -0 "$pid" 2>/dev/null; then say "$name ($pid) ignored SIGTERM, killing"; kill -KILL "$pid" 2>/dev/null || true; fi
  fi
  rm -f "$pidfile"
}

stop_daemons() {
  # Cancel what is left so that slurmd does not leave job steps behind.
  if [ -f "$CONF" ] && pid_alive "$DIR/run/slurmctld.pid"; then
    SLURM_CONF=$CONF timeout 10 scancel --full --quiet --user="$(id -un)" 2>/dev/null || true
    sleep 1
  fi
  stop_one slurmd "$DIR/run/slurmd.pid"
  stop_one slurmctld "$DIR/run/slurmctld.pid"
  stop_one munged "$DIR/run/munged.pid"
}

stop() {
  stop_daemons
  say "stopped ($DIR)"
}

status() {
  [ -f "$CONF" ] || { say "not configured ($CONF missing)"; exit 1; }
  export SLURM_CONF=$CONF
  timeout 10 sinfo && timeout 10 squeue
}

case ${1:-} in
  start) start ;;
  stop) stop ;;
  status) status ;;
  env) echo "export SLURM_CONF=$CONF" ;;
  -h|--help|help) usage ;;
  *) usage >&2; exit 2 ;;
esac
