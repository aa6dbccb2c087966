#!/usr/bin/env bash
# A longer fuzzing run than CI's smoke run (20 s a target): every target, or the ones
# named, SECONDS each. Inputs that break a contract land in target/fuzz-findings/ and
# make the exit status 1; each one fixed becomes a file under fixtures/fuzz/<target>/,
# replayed by the tests.
# Usage: scripts/bench-fuzz.sh [SECONDS (300)] [SEED (1)] [TARGET...]
set -euo pipefail
cd "$(dirname "$0")/.."
eval "$(trainer/setup-torch.sh)"
seconds="${1:-300}"
seed="${2:-1}"
shift $(($# < 2 ? $# : 2))
cargo build --release --locked -p fuzz --bin mill-fuzz
target/release/mill-fuzz --seconds "$seconds" --seed "$seed" "$@"
