"""Bench corpus for mill-extract: real HTML from Debian documentation packages, written
as Common-Crawl-style WARC files.

build OUT_DIR [--max-pages N] [--per-package-max N]
  Fetches the documentation packages below with `apt-get download` (the .deb files are
  cached under .cache/debs/), unpacks them with `dpkg-deb -x` and writes every HTML page
  as a WARC/1.0 response record, preceded by its request record, after one warcinfo
  record per file. One gzip member per record, about 1000 pages or 50 MB per file:
    OUT_DIR/warc/corpus-00000.warc.gz, ...
    OUT_DIR/manifest.jsonl   {"id", "url", "lang", "locale", "package", "bytes",
                              "charset", "warc", "offset", "length"} per page
                              (offset/length: the request+response gzip members)
    OUT_DIR/corpus.json      the build parameters and counts, written last; a build
                              with the same parameters is skipped.
  Pages are ordered by record id (a uuid5 of package and path), which interleaves the
  packages and languages the way a crawl segment does, so any prefix of the corpus is a
  fair sample. Over the caps, pages are kept by the same hash order: deterministic.
  Pages over 1 MiB (where Common Crawl truncates) are left out.
  Needs apt-get and dpkg-deb (Debian or Ubuntu) and a fresh `apt-get update`.
"""
import argparse
import base64
import gzip
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from collections import Counter
from pathlib import Path
from urllib.parse import quote

ROOT = Path(__file__).resolve().parent.parent
DEB_CACHE = ROOT / ".cache/debs"
FORMAT = 2  # bump when the record layout changes, so old corpora get rebuilt
HOST = "docs.example.debian"
NAMESPACE = uuid.UUID("6f1c3a52-7f0e-4c55-9d39-2b8e3f5f4a10")
RECORDS_PER_FILE = 1000
BYTES_PER_FILE = 50 << 20
MAX_PAGE_BYTES = 1 << 20  # Common Crawl truncates payloads at 1 MiB; larger pages are left out

# (package, cap on pages taken from it or None, language). The language is a code for
# one-language packages, or "path" for packages that hold several translations side by
# side (html/de-DE/..., zh_CN/..., live-manual.ja.html); there a page without a
# language in its path takes its <html lang> attribute, else English. Debian bookworm
# names; a package the archive does not have is reported and skipped.
def _each(prefix, langs, cap=None):
    return [(f"{prefix}-{l}", cap, l) for l in langs.split()]


PACKAGES = (
    # Debian's own manuals, in every translation the archive ships.
    _each("debian-reference", "de en es fr id it ja pt pt-br zh-cn zh-tw")
    + [("debian-faq", None, "en")]
    + _each("debian-faq", "de fr it ja ko nl pt ru zh-cn")
    + [("maint-guide", None, "en")]
    + _each("maint-guide", "ca de es fr it ja ru vi zh-cn zh-tw")
    + [("developers-reference", None, "en")]
    + _each("developers-reference", "de fr it ja ru")
    + [
        ("debian-handbook", None, "path"),  # 26 languages, Arabic and Persian (right to left) among them
        ("installation-guide-amd64", None, "path"),  # 19 languages
        ("harden-doc", None, "path"),
        ("live-manual-html", None, "path"),
        ("debian-policy", None, "en"),
    ]
    # Software manuals: Sphinx, DocBook, texinfo, generated and hand-written HTML.
    + [
        ("python3.11-doc", None, "en"),
        ("postgresql-doc-15", None, "en"),
        ("cppreference-doc-en-html", 2000, "en"),
        ("erlang-doc", None, "en"),
        ("docbook-xsl-doc-html", None, "en"),  # ISO-8859-1
        ("focalinux-html", None, "pt"),  # ISO-8859-1
        ("exim4-doc-html", None, "en"),
        ("c++-annotations-html", None, "en"),
        ("lilypond-doc-html", None, "en"),
    ]
    + _each("lilypond-doc-html", "de es fr ja zh")
    # LibreOffice help: many small pages per language.
    + _each("libreoffice-help", "de en-us es fr it ja ko ru zh-cn zh-tw", cap=1400)
)

LANGS = set(
    "ar bg ca cs da de el en es et eu fa fi fr gl he hi hr hu id it ja km ko lt lv nb nl "
    "nn no pl pt ro ru sk sl sr sv th tr uk vi zh".split()
)
LANG_TAG = re.compile(r"^([a-z]{2})(?:[-_]([a-z]{2}|[a-z]{4}))?$", re.I)
PAGE_NAME = re.compile(r"\.(x?html?)(\.gz)?$")
META_CHARSET = re.compile(rb"""<meta[^>]+charset\s*=\s*["']?\s*([A-Za-z0-9._:-]+)""", re.I)
HTML_LANG = re.compile(rb"""<html\b[^>]*?\s(?:xml:)?lang\s*=\s*["']?([A-Za-z_-]+)""", re.I)


def tag(text):
    """'zh_CN' -> ('zh', 'zh-cn'); None when it is not a language tag we know."""
    m = LANG_TAG.match(text or "")
    if not m or m.group(1).lower() not in LANGS:
        return None
    return m.group(1).lower(), text.lower().replace("_", "-")


def page_language(lang, rel, head):
    """(language, locale) of a page of a package whose PACKAGES language is `lang`."""
    if lang != "path":
        return tag(lang)
    parts = rel.split("/")
    dotted = parts[-1].split(".")
    candidates = parts[:-1] + ([dotted[-2]] if len(dotted) > 2 else [])  # live-manual.de.html
    for part in reversed(candidates):
        if tag(part):
            return tag(part)
    m = HTML_LANG.search(head)
    if m and tag(m.group(1).decode()):
        return tag(m.group(1).decode())
    return "en", "en"


def fetch(packages):
    """Path of each package's .deb, downloading the ones not cached yet."""
    DEB_CACHE.mkdir(parents=True, exist_ok=True)
    debs, missing = {}, []
    for name in packages:
        cached = sorted(DEB_CACHE.glob(f"{name}_*.deb"))
        if cached:
            debs[name] = cached[-1]
        else:
            missing.append(name)
    available = []
    for name in missing:
        shown = subprocess.run(["apt-cache", "show", "--no-all-versions", name], capture_output=True, text=True)
        if shown.returncode == 0 and shown.stdout.strip():
            available.append(name)
        else:
            print(f"skipping {name}: not in this release's archive (or run apt-get update)", file=sys.stderr)
    if available:
        with tempfile.TemporaryDirectory() as tmp:
            print(f"downloading {len(available)} packages", file=sys.stderr)
            subprocess.run(
                ["apt-get", "download", "-q", "-o", "APT::Sandbox::User=root", *available],
                cwd=tmp, check=True, stdout=subprocess.DEVNULL,
            )
            for deb in sorted(Path(tmp).glob("*.deb")):
                shutil.move(str(deb), DEB_CACHE / deb.name)
        for name in available:
            cached = sorted(DEB_CACHE.glob(f"{name}_*.deb"))
            if not cached:
                raise SystemExit(f"apt-get download left no .deb for {name}")
            debs[name] = cached[-1]
    return debs


def unpack(deb, dest):
    """Unpack the files of a .deb under dest (which may not exist yet)."""
    Path(dest).mkdir(parents=True, exist_ok=True)
    subprocess.run(["dpkg-deb", "-x", str(deb), str(dest)], check=True)


def read_page(path):
    data = path.read_bytes()
    return gzip.decompress(data) if path.name.endswith(".gz") else data


def collect(package, root):
    """(record id, page dict) for each HTML file (not link, not empty, at most 1 MiB)
    the package ships."""
    pages = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames.sort()
        for name in sorted(filenames):
            path = Path(dirpath) / name
            if not PAGE_NAME.search(name) or path.is_symlink() or not path.is_file():
                continue
            size = len(read_page(path)) if name.endswith(".gz") else path.stat().st_size
            if size == 0 or size > MAX_PAGE_BYTES:
                continue
            rel = path.relative_to(root).as_posix()
            rid = f"<urn:uuid:{uuid.uuid5(NAMESPACE, package + '/' + rel)}>"
            pages.append((rid, {"package": package, "rel": rel, "path": path}))
    return pages


def capped(pages, cap):
    """The first `cap` pages in record-id (hash) order."""
    pages = sorted(pages, key=lambda p: p[0])
    return pages if cap is None else pages[:cap]


def sha1_b32(data):
    return "sha1:" + base64.b32encode(hashlib.sha1(data).digest()).decode()


def record(headers, block):
    head = "WARC/1.0\r\n" + "".join(f"{k}: {v}\r\n" for k, v in headers)
    head += f"Content-Length: {len(block)}\r\n\r\n"
    return gzip.compress(head.encode() + block + b"\r\n\r\n", compresslevel=6, mtime=0)


def warc_date(ts):
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(ts))


class WarcWriter:
    def __init__(self, folder, date):
        self.folder, self.date = folder, date
        self.index, self.out, self.records = -1, None, 0

    def _roll(self):
        if self.out:
            self.out.close()
        self.index += 1
        self.name = f"corpus-{self.index:05d}.warc.gz"
        self.out = open(self.folder / self.name, "wb")
        self.records, self.offset = 0, 0
        self.info_id = f"<urn:uuid:{uuid.uuid5(NAMESPACE, 'warcinfo/' + self.name)}>"
        fields = (
            "software: tokenmill scripts/extract_corpus.py\r\n"
            "format: WARC File Format 1.0\r\n"
            "description: HTML pages of Debian documentation packages, served as a made-up site\r\n"
            f"isPartOf: tokenmill-extract-bench\r\n"
        ).encode()
        self._write(record([
            ("WARC-Type", "warcinfo"), ("WARC-Date", self.date), ("WARC-Filename", self.name),
            ("WARC-Record-ID", self.info_id), ("Content-Type", "application/warc-fields"),
        ], fields))

    def _write(self, data):
        self.out.write(data)
        self.offset += len(data)

    def page(self, rid, url, date, html, charset):
        if self.out is None or self.records >= RECORDS_PER_FILE or self.offset >= BYTES_PER_FILE:
            self._roll()
        start = self.offset
        req_id = f"<urn:uuid:{uuid.uuid5(NAMESPACE, 'request/' + rid)}>"
        path = url.split(HOST, 1)[1]
        request = (
            f"GET {path} HTTP/1.1\r\nHost: {HOST}\r\nUser-Agent: tokenmill-bench/1.0\r\n"
            "Accept: text/html,application/xhtml+xml\r\nAccept-Encoding: identity\r\n\r\n"
        ).encode()
        self._write(record([
            ("WARC-Type", "request"), ("WARC-Date", date), ("WARC-Record-ID", req_id),
            ("Content-Type", "application/http; msgtype=request"), ("WARC-Warcinfo-ID", self.info_id),
            ("WARC-Target-URI", url), ("WARC-Block-Digest", sha1_b32(request)),
        ], request))
        ctype = f"text/html; charset={charset}" if charset else "text/html"
        block = f"HTTP/1.1 200 OK\r\nContent-Type: {ctype}\r\nContent-Length: {len(html)}\r\n\r\n".encode() + html
        self._write(record([
            ("WARC-Type", "response"), ("WARC-Date", date), ("WARC-Record-ID", rid),
            ("Content-Type", "application/http; msgtype=response"), ("WARC-Warcinfo-ID", self.info_id),
            ("WARC-Concurrent-To", req_id), ("WARC-Target-URI", url),
            ("WARC-Payload-Digest", sha1_b32(html)), ("WARC-Block-Digest", sha1_b32(block)),
            ("WARC-Identified-Payload-Type", "text/html"),
        ], block))
        self.records += 1
        return self.name, start, self.offset - start

    def close(self):
        if self.out:
            self.out.close()


def build(out_dir, max_pages, per_package_max):
    out_dir = Path(out_dir)
    names = [name for name, _, _ in PACKAGES]
    lang_of = {name: lang for name, _, lang in PACKAGES}
    params = {"format": FORMAT, "max_pages": max_pages, "per_package_max": per_package_max, "packages": PACKAGES}
    params = json.loads(json.dumps(params))
    stamp = out_dir / "corpus.json"
    if stamp.exists():
        done = json.loads(stamp.read_text())
        if done.get("params") == params and all((out_dir / "warc" / f).exists() for f in done["files"]):
            print(f"{out_dir}: already built ({done['pages']} pages)", file=sys.stderr)
            return
    debs = fetch(names)
    out_dir.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=out_dir, prefix=".unpack-") as tmp:
        pages = []
        for name, cap, _ in PACKAGES:
            if name not in debs:
                continue
            root = Path(tmp) / name
            unpack(debs[name], root)
            caps = [x for x in (cap, per_package_max) if x is not None]
            pages += capped(collect(name, root), min(caps) if caps else None)
        pages = capped(pages, max_pages)  # sorted by record id

        staging = out_dir / ".warc.part"
        shutil.rmtree(staging, ignore_errors=True)
        staging.mkdir()
        langs, packages, total_html, skipped = Counter(), Counter(), 0, Counter()
        writer = None
        with open(out_dir / "manifest.jsonl.part", "w") as manifest:
            for rid, page in pages:
                html = read_page(page["path"])
                if not html.strip():
                    skipped["blank"] += 1
                    continue
                head = html[:32768]
                m = META_CHARSET.search(head)
                charset = m.group(1).decode().lower() if m else None
                lang, locale = page_language(lang_of[page["package"]], page["rel"], head)
                rel = re.sub(r"^usr/share/", "", page["rel"])
                rel = re.sub(r"\.gz$", "", rel)
                url = f"https://{HOST}/{page['package']}/{quote(rel, safe='/-._~')}"
                date = warc_date(page["path"].stat().st_mtime)
                if writer is None:
                    writer = WarcWriter(staging, date)
                warc, offset, length = writer.page(rid, url, date, html, charset)
                manifest.write(json.dumps({
                    "id": rid, "url": url, "lang": lang, "locale": locale, "package": page["package"],
                    "bytes": len(html), "charset": charset, "warc": warc, "offset": offset, "length": length,
                }, ensure_ascii=False) + "\n")
                langs[lang] += 1
                packages[page["package"]] += 1
                total_html += len(html)
        if writer:
            writer.close()
    shutil.rmtree(out_dir / "warc", ignore_errors=True)
    staging.rename(out_dir / "warc")
    os.replace(out_dir / "manifest.jsonl.part", out_dir / "manifest.jsonl")
    files = sorted(p.name for p in (out_dir / "warc").glob("*.warc.gz"))
    warc_bytes = sum((out_dir / "warc" / f).stat().st_size for f in files)
    summary = {
        "params": params, "pages": sum(langs.values()), "html_bytes": total_html, "warc_bytes": warc_bytes,
        "files": files, "languages": dict(langs.most_common()), "packages": dict(sorted(packages.items())),
        "debs": {n: p.name for n, p in sorted(debs.items())}, "skipped": dict(skipped),
    }
    stamp.write_text(json.dumps(summary, indent=1) + "\n")
    print(f"{summary['pages']} pages, {len(langs)} languages, {len(files)} WARC files, "
          f"{total_html / 1e6:.0f} MB HTML, {warc_bytes / 1e6:.0f} MB WARC", file=sys.stderr)
    print("pages per language: " + ", ".join(f"{l} {n}" for l, n in langs.most_common()), file=sys.stderr)
    if skipped:
        print(f"skipped: {dict(skipped)}", file=sys.stderr)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    b = sub.add_parser("build")
    b.add_argument("out_dir")
    b.add_argument("--max-pages", type=int, default=30000)
    b.add_argument("--per-package-max", type=int, default=None,
                   help="cap on the pages of any one package (on top of the caps in PACKAGES)")
    args = ap.parse_args()
    build(args.out_dir, args.max_pages, args.per_package_max)


if __name__ == "__main__":
    main()
