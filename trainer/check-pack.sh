#!/usr/bin/env bash
# Proves that a pack of trainer/pack-gpu-check.sh runs from its own folder, as on the lent
# GPU machine, here on the CPU: copies DIR to a new temporary folder outside the
# repository and runs its gpu-check.sh --prebuilt --device cpu there, in an environment
# holding only the system's commands, a `python3` that is the torch virtualenv's
# (trainer/setup-torch.sh; the GPU machine's python3 holds torch) and, on
# LD_LIBRARY_PATH, that torch's libraries and the NVIDIA wheels' beside it. `cargo` and
# `rustc` there are stand-ins that fail: the check must build nothing.
# Usage: trainer/check-pack.sh [DIR] [gpu-check options]   (default .cache/gpu-check-pack)
set -euo pipefail
cd "$(dirname "$0")/.."
dir="${1:-.cache/gpu-check-pack}"
shift || true
[ -x "$dir/gpu-check.sh" ] || { echo "check-pack: no $dir/gpu-check.sh: run trainer/pack-gpu-check.sh" >&2; exit 1; }
eval "$(trainer/setup-torch.sh)" >/dev/null
python="$VIRTUAL_ENV/bin/python"

tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
cp -r "$dir" "$tmp/pack"
mkdir "$tmp/bin"
# A script, not a symbolic link: a link to a virtualenv's python outside the virtualenv's
# folder starts the bare interpreter, without torch.
printf '#!/bin/sh\nexec "%s" "$@"\n' "$python" >"$tmp/bin/python3"
for tool in cargo rustc; do
  printf '#!/bin/sh\necho "check-pack: the packed check ran %s" >&2\nexit 97\n' "$tool" >"$tmp/bin/$tool"
done
chmod +x "$tmp"/bin/*
libs="$("$python" - <<'PY'
import glob, os, torch, nvidia
dirs = [os.path.join(os.path.dirname(torch.__file__), "lib")]
for root in nvidia.__path__:
    dirs += sorted({os.path.dirname(p) for p in glob.glob(os.path.join(root, "*", "lib", "lib*.so*"))})
print(":".join(dirs))
PY
)"
echo "== $dir copied to a temporary folder; gpu-check.sh --prebuilt there, --device cpu"
cd "$tmp"
env -i HOME="$tmp" TMPDIR="${TMPDIR:-/tmp}" PATH="$tmp/bin:/usr/local/bin:/usr/bin:/bin" \
  LD_LIBRARY_PATH="$libs" PYTHONUNBUFFERED=1 \
  bash "$tmp/pack/gpu-check.sh" --prebuilt "$tmp/pack" --device cpu "$@"
