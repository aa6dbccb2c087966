#!/usr/bin/env bash
# Bench: extraction quality against ground truth written by people, on one or more sets
# (WCXB's layout: html/<id>.html, ground-truth/<id>.json; Dragnet's: html/<id>.html,
# gold/<id>.txt), mill-extract next to Python trafilatura (defaults, and FineWeb's
# settings) and resiliparse on the same pages in the same run. Prints, per set, word F1,
# precision and recall, F1 per page type, the share of empty outputs, the with/without
# snippet rates, CPU ms per page and the 20 worst pages with a cause; then one table of
# every set side by side, and mill-extract's 1 vs 2 thread speedup.
# Usage: scripts/bench-extract-gold.sh DATA...   (.tar.zst archives or unpacked folders,
#   e.g. wcxb-dev.tar.zst dragnet-train.tar.zst)
#   GOLD_REFS=keep reuses the reference tools' outputs of an earlier run (they do not
#   change with our code); the default recomputes them, which times them again.
#   EXTRACT_CONFIG=file gives mill-extract a config (e.g. `favor = "recall"`).
set -euo pipefail
cd "$(dirname "$0")/.."
[ $# -ge 1 ] || { echo "usage: scripts/bench-extract-gold.sh DATA... (archives or folders)" >&2; exit 2; }
venv=.cache/gold-venv
[ -x "$venv/bin/python" ] || python3 -m venv "$venv"
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check -r scripts/requirements-gold.txt
py="$venv/bin/python"
cargo build --release --locked -p extract
config=()
[ -z "${EXTRACT_CONFIG:-}" ] || config=(--config "$EXTRACT_CONFIG")
log=.cache/gold-run/log
mkdir -p .cache/gold-run

# CPU seconds (user + system) of a command, its output kept in $log.
cpu() {
  $py -c '
import resource, subprocess, sys
with open(sys.argv[1], "w") as log:
    rc = subprocess.run(sys.argv[2:], stdout=log, stderr=log).returncode
u = resource.getrusage(resource.RUSAGE_CHILDREN)
print(f"{u.ru_utime + u.ru_stime:.3f}")
sys.exit(rc)' "$log" "$@" || { cat "$log" >&2; return 1; }
}
wall() {
  local start end
  start="$(date +%s.%N)"
  "$@" >"$log" 2>&1 || { cat "$log" >&2; return 1; }
  end="$(date +%s.%N)"
  $py -c "import sys; print(f'{float(sys.argv[2]) - float(sys.argv[1]):.3f}')" "$start" "$end"
}

scores=()
for src in "$@"; do
  data="$($py scripts/extract_gold.py unpack "$src" .cache/gold)"
  name="$(basename "$src")"
  name="${name%%.*}"
  work=".cache/gold-run/$name"
  mkdir -p "$work"
  $py scripts/extract_gold.py warc "$data" "$work/pages.warc.gz"
  n="$(ls "$data/html" | wc -l)"
  echo "mill-extract on $n pages, 1 thread, core 0" >&2
  ours_cpu="$(cpu taskset -c 0 target/release/mill-extract --input "$work/pages.warc.gz" --output "$work/ours" --threads 1 --force --log-format json "${config[@]}")"
  runs=(--run "mill-extract=$work/ours@$ours_cpu")
  for tool in trafilatura trafilatura-fineweb resiliparse; do
    if [ "${GOLD_REFS:-}" != keep ] || [ ! -s "$work/$tool.jsonl" ]; then
      echo "$tool on $n pages, core 0" >&2
      taskset -c 0 $py scripts/extract_gold.py reference "$data" "$tool" "$work/$tool.jsonl"
    fi
    runs+=(--run "$tool=$work/$tool.jsonl")
  done
  echo
  echo "## $name"
  $py scripts/extract_gold.py score "$data" "${runs[@]}" --worst 20 --json "$work/scores.json"
  scores+=("$name=$work/scores.json")
done
echo
echo "## every set"
$py scripts/extract_gold.py sets "${scores[@]}"

if [ "$(nproc)" -ge 2 ]; then
  # Threads: the pages four times over (four inputs), so that each run lasts seconds.
  rm -rf "$work/x4" && mkdir -p "$work/x4"
  for k in 1 2 3 4; do ln -sf "$(pwd)/$work/pages.warc.gz" "$work/x4/part-$k.warc.gz"; done
  t1="$(wall taskset -c 0 target/release/mill-extract --input "$work/x4" --output "$work/t1" --threads 1 --force --log-format json)"
  t2="$(wall taskset -c 0,1 target/release/mill-extract --input "$work/x4" --output "$work/t2" --threads 2 --force --log-format json)"
  $py -c 'import sys; a, b = map(float, sys.argv[1:3]); print(f"\nmill-extract on {4 * int(sys.argv[3])} pages: 1 thread {a:.2f} s, 2 threads {b:.2f} s, speedup {a / b:.2f}x")' "$t1" "$t2" "$n"
fi
