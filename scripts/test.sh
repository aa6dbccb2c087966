#!/usr/bin/env bash
# The test command: fetches the models, starts the S3 test server on loopback, then
# runs every test of the workspace (release profile, the one CI and the quickstart
# build). Extra arguments go to the test runner, e.g. `scripts/test.sh storage::`.
set -euo pipefail
cd "$(dirname "$0")/.."
# The trainer links libtorch: PyPI's torch 2.11.0 in .cache/torch-venv (installed once).
eval "$(trainer/setup-torch.sh)"
scripts/fetch-models.sh
source scripts/s3-server.sh
if cargo nextest --version >/dev/null 2>&1; then
  cargo nextest run --workspace --locked --cargo-profile release --no-fail-fast "$@"
else
  cargo test --workspace --locked --release --no-fail-fast "$@"
fi
