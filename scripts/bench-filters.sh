#!/usr/bin/env bash
# Bench: langid and quality, alone and fused, one core, next to datatrove's
# LanguageFilter and Gopher/C4/FineWeb filters on the same documents. Prints a table.
# Usage: scripts/bench-filters.sh [documents]   (default 5000)
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/fetch-models.sh
n="${1:-5000}"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
python3 scripts/bench_filters.py make "$n" "$work/corpus.jsonl"
cargo build --release --locked -p quality --bench filters >/dev/null 2>&1 || cargo build --release --locked -p quality --benches
bin="$(ls -t target/release/deps/filters-* | grep -v '\.d$' | head -1)"
TOKENMILL_BENCH_CORPUS="$work/corpus.jsonl" "$bin" >"$work/ours.json"
python3 scripts/bench_filters.py compare "$work/corpus.jsonl" "$work/ours.json" .cache/models/lid.176.ftz
