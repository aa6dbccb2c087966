"""Reference decisions for the quality cross-check: datatrove's GopherRepetitionFilter,
GopherQualityFilter, C4QualityFilter and FineWebQualityFilter with their default
(published) thresholds, applied in FineWeb's order to JSONL documents on stdin.
Prints one JSON line per document: {"id": ..., "reason": <first failing rule or null>}.
Needs: pip install datatrove==0.10.1 spacy regex."""
import json
import sys

from datatrove.data import Document
from datatrove.pipeline.filters import (
    C4QualityFilter,
    FineWebQualityFilter,
    GopherQualityFilter,
    GopherRepetitionFilter,
)

filters = [GopherRepetitionFilter(), GopherQualityFilter(), C4QualityFilter(), FineWebQualityFilter()]
for line in sys.stdin:
    if not line.strip():
        continue
    record = json.loads(line)
    doc = Document(text=record["text"], id=record["id"])
    reason = None
    for f in filters:
        result = f.filter(doc)
        ok, why = (result, None) if isinstance(result, bool) else result
        if not ok:
            reason = why or type(f).__name__
            break
    print(json.dumps({"id": record["id"], "reason": reason}))
