#!/usr/bin/env bash
# Packs the trainer's GPU check for the lent GPU machine, which has PyTorch 2.11 but no
# Rust and no network: builds mill-train and mill-classify-gpu (the classify stage's
# transformers on GPUs) with --features cuda against PyPI's torch 2.11.0
# (trainer/setup-torch.sh; the libtorch that machine's torch holds) and the loader_bench
# example (it writes the synthetic shards there), in a target folder of their own so that
# target/release/mill-train stays the CPU build the tests use; then copies into DIR the
# binaries without their debug information, any shared library they need that is
# neither torch's, NVIDIA's nor the C/C++ runtime's, trainer/bench/reference.py,
# scripts/classify_reference.py and trainer/gpu-check.sh. DIR must stay under 64 MiB, what the device tool carries.
# On that machine: DIR/gpu-check.sh --prebuilt DIR (trainer/README.md, "GPU check on the
# lent device"); here, trainer/check-pack.sh DIR proves the pack on the CPU.
# Usage: trainer/pack-gpu-check.sh [DIR]   (default .cache/gpu-check-pack)
set -euo pipefail
cd "$(dirname "$0")/.."
dir="${1:-.cache/gpu-check-pack}"
limit_mib=64
target=target/gpu-check

eval "$(trainer/setup-torch.sh)"
python="$VIRTUAL_ENV/bin/python"
echo "== build (cuda feature, $target)"
start=$SECONDS
CARGO_TARGET_DIR="$target" cargo build --release --locked -p trainer --features cuda \
  --bin mill-train --bin mill-classify-gpu --example loader_bench
echo "built in $((SECONDS - start)) s"
mill="$target/release/mill-train"
loader="$target/release/examples/loader_bench"

# trainer/build.rs links libtorch_cuda.so with --no-as-needed; without it libtorch never
# registers its CUDA backend and mill-train would train on the CPU beside the GPU.
if ! readelf -d "$mill" | grep -q 'NEEDED.*\[libtorch_cuda\.so\]'; then
  echo "pack-gpu-check: $mill does not NEED libtorch_cuda.so (trainer/build.rs)" >&2
  exit 1
fi

rm -rf "$dir"
mkdir -p "$dir/bin"
strip --strip-debug -o "$dir/bin/mill-train" "$mill"
strip --strip-debug -o "$dir/bin/mill-classify-gpu" "$target/release/mill-classify-gpu"
strip --strip-debug -o "$dir/bin/loader_bench" "$loader"
cp trainer/gpu-check.sh trainer/bench/reference.py scripts/classify_reference.py "$dir/"
chmod +x "$dir/gpu-check.sh"

# Shared libraries: those under the torch installation (torch/lib, nvidia/*) come from the
# GPU machine's own torch, the C and C++ runtime from its system; anything else travels.
site="$("$python" -c 'import os, torch; print(os.path.realpath(os.path.dirname(os.path.dirname(torch.__file__))))')"
runtime='^(linux-vdso\.so\.1|ld-linux-x86-64\.so\.2|lib(c|m|dl|rt|pthread|util|gcc_s|stdc\+\+)\.so\.[0-9]+)$'
packed=()
for bin in "$dir/bin/mill-train" "$dir/bin/mill-classify-gpu" "$dir/bin/loader_bench"; do
  while read -r name _ path _; do
    [[ "$name" =~ $runtime ]] && continue
    [[ "$name" == /* ]] && continue  # the interpreter, listed by path
    if [ "$path" = "not" ]; then
      echo "pack-gpu-check: $bin needs $name, which is not found here" >&2
      exit 1
    fi
    case "$(readlink -f "$path")" in
      "$site"/torch/*|"$site"/nvidia/*) continue ;;
    esac
    mkdir -p "$dir/lib"
    if [ ! -e "$dir/lib/$name" ]; then
      cp -L "$path" "$dir/lib/$name"
      packed+=("$name")
    fi
  done < <(ldd "$bin" | sed 's/^\s*//')
done

glibc="$(objdump -T "$dir"/bin/* | grep -o 'GLIBC_2\.[0-9.]*' | sort -uV | tail -1)"
glibcxx="$(objdump -T "$dir"/bin/* | grep -o 'GLIBCXX_3\.[0-9.]*' | sort -uV | tail -1)"
# Three binaries pass the device tool's 64 MiB: they travel gzipped (gpu-check.sh
# unpacks them with python3's gzip into its output folder).
gzip -9 -n "$dir"/bin/*
torch="$("$python" -c 'import torch; print(torch.__version__)')"
commit="$(git rev-parse --short HEAD 2>/dev/null || echo unknown)"
if git rev-parse --git-dir >/dev/null 2>&1 && ! git diff --quiet HEAD --; then commit="$commit with uncommitted changes"; fi
cat >"$dir/PACK.txt" <<EOF
trainer GPU check, packed by trainer/pack-gpu-check.sh
commit: $commit
built against: torch $torch (PyPI), cargo feature cuda
needs: glibc >= ${glibc#GLIBC_}, libstdc++ with ${glibcxx:-no GLIBCXX symbols}, python3 with torch 2.11 (CUDA 13 wheels)
libraries packed: ${packed[*]:-none}
run: DIR/gpu-check.sh --prebuilt DIR [--out OUT_DIR] [--device cuda|cpu]
EOF

echo "== packed $dir"
(cd "$dir" && find . -type f -printf '%s\t%p\n' | sort -k2 | awk -F'\t' '{ printf "%10.1f MiB  %s\n", $1 / 1048576, $2 }')
bytes="$(du -sb "$dir" | cut -f1)"
awk -v b="$bytes" 'BEGIN { printf "total %.1f MiB\n", b / 1048576 }'
echo "needs glibc >= ${glibc#GLIBC_}; libraries packed: ${packed[*]:-none}"
if [ "$bytes" -gt $((limit_mib * 1024 * 1024)) ]; then
  echo "pack-gpu-check: $dir is over the device tool's $limit_mib MiB" >&2
  exit 1
fi
