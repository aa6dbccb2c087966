#!/usr/bin/env bash
# slurm-up.sh - bring up a throwaway single-node Slurm cluster (munged + slurmctld
# + slurmd) for CI on a Debian 12 machine, as root, from nothing.
#
#   eval "$(bash slurm-up.sh)"   # stdout is one line: export SLURM_CONF=...
#   sbatch --array=0-7 ...; squeue; scontrol show job ...
#   bash slurm-down.sh           # stops exactly these daemons, deletes the root
# (also written to $SLURM_CI_ROOT/env.sh for later shells). Progress goes to stderr.
#
# Everything (config, munge key/socket, state, spool, logs, pid files) lives under
# $SLURM_CI_ROOT; nothing is written to /etc/slurm, /etc/munge or /run.
# Knobs (environment):
#   SLURM_CI_ROOT        default /tmp/slurm-ci
#   SLURM_CI_CTLD_PORT   default 16817  (not 6817, so a system Slurm can't clash)
#   SLURM_CI_SLURMD_PORT default 16818
#   SLURM_CI_CPUS        advertise this many CPUs instead of the real count
#                        (e.g. 8 to run 8 trivial array tasks at once on 2 cores)
#   SLURM_CI_KILL_INVALID_DEPEND=1  cancel jobs whose dependency can never be met
#                        (default: stock Slurm, they stay PENDING/DependencyNeverSatisfied)
#   SLURM_CI_TIMEOUT     seconds to wait for the node to become idle, default 60
set -euo pipefail

ROOT=${SLURM_CI_ROOT:-/tmp/slurm-ci}
CTLD_PORT=${SLURM_CI_CTLD_PORT:-16817}
SLURMD_PORT=${SLURM_CI_SLURMD_PORT:-16818}
CPUS_OVERRIDE=${SLURM_CI_CPUS:-}
KILL_INVALID=${SLURM_CI_KILL_INVALID_DEPEND:-0}
TIMEOUT=${SLURM_CI_TIMEOUT:-60}
NODE=localhost
CONF=$ROOT/etc/slurm.conf
SOCK=$ROOT/run/munge.socket
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)

log() { printf 'slurm-up: %s\n' "$*" >&2; }
die() {
  log "ERROR: $*"
  for f in "$ROOT"/log/*; do
    [ -f "$f" ] && { printf -- '--- %s\n' "$f" >&2; tail -n 40 "$f" >&2; }
  done
  # stop whatever this run started; keep $ROOT (logs) for inspection
  if [ -d "$ROOT/run" ] && [ -f "$HERE/slurm-down.sh" ]; then
    SLURM_CI_ROOT="$ROOT" SLURM_CI_KEEP=1 bash "$HERE/slurm-down.sh" || true
  fi
  exit 1
}

[ "$(id -u)" = 0 ] || die "must run as root"
case "$ROOT" in /*) ;; *) die "SLURM_CI_ROOT must be an absolute path" ;; esac

# --- 1. packages (only if missing) ------------------------------------------------
missing=0
for b in munged munge unmunge slurmctld slurmd sbatch squeue scontrol sinfo scancel; do
  command -v "$b" >/dev/null 2>&1 || missing=1
done
if [ "$missing" = 1 ]; then
  log "installing slurmctld slurmd slurm-client munge (apt)"
  # Keep the packages' maintainer scripts from starting system munge/slurm
  # daemons (init.d scripts) while installing; undo afterwards.
  made_policy=0
  if [ ! -e /usr/sbin/policy-rc.d ]; then
    printf '#!/bin/sh\nexit 101\n' > /usr/sbin/policy-rc.d
    chmod 755 /usr/sbin/policy-rc.d
    made_policy=1
  fi
  export DEBIAN_FRONTEND=noninteractive
  aptlog=$(mktemp /tmp/slurm-up-apt.XXXXXX)
  ok=0
  for attempt in 1 2 3; do
    if apt-get update -q >>"$aptlog" 2>&1 \
       && apt-get install -y -q --no-install-recommends -o Dpkg::Use-Pty=0 \
            -o DPkg::Lock::Timeout=300 \
            slurmctld slurmd slurm-client munge </dev/null >>"$aptlog" 2>&1; then
      ok=1; break
    fi
    log "apt attempt $attempt failed; retrying"; sleep 5
  done
  if [ "$made_policy" = 1 ]; then rm -f /usr/sbin/policy-rc.d; fi
  if [ "$ok" != 1 ]; then tail -n 30 "$aptlog" >&2; die "apt-get install failed"; fi
  rm -f "$aptlog"
fi

# --- 2. start from a clean slate --------------------------------------------------
if [ -d "$ROOT" ]; then
  log "$ROOT exists: tearing down the previous cluster first"
  SLURM_CI_ROOT="$ROOT" bash "$HERE/slurm-down.sh" || die "slurm-down.sh failed"
fi
for port in "$CTLD_PORT" "$SLURMD_PORT"; do
  if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
    die "port $port is already in use (set SLURM_CI_CTLD_PORT / SLURM_CI_SLURMD_PORT)"
  fi
done
mkdir -p "$ROOT"/etc "$ROOT"/run "$ROOT"/munge "$ROOT"/state "$ROOT"/spool "$ROOT"/log
# munged insists: socket dir (and every parent) executable by all, key dir private.
chmod 755 "$ROOT" "$ROOT/etc" "$ROOT/run" "$ROOT/state" "$ROOT/spool" "$ROOT/log"
chmod 700 "$ROOT/munge"

# --- 3. munge ---------------------------------------------------------------------
dd if=/dev/urandom of="$ROOT/munge/munge.key" bs=1024 count=1 status=none
chmod 400 "$ROOT/munge/munge.key"
munged --key-file="$ROOT/munge/munge.key" --socket="$SOCK" \
       --pid-file="$ROOT/run/munged.pid" --log-file="$ROOT/log/munged.log" \
       --seed-file="$ROOT/munge/munged.seed" </dev/null >>"$ROOT/log/munged.out" 2>&1 \
  || die "munged failed to start"
munge -n -S "$SOCK" </dev/null | unmunge -S "$SOCK" >/dev/null 2>&1 \
  || die "munge credential round-trip failed"

# --- 4. slurm.conf ----------------------------------------------------------------
# Real topology and memory from slurmd -C; the node is always called "localhost"
# (slurmd -N localhost), so the machine's hostname never has to match or resolve.
hw=$(slurmd -C 2>/dev/null | head -n 1 || true)
field() { printf '%s\n' "$hw" | tr ' ' '\n' | sed -n "s/^$1=//p"; }
cpus=$(field CPUs); boards=$(field Boards); sockets=$(field SocketsPerBoard)
cores=$(field CoresPerSocket); threads=$(field ThreadsPerCore); mem=$(field RealMemory)
[ -n "$cpus" ] || cpus=$(nproc)
[ -n "$mem" ] || mem=$(( $(awk '/^MemTotal:/{print $2}' /proc/meminfo) / 1024 ))
if [ -n "$CPUS_OVERRIDE" ]; then
  nodeline="NodeName=$NODE NodeAddr=127.0.0.1 CPUs=$CPUS_OVERRIDE RealMemory=$mem State=UNKNOWN"
  overrides="SlurmdParameters=config_overrides"
elif [ -n "$sockets" ] && [ -n "$cores" ] && [ -n "$threads" ]; then
  nodeline="NodeName=$NODE NodeAddr=127.0.0.1 CPUs=$cpus Boards=${boards:-1} SocketsPerBoard=$sockets CoresPerSocket=$cores ThreadsPerCore=$threads RealMemory=$mem State=UNKNOWN"
  overrides=""
else
  nodeline="NodeName=$NODE NodeAddr=127.0.0.1 CPUs=$cpus RealMemory=$mem State=UNKNOWN"
  overrides=""
fi
if [ "$KILL_INVALID" = 1 ]; then depend="DependencyParameters=kill_invalid_depend"; else depend=""; fi

cat > "$CONF" <<EOF
# generated by slurm-up.sh
ClusterName=ci
SlurmctldHost=localhost(127.0.0.1)
SlurmctldPort=$CTLD_PORT
SlurmdPort=$SLURMD_PORT
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$SOCK
StateSaveLocation=$ROOT/state
SlurmdSpoolDir=$ROOT/spool
SlurmctldPidFile=$ROOT/run/slurmctld.pid
SlurmdPidFile=$ROOT/run/slurmd.pid
SlurmctldLogFile=$ROOT/log/slurmctld.log
SlurmdLogFile=$ROOT/log/slurmd.log
SlurmctldDebug=info
SlurmdDebug=info
# no cgroups: track job processes through /proc, no task binding
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
# a completion record per job (sacct is unavailable without slurmdbd)
JobCompType=jobcomp/filetxt
JobCompLoc=$ROOT/log/jobcomp.txt
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
SchedulerType=sched/backfill
# default batch_sched_delay=3 makes every scheduling wave wait 3 s
SchedulerParameters=batch_sched_delay=0,sched_min_interval=0
$depend
MpiDefault=none
MailProg=/bin/true
ReturnToService=2
# seconds between SIGTERM and SIGKILL on scancel/time limit (default 30)
KillWait=5
MinJobAge=600
MaxArraySize=10001
$overrides
$nodeline
PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP
EOF
export SLURM_CONF=$CONF

# --- 5. daemons -------------------------------------------------------------------
slurmctld </dev/null >>"$ROOT/log/slurmctld.out" 2>&1 || die "slurmctld failed to start"
deadline=$(( SECONDS + TIMEOUT ))
until scontrol ping 2>/dev/null | grep -q 'is UP'; do
  [ $SECONDS -lt $deadline ] || die "slurmctld did not answer within ${TIMEOUT}s"
  sleep 0.2
done
slurmd -N "$NODE" </dev/null >>"$ROOT/log/slurmd.out" 2>&1 || die "slurmd failed to start"
until [ "$(sinfo -h -n "$NODE" -o '%T' 2>/dev/null)" = idle ]; do
  [ $SECONDS -lt $deadline ] || die "node not idle within ${TIMEOUT}s: $(sinfo -h -N -o '%N %T %E' 2>&1)"
  sleep 0.2
done

# --- 6. smoke test: one real batch job --------------------------------------------
# (poll rather than sbatch --wait: its polling backs off to ~10 s)
jid=$(sbatch --parsable -o /dev/null -e /dev/null -J slurm-up-smoke --wrap true </dev/null) \
  || die "sbatch failed"
until state=$(squeue -h -t all -j "$jid" -o '%T' 2>/dev/null) && [ "$state" = COMPLETED ]; do
  case "$state" in FAILED|CANCELLED|TIMEOUT|NODE_FAIL|OUT_OF_MEMORY|BOOT_FAIL|DEADLINE)
    die "smoke-test job $jid ended $state" ;; esac
  [ $SECONDS -lt $deadline ] || die "smoke-test job $jid not done within ${TIMEOUT}s (state $state)"
  sleep 0.2
done

printf 'export SLURM_CONF=%s\n' "$CONF" > "$ROOT/env.sh"
log "cluster up: $(sinfo -h -o '%P %a %D %T %N') ($(sinfo -h -o '%c') CPUs, ${mem} MB)"
cat "$ROOT/env.sh"
