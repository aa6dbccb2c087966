#!/usr/bin/env bash
# Bench: mill-pii beside datatrove's PIIFormatter on the same documents, one core.
# Usage: scripts/bench-pii.sh DOCS [repeats]
#   DOCS: JSONL, or a Parquet file or folder of document shards. Real web text: the
#   extracted WCXB pages scripts/bench-extract-gold.sh leaves in
#   .cache/gold-run/wcxb-dev/ours/.
set -euo pipefail
cd "$(dirname "$0")/.."
python3 -m pip install --quiet --disable-pip-version-check -r scripts/requirements-bench.txt
cargo build --release --locked -p pii --bins --benches >/dev/null 2>&1
bench="$(ls -t target/release/deps/pii-* | grep -v '\.d$' | head -1)"
taskset -c 0 python3 scripts/bench_pii.py "$1" "$bench" --repeat "${2:-3}"
