"""Reference output for the pii cross-check: datatrove's PIIFormatter with its defaults
(e-mails and public IPv4 addresses) on JSONL documents from stdin. A fresh formatter per
document: datatrove's turn through the replacement lists runs across documents, ours
starts anew in each (so that thread count cannot change the output).
Prints one JSON line per document: {"id": ..., "text": ...}.
With --time, reads the documents first and prints {"docs": n, "seconds": s} for one
formatter over all of them (the bench's figure), instead of the texts.
Needs: pip install datatrove==0.10.1."""
import json
import sys
import time

from datatrove.pipeline.formatters import PIIFormatter

docs = [json.loads(line) for line in sys.stdin if line.strip()]
if "--time" in sys.argv:
    formatter = PIIFormatter()
    start = time.process_time()
    for d in docs:
        formatter.format(d["text"])
    print(json.dumps({"docs": len(docs), "seconds": time.process_time() - start}))
else:
    for d in docs:
        print(json.dumps({"id": d["id"], "text": PIIFormatter().format(d["text"])}, ensure_ascii=False))
