#!/usr/bin/env bash
# Setup for the trainer: a virtualenv under .cache/torch-venv with PyPI's torch 2.11.0,
# the libtorch that the tch crate (0.24) builds and links against
# (LIBTORCH_USE_PYTORCH=1), and transformers (the export test loads our checkpoints
# with its LlamaForCausalLM). Cached: a second run only checks the versions.
# Prints the variables a build needs (eval "$(trainer/setup-torch.sh)").
# On failure it prints `false` instead, after its message on stderr, so that the eval
# fails too and a script under `set -e` stops there rather than building without torch.
set -euo pipefail
trap 'echo "trainer/setup-torch.sh failed (line $LINENO)" >&2; echo false' ERR
cd "$(dirname "$0")/.."
venv=.cache/torch-venv
if ! "$venv/bin/python" -c '
import sys, torch, transformers
sys.exit(torch.__version__.split("+")[0] != "2.11.0" or transformers.__version__ != "5.25.0")' 2>/dev/null; then
  # torch with its CUDA libraries takes about 5 GB here; without the room pip fails
  # deep in an unpack, so say so first. A venv of other versions, or one left half
  # installed, goes first (its room counts).
  rm -rf "$venv"
  mkdir -p .cache
  free_kib=$(df -Pk .cache | awk 'NR == 2 { print $4 }')
  if [ "$free_kib" -lt $((6 * 1024 * 1024)) ]; then
    echo "trainer/setup-torch.sh: $((free_kib / 1024)) MiB free under .cache; torch needs about 6 GiB" >&2
    false
  fi
  python3 -m venv "$venv"
  # No pip cache: it would keep a second copy of the wheels (gigabytes) after the install.
  "$venv/bin/python" -m pip install --quiet --disable-pip-version-check --no-cache-dir \
    torch==2.11.0 transformers==5.25.0 >&2
fi
lib="$("$venv/bin/python" -c 'import os, torch; print(os.path.join(os.path.dirname(torch.__file__), "lib"))' 2>/dev/null)"
# torch-sys's build runs `python` when VIRTUAL_ENV is set: a folder holding only that
# name goes first on PATH, so `python3` stays the system one (the test tools live there).
mkdir -p .cache/torch-python
rm -f .cache/torch-python/python
printf '#!/bin/sh\nexec "%s" "$@"\n' "$PWD/$venv/bin/python" >.cache/torch-python/python
chmod +x .cache/torch-python/python
echo "export LIBTORCH_USE_PYTORCH=1 VIRTUAL_ENV=$PWD/$venv PATH=$PWD/.cache/torch-python:\$PATH LD_LIBRARY_PATH=$lib:\${LD_LIBRARY_PATH:-}"
