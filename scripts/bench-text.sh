#!/usr/bin/env bash
# Bench: the fused text step (extract -> langid -> quality -> toxicity with the shipped
# classifier) on real pages, one thread on core 0, whole `mill run` processes: an
# earlier build (BASE, a `mill` binary) and this one, alternated, ROUNDS times (default
# 3). Prints each run's CPU ms per page, the stage times of its summary, the ratio of
# the two, and then what differs between the two outputs: decisions and texts of
# extract, langid and quality must be equal; documents whose toxicity decision changed
# are listed with their old and new scores.
# Usage: BASE=path/to/old/mill scripts/bench-text.sh DATA...
#   DATA: WCXB/Dragnet archives or unpacked folders (packed as WARC as
#   scripts/bench-chain.sh packs them) or .warc.gz files. COPIES (default 1) reads each
#   WARC that many times (more work per run, the same pages).
set -euo pipefail
cd "$(dirname "$0")/.."
[ $# -ge 1 ] || { echo "usage: BASE=OLD_MILL scripts/bench-text.sh DATA..." >&2; exit 2; }
base="${BASE:?BASE names the mill binary of the earlier build}"
rounds="${ROUNDS:-3}"
copies="${COPIES:-1}"
scripts/fetch-models.sh >/dev/null
python3 -m pip install --quiet --disable-pip-version-check pyarrow==26.0.1
venv=.cache/gold-venv
[ -x "$venv/bin/python" ] || python3 -m venv "$venv"
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check -r scripts/requirements-gold.txt
cargo build --release --locked -p jobs --bin mill
new=target/release/mill

work=.cache/text-run
rm -rf "$work" && mkdir -p "$work/warc" "$work/packed"
scripts/pack-warc.sh "$work/packed" "$@"
for c in $(seq 1 "$copies"); do
  for f in "$work"/packed/*.warc.gz; do ln -f "$f" "$work/warc/$c-$(basename "$f")"; done
done

for side in base new; do
  cat >"$work/$side.toml" <<EOF
input = "$(pwd)/$work/warc"
output = "$(pwd)/$work/out-$side"
tasks = 1

[config.langid]
languages = ["en"]

[config.quality]

[config.toxicity]
classifier = "default"

[[step]]
name = "text"
stages = ["extract", "langid", "quality", "toxicity"]
keep_rejected = true
EOF
done

: >"$work/runs.jsonl"
for round in $(seq 1 "$rounds"); do
  for side in base new; do
    bin="$new"
    [ "$side" = base ] && bin="$base"
    rm -rf "$work/out-$side"
    python3 - "$side" "$round" taskset -c 0 "$bin" run "$work/$side.toml" --threads 1 --log-format json \
      >>"$work/runs.jsonl" <<'PY'
import json, re, resource, subprocess, sys
side, rnd, cmd = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
out = subprocess.run(cmd, capture_output=True, text=True)
if out.returncode:
    sys.exit(out.stdout + out.stderr)
u = resource.getrusage(resource.RUSAGE_CHILDREN)
m = re.search(r"^text\s.*?\s\d+\+\d+\s+(\d+)\s+(\d+)\s", out.stdout, re.M)
t = re.search(r"^\s*time:.*$", out.stdout, re.M)
print(json.dumps({"side": side, "round": rnd, "cpu_s": u.ru_utime + u.ru_stime,
                  "pages": int(m[1]), "kept": int(m[2]), "time": t[0].strip() if t else ""}))
PY
  done
done

python3 - "$work" <<'PY'
import glob, json, sys
import pyarrow.parquet as pq
work = sys.argv[1]
runs = [json.loads(l) for l in open(f"{work}/runs.jsonl")]
print("text step (extract -> langid -> quality -> toxicity), one thread, core 0, whole process")
print(f"{'round':>5} {'side':<5}{'pages':>7}{'kept':>7}{'CPU s':>8}{'ms/page':>9}{'pages/s':>9}")
for r in runs:
    ms = 1000 * r["cpu_s"] / r["pages"]
    print(f"{r['round']:>5} {r['side']:<5}{r['pages']:>7}{r['kept']:>7}{r['cpu_s']:>8.2f}{ms:>9.3f}{1000 / ms:>9.1f}")
for rnd in sorted({r["round"] for r in runs}):
    by = {r["side"]: r for r in runs if r["round"] == rnd}
    print(f"round {rnd}: this build {by['base']['cpu_s'] / by['new']['cpu_s']:.2f}x the pages per core of BASE")
    for side in ("base", "new"):
        print(f"  {side}: {by[side]['time']}")

def docs(side):
    out = {}
    for f in sorted(glob.glob(f"{work}/out-{side}/text/**/*.parquet", recursive=True)):
        t = pq.read_table(f).to_pylist()
        for row in t:
            out[row["id"]] = row
    return out
old, new = docs("base"), docs("new")
print(f"\noutputs: {len(old)} documents before, {len(new)} after")
assert old.keys() == new.keys(), "the two builds wrote different documents"
reason = lambda r: r.get("drop_reason") or ""
tox = lambda r: reason(r) in ("toxic", "toxic_fraction")
differ_text = [i for i in old if old[i]["text"] != new[i]["text"]]
# Every other column but the toxicity score (language scores, quality annotations,
# metadata) is equal too.
differ_cols = sorted({k for i in old for k in old[i] if k != "toxicity_score" and old[i][k] != new[i].get(k)})
differ_other = [i for i in old if not tox(old[i]) and not tox(new[i]) and reason(old[i]) != reason(new[i])]
changed_tox = [i for i in old if tox(old[i]) != tox(new[i])]
print(f"texts that differ: {len(differ_text)}; decisions of extract, langid or quality that differ: {len(differ_other)}")
print(f"other columns that differ: {differ_cols or 'none'}")
diffs = [abs(old[i]["toxicity_score"] - new[i]["toxicity_score"]) for i in old
         if old[i].get("toxicity_score") is not None and new[i].get("toxicity_score") is not None]
if diffs:
    print(f"toxicity scores: {len(diffs)} compared, max |old - new| {max(diffs):.3g}")
print(f"toxicity decisions that changed: {len(changed_tox)}")
for i in changed_tox:
    print(f"  {i}: {reason(old[i]) or 'kept'} ({old[i]['toxicity_score']:.6f}) -> {reason(new[i]) or 'kept'} ({new[i]['toxicity_score']:.6f})")
if differ_text or differ_other or differ_cols:
    sys.exit("extract, langid or quality changed")
PY
