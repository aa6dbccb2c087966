"""Reference decisions for the FineWeb-2 cross-check: datatrove 0.10.1's filters set up as
FineWeb-2's pipeline sets them for each language (fineweb-2-pipeline.py): Gopher
repetition with the language's dup_line_frac and n-gram shares (paragraph and repeated
line character checks off), FineWeb quality with its line_punct_thr and new_line_ratio
(short_line_thr off, char_duplicates_ratio 0.1), Gopher quality with its word lengths,
alpha share and stopwords (two needed); each filter counts words with the tokenizer
datatrove assigns to the language.

Reads JSONL documents on stdin: {"id", "text", "language", "language_script"} (the label
is `<language>_<language_script>`, e.g. cmn_Hani). Prints one JSON line per document:
{"id", "reason" (the first failing filter's reason, or null), "words" (datatrove's word
list for the label)}.

The settings come from FineWeb-2's YAML configs when --configs names their folder (from
../shared/data/fineweb2-configs.tar.zst), else from the project's table generated from
them (pipeline/data/fineweb2-languages.tsv).

Needs the packages in scripts/requirements-fineweb2.txt."""
import argparse
import json
import os
import sys

from datatrove.data import Document
from datatrove.pipeline.filters import FineWebQualityFilter, GopherQualityFilter, GopherRepetitionFilter
from datatrove.utils.text import split_into_words

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
KEYS = [
    "language_score", "dup_line_frac", "top_2", "top_3", "top_4", "dup_5", "dup_6", "dup_7", "dup_8",
    "dup_9", "dup_10", "line_punct_thr", "new_line_ratio", "min_avg_word_length", "max_avg_word_length",
    "max_non_alpha_words_ratio",
]


def table_config(label):
    for line in open(os.path.join(ROOT, "pipeline/data/fineweb2-languages.tsv"), encoding="utf-8"):
        cells = line.rstrip("\n").split("\t")
        if cells[0] != label:
            continue
        v = dict(zip(KEYS, map(float, cells[1:17])))
        return {
            "dup_line_frac": v["dup_line_frac"],
            "top_n_grams": [[n, v[f"top_{n}"]] for n in (2, 3, 4)],
            "dup_n_grams": [[n, v[f"dup_{n}"]] for n in range(5, 11)],
            "line_punct_thr": v["line_punct_thr"],
            "new_line_ratio": v["new_line_ratio"],
            "min_avg_word_length": v["min_avg_word_length"],
            "max_avg_word_length": v["max_avg_word_length"],
            "max_non_alpha_words_ratio": v["max_non_alpha_words_ratio"],
            "stopwords": [s for s in cells[17:] if s.strip()],
        }
    return None


def yaml_config(folder, label):
    import yaml

    path = os.path.join(folder, f"{label}.yml")
    return yaml.safe_load(open(path, encoding="utf-8")) if os.path.exists(path) else None


def filters_for(label, c):
    return [
        GopherRepetitionFilter(
            language=label,
            dup_line_frac=c["dup_line_frac"],
            dup_para_frac=0,
            dup_line_char_frac=0,
            dup_para_char_frac=0,
            top_n_grams=c["top_n_grams"],
            dup_n_grams=c["dup_n_grams"],
        ),
        FineWebQualityFilter(
            language=label,
            line_punct_thr=c["line_punct_thr"],
            short_line_thr=999,
            char_duplicates_ratio=0.1,
            new_line_ratio=c["new_line_ratio"],
        ),
        GopherQualityFilter(
            language=label,
            min_avg_word_length=c["min_avg_word_length"],
            max_avg_word_length=c["max_avg_word_length"],
            max_non_alpha_words_ratio=c["max_non_alpha_words_ratio"],
            stop_words=c["stopwords"],
            min_stop_words=2,
        ),
    ]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--configs", help="FineWeb-2's configs folder (default: the project's table)")
    a = ap.parse_args()
    cache = {}
    for line in sys.stdin:
        if not line.strip():
            continue
        r = json.loads(line)
        label = f'{r["language"]}_{r["language_script"]}'
        if label not in cache:
            c = yaml_config(a.configs, label) if a.configs else table_config(label)
            if c is None:
                sys.exit(f"{label}: no FineWeb-2 config")
            cache[label] = filters_for(label, c)
        doc = Document(text=r["text"], id=r["id"])
        reason = None
        for f in cache[label]:
            result = f.filter(doc)
            ok, why = (result, None) if isinstance(result, bool) else result
            if not ok:
                reason = why or type(f).__name__
                break
        out = {"id": r["id"], "reason": reason, "words": split_into_words(r["text"], label)}
        print(json.dumps(out, ensure_ascii=False), flush=False)


if __name__ == "__main__":
    main()
