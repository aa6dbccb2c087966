#!/usr/bin/env bash
# The README's first command: builds tokenmill and runs the web pipeline's first stages
# on the fixture crawl, on local disk: WARC -> extract -> langid -> quality -> tokenize
# (train, encode). Output lands in out/quickstart/.
set -euo pipefail
cd "$(dirname "$0")/.."
# Builds every target (tests and benches too): the same build scripts/test.sh uses.
cargo build --release --locked --workspace --all-targets
scripts/fetch-models.sh
out=out/quickstart
./target/release/mill-extract \
  --input fixtures/warc \
  --output "$out/extract" \
  --config fixtures/extract.toml \
  --keep-rejected
./target/release/mill-langid --input "$out/extract" --output "$out/langid"
./target/release/mill-quality --input "$out/langid" --output "$out/quality" --keep-rejected
# Tokenize: a vocabulary trained on the kept documents, then Megatron token shards.
./target/release/mill-tokenize train \
  --input "$out/quality" \
  --output "$out/tokenizer" \
  --config fixtures/tokenize.toml
./target/release/mill-tokenize encode \
  --input "$out/quality" \
  --output "$out/tokens" \
  --tokenizer "$out/tokenizer/tokenizer.json" \
  --config fixtures/tokenize.toml
./target/release/mill-tokenize inspect "$(ls "$out"/tokens/*.idx | head -1 | sed 's/\.idx$//')" --show 1
# JSONL and Parquet corpora from elsewhere (FineWeb, dolma layouts) come in through import.
./target/release/mill-import \
  --input fixtures/docs \
  --output "$out/import" \
  --config fixtures/import.toml \
  --keep-rejected
echo "token shards: $out/tokens/*.bin/.idx (manifest: $out/tokens/manifest.json)"
echo "documents: $out/quality/*.parquet (each stage's rejects, with their reason: $out/<stage>/_rejected/)"
