"""Real-text corpus for the tokenizer stage's training and encoding benchmarks: the plain
text of Debian documentation in many languages, and source code from Debian packages
that ship it, as gzipped JSON lines.

build OUT_DIR [--max-bytes N] [--doc-share F]
  Documents ("doc"): every HTML page of the documentation packages of
  scripts/extract_corpus.py (its .deb cache under .cache/debs/ and its language rules,
  without its page caps) and of DOC_EXTRA, turned into plain text by resiliparse's
  extract_plain_text(html, main_content=True).
  Code ("code"): the text files of CODE_PACKAGES whose name is in CODE_LANGS (UTF-8
  only, no NUL, at most 1 MiB), read from the unpacked .deb or from the source archive
  inside it (the kernel tarball of linux-source, OpenJDK's src.zip).
  Blank texts and exact repeats of an earlier text are left out.
  Budget, in bytes of UTF-8 text: the docs get up to --doc-share of --max-bytes and the
  code the rest, so the code fills in when the docs give less. Within a kind the budget
  is split evenly over the packages (one that has less than its share gives all it has,
  and the others share what it leaves); a package gives its texts in the order of a
  salted hash of their id, so what is picked is independent of where it is written.
  Layout:
    OUT_DIR/docs/part-00000.jsonl.gz, ...  about 64 MiB of text each, one JSON object
        a line: {"id": "<package>/<path>", "text", "source": package, "kind": "doc" or
        "code", "lang": page locale (de, pt-br, zh-tw, ...) or code language}
      All texts sorted by the sha1 of their id, which interleaves sources, kinds and
      languages, so any prefix of the shards is a fair sample.
    OUT_DIR/corpus.json  the build parameters and counts (texts and bytes per kind,
      source and language, and what each source had), written last; a build with the
      same parameters is skipped.
  Needs apt-get and dpkg-deb (Debian or Ubuntu) with a fresh `apt-get update`, and
  resiliparse (scripts/requirements-bench.txt).
"""
import argparse
import fnmatch
import gzip
import hashlib
import json
import os
import shutil
import sys
import tarfile
import tempfile
import time
import zipfile
from collections import Counter, defaultdict
from pathlib import Path

import extract_corpus as ec
from resiliparse.extract.html2text import extract_plain_text
from resiliparse.parse.encoding import bytes_to_str, detect_encoding

FORMAT = 1  # bump when the output layout or the text extraction changes
SHARD_BYTES = 64 << 20
MAX_FILE_BYTES = 1 << 20
# Texts are written in sha1(id) order but picked in sha1(PICK_SALT + id) order: were
# both the same, a source cut short would fill only the front of the shards.
PICK_SALT = b"tokenmill-text-corpus/pick/"

# Documentation packages beyond extract_corpus.PACKAGES, as (package, language) with
# the same language convention: a code, or "path" for several translations side by side.
# libreoffice-help-en-gb is left out (libreoffice-help-en-us with a few spellings
# changed), and so is -sk (bookworm's package holds no pages).
DOC_EXTRA = (
    [(f"libreoffice-help-{l}", l) for l in
     "ca cs da dz el et eu fi gl hi hu id km nl om pl pt pt-br sl sv tr vi".split()]
    + [
        ("gnucash-docs", "path"),  # guide and help in de en it ja pt (<html lang>)
        ("debian-history", "path"),  # detailed.<lang>.html in 10 languages
        ("octave-doc", "en"),
        ("maxima-doc", "en"),
    ]
)

# Packages that ship source code, as (package, archive): the files are read from the
# archive inside the .deb that matches the pattern, or from the .deb itself when None.
CODE_PACKAGES = (
    ("linux-source-6.1", "usr/src/linux-source-*.tar.xz"),
    ("openjdk-17-source", "usr/lib/jvm/*/lib/src.zip"),
    ("rust-src", None),
    ("golang-1.19-src", None),
    ("libpython3.11-minimal", None),
    ("libpython3.11-stdlib", None),
    ("libpython3.11-testsuite", None),
    ("perl-modules-5.36", None),
)

# The code files taken: extension (case matters: .S is preprocessed assembly) or whole
# file name -> language.
CODE_LANGS = {
    "c": "c", "h": "c", "cc": "c++", "cpp": "c++", "cxx": "c++", "hh": "c++", "hpp": "c++",
    "S": "assembly", "s": "assembly", "rs": "rust", "go": "go", "java": "java",
    "py": "python", "pl": "perl", "pm": "perl", "pod": "pod", "t": "perl", "rb": "ruby",
    "js": "javascript", "ts": "typescript", "sh": "shell", "awk": "awk", "lua": "lua",
    "md": "markdown", "rst": "rst", "txt": "text", "toml": "toml", "yaml": "yaml", "yml": "yaml",
    "Makefile": "make", "Kbuild": "make", "Kconfig": "kconfig",
}


def code_lang(name):
    base = name.rsplit("/", 1)[-1]
    if base in CODE_LANGS:
        return CODE_LANGS[base]
    ext = base.rsplit(".", 1)[-1] if "." in base[1:] else None
    return CODE_LANGS.get(ext)


def html_text(html):
    """Main-content plain text of an HTML page, decoded by its <meta charset> if it has
    one, else by resiliparse's guess."""
    m = ec.META_CHARSET.search(html[:32768])
    charset = m.group(1).decode("ascii", "replace") if m else detect_encoding(html)
    try:
        page = bytes_to_str(html, charset)
    except LookupError:  # a charset name Python does not know
        page = bytes_to_str(html, detect_encoding(html))
    return extract_plain_text(page, main_content=True)


def doc_texts(package, lang, root):
    """(path, locale, text) for each HTML page of an unpacked documentation package."""
    for _, page in ec.collect(package, root):
        html = ec.read_page(page["path"])
        tagged = ec.page_language(lang, page["rel"], html[:32768])
        yield page["rel"], tagged[1] if tagged else lang, html_text(html)


def code_texts(root, archive):
    """(path, language, text) for each code file of an unpacked package, or of the
    archive in it that matches `archive`; None as the text for a file that is not
    UTF-8 text."""
    files = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames.sort()
        files += [Path(dirpath) / n for n in sorted(filenames)]
    for path in files:
        rel = path.relative_to(root).as_posix()
        if path.is_symlink() or not path.is_file():
            continue
        if archive is None:
            lang = code_lang(rel)
            if lang and path.stat().st_size <= MAX_FILE_BYTES:
                yield rel, lang, utf8_text(path.read_bytes())
        elif fnmatch.fnmatch(rel, archive):
            yield from archive_texts(path, rel)


def archive_texts(path, rel):
    """code_texts' triples for the members of a zip or (compressed) tar file."""
    if path.suffix == ".zip":
        with zipfile.ZipFile(path) as z:
            for info in z.infolist():
                lang = code_lang(info.filename)
                if lang and not info.is_dir() and info.file_size <= MAX_FILE_BYTES:
                    yield f"{rel}/{info.filename}", lang, utf8_text(z.read(info))
    else:
        with tarfile.open(path, "r|*") as tar:  # streamed: members in archive order
            for member in tar:
                lang = code_lang(member.name)
                if lang and member.isfile() and member.size <= MAX_FILE_BYTES:
                    yield f"{rel}/{member.name}", lang, utf8_text(tar.extractfile(member).read())


def utf8_text(data):
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return None
    return None if "\0" in text else text


class Spool:
    """The texts of one source, appended to a scratch file and read back by offset."""

    def __init__(self, path):
        self.path = path
        self.file = open(path, "w+b")

    def add(self, data):
        offset = self.file.seek(0, os.SEEK_END)
        self.file.write(data)
        return offset

    def read(self, offset, length):
        self.file.seek(offset)
        return self.file.read(length)


def fair_shares(sizes, budget):
    """Split budget over the sources in `sizes` (source -> bytes available) evenly, a
    source never getting more than it has."""
    shares, left = {}, budget
    order = sorted(sizes, key=lambda s: (sizes[s], s))
    for i, source in enumerate(order):
        shares[source] = min(sizes[source], left / (len(order) - i))
        left -= shares[source]
    return shares


def pick(entries, shares):
    """The entries of each source, in pick-key order, until the source's share is met."""
    taken, chosen = Counter(), []
    for entry in sorted(entries, key=lambda e: e[1]):
        source, length = entry[3], entry[-1]
        if taken[source] < shares[source]:
            taken[source] += length
            chosen.append(entry)
    return chosen


def build(out_dir, max_bytes, doc_share):
    started = time.time()
    out_dir = Path(out_dir)
    doc_packages = [(name, lang) for name, _, lang in ec.PACKAGES] + DOC_EXTRA
    params = {
        "format": FORMAT, "max_bytes": max_bytes, "doc_share": doc_share,
        "doc_packages": doc_packages, "code_packages": CODE_PACKAGES, "code_langs": CODE_LANGS,
        "max_file_bytes": MAX_FILE_BYTES, "shard_bytes": SHARD_BYTES,
    }
    params = json.loads(json.dumps(params))
    stamp = out_dir / "corpus.json"
    if stamp.exists():
        done = json.loads(stamp.read_text())
        if done.get("params") == params and all((out_dir / "docs" / f).exists() for f in done["files"]):
            print(f"{out_dir}: already built ({done['texts']} texts, {done['bytes']} bytes)", file=sys.stderr)
            return
    debs = ec.fetch([name for name, _ in doc_packages] + [name for name, _ in CODE_PACKAGES])
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "corpus.json").unlink(missing_ok=True)

    # Pass 1: every text of every source, spooled to disk; entries hold what sorting
    # and picking need: (sha1 of id: the output order, sha1 of salt + id: the pick
    # order within a source, id, source, kind, lang, spool offset, length).
    sources = [(name, "doc", lang) for name, lang in doc_packages if name in debs]
    sources += [(name, "code", archive) for name, archive in CODE_PACKAGES if name in debs]
    seen = set()  # sha1 of every text kept, to drop exact repeats
    entries = {"doc": [], "code": []}
    spools, had = {}, {}
    scratch = Path(tempfile.mkdtemp(dir=out_dir, prefix=".scratch-"))
    try:
        for name, kind, arg in sources:
            t0 = time.time()
            spool = spools[name] = Spool(scratch / f"{len(spools)}.txt")
            counts = Counter(texts=0, bytes=0)
            root = scratch / "unpacked"
            ec.unpack(debs[name], root)
            texts = doc_texts(name, arg, root) if kind == "doc" else code_texts(root, arg)
            for rel, lang, text in texts:
                if text is None:
                    counts["not_text"] += 1
                    continue
                if not text.strip():
                    counts["blank"] += 1
                    continue
                data = text.encode("utf-8")
                digest = hashlib.sha1(data).digest()
                if digest in seen:
                    counts["repeats"] += 1
                    continue
                seen.add(digest)
                tid = f"{name}/{rel}"
                key = hashlib.sha1(tid.encode("utf-8")).hexdigest()
                pick_key = hashlib.sha1(PICK_SALT + tid.encode("utf-8")).hexdigest()
                entries[kind].append((key, pick_key, tid, name, kind, lang, spool.add(data), len(data)))
                counts["texts"] += 1
                counts["bytes"] += len(data)
            shutil.rmtree(root)
            had[name] = {"kind": kind, **counts}
            left_out = ", ".join(f"{n} {k}" for k, n in counts.items() if k not in ("texts", "bytes"))
            print(f"{name}: {counts['texts']} texts, {counts['bytes'] / 1e6:.1f} MB "
                  f"({time.time() - t0:.0f}s){'; left out: ' + left_out if left_out else ''}",
                  file=sys.stderr, flush=True)

        # Pass 2: pick within the budgets and write every pick in id-hash order.
        chosen, budget = [], max_bytes * doc_share
        for kind in ("doc", "code"):
            sizes = {name: had[name]["bytes"] for name, k, _ in sources if k == kind}
            picked = pick(entries[kind], fair_shares(sizes, budget))
            chosen += picked
            budget = max_bytes - sum(e[-1] for e in picked)
        chosen.sort()

        staging = out_dir / ".docs.part"
        shutil.rmtree(staging, ignore_errors=True)
        staging.mkdir()
        files, shard, shard_bytes = [], None, 0
        by_source, by_kind, by_lang = defaultdict(Counter), defaultdict(Counter), defaultdict(Counter)
        for _, _, tid, name, kind, lang, offset, length in chosen:
            if shard is None or shard_bytes >= SHARD_BYTES:
                if shard:
                    shard.close()
                files.append(f"part-{len(files):05d}.jsonl.gz")
                shard = gzip.GzipFile(staging / files[-1], "wb", compresslevel=6, mtime=0)
                shard_bytes = 0
            text = spools[name].read(offset, length).decode("utf-8")
            record = {"id": tid, "text": text, "source": name, "kind": kind, "lang": lang}
            shard.write((json.dumps(record, ensure_ascii=False) + "\n").encode("utf-8"))
            shard_bytes += length
            for counter in (by_source[name], by_kind[kind], by_lang[f"{kind}:{lang}"]):
                counter["texts"] += 1
                counter["bytes"] += length
        if shard:
            shard.close()
    finally:
        for spool in spools.values():
            spool.file.close()
        shutil.rmtree(scratch, ignore_errors=True)
    shutil.rmtree(out_dir / "docs", ignore_errors=True)
    staging.rename(out_dir / "docs")

    total = sum(c["bytes"] for c in by_kind.values())
    summary = {
        "params": params, "texts": len(chosen), "bytes": total, "files": files,
        "kinds": {k: dict(by_kind[k]) for k in ("doc", "code")},
        "sources": {name: dict(by_source[name]) for name, _, _ in sources if name in by_source},
        "languages": {l: dict(c) for l, c in sorted(by_lang.items(), key=lambda x: -x[1]["bytes"])},
        "available": had,  # per source, before the budget: texts, bytes, and what was left out
        "debs": {n: p.name for n, p in sorted(debs.items())},
    }
    stamp.write_text(json.dumps(summary, indent=1) + "\n")
    print(f"{len(chosen)} texts, {total / 1e6:.0f} MB of text in {len(files)} shards "
          f"({time.time() - started:.0f}s)", file=sys.stderr)
    for kind in ("doc", "code"):
        c = by_kind[kind]
        print(f"  {kind}: {c['texts']} texts, {c['bytes'] / 1e6:.0f} MB ({c['bytes'] / max(total, 1):.0%})",
              file=sys.stderr)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    b = sub.add_parser("build")
    b.add_argument("out_dir")
    b.add_argument("--max-bytes", type=float, default=1.1e9, help="bytes of UTF-8 text in all (default 1.1e9)")
    b.add_argument("--doc-share", type=float, default=0.6,
                   help="share of --max-bytes the docs may take; the code gets the rest (default 0.6)")
    args = ap.parse_args()
    build(args.out_dir, int(args.max_bytes), args.doc_share)


if __name__ == "__main__":
    main()
