#!/usr/bin/env bash
# Bench: extraction quality against ground truth written by people (the WCXB layout:
# html/<id>.html, ground-truth/<id>.json), mill-extract next to Python trafilatura
# (defaults, and FineWeb's settings) and resiliparse on the same pages in the same run.
# Prints word F1, precision and recall, F1 per page type, the share of empty outputs,
# the with/without snippet rates, CPU ms per page, the 20 worst pages with a cause, and
# mill-extract's 1 vs 2 thread speedup.
# Usage: scripts/bench-extract-gold.sh DATA   (the .tar.zst archive, or its unpacked folder)
#   GOLD_REFS=keep reuses the reference tools' outputs of an earlier run (they do not
#   change with our code); the default recomputes them, which times them again.
set -euo pipefail
cd "$(dirname "$0")/.."
src="${1:?usage: scripts/bench-extract-gold.sh DATA (archive or folder)}"
venv=.cache/gold-venv
[ -x "$venv/bin/python" ] || python3 -m venv "$venv"
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check -r scripts/requirements-gold.txt
py="$venv/bin/python"
data="$($py scripts/extract_gold.py unpack "$src" .cache/gold)"
cargo build --release --locked -p extract
work=.cache/gold-run
mkdir -p "$work"
$py scripts/extract_gold.py warc "$data" "$work/pages.warc.gz"
n="$(ls "$data/html" | wc -l)"

# CPU seconds (user + system) of a command, its output kept in $work/log.
cpu() {
  $py -c '
import resource, subprocess, sys
with open(sys.argv[1], "w") as log:
    rc = subprocess.run(sys.argv[2:], stdout=log, stderr=log).returncode
u = resource.getrusage(resource.RUSAGE_CHILDREN)
print(f"{u.ru_utime + u.ru_stime:.3f}")
sys.exit(rc)' "$work/log" "$@" || { cat "$work/log" >&2; return 1; }
}
wall() {
  local start end
  start="$(date +%s.%N)"
  "$@" >"$work/log" 2>&1 || { cat "$work/log" >&2; return 1; }
  end="$(date +%s.%N)"
  $py -c "import sys; print(f'{float(sys.argv[2]) - float(sys.argv[1]):.3f}')" "$start" "$end"
}

echo "mill-extract on $n pages, 1 thread, core 0" >&2
ours_cpu="$(cpu taskset -c 0 target/release/mill-extract --input "$work/pages.warc.gz" --output "$work/ours" --threads 1 --force --log-format json)"
runs=(--run "mill-extract=$work/ours@$ours_cpu")
for tool in trafilatura trafilatura-fineweb resiliparse; do
  if [ "${GOLD_REFS:-}" != keep ] || [ ! -s "$work/$tool.jsonl" ]; then
    echo "$tool on $n pages, core 0" >&2
    taskset -c 0 $py scripts/extract_gold.py reference "$data" "$tool" "$work/$tool.jsonl"
  fi
  runs+=(--run "$tool=$work/$tool.jsonl")
done
echo
$py scripts/extract_gold.py score "$data" "${runs[@]}" --worst 20 --json "$work/scores.json"

if [ "$(nproc)" -ge 2 ]; then
  # Threads: the pages four times over (four inputs), so that each run lasts seconds.
  rm -rf "$work/x4" && mkdir -p "$work/x4"
  for k in 1 2 3 4; do ln -sf "$(pwd)/$work/pages.warc.gz" "$work/x4/part-$k.warc.gz"; done
  t1="$(wall taskset -c 0 target/release/mill-extract --input "$work/x4" --output "$work/t1" --threads 1 --force --log-format json)"
  t2="$(wall taskset -c 0,1 target/release/mill-extract --input "$work/x4" --output "$work/t2" --threads 2 --force --log-format json)"
  $py -c 'import sys; a, b = map(float, sys.argv[1:3]); print(f"\nmill-extract on {4 * int(sys.argv[3])} pages: 1 thread {a:.2f} s, 2 threads {b:.2f} s, speedup {a / b:.2f}x")' "$t1" "$t2" "$n"
fi
