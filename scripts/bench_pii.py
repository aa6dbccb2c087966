"""The pii bench: mill-pii and datatrove's PIIFormatter on the same documents, one core.

    python3 scripts/bench_pii.py DOCS KERNEL_BENCH [--repeat K]

DOCS: a JSONL file, or a Parquet file or folder of document shards (the output of any
step). The texts are written once to a JSONL file that every run reads.
- Whole stage: `mill-pii --threads 1` as a child process (CPU time: user + system) on
  datatrove's scope (e-mails and public IPv4), on its defaults and with every kind on,
  beside datatrove's JsonlReader -> PIIFormatter -> ParquetWriter run by its
  LocalPipelineExecutor in this process (CPU time of run(), imports excluded).
- Kernel: the criterion bench KERNEL_BENCH (`cargo bench -p pii`'s binary) on the same
  texts beside PIIFormatter.format() alone over them.
Prints a table: CPU µs per document, ratio, replacements by kind.
Needs: datatrove==0.10.1, pyarrow (scripts/requirements-bench.txt)."""
import json
import os
import pathlib
import resource
import subprocess
import sys
import tempfile
import time

from datatrove.pipeline.formatters import PIIFormatter

ROOT = pathlib.Path(__file__).resolve().parent.parent


def texts(path):
    p = pathlib.Path(path)
    if p.suffix == ".jsonl":
        for line in p.read_text(encoding="utf-8").splitlines():
            if line.strip():
                d = json.loads(line)
                yield d.get("id", ""), d["text"]
        return
    import pyarrow.parquet as pq
    files = [p] if p.is_file() else sorted(
        f for f in p.rglob("*.parquet") if not any(part.startswith(("_", ".")) for part in f.relative_to(p).parts))
    for f in files:
        for row in pq.read_table(f, columns=["id", "text"]).to_pylist():
            yield row["id"], row["text"]


def child_cpu():
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def run_ours(binary, corpus, config, work, name):
    out = os.path.join(work, name)
    conf = os.path.join(work, name + ".toml")
    pathlib.Path(conf).write_text(config)
    before = child_cpu()
    subprocess.run([binary, "--input", corpus, "--output", out, "--config", conf, "--threads", "1",
                    "--log-format", "json"], check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    seconds = child_cpu() - before
    marker = json.loads(next(pathlib.Path(out, "_done").glob("*.json")).read_text())
    return seconds, marker["stats"].get("counts", {})


def datatrove_stage(corpus, work, name):
    from datatrove.executor import LocalPipelineExecutor
    from datatrove.pipeline.readers import JsonlReader
    from datatrove.pipeline.writers import ParquetWriter
    from loguru import logger
    logger.remove()
    os.environ.setdefault("DATATROVE_COLORIZE_LOGS", "0")
    executor = LocalPipelineExecutor(
        pipeline=[JsonlReader(os.path.dirname(corpus), glob_pattern="docs.jsonl"), PIIFormatter(),
                  ParquetWriter(os.path.join(work, name))],
        tasks=1, workers=1, logging_dir=os.path.join(work, name + "-logs"))
    start = time.process_time()
    executor.run()
    return time.process_time() - start


def kernel(bench_binary, corpus):
    """µs per document of each criterion benchmark, from its report's middle estimate."""
    out = subprocess.run([bench_binary, "--bench"], env={**os.environ, "TOKENMILL_BENCH_PII_DOCS": corpus},
                         check=True, capture_output=True, text=True).stdout
    found, name = {}, None
    units = {"ns": 1e-3, "µs": 1.0, "us": 1.0, "ms": 1e3, "s": 1e6}
    for line in out.splitlines():
        if line.startswith("pii/"):
            name = line[4:].split("time:")[0].strip()
        if "time:" in line and name:
            value, unit = line.split("[")[1].split()[2:4]
            found[name] = float(value) * units[unit]
            name = None
    return found


def main():
    src = sys.argv[1]
    bench_binary = sys.argv[2]
    repeat = int(sys.argv[sys.argv.index("--repeat") + 1]) if "--repeat" in sys.argv else 3
    binary = str(ROOT / "target/release/mill-pii")
    docs = list(texts(src))
    with tempfile.TemporaryDirectory() as work:
        corpus = os.path.join(work, "docs.jsonl")
        with open(corpus, "w", encoding="utf-8") as f:
            for i, (doc_id, text) in enumerate(docs):
                f.write(json.dumps({"id": doc_id or f"d{i}", "text": text}, ensure_ascii=False) + "\n")
        mb = os.path.getsize(corpus) / 1e6
        # datatrove: one formatter, format() only; best of `repeat`.
        formatter = PIIFormatter()
        theirs, changed = [], 0
        for _ in range(repeat):
            start = time.process_time()
            for _, text in docs:
                formatter.format(text)
            theirs.append(time.process_time() - start)
        changed = sum(1 for _, t in docs if PIIFormatter().format(t) != t)
        stage = min(datatrove_stage(corpus, work, f"dt-{k}") for k in range(repeat))
        kern = kernel(bench_binary, corpus)
        rows = []
        for name, config in [("no kind (reading and writing only)", "emails = false\nobfuscated_emails = false\n"
                              "ipv4 = false\nipv6 = false\nphones = false\n"),
                             ("datatrove scope", "obfuscated_emails = false\nipv6 = false\nphones = false\n"
                              "ipv4_word_boundaries = false\n"),
                             ("defaults", ""),
                             ("every kind", "credit_cards = true\nibans = true\n")]:
            runs = [run_ours(binary, corpus, config, work, f"run{len(rows)}-{k}") for k in range(repeat)]
            rows.append((name, min(r[0] for r in runs), runs[0][1]))
    n = len(docs)
    best = min(theirs)
    print(f"{n} documents, {mb:.1f} MB of JSONL; datatrove changed {changed} documents")
    print("| run | CPU µs/doc | × datatrove | replacements |")
    print("| --- | ---: | ---: | --- |")
    print(f"| datatrove JsonlReader -> PIIFormatter -> ParquetWriter | {stage / n * 1e6:.1f} | 1.0 | |")
    for name, seconds, counts in rows:
        kinds = ", ".join(f"{k[4:]} {v}" for k, v in sorted(counts.items())) or "none"
        print(f"| mill-pii --threads 1, {name} | {seconds / n * 1e6:.1f} | {stage / seconds:.1f} | {kinds} |")
    print(f"| datatrove PIIFormatter.format() alone | {best / n * 1e6:.1f} | 1.0 | |")
    io = rows[0][1]
    for name, seconds, _ in rows[1:]:
        extra = max(seconds - io, 1e-9)
        print(f"| mill-pii, {name}, minus reading and writing (its cost fused in a step) "
              f"| {extra / n * 1e6:.1f} | {best / extra:.1f} | |")
    for name, total_us in sorted(kern.items()):
        print(f"| Pii::redact alone (criterion), {name} | {total_us / n:.1f} | {best * 1e6 / total_us:.1f} | |")


if __name__ == "__main__":
    main()
