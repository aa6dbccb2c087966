"""Helper of scripts/bench-fineweb2.sh: FineWeb-2's quality step per script group,
datatrove 0.10.1 (set up as scripts/fineweb2_reference.py sets it) on one core.

make CORPUS_DIR OUT_DIR COPIES: writes OUT_DIR/<group>/docs.jsonl, each group's
  documents (CORPUS_DIR/<label>.jsonl, scripts/multilingual_corpus.py) COPIES times
  with new ids.
time OUT_DIR: times datatrove's filters on each group's documents, after loading every
  filter and tokenizer (first document of each language judged once before timing);
  prints one JSON line per group: {"group", "docs", "bytes", "seconds"}."""
import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from fineweb2_reference import filters_for, table_config  # noqa: E402

from datatrove.data import Document  # noqa: E402

GROUPS = {
    "latin": ["deu_Latn", "fra_Latn", "tur_Latn", "vie_Latn"],
    "cjk": ["cmn_Hani", "jpn_Jpan", "kor_Hang"],
    "thai": ["tha_Thai"],
    "arabic": ["arb_Arab", "fas_Arab"],
}


def make(corpus, out, copies):
    for group, labels in GROUPS.items():
        os.makedirs(os.path.join(out, group), exist_ok=True)
        with open(os.path.join(out, group, "docs.jsonl"), "w", encoding="utf-8") as w:
            for c in range(copies):
                for label in labels:
                    for line in open(os.path.join(corpus, f"{label}.jsonl"), encoding="utf-8"):
                        r = json.loads(line)
                        r["id"] = f'{r["id"]}-{c}'
                        w.write(json.dumps(r, ensure_ascii=False) + "\n")


def judge(filters, text, doc_id):
    doc = Document(text=text, id=doc_id)
    for f in filters:
        result = f.filter(doc)
        if not (result if isinstance(result, bool) else result[0]):
            return False
    return True


def time_groups(out):
    for group in GROUPS:
        docs = [json.loads(l) for l in open(os.path.join(out, group, "docs.jsonl"), encoding="utf-8")]
        filters = {}
        for r in docs:
            label = f'{r["language"]}_{r["language_script"]}'
            if label not in filters:
                filters[label] = filters_for(label, table_config(label))
                judge(filters[label], r["text"], "warm-up")
        start = time.process_time()
        for r in docs:
            judge(filters[f'{r["language"]}_{r["language_script"]}'], r["text"], r["id"])
        seconds = time.process_time() - start
        size = sum(len(r["text"].encode()) for r in docs)
        print(json.dumps({"group": group, "docs": len(docs), "bytes": size, "seconds": seconds}), flush=True)


if __name__ == "__main__":
    if sys.argv[1] == "make":
        make(sys.argv[2], sys.argv[3], int(sys.argv[4]))
    else:
        time_groups(sys.argv[2])
