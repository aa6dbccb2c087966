#!/usr/bin/env bash
# Measures the shipped toxicity model (models/toxicity-en-v1.ftz), as the toxicity stage
# runs it (`classifier = "default"`):
# 1. as a classifier: precision, recall, F1 and ROC-AUC on the test documents held out
#    by scripts/toxicity_data.py (OLID's official test set, 20% of Jigsaw, 20% of
#    Davidson et al.), next to alt-profanity-check on the same texts in the same run;
# 2. on ordinary web pages: the WCXB pages extracted by mill-extract, then scored in
#    `document` and in `fraction` mode at the default threshold; the share dropped and
#    the URLs of the dropped pages.
# Usage: scripts/eval-toxicity.sh TOXICITY_DATA WCXB_DATA   (archives or unpacked folders)
set -euo pipefail
cd "$(dirname "$0")/.."
tox="${1:?usage: scripts/eval-toxicity.sh TOXICITY_DATA WCXB_DATA}"
wcxb="${2:?usage: scripts/eval-toxicity.sh TOXICITY_DATA WCXB_DATA}"
venv=.cache/toxicity-venv
[ -x "$venv/bin/python" ] || python3 -m venv "$venv"
"$venv/bin/pip" install --quiet --disable-pip-version-check -r scripts/requirements-toxicity.txt
py="$venv/bin/python"
work=.cache/toxicity-eval
rm -rf "$work"
mkdir -p "$work"
cargo build --release --locked -p toxicity -p extract --bins
threshold="$(target/release/mill-toxicity default-model | sed -n 's/^threshold = //p')"
log() { "$@" --log-format json >>"$work/log" 2>&1 || { tail -20 "$work/log"; exit 1; }; }

echo "== held-out test sets (threshold $threshold; alt-profanity-check at 0.5)"
$py scripts/toxicity_data.py split "$tox" "$work" 2>/dev/null
printf 'classifier = "default"\n' >"$work/default.toml"
log target/release/mill-toxicity --input "$work/test" --output "$work/scored" \
  --config "$work/default.toml" --keep-rejected
$py scripts/toxicity_data.py profanity-check "$work"
$py scripts/toxicity_data.py figures "$work" "$work/scored" "$threshold"

echo "== WCXB pages extracted by mill-extract"
data="$($py scripts/extract_gold.py unpack "$wcxb" .cache/gold)"
$py scripts/extract_gold.py warc "$data" "$work/wcxb.warc.gz"
log target/release/mill-extract --input "$work/wcxb.warc.gz" --output "$work/web/text"
for mode in document fraction; do
  printf '[classifier]\nmodel = "default"\nnormalize = "words"\nthreshold = %s\nmode = "%s"\n' \
    "$threshold" "$mode" >"$work/$mode.toml"
  log target/release/mill-toxicity --input "$work/web/text" --output "$work/web/$mode" \
    --config "$work/$mode.toml" --keep-rejected
done
$py scripts/toxicity_data.py web "$work/web" document fraction
