#!/usr/bin/env bash
# Bench: the trainer's data loader alone, one process, tokens/s from synthetic int32
# shards on local disk and on a loopback S3 server: moto (the correctness tests'
# server, which reads a whole object for each ranged GET, so on large objects it
# measures itself) and s3s-fs (a file-backed S3 server in Rust, built once into
# .cache/s3s-fs with `cargo install`), which serves ranges from the file.
# Usage: scripts/bench-loader.sh [tokens] [seq_len] [batch] [seconds] [shard MiB]
#   SERVERS="disk moto s3s-fs" (default: all three)
set -euo pipefail
cd "$(dirname "$0")/.."
# The trainer links libtorch: PyPI's torch 2.11.0 in .cache/torch-venv (installed once).
eval "$(trainer/setup-torch.sh)"
tokens="${1:-50000000}"; seq="${2:-2048}"; batch="${3:-32}"; seconds="${4:-10}"; shard="${5:-256}"
servers="${SERVERS:-disk moto s3s-fs}"
source scripts/s3-server.sh
# The workspace's feature set, as the quickstart and the tests build it (no rebuild).
cargo build --release --locked --workspace --examples >/dev/null
bin=target/release/examples/loader_bench
work="$(mktemp -d)"
s3s_pid=""
trap 'rm -rf "$work" "$log"; kill "$s3_pid" $s3s_pid 2>/dev/null || true' EXIT
# One server's figure: shards written through it, then read for SECONDS.
bench_s3() {  # endpoint label
  AWS_ENDPOINT_URL="$1" python3 - <<PY
import boto3
boto3.client("s3", endpoint_url="$1").create_bucket(Bucket="loader-bench")
PY
  AWS_ENDPOINT_URL="$1" "$bin" write s3://loader-bench/shards/ "$tokens" "$shard" >/dev/null
  AWS_ENDPOINT_URL="$1" "$bin" read s3://loader-bench/shards/ "$seq" "$batch" "$seconds" |
    sed "s/^{/{\"server\": \"$2\", \"shard_mib\": $shard, /"
}
for server in $servers; do
  case "$server" in
    disk)
      "$bin" write "$work/shards" "$tokens" "$shard" >/dev/null
      "$bin" read "$work/shards" "$seq" "$batch" "$seconds" |
        sed "s/^{/{\"server\": \"disk\", \"shard_mib\": $shard, /"
      rm -rf "$work/shards" ;;
    moto) bench_s3 "$TOKENMILL_TEST_S3_ENDPOINT" moto ;;
    s3s-fs)
      s3s=.cache/s3s-fs/bin/s3s-fs
      if ! "$s3s" --help >/dev/null 2>&1; then
        cargo install --quiet --locked s3s-fs --version 0.14.1 --features binary --root .cache/s3s-fs >&2
      fi
      port="$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
      mkdir -p "$work/s3s"
      "$s3s" --host 127.0.0.1 --port "$port" --access-key "$AWS_ACCESS_KEY_ID" \
        --secret-key "$AWS_SECRET_ACCESS_KEY" "$work/s3s" >"$work/s3s.log" 2>&1 &
      s3s_pid=$!
      for _ in $(seq 1 100); do
        python3 -c "import socket; socket.create_connection(('127.0.0.1', $port), 0.2)" 2>/dev/null && break
        sleep 0.1
      done
      bench_s3 "http://127.0.0.1:$port" s3s-fs
      kill "$s3s_pid"; s3s_pid="" ;;
    *) echo "unknown server $server (disk, moto, s3s-fs)" >&2; exit 2 ;;
  esac
done
