#!/usr/bin/env bash
# Bench: mill-tokenize on real text (scripts/text_corpus.py: Debian documentation in
# many languages and source code, 1.1 GB).
#   1. train: a 256,000-entry vocabulary on samples of TRAIN_SIZES megabytes (default
#      "100 300 1000"): time, peak memory, vocabulary reached. The 1000 MB tokenizer
#      (or the largest trained) is the one the encoders use.
#   2. encode, one core (taskset -c 0), the same ENCODE_MB megabytes (default 100) of
#      documents: mill-tokenize encode (native, fast and reference encoders), Python tokenizers
#      encode_batch, datatrove's DocumentTokenizer; the ids of ours and Python's are
#      compared by hash. Then mill-tokenize on every core.
# Prints a table. Usage: scripts/bench-tokenize.sh [ENCODE_MB] [TRAIN_SIZES]
# CORPUS_BYTES=4e8 builds a smaller corpus than the default 1.1 GB.
set -euo pipefail
cd "$(dirname "$0")/.."
encode_mb="${1:-100}"
train_sizes="${2:-100 300 1000}"
python3 -m pip install --quiet --disable-pip-version-check -r scripts/requirements-bench.txt -r scripts/requirements-test.txt
python3 scripts/text_corpus.py build .cache/text-corpus ${CORPUS_BYTES:+--max-bytes "$CORPUS_BYTES"}
cargo build --release --locked -p tokenize --bins >/dev/null 2>&1 || cargo build --release --locked -p tokenize --bins
bin=./target/release/mill-tokenize
work=.cache/bench-tokenize
mkdir -p "$work"

echo "== train (vocab_size 256000, all cores)"
printf '| sample | documents | seconds | peak RSS | vocabulary reached |\n|---:|---:|---:|---:|---:|\n' >"$work/train.md"
tok=""
for mb in $train_sizes; do
  out="$work/tok-${mb}m"
  if [ ! -f "$out/train.json" ]; then
    printf '[train]\nsample_bytes = %s\n' "$((mb * 1000000))" >"$work/train-${mb}m.toml"
    "$bin" train --input .cache/text-corpus/docs --output "$out" \
      --config "$work/train-${mb}m.toml" --log-format json >/dev/null 2>"$work/train-${mb}m.err"
  fi
  python3 - "$out/train.json" "$mb" >>"$work/train.md" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
print(f"| {sys.argv[2]} MB ({r['sample_bytes'] / 1e6:.0f} MB read) | {r['sample_documents']} | {r['seconds']:.0f} | "
      f"{(r['peak_rss_bytes'] or 0) / 2**30:.2f} GiB | {r['vocab_size']} |")
PY
  tok="$out/tokenizer.json"
done
cat "$work/train.md"

echo "== encode ${encode_mb} MB, one core, tokenizer $tok"
sample="$work/sample-${encode_mb}m/docs/sample.jsonl"
mkdir -p "$(dirname "$sample")"
[ -f "$sample" ] || python3 scripts/bench_tokenize.py sample .cache/text-corpus/docs "$sample" "$encode_mb"
bytes="$(python3 -c "import json,sys; print(sum(len(json.loads(l)['text'].encode()) for l in open(sys.argv[1])))" "$sample")"
run_ours() { # name, encoder, threads, cpus
  local out="$work/ours-$1"
  rm -rf "$out"
  printf '[encode]\nencoder = "%s"\n' "$2" >"$work/encode-$1.toml"
  local start end
  start=$(date +%s.%N)
  taskset -c "$4" "$bin" encode --input "$(dirname "$sample")" --output "$out" --tokenizer "$tok" \
    --config "$work/encode-$1.toml" --threads "$3" --log-format json >/dev/null 2>"$out.err"
  end=$(date +%s.%N)
  python3 - "$out/manifest.json" "$start" "$end" "$1" <<PY >"$work/ours-$1.json"
import glob, json, sys
m = json.load(open(sys.argv[1]))
# The work: each input's seconds from its marker (the tokenizer's load is not part of them).
work = sum(json.load(open(p))["stats"]["seconds"] for p in glob.glob(sys.argv[1].replace("manifest.json", "_done/*.json")))
print(json.dumps({"name": sys.argv[4], "seconds": float(sys.argv[3]) - float(sys.argv[2]), "work_seconds": work,
                  "documents": m["documents"], "tokens": m["tokens"], "bytes": $bytes}))
PY
}
run_ours native native 1 0
run_ours fast fast 1 0
run_ours reference reference 1 0
ncpu="$(nproc)"
run_ours native-all native 0 "0-$((ncpu - 1))"
taskset -c 0 env RAYON_NUM_THREADS=1 TOKENIZERS_PARALLELISM=false \
  python3 scripts/bench_tokenize.py python "$tok" "$sample" "$work/python.json"
rm -rf "$work/datatrove"
taskset -c 0 env RAYON_NUM_THREADS=1 TOKENIZERS_PARALLELISM=false \
  python3 scripts/bench_tokenize.py datatrove "$tok" "$sample" "$work/datatrove" "$work/datatrove.json" >/dev/null 2>&1
ours_sha="$(python3 scripts/bench_tokenize.py ours-ids "$work/ours-native")"
fast_sha="$(python3 scripts/bench_tokenize.py ours-ids "$work/ours-fast")"
ref_sha="$(python3 scripts/bench_tokenize.py ours-ids "$work/ours-reference")"
python3 - "$work" "$ours_sha" "$ref_sha" "$ncpu" "$fast_sha" <<'PY'
import json, sys
from pathlib import Path
w = Path(sys.argv[1])
ours_sha, ref_sha, ncpu, fast_sha = sys.argv[2], sys.argv[3], sys.argv[4], sys.argv[5]
native = json.loads((w / "ours-native.json").read_text())
fast = json.loads((w / "ours-fast.json").read_text())
ref = json.loads((w / "ours-reference.json").read_text())
allc = json.loads((w / "ours-native-all.json").read_text())
py = json.loads((w / "python.json").read_text())
dt = json.loads((w / "datatrove.json").read_text())
print(f"documents {fast['documents']}, {fast['bytes'] / 1e6:.1f} MB of text, {fast['tokens']} tokens (ours)")
print(f"ids: mill-tokenize native == Python tokenizers: {ours_sha == py['ids_sha256']}; "
      f"native == fast: {ours_sha == fast_sha}; native == reference: {ours_sha == ref_sha}; "
      f"datatrove token count {dt['tokens_files']} (ours {fast['tokens']})")
rows = [
    ("mill-tokenize encode (ours, native), 1 core", native, native["tokens"]),
    ("mill-tokenize encode (tokenizers 1.0-rc.3), 1 core", fast, fast["tokens"]),
    ("mill-tokenize encode (tokenizers 0.22), 1 core", ref, ref["tokens"]),
    ("Python tokenizers 0.23 encode_batch (encoding only), 1 core", py, py["tokens"]),
    ("datatrove 0.10.1 DocumentTokenizer, 1 core", dt, dt["tokens_files"]),
    (f"mill-tokenize encode, all {ncpu} cores", allc, allc["tokens"]),
]
print("| encoder | seconds | MB/s | tokens/s | vs datatrove | work seconds | work MB/s | work vs datatrove |")
print("|---|---:|---:|---:|---:|---:|---:|---:|")
dt_rate = dt["bytes"] / dt["seconds"]
dt_work = dt["bytes"] / dt["work_seconds"]
for name, r, tokens in rows:
    rate = r["bytes"] / r["seconds"]
    work = r.get("work_seconds", r["seconds"])
    wrate = r["bytes"] / work
    print(f"| {name} | {r['seconds']:.1f} | {rate / 1e6:.2f} | {tokens / r['seconds'] / 1e6:.2f} M | {rate / dt_rate:.1f}x "
          f"| {work:.2f} | {wrate / 1e6:.2f} | {wrate / dt_work:.1f}x |")
print(f"work: ours, each input's time from its marker (the tokenizer's load, about "
      f"{native['seconds'] - native['work_seconds']:.1f} s native and {fast['seconds'] - fast['work_seconds']:.1f} s fast "
      f"with the process around it, left out); datatrove, its run less one "
      f"load of the tokenizer ({dt['load_seconds']:.1f} s) timed in the same process; Python "
      f"tokenizers times the encoding alone")
PY
