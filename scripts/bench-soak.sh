#!/usr/bin/env bash
# The soak: the whole fixture pipeline on the loopback S3 server behind the
# fault-injecting proxy (5% errors, resets and cut bodies, 5% slow bodies), its task
# killed with SIGKILL every 30 s and restarted, round after round; each round's shards
# must equal a clean run's, and the task's memory and open files stay bounded (sampled
# every second). Prints the counts at the end. Not part of the tests (10 minutes).
# Usage: scripts/bench-soak.sh [SECONDS (600)] [KILL_EVERY (30)]
set -euo pipefail
cd "$(dirname "$0")/.."
eval "$(trainer/setup-torch.sh)"
scripts/fetch-models.sh
source scripts/s3-server.sh
export TOKENMILL_SOAK_SECONDS="${1:-600}" TOKENMILL_SOAK_KILL_EVERY="${2:-30}"
cargo nextest run -p jobs --locked --cargo-profile release --run-ignored only --no-capture \
  -E 'test(soak_under_faults_and_kills)'
