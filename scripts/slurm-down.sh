#!/usr/bin/env bash
# slurm-down.sh - tear down the cluster made by slurm-up.sh: cancel its jobs, stop
# its slurmds, slurmctld and munged, and delete $SLURM_CI_ROOT. A multi-node
# cluster (SLURM_CI_NODES) also loses its network namespaces, veth pairs, bridge
# and tagged /etc/hosts lines, as recorded in $SLURM_CI_ROOT/etc/cluster.env.
# Only processes that belong to this cluster are signalled, each by PID: the pid
# files under $SLURM_CI_ROOT/run, plus (safety net) processes that carry this
# cluster's SLURM_CONF in their environment (slurmctld, slurmscriptd, slurmd,
# slurmstepd, escaped job processes) or its munge socket path on their command
# line (munged), and any process left in a node's network namespace. Nothing is
# matched by name alone.
# Safe to run when nothing is up, and twice. SLURM_CI_KEEP=1 keeps the directory (logs).
set -uo pipefail   # no -e: keep tearing down past individual failures

ROOT=${SLURM_CI_ROOT:-/tmp/slurm-ci}
CONF=$ROOT/etc/slurm.conf
log() { printf 'slurm-down: %s\n' "$*" >&2; }

# what slurm-up.sh recorded (absent: single node, or nothing there)
MULTI=0 NODE_NAMES=localhost BRIDGE="" HOSTS_TAG=""
# shellcheck disable=SC1091
[ -f "$ROOT/etc/cluster.env" ] && . "$ROOT/etc/cluster.env"
NETNS=""
if [ "$MULTI" = 1 ]; then
  for n in $NODE_NAMES; do NETNS="$NETNS tmci-$n"; done
fi

# PIDs of this shell and its ancestors: never signalled.
protect=" $$ "
p=$$
while [ "$p" -gt 1 ] 2>/dev/null; do
  p=$(awk '/^PPid:/{print $2}' "/proc/$p/status" 2>/dev/null) || break
  [ -n "$p" ] || break
  protect="$protect$p "
done

# pidfile_pid NAME FILE -> pid if FILE names a live process whose comm is NAME
pidfile_pid() {
  local pid
  [ -s "$2" ] || return 1
  pid=$(tr -dc '0-9' < "$2")
  [ -n "$pid" ] && [ "$(cat "/proc/$pid/comm" 2>/dev/null)" = "$1" ] && echo "$pid"
}

# ours KIND -> PIDs belonging to this cluster.
# KIND: munged|slurmctld|slurmscriptd|slurmd|slurmstepd|job
ours() {
  local d pid comm node ns
  for d in /proc/[0-9]*; do
    pid=${d#/proc/}
    case "$protect" in *" $pid "*) continue ;; esac
    read -r comm 2>/dev/null < "$d/comm" || continue
    case "$1" in
      munged)
        [ "$comm" = munged ] || continue
        grep -qzxF -- "--socket=$ROOT/run/munge.socket" "$d/cmdline" 2>/dev/null && echo "$pid" ;;
      slurmctld|slurmscriptd|slurmd|slurmstepd)
        [ "$comm" = "$1" ] || continue
        grep -qzxF "SLURM_CONF=$CONF" "$d/environ" 2>/dev/null && echo "$pid" ;;
      job)  # a job's leftover process: our SLURM_CONF, a SLURM_JOB_ID, one of our nodes
        grep -qzxF "SLURM_CONF=$CONF" "$d/environ" 2>/dev/null \
          && grep -qz '^SLURM_JOB_ID=' "$d/environ" 2>/dev/null || continue
        node=$(tr '\0' '\n' < "$d/environ" 2>/dev/null | sed -n 's/^SLURMD_NODENAME=//p')
        case " $NODE_NAMES " in *" ${node:-?} "*) echo "$pid" ;; esac ;;
    esac
  done
  # everything in a node's network namespace is ours
  [ "$1" = job ] || return 0
  for ns in $NETNS; do
    for pid in $(ip netns pids "$ns" 2>/dev/null); do
      case "$protect" in *" $pid "*) ;; *) echo "$pid" ;; esac
    done
  done
}

# stop NAME PID... : SIGTERM to all, wait up to 10 s for them, then SIGKILL
stop() {
  local name=$1 pid i alive; shift
  [ $# -gt 0 ] || return 0
  kill -TERM "$@" 2>/dev/null
  for i in $(seq 1 100); do
    alive=""
    for pid in "$@"; do kill -0 "$pid" 2>/dev/null && alive="$alive $pid"; done
    [ -n "$alive" ] || break
    sleep 0.1
  done
  if [ -n "$alive" ]; then
    log "$name$alive ignored SIGTERM, sending SIGKILL"
    # shellcheck disable=SC2086
    kill -KILL $alive 2>/dev/null
  fi
  log "stopped $name (pid $*)"
}

# 1. cancel every job while the controller is still up, and wait for them to end
if [ -f "$CONF" ] && pidfile_pid slurmctld "$ROOT/run/slurmctld.pid" >/dev/null; then
  export SLURM_CONF=$CONF
  jobs=$(squeue -h -o '%F' 2>/dev/null | sort -u)
  if [ -n "$jobs" ]; then
    log "cancelling jobs: $(echo $jobs)"
    # shellcheck disable=SC2086
    scancel $jobs 2>/dev/null
    for i in $(seq 1 50); do   # SIGTERM, then SIGKILL after KillWait (5 s)
      [ -z "$(squeue -h 2>/dev/null)" ] && break
      # shellcheck disable=SC2086
      [ "$i" = 30 ] && scancel --full --signal=KILL $jobs 2>/dev/null
      sleep 0.2
    done
  fi
fi

# 2. daemons: slurmd and slurmctld (they still need munged), then stray job
#    processes, then munged
pids=$( { pidfile_pid slurmd "$ROOT/run/slurmd.pid"
          for f in "$ROOT"/run/slurmd-*.pid; do pidfile_pid slurmd "$f"; done
          ours slurmd
          pidfile_pid slurmctld "$ROOT/run/slurmctld.pid"; ours slurmctld
          ours slurmscriptd; } | sort -u)
# shellcheck disable=SC2086
stop "slurmd/slurmctld" $pids
pids=$( { ours slurmstepd; ours job; } | sort -u)
if [ -n "$pids" ]; then
  log "killing leftover job processes: $(echo $pids)"
  # shellcheck disable=SC2086
  kill -KILL $pids 2>/dev/null
fi
pids=$( { pidfile_pid munged "$ROOT/run/munged.pid"; ours munged; } | sort -u)
# shellcheck disable=SC2086
stop munged $pids

# 3. verify
left=$( { ours munged; ours slurmctld; ours slurmscriptd; ours slurmd; ours slurmstepd
         ours job; } | sort -u)
if [ -n "$left" ]; then
  log "ERROR: still running: $(echo $left)"
  exit 1
fi

# 4. multi-node: namespaces (deleting a veth end deletes its peer), bridge, /etc/hosts
if [ "$MULTI" = 1 ]; then
  for n in $NODE_NAMES; do
    k=${n#node}
    ip link del "tmci-v$k" 2>/dev/null
    ip netns del "tmci-$n" 2>/dev/null
  done
  [ -n "$BRIDGE" ] && ip link del "$BRIDGE" 2>/dev/null
  if [ -n "$HOSTS_TAG" ] && grep -qF -- " $HOSTS_TAG" /etc/hosts 2>/dev/null; then
    # rewritten in place (not renamed): /etc/hosts is often a bind mount
    kept=$(grep -vF -- " $HOSTS_TAG" /etc/hosts)
    printf '%s\n' "$kept" > /etc/hosts
  fi
  bad=""
  for ns in $NETNS; do ip netns list 2>/dev/null | grep -qE "^$ns( |\$)" && bad="$bad $ns"; done
  [ -n "$BRIDGE" ] && ip link show "$BRIDGE" >/dev/null 2>&1 && bad="$bad $BRIDGE"
  [ -n "$HOSTS_TAG" ] && grep -qF -- " $HOSTS_TAG" /etc/hosts && bad="$bad /etc/hosts"
  if [ -n "$bad" ]; then
    log "ERROR: could not remove:$bad"
    exit 1
  fi
  log "removed namespaces$NETNS, bridge $BRIDGE, /etc/hosts lines"
fi

# 5. the directory
if [ "${SLURM_CI_KEEP:-0}" != 1 ]; then rm -rf "$ROOT"; fi
log "down"
