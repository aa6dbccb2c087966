#!/usr/bin/env bash
# The README's first command: builds tokenmill, fetches the lid.176 model, and runs the
# whole pipeline of fixtures/pipeline.toml on the fixture crawl, on local disk:
# WARC -> text (extract, langid, quality, toxicity fused) -> MinHash dedup -> BPE
# vocabulary -> Megatron token shards -> a tiny model trained on them (mill-train), then
# writes the run's HTML report.
# Output lands in out/pipeline/; a second run skips what is done.
set -euo pipefail
cd "$(dirname "$0")/.."
# The trainer links libtorch: PyPI's torch 2.11.0 in .cache/torch-venv (installed once).
eval "$(trainer/setup-torch.sh)"
# Builds every target (tests and benches too): the same build scripts/test.sh uses.
cargo build --release --locked --workspace --all-targets
scripts/fetch-models.sh
./target/release/mill run fixtures/pipeline.toml
./target/release/mill report out/pipeline -o out/pipeline/report.html
./target/release/mill-train export out/pipeline/model out/pipeline/hf-model
./target/release/mill-tokenize inspect "$(ls out/pipeline/tokens/*.idx | head -1 | sed 's/\.idx$//')" --show 1
echo "token shards: out/pipeline/tokens/*.bin/.idx (manifest: out/pipeline/tokens/manifest.json)"
echo "checkpoints of the tiny model: out/pipeline/model/, as a Hugging Face Llama folder: out/pipeline/hf-model/"
echo "report: out/pipeline/report.html; state of the run: ./target/release/mill status out/pipeline"
