#!/usr/bin/env bash
# Bench: dedup's buckets and clusters phases at scale, on planted signatures
# (stages/dedup/src/planted.rs: signature files written directly, a tenth of the
# documents in planted chains and stars that cross inputs and bands). Per phase: wall
# time, CPU time of all tasks, peak RSS of the largest task, bytes written per document;
# the removal lists are checked against the planted clusters.
# Usage: scripts/bench-dedup-scale.sh <documents> [tasks, default 2] [clusters_memory_bytes,
#        default 268435456] [documents per input, default 100000]
# REUSE_BUCKETS=1 keeps the pairs of an earlier run of the same size (clusters only);
# THREADS=n gives each task n threads (default 1).
set -euo pipefail
cd "$(dirname "$0")/.."
docs="${1:?usage: scripts/bench-dedup-scale.sh <documents> [tasks] [memory] [per input]}"
tasks="${2:-2}"
memory="${3:-268435456}"
per_file="${4:-100000}"
cargo build --release --locked -p dedup --bins --examples >/dev/null 2>&1 || cargo build --release --locked -p dedup --bins --examples
python3 scripts/bench_dedup_scale.py "$docs" --tasks "$tasks" --memory "$memory" \
  --per-file "$per_file" --threads "${THREADS:-1}" --json ".cache/bench-dedup-scale/$docs-$memory-$tasks-${THREADS:-1}.json" \
  ${REUSE_BUCKETS:+--reuse-buckets}
