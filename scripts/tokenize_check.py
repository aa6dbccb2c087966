"""Interoperability check of mill-tokenize's output with the Python tokenizer stack.

tokenize_check.py --tokenizer TOKENIZER_JSON --docs DOCS_DIR --shards ENCODE_OUTPUT_DIR

TOKENIZER_JSON: the tokenizer.json `mill-tokenize train` wrote (and `encode` used).
DOCS_DIR: the JSONL document shards `encode` read (*.jsonl, sorted by file name, lines
  in order; records with an empty text are skipped, as the encoder drops them).
ENCODE_OUTPUT_DIR: `encode`'s output: manifest.json and the Megatron datasets it lists.

Loads the tokenizer with HuggingFace `tokenizers` (special-token spellings encoded as
text) and with `transformers.PreTrainedTokenizerFast`, then checks, document by
document, that the shard holds the Python ids followed by the end-of-document id, that
transformers encodes to the same ids and that the ids decode back to the text; and that
the manifest agrees with what was read. Prints one JSON line {"documents", "tokens",
"checked", "mismatches" (the first 10, described), "mismatch_count"}; exits 1 on any
mismatch, 2 on a usage or import error."""
import argparse
import hashlib
import json
import os
import struct
import sys

# Megatron's dtype codes (megatron/core/datasets/indexed_dataset.py, DType).
DTYPE_CODES = {1: "u1", 2: "i1", 3: "<i2", 4: "<i4", 5: "<i8", 6: "<f8", 7: "<f4", 8: "<u2"}
MANIFEST_DTYPES = {"u16": "<u2", "i32": "<i4"}
SHOW = 10


def usage_error(message):
    print(f"tokenize_check: {message}", file=sys.stderr)
    sys.exit(2)


try:
    import numpy as np

    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
    from tokenizers import Tokenizer
    from transformers import PreTrainedTokenizerFast
except ImportError as e:
    usage_error(f"{e}; install the pinned tools: pip install -r scripts/requirements-test.txt")


def read_megatron(prefix):
    """Reads the Megatron-LM indexed dataset PREFIX.idx/.bin (MMIDIDX, version 1) and
    returns its sequences as numpy arrays. .idx, little endian: magic b"MMIDIDX\\0\\0",
    u64 version, u8 dtype code, u64 sequence count n, u64 document count (n + 1),
    int32[n] sequence lengths, int64[n] byte offsets into .bin, int64[n + 1] document
    index (0..n here: one sequence per document). .bin: the ids back to back."""
    idx = np.memmap(prefix + ".idx", np.uint8, "r")
    assert bytes(idx[:9]) == b"MMIDIDX\x00\x00", f"{prefix}.idx: not a Megatron index"
    version, code, n, docs = struct.unpack_from("<QBQQ", idx, 9)
    assert version == 1 and code in DTYPE_CODES, f"{prefix}.idx: version {version}, dtype code {code}"
    lengths = np.frombuffer(idx, "<i4", n, 34)
    pointers = np.frombuffer(idx, "<i8", n, 34 + 4 * n)
    doc_idx = np.frombuffer(idx, "<i8", docs, 34 + 12 * n)
    assert docs == n + 1 and (doc_idx == np.arange(n + 1)).all(), f"{prefix}.idx: document index is not 0..{n}"
    size = os.path.getsize(prefix + ".bin")
    data = np.memmap(prefix + ".bin", np.uint8, "r") if size else b""
    return [np.frombuffer(data, DTYPE_CODES[code], int(l), int(p)) for l, p in zip(lengths, pointers)]


def read_docs(folder):
    """(file, line number, id, text) of the documents of FOLDER's *.jsonl files, in the
    encoder's order. Lines are split at \\n only (U+2028 and friends stay inside a
    record); blank lines and records without a non-empty string text are skipped."""
    names = sorted(n for n in os.listdir(folder) if n.endswith(".jsonl") and not n.startswith((".", "_")))
    if not names:
        usage_error(f"no *.jsonl documents in {folder}")
    docs = []
    for name in names:
        with open(os.path.join(folder, name), "rb") as f:
            for no, line in enumerate(f.read().split(b"\n"), 1):
                if not line.strip():
                    continue
                try:
                    rec = json.loads(line)
                except ValueError as e:
                    usage_error(f"{name}:{no}: not a JSON record: {e}")
                text = rec.get("text")
                if isinstance(text, str) and text:
                    docs.append((name, no, rec.get("id"), text))
    return docs


def first_difference(a, b, what="token"):
    """Where two sequences (ids or strings) first differ, with a little of each there."""
    k = next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))
    return f"lengths {len(a)} vs {len(b)}, first difference at {what} {k}: {a[k:k + 5]!r} vs {b[k:k + 5]!r}"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tokenizer", required=True, help="tokenizer.json written by mill-tokenize train")
    ap.add_argument("--docs", required=True, help="folder of the JSONL documents encode read")
    ap.add_argument("--shards", required=True, help="encode's output folder (manifest.json and datasets)")
    a = ap.parse_args()
    manifest_path = os.path.join(a.shards, "manifest.json")
    for path in (a.tokenizer, a.docs, manifest_path):
        if not os.path.exists(path):
            usage_error(f"{path}: not found")
    try:
        with open(manifest_path, "rb") as f:
            manifest = json.load(f)
        eod = manifest["end_of_document_id"]
        shards = manifest["shards"]
    except (ValueError, KeyError, TypeError) as e:
        usage_error(f"{manifest_path}: unreadable manifest: {e!r}")

    tok = Tokenizer.from_file(a.tokenizer)
    tok.encode_special_tokens = True
    hf = PreTrainedTokenizerFast(tokenizer_file=a.tokenizer)
    docs = read_docs(a.docs)

    mismatches = []
    checked = []

    def check(name, ok, describe):
        if name not in checked:
            checked.append(name)
        if not ok:
            mismatches.append(f"{name}: {describe()}")

    with open(a.tokenizer, "rb") as f:
        sha = hashlib.sha256(f.read()).hexdigest()
    check("manifest_tokenizer_sha256", manifest.get("tokenizer_sha256") == sha,
          lambda: f"manifest {manifest.get('tokenizer_sha256')}, file {sha}")
    check("manifest_vocab_size", manifest.get("vocab_size") == tok.get_vocab_size(with_added_tokens=True),
          lambda: f"manifest {manifest.get('vocab_size')}, tokenizer {tok.get_vocab_size(with_added_tokens=True)}")
    check("manifest_end_of_document", tok.token_to_id(manifest.get("end_of_document", "")) == eod,
          lambda: f"{manifest.get('end_of_document')!r} is id {tok.token_to_id(manifest.get('end_of_document', ''))}, manifest says {eod}")

    seqs = []  # (shard name, index in shard, ids)
    for shard in shards:
        name = shard["name"]
        prefix = os.path.join(a.shards, name)
        try:
            arrays = read_megatron(prefix)
        except (OSError, AssertionError, ValueError, struct.error) as e:
            check("megatron_layout", False, lambda: f"{name}: {e}")
            continue
        check("megatron_layout", True, None)
        tokens = sum(len(x) for x in arrays)
        itemsize = arrays[0].itemsize if arrays else 0
        bin_size = os.path.getsize(prefix + ".bin")
        check("bin_size", bin_size == tokens * itemsize,
              lambda: f"{name}.bin: {bin_size} bytes, lengths say {tokens} x {itemsize}")
        want = MANIFEST_DTYPES.get(manifest.get("dtype"))
        check("dtype", not arrays or np.dtype(want or "V1") == arrays[0].dtype,
              lambda: f"{name}: manifest {manifest.get('dtype')!r}, index {arrays[0].dtype}")
        disk = bin_size + os.path.getsize(prefix + ".idx")
        check("manifest_shards", (shard.get("documents"), shard.get("tokens"), shard.get("bytes")) == (len(arrays), tokens, disk),
              lambda: f"{name}: manifest documents/tokens/bytes {shard.get('documents')}/{shard.get('tokens')}/{shard.get('bytes')}, read {len(arrays)}/{tokens}/{disk}")
        seqs.extend((name, i, x.tolist()) for i, x in enumerate(arrays))

    total_tokens = sum(len(ids) for _, _, ids in seqs)
    check("manifest_totals", (manifest.get("documents"), manifest.get("tokens")) == (len(seqs), total_tokens),
          lambda: f"manifest documents/tokens {manifest.get('documents')}/{manifest.get('tokens')}, read {len(seqs)}/{total_tokens}")
    check("document_count", len(seqs) == len(docs),
          lambda: f"{len(docs)} non-empty documents in {a.docs}, {len(seqs)} sequences in the shards")

    for (file, no, doc_id, text), (name, i, ids) in zip(docs, seqs):
        where = f"{file}:{no} id={doc_id!r} ({name}[{i}])"
        ref = tok.encode(text).ids
        check("shard_ids", ids == ref + [eod], lambda: f"{where}: shard vs tokenizers+[eod]: {first_difference(ids, ref + [eod])}")
        hf_ids = hf.encode(text, add_special_tokens=False, split_special_tokens=True)
        check("transformers_ids", hf_ids == ref, lambda: f"{where}: transformers vs tokenizers: {first_difference(hf_ids, ref)}")
        body = ids[:-1] if ids and ids[-1] == eod else ids
        decoded = tok.decode(body, skip_special_tokens=False)
        check("decode", decoded == text, lambda: f"{where}: decoded vs text: {first_difference(decoded, text, 'character')}")

    print(json.dumps({
        "documents": len(seqs),
        "tokens": total_tokens,
        "checked": checked,
        "mismatches": mismatches[:SHOW],
        "mismatch_count": len(mismatches),
    }))
    sys.exit(1 if mismatches else 0)


if __name__ == "__main__":
    main()
