#!/usr/bin/env bash
# Bench and parity of the classify stage on real web texts: the main text of the 1,497
# WCXB dev pages and the 966 Dragnet gold texts (../shared/data; people-checked text of
# pages from many sites).
#   1. fastText: a classifier trained by `mill-classify train` with DCLM's settings
#      (WCXB's article pages against its other page types); its scores against
#      fastText's own predict(k=-1) on every text; then its speed on one core next to
#      datatrove's FastTextClassifierFilter, the same model and texts, with the fastText
#      build datatrove declares (fasttext-numpy2-wheel) and with fasttext-predict.
#   2. Transformers: four random-weight models transformers makes (BERT and XLM-R,
#      regression and two labels) scored on every text by mill-classify and by
#      transformers; then a BERT-base regression model (FineWeb-Edu's classifier's
#      shape, 110M parameters) on 128 of the texts, docs/s by mill-classify and by
#      transformers at 1 and 2 threads.
# Usage: scripts/bench-classify.sh SHARED_DATA_DIR [WORK_DIR]
#   (ONLY=fasttext or ONLY=transformers runs one half)
set -euo pipefail
cd "$(dirname "$0")/.."
data="${1:?usage: scripts/bench-classify.sh SHARED_DATA_DIR [WORK_DIR]}"
work="${2:-.cache/bench-classify}"
mkdir -p "$work"
eval "$(trainer/setup-torch.sh)"
python3 -m pip install --quiet --disable-pip-version-check -r scripts/requirements-bench.txt -r scripts/requirements-test.txt
cargo build --release --locked -p classify --bins >/dev/null 2>&1
bin=./target/release/mill-classify
if [ ! -d "$work/wcxb" ]; then tar -I zstd -xf "$data/wcxb-dev.tar.zst" -C "$work"; fi
if [ ! -d "$work/dragnet-train" ]; then tar -I zstd -xf "$data/dragnet-train.tar.zst" -C "$work"; fi
python3 scripts/bench_classify.py texts "$work" "$work/wcxb" "$work/dragnet-train"
# The texts as one input of a step.
rm -rf "$work/in" && mkdir -p "$work/in" && cp "$work/texts.jsonl" "$work/in/texts.jsonl"

if [ "${ONLY:-fasttext}" = fasttext ]; then
echo "== fastText: train (DCLM's settings), parity, speed"
$bin train --positives "$work/positives.jsonl" --negatives "$work/negatives.jsonl" --output "$work/model" --force
printf '[[classifier]]\nname = "q"\nkind = "fasttext"\nmodel = "%s"\nlabel = "hq"\nall_labels = true\n' \
  "$work/model/model.bin" >"$work/fasttext.toml"
rm -rf "$work/scored-ft"
$bin --input "$work/in" --output "$work/scored-ft" --config "$work/fasttext.toml" --threads 1 --log-format json >/dev/null
python3 scripts/bench_classify.py parity "$work/model/model.bin" "$work/texts.jsonl" "$work/scored-ft" cc hq
# Speed: the texts four times over, one core each; ours is the classify stage's time
# from its marker, theirs the filter's loop (model loads left out on both sides).
# datatrove runs with the fastText build it declares (fasttext-numpy2-wheel, in a venv
# of its own: it is also a `fasttext` module) and with fasttext-predict (the tests'),
# the faster of the two builds of fastText's C++ predict. Three rounds, alternated.
dt_venv=.cache/datatrove-venv
if ! "$dt_venv/bin/python" -c "import datatrove, fasttext.FastText" 2>/dev/null; then
  python3 -m venv "$dt_venv"
  "$dt_venv/bin/pip" install --quiet --disable-pip-version-check "datatrove[processing]==0.10.1" fasttext-numpy2-wheel==0.9.2
fi
# The text as datatrove gives it to the model (`newline_replacement=" "`: newlines to
# spaces), on both sides.
printf '[[classifier]]\nname = "q"\nkind = "fasttext"\nmodel = "%s"\nlabel = "hq"\nall_labels = true\ntext = "newlines"\n' \
  "$work/model/model.bin" >"$work/fasttext-speed.toml"
rm -rf "$work/in4" && mkdir -p "$work/in4"
for k in 0 1 2 3; do cp "$work/texts.jsonl" "$work/in4/texts-$k.jsonl"; done
: >"$work/speed.jsonl"
for round in 1 2 3; do
  rm -rf "$work/scored-ft4"
  taskset -c 0 $bin --input "$work/in4" --output "$work/scored-ft4" --config "$work/fasttext-speed.toml" --threads 1 --log-format json >/dev/null
  python3 - "$work/scored-ft4" "$round" >>"$work/speed.jsonl" <<'PY'
import glob, json, sys
docs = secs = 0
for m in glob.glob(sys.argv[1] + "/_done/*.json"):
    s = json.load(open(m))["stats"]
    docs += s["docs_in"]
    secs += dict(s["stage_seconds"])["classify"]
print(json.dumps({"round": int(sys.argv[2]), "side": "mill-classify", "documents": docs, "cpu_seconds": secs, "docs_per_second": docs / secs}))
PY
  for py in "$dt_venv/bin/python" python3; do
    taskset -c 0 "$py" scripts/bench_classify.py datatrove "$work/model/model.bin" "$work/texts.jsonl" 4 |
      python3 -c "import json,sys; r=json.load(sys.stdin); r.update(round=$round, side='datatrove ' + r['fasttext']); print(json.dumps(r))" >>"$work/speed.jsonl"
  done
done
python3 - "$work/speed.jsonl" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
print("| round | mill-classify docs/s | datatrove (fasttext-numpy2-wheel) docs/s | ratio | datatrove (fasttext-predict) docs/s | ratio |")
print("| ---: | ---: | ---: | ---: | ---: | ---: |")
for r in sorted({x["round"] for x in rows}):
    by = {x["side"]: x["docs_per_second"] for x in rows if x["round"] == r}
    ours, wheel, pred = by["mill-classify"], by["datatrove fasttext-numpy2-wheel"], by["datatrove fasttext-predict"]
    print(f"| {r} | {ours:,.0f} | {wheel:,.0f} | {ours / wheel:.1f}x | {pred:,.0f} | {ours / pred:.1f}x |")
PY
fi
[ "${ONLY:-transformers}" = transformers ] || exit 0

echo "== transformers: parity on every text, then BERT-base speed"
if [ ! -d "$work/models/bert-base-regression" ]; then
  python scripts/classify_reference.py models "$work/models" "$work/texts.jsonl" --base
fi
for m in bert-regression bert-labels xlmr-regression xlmr-labels; do
  printf '[[classifier]]\nname = "t"\nkind = "transformer"\nmodel = "%s"\nall_labels = true\n' "$work/models/$m" >"$work/$m.toml"
  rm -rf "$work/scored-$m"
  $bin --input "$work/in" --output "$work/scored-$m" --config "$work/$m.toml" --log-format json >/dev/null
  python scripts/classify_reference.py score "$work/models/$m" "$work/texts.jsonl" "$work/ref-$m.jsonl" --threads 2 --batch 16
  python3 scripts/bench_classify.py transformers-parity "$work/scored-$m" "$work/ref-$m.jsonl" "$work/texts.jsonl" t
done
head -128 "$work/texts.jsonl" >"$work/speed.jsonl"
rm -rf "$work/in-speed" && mkdir -p "$work/in-speed" && cp "$work/speed.jsonl" "$work/in-speed/"
printf '[[classifier]]\nname = "edu"\nkind = "transformer"\nmodel = "%s"\n' "$work/models/bert-base-regression" >"$work/base.toml"
for threads in 1 2; do
  rm -rf "$work/scored-base"
  $bin --input "$work/in-speed" --output "$work/scored-base" --config "$work/base.toml" --threads "$threads" --log-format json >/dev/null
  python3 - "$work/scored-base" "$threads" <<'PY'
import glob, json, sys
docs = secs = 0
threads = int(sys.argv[2])
for m in glob.glob(sys.argv[1] + "/_done/*.json"):
    s = json.load(open(m))["stats"]
    docs += s["docs_in"]
    # A batched stage's time is its wall time times the threads.
    secs += dict(s["stage_seconds"])["classify"] / threads
print(json.dumps({"ours_threads": threads, "documents": docs, "seconds": secs, "docs_per_second": docs / secs}))
PY
  python scripts/classify_reference.py score "$work/models/bert-base-regression" "$work/speed.jsonl" "$work/ref-base.jsonl" --threads "$threads" --batch 16 --time
done
python3 scripts/bench_classify.py transformers-parity "$work/scored-base" "$work/ref-base.jsonl" "$work/speed.jsonl" edu
