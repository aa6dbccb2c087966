"""Reference decisions for the decontam cross-check: datatrove's n-gram decontamination
on the same evaluation records and documents.

stdin: one JSON object {"n": N, "evals": [{"task", "question", "answer"}...],
"docs": [{"id", "text"}...]}. The index holds, per task, the hashes datatrove's
NGramsDecontIndexer.compute_hashes gives for (label=answer, query=question) with
find_query_ngrams and find_overlap_ngrams on (every n-gram of question + answer); its
run() is not used because it wants lighteval's task registry. The documents then go
through datatrove's NGramsDecontFilter over that index folder.
Prints one JSON line per document: {"id": ..., "contaminated": bool, "task": ...}.
Needs: pip install datatrove==0.10.1 spacy."""
import json
import os
import sys
import tempfile
from collections import defaultdict

import numpy as np
from datatrove.data import Document
from datatrove.pipeline.decont.n_grams import NGramsDecontConfig, NGramsDecontFilter, NGramsDecontIndexer
from datatrove.utils.hashing import create_hash_func
from datatrove.utils.word_tokenizers import load_word_tokenizer

job = json.load(sys.stdin)
config = NGramsDecontConfig(n_grams=job["n"], find_query_ngrams=True, find_overlap_ngrams=True)
# The indexer without its constructor (which checks for lighteval): the method is its own.
indexer = object.__new__(NGramsDecontIndexer)
indexer.config = config
indexer.tokenizer = load_word_tokenizer("en")
indexer.hash_func = create_hash_func(config.hash_config)
hashes = defaultdict(set)
for e in job["evals"]:
    hashes[e["task"]].update(indexer.compute_hashes(e["answer"], e["question"]))
with tempfile.TemporaryDirectory() as folder:
    for task, hs in hashes.items():
        np.array(sorted(hs), dtype=config.hash_config.np_descr).tofile(os.path.join(folder, f"{task}.index.hashes"))
    decont = NGramsDecontFilter(folder, config=config)
    for d in job["docs"]:
        doc = Document(text=d["text"], id=d["id"])
        result = decont.filter(doc)
        ok = result if isinstance(result, bool) else result[0]
        print(json.dumps({"id": d["id"], "contaminated": not ok, "task": doc.metadata.get("contaminated_task")}))
