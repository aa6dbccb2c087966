"""Reference extractors for the mill-extract bench (scripts/bench-extract.sh).

trafilatura WARC_DIR OUT.jsonl [--jobs N] [--timeout S] [--no-dedup]
  Main text of every HTML response record as datatrove's Trafilatura step gives it:
  the record decoded by datatrove's WarcReader code (UTF-8, else cchardet's guess), then
  datatrove's own Trafilatura.extract (trafilatura.extract(html, favor_precision=True,
  include_comments=False, deduplicate=True)) run in datatrove's ExtractorSandbox, which
  gives up on a page after `timeout` seconds (datatrove's default: 1). Writes
  {"id", "text"} per page, text "" where trafilatura returns nothing; pages it could not
  score carry "error": "timeout" | "crashed" | "undecodable" | the exception, and
  extract_compare.py leaves them out. trafilatura's deduplicate option keeps state
  across documents in the process (a paragraph seen too often is dropped); here it
  starts afresh with each WARC file, as if each file were one datatrove task, so the
  output does not depend on --jobs. --timeout 0 runs trafilatura in-process, no limit.

resiliparse WARC_DIR OUT.jsonl
  The same with resiliparse: fastwarc's ArchiveIterator, the HTTP charset or else
  detect_encoding(from_html_meta=True), bytes_to_str, and
  extract_plain_text(html, main_content=True) with its other options at their defaults.

speed WARC_DIR [--limit N] [--cpu C] [--only datatrove|resiliparse]
  Times, pinned to one core (C, default 0), (a) datatrove's pipeline WarcReader ->
  Trafilatura -> JsonlWriter, LocalPipelineExecutor(tasks=1, workers=1), on the first N
  pages (--limit; all by default), and (b) resiliparse as above, on all pages. Prints
  JSON: per tool pages, warc_bytes (the compressed bytes those pages take on disk),
  seconds (wall), cpu_seconds, pages_per_s and mb_per_s (wall).

table SPEED.json --pages N --warc-bytes B [--run NAME=SECONDS:THREADS ...]
  The bench table: each tool's pages/s and WARC MB/s per core and its ratio to datatrove.

Needs: pip install -r scripts/requirements-bench.txt
"""
import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def warc_files(warc_dir):
    root = Path(warc_dir)
    files = sorted(p for p in root.rglob("*") if p.is_file() and p.name.endswith((".warc.gz", ".warc")))
    if not files:
        raise SystemExit(f"no .warc.gz files under {warc_dir}")
    return files


def write_jsonl(path, rows):
    """Writes PATH.part, then renames it: an interrupted run leaves no PATH behind."""
    n = 0
    with open(f"{path}.part", "w") as out:
        for row in rows:
            out.write(json.dumps(row, ensure_ascii=False) + "\n")
            n += 1
    os.replace(f"{path}.part", path)
    return n


# --- trafilatura, as datatrove runs it ---------------------------------------------


def trafilatura_file(path, timeout, deduplicate=True):
    from datatrove.pipeline.extractors import Trafilatura
    from datatrove.pipeline.extractors.base import ExtractorSandbox
    from datatrove.pipeline.readers.warc import process_record
    from loguru import logger
    from warcio.archiveiterator import ArchiveIterator

    logger.disable("datatrove")  # the sandbox logs each start and stop
    step = Trafilatura(timeout=timeout or 1, deduplicate=deduplicate)  # datatrove's defaults otherwise
    if not timeout:
        from trafilatura.meta import reset_caches

        reset_caches()
    rows = []
    with open(path, "rb") as f, ExtractorSandbox(timeout=timeout or 1, warmup_text="") as sandbox:
        for record in ArchiveIterator(f):
            if record.rec_type != "response":
                continue
            data = process_record(record)
            if data is None:
                rows.append({"id": record.rec_headers["WARC-Record-ID"], "text": "", "error": "undecodable"})
                continue
            row = {"id": data["id"], "text": ""}
            try:
                if timeout:
                    text = sandbox.process_document(data["text"], step.extract)
                else:
                    text = step.extract(data["text"])
                row["text"] = text or ""
            except TimeoutError:
                row["error"] = "timeout"
            except EOFError:
                row["error"] = "crashed"
            except Exception as e:  # datatrove counts these as clean_error and drops the page
                row["error"] = f"{type(e).__name__}: {e}"
            rows.append(row)
    return rows


def cmd_trafilatura(args):
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    files = warc_files(args.warc_dir)
    start = time.perf_counter()
    results = {}
    with ProcessPoolExecutor(max_workers=args.jobs, mp_context=multiprocessing.get_context("fork")) as pool:
        futures = {pool.submit(trafilatura_file, str(f), args.timeout, not args.no_dedup): f for f in files}
        for i, fut in enumerate(futures):
            results[futures[fut]] = fut.result()
            print(f"trafilatura: {i + 1}/{len(files)} files, {time.perf_counter() - start:.0f} s", file=sys.stderr)
    rows = [row for f in files for row in results[f]]
    write_jsonl(args.out, rows)
    errors = {}
    for row in rows:
        if "error" in row:
            kind = row["error"].split(":")[0]
            errors[kind] = errors.get(kind, 0) + 1
    empty = sum(1 for row in rows if not row["text"] and "error" not in row)
    print(f"trafilatura: {len(rows)} pages, {empty} empty, errors {errors or 'none'} -> {args.out}", file=sys.stderr)


# --- resiliparse ---------------------------------------------------------------------


def resiliparse_pages(files, limit=None):
    """(record id, text) per HTML response record, the usual resiliparse way."""
    from fastwarc.warc import ArchiveIterator, WarcRecordType
    from resiliparse.extract.html2text import extract_plain_text
    from resiliparse.parse.encoding import bytes_to_str, detect_encoding, map_encoding_to_html5

    n = 0
    for path in files:
        with open(path, "rb") as f:
            for record in ArchiveIterator(f, record_types=WarcRecordType.response, parse_http=True):
                ctype = record.http_content_type
                if ctype and ctype not in ("text/html", "application/xhtml+xml"):
                    continue
                if limit is not None and n >= limit:
                    return
                body = record.reader.read()
                # The HTTP header's charset, else the <meta> one, else uchardet's guess
                # (uchardet alone takes some UTF-8 Korean pages for a Greek code page).
                charset = map_encoding_to_html5(record.http_charset) if record.http_charset else None
                html = bytes_to_str(body, charset or detect_encoding(body, from_html_meta=True))
                yield record.record_id, extract_plain_text(html, main_content=True)
                n += 1


def cmd_resiliparse(args):
    n = write_jsonl(args.out, ({"id": i, "text": t} for i, t in resiliparse_pages(warc_files(args.warc_dir))))
    print(f"resiliparse: {n} pages -> {args.out}", file=sys.stderr)


# --- speed ---------------------------------------------------------------------------


def prefix_bytes(files, pages):
    """Compressed bytes on disk of the WARC prefix holding the first `pages` HTML
    response records (and the records between them), and the page count there."""
    from fastwarc.warc import ArchiveIterator, WarcRecordType

    total, n = 0, 0
    for path in files:
        size = path.stat().st_size
        with open(path, "rb") as f:
            for record in ArchiveIterator(f, parse_http=False):
                if pages is not None and n >= pages:
                    return total + record.stream_pos, n
                if record.record_type == WarcRecordType.response:
                    n += 1
        total += size
    return total, n


def time_datatrove(warc_dir, limit):
    from datatrove.executor import LocalPipelineExecutor
    from datatrove.pipeline.extractors import Trafilatura
    from datatrove.pipeline.readers import WarcReader
    from datatrove.pipeline.writers import JsonlWriter

    with tempfile.TemporaryDirectory() as tmp:
        executor = LocalPipelineExecutor(
            pipeline=[
                WarcReader(str(warc_dir), glob_pattern="**/*.warc.gz", limit=limit if limit is not None else -1),
                Trafilatura(),
                JsonlWriter(f"{tmp}/out"),
            ],
            tasks=1,
            workers=1,
            logging_dir=f"{tmp}/logs",
        )
        start = time.perf_counter()
        stats = executor.run()
        wall = time.perf_counter() - start
        steps = json.loads(Path(f"{tmp}/logs/stats.json").read_text())
    pages = steps[0]["stats"]["documents"]["total"]
    extracted = steps[1]["stats"].get("extracted", 0)
    timeouts = steps[1]["stats"].get("timeout", 0)
    return {"pages": pages, "extracted": extracted, "timeouts": timeouts, "seconds": wall}


def time_resiliparse(warc_dir, limit):
    start = time.perf_counter()
    pages = sum(1 for _ in resiliparse_pages(warc_files(warc_dir), limit))
    return {"pages": pages, "seconds": time.perf_counter() - start}


def cmd_time(args):
    """Child of `speed`, already pinned to its core."""
    fn = {"datatrove": time_datatrove, "resiliparse": time_resiliparse}[args.tool]
    result = fn(args.warc_dir, args.limit)
    usage = [resource.getrusage(who) for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN)]
    result["cpu_seconds"] = sum(u.ru_utime + u.ru_stime for u in usage)
    print(json.dumps(result))


def cmd_speed(args):
    files = warc_files(args.warc_dir)
    tools = [args.only] if args.only else ["datatrove", "resiliparse"]
    out = {"cpu": args.cpu, "files": len(files)}
    for tool in tools:
        limit = args.limit if tool == "datatrove" else None
        print(f"speed: {tool} on core {args.cpu}" + (f", first {limit} pages" if limit else ""), file=sys.stderr)
        child = subprocess.run(
            [sys.executable, __file__, "_time", tool, str(args.warc_dir)] + (["--limit", str(limit)] if limit else []),
            preexec_fn=lambda: os.sched_setaffinity(0, {args.cpu}),
            capture_output=True, text=True,
        )
        if child.returncode != 0:
            sys.stderr.write(child.stderr[-4000:])
            raise SystemExit(f"speed: {tool} failed")
        result = json.loads(child.stdout.strip().splitlines()[-1])
        warc_bytes, _ = prefix_bytes(files, result["pages"] if limit else None)
        result["warc_bytes"] = warc_bytes
        result["pages_per_s"] = result["pages"] / result["seconds"]
        result["mb_per_s"] = warc_bytes / 1e6 / result["seconds"]
        out[tool] = result
    print(json.dumps(out, indent=1))


def cmd_table(args):
    speed = json.load(open(args.speed))
    rows = []
    for spec in args.run:
        name, rest = spec.split("=", 1)
        seconds, threads = rest.split(":") if ":" in rest else (rest, "1")
        seconds, threads = float(seconds), int(threads)
        rows.append((name, args.pages / seconds / threads, args.warc_bytes / 1e6 / seconds / threads))
    for tool, label in [("resiliparse", "resiliparse"), ("datatrove", "datatrove (trafilatura)")]:
        if tool in speed:
            rows.append((label, speed[tool]["pages_per_s"], speed[tool]["mb_per_s"]))
    base = speed["datatrove"]["pages_per_s"] if "datatrove" in speed else None
    print(f"{'tool':<28}{'pages/s/core':>14}{'WARC MB/s/core':>16}{'vs datatrove':>14}")
    for name, pps, mbs in rows:
        ratio = f"{pps / base:.1f}x" if base else "-"
        print(f"{name:<28}{pps:>14.1f}{mbs:>16.2f}{ratio:>14}")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("trafilatura")
    p.add_argument("warc_dir")
    p.add_argument("out")
    p.add_argument("--jobs", type=int, default=1, help="WARC files extracted at once")
    p.add_argument("--timeout", type=float, default=1.0, help="seconds per page (datatrove's default); 0: none")
    p.add_argument(
        "--no-dedup",
        action="store_true",
        help="deduplicate=False: each page on its own, without the paragraphs seen on earlier pages dropped",
    )
    p.set_defaults(fn=cmd_trafilatura)
    p = sub.add_parser("resiliparse")
    p.add_argument("warc_dir")
    p.add_argument("out")
    p.set_defaults(fn=cmd_resiliparse)
    p = sub.add_parser("speed")
    p.add_argument("warc_dir")
    p.add_argument("--limit", type=int, default=None, help="pages for the datatrove run (resiliparse runs on all)")
    p.add_argument("--cpu", type=int, default=0, help="the core both runs are pinned to")
    p.add_argument("--only", choices=["datatrove", "resiliparse"])
    p.set_defaults(fn=cmd_speed)
    p = sub.add_parser("_time")
    p.add_argument("tool", choices=["datatrove", "resiliparse"])
    p.add_argument("warc_dir")
    p.add_argument("--limit", type=int, default=None)
    p.set_defaults(fn=cmd_time)
    p = sub.add_parser("table")
    p.add_argument("speed")
    p.add_argument("--pages", type=int, required=True)
    p.add_argument("--warc-bytes", type=int, required=True)
    p.add_argument("--run", action="append", default=[], help="NAME=SECONDS:THREADS, one of our runs")
    p.set_defaults(fn=cmd_table)
    args = ap.parse_args()
    args.fn(args)


if __name__ == "__main__":
    main()
