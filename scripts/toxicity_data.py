#!/usr/bin/env python3
"""The labelled toxicity sets (Jigsaw, OLID, Davidson et al.) as tokenmill documents, and
the figures of models scored on them.

  toxicity_data.py split DATA OUT          DATA: the archive or its unpacked folder;
                                           writes OUT/train/train.jsonl and
                                           OUT/test/{jigsaw,olid,davidson}.jsonl
  toxicity_data.py profanity-check OUT     alt-profanity-check's scores of the test
                                           documents -> OUT/profanity-check.json
  toxicity_data.py figures OUT SCORED THRESHOLD
                                           precision, recall, F1 and ROC-AUC of our
                                           model (mill-toxicity's output at SCORED) and
                                           of alt-profanity-check, per test set
  toxicity_data.py web RUN MODE...         share of extracted web pages each MODE's run
                                           (RUN/MODE, written with --keep-rejected)
                                           dropped as toxic, and their URLs

Each document is {"id", "text", "label"} with label `toxic` or `clean`:
- Jigsaw: `toxic` 1 -> toxic, 0 -> clean.
- OLID v1.0, subtask A: OFF -> toxic, NOT -> clean; its official test set is the test set.
- Davidson et al.: class 0 (hate speech) and 1 (offensive) -> toxic, 2 (neither) -> clean.
The held-out shares of Jigsaw and Davidson (TEST_SHARE) are chosen by SHA-256 of the
document id, so a rerun splits the same way. Text clean-up is only what the sets add to
the text: HTML entities (Davidson), retweet markers (`RT`), OLID's `URL` placeholder.
Mentions and addresses are removed by the model's own normalisation (`normalize =
"words"`), which runs on web text too.
"""

import csv
import hashlib
import html
import json
import os
import re
import subprocess
import sys
import tarfile

TEST_SHARE = 0.2
SETS = ["jigsaw", "olid", "davidson"]


def held_out(doc_id):
    h = hashlib.sha256(doc_id.encode()).digest()
    return int.from_bytes(h[:8], "big") / 2**64 < TEST_SHARE


def clean(text):
    text = html.unescape(text)
    text = re.sub(r"(?<!\S)RT(?!\S)", " ", text)
    text = re.sub(r"(?<!\S)URL(?!\S)", " ", text)
    return " ".join(text.split())


def unpack(src, work):
    if os.path.isdir(src):
        return src if os.path.isdir(os.path.join(src, "jigsaw")) else os.path.join(src, "toxicity")
    out = os.path.join(work, "source")
    if not os.path.isdir(os.path.join(out, "toxicity")):
        os.makedirs(out, exist_ok=True)
        subprocess.run(["tar", "-I", "zstd", "-xf", src, "-C", out], check=True)
    return os.path.join(out, "toxicity")


def jigsaw(data):
    with open(os.path.join(data, "jigsaw/jigsaw-balanced.csv"), newline="", encoding="utf-8") as f:
        for i, row in enumerate(csv.DictReader(f)):
            yield f"jigsaw-{i}", row["comment_text"], "toxic" if row["toxic"] == "1" else "clean"


def olid_train(data):
    with open(os.path.join(data, "olid/olid-training-v1.0.tsv"), newline="", encoding="utf-8") as f:
        for row in csv.DictReader(f, delimiter="\t", quoting=csv.QUOTE_NONE):
            yield f"olid-{row['id']}", row["tweet"], "toxic" if row["subtask_a"] == "OFF" else "clean"


def olid_test(data):
    labels = {}
    with open(os.path.join(data, "olid/labels-levela.csv"), newline="", encoding="utf-8") as f:
        for row in csv.reader(f):
            if row and row[0] != "id":
                labels[row[0]] = row[1]
    with open(os.path.join(data, "olid/testset-levela.tsv"), newline="", encoding="utf-8") as f:
        for row in csv.DictReader(f, delimiter="\t", quoting=csv.QUOTE_NONE):
            yield f"olid-test-{row['id']}", row["tweet"], "toxic" if labels[row["id"]] == "OFF" else "clean"


def davidson(data):
    with open(os.path.join(data, "davidson/labeled_data.csv"), newline="", encoding="utf-8") as f:
        for row in csv.DictReader(f):
            yield f"davidson-{row['']}", row["tweet"], "toxic" if row["class"] in ("0", "1") else "clean"


def cmd_split(data, out):
    data = unpack(data, out)
    os.makedirs(os.path.join(out, "train"), exist_ok=True)
    os.makedirs(os.path.join(out, "test"), exist_ok=True)
    counts = {}
    with open(os.path.join(out, "train/train.jsonl"), "w", encoding="utf-8") as train:
        tests = {s: open(os.path.join(out, f"test/{s}.jsonl"), "w", encoding="utf-8") for s in SETS}
        sources = [
            ("jigsaw", jigsaw(data), True),
            ("olid", olid_train(data), False),
            ("olid", ((i, t, l, True) for i, t, l in olid_test(data)), None),
            ("davidson", davidson(data), True),
        ]
        for name, rows, split in sources:
            for row in rows:
                if split is None:
                    doc_id, text, label, test = row
                else:
                    doc_id, text, label = row
                    test = split and held_out(doc_id)
                text = clean(text)
                if not text:
                    continue
                line = json.dumps({"id": doc_id, "text": text, "label": label}, ensure_ascii=False)
                (tests[name] if test else train).write(line + "\n")
                key = (name, "test" if test else "train", label)
                counts[key] = counts.get(key, 0) + 1
        for f in tests.values():
            f.close()
    for (name, part, label), n in sorted(counts.items()):
        print(f"{name:9} {part:5} {label:5} {n:6}", file=sys.stderr)


def read_jsonl(path):
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def cmd_profanity_check(out):
    from profanity_check import predict_prob

    scores = {}
    for s in SETS:
        docs = read_jsonl(os.path.join(out, f"test/{s}.jsonl"))
        for d, p in zip(docs, predict_prob([d["text"] for d in docs])):
            scores[d["id"]] = float(p)
    with open(os.path.join(out, "profanity-check.json"), "w") as f:
        json.dump(scores, f)


def parquet_rows(folder, columns):
    import pyarrow.parquet as pq

    # Kept shards and, with --keep-rejected, the dropped ones (`_rejected/`); not the
    # markers and notes of the other `_` folders.
    for root, dirs, files in os.walk(folder):
        dirs[:] = sorted(d for d in dirs if not d.startswith(("_", ".")) or d == "_rejected")
        for name in sorted(files):
            if name.endswith(".parquet"):
                yield from pq.read_table(os.path.join(root, name), columns=columns).to_pylist()


def roc_auc(pairs):
    """Area under the ROC curve: the chance that a toxic text outscores a clean one (ties
    count one half), from ranks."""
    pairs = sorted(pairs)
    ranks = [0.0] * len(pairs)
    i = 0
    while i < len(pairs):
        j = i
        while j + 1 < len(pairs) and pairs[j + 1][0] == pairs[i][0]:
            j += 1
        for k in range(i, j + 1):
            ranks[k] = (i + j) / 2 + 1
        i = j + 1
    pos = sum(1 for _, y in pairs if y)
    neg = len(pairs) - pos
    rank_sum = sum(r for r, (_, y) in zip(ranks, pairs) if y)
    return (rank_sum - pos * (pos + 1) / 2) / (pos * neg)


def prf(pairs, threshold):
    tp = sum(1 for s, y in pairs if y and s >= threshold)
    fp = sum(1 for s, y in pairs if not y and s >= threshold)
    fn = sum(1 for s, y in pairs if y and s < threshold)
    p = tp / (tp + fp) if tp + fp else 0.0
    r = tp / (tp + fn) if tp + fn else 0.0
    return p, r, (2 * p * r / (p + r) if p + r else 0.0)


def cmd_figures(out, scored, threshold):
    ours = {r["id"]: r["toxicity_score"] for r in parquet_rows(scored, ["id", "toxicity_score"])}
    theirs = json.load(open(os.path.join(out, "profanity-check.json")))
    print(f"{'test set':10} {'texts':>6} {'toxic':>6}  {'model':28} {'P':>6} {'R':>6} {'F1':>6} {'AUC':>6}")
    result = {}
    for s in SETS:
        docs = read_jsonl(os.path.join(out, f"test/{s}.jsonl"))
        missing = [d["id"] for d in docs if d["id"] not in ours]
        if missing:
            sys.exit(f"{len(missing)} test documents of {s} have no score (first: {missing[0]})")
        toxic = sum(d["label"] == "toxic" for d in docs)
        for name, scores, t in [
            (f"toxicity-en-v1 at {threshold}", ours, threshold),
            ("alt-profanity-check at 0.5", theirs, 0.5),
        ]:
            pairs = [(scores[d["id"]], d["label"] == "toxic") for d in docs]
            p, r, f1 = prf(pairs, t)
            auc = roc_auc(pairs)
            result.setdefault(s, {})[name] = {"precision": p, "recall": r, "f1": f1, "roc_auc": auc}
            print(f"{s:10} {len(docs):6} {toxic:6}  {name:28} {p:6.3f} {r:6.3f} {f1:6.3f} {auc:6.3f}")
    with open(os.path.join(out, "figures.json"), "w") as f:
        json.dump(result, f, indent=1)


def cmd_web(run, modes):
    for mode in modes:
        rows = list(parquet_rows(os.path.join(run, mode), None))
        dropped = [r for r in rows if r.get("drop_reason")]
        print(f"{mode}: {len(dropped)} of {len(rows)} pages dropped ({100 * len(dropped) / max(len(rows), 1):.2f}%)")
        for r in sorted(dropped, key=lambda r: -r["toxicity_score"]):
            print(f"  {r['toxicity_score']:.3f}  {r['drop_reason']:15} {r.get('url')}")


def main():
    cmd, args = sys.argv[1], sys.argv[2:]
    if cmd == "split":
        cmd_split(*args)
    elif cmd == "profanity-check":
        cmd_profanity_check(*args)
    elif cmd == "figures":
        cmd_figures(args[0], args[1], float(args[2]))
    elif cmd == "web":
        cmd_web(args[0], args[1:])
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main()
