#!/usr/bin/env python3
"""The reference mill-classify's fastText scores are checked against: fastText's own
predict (PyPI fasttext-predict, fastText's C++), every label's probability
(predict(k=-1)), on texts prepared as DCLM prepares them
(" ".join(text.strip().splitlines())).

  classify_fasttext_reference.py MODEL < texts.jsonl > probabilities.jsonl

Reads {"text": ...} lines; writes {"label": probability, ...} per text, in order.
"""

import json
import sys

import fasttext


def main():
    model = fasttext.load_model(sys.argv[1])
    out = sys.stdout
    for line in sys.stdin:
        if not line.strip():
            continue
        text = json.loads(line)["text"]
        labels, probs = model.predict(" ".join(text.strip().splitlines()), k=-1)
        out.write(
            json.dumps({l.removeprefix("__label__"): float(p) for l, p in zip(labels, probs)})
            + "\n"
        )


if __name__ == "__main__":
    main()
