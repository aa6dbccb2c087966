#!/usr/bin/env bash
# Bench: 1 vs 2 threads at real size, where every step has at least 10 s of work on one
# thread (bench-threads.sh's fixture-sized steps are mostly process start and planning).
#   - dedup.signatures, dedup.buckets, dedup.clusters, dedup.filter and tokenize.encode
#     on real text: scripts/text_corpus.py's corpus (Debian documentation in many
#     languages and source code), its shards linked COPIES times (default 4) as
#     separate inputs. Every copy after the first is a duplicate, so the filter keeps a
#     COPIES-th; encoding reads the linked shards themselves (all of the text), with
#     the 256,000-entry tokenizer of scripts/bench-tokenize.sh.
#   - dedup.buckets and dedup.clusters at 10^7 documents (scripts/bench-dedup-scale.sh's run:
#     planted signatures, 100 inputs, one task), where the text corpus gives them too
#     few documents for 10 s.
#   - the text step: `STEPS=text COPIES=6 scripts/bench-threads.sh WARC...` (its own
#     script; 72 inputs of real pages, about 40 s on one thread).
# Each step runs with --threads 1 on core 0, then --threads 2 on cores 0 and 1, REPEAT
# times (default 3, each from scratch); prints median wall seconds and the speedup.
# Usage: scripts/bench-threads-scale.sh [TOKENIZER.json]
set -euo pipefail
cd "$(dirname "$0")/.."
[ "$(nproc)" -ge 2 ] || { echo "needs 2 cores" >&2; exit 2; }
tok="${1:-$(ls -d .cache/bench-tokenize/tok-*m 2>/dev/null | sort -t- -k2 -n | tail -1)/tokenizer.json}"
[ -f "$tok" ] || { echo "no tokenizer at $tok: run scripts/bench-tokenize.sh first" >&2; exit 1; }
[ -f .cache/text-corpus/corpus.json ] || python3 scripts/text_corpus.py build .cache/text-corpus
cargo build --release --locked -p dedup -p tokenize --bins --examples >/dev/null 2>&1 ||
  cargo build --release --locked -p dedup -p tokenize --bins --examples
work=.cache/threads-scale
rm -rf "$work" && mkdir -p "$work/input"
k=0
for c in $(seq 1 "${COPIES:-4}"); do
  for shard in .cache/text-corpus/docs/*.jsonl.gz; do
    k=$((k + 1))
    ln -s "$(realpath "$shard")" "$work/input/part-$(printf %04d $k).jsonl.gz"
  done
done
python3 - "$work" "$tok" "${REPEAT:-3}" <<'PY'
import os, shutil, statistics, subprocess, sys, time
from pathlib import Path
work, tok, repeat = Path(sys.argv[1]), sys.argv[2], int(sys.argv[3])
dedup, tokenize = "target/release/mill-dedup", "target/release/mill-tokenize"
inp = str(work / "input")
def out(threads, name):
    return str(work / f"run{threads}" / name)
steps = {
    "dedup.signatures": lambda t: [dedup, "signatures", "--input", inp, "--output", out(t, "sig")],
    "dedup.buckets": lambda t: [dedup, "buckets", "--input", out(t, "sig"), "--output", out(t, "buckets")],
    "dedup.clusters": lambda t: [dedup, "clusters", "--input", out(t, "buckets"), "--output", out(t, "clusters")],
    "dedup.filter": lambda t: [dedup, "filter", "--input", inp, "--output", out(t, "deduped"),
                               "--clusters", out(t, "clusters")],
    "tokenize.encode": lambda t: [tokenize, "encode", "--input", inp, "--output", out(t, "tokens"),
                                  "--tokenizer", tok],
}
everywhere = os.sched_getaffinity(0)
times = {}
for step, command in steps.items():
    runs = {1: [], 2: []}
    for r in range(repeat):
        for threads, cores in ((1, {0}), (2, {0, 1})):
            target = command(threads)[command(threads).index("--output") + 1]
            shutil.rmtree(target, ignore_errors=True)
            os.sched_setaffinity(0, cores)
            start = time.perf_counter()
            subprocess.run(command(threads) + ["--threads", str(threads), "--log-format", "json"],
                           check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            runs[threads].append(time.perf_counter() - start)
            os.sched_setaffinity(0, everywhere)
    times[step] = (statistics.median(runs[1]), statistics.median(runs[2]))
    print(f"{step}: one thread {runs[1]}, two {runs[2]}", file=sys.stderr, flush=True)
size = sum(os.path.getsize(os.path.realpath(p)) for p in (work / "input").iterdir())
print(f"{len(list((work / 'input').iterdir()))} inputs, {size / 1e9:.2f} GB gzipped JSONL; wall seconds of each step "
      f"as its own process, median of {repeat}")
print("| step | 1 thread s | 2 threads s | speedup |\n|---|---:|---:|---:|")
for step, (a, b) in times.items():
    print(f"| {step} | {a:.3f} | {b:.3f} | {a / b:.2f}× |")
PY
echo
echo "== dedup.buckets and dedup.clusters at 10^7 planted documents, one task"
# bench-dedup-scale.sh's run, called directly: its own `cargo build -p dedup` alone would
# rebuild with another feature set what the build above made.
mkdir -p .cache/bench-dedup-scale
for threads in 1 2; do
  taskset -c "$([ "$threads" = 1 ] && echo 0 || echo 0,1)" python3 scripts/bench_dedup_scale.py \
    10000000 --tasks 1 --memory 33554432 --per-file 100000 --threads "$threads" \
    --json ".cache/bench-dedup-scale/10000000-33554432-1-$threads.json"
done
