#!/usr/bin/env bash
# Bench: exact-substring dedup (mill-dedup substring, then substring-filter) on real
# text, one core, one partition: build time (tokenizing, suffix array, factors), peak
# memory, tokens, and the share of bytes cut and of documents dropped.
# Usage: scripts/bench-substring.sh DOCS [min_tokens]
#   DOCS: a folder of JSONL (.gz, .zst) or Parquet document shards, e.g. the 1.1 GB real
#   text corpus of scripts/text_corpus.py (.cache/text-corpus/docs, built by
#   scripts/bench-tokenize.sh) or the extracted WCXB pages.
set -euo pipefail
cd "$(dirname "$0")/.."
docs="$1"
min="${2:-50}"
cargo build --release --locked -p dedup --bins >/dev/null 2>&1
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
printf '[substring]\nmin_tokens = %s\npartition_bytes = 1000000000000\n' "$min" >"$work/dedup.toml"
/usr/bin/time -f "%U %S %e %M" -o "$work/time1" taskset -c 0 target/release/mill-dedup substring \
  --input "$docs" --output "$work/cuts" --config "$work/dedup.toml" --threads 1 --log-format json >"$work/log1" 2>&1
/usr/bin/time -f "%U %S %e %M" -o "$work/time2" taskset -c 0 target/release/mill-dedup substring-filter \
  --input "$docs" --output "$work/out" --cuts "$work/cuts" --config "$work/dedup.toml" --threads 1 \
  --log-format json >"$work/log2" 2>&1
python3 - "$work" <<'PY'
import json, pathlib, sys
w = pathlib.Path(sys.argv[1])
def t(name):
    u, s, e, m = open(w / name).read().split()[-4:]
    return float(u) + float(s), float(e), int(m) / 1024
marker = json.loads(next((w / "cuts/_done").glob("*.json")).read_text())["stats"]
c = marker["counts"]
timing = {}
for line in open(w / "log1"):
    try:
        f = json.loads(line).get("fields", {})
    except ValueError:
        continue
    if "suffix_array_seconds" in f:
        timing = f
filt = {}
for m in (w / "out/_done").rglob("*.json"):
    s = json.loads(m.read_text())["stats"]
    for k in ("docs_in", "docs_out"):
        filt[k] = filt.get(k, 0) + s[k]
    for k, v in s.get("drops", {}).items():
        filt[k] = filt.get(k, 0) + v
cpu1, wall1, rss1 = t("time1")
cpu2, wall2, rss2 = t("time2")
text = c["substring_text_bytes"]
print(f"{marker['docs_in']:,} documents, {text / 1e9:.3f} GB of text, {c['substring_tokens']:,} tokens "
      f"({timing.get('vocabulary', 0):,} distinct pieces)")
print("| | value |")
print("| --- | ---: |")
print(f"| substring phase: CPU s (wall s) | {cpu1:.1f} ({wall1:.1f}) |")
print(f"| - reading and tokenizing, s | {timing.get('tokenize_seconds', 0):.1f} |")
print(f"| - suffix array + PLCP (libsais), s | {timing.get('suffix_array_seconds', 0):.1f} |")
print(f"| - longest previous factors and cuts, s | {timing.get('factors_seconds', 0):.1f} |")
print(f"| substring phase: peak RSS, GiB | {rss1 / 1024:.2f} |")
print(f"| peak RSS per byte of text | {rss1 * 2**20 / text:.2f} |")
print(f"| bytes cut | {c.get('substring_bytes_cut', 0):,} ({c.get('substring_bytes_cut', 0) / text:.2%}) |")
print(f"| documents cut | {c.get('substring_documents_cut', 0):,} ({c.get('substring_documents_cut', 0) / marker['docs_in']:.2%}) |")
print(f"| filter: CPU s, peak RSS MiB | {cpu2:.1f}, {rss2:.0f} |")
print(f"| documents dropped (substring_dup) | {filt.get('substring_dup', 0):,} of {filt.get('docs_in', 0):,} |")
PY
