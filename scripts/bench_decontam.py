"""The decontam bench: mill-decontam beside datatrove's n-gram decontamination on the
same documents and the same evaluation texts, one core.

    python3 scripts/bench_decontam.py DOCS [--eval-share F] [--n N]

DOCS: JSONL, or a Parquet file or folder of document shards. Every paragraph (line) of
every 1/F-th document becomes an evaluation record, so about that share of the
documents is contaminated; --eval-share 2 gives about 700,000 13-grams on the extracted WCXB
pages. Both tools index the same records (datatrove's
NGramsDecontIndexer.compute_hashes, as scripts/decontam_reference.py, and
`mill-decontam index`) and filter every document (datatrove's NGramsDecontFilter.filter
in this process; `mill-decontam --threads 1` as a child, reading JSONL and writing
Parquet included). Prints CPU time, peak memory (max RSS of our processes; index bytes in
memory per million n-grams) and the documents each tool dropped.
Needs: datatrove==0.10.1, spacy, xxhash, pyarrow (scripts/requirements-bench.txt)."""
import json
import os
import pathlib
import subprocess
import sys
import tempfile
import time
from collections import defaultdict

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from bench_pii import texts  # noqa: E402

ROOT = pathlib.Path(__file__).resolve().parent.parent


def measured(cmd):
    """CPU seconds (user + system) and peak RSS (MiB) of a child, from GNU time."""
    with tempfile.NamedTemporaryFile("r") as t:
        subprocess.run(["/usr/bin/time", "-f", "%U %S %M", "-o", t.name] + cmd, check=True,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        u, s, m = t.read().split()[-3:]
    return float(u) + float(s), int(m) / 1024


def main():
    src = sys.argv[1]
    share = int(sys.argv[sys.argv.index("--eval-share") + 1]) if "--eval-share" in sys.argv else 10
    n = int(sys.argv[sys.argv.index("--n") + 1]) if "--n" in sys.argv else 13
    docs = list(texts(src))
    binary = str(ROOT / "target/release/mill-decontam")
    with tempfile.TemporaryDirectory() as work:
        w = pathlib.Path(work)
        (w / "evals").mkdir()
        (w / "docs").mkdir()
        records = []
        with open(w / "evals/held-out.jsonl", "w", encoding="utf-8") as f:
            for i, (_, text) in enumerate(docs):
                if i % share == 0:
                    for para in text.split("\n"):
                        if para.strip():
                            records.append(para)
                            f.write(json.dumps({"text": para}, ensure_ascii=False) + "\n")
        with open(w / "docs/docs.jsonl", "w", encoding="utf-8") as f:
            for i, (doc_id, text) in enumerate(docs):
                f.write(json.dumps({"id": doc_id or f"d{i}", "text": text}, ensure_ascii=False) + "\n")
        conf = w / "decontam.toml"
        conf.write_text(f'ngram = {n}\nindex = "{w / "index"}"\n')
        index_cpu, index_rss = measured([binary, "index", "--input", str(w / "evals"), "--output", str(w / "index"),
                                         "--config", str(conf), "--threads", "1", "--log-format", "json"])
        manifest = json.loads((w / "index/index.json").read_text())
        filter_cpu, filter_rss = measured([binary, "--input", str(w / "docs"), "--output", str(w / "out"),
                                           "--config", str(conf), "--threads", "1", "--log-format", "json"])
        ours_marker = json.loads(next((w / "out/_done").glob("*.json")).read_text())
        ours_dropped = ours_marker["stats"]["drops"].get("contaminated", 0)
        # The filter's memory without the index: the same run on an index of one record.
        (w / "tiny").mkdir()
        (w / "tiny/one.jsonl").write_text(json.dumps({"text": " ".join(f"w{k}" for k in range(n))}) + "\n")
        tiny_conf = w / "tiny.toml"
        tiny_conf.write_text(f'ngram = {n}\nindex = "{w / "tiny-index"}"\n')
        measured([binary, "index", "--input", str(w / "tiny"), "--output", str(w / "tiny-index"),
                  "--config", str(tiny_conf), "--threads", "1", "--log-format", "json"])
        _, base_rss = measured([binary, "--input", str(w / "docs"), "--output", str(w / "out-tiny"),
                                "--config", str(tiny_conf), "--threads", "1", "--log-format", "json"])

    from datatrove.data import Document
    from datatrove.pipeline.decont.n_grams import NGramsDecontConfig, NGramsDecontFilter, NGramsDecontIndexer
    from datatrove.utils.hashing import create_hash_func
    from datatrove.utils.word_tokenizers import load_word_tokenizer
    from loguru import logger
    import numpy as np
    logger.remove()
    config = NGramsDecontConfig(n_grams=n, find_query_ngrams=True)
    indexer = object.__new__(NGramsDecontIndexer)
    indexer.config = config
    indexer.tokenizer = load_word_tokenizer("en")
    indexer.hash_func = create_hash_func(config.hash_config)
    start = time.process_time()
    hashes = set()
    for r in records:
        hashes.update(indexer.compute_hashes(r))
    dt_index = time.process_time() - start
    with tempfile.TemporaryDirectory() as folder:
        np.array(sorted(hashes), dtype=config.hash_config.np_descr).tofile(os.path.join(folder, "held-out.index.hashes"))
        decont = NGramsDecontFilter(folder, config=config)
        decont.load_index_hashes()
        start = time.process_time()
        dt_dropped = 0
        for doc_id, text in docs:
            result = decont.filter(Document(text=text, id=doc_id))
            ok = result if isinstance(result, bool) else result[0]
            dt_dropped += 0 if ok else 1
        dt_filter = time.process_time() - start
    k = len(docs)
    ngrams = manifest["ngrams"]
    print(f"{k} documents; {len(records)} evaluation records, {ngrams:,} distinct {n}-grams "
          f"(datatrove: {len(hashes):,})")
    print("| | datatrove | mill-decontam | × |")
    print("| --- | ---: | ---: | ---: |")
    print(f"| index, CPU s | {dt_index:.2f} | {index_cpu:.2f} | {dt_index / max(index_cpu, 1e-9):.1f} |")
    print(f"| filter, CPU µs/doc | {dt_filter / k * 1e6:.1f} | {filter_cpu / k * 1e6:.1f} | "
          f"{dt_filter / max(filter_cpu, 1e-9):.1f} |")
    print(f"| documents dropped | {dt_dropped} | {ours_dropped} | |")
    print(f"| index in memory, MiB per million n-grams | | {manifest['memory_bytes'] / ngrams * 1e6 / 2**20:.2f} | |")
    print(f"| filter peak RSS, MiB (with a one-record index) | | {filter_rss:.0f} ({base_rss:.0f}) | |")
    print(f"| index build peak RSS, MiB | | {index_rss:.0f} | |")


if __name__ == "__main__":
    main()
