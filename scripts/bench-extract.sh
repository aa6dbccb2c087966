#!/usr/bin/env bash
# Bench: mill-extract (WARC -> main text) on real HTML from Debian documentation
# packages (25 languages), on one core and on two, next to datatrove's WarcReader ->
# Trafilatura pipeline and resiliparse on the same core; then the word-level F1 of its
# text against trafilatura's (as datatrove runs it), per language. Prints tables.
# Usage: scripts/bench-extract.sh [max_pages]   (default 30000)
#   DATATROVE_PAGES: pages the datatrove timing runs on (default 2000; it does ~25/s).
# The corpus and the trafilatura reference texts are cached under .cache/.
set -euo pipefail
cd "$(dirname "$0")/.."
pages="${1:-30000}"
dt_pages="${DATATROVE_PAGES:-2000}"
python3 -m pip install --quiet --disable-pip-version-check -r scripts/requirements-bench.txt
corpus=.cache/extract-corpus
[ "$pages" = 30000 ] || corpus=".cache/extract-corpus-$pages"
python3 scripts/extract_corpus.py build "$corpus" --max-pages "$pages"
cargo build --release --locked -p extract
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
n="$(wc -l <"$corpus/manifest.jsonl")"
warc_bytes="$(python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["warc_bytes"])' "$corpus/corpus.json")"

# Wall seconds of a command; its output goes to $work/log, shown if it fails.
timed() {
  local start end
  start="$(date +%s.%N)"
  "$@" >"$work/log" 2>&1 || { cat "$work/log" >&2; return 1; }
  end="$(date +%s.%N)"
  python3 -c "import sys; print(f'{float(sys.argv[2]) - float(sys.argv[1]):.3f}')" "$start" "$end"
}

echo "mill-extract, 1 thread, core 0" >&2
t1="$(timed taskset -c 0 target/release/mill-extract --input "$corpus/warc" --output "$work/ours" --threads 1 --force)"
runs=(--run "mill-extract, 1 thread=$t1:1")
t2=""
if [ "$(nproc)" -ge 2 ]; then
  echo "mill-extract, 2 threads" >&2
  t2="$(timed taskset -c 0,1 target/release/mill-extract --input "$corpus/warc" --output "$work/ours2" --threads 2 --force)"
  runs+=(--run "mill-extract, 2 threads=$t2:2")
fi
python3 scripts/extract_reference.py speed "$corpus/warc" --limit "$dt_pages" --cpu 0 >"$work/speed.json"

# Reference texts: trafilatura's are slow (~25 pages/s a core), so they are kept with
# the corpus and remade only when the corpus is rebuilt.
if [ ! "$corpus/trafilatura.jsonl" -nt "$corpus/corpus.json" ]; then
  python3 scripts/extract_reference.py trafilatura "$corpus/warc" "$corpus/trafilatura.jsonl" --jobs "$(nproc)"
fi
# The same with deduplicate=False: trafilatura's deduplicate drops paragraphs it has
# seen on earlier pages of the task (cross-page state, the dedup stage's job here), which
# empties pages that share text with others; per-page scores need it off.
if [ ! "$corpus/trafilatura-per-page.jsonl" -nt "$corpus/corpus.json" ]; then
  python3 scripts/extract_reference.py trafilatura "$corpus/warc" "$corpus/trafilatura-per-page.jsonl" --jobs "$(nproc)" --no-dedup
fi
python3 scripts/extract_reference.py resiliparse "$corpus/warc" "$work/resiliparse.jsonl"

echo
echo "$n pages, $((warc_bytes / 1000000)) MB of WARC (gzip), $(ls "$corpus/warc" | wc -l) files; datatrove timed on the first $dt_pages pages"
python3 scripts/extract_reference.py table "$work/speed.json" --pages "$n" --warc-bytes "$warc_bytes" "${runs[@]}"
if [ -n "$t2" ]; then
  python3 -c 'import sys; print(f"mill-extract speedup, 2 threads over 1: {float(sys.argv[1]) / float(sys.argv[2]):.2f}x")' "$t1" "$t2"
fi
echo
echo "== against trafilatura as datatrove runs it (deduplicate=True)"
python3 scripts/extract_compare.py "$corpus/trafilatura.jsonl" "$work/ours" "$corpus/manifest.jsonl" \
  --other "resiliparse=$work/resiliparse.jsonl" --worst 0
echo
echo "== against trafilatura page by page (deduplicate=False)"
python3 scripts/extract_compare.py "$corpus/trafilatura-per-page.jsonl" "$work/ours" "$corpus/manifest.jsonl" \
  --other "resiliparse=$work/resiliparse.jsonl" --worst 15 --by-package
