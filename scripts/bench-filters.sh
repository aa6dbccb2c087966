#!/usr/bin/env bash
# Bench: langid and quality, alone and fused, one core, next to datatrove's
# LanguageFilter and Gopher/C4/FineWeb filters on the same documents; then extract
# alone and extract -> langid -> quality fused on the HTML pages of one WARC file of the
# extract bench corpus (real Debian documentation pages), next to datatrove's
# Trafilatura extractor and the same filters. Prints a table.
# Usage: scripts/bench-filters.sh [documents] [warc]
#   (default 5000 documents; default WARC: the first file of the extract bench corpus,
#   built by scripts/extract_corpus.py when missing)
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/fetch-models.sh
python3 -m pip install --quiet --disable-pip-version-check -r scripts/requirements-bench.txt
n="${1:-5000}"
warc="${2:-.cache/extract-corpus/warc/corpus-00000.warc.gz}"
if [ ! -f "$warc" ]; then
  python3 scripts/extract_corpus.py build .cache/extract-corpus
fi
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
python3 scripts/bench_filters.py make "$n" "$work/corpus.jsonl"
cargo build --release --locked -p jobs --bench filters >/dev/null 2>&1 || cargo build --release --locked -p jobs --benches
bin="$(ls -t target/release/deps/filters-* | grep -v '\.d$' | head -1)"
TOKENMILL_BENCH_CORPUS="$work/corpus.jsonl" TOKENMILL_BENCH_WARC="$warc" taskset -c 0 "$bin" >"$work/ours.json"
taskset -c 0 python3 scripts/bench_filters.py compare "$work/corpus.jsonl" "$work/ours.json" "$(scripts/fetch-models.sh --print-dir)/lid.176.ftz" "$warc"

# The quality cross-check on real text: the pages of that WARC file extracted, labelled
# and filtered by the binaries, then compared with datatrove's filters document by document.
cargo build --release --locked -p extract -p langid -p quality --bins >/dev/null 2>&1
./target/release/mill-extract --input "$warc" --output "$work/x" --log-format json >/dev/null 2>&1
./target/release/mill-langid --input "$work/x" --output "$work/l" --config <(echo 'min_score = 0.0') --log-format json >/dev/null 2>&1
./target/release/mill-quality --input "$work/l" --output "$work/q" --keep-rejected --log-format json >/dev/null 2>&1
python3 scripts/quality_crosscheck.py "$work/l" "$work/q"
