#!/usr/bin/env bash
# slurm-up.sh - bring up a throwaway Slurm cluster (munged + slurmctld + slurmd) for
# CI on a Debian 12 machine, as root, from nothing: one node, or with SLURM_CI_NODES
# several nodes, each slurmd in its own network namespace on this one machine.
#
#   eval "$(bash slurm-up.sh)"   # stdout is one line: export SLURM_CONF=...
#   sbatch --array=0-7 ...; squeue; scontrol show job ...
#   bash slurm-down.sh           # stops exactly these daemons, deletes the root
# (also written to $SLURM_CI_ROOT/env.sh for later shells). Progress goes to stderr.
#
# Everything (config, munge key/socket, state, spool, logs, pid files) lives under
# $SLURM_CI_ROOT; nothing is written to /etc/slurm, /etc/munge or /run.
#
# Multi-node mode (SLURM_CI_NODES=N, N >= 2): nodes node1..nodeN. Node K's slurmd runs
# in network namespace tmci-nodeK (its own lo, hostname nodeK, address NET.(10+K)),
# linked by a veth pair (tmci-vK) to the bridge tmci-br0 (NET.1) in the root
# namespace, where munged and slurmctld run. munge's socket is a file, so one munged
# serves every namespace. Node names resolve for every process through lines tagged
# "# tokenmill-slurm-ci" in /etc/hosts (removed by slurm-down.sh). Each node has
# SLURM_CI_GPUS fake GPUs (gres gpu: device files $SLURM_CI_ROOT/dev/nvidiaN, jobs
# get CUDA_VISIBLE_DEVICES). A node whose slurmd stops answering goes DOWN (about
# 25 s after it died) and its batch jobs are requeued: they start again elsewhere
# about 12 s later (cred_expire=10, backfill every 2 s). scripts/slurm-node.sh
# kills and restarts a node. stdout then also exports SLURM_CI_BRIDGE_ADDR (NET.1):
# a server the nodes' jobs should reach must listen there too (scripts/s3-server.sh
# does).
#
# Knobs (environment):
#   SLURM_CI_ROOT        default /tmp/slurm-ci
#   SLURM_CI_CTLD_PORT   default 16817  (not 6817, so a system Slurm can't clash)
#   SLURM_CI_SLURMD_PORT default 16818
#   SLURM_CI_NODES       number of nodes, >= 2 for multi-node mode (default: one
#                        node called localhost, at 127.0.0.1, no namespaces)
#   SLURM_CI_CPUS        advertise this many CPUs (per node) instead of the real count
#                        (e.g. 8 to run 8 trivial array tasks at once on 2 cores)
#   SLURM_CI_GPUS        fake GPUs per node (Gres=gpu:N); default 2 with
#                        SLURM_CI_NODES, else 0
#   SLURM_CI_MAX_ARRAY_SIZE  MaxArraySize (highest array index + 1), default 10001
#   SLURM_CI_SLURMD_TIMEOUT  SlurmdTimeout, seconds without an answer before a node
#                        is DOWN; default 10 with SLURM_CI_NODES, else Slurm's 300.
#                        Lower doesn't help: each ping of a dead node retries for
#                        MessageTimeout, and it takes two failed pings
#   SLURM_CI_MESSAGE_TIMEOUT  MessageTimeout (Slurm's default 10); 5 brings a dead
#                        node's DOWN from ~25 s to ~18 s, but RPCs of a busy machine
#                        have less time too
#   SLURM_CI_NET         first three octets of the nodes' /24, default 10.213.0
#   SLURM_CI_KILL_INVALID_DEPEND=1  cancel jobs whose dependency can never be met
#                        (default: stock Slurm, they stay PENDING/DependencyNeverSatisfied)
#   SLURM_CI_TIMEOUT     seconds to wait for the nodes to become idle, default 60
set -euo pipefail

ROOT=${SLURM_CI_ROOT:-/tmp/slurm-ci}
CTLD_PORT=${SLURM_CI_CTLD_PORT:-16817}
SLURMD_PORT=${SLURM_CI_SLURMD_PORT:-16818}
NODES=${SLURM_CI_NODES:-}
CPUS_OVERRIDE=${SLURM_CI_CPUS:-}
MAX_ARRAY=${SLURM_CI_MAX_ARRAY_SIZE:-10001}
NET=${SLURM_CI_NET:-10.213.0}
KILL_INVALID=${SLURM_CI_KILL_INVALID_DEPEND:-0}
TIMEOUT=${SLURM_CI_TIMEOUT:-60}
CONF=$ROOT/etc/slurm.conf
SOCK=$ROOT/run/munge.socket
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# fixed names: one multi-node cluster per machine
BRIDGE=tmci-br0
HOSTS_TAG='# tokenmill-slurm-ci'

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
case "$NODES" in
  "") MULTI=0 ;;
  *[!0-9]*) die "SLURM_CI_NODES must be a number >= 2 (unset: one node)" ;;
  *) [ "$NODES" -ge 2 ] && [ "$NODES" -le 200 ] || die "SLURM_CI_NODES must be 2..200 (unset: one node)"
     MULTI=1 ;;
esac
if [ "$MULTI" = 1 ]; then
  GPUS=${SLURM_CI_GPUS:-2}; SLURMD_TIMEOUT=${SLURM_CI_SLURMD_TIMEOUT:-10}
  BRIDGE_ADDR=$NET.1
  NODE_NAMES=$(for k in $(seq 1 "$NODES"); do printf 'node%s ' "$k"; done)
else
  GPUS=${SLURM_CI_GPUS:-0}; SLURMD_TIMEOUT=${SLURM_CI_SLURMD_TIMEOUT:-}
  NODE_NAMES=localhost
fi
MSG_TIMEOUT=${SLURM_CI_MESSAGE_TIMEOUT:-}
case "$GPUS$MAX_ARRAY$SLURMD_TIMEOUT$MSG_TIMEOUT" in *[!0-9]*)
  die "SLURM_CI_GPUS, _MAX_ARRAY_SIZE, _SLURMD_TIMEOUT and _MESSAGE_TIMEOUT must be numbers" ;;
esac

# --- 1. packages (only if missing) ------------------------------------------------
missing=0
for b in munged munge unmunge slurmctld slurmd sbatch squeue scontrol sinfo scancel; do
  command -v "$b" >/dev/null 2>&1 || missing=1
done
pkgs="slurmctld slurmd slurm-client munge"
if [ "$MULTI" = 1 ] && ! command -v ip >/dev/null 2>&1; then missing=1; pkgs="$pkgs iproute2"; fi
if [ "$missing" = 1 ]; then
  log "installing $pkgs (apt)"
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
    # shellcheck disable=SC2086
    if apt-get update -q >>"$aptlog" 2>&1 \
       && apt-get install -y -q --no-install-recommends -o Dpkg::Use-Pty=0 \
            -o DPkg::Lock::Timeout=300 \
            $pkgs </dev/null >>"$aptlog" 2>&1; then
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
if [ "$MULTI" = 1 ]; then
  # Leftovers of a cluster whose root is gone (the namespaces and the bridge vanish
  # on reboot, /etc/hosts lines don't): take over unused ones, refuse busy ones.
  for ns in $(ip netns list 2>/dev/null | awk '$1 ~ /^tmci-node[0-9]+$/ {print $1}'); do
    [ -z "$(ip netns pids "$ns" 2>/dev/null)" ] || die "network namespace $ns is in use (another cluster? see slurm-down.sh)"
    ip netns del "$ns" || die "cannot delete stale network namespace $ns"
  done
  for l in $(ip -o link show 2>/dev/null | awk -F': ' '{sub(/@.*/, "", $2); print $2}' \
             | grep -E "^($BRIDGE|tmci-v[0-9]+)\$"); do
    ip link del "$l" 2>/dev/null || true
  done
  # the nodes' subnet must be free
  if ip -4 route show "$NET.0/24" 2>/dev/null | grep -q . \
     || ip -4 addr show 2>/dev/null | grep -qF " $BRIDGE_ADDR/"; then
    die "$NET.0/24 is already in use on this machine (set SLURM_CI_NET)"
  fi
fi
ports=$CTLD_PORT
[ "$MULTI" = 1 ] || ports="$ports $SLURMD_PORT"   # each node namespace has its own ports
for port in $ports; do
  if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
    die "port $port is already in use (set SLURM_CI_CTLD_PORT / SLURM_CI_SLURMD_PORT)"
  fi
done
mkdir -p "$ROOT"/etc "$ROOT"/run "$ROOT"/munge "$ROOT"/state "$ROOT"/spool "$ROOT"/log
# munged insists: socket dir (and every parent) executable by all, key dir private.
chmod 755 "$ROOT" "$ROOT/etc" "$ROOT/run" "$ROOT/state" "$ROOT/spool" "$ROOT/log"
chmod 700 "$ROOT/munge"
# What slurm-down.sh and slurm-node.sh must know about this cluster (written before
# anything is created, so a failed start is still torn down completely).
{
  printf 'MULTI=%s\nNODE_NAMES="%s"\n' "$MULTI" "${NODE_NAMES% }"
  if [ "$MULTI" = 1 ]; then
    printf 'BRIDGE=%s\nHOSTS_TAG="%s"\n' "$BRIDGE" "$HOSTS_TAG"
  fi
} > "$ROOT/etc/cluster.env"

# --- 3. network (multi-node) ------------------------------------------------------
# hosts_write: /etc/hosts without our tagged lines, plus the lines on stdin. Written
# in place (not renamed), since /etc/hosts is often a bind mount in containers.
hosts_write() {
  local new
  new=$( { grep -vF -- " $HOSTS_TAG" /etc/hosts || true; cat; } )
  printf '%s\n' "$new" > /etc/hosts
}
if [ "$MULTI" = 1 ]; then
  ip link add "$BRIDGE" type bridge || die "cannot create bridge $BRIDGE"
  ip addr add "$BRIDGE_ADDR/24" dev "$BRIDGE"
  ip link set "$BRIDGE" up
  for k in $(seq 1 "$NODES"); do
    ns=tmci-node$k
    ip netns add "$ns" || die "cannot create network namespace $ns"
    ip -n "$ns" link set lo up
    ip link add "tmci-v$k" type veth peer name eth0 netns "$ns" || die "cannot create veth tmci-v$k"
    ip link set "tmci-v$k" master "$BRIDGE" up
    ip -n "$ns" addr add "$NET.$((10 + k))/24" dev eth0
    ip -n "$ns" link set eth0 up
    mkdir -p "$ROOT/spool/node$k"
  done
  chmod 755 "$ROOT"/spool/*
  for k in $(seq 1 "$NODES"); do printf '%s node%s %s\n' "$NET.$((10 + k))" "$k" "$HOSTS_TAG"; done \
    | hosts_write
  for k in $(seq 1 "$NODES"); do
    [ "$(getent hosts "node$k" | awk '{print $1; exit}')" = "$NET.$((10 + k))" ] \
      || die "node$k does not resolve to $NET.$((10 + k)) (another node$k in /etc/hosts?)"
  done
fi

# --- 4. munge ---------------------------------------------------------------------
dd if=/dev/urandom of="$ROOT/munge/munge.key" bs=1024 count=1 status=none
chmod 400 "$ROOT/munge/munge.key"
munged --key-file="$ROOT/munge/munge.key" --socket="$SOCK" \
       --pid-file="$ROOT/run/munged.pid" --log-file="$ROOT/log/munged.log" \
       --seed-file="$ROOT/munge/munged.seed" </dev/null >>"$ROOT/log/munged.out" 2>&1 \
  || die "munged failed to start"
munge -n -S "$SOCK" </dev/null | unmunge -S "$SOCK" >/dev/null 2>&1 \
  || die "munge credential round-trip failed"

# --- 5. slurm.conf and gres.conf --------------------------------------------------
# Real topology and memory from slurmd -C. Node names are fixed (localhost, or
# node1..N) and slurmd is started with -N, so the machine's hostname never has to
# match or resolve. Every node gets all of this machine's memory (not consumable).
hw=$(slurmd -C 2>/dev/null | head -n 1 || true)
field() { printf '%s\n' "$hw" | tr ' ' '\n' | sed -n "s/^$1=//p"; }
cpus=$(field CPUs); boards=$(field Boards); sockets=$(field SocketsPerBoard)
cores=$(field CoresPerSocket); threads=$(field ThreadsPerCore); mem=$(field RealMemory)
[ -n "$cpus" ] || cpus=$(nproc)
[ -n "$mem" ] || mem=$(( $(awk '/^MemTotal:/{print $2}' /proc/meminfo) / 1024 ))
if [ -n "$CPUS_OVERRIDE" ]; then
  hwspec="CPUs=$CPUS_OVERRIDE RealMemory=$mem"
  overrides="SlurmdParameters=config_overrides"
elif [ -n "$sockets" ] && [ -n "$cores" ] && [ -n "$threads" ]; then
  hwspec="CPUs=$cpus Boards=${boards:-1} SocketsPerBoard=$sockets CoresPerSocket=$cores ThreadsPerCore=$threads RealMemory=$mem"
  overrides=""
else
  hwspec="CPUs=$cpus RealMemory=$mem"
  overrides=""
fi
if [ "$GPUS" -gt 0 ]; then
  hwspec="$hwspec Gres=gpu:$GPUS"
  gres="GresTypes=gpu"
  # Fake GPUs: Slurm hands out the files named in gres.conf and sets
  # CUDA_VISIBLE_DEVICES from the numbers in their names (plain files leave it
  # empty: "not a valid character or block device"). They are character devices
  # with /dev/null's numbers (1,3), so nothing reaches hardware through them.
  mkdir -p "$ROOT/dev"
  for i in $(seq 0 $((GPUS - 1))); do
    mknod "$ROOT/dev/nvidia$i" c 1 3 || die "mknod $ROOT/dev/nvidia$i failed"
  done
  {
    echo "# generated by slurm-up.sh: fake GPUs, no NVML"
    echo "AutoDetect=off"
    # no NodeName: the line holds for every node (all share these files)
    if [ "$GPUS" = 1 ]; then files=nvidia0; else files="nvidia[0-$((GPUS - 1))]"; fi
    echo "Name=gpu File=$ROOT/dev/$files Flags=nvidia_gpu_env"
  } > "$ROOT/etc/gres.conf"
else
  gres=""
fi
if [ "$MULTI" = 1 ]; then
  ctldhost="localhost($BRIDGE_ADDR)"
  spool="$ROOT/spool/%n"; slurmdpid="$ROOT/run/slurmd-%n.pid"; slurmdlog="$ROOT/log/slurmd-%n.log"
  nodelines=$(for k in $(seq 1 "$NODES"); do
    echo "NodeName=node$k NodeAddr=$NET.$((10 + k)) $hwspec State=UNKNOWN"; done)
else
  ctldhost="localhost(127.0.0.1)"
  spool="$ROOT/spool"; slurmdpid="$ROOT/run/slurmd.pid"; slurmdlog="$ROOT/log/slurmd.log"
  nodelines="NodeName=localhost NodeAddr=127.0.0.1 $hwspec State=UNKNOWN"
fi
if [ "$KILL_INVALID" = 1 ]; then depend="DependencyParameters=kill_invalid_depend"; else depend=""; fi
timeouts=""
[ -z "$SLURMD_TIMEOUT" ] || timeouts="SlurmdTimeout=$SLURMD_TIMEOUT"
[ -z "$MSG_TIMEOUT" ] || timeouts="$timeouts
MessageTimeout=$MSG_TIMEOUT"
sched="batch_sched_delay=0,sched_min_interval=0"
if [ "$MULTI" = 1 ]; then
  # a requeued job waits cred_expire seconds (default 120) before it may start
  # again, and then for a scheduler pass: backfill every 2 s, not 30
  authinfo="socket=$SOCK,cred_expire=10"; sched="$sched,bf_interval=2"
else
  authinfo="socket=$SOCK"
fi

cat > "$CONF" <<EOF
# generated by slurm-up.sh
ClusterName=ci
SlurmctldHost=$ctldhost
SlurmctldPort=$CTLD_PORT
SlurmdPort=$SLURMD_PORT
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=$authinfo
StateSaveLocation=$ROOT/state
SlurmdSpoolDir=$spool
SlurmctldPidFile=$ROOT/run/slurmctld.pid
SlurmdPidFile=$slurmdpid
SlurmctldLogFile=$ROOT/log/slurmctld.log
SlurmdLogFile=$slurmdlog
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
SchedulerParameters=$sched
$depend
MpiDefault=none
MailProg=/bin/true
ReturnToService=2
$timeouts
# seconds between SIGTERM and SIGKILL on scancel/time limit (default 30)
KillWait=5
MinJobAge=600
MaxArraySize=$MAX_ARRAY
$gres
$overrides
$nodelines
PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP
EOF
export SLURM_CONF=$CONF

# --- 6. daemons -------------------------------------------------------------------
slurmctld </dev/null >>"$ROOT/log/slurmctld.out" 2>&1 || die "slurmctld failed to start"
deadline=$(( SECONDS + TIMEOUT ))
until scontrol ping 2>/dev/null | grep -q 'is UP'; do
  [ $SECONDS -lt $deadline ] || die "slurmctld did not answer within ${TIMEOUT}s"
  sleep 0.2
done
if [ "$MULTI" = 1 ]; then
  for n in $NODE_NAMES; do
    bash "$HERE/slurm-node.sh" start-daemon "$n" || die "slurmd of $n failed to start"
  done
else
  slurmd -N localhost </dev/null >>"$ROOT/log/slurmd.out" 2>&1 || die "slurmd failed to start"
fi
want=$(for n in $NODE_NAMES; do echo "$n idle"; done | sort)
until [ "$(sinfo -h -N -o '%N %T' 2>/dev/null | sort -u)" = "$want" ]; do
  [ $SECONDS -lt $deadline ] || die "nodes not idle within ${TIMEOUT}s: $(sinfo -h -N -o '%N %T %E' 2>&1)"
  sleep 0.2
done

# --- 7. smoke test: one real batch job --------------------------------------------
# (poll rather than sbatch --wait: its polling backs off to ~10 s). Multi-node: one
# step over all nodes, so the nodes reach each other and the controller.
if [ "$MULTI" = 1 ]; then
  smoke=(-N "$NODES" --ntasks-per-node=1 --wrap 'srun true')
else
  smoke=(--wrap true)
fi
jid=$(sbatch --parsable -o /dev/null -e /dev/null -J slurm-up-smoke "${smoke[@]}" </dev/null) \
  || die "sbatch failed"
until state=$(squeue -h -t all -j "$jid" -o '%T' 2>/dev/null) && [ "$state" = COMPLETED ]; do
  case "$state" in FAILED|CANCELLED|TIMEOUT|NODE_FAIL|OUT_OF_MEMORY|BOOT_FAIL|DEADLINE)
    die "smoke-test job $jid ended $state" ;; esac
  [ $SECONDS -lt $deadline ] || die "smoke-test job $jid not done within ${TIMEOUT}s (state $state)"
  sleep 0.2
done

if [ "$MULTI" = 1 ]; then
  printf 'export SLURM_CONF=%s SLURM_CI_BRIDGE_ADDR=%s\n' "$CONF" "$BRIDGE_ADDR" > "$ROOT/env.sh"
else
  printf 'export SLURM_CONF=%s\n' "$CONF" > "$ROOT/env.sh"
fi
log "cluster up: $(sinfo -h -o '%P %a %D %T %N') ($(sinfo -h -o '%c') CPUs, ${mem} MB, $GPUS GPUs per node)"
cat "$ROOT/env.sh"
