#!/usr/bin/env python3
"""Dedup at scale on planted signatures (scripts/bench-dedup-scale.sh).

Writes a planted corpus's signature files (examples/dedup_planted), runs the buckets
phase and the clusters phase (in rounds, `clusters_memory_bytes` per unit) with their
tasks at once, checks the removal lists against the planted truth, and prints per phase:
wall time, CPU time (all tasks), peak RSS of the largest task, and bytes written per
document. `--json FILE` also writes the figures.
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import time


def timed(cmds, env=None):
    """Runs the commands at once, each under /usr/bin/time; returns wall seconds, the
    CPU seconds of all, the largest peak RSS in bytes, and each one's stdout."""
    start = time.monotonic()
    procs = []
    for i, cmd in enumerate(cmds):
        tf = f"/tmp/bench-dedup-scale-time-{os.getpid()}-{i}"
        p = subprocess.Popen(["/usr/bin/time", "-f", "%U %S %M", "-o", tf] + cmd,
                             stdout=subprocess.PIPE, text=True, env=env)
        procs.append((p, tf, cmd))
    cpu, rss, outs = 0.0, 0, []
    for p, tf, cmd in procs:
        out, _ = p.communicate()
        if p.returncode != 0:
            sys.exit(f"failed ({p.returncode}): {' '.join(cmd)}\n{out}")
        u, s, m = open(tf).read().split()[-3:]
        os.remove(tf)
        cpu += float(u) + float(s)
        rss = max(rss, int(m) * 1024)
        outs.append(out)
    return time.monotonic() - start, cpu, rss, outs


def du(path):
    total = 0
    for root, _, files in os.walk(path):
        for f in files:
            total += os.path.getsize(os.path.join(root, f))
    return total


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("documents", type=int)
    ap.add_argument("--per-file", type=int, default=100_000)
    ap.add_argument("--tasks", type=int, default=2)
    ap.add_argument("--threads", type=int, default=1, help="threads per task")
    ap.add_argument("--memory", type=int, default=256 << 20, help="clusters_memory_bytes")
    ap.add_argument("--work", default=".cache/bench-dedup-scale")
    ap.add_argument("--bin", default="target/release")
    ap.add_argument("--json")
    ap.add_argument("--reuse-buckets", action="store_true",
                    help="keep the pairs of an earlier run (its buckets row is not printed)")
    a = ap.parse_args()
    n = a.documents
    work = os.path.join(a.work, str(n))
    sig, bk, cl = (os.path.join(work, x) for x in ("sig", "buckets", "clusters"))
    for d in (cl,) if a.reuse_buckets else (bk, cl):
        shutil.rmtree(d, ignore_errors=True)
    os.makedirs(work, exist_ok=True)
    config = os.path.join(work, "dedup.toml")
    with open(config, "w") as f:
        f.write(f"clusters_memory_bytes = {a.memory}\n")
    rows = []
    done = os.path.join(sig, ".complete")
    if not os.path.exists(done):
        shutil.rmtree(sig, ignore_errors=True)
        wall, cpu, rss, _ = timed([[f"{a.bin}/examples/dedup_planted", "write", sig, str(n),
                                    str(a.per_file)]])
        open(done, "w").close()
        rows.append(("generate", wall, cpu, rss, du(sig)))
    else:
        rows.append(("generate", None, None, None, du(sig)))
    mill = f"{a.bin}/mill-dedup"

    def phase(name, input_, output, extra=()):
        cmds = [[mill, name, "--input", input_, "--output", output, "--config", config,
                 "--tasks", str(a.tasks), "--task", str(t), "--threads", str(a.threads), *extra]
                for t in range(a.tasks)]
        return timed(cmds)

    if a.reuse_buckets and os.path.isdir(bk):
        rows.append(("buckets", None, None, None, du(bk)))
    else:
        wall, cpu, rss, _ = phase("buckets", sig, bk)
        rows.append(("buckets", wall, cpu, rss, du(bk)))
    wall, cpu, rss, outs = phase("clusters", bk, cl)
    # What the phase wrote, each unit once (its marker adds up the rounds' markers).
    with open(os.path.join(cl, "_done", "clusters.json")) as f:
        written = json.load(f)["stats"]["bytes_out"]
    rows.append(("clusters", wall, cpu, rss, written))
    check = subprocess.run([f"{a.bin}/examples/dedup_planted", "check", cl, str(n),
                            str(a.per_file)], capture_output=True, text=True)
    if check.returncode != 0:
        sys.exit(f"planted truth check failed:\n{check.stdout}{check.stderr}")
    truth = json.loads(check.stdout)
    print(f"{n} documents in {n // a.per_file} inputs, {a.tasks} tasks at once ({a.threads} threads each), "
          f"clusters_memory_bytes {a.memory >> 20} MiB")
    print(f"planted clusters found: {truth['clusters']} of {truth['planted_clusters']}, removed "
          f"{truth['removed']} of {truth['planted_removed']}, inputs differing from the truth: "
          f"{truth['inputs_differing']}")
    print(f"{'phase':<10} {'wall s':>8} {'CPU s':>8} {'peak RSS/task MiB':>18} {'bytes/doc':>10}")
    for name, wall, cpu, rss, size in rows:
        w = f"{wall:8.1f}" if wall is not None else f"{'-':>8}"
        c = f"{cpu:8.1f}" if cpu is not None else f"{'-':>8}"
        r = f"{rss >> 20:18d}" if rss is not None else f"{'-':>18}"
        print(f"{name:<10} {w} {c} {r} {size / n:10.1f}")
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"documents": n, "tasks": a.tasks, "threads": a.threads, "memory": a.memory,
                       "truth": truth,
                       "phases": [dict(zip(("phase", "wall_s", "cpu_s", "peak_rss", "bytes"), r))
                                  for r in rows]}, f, indent=1)


if __name__ == "__main__":
    main()
