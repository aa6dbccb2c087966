#!/usr/bin/env bash
# Bench: the text chain on real pages, whole processes, one core each, in one run.
# datatrove's FineWeb chain (WarcReader -> Trafilatura(favour_precision) -> LanguageFilter
# -> GopherRepetition -> FineWebQuality -> GopherQuality -> C4Quality -> JsonlWriter,
# chained as its LocalPipelineExecutor chains one task) and `mill run` with the same steps (extract -> langid ->
# quality fused, Parquet out; English, FineWeb's C4 setting) on the same WARC files.
# Prints CPU ms per page of each, their ratio, and the documents each kept; then the
# run's summary, whose `time:` line says where tokenmill's time went, stage by stage.
# Usage: scripts/bench-chain.sh DATA...   (WCXB/Dragnet archives or unpacked folders,
#   packed as WARC as scripts/bench-extract-gold.sh packs them; or .warc.gz files)
set -euo pipefail
cd "$(dirname "$0")/.."
[ $# -ge 1 ] || { echo "usage: scripts/bench-chain.sh DATA... (archives, folders or .warc.gz)" >&2; exit 2; }
scripts/fetch-models.sh >/dev/null
model="$(scripts/fetch-models.sh --print-dir)/lid.176.ftz"
python3 -m pip install --quiet --disable-pip-version-check -r scripts/requirements-bench.txt
venv=.cache/gold-venv
[ -x "$venv/bin/python" ] || python3 -m venv "$venv"
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check -r scripts/requirements-gold.txt
cargo build --release --locked -p jobs --bin mill

work=.cache/chain-run
rm -rf "$work" && mkdir -p "$work/warc"
scripts/pack-warc.sh "$work/warc" "$@"

cat >"$work/pipeline.toml" <<EOF
input = "$(pwd)/$work/warc"
output = "$(pwd)/$work/ours"
tasks = 1

[config.langid]
languages = ["en"]

[config.quality.c4]
filter_no_terminal_punct = false

[[step]]
name = "text"
stages = ["extract", "langid", "quality"]
EOF

echo "tokenmill: mill run, 1 thread, core 0" >&2
ours="$(python3 -c '
import json, re, resource, subprocess, sys
out = subprocess.run(sys.argv[1:], capture_output=True, text=True)
if out.returncode:
    sys.exit(out.stdout + out.stderr)
u = resource.getrusage(resource.RUSAGE_CHILDREN)
m = re.search(r"^text\s.*?\s\d+\+\d+\s+(\d+)\s+(\d+)\s", out.stdout, re.M)
print(json.dumps({"cpu_s": u.ru_utime + u.ru_stime, "pages": int(m[1]), "kept": int(m[2]), "summary": out.stdout}))
' taskset -c 0 target/release/mill run "$work/pipeline.toml" --threads 1 --log-format json)"

echo "datatrove: the FineWeb chain as one task, core 0" >&2
theirs="$(taskset -c 0 python3 scripts/bench_chain.py "$work/warc" "$work/datatrove" "$model" 2>"$work/datatrove.log" | tail -1)" \
  || { tail -20 "$work/datatrove.log" >&2; exit 1; }

python3 - "$ours" "$theirs" <<'EOF'
import json, sys
ours, theirs = json.loads(sys.argv[1]), json.loads(sys.argv[2])
print(f"text chain on the same WARC files, one core each, CPU time of the whole run")
print(f"{'':<28}{'pages':>7}{'CPU s':>9}{'ms/page':>9}{'kept':>7}")
for name, r in [("tokenmill (mill run)", ours), ("datatrove (FineWeb chain)", theirs)]:
    print(f"{name:<28}{r['pages']:>7}{r['cpu_s']:>9.2f}{1000 * r['cpu_s'] / r['pages']:>9.2f}{r['kept']:>7}")
ratio = (theirs["cpu_s"] / theirs["pages"]) / (ours["cpu_s"] / ours["pages"])
print(f"tokenmill is {ratio:.1f}x faster per core and page (datatrove's extractor sandbox: "
      f"{theirs['sandbox_cpu_s']:.2f} s of its CPU; pages = documents each reader made of the records)")
print()
print(ours["summary"].strip())
EOF
