#!/usr/bin/env bash
# Packs bench pages as WARC files into OUT_DIR, one file per source, numbered in order:
# WCXB/Dragnet archives or unpacked folders (through scripts/extract_gold.py, in the
# gold venv, which the caller sets up), or .warc.gz files (copied).
# Usage: scripts/pack-warc.sh OUT_DIR DATA...
set -euo pipefail
cd "$(dirname "$0")/.."
out="${1:?usage: scripts/pack-warc.sh OUT_DIR DATA...}"
shift
venv=.cache/gold-venv
mkdir -p "$out"
k=0
for src in "$@"; do
  k=$((k + 1))
  name="$(basename "$src")"
  name="$k-${name%%.*}"
  if [[ "$src" == *.warc.gz ]]; then
    cp "$src" "$out/$name.warc.gz"
  else
    data="$("$venv/bin/python" scripts/extract_gold.py unpack "$src" .cache/gold)"
    "$venv/bin/python" scripts/extract_gold.py warc "$data" "$out/$name.warc.gz"
  fi
done
