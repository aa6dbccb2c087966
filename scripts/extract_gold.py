"""Extraction quality against text written by people (WCXB-style ground truth).

extract_gold.py unpack ARCHIVE_OR_DIR CACHE        -> prints the data folder (with html/, ground-truth/)
extract_gold.py warc DATA OUT.warc.gz              pack the pages as a WARC (one gzip member per record)
extract_gold.py reference DATA TOOL OUT.jsonl [--jobs N]
    TOOL: trafilatura (defaults), trafilatura-fineweb (datatrove's settings, as FineWeb
    ran it), resiliparse. Writes {"id", "text", "cpu_ms"} per page.
extract_gold.py sets NAME=SCORES.json...             the sets' tables side by side
extract_gold.py titles DATA OURS                    mill-extract's `title` column against each
    page's og:title and <title> (read from its HTML): how often it is empty, equal to one
    of them, or neither (with examples)
extract_gold.py score DATA --run NAME=PATH [--run ...] [--worst 20] [--json OUT]
    PATH: a JSONL file of {"id", "text"[, "cpu_ms"]} or a folder of mill-extract Parquet
    output (pages are matched by WARC-Record-ID <urn:page:ID>); "NAME=PATH@SECONDS"
    gives the CPU seconds of a whole run (mill-extract is timed as one process).

DATA is a folder with html/<id>.html and either ground-truth/<id>.json (WCXB's layout:
`ground_truth.main_content`, `with`, `without`, `_internal.page_type.primary`) or
gold/<id>.txt (Dragnet's layout: the main text pasted by hand, readers' comments after a
`!@#$%^&*() COMMENTS` line, which are not main content; every page is of type
`news/blog`, without snippets or URLs). Only pages whose gold text is not empty are
scored.

The score is the benchmark's own: bag of lowercased word tokens per page (the `\\w+`
runs; each Han/Kana/Hangul/Thai character a token), precision, recall and F1 as
multisets, averaged over pages. An empty extraction scores 0. Snippets: the share of
`with` snippets found in the text (lowercased, whitespace folded) and the share of
`without` snippets found there.
"""
import argparse
import gzip
import io
import json
import os
import re
import subprocess
import sys
import tarfile
import time
from collections import Counter, defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from extract_compare import TOKEN  # noqa: E402  one tokenizer for both benches


def words(text):
    return Counter(TOKEN.findall((text or "").lower()))


def page_ids(data):
    return sorted(p.stem for p in (Path(data) / "html").glob("*.html"))


# Dragnet's line between an article and its readers' comments (spacing varies).
COMMENTS_MARK = re.compile(r"^\s*!@#\$%\^&\*\(\)\s*COMMENTS\s*$", re.M)


def gold_folder(folder):
    return (folder / "ground-truth").is_dir() or (folder / "gold").is_dir()


def load_gold(data):
    gold = {}
    if (Path(data) / "gold").is_dir():
        for pid in page_ids(data):
            path = Path(data) / "gold" / f"{pid}.txt"
            if not path.exists():
                continue
            text = COMMENTS_MARK.split(path.read_text(encoding="utf-8", errors="replace"))[0]
            if text.strip():
                gold[pid] = {"text": text, "type": "news/blog", "url": "", "with": [], "without": []}
        return gold
    for pid in page_ids(data):
        path = Path(data) / "ground-truth" / f"{pid}.json"
        if not path.exists():
            continue
        d = json.loads(path.read_text())
        g = d.get("ground_truth") or {}
        text = g.get("main_content") or ""
        if not text.strip():
            continue
        gold[pid] = {
            "text": text,
            "type": ((d.get("_internal") or {}).get("page_type") or {}).get("primary", "unknown"),
            "url": d.get("url") or "",
            "with": g.get("with") or [],
            "without": g.get("without") or [],
        }
    return gold


def cmd_unpack(args):
    src = Path(args.source)
    if src.is_dir():
        found = next((p.parent for p in src.rglob("html") if p.is_dir() and gold_folder(p.parent)), None)
        print(found or src)
        return
    cache = Path(args.cache)
    # One cache folder per archive: the bench unpacks several sets.
    cache = cache / src.name.split(".")[0]
    marker = cache / ".unpacked"
    if not marker.exists() or marker.read_text() != f"{src.stat().st_size}":
        cache.mkdir(parents=True, exist_ok=True)
        subprocess.run(["tar", "-I", "zstd", "-xf", str(src), "-C", str(cache)], check=True)
        marker.write_text(f"{src.stat().st_size}")
    found = next(p.parent for p in sorted(cache.rglob("html")) if gold_folder(p.parent))
    print(found)


def warc_record(pid, url, body):
    http = b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Length: %d\r\n\r\n" % len(body) + body
    head = (
        "WARC/1.0\r\n"
        "WARC-Type: response\r\n"
        f"WARC-Record-ID: <urn:page:{pid}>\r\n"
        "WARC-Date: 2026-01-01T00:00:00Z\r\n"
        f"WARC-Target-URI: {url}\r\n"
        "Content-Type: application/http; msgtype=response\r\n"
        f"Content-Length: {len(http)}\r\n\r\n"
    ).encode()
    return gzip.compress(head + http + b"\r\n\r\n", mtime=0)


def cmd_warc(args):
    gold = load_gold(args.data)
    with open(args.out, "wb") as out:
        for pid in page_ids(args.data):
            body = (Path(args.data) / "html" / f"{pid}.html").read_bytes()
            url = (gold.get(pid) or {}).get("url") or f"https://page.invalid/{pid}"
            out.write(warc_record(pid, url, body))


def _extractor(tool):
    if tool == "resiliparse":
        from resiliparse.extract.html2text import extract_plain_text
        from resiliparse.parse.html import HTMLTree

        return lambda b: extract_plain_text(HTMLTree.parse_from_bytes(b), main_content=True)
    import trafilatura

    if tool == "trafilatura":
        return lambda b: trafilatura.extract(b) or ""
    if tool == "trafilatura-fineweb":
        # datatrove's Trafilatura(favour_precision=True) as FineWeb ran it.
        return lambda b: trafilatura.extract(
            b, favor_precision=True, include_comments=False, deduplicate=True
        ) or ""
    raise SystemExit(f"unknown tool {tool}")


def _reference_chunk(job):
    tool, data, ids = job
    run = _extractor(tool)
    rows = []
    for pid in ids:
        body = (Path(data) / "html" / f"{pid}.html").read_bytes()
        start = time.process_time()
        try:
            text, error = run(body), None
        except Exception as e:  # a reference tool failing on a page scores it as empty
            text, error = "", f"{type(e).__name__}: {e}"
        ms = (time.process_time() - start) * 1000
        rows.append({"id": pid, "text": text, "cpu_ms": ms, "error": error})
    return rows


def cmd_reference(args):
    ids = page_ids(args.data)
    jobs = max(1, args.jobs)
    chunks = [(args.tool, args.data, ids[k::jobs]) for k in range(jobs)]
    if jobs == 1:
        results = [_reference_chunk(chunks[0])]
    else:
        from multiprocessing import Pool

        with Pool(jobs) as pool:
            results = pool.map(_reference_chunk, chunks)
    rows = sorted((r for chunk in results for r in chunk), key=lambda r: r["id"])
    tmp = args.out + ".tmp"
    with open(tmp, "w") as f:
        for r in rows:
            f.write(json.dumps(r, ensure_ascii=False) + "\n")
    os.replace(tmp, args.out)


def read_run(path):
    """{id: text}, and the summed per-page CPU ms when the file has them."""
    p = Path(path)
    texts, cpu = {}, None
    if p.is_dir():
        import pyarrow.parquet as pq

        for f in sorted(p.rglob("*.parquet")):
            if any(part.startswith(("_", ".")) for part in f.relative_to(p).parts):
                continue
            t = pq.read_table(f, columns=["id", "text"])
            for i, text in zip(t.column("id").to_pylist(), t.column("text").to_pylist()):
                texts[i.removeprefix("<urn:page:").removesuffix(">")] = text or ""
        return texts, cpu
    cpu = 0.0
    with open(p) as f:
        for line in f:
            if line.strip():
                r = json.loads(line)
                texts[r["id"]] = r.get("text") or ""
                cpu = cpu + r["cpu_ms"] if cpu is not None and "cpu_ms" in r else None
    return texts, cpu


def fold(s):
    return " ".join(s.lower().split())


def page_score(text, gold):
    a, b = words(text), words(gold["text"])
    na, nb = sum(a.values()), sum(b.values())
    common = sum((a & b).values())
    if na == 0 or nb == 0 or common == 0:
        p = r = f1 = 0.0
    else:
        p, r = common / na, common / nb
        f1 = 2 * p * r / (p + r)
    folded = fold(text)
    with_hit = [fold(s) in folded for s in gold["with"] if s.strip()]
    without_hit = [fold(s) in folded for s in gold["without"] if s.strip()]
    return {
        "f1": f1, "p": p, "r": r, "empty": na == 0,
        "with": with_hit, "without": without_hit, "missing": b - a, "extra": a - b,
    }


def cause(text, gold, s):
    """One line on why a page scored low."""
    if s["empty"]:
        return "empty output"
    if s["r"] < 0.5 and s["r"] <= s["p"]:
        missed = [w for w, hit in zip([x for x in gold["with"] if x.strip()], s["with"]) if not hit]
        what = f'; missed e.g. "{fold(missed[0])[:60]}"' if missed else ""
        return f"main text missed: recall {s['r']:.2f} ({sum(words(text).values())} words out, {sum(words(gold['text']).values())} in gold){what}"
    found = [w for w, hit in zip([x for x in gold["without"] if x.strip()], s["without"]) if hit]
    top = " ".join(w for w, _ in s["extra"].most_common(6))
    what = f'; kept "{fold(found[0])[:50]}"' if found else f"; extra words: {top}"
    return f"boilerplate kept: precision {s['p']:.2f} ({sum(s['extra'].values())} extra words){what}"


def mean(xs):
    return sum(xs) / len(xs) if xs else 0.0


def cmd_score(args):
    gold = load_gold(args.data)
    runs = []
    for spec in args.run:
        name, _, path = spec.partition("=")
        seconds = None
        if "@" in path:
            path, _, sec = path.rpartition("@")
            seconds = float(sec)
        texts, cpu_ms = read_run(path)
        if seconds is not None:
            cpu_ms = seconds * 1000
        runs.append((name, texts, cpu_ms))
    types = sorted({g["type"] for g in gold.values()})
    table, per_page = [], {}
    for name, texts, cpu_ms in runs:
        scores = {pid: page_score(texts.get(pid, ""), g) for pid, g in gold.items()}
        per_page[name] = scores
        row = {"name": name, "pages": len(scores)}
        for key in ("f1", "p", "r"):
            row[key] = mean([s[key] for s in scores.values()])
        for t in types:
            row[t] = mean([s["f1"] for pid, s in scores.items() if gold[pid]["type"] == t])
        row["empty"] = mean([1.0 if s["empty"] else 0.0 for s in scores.values()])
        row["with"] = mean([h for s in scores.values() for h in s["with"]])
        row["without"] = mean([h for s in scores.values() for h in s["without"]])
        row["ms"] = cpu_ms / len(texts) if cpu_ms is not None and texts else None
        table.append(row)
    counts = Counter(g["type"] for g in gold.values())
    print(f"{len(gold)} pages with gold text; word F1 (bag of lowercased words), mean over pages")
    head = ["extractor", "F1", "P", "R"] + [f"{t} ({counts[t]})" for t in types] + ["empty", "with", "without", "CPU ms/page"]
    print("| " + " | ".join(head) + " |")
    print("| --- " + "| ---: " * (len(head) - 1) + "|")
    for row in table:
        cells = [row["name"]] + [f"{row[k]:.3f}" for k in ["f1", "p", "r"] + types]
        cells += [f"{100 * row['empty']:.1f}%", f"{100 * row['with']:.1f}%", f"{100 * row['without']:.1f}%"]
        cells.append(f"{row['ms']:.2f}" if row["ms"] is not None else "-")
        print("| " + " | ".join(cells) + " |")
    first = table[0]
    for row in table[1:]:
        if row["ms"] and first["ms"]:
            print(f"{first['name']} is {row['ms'] / first['ms']:.1f}x faster per core than {row['name']}")
    if args.worst and runs:
        name, texts, _ = runs[0]
        scores = per_page[name]
        worst = sorted(scores, key=lambda pid: (scores[pid]["f1"], pid))[: args.worst]
        print(f"\n{len(worst)} worst pages of {name}:")
        for pid in worst:
            s = scores[pid]
            print(f"  {pid} {gold[pid]['type']:<13} F1 {s['f1']:.2f}  {gold[pid]['url'][:70]}\n      {cause(texts.get(pid, ''), gold[pid], s)}")
    if args.json:
        out = {"table": table, "pages": {
            name: {pid: {k: s[k] for k in ("f1", "p", "r", "empty")} | {"type": gold[pid]["type"]} for pid, s in scores.items()}
            for name, scores in per_page.items()}}
        Path(args.json).write_text(json.dumps(out))


def _page_titles(body):
    """The page's og:title and <title>, entities decoded and whitespace folded."""
    import html as htmllib

    text = body.decode("utf-8", errors="replace")
    head = text[: 1 << 20]
    fold_ws = lambda t: " ".join(htmllib.unescape(t).split()) if t else ""
    og = ""
    for tag in re.findall(r"<meta\b[^>]*>", head, flags=re.I):
        if re.search(r"""(?:property|name)\s*=\s*["']?og:title\b""", tag, flags=re.I):
            m = re.search(r"""content\s*=\s*(?:"([^"]*)"|'([^']*)')""", tag, flags=re.I | re.S)
            if m:
                og = fold_ws(m.group(1) if m.group(1) is not None else m.group(2))
                break
    m = re.search(r"<title\b[^>]*>(.*?)</title>", head, flags=re.I | re.S)
    return og, fold_ws(m.group(1)) if m else ""


def cmd_titles(args):
    import pyarrow.parquet as pq

    ours = {}
    for f in sorted(Path(args.ours).rglob("*.parquet")):
        if any(part.startswith(("_", ".")) for part in f.relative_to(args.ours).parts):
            continue
        t = pq.read_table(f, columns=["id", "title"])
        for i, title in zip(t.column("id").to_pylist(), t.column("title").to_pylist()):
            ours[i.removeprefix("<urn:page:").removesuffix(">")] = title or ""
    counts = Counter()
    differ = []
    for pid in page_ids(args.data):
        if pid not in ours:
            continue
        og, title = _page_titles((Path(args.data) / "html" / f"{pid}.html").read_bytes())
        got = ours[pid]
        counts["pages"] += 1
        counts["page has og:title"] += bool(og)
        counts["page has <title>"] += bool(title)
        if not got:
            counts["empty"] += 1
            if og or title:
                counts["empty, though the page has one"] += 1
        elif got == og:
            counts["= og:title"] += 1
        elif got == title:
            counts["= <title>"] += 1
        else:
            counts["neither (the first <h1>, or a difference)"] += 1
            differ.append((pid, got, og or title))
    n = max(counts["pages"], 1)
    for key in ["pages", "page has og:title", "page has <title>", "= og:title", "= <title>",
                "neither (the first <h1>, or a difference)", "empty", "empty, though the page has one"]:
        print(f"  {key:<44}{counts[key]:>6}  {100 * counts[key] / n:5.1f}%")
    for pid, got, want in differ[:5]:
        print(f"  e.g. {pid}: {got[:60]!r} / page: {want[:60]!r}")


def cmd_sets(args):
    print("| set | pages | extractor | P | R | F1 | empty | CPU ms/page | mill-extract faster |")
    print("| --- | ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: |")
    for spec in args.scores:
        name, _, path = spec.partition("=")
        table = json.loads(Path(path).read_text())["table"]
        ours = table[0]["ms"]
        for row in table:
            ms = f"{row['ms']:.2f}" if row["ms"] is not None else "-"
            ratio = f"{row['ms'] / ours:.1f}x" if row["ms"] and ours and row is not table[0] else ""
            print(f"| {name} | {row['pages']} | {row['name']} | {row['p']:.3f} | {row['r']:.3f} | {row['f1']:.3f} "
                  f"| {100 * row['empty']:.1f}% | {ms} | {ratio} |")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    a = sub.add_parser("unpack")
    a.add_argument("source")
    a.add_argument("cache")
    a = sub.add_parser("warc")
    a.add_argument("data")
    a.add_argument("out")
    a = sub.add_parser("reference")
    a.add_argument("data")
    a.add_argument("tool", choices=["trafilatura", "trafilatura-fineweb", "resiliparse"])
    a.add_argument("out")
    a.add_argument("--jobs", type=int, default=1)
    a = sub.add_parser("titles")
    a.add_argument("data")
    a.add_argument("ours")
    a = sub.add_parser("sets")
    a.add_argument("scores", nargs="+")
    a = sub.add_parser("score")
    a.add_argument("data")
    a.add_argument("--run", action="append", default=[])
    a.add_argument("--worst", type=int, default=20)
    a.add_argument("--json")
    args = ap.parse_args()
    {"unpack": cmd_unpack, "warc": cmd_warc, "reference": cmd_reference, "score": cmd_score,
     "sets": cmd_sets, "titles": cmd_titles}[args.cmd](args)


if __name__ == "__main__":
    main()
