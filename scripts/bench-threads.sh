#!/usr/bin/env bash
# Bench: 1 vs 2 threads on every step of the fixture pipeline (text with every stage,
# the four MinHash phases, tokenizer training and encoding; not the train phase), on
# real pages: the given WARC files, each cut into PARTS files (default 6) and the parts
# linked COPIES times (default 4), so that every step has several inputs. Runs `mill
# run` with --threads 1 on core 0, then --threads 2 on cores 0 and 1, one step at a time
# (`--only`), REPEAT times each (default 3, every repeat from scratch, the two thread
# counts one after the other), and prints each step's median wall seconds and speedup.
# STEPS="step ..." times only those steps (e.g. STEPS=text).
# Usage: scripts/bench-threads.sh WARC... (e.g. the pages scripts/bench-chain.sh packs)
set -euo pipefail
cd "$(dirname "$0")/.."
[ $# -ge 1 ] || { echo "usage: scripts/bench-threads.sh WARC..." >&2; exit 2; }
[ "$(nproc)" -ge 2 ] || { echo "needs 2 cores" >&2; exit 2; }
scripts/fetch-models.sh >/dev/null
cargo build --release --locked -p jobs --bin mill
copies="${COPIES:-4}"
parts="${PARTS:-6}"
work=.cache/threads-run
rm -rf "$work" && mkdir -p "$work/input" "$work/parts"
# Each WARC cut into PARTS files of whole records (distinct pages in each), then the
# parts linked COPIES times: deduplication keeps the first copy of each page, so what
# the steps after it get is spread over the parts of the first copy, as a crawl's
# documents are spread over its files (whole WARCs linked as copies left all of it in
# two inputs).
python3 - "$work/parts" "$parts" "$@" <<'PY'
import gzip, sys
from pathlib import Path
out, parts, sources = Path(sys.argv[1]), int(sys.argv[2]), sys.argv[3:]
for n, src in enumerate(sources):
    data = gzip.open(src, "rb").read()
    records, at = [], 0
    while at < len(data):
        end = data.index(b"\r\n\r\n", at)
        head = data[at:end].decode("utf-8", "replace")
        length = next(int(l.split(":", 1)[1]) for l in head.split("\r\n") if l.lower().startswith("content-length:"))
        stop = end + 4 + length + 4
        records.append(data[at:stop])
        at = stop
    per = -(-len(records) // parts)
    for k in range(parts):
        with gzip.open(out / f"{n:02d}-{k:02d}.warc.gz", "wb") as fh:
            for r in records[k * per:(k + 1) * per]:
                fh.write(r)
PY
k=0
for c in $(seq 1 "$copies"); do
  for part in "$work"/parts/*.warc.gz; do
    k=$((k + 1))
    ln -s "$(realpath "$part")" "$work/input/part-$(printf %04d $k).warc.gz"
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
python3 - "$work" "${REPEAT:-3}" <<'EOF'
import os, re, shutil, statistics, subprocess, sys, time
from pathlib import Path
work, repeat = Path(sys.argv[1]), int(sys.argv[2])
everywhere = os.sched_getaffinity(0)
steps = re.findall(r'^name = "([^"]+)"', (work / "pipeline1.toml").read_text(), re.M)
# STEPS="text signatures" runs only those (each still needs the steps before it done:
# the first of them runs its predecessors once, untimed).
only = os.environ.get("STEPS", "").split()
if only:
    for step in steps[: steps.index(only[0])]:
        for threads in (1, 2):
            subprocess.run(["target/release/mill", "run", str(work / f"pipeline{threads}.toml"), "--only", step],
                           check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    steps = [s for s in steps if s in only]
times = {}
# Step by step, each repeat running one thread then two side by side (run1 and run2 are
# two chains of the same steps): this virtual machine's speed drifts by a fifth over
# minutes, so the two thread counts are timed together, not minutes apart.
for step in steps:
    runs = {1: [], 2: []}
    for _ in range(repeat):
        for threads, cores in ((1, {0}), (2, {0, 1})):
            # A repeat redoes the step from scratch: the same inputs, the same outputs.
            shutil.rmtree(work / f"run{threads}" / step, ignore_errors=True)
            # The cores are this process's, which mill inherits: `taskset` in front of
            # it would add its own start (2 ms here) to every step's time.
            os.sched_setaffinity(0, cores)
            start = time.perf_counter()
            subprocess.run(
                ["target/release/mill", "run", str(work / f"pipeline{threads}.toml"),
                 "--only", step, "--threads", str(threads), "--log-format", "json"],
                check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            runs[threads].append(time.perf_counter() - start)
            os.sched_setaffinity(0, everywhere)
    for threads in (1, 2):
        times[(step, threads)] = statistics.median(runs[threads])
inputs = len(list((work / "input").iterdir()))
print(f"{inputs} inputs; wall seconds of each step as its own `mill run --only` (process start and model "
      f"loading included), median of {repeat} runs")
print(f"{'step':<14}{'1 thread s':>12}{'2 threads s':>13}{'speedup':>9}")
for step in steps:
    a, b = times[(step, 1)], times[(step, 2)]
    print(f"{step:<14}{a:>12.3f}{b:>13.3f}{a / b:>8.2f}x")
EOF
