"""Dedup bench helpers for scripts/bench-dedup.sh.

make TEXT_CORPUS OUT --pairs N
  Near-duplicate pairs built from real documents: prose texts ("doc" kind) of the text
  corpus (scripts/text_corpus.py), 100 to 400 words, none sharing more than 20% of its
  5-word shingles with another chosen text (so the corpus holds no duplicates but the
  ones we make). Each base gets one variant with word-level edits (substitutions,
  insertions, deletions in the ratio 3:1:1, words taken from other texts) at a rate
  picked so that the expected Jaccard similarity of the pair is uniform on [0, 0.5)
  for a quarter of the pairs and on [0.5, 1] for the rest. Bases and variants are
  shuffled into 8 JSONL files (id, text); OUT/pairs.jsonl lists the pairs.

phases TOOL DOCS WORK [--bin MILL_DEDUP]
  Runs the four MinHash phases of TOOL (ours: mill-dedup with --threads 1; datatrove:
  MinhashDedupSignature, Buckets, Cluster, Filter with one worker, its default
  MinhashConfig: 5-grams, 14 buckets x 8 hashes) over DOCS, timing each phase (wall
  seconds, peak RSS) and measuring what it writes; prints a JSON object with the phases
  and the ids it kept. Ours: each phase's process wall time (start-up included).
  datatrove: each phase in its own process, timed inside it around the executor's run
  (interpreter start-up and imports left out), the whole process's wall time beside it.

report PAIRS CURVE OURS DATATROVE
  Prints the quality curve next to theory (fails when a bin with >= 200 pairs is more
  than 3 points off), false positives below Jaccard 0.5, precision and recall of both
  tools' final removals, and the phase times side by side.

rensa NORMALIZED [--rounds N] [--whole]
  rensa's RMinHash (112 permutations, our 14 bands x 8 rows) on the 5-grams of our
  normalised texts (JSONL of dedup_sign_texts), cut here as our shingles are (words at
  single spaces, a text of 5 words or fewer as one shingle). Times, fastest of the
  rounds, the signature of the already-cut 5-grams: one RMinHash per document (update,
  digest) and rensa's batch call (digests_from_token_sets). With --whole, it only reads,
  cuts and signs once (per document), for a timing of the whole process from outside.

scale DOCS WORK --bin MILL_DEDUP [--threads N]
  Runs our four phases over a large corpus, printing per phase wall time, peak RSS and
  bytes written per document.
"""
import argparse
import glob
import gzip
import json
import os
import random
import shutil
import subprocess
import sys
import time


def words_of(text):
    return text.split()


def shingles(words, n=5):
    simple = [w.lower() for w in words]
    if len(simple) <= n:
        return {hash(tuple(simple))}
    return {hash(tuple(simple[i : i + n])) for i in range(len(simple) - n + 1)}


def make(args):
    rng = random.Random(20261203)
    pool = []
    seen = set()
    for path in sorted(glob.glob(os.path.join(args.corpus, "docs", "*.jsonl.gz"))):
        with gzip.open(path, "rt", encoding="utf-8") as f:
            for line in f:
                d = json.loads(line)
                if d.get("kind") != "doc":
                    continue
                w = words_of(d["text"])
                if len(w) < 100:
                    continue
                w = w[:400]
                key = " ".join(w[:50])
                if key in seen:
                    continue
                seen.add(key)
                pool.append(w)
                if len(pool) >= args.pairs * 3:
                    break
        if len(pool) >= args.pairs * 3:
            break
    # Keep texts that share at most 20% of their shingles with any text kept before.
    owner = {}
    bases = []
    for w in pool:
        sh = shingles(w)
        counts = {}
        for s in sh:
            o = owner.get(s)
            if o is not None:
                counts[o] = counts.get(o, 0) + 1
        if counts and max(counts.values()) > 0.2 * len(sh):
            continue
        k = len(bases)
        for s in sh:
            owner.setdefault(s, k)
        bases.append(w)
        if len(bases) >= args.pairs:
            break
    if len(bases) < args.pairs:
        print(f"only {len(bases)} distinct texts in the corpus; using them", file=sys.stderr)
    filler = [x for w in rng.sample(bases, min(len(bases), 500)) for x in w]
    docs = []
    pairs = []
    for i, w in enumerate(bases):
        target = rng.uniform(0.0, 0.5) if rng.random() < 0.25 else rng.uniform(0.5, 1.0)
        # Jaccard of 5-shingles after editing a share e of the words: about
        # (1-e)^5 / (2 - (1-e)^5); solve for e.
        keep = (2 * target / (1 + target)) ** (1 / 5)
        rate = 1 - keep
        v = list(w)
        edits = int(round(rate * len(w)))
        for _ in range(edits):
            op = rng.random()
            k = rng.randrange(len(v)) if v else 0
            if op < 0.6 and v:
                v[k] = rng.choice(filler)
            elif op < 0.8 and len(v) > 5:
                del v[k]
            else:
                v.insert(k, rng.choice(filler))
        a, b = f"base-{i:06d}", f"edit-{i:06d}"
        docs.append({"id": a, "text": " ".join(w)})
        docs.append({"id": b, "text": " ".join(v)})
        pairs.append({"a": a, "b": b, "rate": round(rate, 4)})
    rng.shuffle(docs)
    out = args.out
    shutil.rmtree(out, ignore_errors=True)
    os.makedirs(os.path.join(out, "docs"))
    files = 8
    for k in range(files):
        with open(os.path.join(out, "docs", f"part-{k:02d}.jsonl"), "w", encoding="utf-8") as f:
            for d in docs[k::files]:
                f.write(json.dumps(d, ensure_ascii=False) + "\n")
    with open(os.path.join(out, "pairs.jsonl"), "w") as f:
        for p in pairs:
            f.write(json.dumps(p) + "\n")
    print(f"{len(pairs)} pairs, {len(docs)} documents, {sum(len(d['text']) for d in docs) >> 20} MiB")


def run_measured(cmd, env=None, stdout=None):
    """Runs cmd; returns (wall seconds, peak RSS bytes) of that process alone; with
    `stdout` (a list), appends what it printed."""
    start = time.perf_counter()
    p = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(p.pid, 0)
    wall = time.perf_counter() - start
    out = p.stdout.read().decode()
    err = p.stderr.read().decode()
    if os.waitstatus_to_exitcode(status) != 0:
        sys.exit(f"{' '.join(cmd)} failed:\n{out}\n{err}")
    if stdout is not None:
        stdout.append(out)
    return wall, usage.ru_maxrss * 1024


def folder_bytes(path, suffix=""):
    total = 0
    for root, _, files in os.walk(path):
        if "/_" in root[len(path):] or os.path.basename(root).startswith("_"):
            continue
        for name in files:
            if name.endswith(suffix):
                total += os.path.getsize(os.path.join(root, name))
    return total


def count_docs(docs):
    n = 0
    for path in glob.glob(os.path.join(docs, "*.jsonl")):
        with open(path, "rb") as f:
            n += sum(1 for _ in f)
    return n


def kept_ids_jsonl(folder):
    ids = []
    for path in sorted(glob.glob(os.path.join(folder, "**", "*.jsonl*"), recursive=True)):
        opener = gzip.open if path.endswith(".gz") else open
        with opener(path, "rt", encoding="utf-8") as f:
            for line in f:
                ids.append(json.loads(line)["id"])
    return ids


def kept_ids_parquet(folder):
    import pyarrow.parquet as pq

    ids = []
    for path in sorted(glob.glob(os.path.join(folder, "*.parquet"))):
        ids.extend(pq.read_table(path, columns=["id"]).column("id").to_pylist())
    return ids


def ours(docs, work, binary, threads, tasks=1):
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    sig, bk, cl, out = (os.path.join(work, x) for x in ("sig", "buckets", "clusters", "out"))
    common = ["--threads", str(threads), "--log-format", "json"]
    phases = []
    wall, rss = run_measured([binary, "signatures", "--input", docs, "--output", sig] + common)
    phases.append(("signatures", wall, rss, folder_bytes(sig, ".sig")))
    wall = 0.0
    peak = 0
    for t in range(tasks):
        w, r = run_measured(
            [binary, "buckets", "--input", sig, "--output", bk, "--tasks", str(tasks), "--task", str(t)] + common
        )
        wall += w
        peak = max(peak, r)
    phases.append(("buckets", wall, peak, folder_bytes(bk, ".pairs")))
    wall, rss = run_measured([binary, "clusters", "--input", bk, "--output", cl, "--log-format", "json"])
    phases.append(("clusters", wall, rss, folder_bytes(cl, ".dups")))
    wall, rss = run_measured([binary, "filter", "--input", docs, "--output", out, "--clusters", cl] + common)
    phases.append(("filter", wall, rss, folder_bytes(out, ".parquet")))
    return phases, out


def phases_cmd(args):
    if args.tool == "ours":
        phases, out = ours(args.docs, args.work, args.bin, 1)
        kept = kept_ids_parquet(out)
        walls = [p[1] for p in phases]
    else:
        phases, kept, walls = datatrove_phases(args.docs, args.work)
    print(json.dumps({"tool": args.tool, "phases": phases, "kept": kept, "process_wall": walls}))


def datatrove_phases(docs, work):
    # Each phase in its own process, so its memory is its own; its time is taken inside
    # that process around the executor's run (the interpreter's start-up and datatrove's
    # imports left out, so the ratio compares the work), the process's wall beside it.
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    phases = []
    walls = []
    for name in ("signatures", "buckets", "clusters", "filter"):
        printed = []
        wall, rss = run_measured([sys.executable, __file__, "dt-phase", name, docs, work], stdout=printed)
        seconds = json.loads(printed[0].strip().splitlines()[-1])["seconds"]
        sub = {"signatures": "sigs", "buckets": "buckets", "clusters": "remove_ids", "filter": "out"}[name]
        phases.append((name, seconds, rss, folder_bytes(os.path.join(work, sub))))
        walls.append(wall)
    return phases, kept_ids_jsonl(os.path.join(work, "out")), walls


def dt_phase(args):
    from datatrove.executor import LocalPipelineExecutor
    from datatrove.pipeline.dedup import (
        MinhashDedupBuckets,
        MinhashDedupCluster,
        MinhashDedupFilter,
        MinhashDedupSignature,
    )
    from datatrove.pipeline.dedup.minhash import MinhashConfig
    from datatrove.pipeline.readers import JsonlReader
    from datatrove.pipeline.writers import JsonlWriter

    cfg = MinhashConfig()
    w = args.work
    logs = os.path.join(w, "logs")
    reader = lambda: JsonlReader(args.docs, glob_pattern="*.jsonl")  # noqa: E731
    if args.phase == "signatures":
        pipe, tasks = [reader(), MinhashDedupSignature(output_folder=os.path.join(w, "sigs"), config=cfg)], 1
    elif args.phase == "buckets":
        pipe = [MinhashDedupBuckets(input_folder=os.path.join(w, "sigs"), output_folder=os.path.join(w, "buckets"), config=cfg)]
        tasks = cfg.num_buckets
    elif args.phase == "clusters":
        pipe = [MinhashDedupCluster(input_folder=os.path.join(w, "buckets"), output_folder=os.path.join(w, "remove_ids"), config=cfg)]
        tasks = 1
    else:
        pipe = [
            reader(),
            MinhashDedupFilter(input_folder=os.path.join(w, "remove_ids")),
            JsonlWriter(os.path.join(w, "out")),
        ]
        tasks = 1
    start = time.perf_counter()
    LocalPipelineExecutor(pipeline=pipe, tasks=tasks, workers=1, logging_dir=os.path.join(logs, args.phase)).run()
    print(json.dumps({"seconds": time.perf_counter() - start}))


def report(args):
    pairs = [json.loads(l) for l in open(args.pairs)]
    curve = json.load(open(args.curve))
    ours_r = json.load(open(args.ours))
    dt_r = json.load(open(args.datatrove))
    ok = True
    print(f"MinHash {curve['bands']} bands x {curve['rows']} rows: detection per true Jaccard similarity (pairs share a band)")
    print(f"{'Jaccard':>11} {'pairs':>7} {'measured':>9} {'theory':>7} {'diff':>6}")
    for b in curve["bins"]:
        diff = 100 * (b["detected"] - b["theory"])
        flag = ""
        if b["pairs"] >= 200 and abs(diff) > 3:
            flag = "  OUTSIDE +-3"
            ok = False
        print(f"{b['from']:.2f}-{b['to']:.2f} {b['pairs']:>7} {100 * b['detected']:>8.1f}% {100 * b['theory']:>6.1f}% {diff:>+6.1f}{flag}")
    lp, ld = curve["below_half_pairs"], curve["below_half_detected"]
    print(f"false positives below Jaccard 0.5: {ld} of {lp} pairs ({100 * ld / max(lp, 1):.2f}%)")

    # Final removals: a pair with true Jaccard >= 0.75 is a duplicate to catch; one of
    # its two documents should go. Removing both counts one good and one bad removal.
    jac = curve["pair_jaccard"]
    print()
    print("final removals (after clusters and filter): a pair is a duplicate when its true")
    print("Jaccard similarity is >= 0.75; one of its documents should be removed")
    print(f"{'tool':<10} {'removed':>8} {'precision':>10} {'recall':>8}")
    all_ids = {p["a"] for p in pairs} | {p["b"] for p in pairs}
    dup = [p for p in pairs if jac[p["b"]] >= 0.75]
    for name, r in (("tokenmill", ours_r), ("datatrove", dt_r)):
        removed = all_ids - set(r["kept"])
        caught = sum(1 for p in dup if p["a"] in removed or p["b"] in removed)
        precision = caught / max(len(removed), 1)
        recall = caught / max(len(dup), 1)
        print(f"{name:<10} {len(removed):>8} {precision:>10.3f} {recall:>8.3f}")
    print()
    print("phases, one core: wall seconds (peak RSS MiB)")
    print(f"{'phase':<12} {'tokenmill':>18} {'datatrove':>18} {'ratio':>7}")
    to = td = 0.0
    for (n, w1, r1, _), (_, w2, r2, _) in zip(ours_r["phases"], dt_r["phases"]):
        to += w1
        td += w2
        print(f"{n:<12} {w1:>9.2f} s ({r1 >> 20:>4}) {w2:>9.2f} s ({r2 >> 20:>4}) {w2 / max(w1, 1e-9):>6.1f}x")
    print(f"{'all four':<12} {to:>9.2f} s        {td:>9.2f} s        {td / max(to, 1e-9):>6.1f}x")
    wo, wd = sum(ours_r["process_wall"]), sum(dt_r["process_wall"])
    print(f"datatrove's time is taken inside each phase's process (start-up and imports left out);")
    print(f"whole processes: tokenmill {wo:.2f} s, datatrove {wd:.2f} s ({wd / max(wo, 1e-9):.1f}x)")
    if not ok:
        sys.exit("a bin with >= 200 pairs is more than 3 points from theory")


def scale(args):
    n = count_docs(args.docs)
    phases, _ = ours(args.docs, args.work, args.bin, args.threads, tasks=args.tasks)
    print(f"{n} documents, {args.threads} threads; buckets in {args.tasks} task(s) run one after another")
    print(f"{'phase':<12} {'wall s':>8} {'peak RSS MiB':>13} {'bytes written':>14} {'bytes/doc':>10}")
    for name, wall, rss, size in phases:
        print(f"{name:<12} {wall:>8.1f} {rss >> 20:>13} {size:>14} {size / max(n, 1):>10.1f}")


def rensa_cmd(args):
    from rensa import RMinHash

    perms, seed, n = 14 * 8, 1, 5
    grams = []
    with open(args.normalized, encoding="utf-8") as f:
        for line in f:
            text = json.loads(line)["text"]
            if not text:
                continue
            words = text.split(" ")
            if len(words) <= n:
                grams.append([text])
            else:
                grams.append([" ".join(words[i : i + n]) for i in range(len(words) - n + 1)])
    if args.whole:
        for g in grams:
            m = RMinHash(num_perm=perms, seed=seed)
            m.update(g)
            m.digest()
        return
    per_doc = batch = float("inf")
    for _ in range(args.rounds):
        start = time.process_time()
        for g in grams:
            m = RMinHash(num_perm=perms, seed=seed)
            m.update(g)
            m.digest()
        per_doc = min(per_doc, time.process_time() - start)
        start = time.process_time()
        RMinHash.digests_from_token_sets(grams, perms, seed)
        batch = min(batch, time.process_time() - start)
    print(json.dumps({"documents": len(grams), "shingles": sum(map(len, grams)),
                      "per_document_seconds": per_doc, "batch_seconds": batch}))


def main():
    ap = argparse.ArgumentParser()
    sub = ap.add_subparsers(dest="cmd", required=True)
    m = sub.add_parser("make")
    m.add_argument("corpus")
    m.add_argument("out")
    m.add_argument("--pairs", type=int, default=30000)
    p = sub.add_parser("phases")
    p.add_argument("tool", choices=["ours", "datatrove"])
    p.add_argument("docs")
    p.add_argument("work")
    p.add_argument("--bin")
    d = sub.add_parser("dt-phase")
    d.add_argument("phase")
    d.add_argument("docs")
    d.add_argument("work")
    r = sub.add_parser("report")
    r.add_argument("pairs")
    r.add_argument("curve")
    r.add_argument("ours")
    r.add_argument("datatrove")
    q = sub.add_parser("rensa")
    q.add_argument("normalized")
    q.add_argument("--rounds", type=int, default=5)
    q.add_argument("--whole", action="store_true")
    s = sub.add_parser("scale")
    s.add_argument("docs")
    s.add_argument("work")
    s.add_argument("--bin", required=True)
    s.add_argument("--threads", type=int, default=2)
    s.add_argument("--tasks", type=int, default=1)
    a = ap.parse_args()
    {"make": make, "phases": phases_cmd, "dt-phase": dt_phase, "report": report, "rensa": rensa_cmd,
     "scale": scale}[a.cmd](a)


if __name__ == "__main__":
    main()
