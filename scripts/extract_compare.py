"""Word-level agreement of mill-extract's output with a reference extractor.

extract_compare.py REFERENCE.jsonl OURS_DIR MANIFEST.jsonl [--other NAME=FILE.jsonl ...]
                   [--worst 15] [--json OUT]

REFERENCE.jsonl: {"id", "text"[, "error"]} per page (scripts/extract_reference.py);
  pages with an "error" (a trafilatura timeout, say) are left out of every score.
OURS_DIR: Parquet files with columns id and text, read recursively; paths with a
  component starting with "_" or "." are skipped. A page missing there counts as
  empty text (the stage drops empty extractions).
MANIFEST.jsonl: {"id", "url", "lang", ...} per page (scripts/extract_corpus.py); it
  decides which pages are scored.
--other NAME=FILE.jsonl: another extractor's {"id", "text"} output, scored against the
  same reference (e.g. resiliparse vs trafilatura, as a yardstick).

Per page: tokens are the `\\w+` runs of the text (the `regex` module's \\w, which keeps
combining marks inside words), except that each Han, Hiragana, Katakana, Hangul or Thai
character is a token of its own. Both sides are compared as multisets:
precision = |ours & ref| / |ours|, recall = |ours & ref| / |ref|, F1 their harmonic
mean. Both empty: 1, 1, 1. One side empty: 0, 0, 0.
Prints, per language and overall, the mean F1, precision and recall, how many pages we
left empty where the reference has text and the other way round; then the pages with
the lowest F1 among those whose reference has at least 20 tokens.
"""
import argparse
import json
import sys
from collections import Counter, defaultdict
from pathlib import Path

import regex

SCRIPTS_PER_CHAR = (
    r"\p{Han}\p{Hiragana}\p{Katakana}\p{Hangul}\p{Thai}"
    r"\u3005\u30fc"  # 々 and ー, which belong to no one script but to CJK words
)
TOKEN = regex.compile(rf"[{SCRIPTS_PER_CHAR}]|[^\W{SCRIPTS_PER_CHAR}]+")


def tokens(text):
    return Counter(TOKEN.findall(text or ""))


def score(ours, ref):
    """(f1, precision, recall, ours tokens, ref tokens) of two texts."""
    a, b = tokens(ours), tokens(ref)
    na, nb = sum(a.values()), sum(b.values())
    if na == 0 and nb == 0:
        return 1.0, 1.0, 1.0, a, b
    if na == 0 or nb == 0:
        return 0.0, 0.0, 0.0, a, b
    common = sum((a & b).values())
    p, r = common / na, common / nb
    f1 = 2 * p * r / (p + r) if common else 0.0
    return f1, p, r, a, b


def read_jsonl(path):
    texts, errors = {}, set()
    with open(path) as f:
        for line in f:
            if line.strip():
                row = json.loads(line)
                if row.get("error"):
                    errors.add(row["id"])
                texts[row["id"]] = row.get("text") or ""
    return texts, errors


def read_parquet_dir(folder):
    import pyarrow.parquet as pq

    root = Path(folder)
    texts, files = {}, 0
    for path in sorted(root.rglob("*.parquet")):
        if any(part.startswith(("_", ".")) for part in path.relative_to(root).parts):
            continue
        table = pq.read_table(path, columns=["id", "text"])
        for i, t in zip(table.column("id").to_pylist(), table.column("text").to_pylist()):
            texts[i] = t or ""
        files += 1
    if files == 0:
        print(f"warning: no Parquet files under {folder}", file=sys.stderr)
    return texts


def evaluate(pages, ref, ours, keep_tokens=False):
    """Per-page scores of `ours` against `ref` over `pages` (manifest rows)."""
    rows = []
    for page in pages:
        r = ref[page["id"]]
        o = ours.get(page["id"], "")
        f1, p, rc, a, b = score(o, r)
        row = {"id": page["id"], "url": page.get("url"), "lang": page.get("lang", "?"), "f1": f1, "p": p, "r": rc,
               "ours_words": sum(a.values()), "ref_words": sum(b.values()), "missing_page": page["id"] not in ours}
        if keep_tokens:
            row["_a"], row["_b"] = a, b
        rows.append(row)
    return rows


def summarize(rows):
    groups = defaultdict(list)
    for row in rows:
        groups[row["lang"]].append(row)
    out = {}
    for lang, rs in sorted(groups.items(), key=lambda kv: (-len(kv[1]), kv[0])):
        out[lang] = stats(rs)
    out["all"] = stats(rows)
    # Pages where the reference gave nothing while the other side has text are scored
    # 0 above; trafilatura 1.11 gives nothing when it fails inside (e.g. a table cell
    # with colspan="" raises in its table handler), so the mean over the pages where it
    # produced text is shown too.
    out["all, ref has text"] = stats([r for r in rows if r["ref_words"] > 0 or r["ours_words"] == 0])
    return out


def stats(rs):
    n = len(rs)
    return {
        "pages": n,
        "f1": sum(r["f1"] for r in rs) / n if n else 0.0,
        "precision": sum(r["p"] for r in rs) / n if n else 0.0,
        "recall": sum(r["r"] for r in rs) / n if n else 0.0,
        "ours_empty": sum(1 for r in rs if r["ours_words"] == 0 and r["ref_words"] > 0),
        "ref_empty": sum(1 for r in rs if r["ref_words"] == 0 and r["ours_words"] > 0),
    }


def print_table(title, summary):
    print(title)
    print(f"{'lang':<8}{'pages':>7}{'F1':>8}{'P':>8}{'R':>8}{'we empty':>10}{'ref empty':>11}")
    for lang, s in summary.items():
        if lang == "all":
            print("-" * 60)
        if lang.startswith("all,"):
            lang = "all*"
        print(f"{lang:<8}{s['pages']:>7}{s['f1']:>8.3f}{s['precision']:>8.3f}{s['recall']:>8.3f}"
              f"{s['ours_empty']:>10}{s['ref_empty']:>11}")
    print()


def print_packages(rows, pages):
    """Scores per package (the first path component of the page's URL), the packages that
    lose the most F1 first, then the corpus with and without LibreOffice help (whose
    pages trafilatura often reduces to a few sentences, or to nothing)."""
    groups = defaultdict(list)
    for r, p in zip(rows, pages):
        parts = (p.get("url") or "").split("/")
        groups[parts[3] if len(parts) > 3 else "?"].append(r)
    print(f"{'package':<32}{'pages':>7}{'F1':>8}{'P':>8}{'R':>8}{'F1 lost':>9}")
    ranked = sorted(groups.items(), key=lambda kv: -sum(1 - r["f1"] for r in kv[1]))
    for name, rs in ranked[:20]:
        s = stats(rs)
        print(f"{name[:31]:<32}{s['pages']:>7}{s['f1']:>8.3f}{s['precision']:>8.3f}{s['recall']:>8.3f}"
              f"{sum(1 - r['f1'] for r in rs):>9.0f}")
    lo = [r for r, p in zip(rows, pages) if "/libreoffice-help-" in (p.get("url") or "")]
    rest = [r for r, p in zip(rows, pages) if "/libreoffice-help-" not in (p.get("url") or "")]
    for name, rs in (("LibreOffice help", lo), ("all other packages", rest)):
        if rs:
            s = stats(rs)
            print(f"{name:<32}{s['pages']:>7}{s['f1']:>8.3f}{s['precision']:>8.3f}{s['recall']:>8.3f}"
                  f"   (reference empty on {s['ref_empty']})")
    print()


def sample(counter, k=8):
    return " ".join(w for w, _ in counter.most_common(k))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("reference")
    ap.add_argument("ours_dir")
    ap.add_argument("manifest")
    ap.add_argument("--other", action="append", default=[], metavar="NAME=FILE.jsonl")
    ap.add_argument("--worst", type=int, default=15)
    ap.add_argument("--json", metavar="OUT")
    ap.add_argument("--by-package", action="store_true",
                    help="also score per documentation package, and with and without LibreOffice help")
    args = ap.parse_args()

    ref, ref_errors = read_jsonl(args.reference)
    manifest = [json.loads(l) for l in open(args.manifest) if l.strip()]
    pages = [p for p in manifest if p["id"] in ref and p["id"] not in ref_errors]
    unscored = {
        "reference_error": sum(1 for p in manifest if p["id"] in ref_errors),
        "reference_missing": sum(1 for p in manifest if p["id"] not in ref),
    }
    ours = read_parquet_dir(args.ours_dir)
    known = {p["id"] for p in manifest}
    print(f"{len(pages)} pages scored ({len(manifest)} in the manifest; left out: "
          f"{unscored['reference_error']} reference errors, {unscored['reference_missing']} without reference); "
          f"ours: {len(ours)} rows, {sum(1 for p in pages if p['id'] not in ours)} scored pages missing, "
          f"{sum(1 for i in ours if i not in known)} rows not in the manifest\n")

    rows = evaluate(pages, ref, ours, keep_tokens=True)
    result = {"pages": len(pages), "unscored": unscored, "ours": summarize(rows), "others": {}}
    print_table(f"ours vs {Path(args.reference).name}", result["ours"])
    if args.by_package:
        print_packages(rows, pages)
    for spec in args.other:
        name, path = spec.split("=", 1)
        other, _ = read_jsonl(path)
        result["others"][name] = summarize(evaluate(pages, ref, other))
        print_table(f"{name} vs {Path(args.reference).name}", result["others"][name])

    worst = sorted((r for r in rows if r["ref_words"] >= 20), key=lambda r: (r["f1"], r["id"]))[: args.worst]
    if worst:
        print(f"worst {len(worst)} pages (reference >= 20 words)")
    for r in worst:
        missing, extra = r["_b"] - r["_a"], r["_a"] - r["_b"]
        print(f"F1 {r['f1']:.3f}  P {r['p']:.3f}  R {r['r']:.3f}  {r['lang']:<3} words {r['ours_words']}/{r['ref_words']}"
              f"  {r['id']}\n    {r['url']}")
        print(f"    missing: {sample(missing) or '-'}\n    extra:   {sample(extra) or '-'}")
    result["worst"] = [
        {k: v for k, v in r.items() if not k.startswith("_")}
        | {"missing": sample(r["_b"] - r["_a"], 20), "extra": sample(r["_a"] - r["_b"], 20)}
        for r in worst
    ]
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=1, ensure_ascii=False) + "\n")


if __name__ == "__main__":
    main()
