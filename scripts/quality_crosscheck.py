"""Quality cross-check on any documents: mill-quality's keep/drop decisions against
datatrove's Gopher repetition, Gopher quality, C4 and FineWeb filters (as
scripts/quality_reference.py applies them) on the same texts.

quality_crosscheck.py INPUT_DIR QUALITY_DIR [--show 10]

INPUT_DIR: the Parquet documents mill-quality read (e.g. mill-extract's output).
QUALITY_DIR: mill-quality's output, run with --keep-rejected (kept documents, and
  _rejected/ with drop_reason). Prints the agreement and the disagreements.
Used by scripts/bench-filters.sh on real extracted pages."""
import argparse
import glob
import json
import os
import subprocess
import sys

import pyarrow.parquet as pq


def rows(folder, rejected):
    out = {}
    for path in sorted(glob.glob(os.path.join(folder, "**", "*.parquet"), recursive=True)):
        rel = os.path.relpath(path, folder)
        parts = rel.split(os.sep)
        if rejected != (parts[0] == "_rejected") or any(p.startswith(".") for p in parts):
            continue
        if not rejected and any(p.startswith("_") for p in parts):
            continue
        names = pq.read_schema(path).names
        cols = ["id", "text"] + [c for c in ("language", "drop_reason") if c in names]
        for r in pq.read_table(path, columns=cols).to_pylist():
            out[r["id"]] = r
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("input")
    ap.add_argument("quality")
    ap.add_argument("--show", type=int, default=10)
    a = ap.parse_args()
    docs = rows(a.input, False)
    kept = rows(a.quality, False)
    dropped = rows(a.quality, True)
    payload = "".join(json.dumps({"id": i, "text": d["text"]}) + "\n" for i, d in docs.items())
    ref = subprocess.run(
        [sys.executable, os.path.join(os.path.dirname(__file__), "quality_reference.py")],
        input=payload, capture_output=True, text=True, check=True,
    ).stdout.splitlines()
    agree, diffs = {}, []
    for line in ref:
        r = json.loads(line)
        lang = docs[r["id"]].get("language") or "?"
        group = "English" if lang == "en" else "other languages"
        ours = None if r["id"] in kept else dropped.get(r["id"], {}).get("drop_reason", "missing")
        same = (ours is None) == (r["reason"] is None)
        n, ok = agree.get(group, (0, 0))
        agree[group] = (n + 1, ok + same)
        if not same:
            diffs.append((r["id"], lang, ours, r["reason"]))
    for group, (n, ok) in sorted(agree.items()):
        print(f"quality on {n} real documents ({group}): keep/drop agrees with datatrove on {ok} ({100 * ok / max(n, 1):.2f}%)")
    print("  (datatrove splits words with its English tokenizer whatever the language; we split")
    print("   Chinese, Japanese and Thai per character, so Gopher word-length rules differ there)")
    for i, lang, ours, theirs in diffs[: a.show]:
        print(f"  {i} [{lang}]: tokenmill {ours or 'keep'}, datatrove {theirs or 'keep'}")


if __name__ == "__main__":
    main()
