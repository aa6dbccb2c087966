#!/usr/bin/env bash
# Bench: FineWeb-2's quality step (`languages = "fineweb2"`: each language's settings
# and word segmenter) per script group (Latin: de, fr, tr, vi; CJK: zh, ja, ko; Thai;
# Arabic: ar, fa), mill-quality on one core next to datatrove 0.10.1's filters set up
# as FineWeb-2's pipeline sets them, on the same real-text documents. Prints a table.
# Usage: scripts/bench-fineweb2.sh [corpus dir] [copies]
#   (default .cache/multilingual-corpus, built by scripts/multilingual_corpus.py when
#   missing; the corpus is read `copies` times, default 3)
# Both sides' CPU time after loading: mill-quality's process CPU time less that of a run
# on the group's first document alone (its start: tables and dictionaries read, shown as
# "start s"); datatrove's filters' CPU time after each language's tokenizer is loaded.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/fetch-models.sh
python3 -m pip install --quiet --disable-pip-version-check -r scripts/requirements-test.txt
corpus="${1:-.cache/multilingual-corpus}"
copies="${2:-3}"
if [ ! -f "$corpus/tha_Thai.jsonl" ]; then
  python3 scripts/multilingual_corpus.py "$corpus"
fi
cargo build --release --locked -p quality --bin mill-quality >/dev/null 2>&1
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
python3 scripts/bench_fineweb2.py make "$corpus" "$work/in" "$copies"
echo 'languages = "fineweb2"' >"$work/quality.toml"
printf '%-8s %7s %7s %8s %12s %12s %8s\n' group docs MB "start s" "ours docs/s" "datatrove" ratio
taskset -c 0 python3 scripts/bench_fineweb2.py time "$work/in" >"$work/theirs.jsonl"
while read -r line; do
  group="$(echo "$line" | python3 -c 'import json,sys; print(json.load(sys.stdin)["group"])')"
  cpu() { # CPU seconds of mill-quality on input folder $1
    rm -rf "$work/out"
    /usr/bin/time -o "$work/time" -f '%U %S' taskset -c 0 ./target/release/mill-quality \
      --input "$1" --output "$work/out" --config "$work/quality.toml" \
      --threads 1 --log-format json >/dev/null 2>&1
    tail -1 "$work/time" | awk '{ print $1 + $2 }'
  }
  mkdir -p "$work/one/$group"
  head -1 "$work/in/$group/docs.jsonl" >"$work/one/$group/docs.jsonl"
  start="$(cpu "$work/one/$group")"
  total="$(cpu "$work/in/$group")"
  python3 - "$line" "$start" "$total" <<'PY'
import json, sys
t = json.loads(sys.argv[1])
start, total = float(sys.argv[2]), float(sys.argv[3])
ours = max(total - start, 1e-3)
print(f'{t["group"]:<8} {t["docs"]:>7} {t["bytes"] / 1e6:>7.1f} {start:>8.2f} {t["docs"] / ours:>12.0f} '
      f'{t["docs"] / t["seconds"]:>12.1f} {t["seconds"] / ours:>7.1f}x')
PY
done <"$work/theirs.jsonl"
