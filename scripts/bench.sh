#!/usr/bin/env bash
# Runs the benchmarks (storage on disk and on the loopback S3 server, Parquet shards).
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/s3-server.sh
cargo bench --locked -p pipeline "$@"
