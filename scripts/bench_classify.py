#!/usr/bin/env python3
"""Helpers of scripts/bench-classify.sh: real web texts, the fastText parity check and
datatrove's FastTextClassifierFilter timed on the same model and texts.

  bench_classify.py texts WORK WCXB_DIR DRAGNET_DIR
      WORK/texts.jsonl: the main text of every WCXB dev page (1,497, people-checked)
      and every Dragnet gold text (966): real pages of many sites.
      WORK/positives.jsonl, WORK/negatives.jsonl: WCXB's article pages against its
      other page types (service, product, listing, ...), a training set for
      `mill-classify train`.
  bench_classify.py parity MODEL TEXTS.jsonl SCORED_DIR LABEL...
      fastText's own predict(k=-1) (fasttext-predict) against the `<name>_prob_<label>`
      columns mill-classify wrote; prints the max |difference| as JSON.
  bench_classify.py datatrove MODEL TEXTS.jsonl REPEAT
      Times datatrove's FastTextClassifierFilter (the model loaded first, not timed)
      over the texts, REPEAT times, with the interpreter's `fasttext` (datatrove's
      declared fasttext-numpy2-wheel, or fasttext-predict); prints documents per
      second as JSON.
  bench_classify.py transformers-parity OURS_DIR REF.jsonl TEXTS.jsonl NAME
      Our scores of classifier NAME (`NAME_score` of a regression head, or every
      `NAME_prob_*` of a labelled one) against transformers' logits (their softmax).
"""

import glob
import json
import os
import sys
import time


def write_jsonl(path, rows):
    with open(path, "w", encoding="utf-8") as f:
        for r in rows:
            f.write(json.dumps(r, ensure_ascii=False) + "\n")


def texts(work, wcxb, dragnet):
    rows, pos, neg = [], [], []
    for path in sorted(glob.glob(os.path.join(wcxb, "dev/ground-truth/*.json"))):
        page = json.load(open(path, encoding="utf-8"))
        text = (page.get("ground_truth") or {}).get("main_content") or ""
        pid = os.path.splitext(os.path.basename(path))[0]
        if not text.strip():
            continue
        rows.append({"id": f"wcxb-{pid}", "text": text})
        kind = ((page.get("_internal") or {}).get("page_type") or {}).get("primary")
        (pos if kind == "article" else neg).append({"id": f"wcxb-{pid}", "text": text})
    for path in sorted(glob.glob(os.path.join(dragnet, "gold/*.txt"))):
        text = open(path, encoding="utf-8", errors="replace").read()
        if text.strip():
            rows.append({"id": "dragnet-" + os.path.basename(path), "text": text})
    write_jsonl(os.path.join(work, "texts.jsonl"), rows)
    write_jsonl(os.path.join(work, "positives.jsonl"), pos)
    write_jsonl(os.path.join(work, "negatives.jsonl"), neg)
    print(json.dumps({"texts": len(rows), "positives": len(pos), "negatives": len(neg)}))


def read_texts(path):
    return [json.loads(l) for l in open(path, encoding="utf-8") if l.strip()]


def scored(dir_, columns):
    import pyarrow.parquet as pq

    out = {}
    for path in sorted(glob.glob(os.path.join(dir_, "*.parquet"))):
        t = pq.read_table(path, columns=["id"] + columns).to_pylist()
        for row in t:
            out[row["id"]] = row
    return out


def parity(model_path, texts_path, scored_dir, labels):
    import fasttext

    model = fasttext.load_model(model_path)
    name = "q"
    cols = [f"{name}_prob_{l}" for l in labels]
    ours = scored(scored_dir, cols)
    worst, n = 0.0, 0
    for row in read_texts(texts_path):
        text = row["text"]
        got, probs = model.predict(" ".join(text.strip().splitlines()), k=-1)
        theirs = {l.removeprefix("__label__"): float(p) for l, p in zip(got, probs)}
        mine = ours[row["id"]]
        for l, c in zip(labels, cols):
            worst = max(worst, abs(mine[c] - theirs[l]))
        n += 1
    print(json.dumps({"texts": n, "labels": labels, "max_abs_difference": worst}))


def datatrove(model_path, texts_path, repeat):
    from datatrove.data import Document
    from datatrove.pipeline.filters import FastTextClassifierFilter
    import importlib.metadata

    import fasttext

    rows = read_texts(texts_path)
    # `fasttext` is the build datatrove declares (fasttext-numpy2-wheel, its `processing`
    # extra) or fasttext-predict (the tests' build of the same C++ predict, without the
    # `labels` property datatrove's loader checks the labels with, nor the distribution
    # its dependency check looks for).
    try:
        declared = importlib.metadata.distribution("fasttext-numpy2-wheel") is not None
    except importlib.metadata.PackageNotFoundError:
        declared = False
    if declared:
        f = FastTextClassifierFilter(model_path, keep_labels=("hq", 0.0), newline_replacement=" ")
        f.model  # loaded (and its labels checked) before the clock starts
    else:
        f = object.__new__(FastTextClassifierFilter)
        FastTextClassifierFilter.__init__(f, model_path, keep_labels=("hq", 0.0), newline_replacement=" ")
        f._model = fasttext.load_model(model_path)
    # A document per text and pass: the filter rewrites `doc.text` (to its kept spans).
    docs = [Document(text=r["text"], id=r["id"]) for _ in range(repeat) for r in rows]
    start = time.process_time()
    kept = 0
    for d in docs:
        kept += bool(f.filter(d))
    seconds = time.process_time() - start
    build = "fasttext-numpy2-wheel" if declared else "fasttext-predict"
    print(json.dumps({"fasttext": build, "documents": len(docs), "cpu_seconds": seconds, "docs_per_second": len(docs) / seconds}))


def transformers_parity(ours_dir, ref, texts_path, name):
    import math

    import pyarrow.parquet as pq

    first = sorted(glob.glob(os.path.join(ours_dir, "*.parquet")))[0]
    names = pq.read_schema(first).names
    probs = sorted(c for c in names if c.startswith(f"{name}_prob_"))
    columns = probs or [f"{name}_score"]
    ours = scored(ours_dir, columns)
    rows = read_texts(texts_path)
    ref_logits = [json.loads(l)["logits"] for l in open(ref)]
    worst, n, long = 0.0, 0, 0
    for row, logits in zip(rows, ref_logits):
        if row["id"] not in ours:
            continue
        if probs:
            m = max(logits)
            e = [math.exp(x - m) for x in logits]
            want = [x / sum(e) for x in e]
        else:
            want = logits
        got = [ours[row["id"]][c] for c in columns]
        worst = max(worst, max(abs(a - b) for a, b in zip(got, want)))
        n += 1
    print(json.dumps({"classifier": name, "texts": n, "max_abs_difference": worst}))


def main():
    cmd = sys.argv[1]
    if cmd == "texts":
        texts(*sys.argv[2:5])
    elif cmd == "parity":
        parity(sys.argv[2], sys.argv[3], sys.argv[4], sys.argv[5:])
    elif cmd == "datatrove":
        datatrove(sys.argv[2], sys.argv[3], int(sys.argv[4]))
    elif cmd == "transformers-parity":
        transformers_parity(*sys.argv[2:6])
    else:
        sys.exit(f"unknown command {cmd}")


if __name__ == "__main__":
    main()
