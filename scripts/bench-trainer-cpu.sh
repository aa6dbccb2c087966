#!/usr/bin/env bash
# CPU parity of the trainer: mill-train and PyTorch (trainer/bench/cpu_parity.py, the
# model of trainer/bench/reference.py) in the same run, on the CPU in f32, the same
# model, batch and steps: a ~33M model (dim 512, 6 layers, 8 heads, 2 KV heads, FFN
# 1408, a 32,000-entry vocabulary) at 256 tokens, and `125m` (256,000 entries) at 128.
# Prints tokens/s of each, their ratio (target: mill-train ≥ 0.95× PyTorch) and the
# step time split into forward, backward, optimiser and data wait: the proxy for the
# GPU check until a GPU is lent. Both use THREADS threads (default: every core).
# PyTorch runs twice: as it comes, and with the glibc settings mill-train makes itself
# on the CPU (large blocks kept, not unmapped on free: trainer/src/host_memory.rs), so
# that the table tells the allocator's share from the rest.
# SMOKE=1 runs a tiny model for 4 steps instead (CI: the script and both sides work).
# Usage: scripts/bench-trainer-cpu.sh [OUT_DIR]   (default .cache/bench-trainer-cpu)
set -euo pipefail
cd "$(dirname "$0")/.."
eval "$(trainer/setup-torch.sh)"
py="$VIRTUAL_ENV/bin/python"
out="${1:-.cache/bench-trainer-cpu}"
threads="${THREADS:-$(nproc)}"
mkdir -p "$out"
# The workspace's feature set, as the quickstart and the tests build it (no rebuild).
cargo build --release --locked --workspace --bins --examples >&2
shards() {  # name tokens vocab
  [ -s "$out/$1/manifest.json" ] ||
    target/release/examples/loader_bench write "$out/$1" "$2" 64 "$3" >&2
}

results="$out/results.jsonl"
: >"$results"
# name shards dim layers heads kv ffn vocab seq micro steps
run() {
  local name=$1 shards=$2 dim=$3 layers=$4 heads=$5 kv=$6 ffn=$7 vocab=$8 seq=$9 micro=${10} steps=${11}
  local dir="$out/$name"
  rm -rf "$dir" && mkdir -p "$dir"
  cat >"$dir/run.toml" <<TOML
preset = "125m"
checkpoint_every = 1000000
log_every = 1
eval_every = 0
threads = $threads
[model]
dim = $dim
layers = $layers
heads = $heads
kv_heads = $kv
ffn_dim = $ffn
vocab_size = $vocab
max_seq_len = $seq
[data]
seq_len = $seq
validation_share = 0.0
[train]
steps = $steps
micro_batch = $micro
precision = "fp32"
[train.schedule]
warmup_steps = 2
total_steps = $steps
TOML
  echo "== $name: mill-train" >&2
  target/release/mill-train --shards "$shards" --checkpoints "$dir/ckpt" \
    --config "$dir/run.toml" --device cpu --log-format json >"$dir/mill.jsonl" 2>"$dir/mill.err"
  "$py" - "$dir/mill.jsonl" "$name" "$micro" "$seq" >>"$results" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.startswith("{") and "forward_s" in l]
tail = rows[len(rows) // 4:]
mean = lambda k: sum(r[k] for r in tail) / len(tail)
step = mean("seconds")
print(json.dumps({"config": sys.argv[2], "tool": "mill-train",
                  "tokens_per_s": int(sys.argv[3]) * int(sys.argv[4]) / step, "step_s": step,
                  "forward_s": mean("forward_s"), "backward_s": mean("backward_s"),
                  "optimizer_s": mean("optimizer_s"), "data_wait_s": mean("data_wait_s"),
                  "loss": rows[-1]["loss"]}))
PY
  local args=("$dim" "$layers" "$heads" "$kv" "$ffn" "$vocab" "$seq" "$micro" "$steps" "$threads")
  echo "== $name: PyTorch" >&2
  "$py" trainer/bench/cpu_parity.py "${args[@]}" | tag "$name" pytorch >>"$results"
  # PyTorch again with the allocator settings mill-train makes itself on the CPU
  # (trainer/src/host_memory.rs): large blocks kept instead of unmapped on free.
  echo "== $name: PyTorch, freed memory kept" >&2
  MALLOC_MMAP_MAX_=0 MALLOC_TRIM_THRESHOLD_=1000000000000000 \
    "$py" trainer/bench/cpu_parity.py "${args[@]}" | tag "$name" pytorch-kept >>"$results"
}
tag() {  # config tool: names a cpu_parity.py result line
  "$py" -c 'import json,sys; r=json.loads(sys.stdin.read()); r["config"], r["tool"] = sys.argv[1:3]; print(json.dumps(r))' "$1" "$2"
}

if [ "${SMOKE:-0}" = 1 ]; then
  shards shards-2k 200000 2000
  run tiny "$out/shards-2k" 64 2 4 2 176 2000 64 2 4
else
  shards shards-32k 4000000 32000
  shards shards-256k 2000000 256000
  run 33m "$out/shards-32k" 512 6 8 2 1408 32000 256 8 24
  run 125m "$out/shards-256k" 768 12 12 4 2048 256000 128 4 8
fi

"$py" - "$results" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
print(f"{'config':7} {'tool':12} {'tokens/s':>9} {'ratio':>6} {'step s':>7} {'forward':>8} {'backward':>9} {'optimizer':>10} {'data wait':>10}")
for config in dict.fromkeys(r["config"] for r in rows):
    ref = next(r for r in rows if r["config"] == config and r["tool"] == "pytorch")
    for r in (r for r in rows if r["config"] == config):
        print(f"{config:7} {r['tool']:12} {r['tokens_per_s']:9.0f} {r['tokens_per_s'] / ref['tokens_per_s']:6.2f} "
              f"{r['step_s']:7.3f} {r['forward_s']:8.3f} {r['backward_s']:9.3f} {r['optimizer_s']:10.3f} {r['data_wait_s']:10.4f}")
PY
