#!/usr/bin/env bash
# The trainer's GPU check, for a machine with one NVIDIA GPU (sized for an H200):
# builds mill-train with CUDA, trains `125m` and `1b` for a few hundred steps in bf16 on
# synthetic shards at a 256,000-entry vocabulary, and prints tokens/s, MFU and peak GPU
# memory next to trainer/bench/reference.py (the same model in PyTorch: bf16, SDPA,
# torch.compile off and on) run in the same script. Ends with a JSON line per run.
# Needs: the Rust toolchain with the crates of Cargo.lock (fetched or vendored), and
# PyTorch 2.11 with CUDA (the system's python3 when it has it, else trainer/setup-torch.sh
# installs it). Takes about 8 minutes on an H200 once built.
# Usage: trainer/gpu-check.sh [OUT_DIR]   (default .cache/gpu-check)
set -euo pipefail
cd "$(dirname "$0")/.."
out="${1:-.cache/gpu-check}"
mkdir -p "$out"
if python3 -c 'import sys, torch; sys.exit(not (torch.__version__.startswith("2.11") and torch.cuda.is_available()))' 2>/dev/null; then
  py=python3
  lib="$(python3 -c 'import os, torch; print(os.path.join(os.path.dirname(torch.__file__), "lib"))')"
  export LIBTORCH_USE_PYTORCH=1 LD_LIBRARY_PATH="$lib:${LD_LIBRARY_PATH:-}"
else
  eval "$(trainer/setup-torch.sh)"
  py="$VIRTUAL_ENV/bin/python"
fi
# NCCL (the multi-GPU path) is loaded at run time; PyPI's wheel names it libnccl.so.2.
nccl="$($py -c 'import os, nvidia.nccl; print(os.path.join(list(nvidia.nccl.__path__)[0], "lib"))' 2>/dev/null || true)"
if [ -n "$nccl" ] && [ -e "$nccl/libnccl.so.2" ]; then
  mkdir -p "$out/lib" && ln -sf "$nccl/libnccl.so.2" "$out/lib/libnccl.so"
  export LD_LIBRARY_PATH="$PWD/$out/lib:$LD_LIBRARY_PATH"
fi
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader

echo "== build (cuda feature)"
cargo build --release --locked -p trainer --features cuda --bin mill-train --example loader_bench
[ -s "$out/shards/manifest.json" ] || target/release/examples/loader_bench write "$out/shards" 50000000

# Peak GPU memory of a command: nvidia-smi sampled every 200 ms beside it.
peak_mem() {
  local log="$1"; shift
  nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits -lms 200 >"$log.mem" &
  local smi=$!
  "$@" >"$log" 2>"$log.err" || { kill $smi; cat "$log.err" >&2; return 1; }
  kill $smi; wait $smi 2>/dev/null || true
  sort -n "$log.mem" | tail -1
}

results="$out/results.jsonl"
: >"$results"
run_ours() {  # preset steps micro
  local preset="$1" steps="$2" micro="$3" dir="$out/ours-$1"
  rm -rf "$dir" && mkdir -p "$dir"
  cat >"$dir/run.toml" <<TOML
preset = "$preset"
checkpoint_every = 100000
log_every = 10
eval_every = 0
[data]
seq_len = 2048
validation_share = 0.0
[train]
steps = $steps
micro_batch = $micro
precision = "bf16"
[train.schedule]
warmup_steps = 20
total_steps = $steps
TOML
  local mem
  mem="$(peak_mem "$dir/log.jsonl" target/release/mill-train --shards "$out/shards" \
    --checkpoints "$dir/ckpt" --config "$dir/run.toml" --device cuda --log-format json)"
  # Steady state: the mean over the lines after the first quarter of the run.
  $py - "$dir/log.jsonl" "$preset" "$mem" >>"$results" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.startswith("{")]
tail = rows[len(rows) // 4:]
mean = lambda k: sum(r[k] for r in tail if r.get(k) is not None) / max(1, sum(r.get(k) is not None for r in tail))
print(json.dumps({"tool": "mill-train", "preset": sys.argv[2], "tokens_per_s": mean("tokens_per_s"),
                  "mfu": mean("mfu"), "loss": rows[-1]["loss"], "peak_mem_gib": float(sys.argv[3]) / 1024,
                  "data_wait_s": mean("data_wait_s")}))
PY
}
run_ref() {  # preset steps micro [--compile]
  local log="$out/ref-$1${4:-}.json" mem
  mem="$(peak_mem "$log" $py trainer/bench/reference.py "$1" "$2" "$3" 2048 ${4:-})"
  $py -c 'import json,sys; r=json.loads(open(sys.argv[1]).read().strip().splitlines()[-1]); r["peak_mem_gib_smi"]=float(sys.argv[2])/1024; print(json.dumps(r))' "$log" "$mem" >>"$results"
}

for spec in "125m 300 16" "1b 150 8"; do
  set -- $spec
  echo "== $1: mill-train"; run_ours "$1" "$2" "$3"
  echo "== $1: PyTorch"; run_ref "$1" "$2" "$3"
  echo "== $1: PyTorch + torch.compile"; run_ref "$1" "$2" "$3" --compile
done

echo
$py - "$results" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
print(f"{'preset':6} {'tool':18} {'tokens/s':>10} {'MFU':>6} {'peak GiB':>9} {'vs compile':>10}")
for preset in ("125m", "1b"):
    ref = next((r for r in rows if r["preset"] == preset and r["tool"] == "pytorch+compile"), None)
    for r in (r for r in rows if r["preset"] == preset):
        mem = r.get("peak_mem_gib_smi", r.get("peak_mem_gib"))
        ratio = r["tokens_per_s"] / ref["tokens_per_s"] if ref else float("nan")
        mfu = f"{r['mfu']:.1%}" if r.get("mfu") else "-"
        print(f"{preset:6} {r['tool']:18} {r['tokens_per_s']:10.0f} {mfu:>6} {mem:9.1f} {ratio:10.2f}")
PY
cat "$results"
