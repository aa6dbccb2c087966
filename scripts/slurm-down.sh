#!/usr/bin/env bash
# slurm-down.sh - tear down the cluster made by slurm-up.sh: cancel its jobs, stop
# its slurmd, slurmctld and munged, and delete $SLURM_CI_ROOT.
# Only processes that belong to this cluster are signalled, each by PID: the pid
# files under $SLURM_CI_ROOT/run, plus (safety net) processes that carry this
# cluster's SLURM_CONF in their environment (slurmctld, slurmscriptd, slurmd,
# slurmstepd, escaped job processes) or its munge socket path on their command
# line (munged). Nothing is matched by name alone.
# Safe to run when nothing is up. SLURM_CI_KEEP=1 keeps the directory (logs).
set -uo pipefail   # no -e: keep tearing down past individual failures

ROOT=${SLURM_CI_ROOT:-/tmp/slurm-ci}
CONF=$ROOT/etc/slurm.conf
log() { printf 'slurm-down: %s\n' "$*" >&2; }

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
  local d pid comm
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
      job)  # a job's leftover process: our SLURM_CONF, a SLURM_JOB_ID, our node
        grep -qzxF "SLURM_CONF=$CONF" "$d/environ" 2>/dev/null \
          && grep -qzxF 'SLURMD_NODENAME=localhost' "$d/environ" 2>/dev/null \
          && grep -qz '^SLURM_JOB_ID=' "$d/environ" 2>/dev/null && echo "$pid" ;;
    esac
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
pids=$( { pidfile_pid slurmd "$ROOT/run/slurmd.pid"; ours slurmd
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

# 3. verify, then remove the directory
left=$( { ours munged; ours slurmctld; ours slurmscriptd; ours slurmd; ours slurmstepd
         ours job; } | sort -u)
if [ -n "$left" ]; then
  log "ERROR: still running: $(echo $left)"
  exit 1
fi
if [ "${SLURM_CI_KEEP:-0}" != 1 ]; then rm -rf "$ROOT"; fi
log "down"
