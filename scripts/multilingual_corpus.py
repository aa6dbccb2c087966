#!/usr/bin/env python3
"""Build a small multilingual corpus of real human-written text from Debian 12 packages.

Usage: scripts/multilingual_corpus.py OUT_DIR

Writes OUT_DIR/<label>.jsonl for 12 FineWeb-2 labels (cmn_Hani, jpn_Jpan, tha_Thai,
kor_Hang, rus_Cyrl, arb_Arab, hin_Deva, fas_Arab, tur_Latn, vie_Latn, deu_Latn,
fra_Latn), one JSON object per line:
  {"id": "<label>-<n>", "text": ..., "language": "cmn", "language_script": "Hani",
   "source": "<package>:<file inside it>"}

Python 3.11 standard library only.  Packages are fetched with `apt-get download`
into OUT_DIR/.cache/deb (skipped when a <pkg>_*.deb is already there) and unpacked
with `dpkg-deb -x` into OUT_DIR/.cache/x/<pkg>.  Needs a Debian 12 (bookworm) apt
configuration; root is not needed for `apt-get download`.

Extraction: HTML help, Mallard .page and DocBook XML have their tags stripped and
entities decoded (block elements become line breaks); manpages have roff macros and
escapes stripped; Firefox language packs (.ftl/.properties inside the .xpi) and, as
last resort, gettext .mo catalogues contribute their translated strings, one string
per line.  One document per file (a file over 30 KB is split into sections at line
boundaries, at most 20 per file); documents are kept when 300 B <= size <= 30 KB and
more than half of their letters are in the label's script (Latin-script languages
must also have a minimum share of language-specific letters, e.g. ä/ö/ü/ß for German).
Per label the sources are tried in stages, in order; later stages are only used
while fewer than 150 documents were found.  At most 400 documents per label: all
candidates in (stage, package, path) order, an evenly spaced subset if more.
Output is deterministic for a given package set.

Packages used (licence from usr/share/doc/<pkg>/copyright):
  cmn_Hani  manpages-zh (GFDL-1.2+ / GPL-2+, per page), debian-reference-zh-cn (GPL-2+),
            gimp-help-zh-cn (GFDL-NIV-1.2+, via gimp-help-common)
  jpn_Jpan  manpages-ja (each page under its original man page's DFSG-free licence),
            debian-reference-ja (GPL-2+)
  kor_Hang  libreoffice-help-ko (MPL-2.0), gimp-help-ko (GFDL-NIV-1.2+)
  rus_Cyrl  manpages-ru (GPL-3+), gimp-help-ru (GFDL-NIV-1.2+)
  deu_Latn  manpages-de (GPL-3+)
  fra_Latn  manpages-fr (GPL-3+)
  tur_Latn  manpages-tr (GNU GPL for translations), libreoffice-help-tr (MPL-2.0)
  vie_Latn  manpages-vi (GPL-3+), maint-guide-vi (MIT), libreoffice-help-vi (MPL-2.0)
  tha_Thai  mate-user-guide th (GFDL-1.1+), firefox-esr-l10n-th (MPL-2.0)
  arb_Arab  mate-user-guide ar (GFDL-1.1+), firefox-esr-l10n-ar (MPL-2.0)
  fas_Arab  gnome-user-docs fa (CC-BY-SA-3.0), firefox-esr-l10n-fa (MPL-2.0)
  hin_Deva  libreoffice-help-hi (MPL-2.0), firefox-esr-l10n-hi-in (MPL-2.0)
The other /usr/share/help packages listed for th/ar/fa/hi (gedit-common, eog, anjuta-common,
mate-*-common, caja-actions-common, atril-common, simple-scan, modem-manager-gui-help,
xiphos-data, gbrainy) are downloaded and tried but give 0 documents: their pages there are
untranslated English.  The .mo last resort (libreoffice-l10n-<lang>, MPL-2.0) is not reached
with Debian 12's packages: Firefox language packs already bring every hard language to 150.
(See the report printed at the end of a run for which stages were actually used.)
"""
import glob
import gzip
import html
import json
import os
import re
import struct
import subprocess
import sys
import zipfile
from html.parser import HTMLParser

MIN_BYTES, MAX_BYTES, MAX_DOCS, ENOUGH = 300, 30000, 400, 150
MAX_SECTIONS = 20

# ---------------------------------------------------------------- sources
# A source: (package, kind, regex on the path inside the package).
HELP = lambda pkg, lang: (pkg, "xml", rf"^usr/share/help/{lang}/.*\.(page|xml)$")
LO_HELP = lambda lang: (f"libreoffice-help-{lang}", "html", rf"^usr/share/libreoffice/help/{lang}/text/.*\.html$")
GIMP = lambda lang, d=None: (f"gimp-help-{lang}", "html", rf"^usr/share/gimp/2\.0/help/{d or lang}/.*\.html$")
FF = lambda loc: (f"firefox-esr-l10n-{loc}", "xpi", r"\.xpi$")
LO_MO = lambda lang: (f"libreoffice-l10n-{lang}", "mo", r"\.mo$")
MAN = lambda pkg, d: (pkg, "man", rf"^usr/share/man/{d}/man\w+/[^/]+$")


def help_stage(lang, pkgs):
    return [HELP(p, lang) for p in pkgs]


LABELS = {
    "cmn_Hani": [[MAN("manpages-zh", "zh_CN"),
                  ("debian-reference-zh-cn", "html", r"\.html$"), GIMP("zh-cn", "zh_CN")]],
    "jpn_Jpan": [[MAN("manpages-ja", "ja"),
                  ("debian-reference-ja", "html", r"\.html$")]],
    "kor_Hang": [[LO_HELP("ko"), GIMP("ko")]],
    "rus_Cyrl": [[MAN("manpages-ru", "ru"), GIMP("ru")]],
    "deu_Latn": [[MAN("manpages-de", "de")]],
    "fra_Latn": [[MAN("manpages-fr", "fr")]],
    "tur_Latn": [[MAN("manpages-tr", "tr"), LO_HELP("tr")]],
    "vie_Latn": [[MAN("manpages-vi", "vi"),
                  ("maint-guide-vi", "html", r"\.html$"), LO_HELP("vi")]],
    "tha_Thai": [help_stage("th", ["mate-user-guide", "gedit-common", "eog", "anjuta-common",
                                   "mate-applets-common", "caja-actions-common", "atril-common"]),
                 [FF("th")], [LO_MO("th")]],
    "arb_Arab": [help_stage("ar", ["mate-user-guide", "gedit-common", "eog", "simple-scan",
                                   "mate-applets-common", "caja-actions-common", "atril-common",
                                   "modem-manager-gui-help"]),
                 [FF("ar")], [LO_MO("ar")]],
    "fas_Arab": [help_stage("fa", ["gnome-user-docs", "mate-user-guide", "xiphos-data",
                                   "mate-applets-common", "caja-actions-common", "atril-common"]),
                 [FF("fa")], [LO_MO("fa")]],
    "hin_Deva": [help_stage("hi", ["gnome-user-docs", "mate-user-guide", "gbrainy",
                                   "mate-applets-common", "caja-actions-common", "atril-common"]),
                 [LO_HELP("hi")], [FF("hi-in")], [LO_MO("hi")]],
}

LO_NAV = {"LibreOffice 7.4 Help", "Module", "Contents", "Index 🔎︎", "Index"}
FALLBACK_ENC = {"cmn": "gb18030", "jpn": "euc_jp", "rus": "koi8_r", "kor": "euc_kr"}

# ---------------------------------------------------------------- scripts
RANGES = {
    "Hani": [(0x3400, 0x4DBF), (0x4E00, 0x9FFF), (0xF900, 0xFAFF), (0x20000, 0x2FFFF)],
    "Hang": [(0x1100, 0x11FF), (0x3130, 0x318F), (0xA960, 0xA97F), (0xAC00, 0xD7AF)],
    "Thai": [(0x0E00, 0x0E7F)],
    "Cyrl": [(0x0400, 0x052F)],
    "Arab": [(0x0600, 0x06FF), (0x0750, 0x077F), (0x08A0, 0x08FF), (0xFB50, 0xFDFF), (0xFE70, 0xFEFF)],
    "Deva": [(0x0900, 0x097F), (0xA8E0, 0xA8FF)],
    "Latn": [(0x41, 0x5A), (0x61, 0x7A), (0xC0, 0x24F), (0x1E00, 0x1EFF)],
}
RANGES["Jpan"] = RANGES["Hani"] + [(0x3040, 0x30FF), (0x31F0, 0x31FF), (0xFF66, 0xFF9F)]
# Language-specific letters for Latin-script languages, with a minimum share of letters.
SPECIFIC = {
    "deu": ("äöüßÄÖÜ", 0.003),
    "fra": ("éèêëàâçùûüîïôœÉÈÊÀÂÇÙÛÎÔŒ", 0.005),
    "tur": ("çğıöşüÇĞİÖŞÜ", 0.01),
    "vie": ("ăâđêôơưĂÂĐÊÔƠƯàảãáạằẳẵắặầẩẫấậèẻẽéẹềểễếệìỉĩíịòỏõóọồổỗốộờởỡớợùủũúụừửữứựỳỷỹýỵ", 0.05),
}


def in_script(c, ranges):
    o = ord(c)
    return any(a <= o <= b for a, b in ranges)


def script_ok(text, lang, script):
    letters = [c for c in text if c.isalpha()]
    if not letters:
        return False
    ranges = RANGES[script]
    n = sum(1 for c in letters if in_script(c, ranges))
    if n * 2 <= len(letters):
        return False
    if lang in SPECIFIC:
        chars, share = SPECIFIC[lang]
        k = sum(1 for c in letters if c in chars)
        return k >= share * len(letters)
    return True

# ---------------------------------------------------------------- markup


BLOCK = set("""p div br li tr h1 h2 h3 h4 h5 h6 td th title dt dd pre table ul ol dl
blockquote section article header footer nav caption figcaption hr
item list terms tree steps note listing example figure synopsis screen code_block
para simpara formalpara listitem entry row term varlistentry itemizedlist orderedlist
variablelist glossentry glossdef refsect1 refsect2 refsynopsisdiv refnamediv
subtitle desc quote comment cite media table thead tbody""".split())
SKIP = {"script", "style", "head", "info", "indexterm", "bookinfo", "articleinfo",
        "sectioninfo", "chapterinfo", "revhistory", "legalnotice", "credit", "license",
        "svg", "math", "noscript"}


class Stripper(HTMLParser):
    def __init__(self, skip_head=True):
        super().__init__(convert_charrefs=True)
        self.out, self.skip = [], 0
        self.skipset = SKIP if skip_head else SKIP - {"head"}

    def _tag(self, t):
        return t.rsplit(":", 1)[-1].lower()

    def handle_starttag(self, t, a):
        t = self._tag(t)
        if t in self.skipset:
            self.skip += 1
        elif t in BLOCK:
            self.out.append("\n")

    def handle_startendtag(self, t, a):
        t = self._tag(t)
        if t in BLOCK:
            self.out.append("\n")

    def handle_endtag(self, t):
        t = self._tag(t)
        if t in self.skipset:
            self.skip = max(0, self.skip - 1)
        elif t in BLOCK:
            self.out.append("\n")

    def handle_data(self, d):
        if not self.skip:
            self.out.append(d)


def tidy(text):
    lines = []
    for ln in text.replace("\r", "").split("\n"):
        ln = re.sub(r"[ \t\u00a0]+", " ", ln).strip()
        if ln:
            lines.append(ln)
    return "\n".join(lines)


def markup_text(raw, title_too=True):
    # XML entities that HTMLParser does not know (DocBook/Mallard) are few; drop unknown ones.
    p = Stripper()
    p.feed(raw)
    p.close()
    text = "".join(p.out)
    text = re.sub(r"&[A-Za-z][\w.-]*;", "", text)
    if title_too:
        m = re.search(r"<title[^>]*>(.*?)</title>", raw, re.S | re.I)
        if m and "<head" in raw.lower():
            t = html.unescape(re.sub(r"<[^>]+>", "", m.group(1))).strip()
            if t:
                text = t + "\n" + text
    return tidy(text)


# roff
ROFF_CHARS = {
    "em": "—", "en": "–", "hy": "-", "aq": "'", "lq": "“", "rq": "”", "oq": "‘", "cq": "’",
    "dq": '"', "bu": "•", "co": "©", "rg": "®", "tm": "™", "de": "°", "mu": "×", "di": "÷",
    "+-": "±", "<=": "≤", ">=": "≥", "!=": "≠", "->": "→", "<-": "←", "rA": "⇒", "lA": "⇐",
    "ti": "~", "ha": "^", "ga": "`", "ul": "_", "sl": "/", "rs": "\\", "ba": "|", "or": "|",
    "Fo": "«", "Fc": "»", "fo": "‹", "fc": "›", "sc": "§", "ps": "¶", "dg": "†", "ct": "¢",
    "Eu": "€", "eu": "€", "Po": "£", "Ye": "¥", "pl": "+", "mi": "−", "eq": "=", "sq": "□",
    "ss": "ß", ":a": "ä", ":o": "ö", ":u": "ü", ":A": "Ä", ":O": "Ö", ":U": "Ü", "'e": "é",
    "`e": "è", "^e": "ê", "'a": "á", "`a": "à", "^a": "â", ",c": "ç", "~n": "ñ", "lB": "[",
    "rB": "]", "lC": "{", "rC": "}", "at": "@", "sh": "#", "Do": "$", "cs": "¤", "OK": "✓",
    "ua": "↑", "da": "↓", "aa": "´", "a-": "¯", "r!": "¡", "r?": "¿",
}
STRINGS = {"lq": "“", "rq": "”", "R": "®", "Tm": "™", "Lq": "“", "Rq": "”", "(lq": "“", "(rq": "”"}


def _named(name):
    if name in ROFF_CHARS:
        return ROFF_CHARS[name]
    m = re.fullmatch(r"u([0-9A-Fa-f]{4,6})", name)
    if m:
        try:
            return chr(int(m.group(1), 16))
        except ValueError:
            return ""
    return ""


ESC = re.compile(r"""\\(?:
    (?P<f>f(?:\[[^\]]*\]|\(..|.))|
    (?P<s>s[-+]?(?:\d+|\(\d\d|\[[^\]]*\]|'[^']*'))|
    (?P<named>\(..|\[[^\]]*\])|
    (?P<str>\*(?:\(..|\[[^\]]*\]|.))|
    (?P<reg>n[-+]?(?:\(..|\[[^\]]*\]|.))|
    (?P<arg>[hvwlLxbHSoNzDRXYkZ]'[^']*')|
    (?P<one>[kYgzV](?:\(..|\[[^\]]*\]|.))|
    (?P<c>.))""", re.X)


def roff_escapes(s):
    def rep(m):
        if m.group("f") or m.group("s") or m.group("reg") or m.group("arg") or m.group("one"):
            return ""
        if m.group("named"):
            n = m.group("named")
            return _named(n[1:] if n.startswith("(") else n[1:-1])
        if m.group("str"):
            n = m.group("str")[1:]
            n = n[1:] if n.startswith("(") else n.strip("[]")
            return STRINGS.get(n, "")
        c = m.group("c")
        return {"-": "-", "e": "\\", "\\": "\\", " ": " ", "~": " ", "0": " ", "t": " ",
                "'": "´", "`": "`", ".": ".", "%": "", "&": "", "|": "", "^": "", "c": "",
                "/": "", ",": "", ")": "", "!": "", "{": "", "}": "", "a": "", "p": "",
                "E": "", "d": "", "u": "", "r": "", ":": ""}.get(c, c)
    return ESC.sub(rep, s)


def split_args(s):
    args, cur, q, i = [], "", False, 0
    while i < len(s):
        c = s[i]
        if c == '"':
            if q and i + 1 < len(s) and s[i + 1] == '"':
                cur += '"'
                i += 1
            else:
                q = not q
        elif c in " \t" and not q:
            if cur:
                args.append(cur)
            cur = ""
        else:
            cur += c
        i += 1
    if cur:
        args.append(cur)
    return args


BREAK_MACROS = {"PP", "LP", "P", "sp", "br", "HP", "RS", "RE", "IP", "TP", "TQ", "SH", "SS",
                "nf", "fi", "EX", "EE", "in", "ti", "bp", "ne", "Sh", "Ss", "Pp", "Bl", "El",
                "It", "Bd", "Ed", "Dl", "D1", "YS", "SY", "UE", "ME", "TE", "TS", "ce"}
TEXT_MACROS = {"B", "I", "SM", "SB", "BR", "BI", "IB", "IR", "RB", "RI", "SH", "SS", "IP",
               "TP", "UR", "MT", "Nm", "Nd", "Ar", "Fl", "Cm", "Pa", "Xr", "Em", "Sy", "Dv",
               "Ev", "Li", "Ql", "Dq", "Sq", "Op", "It", "Sh", "Ss", "Va", "Fn", "Ft", "Fa",
               "Er", "Ic", "Ad", "An", "Cd", "Lk", "Mt", "Ms", "Tn", "Ux", "No", "Ns", "Pq",
               "Aq", "Bq", "Brq", "D1", "Dl", "Ta", "OP", "SY", "UE", "ME", "Vb", "Ve"}

MDOC = set("""Ar Cm Fl Op Oo Oc Nm Pa Xr Em Sy Dv Ev Li Ql Dq Sq Pq Aq Bq Brq Ns No Va Fn
Fa Ft Er Ic Ad An Cd Lk Mt Ms Tn Ux Bx Nx Fx Ox Bsx At St Ta Xo Xc Ek Bk Ap Pf Sx Qq Do Dc
So Sc Po Pc Bo Bc Qo Qc Eo Ec Fo Fc Lb In Ot Vt Nd Sh Ss It D1 Dl""".split())


def man_text(raw):
    out, para, nofill = [], [], False
    in_tbl, tbl_fmt = False, False
    skip_until = None

    def flush():
        if para:
            out.append(" ".join(para))
            para.clear()

    raw = raw.replace("\r", "")
    lines = raw.split("\n")
    i = 0
    while i < len(lines):
        ln = lines[i]
        i += 1
        while ln.endswith("\\") and not ln.endswith("\\\\") and i < len(lines):
            ln = ln[:-1] + lines[i]
            i += 1
        if skip_until is not None:
            if ln.strip().startswith(skip_until):
                skip_until = None
            continue
        # comments
        if re.match(r"^[.']\s*\\\"", ln) or ln.startswith('\\"') or ln.startswith(".\\#"):
            continue
        ln = re.sub(r'\\".*$', "", ln)
        ln = re.sub(r"\\#.*$", "", ln)
        if in_tbl:
            if ln.startswith(".TE"):
                in_tbl = False
                flush()
                continue
            if tbl_fmt:
                if ln.rstrip().endswith("."):
                    tbl_fmt = False
                continue
            if ln.startswith((".", "'")) and not ln.startswith((".T&",)):
                m = re.match(r"^[.']\s*(\S+)\s*(.*)$", ln)
                if m and m.group(1) in ("T&",):
                    tbl_fmt = True
                continue
            t = roff_escapes(ln.replace("T{", "").replace("T}", "")).replace("\t", " ").strip()
            if t and not re.fullmatch(r"[_=]+", t):
                out.append(t)
            continue
        if ln.startswith((".", "'")):
            m = re.match(r"^[.']\s*(\S+)\s*(.*)$", ln)
            if not m:
                continue
            mac, rest = m.group(1), m.group(2)
            if mac in ("de", "de1", "am", "ig", "ds"):
                if mac == "ig":
                    skip_until = ".."
                elif mac != "ds":
                    skip_until = ".."
                continue
            if mac == "TS":
                flush()
                in_tbl, tbl_fmt = True, True
                # options line ends with ';'
                if i < len(lines) and lines[i].rstrip().endswith(";"):
                    i += 1
                continue
            if mac in ("EQ",):
                skip_until = ".EN"
                continue
            if mac == "nf" or mac == "EX":
                flush()
                nofill = True
                continue
            if mac == "fi" or mac == "EE":
                flush()
                nofill = False
                continue
            if mac in BREAK_MACROS:
                flush()
            if mac in TEXT_MACROS and rest:
                args = split_args(rest)
                if mac in ("IP", "TQ"):
                    args = args[:1]
                    if args and args[0] in ("\\(bu", "\\(em", "-", "*", "o"):
                        args = ["•"]
                if mac in ("UR", "MT"):
                    args = []
                if mac in MDOC:
                    if mac == "Xr" and len(args) >= 2:
                        args = [f"{args[0]}({args[1]})"] + args[2:]
                    args = [a for a in args if a not in MDOC]
                joiner = "" if mac in ("BR", "BI", "IB", "IR", "RB", "RI") else " "
                t = roff_escapes(joiner.join(args)).strip()
                if t:
                    if mac in ("SH", "SS", "Sh", "Ss"):
                        out.append(t)
                    elif nofill:
                        out.append(t)
                    else:
                        para.append(t)
                if mac == "TP":
                    pass
            continue
        t = roff_escapes(ln)
        if nofill:
            flush()
            if t.strip():
                out.append(t.rstrip())
        elif not t.strip():
            flush()
        else:
            para.append(t.strip())
    flush()
    return tidy("\n".join(out))


def ftl_text(raw):
    """Message values and attribute values of a Fluent file, one per line."""
    out, cur = [], None
    for ln in raw.split("\n"):
        if not ln.strip() or ln.lstrip().startswith("#"):
            continue
        m = re.match(r"^-?[A-Za-z][\w-]*\s*=\s*(.*)$", ln)
        m2 = re.match(r"^\s+\.[\w-]+\s*=\s*(.*)$", ln)
        if m or m2:
            if cur is not None:
                out.append(cur)
            cur = (m or m2).group(1)
        elif ln.startswith((" ", "\t")) and cur is not None:
            s = ln.strip()
            if s.startswith(("[", "*[", "}")) or s.startswith("{ $") and s.endswith("->"):
                # select-expression variant: keep its text
                s = re.sub(r"^\*?\[[^\]]*\]\s*", "", s)
            cur = (cur + " " + s).strip()
    if cur is not None:
        out.append(cur)
    res = []
    for v in out:
        v = re.sub(r"\{\s*-brand-[\w-]*\s*\}", "Firefox", v)
        v = re.sub(r"\{\s*-vendor-short-name\s*\}", "Mozilla", v)
        v = re.sub(r"\{[^{}]*\}", "", v)
        v = re.sub(r"\{.*?->", "", v)
        v = html.unescape(re.sub(r"<[^>]+>", "", v))
        v = re.sub(r"\s+", " ", v).strip(" }")
        if v and re.search(r"\w", v):
            res.append(v)
    return "\n".join(dict.fromkeys(res))


def properties_text(raw):
    res = []
    for ln in raw.split("\n"):
        if ln.lstrip().startswith(("#", "!")) or "=" not in ln:
            continue
        v = ln.split("=", 1)[1].strip()
        v = re.sub(r"\\u([0-9a-fA-F]{4})", lambda m: chr(int(m.group(1), 16)), v)
        v = re.sub(r"%(\d+\$)?[sdS]|#\d|\$\w+", "", v).replace("\\n", "\n")
        v = re.sub(r"\s+", " ", html.unescape(re.sub(r"<[^>]+>", "", v))).strip()
        if v and re.search(r"\w", v):
            res.append(v)
    return "\n".join(dict.fromkeys(res))


def mo_strings(data):
    """Translated strings of a gettext .mo file."""
    if len(data) < 28:
        return []
    magic = struct.unpack("<I", data[:4])[0]
    e = "<" if magic == 0x950412DE else ">"
    _, n, _, toff = struct.unpack(e + "4I", data[4:20])
    res = []
    for k in range(n):
        ln, off = struct.unpack(e + "2I", data[toff + 8 * k: toff + 8 * k + 8])
        s = data[off: off + ln].decode("utf-8", "replace")
        for part in s.split("\0"):
            if k == 0 and "Content-Type" in part:
                continue
            part = re.sub(r"<[^>]+>", "", part)
            part = re.sub(r"%(\d+\$)?[sdulfS]|\$\(?\w+\)?|%[A-Z]+%?|[~_&](?=\w)", "", part)
            part = re.sub(r"\s+", " ", part).strip()
            if part and re.search(r"\w\w", part):
                res.append(part)
    return res

# ---------------------------------------------------------------- packages


def run(cmd, cwd=None):
    subprocess.run(cmd, cwd=cwd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)


def unpack(cache, pkg):
    debdir, xdir = os.path.join(cache, "deb"), os.path.join(cache, "x", pkg)
    os.makedirs(debdir, exist_ok=True)
    debs = sorted(glob.glob(os.path.join(debdir, glob.escape(pkg) + "_*.deb")))
    if not debs:
        try:
            run(["apt-get", "download", pkg], cwd=debdir)
        except subprocess.CalledProcessError as e:
            print(f"  ! apt-get download {pkg} failed: {e.stderr.decode(errors='replace').strip()}",
                  file=sys.stderr)
            return None
        debs = sorted(glob.glob(os.path.join(debdir, glob.escape(pkg) + "_*.deb")))
        if not debs:
            return None
    done = os.path.join(xdir, ".unpacked")
    if not os.path.exists(done):
        os.makedirs(xdir, exist_ok=True)
        run(["dpkg-deb", "-x", debs[-1], xdir])
        open(done, "w").close()
    return xdir


def files_of(xdir, rx):
    res = []
    for dp, dn, fn in os.walk(xdir):
        dn.sort()
        for f in fn:
            p = os.path.join(dp, f)
            rel = os.path.relpath(p, xdir)
            if rel != ".unpacked" and re.search(rx, rel) and os.path.isfile(p) and not os.path.islink(p):
                res.append(rel)
    return sorted(res)


def decode(data, lang):
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        enc = FALLBACK_ENC.get(lang)
        if enc:
            try:
                return data.decode(enc)
            except UnicodeDecodeError:
                pass
        return data.decode("utf-8", "replace")


def sections(text):
    """Split text into pieces of at most MAX_BYTES at line boundaries."""
    if len(text.encode()) <= MAX_BYTES:
        return [text]
    out, cur, size = [], [], 0
    for ln in text.split("\n"):
        b = len(ln.encode()) + 1
        if b > MAX_BYTES:
            continue
        if size + b > MAX_BYTES and cur:
            out.append("\n".join(cur))
            cur, size = [], 0
        cur.append(ln)
        size += b
    if cur:
        out.append("\n".join(cur))
    return out[:MAX_SECTIONS]


def chunk_lines(lines, target=3000, limit=5000):
    out, cur, size = [], [], 0
    for s in lines:
        b = len(s.encode()) + 1
        if size + b > limit and cur:
            out.append("\n".join(cur))
            cur, size = [], 0
        cur.append(s)
        size += b
        if size >= target:
            out.append("\n".join(cur))
            cur, size = [], 0
    if cur:
        out.append("\n".join(cur))
    return out


def texts_of(xdir, rel, kind, lang):
    """Yield (source-path, text) pieces of one file."""
    path = os.path.join(xdir, rel)
    src = "/" + rel
    data = open(path, "rb").read()
    if rel.endswith(".gz"):
        try:
            data = gzip.decompress(data)
        except OSError:
            return
    if kind == "man":
        raw = decode(data, lang)
        if re.match(r"^\.so\s", raw.lstrip()):
            return
        yield src, man_text(raw)
    elif kind in ("html", "xml"):
        text = markup_text(decode(data, lang))
        if "/libreoffice/help/" in rel:
            text = text.split("\nHelp content debug info:")[0]
            text = "\n".join(ln for ln in text.split("\n") if ln not in LO_NAV)
        yield src, text
    elif kind == "xpi":
        with zipfile.ZipFile(path) as z:
            for name in sorted(z.namelist()):
                if name.endswith(".ftl"):
                    t = ftl_text(z.read(name).decode("utf-8", "replace"))
                elif name.endswith(".properties"):
                    t = properties_text(z.read(name).decode("utf-8", "replace"))
                else:
                    continue
                yield f"{src}!/{name}", t
    elif kind == "mo":
        strings = list(dict.fromkeys(mo_strings(data)))
        for n, t in enumerate(chunk_lines(strings)):
            yield f"{src}#{n + 1}", t


def collect(label, stages, cache):
    lang, script = label.split("_")
    docs, used = [], []
    for stage in stages:
        if len(docs) >= ENOUGH:
            break
        for pkg, kind, rx in stage:
            xdir = unpack(cache, pkg)
            if xdir is None:
                continue
            n0 = len(docs)
            for rel in files_of(xdir, rx):
                for src, text in texts_of(xdir, rel, kind, lang):
                    pieces = sections(text) if kind != "mo" else [text]
                    for k, piece in enumerate(pieces):
                        b = len(piece.encode())
                        if b < MIN_BYTES or b > MAX_BYTES or not script_ok(piece, lang, script):
                            continue
                        s = src if len(pieces) == 1 else f"{src}#section{k + 1}"
                        docs.append((f"{pkg}:{s}", piece))
            used.append((pkg, len(docs) - n0))
    if len(docs) > MAX_DOCS:
        step = len(docs) / MAX_DOCS
        docs = [docs[int(i * step)] for i in range(MAX_DOCS)]
    return docs, used


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__.split("\n\n")[1])
    out = sys.argv[1]
    cache = os.path.join(out, ".cache")
    os.makedirs(cache, exist_ok=True)
    only = os.environ.get("ML_LABELS", "").split(",") if os.environ.get("ML_LABELS") else None
    for label, stages in LABELS.items():
        if only and label not in only:
            continue
        lang, script = label.split("_")
        docs, used = collect(label, stages, cache)
        with open(os.path.join(out, label + ".jsonl"), "w", encoding="utf-8") as f:
            for n, (src, text) in enumerate(docs):
                f.write(json.dumps({"id": f"{label}-{n}", "text": text, "language": lang,
                                    "language_script": script, "source": src},
                                   ensure_ascii=False) + "\n")
        total = sum(len(t.encode()) for _, t in docs)
        flag = "" if len(docs) >= ENOUGH else "  (below 150)"
        print(f"{label}: {len(docs)} docs, {total} bytes; candidates per package: "
              + ", ".join(f"{p}={n}" for p, n in used) + flag, flush=True)


if __name__ == "__main__":
    main()
