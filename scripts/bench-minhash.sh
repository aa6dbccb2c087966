#!/usr/bin/env bash
# MinHash signatures on real texts, one core, next to rensa (a Rust MinHash with Python
# bindings) in the same run:
#   1. the kernel: our cut and signature of our normalised texts (dedup_sign_texts)
#      against rensa's RMinHash on the same 5-grams, already cut for it (per document,
#      and its batch call); and our whole kernel from the raw texts (normalise too);
#   2. the whole process: `mill-dedup signatures --threads 1` on the texts (reading
#      JSONL, normalising, signing, writing the .sig and .ids files) against a Python
#      process that reads our normalised texts, cuts them and signs them with rensa;
#   3. with BASE set to another mill-dedup (an earlier build), the same signature run
#      by it, alternated with ours, and the SHA-256 of both runs' files compared.
# Texts: a JSONL of {"text": ...}; scripts/bench-classify.sh leaves the 2,442 WCXB and
# Dragnet texts (people-checked main text of pages from many sites) in
# .cache/bench-classify/texts.jsonl. They are signed four times over in step 2.
# Usage: [BASE=old/mill-dedup] scripts/bench-minhash.sh [TEXTS.jsonl] [WORK_DIR]
set -euo pipefail
cd "$(dirname "$0")/.."
texts="${1:-.cache/bench-classify/texts.jsonl}"
work="${2:-.cache/bench-minhash}"
[ -f "$texts" ] || { echo "no texts at $texts: run ONLY=fasttext scripts/bench-classify.sh SHARED_DATA_DIR first, or name a JSONL" >&2; exit 2; }
python3 -m pip install --quiet --disable-pip-version-check rensa==0.5.0
cargo build --release --locked -p dedup --bins --examples >/dev/null 2>&1 || cargo build --release --locked -p dedup --bins --examples
bin=./target/release/mill-dedup
mkdir -p "$work"
rm -rf "$work/in" && mkdir -p "$work/in"
for k in 0 1 2 3; do cp "$texts" "$work/in/texts-$k.jsonl"; done

echo "== kernel (fastest of 5 rounds each)"
ours=$(taskset -c 0 target/release/examples/dedup_sign_texts "$texts" "$work/normalized.jsonl" 5)
theirs=$(taskset -c 0 python3 scripts/bench_dedup.py rensa "$work/normalized.jsonl" --rounds 5)
python3 - "$ours" "$theirs" <<'PY'
import json, sys
o, r = json.loads(sys.argv[1]), json.loads(sys.argv[2])
print(f"{o['documents']:,} texts, {r['shingles']:,} 5-grams")
print("| side | seconds | docs/s | speed against rensa per document |")
print("| --- | ---: | ---: | ---: |")
base = r["per_document_seconds"]
for name, s in [("ours: cut + sign", o["cut_and_sign_seconds"]),
                ("ours: normalise + cut + sign", o["normalize_cut_and_sign_seconds"]),
                ("rensa RMinHash per document (5-grams given)", r["per_document_seconds"]),
                ("rensa digests_from_token_sets (5-grams given)", r["batch_seconds"])]:
    print(f"| {name} | {s:.3f} | {o['documents'] / s:,.0f} | {base / s:.2f}x |")
PY

echo "== whole process, the texts four times over, one core (CPU seconds, three rounds, alternated)"
for k in 0 1 2 3; do cat "$work/normalized.jsonl"; done >"$work/normalized4.jsonl"
time_of() { /usr/bin/time -f "%U %S" -o "$work/time" "$@" >/dev/null 2>"$work/stderr" || { cat "$work/stderr" >&2; exit 1; }; awk '{ print $1 + $2 }' "$work/time"; }
sides="ours rensa"
[ -n "${BASE:-}" ] && sides="base ours rensa"
for round in 1 2 3; do
  line="round $round:"
  for side in $sides; do
    case $side in
      ours) rm -rf "$work/sig-ours"; s=$(time_of taskset -c 0 "$bin" signatures --input "$work/in" --output "$work/sig-ours" --threads 1 --log-format json) ;;
      base) rm -rf "$work/sig-base"; s=$(time_of taskset -c 0 "$BASE" signatures --input "$work/in" --output "$work/sig-base" --threads 1 --log-format json) ;;
      rensa) s=$(time_of taskset -c 0 python3 scripts/bench_dedup.py rensa "$work/normalized4.jsonl" --whole) ;;
    esac
    line="$line $side ${s}s"
  done
  echo "$line"
done
if [ -n "${BASE:-}" ]; then
  sums() { (cd "$1" && find . -name '*.sig' -o -name '*.ids' | sort | xargs sha256sum); }
  if diff <(sums "$work/sig-base") <(sums "$work/sig-ours") >/dev/null; then
    echo "signature and id files: identical to BASE's ($(sums "$work/sig-ours" | wc -l) files)"
  else
    echo "signature and id files DIFFER from BASE's" >&2; exit 1
  fi
fi
