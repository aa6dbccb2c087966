#!/usr/bin/env bash
# The recipe of the shipped toxicity model (models/toxicity-en-v1.ftz; its card is
# models/toxicity-en-v1.md): the labelled sets split into training and test documents
# (scripts/toxicity_data.py), then `mill-toxicity train` with the settings of
# models/toxicity-en-v1.toml on one thread. The same data gives the same model bytes.
# Usage: scripts/train-toxicity-model.sh DATA [OUT]
#   DATA: toxicity.tar.zst (Jigsaw, OLID, Davidson et al.) or its unpacked folder.
#   OUT: where the model is written (default models/, the shipped file).
#   CHECK=1 trains into a temporary folder and fails unless the bytes equal the shipped
#   model's.
set -euo pipefail
cd "$(dirname "$0")/.."
data="${1:?usage: scripts/train-toxicity-model.sh DATA [OUT]}"
out="${2:-models}"
work=.cache/toxicity-data
rm -rf "$work/train" "$work/test" "$work/model"
python3 scripts/toxicity_data.py split "$data" "$work"
cargo build --release --locked -p toxicity --bin mill-toxicity
target/release/mill-toxicity train --input "$work/train" --output "$work/model" \
  --config models/toxicity-en-v1.toml --force
if [ "${CHECK:-}" = 1 ]; then
  if cmp "$work/model/model.ftz" models/toxicity-en-v1.ftz; then
    echo "the recipe reproduces models/toxicity-en-v1.ftz ($(sha256sum <models/toxicity-en-v1.ftz | cut -c1-64))"
  else
    echo "the recipe's model differs from models/toxicity-en-v1.ftz" >&2
    exit 1
  fi
else
  mkdir -p "$out"
  cp "$work/model/model.ftz" "$out/toxicity-en-v1.ftz"
  echo "wrote $out/toxicity-en-v1.ftz ($(stat -c %s "$out/toxicity-en-v1.ftz") bytes)"
fi
