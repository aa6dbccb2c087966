#!/usr/bin/env bash
# Bench: 1 vs 2 threads on every step of the fixture pipeline (text with every stage,
# the four MinHash phases, tokenizer training and encoding; not the train phase), on
# real pages: the given WARC files, each linked COPIES times (default 4) so that a step
# has several inputs. Runs `mill run` with --threads 1 on core 0, then --threads 2 on
# cores 0 and 1, one step at a time (`--only`), and prints each step's wall seconds and
# speedup.
# Usage: scripts/bench-threads.sh WARC... (e.g. the pages scripts/bench-chain.sh packs)
set -euo pipefail
cd "$(dirname "$0")/.."
[ $# -ge 1 ] || { echo "usage: scripts/bench-threads.sh WARC..." >&2; exit 2; }
[ "$(nproc)" -ge 2 ] || { echo "needs 2 cores" >&2; exit 2; }
scripts/fetch-models.sh >/dev/null
cargo build --release --locked -p jobs --bin mill
copies="${COPIES:-4}"
work=.cache/threads-run
rm -rf "$work" && mkdir -p "$work/input"
k=0
for src in "$@"; do
  for c in $(seq 1 "$copies"); do
    k=$((k + 1))
    ln -s "$(realpath "$src")" "$work/input/part-$k.warc.gz"
  done
done
# The fixture pipeline's steps and configuration, on these inputs, without the train
# phase (GPU work; the trainer has its own bench).
python3 - "$work" <<'EOF'
import sys
from pathlib import Path
work = Path(sys.argv[1]).resolve()
text = Path("fixtures/pipeline.toml").read_text()
text = text[: text.index('[[step]]\nname = "model"')]
text = text.replace('input = "fixtures/crawl"', f'input = "{work}/input"')
root = Path.cwd()
text = text.replace('"fixtures/', f'"{root}/fixtures/')
for threads in (1, 2):
    out = text.replace('output = "out/pipeline"', f'output = "{work}/run{threads}"')
    (work / f"pipeline{threads}.toml").write_text(out)
EOF
python3 - "$work" <<'EOF'
import re, subprocess, sys, time
from pathlib import Path
work = Path(sys.argv[1])
steps = re.findall(r'^name = "([^"]+)"', (work / "pipeline1.toml").read_text(), re.M)
times = {}
for threads, cores in ((1, "0"), (2, "0,1")):
    for step in steps:
        start = time.perf_counter()
        subprocess.run(
            ["taskset", "-c", cores, "target/release/mill", "run", str(work / f"pipeline{threads}.toml"),
             "--only", step, "--threads", str(threads), "--log-format", "json"],
            check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        times[(step, threads)] = time.perf_counter() - start
inputs = len(list((work / "input").iterdir()))
print(f"{inputs} inputs; wall seconds of each step as its own `mill run --only` (process start and model loading included)")
print(f"{'step':<14}{'1 thread s':>12}{'2 threads s':>13}{'speedup':>9}")
for step in steps:
    a, b = times[(step, 1)], times[(step, 2)]
    print(f"{step:<14}{a:>12.2f}{b:>13.2f}{a / b:>8.2f}x")
EOF
