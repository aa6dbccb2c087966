#!/usr/bin/env bash
# The trainer's GPU check, for a machine with one NVIDIA GPU (sized for an H200): trains
# `125m` and `1b` in bf16 on synthetic shards at a 256,000-entry vocabulary and prints
# tokens/s, MFU and peak GPU memory next to trainer/bench/reference.py (the same model in
# PyTorch: bf16, SDPA, torch.compile off and on) run in the same script. Ends with a JSON
# line per run; each run's line is also printed as soon as it is measured. Then the
# classify stage on the GPU: documents per second per GPU of a 110M-parameter BERT
# (FineWeb-Edu's classifier's shape, random weights) on synthetic documents past 512
# tokens, mill-classify-gpu (bf16) beside transformers (bf16, batches of 64 sorted by
# length) in the same script.
#
# Two ways to get mill-train:
#   trainer/gpu-check.sh [OUT_DIR]
#     builds it here with --features cuda. Needs the Rust toolchain with the crates of
#     Cargo.lock (fetched or vendored) and PyTorch 2.11 with CUDA (the system's python3
#     when it has it, else trainer/setup-torch.sh installs it). Runs 125m 300 steps × 16 ×
#     2,048 tokens and 1b 150 steps × 8 × 2,048: about 8 minutes on an H200 once built
#     (an estimate; never run yet). OUT_DIR defaults to .cache/gpu-check.
#   DIR/gpu-check.sh --prebuilt DIR [--out OUT_DIR]
#     for the lent GPU machine, which has no Rust: DIR is what trainer/pack-gpu-check.sh
#     packed (mill-train, loader_bench, reference.py, this script). Builds and fetches
#     nothing: libtorch, CUDA's libraries and NCCL come from that machine's python3 (torch
#     2.11 and the NVIDIA wheels beside it). Runs 125m 120 steps and 1b 60 steps, fewer
#     than above, to leave room in a 15-minute loan: 5 to 7 minutes on an H200 by
#     estimate, most of it torch.compile's. OUT_DIR defaults to DIR/run.
# Options of both: --device cuda|cpu (cpu: the `tiny` preset in f32 for a few steps, to
# prove a pack on a machine without a GPU (trainer/check-pack.sh); peak memory is then the
# process's resident size), --runs "PRESET:STEPS:MICRO[:SEQ] ..." (other runs).
set -euo pipefail
prebuilt="" out="" device=cuda runs=""
while [ $# -gt 0 ]; do
  case "$1" in
    --prebuilt) prebuilt="${2:?--prebuilt DIR}"; shift 2 ;;
    --out) out="${2:?--out OUT_DIR}"; shift 2 ;;
    --device) device="${2:?--device cuda|cpu}"; shift 2 ;;
    --runs) runs="${2:?--runs SPEC}"; shift 2 ;;
    -h | --help) sed -n '2,/^set -e/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    -*) echo "gpu-check: unknown option $1 (--help)" >&2; exit 2 ;;
    *) out="$1"; shift ;;
  esac
done
case "$device" in
  cuda | cpu) ;;
  *) echo "gpu-check: --device $device: cuda or cpu" >&2; exit 2 ;;
esac

if [ -n "$prebuilt" ]; then
  pack="$(cd "$prebuilt" && pwd)"
  out="${out:-$pack/run}"
  # The pack's binaries travel gzipped: unpacked into the output folder.
  mkdir -p "$out/bin"
  for b in mill-train loader_bench mill-classify-gpu; do
    [ -e "$pack/bin/$b.gz" ] || { echo "gpu-check: no $pack/bin/$b.gz: pack with trainer/pack-gpu-check.sh" >&2; exit 1; }
    python3 -c 'import gzip, shutil, sys; shutil.copyfileobj(gzip.open(sys.argv[1]), open(sys.argv[2], "wb"))' \
      "$pack/bin/$b.gz" "$out/bin/$b"
    chmod +x "$out/bin/$b"
  done
  mill="$out/bin/mill-train" loader="$out/bin/loader_bench" reference="$pack/reference.py"
  classify_bin="$out/bin/mill-classify-gpu" classify_ref="$pack/classify_reference.py"
  py=python3
  # The binary was built against torch 2.11: the machine's python3 must hold that torch.
  "$py" - "$device" <<'PY'
import sys, torch
if not torch.__version__.startswith("2.11."):
    sys.exit(f"gpu-check: python3's torch is {torch.__version__}; the pack needs 2.11")
if sys.argv[1] == "cuda" and not torch.cuda.is_available():
    sys.exit("gpu-check: python3's torch sees no GPU")
PY
  # torch's lib folder (libtorch, libc10, libgomp) and the NVIDIA wheels' (CUDA 13's
  # runtime, cuBLAS, cuDNN, NCCL, ...): libtorch_cuda's RPATH points at the latter too,
  # but the search path wins over any other CUDA the machine has.
  libs="$("$py" - <<'PY'
import glob, os, torch
dirs = [os.path.join(os.path.dirname(torch.__file__), "lib")]
try:
    import nvidia
    for root in nvidia.__path__:
        dirs += sorted({os.path.dirname(p) for p in glob.glob(os.path.join(root, "*", "lib", "lib*.so*"))})
except ImportError:
    pass
print(":".join(dirs))
PY
)"
  export LD_LIBRARY_PATH="$libs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  if [ -d "$pack/lib" ]; then export LD_LIBRARY_PATH="$pack/lib:$LD_LIBRARY_PATH"; fi
  default_runs="125m:120:16 1b:60:8"
else
  cd "$(dirname "$0")/.."
  out="${out:-.cache/gpu-check}"
  mill=target/release/mill-train loader=target/release/examples/loader_bench
  reference=trainer/bench/reference.py
  classify_bin=target/release/mill-classify-gpu classify_ref=scripts/classify_reference.py
  if python3 - "$device" 2>/dev/null <<'PY'
import sys, torch
sys.exit(not (torch.__version__.startswith("2.11") and (sys.argv[1] == "cpu" or torch.cuda.is_available())))
PY
  then
    py=python3
    lib="$(python3 -c 'import os, torch; print(os.path.join(os.path.dirname(torch.__file__), "lib"))')"
    export LIBTORCH_USE_PYTORCH=1 LD_LIBRARY_PATH="$lib:${LD_LIBRARY_PATH:-}"
  else
    eval "$(trainer/setup-torch.sh)"
    py="$VIRTUAL_ENV/bin/python"
  fi
  default_runs="125m:300:16 1b:150:8"
fi
if [ "$device" = cpu ]; then default_runs="tiny:8:1:64"; fi
runs="${runs:-$default_runs}"
mkdir -p "$out"
out="$(cd "$out" && pwd)"

# NCCL (the multi-GPU path) is loaded at run time; PyPI's wheel names it libnccl.so.2.
nccl="$("$py" -c 'import os, nvidia.nccl; print(os.path.join(list(nvidia.nccl.__path__)[0], "lib"))' 2>/dev/null || true)"
if [ -n "$nccl" ] && [ -e "$nccl/libnccl.so.2" ]; then
  mkdir -p "$out/lib" && ln -sf "$nccl/libnccl.so.2" "$out/lib/libnccl.so"
  export LD_LIBRARY_PATH="$out/lib:$LD_LIBRARY_PATH"
fi
if [ "$device" = cuda ]; then
  nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
fi

if [ -z "$prebuilt" ]; then
  echo "== build (cuda feature)"
  cargo build --release --locked -p trainer --features cuda --bin mill-train --bin mill-classify-gpu --example loader_bench
fi
shard_tokens=50000000
if [ "$device" = cpu ]; then shard_tokens=1000000; fi
shards="$out/shards-$shard_tokens"
[ -s "$shards/manifest.json" ] || "$loader" write "$shards" "$shard_tokens"

# Peak memory of a command in MiB: on a GPU, nvidia-smi sampled every 200 ms beside it;
# on the CPU, the process's largest resident size.
peak_mem() {
  local log="$1"; shift
  if [ "$device" = cpu ]; then
    "$py" -c '
import resource, subprocess, sys
code = subprocess.run(sys.argv[2:]).returncode
open(sys.argv[1], "w").write(f"{resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024}\n")
sys.exit(code)' "$log.mem" "$@" >"$log" 2>"$log.err" || return 1
  else
    nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits -lms 200 >"$log.mem" &
    local smi=$!
    "$@" >"$log" 2>"$log.err" || { kill $smi; return 1; }
    kill $smi; wait $smi 2>/dev/null || true
  fi
  sort -n "$log.mem" | tail -1
}
# A failed run is recorded and the check goes on (a GPU loan is short): its error's end
# is printed, and the check's exit status is 1 at the end.
failed=0
fail() {  # tool preset log
  failed=1
  echo "!! $1 $2 failed; the end of $3.err:" >&2
  tail -20 "$3.err" >&2
  printf '{"tool": "%s", "preset": "%s", "error": "see %s.err"}\n' "$1" "$2" "$3" >>"$results"
}

results="$out/results.jsonl"
: >"$results"
precision=bf16 saved=""
if [ "$device" = cpu ]; then precision=fp32; fi
run_ours() {  # preset steps micro seq
  local preset="$1" steps="$2" micro="$3" seq="$4" dir="$out/ours-$1"
  rm -rf "$dir" && mkdir -p "$dir"
  # Only the first run writes its checkpoint (at its end): that proves the save path, and
  # the others skip writing f32 weights and moments (15 GB for 1b).
  local every=0
  if [ -z "$saved" ]; then every=100000 saved=1; fi
  cat >"$dir/run.toml" <<TOML
preset = "$preset"
checkpoint_every = $every
log_every = $((steps >= 40 ? 10 : 2))
eval_every = 0
[data]
seq_len = $seq
validation_share = 0.0
[train]
steps = $steps
micro_batch = $micro
precision = "$precision"
[train.schedule]
warmup_steps = 20
total_steps = $steps
TOML
  local mem
  mem="$(peak_mem "$dir/log.jsonl" "$mill" --shards "$shards" \
    --checkpoints "$dir/ckpt" --config "$dir/run.toml" --device "$device" --log-format json)" \
    || { fail mill-train "$preset" "$dir/log.jsonl"; return 0; }
  # Steady state: the mean over the lines after the first quarter of the run.
  "$py" - "$dir/log.jsonl" "$preset" "$mem" <<'PY' | tee -a "$results"
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.startswith("{")]
tail = rows[len(rows) // 4:]
def mean(k):
    vals = [r[k] for r in tail if r.get(k) is not None]
    return sum(vals) / len(vals) if vals else None
print(json.dumps({"tool": "mill-train", "preset": sys.argv[2], "tokens_per_s": mean("tokens_per_s"),
                  "mfu": mean("mfu"), "loss": rows[-1]["loss"], "peak_mem_gib": float(sys.argv[3]) / 1024,
                  "data_wait_s": mean("data_wait_s")}))
PY
}
run_ref() {  # preset steps micro seq [--compile]
  local log="$out/ref-$1${5:-}.json" mem
  mem="$(peak_mem "$log" "$py" "$reference" "$1" "$2" "$3" "$4" --device "$device" ${5:-})" \
    || { fail "pytorch${5:++compile}" "$1" "$log"; return 0; }
  "$py" -c 'import json,sys; r=json.loads(open(sys.argv[1]).read().strip().splitlines()[-1]); r["peak_mem_gib_smi"]=float(sys.argv[2])/1024; print(json.dumps(r))' "$log" "$mem" | tee -a "$results"
}

for spec in $runs; do
  IFS=: read -r preset steps micro seq <<<"$spec"
  seq="${seq:-2048}"
  echo "== $preset: mill-train (at ${SECONDS}s)"; run_ours "$preset" "$steps" "$micro" "$seq"
  echo "== $preset: PyTorch (at ${SECONDS}s)"; run_ref "$preset" "$steps" "$micro" "$seq"
  echo "== $preset: PyTorch + torch.compile (at ${SECONDS}s)"; run_ref "$preset" "$steps" "$micro" "$seq" --compile
done

# The classify stage on the GPU (on the CPU: a small model, a few documents, to prove
# the pack): documents per second per GPU, ours and transformers', the same model and
# documents. Ours is the input's wall time (reading, tokenizing, scoring, writing);
# transformers' is tokenizing and scoring; model loads left out on both sides.
classify_docs="${CLASSIFY_DOCS:-20000}" classify_model=bert-base-regression gpus=1 dtype=bf16 base=--base
if [ "$device" = cpu ]; then classify_docs=64 classify_model=bert-regression gpus=0 dtype=f32 base=""; fi
cdir="$out/classify"
echo "== classify: $classify_model, $classify_docs documents past 512 tokens (at ${SECONDS}s)"
mkdir -p "$cdir/in"
# The tokenizers are trained on the first 500 documents (quick), the model scores all.
if "$py" "$classify_ref" synthetic "$cdir/in/docs.jsonl" "$classify_docs" 700 \
  && head -500 "$cdir/in/docs.jsonl" >"$cdir/corpus.jsonl" \
  && { [ -d "$cdir/models/$classify_model" ] || "$py" "$classify_ref" models "$cdir/models" "$cdir/corpus.jsonl" $base >"$cdir/setup.err" 2>&1; }; then
  printf '[[classifier]]\nname = "edu"\nkind = "transformer"\nmodel = "%s"\n' "$cdir/models/$classify_model" >"$cdir/classify.toml"
  rm -rf "$cdir/scored"
  if "$classify_bin" --input "$cdir/in" --output "$cdir/scored" --config "$cdir/classify.toml" \
    --gpus "$gpus" --log-format json >"$cdir/ours.log" 2>&1; then
    "$py" - "$cdir/scored" "$classify_model" "$device" <<'PY' | tee -a "$results"
import glob, json, sys
docs = secs = 0
for m in glob.glob(sys.argv[1] + "/_done/*.json"):
    s = json.load(open(m))["stats"]
    docs += s["docs_in"]
    secs += s["seconds"]
print(json.dumps({"tool": "mill-classify-gpu", "preset": "classify-" + sys.argv[2], "documents": docs,
                  "seconds": secs, "docs_per_second": docs / secs, "device": sys.argv[3]}))
PY
  else
    fail mill-classify-gpu "classify-$classify_model" "$cdir/ours.log"
  fi
  if "$py" "$classify_ref" score "$cdir/models/$classify_model" "$cdir/in/docs.jsonl" "$cdir/ref.jsonl" \
    --batch 64 --time --device "$device" --dtype "$dtype" >"$cdir/ref.log" 2>"$cdir/ref.log.err"; then
    "$py" -c 'import json,sys; r=json.loads(open(sys.argv[1]).read().strip().splitlines()[-1]); r["tool"]="transformers"; r["preset"]="classify-"+sys.argv[2]; print(json.dumps(r))' "$cdir/ref.log" "$classify_model" | tee -a "$results"
  else
    fail transformers "classify-$classify_model" "$cdir/ref.log"
  fi
else
  touch "$cdir/setup.err"; fail classify-setup "$classify_model" "$cdir/setup"
fi

echo
echo "== done in ${SECONDS}s on $device; peak GiB: $([ "$device" = cpu ] && echo "resident size" || echo "GPU memory, nvidia-smi")"
"$py" - "$results" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
print(f"{'preset':6} {'tool':18} {'tokens/s':>10} {'MFU':>6} {'peak GiB':>9} {'vs compile':>10}")
for r in (r for r in rows if r["preset"].startswith("classify-") and "error" not in r):
    print(f"{r['preset']} {r['tool']:18} {r['docs_per_second']:10.1f} docs/s")
rows = [r for r in rows if not r["preset"].startswith("classify-")]
for preset in dict.fromkeys(r["preset"] for r in rows):
    ref = next((r for r in rows if r["preset"] == preset and r["tool"] == "pytorch+compile" and "error" not in r), None)
    for r in (r for r in rows if r["preset"] == preset):
        if "error" in r:
            print(f"{preset:6} {r['tool']:18} {'failed':>10}")
            continue
        mem = r.get("peak_mem_gib_smi", r.get("peak_mem_gib"))
        ratio = r["tokens_per_s"] / ref["tokens_per_s"] if ref else float("nan")
        mfu = f"{r['mfu']:.1%}" if r.get("mfu") else "-"
        print(f"{preset:6} {r['tool']:18} {r['tokens_per_s']:10.0f} {mfu:>6} {mem:9.1f} {ratio:10.2f}")
PY
cat "$results"
exit "$failed"
