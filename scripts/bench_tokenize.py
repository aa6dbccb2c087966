"""Python side of scripts/bench-tokenize.sh.

sample CORPUS_DIR OUT_JSONL MEGABYTES
  Writes the first MEGABYTES of document text of the corpus (its shards in name order,
  documents in order, empty texts skipped) to one JSONL file: the documents every
  encoder of the bench gets.
python TOKENIZER SAMPLE_JSONL OUT_JSON
  Python `tokenizers`: Tokenizer.from_file, encode_special_tokens = True, encode_batch
  over batches of 1000 documents; times the encoding alone (the documents are in
  memory). Writes seconds, documents, bytes, tokens (end-of-document included, as the
  other two count) and a SHA-256 of all ids with the end-of-document id after each
  document.
datatrove TOKENIZER SAMPLE_JSONL WORK_DIR OUT_JSON
  datatrove's JsonlReader -> DocumentTokenizer (the FineWeb tokenization step; eos
  token appended, no shuffling), one task, one worker, on local disk; times the whole
  pipeline run (reading included, as mill-tokenize's time includes reading), and, in the
  same process before it, one load of the tokenizer file (Tokenizer.from_file): the
  run's time less that load is its work, to set beside mill-tokenize's per-input time
  (which its own tokenizer load is not part of).
ours-ids SHARDS_DIR
  Prints the SHA-256 of every id in the shards the manifest lists, in order, in the same
  form as `python` computes it.
tiktoken-load TOKENIZER ROUNDS
  tiktoken built from the same vocabulary, ROUNDS times in one process: the file read
  and parsed, each token's bytes (GPT-2's byte spelling undone) ranked by its id, the
  special tokens by theirs, and tiktoken.Encoding made with the o200k pattern. Prints
  the seconds of each round and their median as JSON (the interpreter's start-up and
  the import left out).
"""
import gzip
import hashlib
import json
import os
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from tokenize_check import read_megatron  # noqa: E402


def sample(corpus, out, megabytes):
    budget = int(float(megabytes) * 1e6)
    used = 0
    docs = 0
    with open(out, "w", encoding="utf-8") as w:
        for shard in sorted(Path(corpus).glob("*.jsonl*")):
            opener = gzip.open if shard.suffix == ".gz" else open
            with opener(shard, "rt", encoding="utf-8") as f:
                for line in f:
                    d = json.loads(line)
                    text = d.get("text") or ""
                    if not text:
                        continue
                    w.write(json.dumps({"id": d["id"], "text": text}, ensure_ascii=False) + "\n")
                    used += len(text.encode("utf-8"))
                    docs += 1
                    if used >= budget:
                        print(json.dumps({"documents": docs, "bytes": used}))
                        return
    print(json.dumps({"documents": docs, "bytes": used}))


def load_texts(path):
    with open(path, encoding="utf-8") as f:
        return [json.loads(line)["text"] for line in f]


def ids_digest(arrays, eod=None):
    h = hashlib.sha256()
    for a in arrays:
        a = np.asarray(a, dtype="<u4")
        h.update(a.tobytes())
        if eod is not None:
            h.update(np.asarray([eod], dtype="<u4").tobytes())
    return h.hexdigest()


def python(tokenizer, sample_path, out):
    from tokenizers import Tokenizer

    tok = Tokenizer.from_file(tokenizer)
    tok.encode_special_tokens = True
    eod = tok.token_to_id("<|endoftext|>")
    texts = load_texts(sample_path)
    start = time.perf_counter()
    encoded = []
    for i in range(0, len(texts), 1000):
        encoded.extend(e.ids for e in tok.encode_batch(texts[i : i + 1000], add_special_tokens=False))
    seconds = time.perf_counter() - start
    result = {
        "seconds": seconds,
        "documents": len(texts),
        "bytes": sum(len(t.encode("utf-8")) for t in texts),
        "tokens": sum(len(e) + 1 for e in encoded),
        "ids_sha256": ids_digest(encoded, eod),
    }
    Path(out).write_text(json.dumps(result))


def datatrove_run(tokenizer, sample_path, work, out):
    from datatrove.executor import LocalPipelineExecutor
    from datatrove.pipeline.readers import JsonlReader
    from datatrove.pipeline.tokens import DocumentTokenizer

    work = Path(work)
    src = work / "input"
    src.mkdir(parents=True, exist_ok=True)
    link = src / "sample.jsonl"
    if not link.exists():
        os.symlink(os.path.abspath(sample_path), link)
    texts = load_texts(sample_path)
    executor = LocalPipelineExecutor(
        pipeline=[
            JsonlReader(str(src), text_key="text", id_key="id"),
            DocumentTokenizer(
                output_folder=str(work / "tokens"),
                tokenizer_name_or_path=tokenizer,
                eos_token="<|endoftext|>",
                shuffle_documents=False,
                batch_size=1000,
            ),
        ],
        tasks=1,
        workers=1,
        logging_dir=str(work / "logs"),
        skip_completed=False,
    )
    from tokenizers import Tokenizer

    start = time.perf_counter()
    Tokenizer.from_file(tokenizer)
    load_seconds = time.perf_counter() - start
    start = time.perf_counter()
    executor.run()
    seconds = time.perf_counter() - start

    # datatrove's token width: 4 bytes once the vocabulary outgrows uint16.
    width = 4 if Tokenizer.from_file(tokenizer).get_vocab_size() > 65536 else 2
    tokens = sum(f.stat().st_size // width for f in (work / "tokens").rglob("*.ds"))
    result = {
        "seconds": seconds,
        "load_seconds": load_seconds,
        "work_seconds": seconds - load_seconds,
        "documents": len(texts),
        "bytes": sum(len(t.encode("utf-8")) for t in texts),
        "tokens_files": tokens,
    }
    Path(out).write_text(json.dumps(result))


def ours_ids(shards_dir):
    manifest = json.loads((Path(shards_dir) / "manifest.json").read_text())
    arrays = []
    for s in manifest["shards"]:
        arrays.extend(read_megatron(str(Path(shards_dir) / s["name"])))
    print(ids_digest(arrays))


def byte_decoder():
    """GPT-2's byte of each spelling character."""
    printable = [b for b in range(256) if 0x21 <= b <= 0x7E or (0xA1 <= b <= 0xFF and b != 0xAD)]
    chars, extra = {}, 0
    for b in range(256):
        if b in printable:
            chars[chr(b)] = b
        else:
            chars[chr(0x100 + extra)] = b
            extra += 1
    return chars


def tiktoken_load(tokenizer, rounds):
    import tiktoken

    pattern = json.loads(Path(tokenizer).read_text(encoding="utf-8"))["pre_tokenizer"]["pretokenizers"][0]["pattern"]["Regex"]
    decoder = byte_decoder()
    seconds = []
    for _ in range(int(rounds)):
        start = time.perf_counter()
        tok = json.loads(Path(tokenizer).read_text(encoding="utf-8"))
        special = {t["content"]: t["id"] for t in tok["added_tokens"]}
        ranks = {
            bytes(decoder[c] for c in token): rank
            for token, rank in tok["model"]["vocab"].items()
            if token not in special
        }
        enc = tiktoken.Encoding("bench", pat_str=pattern, mergeable_ranks=ranks, special_tokens=special)
        enc.encode("warm up the regex and the tables")
        seconds.append(time.perf_counter() - start)
    print(json.dumps({"tiktoken": tiktoken.__version__, "seconds": seconds,
                      "median": sorted(seconds)[len(seconds) // 2]}))


if __name__ == "__main__":
    cmd, args = sys.argv[1], sys.argv[2:]
    {"sample": sample, "python": python, "datatrove": datatrove_run, "ours-ids": ours_ids,
     "tiktoken-load": tiktoken_load}[cmd](*args)
