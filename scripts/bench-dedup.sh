#!/usr/bin/env bash
# Bench: MinHash dedup quality and speed next to datatrove, and memory at scale.
# 1. Near-duplicate pairs built from real documents (scripts/text_corpus.py's Debian
#    documentation text) with word edits at known rates: detection per true Jaccard
#    similarity next to the theoretical curve (must stay within 3 points where a bin
#    has >= 200 pairs), false positives below 0.5, precision and recall of both tools.
# 2. The four phases of mill-dedup (one thread) and of datatrove's MinHash (one worker,
#    default config) on those documents, one core each (taskset): time and peak RSS.
# 3. A synthetic corpus (default 2,000,000 documents): per phase wall time, peak RSS and
#    bytes written per document, on both cores.
# Usage: scripts/bench-dedup.sh [pairs, default 30000] [synthetic documents, 0 skips]
set -euo pipefail
cd "$(dirname "$0")/.."
pairs="${1:-30000}"
synth="${2:-2000000}"
python3 -m pip install --quiet --disable-pip-version-check -r scripts/requirements-bench.txt
if [ ! -f .cache/text-corpus/corpus.json ]; then
  python3 scripts/text_corpus.py build .cache/text-corpus
fi
cargo build --release --locked -p dedup --bins --examples >/dev/null 2>&1 || cargo build --release --locked -p dedup --bins --examples
bin=target/release/mill-dedup
work=.cache/bench-dedup
mkdir -p "$work"
python3 scripts/bench_dedup.py make .cache/text-corpus "$work/quality" --pairs "$pairs"
target/release/examples/dedup_quality "$work/quality/docs" "$work/quality/pairs.jsonl" >"$work/curve.json"
taskset -c 0 python3 scripts/bench_dedup.py phases ours "$work/quality/docs" "$work/ours" --bin "$bin" >"$work/ours.json"
taskset -c 0 python3 scripts/bench_dedup.py phases datatrove "$work/quality/docs" "$work/datatrove" >"$work/datatrove.json"
python3 scripts/bench_dedup.py report "$work/quality/pairs.jsonl" "$work/curve.json" "$work/ours.json" "$work/datatrove.json"
if [ "$synth" -gt 0 ]; then
  corpus="$work/synthetic-$synth"
  if [ ! -f "$corpus/.complete" ]; then
    rm -rf "$corpus"
    target/release/examples/dedup_synthetic "$corpus" "$synth"
    touch "$corpus/.complete"
  fi
  echo
  python3 scripts/bench_dedup.py scale "$corpus" "$work/scale" --bin "$bin" --threads 2
fi
