#!/usr/bin/env bash
# The README's first command: builds tokenmill and runs the first stage on the fixture
# documents, on local disk. Output lands in out/quickstart/.
set -euo pipefail
cd "$(dirname "$0")/.."
# Builds every target (tests and benches too): the same build scripts/test.sh uses.
cargo build --release --locked --workspace --all-targets
out=out/quickstart
./target/release/mill-import \
  --input fixtures/docs \
  --output "$out/import" \
  --config fixtures/import.toml \
  --keep-rejected
echo "shards: $out/import/*.parquet (rejected documents with their reason: $out/import/_rejected/)"
