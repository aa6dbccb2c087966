"""Helper of scripts/bench-filters.sh.

make N PATH: writes N seeded documents (English prose, boilerplate, repeated lines,
  bullets, and the multilingual fixture documents) as JSONL.
compare CORPUS OURS MODEL [WARC]: times datatrove's filters on CORPUS on one core and
  prints a table next to tokenmill's figures in OURS; with WARC, also datatrove's
  Trafilatura extractor alone and fused with the filters on the HTML pages of WARC
  (read as datatrove's WarcReader reads them)."""
import json
import random
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def make(n, path):
    lines = (ROOT / "fixtures/quality/sentences.txt").read_text().splitlines()
    tricky = (ROOT / "fixtures/quality/tricky.txt").read_text().splitlines()
    prose, junk = lines[:30] + tricky, lines[30:]
    web = [json.loads(l)["text"] for l in (ROOT / "fixtures/docs/web-multilingual.jsonl").read_text().splitlines()]
    rng = random.Random(5)
    with open(path, "w") as out:
        for i in range(n):
            if rng.random() < 0.1:
                text = rng.choice(web)
            else:
                body = []
                for _ in range(rng.randint(5, 60)):
                    r = rng.random()
                    if r < 0.7:
                        body.append(" ".join(rng.choice(prose) for _ in range(rng.randint(1, 4))))
                    elif r < 0.9:
                        body.append(rng.choice(junk))
                    else:
                        body.append(body[-1] if body else rng.choice(prose))
                text = "\n".join(body)
            out.write(json.dumps({"id": f"b{i}", "text": text}) + "\n")


class NumpyScores:
    """fasttext-predict returns floats where fastText's own binding returns numpy values."""

    def __init__(self, model):
        self.model = model

    def predict(self, text, k=1, threshold=0.0):
        import numpy

        labels, probs = self.model.predict(text, k=k, threshold=threshold)
        return labels, numpy.asarray(probs)


def warc_pages(path):
    """HTML payloads of the response records of a WARC file, decoded as datatrove's
    WarcReader does (UTF-8, else the detected charset)."""
    from datatrove.pipeline.readers.warc import process_record
    from warcio.archiveiterator import ArchiveIterator

    pages = []
    with open(path, "rb") as f:
        for record in ArchiveIterator(f):
            doc = process_record(record)
            if doc:
                pages.append(doc)
    return pages


def compare(corpus, ours_path, model_path, warc=None):
    import fasttext
    from datatrove.data import Document
    from datatrove.pipeline.filters import (
        C4QualityFilter,
        FineWebQualityFilter,
        GopherQualityFilter,
        GopherRepetitionFilter,
        LanguageFilter,
    )

    docs = [json.loads(l) for l in open(corpus)]
    # datatrove insists on the `fasttext-wheel` distribution; fastText's own predict
    # code (fasttext-predict) is the same model code, so skip that check and hand the
    # filter the same lid.176 model file, with no download.
    lang = object.__new__(LanguageFilter)
    LanguageFilter.__init__(lang, languages=["en"])
    lang.model._model = NumpyScores(fasttext.load_model(model_path))
    quality = [GopherRepetitionFilter(), GopherQualityFilter(), C4QualityFilter(), FineWebQualityFilter()]

    def rate(filters):
        items = [Document(text=d["text"], id=d["id"]) for d in docs]
        start = time.perf_counter()
        for doc in items:
            for f in filters:
                r = f.filter(doc)
                if not (r if isinstance(r, bool) else r[0]):
                    break
        return len(items) / (time.perf_counter() - start)

    theirs = {"langid": rate([lang]), "quality": rate(quality), "fused": rate([lang] + quality)}
    ours = json.load(open(ours_path))
    rows = [("langid", "langid"), ("quality", "quality (4 families)"), ("fused", "langid -> quality")]
    if warc:
        from datatrove.pipeline.extractors import Trafilatura

        pages = warc_pages(warc)
        extractor = Trafilatura(favour_precision=True)

        def rate_pages(filters):
            items = [Document(text=p["text"], id=p["id"]) for p in pages]
            start = time.perf_counter()
            for doc in items:
                # datatrove's extractor step, without its per-page subprocess timeout.
                doc.text = extractor.extract(doc.text) or ""
                if not doc.text:
                    continue
                for f in filters:
                    r = f.filter(doc)
                    if not (r if isinstance(r, bool) else r[0]):
                        break
            return len(items) / (time.perf_counter() - start)

        theirs["extract"] = rate_pages([])
        theirs["extract_fused"] = rate_pages([lang] + quality)
        ours["extract_docs_per_s"] = ours["extract_pages_per_s"]
        ours["extract_fused_docs_per_s"] = ours["extract_fused_pages_per_s"]
        rows += [("extract", "extract (HTML pages)"), ("extract_fused", "extract -> langid -> quality")]
    print(f"{len(docs)} documents, one core, documents/s" + (f"; {ours['pages']} HTML pages from {warc}" if warc else ""))
    print(f"{'step':<30}{'tokenmill':>12}{'datatrove':>12}{'ratio':>9}")
    for key, name in rows:
        a, b = ours[f"{key}_docs_per_s"], theirs[key]
        print(f"{name:<30}{a:>12.0f}{b:>12.0f}{a / b:>8.1f}x")
    # Toxicity has no datatrove counterpart in FineWeb's recipe: tokenmill alone.
    print(f"{'toxicity (urls, words, fastText)':<30}{ours['toxicity_docs_per_s']:>12.0f}")
    if warc:
        print(f"{'extract -> ... -> toxicity':<30}{ours['extract_fused_toxicity_pages_per_s']:>12.0f}")
        print(f"\ntokenmill per stage on these pages, one core, ms per document "
              f"({ours['page_texts']} texts extracted from {ours['pages']} pages):")
        for key, name in [("extract", "extract (per page)"), ("langid", "langid"), ("quality", "quality (4 families)"),
                          ("toxicity", "toxicity (lists, shipped model)")]:
            print(f"{name:<30}{ours[f'page_{key}_ms']:>12.3f}")
        # The toxicity stage's share of the fused text step, from the two fused rates.
        with_tox, without = 1 / ours["extract_fused_toxicity_pages_per_s"], 1 / ours["extract_fused_pages_per_s"]
        print(f"toxicity's share of extract -> langid -> quality -> toxicity: {100 * (with_tox - without) / with_tox:.1f}%")


if __name__ == "__main__":
    if sys.argv[1] == "make":
        make(int(sys.argv[2]), sys.argv[3])
    else:
        compare(sys.argv[2], sys.argv[3], sys.argv[4], sys.argv[5] if len(sys.argv) > 5 else None)
