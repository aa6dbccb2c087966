#!/usr/bin/env bash
# Bench: how long a task takes to load the 256,000-entry tokenizer, on one core
# (taskset -c 0), in one run:
#   - mill-tokenize's `Loaded::read` with our encoder (the default) and with the
#     `tokenizers` 1.0 encoder (the default before), alternating, ROUNDS rounds each
#     (stages/tokenize/examples/load_compare.rs);
#   - tiktoken built from the same vocabulary (scripts/bench_tokenize.py tiktoken-load);
#   - both of ours then encode the same sample: the ids are compared and each side's
#     encoding time printed.
# The tokenizer and the sample are scripts/bench-tokenize.sh's: the largest tokenizer it
# trained (run it first, e.g. `scripts/bench-tokenize.sh 100 300`) and its 100 MB sample.
# Usage: scripts/bench-tokenize-load.sh [ROUNDS] [TOKENIZER.json] [SAMPLE.jsonl]
set -euo pipefail
cd "$(dirname "$0")/.."
rounds="${1:-7}"
work=.cache/bench-tokenize
tok="${2:-$(ls -d "$work"/tok-*m 2>/dev/null | sort -t- -k2 -n | tail -1)/tokenizer.json}"
sample="${3:-$work/sample-100m/docs/sample.jsonl}"
[ -f "$tok" ] || { echo "no tokenizer at $tok: run scripts/bench-tokenize.sh first" >&2; exit 1; }
[ -f "$sample" ] || { echo "no sample at $sample: run scripts/bench-tokenize.sh first" >&2; exit 1; }
python3 -m pip install --quiet --disable-pip-version-check tiktoken==0.12.0
cargo build --release --locked -p tokenize --example load_compare >/dev/null 2>&1 ||
  cargo build --release --locked -p tokenize --example load_compare
ours="$(taskset -c 0 ./target/release/examples/load_compare "$tok" "$rounds" "$sample")"
theirs="$(taskset -c 0 python3 scripts/bench_tokenize.py tiktoken-load "$tok" "$rounds")"
python3 - "$ours" "$theirs" "$tok" <<'PY'
import json, sys
ours, theirs = json.loads(sys.argv[1]), json.loads(sys.argv[2])
f, n, t = ours["fast_load_median"], ours["native_load_median"], theirs["median"]
print(f"tokenizer {sys.argv[3]}: {ours['tokenizer_bytes'] / 1e6:.1f} MB; one core; medians of {len(ours['fast_load_seconds'])} rounds")
print("| load | seconds | vs tokenizers 1.0 | vs tiktoken |\n|---|---:|---:|---:|")
print(f"| mill-tokenize, our encoder (native) | {n:.3f} | {f / n:.2f}× faster | {t / n:.2f}× faster |")
print(f"| mill-tokenize, tokenizers 1.0-rc.3 (fast) | {f:.3f} | 1.00× | {t / f:.2f}× |")
print(f"| tiktoken {theirs['tiktoken']} from the same vocabulary | {t:.3f} | {f / t:.2f}× | 1.00× |")
print("rounds, seconds: native", [round(x, 3) for x in ours["native_load_seconds"]],
      "fast", [round(x, 3) for x in ours["fast_load_seconds"]],
      "tiktoken", [round(x, 3) for x in theirs["seconds"]])
if "ids_identical" in ours:
    mb = ours["sample_bytes"] / 1e6
    print(f"encode {ours['sample_documents']} documents, {mb:.1f} MB, {ours['tokens']} tokens: "
          f"ids identical: {ours['ids_identical']}; native {ours['native_encode_seconds']:.2f} s "
          f"({mb / ours['native_encode_seconds']:.1f} MB/s), fast {ours['fast_encode_seconds']:.2f} s "
          f"({mb / ours['fast_encode_seconds']:.1f} MB/s)")
    if not ours["ids_identical"]:
        sys.exit("the two encoders' ids differ")
PY
