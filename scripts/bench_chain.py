"""The text chain, datatrove's side: FineWeb's WarcReader -> Trafilatura(favour_precision)
-> LanguageFilter -> GopherRepetitionFilter -> FineWebQualityFilter -> GopherQualityFilter
-> C4QualityFilter -> JsonlWriter, chained as datatrove's LocalPipelineExecutor chains one
task, on the WARC files of a folder. Prints JSON: CPU seconds of the run (this process and the
extractor's sandbox process; interpreter start and imports excluded), pages read,
documents kept. scripts/bench-chain.sh runs it beside `mill run`.

Usage: bench_chain.py WARC_DIR OUT_DIR LID_MODEL
"""

import gzip
import json
import resource
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_filters import NumpyScores  # noqa: E402  fastText's scores as numpy arrays


def cpu_seconds():
    """(this process, its finished children): user + system seconds."""
    own = resource.getrusage(resource.RUSAGE_SELF)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime, children.ru_utime + children.ru_stime


def main(warc_dir, out_dir, model_path):
    import fasttext
    from datatrove.pipeline.extractors import Trafilatura
    from datatrove.pipeline.filters import (
        C4QualityFilter,
        FineWebQualityFilter,
        GopherQualityFilter,
        GopherRepetitionFilter,
        LanguageFilter,
    )
    from datatrove.pipeline.readers import WarcReader
    from datatrove.pipeline.writers import JsonlWriter

    # datatrove downloads lid.176.bin and insists on the `fasttext-wheel` distribution;
    # hand its filter the same lid.176 model file the Rust side reads, with no download.
    lang = object.__new__(LanguageFilter)
    LanguageFilter.__init__(lang, languages=["en"])
    lang.model._model = NumpyScores(fasttext.load_model(model_path))
    out = Path(out_dir)
    pipeline = [
        WarcReader(warc_dir, glob_pattern="*.warc.gz"),
        Trafilatura(favour_precision=True, timeout=10.0),
        lang,
        GopherRepetitionFilter(),
        FineWebQualityFilter(),
        GopherQualityFilter(),
        # FineWeb's setting: lines without terminal punctuation are kept.
        C4QualityFilter(filter_no_terminal_punct=False),
        JsonlWriter(str(out / "output")),
    ]
    # The steps chained as LocalPipelineExecutor chains them for one rank (the executor
    # itself deep-copies the steps, which re-checks the `fasttext-wheel` install).
    before = cpu_seconds()
    data = None
    for step in pipeline:
        data = step(data, rank=0, world_size=1)
    for _ in data or []:
        pass
    after = cpu_seconds()
    own, sandbox = after[0] - before[0], after[1] - before[1]
    kept = 0
    for f in (out / "output").glob("*.jsonl.gz"):
        with gzip.open(f, "rt") as fh:
            kept += sum(1 for _ in fh)
    pages = 0
    for doc in WarcReader(warc_dir, glob_pattern="*.warc.gz").run():
        pages += 1
    print(json.dumps({"cpu_s": own + sandbox, "sandbox_cpu_s": sandbox, "pages": pages, "kept": kept}))


if __name__ == "__main__":
    main(*sys.argv[1:4])
