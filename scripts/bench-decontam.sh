#!/usr/bin/env bash
# Bench: mill-decontam (index and filter) beside datatrove's n-gram decontamination on
# the same documents and evaluation texts, one core; memory per million n-grams.
# Usage: scripts/bench-decontam.sh DOCS [eval share] [n]
#   DOCS: JSONL, or a Parquet file or folder of document shards. Real web text: the
#   extracted WCXB pages scripts/bench-extract-gold.sh leaves in
#   .cache/gold-run/wcxb-dev/ours/.
set -euo pipefail
cd "$(dirname "$0")/.."
python3 -m pip install --quiet --disable-pip-version-check -r scripts/requirements-bench.txt
cargo build --release --locked -p decontam --bins >/dev/null 2>&1
taskset -c 0 python3 scripts/bench_decontam.py "$1" --eval-share "${2:-10}" --n "${3:-13}"
