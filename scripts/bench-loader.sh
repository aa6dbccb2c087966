#!/usr/bin/env bash
# Bench: the trainer's data loader alone, one process, tokens/s from synthetic int32
# shards on local disk and on the loopback S3 server (moto, as in the tests).
# Usage: scripts/bench-loader.sh [tokens] [seq_len] [batch] [seconds] [shard MiB]
set -euo pipefail
cd "$(dirname "$0")/.."
# The trainer links libtorch: PyPI's torch 2.11.0 in .cache/torch-venv (installed once).
eval "$(trainer/setup-torch.sh)"
tokens="${1:-50000000}"; seq="${2:-2048}"; batch="${3:-32}"; seconds="${4:-10}"; shard="${5:-256}"
source scripts/s3-server.sh
cargo build --release --locked -p trainer --example loader_bench >/dev/null
bin=target/release/examples/loader_bench
work="$(mktemp -d)"
trap 'rm -rf "$work"; kill "$s3_pid" 2>/dev/null || true' EXIT
"$bin" write "$work/shards" "$tokens" "$shard"
"$bin" read "$work/shards" "$seq" "$batch" "$seconds"
export AWS_ENDPOINT_URL="$TOKENMILL_TEST_S3_ENDPOINT"
python3 - <<PY
import boto3
boto3.client("s3", endpoint_url="$TOKENMILL_TEST_S3_ENDPOINT").create_bucket(Bucket="loader-bench")
PY
"$bin" write s3://loader-bench/shards/ "$tokens" "$shard"
"$bin" read s3://loader-bench/shards/ "$seq" "$batch" "$seconds"
