#!/usr/bin/env bash
# slurm-node.sh - fail and revive one node of the multi-node cluster made by
# slurm-up.sh (SLURM_CI_NODES), as root:
#
#   bash slurm-node.sh kill NODE    # SIGKILL the node's slurmd, slurmstepds and job
#                                   # processes, as if the machine had died
#   bash slurm-node.sh start NODE   # start its slurmd again and wait until the node
#                                   # is back in service (ReturnToService=2)
#
# After a kill, slurmctld marks the node DOWN once its pings have failed for
# SlurmdTimeout (about 25 s with slurm-up.sh's settings) and requeues the node's
# batch jobs, which start again on the other nodes about 12 s later. A slurmd
# started again before that leaves its lost jobs RUNNING for about a minute, so
# `start` first waits until no job is RUNNING on the node any more.
# Processes of NODE are those in its network namespace (tmci-NODE), plus any that
# carry this cluster's SLURM_CONF and SLURMD_NODENAME=NODE in their environment.
# Each is signalled by PID. Knobs: SLURM_CI_ROOT (default /tmp/slurm-ci),
# SLURM_CI_TIMEOUT (seconds to wait for the node, default 60).
# (slurm-up.sh also uses "start-daemon NODE": start the slurmd, don't wait.)
set -euo pipefail

ROOT=${SLURM_CI_ROOT:-/tmp/slurm-ci}
TIMEOUT=${SLURM_CI_TIMEOUT:-60}
CONF=$ROOT/etc/slurm.conf
log() { printf 'slurm-node: %s\n' "$*" >&2; }
die() { log "ERROR: $*"; exit 1; }

[ $# = 2 ] || die "usage: slurm-node.sh kill|start NODE"
cmd=$1 node=$2
[ -f "$ROOT/etc/cluster.env" ] || die "no cluster under $ROOT"
MULTI=0 NODE_NAMES=""
# shellcheck disable=SC1091
. "$ROOT/etc/cluster.env"
[ "$MULTI" = 1 ] || die "not a multi-node cluster (slurm-up.sh without SLURM_CI_NODES)"
case " $NODE_NAMES " in *" $node "*) ;; *) die "unknown node $node (nodes: $NODE_NAMES)" ;; esac
ns=tmci-$node
export SLURM_CONF=$CONF

# PIDs of this shell and its ancestors: never signalled.
protect=" $$ "
p=$$
while [ "$p" -gt 1 ] 2>/dev/null; do
  p=$(awk '/^PPid:/{print $2}' "/proc/$p/status" 2>/dev/null) || break
  [ -n "$p" ] || break
  protect="$protect$p "
done

# node_pids -> PIDs of this node's processes
node_pids() {
  local d pid
  { ip netns pids "$ns" 2>/dev/null || true
    for d in /proc/[0-9]*; do
      if grep -qzxF "SLURM_CONF=$CONF" "$d/environ" 2>/dev/null \
         && grep -qzxF "SLURMD_NODENAME=$node" "$d/environ" 2>/dev/null; then
        echo "${d#/proc/}"
      fi
    done
  } | sort -un | while read -r pid; do
    case "$protect" in *" $pid "*) ;; *) echo "$pid" ;; esac
  done
}

slurmd_pid() {
  local pid
  [ -s "$ROOT/run/slurmd-$node.pid" ] || return 1
  pid=$(tr -dc '0-9' < "$ROOT/run/slurmd-$node.pid")
  [ -n "$pid" ] && [ "$(cat "/proc/$pid/comm" 2>/dev/null)" = slurmd ] && live "$pid" && echo "$pid"
}

# live PID: exists and is not a zombie (a killed daemon stays one until init reaps it)
live() {
  local st
  st=$(sed -n 's/^State:[[:space:]]*\([A-Z]\).*/\1/p' "/proc/$1/status" 2>/dev/null) || return 1
  [ -n "$st" ] && [ "$st" != Z ]
}

# The node's slurmd in its network namespace, with its own hostname (so `hostname`
# in a job says NODE, like on a real cluster). nsenter, not `ip netns exec`: that one
# also mounts a fresh /sys without /sys/fs/cgroup, and slurmd then refuses to start.
start_daemon() {
  ! slurmd_pid >/dev/null || die "$node's slurmd is already running"
  nsenter --net="/run/netns/$ns" unshare --uts sh -c 'hostname "$1" && exec slurmd -N "$1"' sh "$node" \
    </dev/null >>"$ROOT/log/slurmd-$node.out" 2>&1
}

node_state() { sinfo -h -n "$node" -N -o '%T' 2>/dev/null | head -n 1; }

case "$cmd" in
  kill)
    # repeat: a process may fork while the others are being killed
    for round in 1 2 3 4 5; do
      pids=$(node_pids)
      [ -n "$pids" ] || break
      # shellcheck disable=SC2086
      kill -KILL $pids 2>/dev/null || true
      log "round $round: killed $(echo $pids)"
      for i in $(seq 1 50); do   # wait until they are dead (or zombies)
        alive=""
        for pid in $pids; do live "$pid" && alive=1; done
        [ -n "$alive" ] || break
        sleep 0.1
      done
    done
    [ -z "$(node_pids)" ] || die "processes of $node survive: $(echo $(node_pids))"
    log "$node killed (now $(node_state))"
    ;;
  start-daemon)
    start_daemon
    ;;
  start)
    deadline=$(( SECONDS + TIMEOUT ))
    if ! slurmd_pid >/dev/null && [ -n "$(squeue -h -w "$node" -t R -o %i 2>/dev/null)" ]; then
      log "$node has running jobs: waiting until it is DOWN and they are requeued"
      while [ -n "$(squeue -h -w "$node" -t R -o %i 2>/dev/null)" ]; do
        [ $SECONDS -lt $deadline ] || die "$node's jobs not requeued within ${TIMEOUT}s"
        sleep 0.5
      done
    fi
    start_daemon
    deadline=$(( SECONDS + TIMEOUT )); resumed=0
    while :; do
      state=$(node_state)
      case "$state" in idle|mixed|allocated|completing) break ;; esac
      # registered but still DOWN (not expected with ReturnToService=2): resume it
      if [ "$resumed" = 0 ] && [ $SECONDS -ge $((deadline - TIMEOUT / 2)) ]; then
        log "$node still $state: scontrol update state=resume"
        scontrol update nodename="$node" state=resume || true
        resumed=1
      fi
      [ $SECONDS -lt $deadline ] || die "$node not back within ${TIMEOUT}s: $(sinfo -h -N -n "$node" -o '%N %T %E')"
      sleep 0.2
    done
    log "$node started ($state)"
    ;;
  *) die "usage: slurm-node.sh kill|start NODE" ;;
esac
