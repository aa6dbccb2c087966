#!/usr/bin/env bash
# Writes docs/licenses.md: what tokenmill's binaries link and under which licences.
# The native libraries are listed by hand below (each one's crate builds or loads it);
# the Rust crates come from `cargo deny list` over the whole workspace graph (test and
# bench dependencies included, so the list is a superset of what a binary links).
# Needs cargo-deny on PATH (.ci/run installs it); rerun after a dependency change.
set -euo pipefail
cd "$(dirname "$0")/.."
out=docs/licenses.md
json="$(cargo deny list --format json --layout license)"
{
  cat <<'MD'
# Licences of what the binaries link

tokenmill itself is Apache-2.0. `cargo deny check licenses bans sources` (in `.ci/run`,
configured by `deny.toml`) refuses any crate outside the allowed licences, any source
other than crates.io and any wildcard version. This file is written by
`scripts/licenses.sh`.

## Native code

| Library | Licence | Linked by | How |
|---|---|---|---|
| fastText (C++, Facebook) | MIT | every binary (`pipeline`'s `fasttext` model loading) | compiled from source by `cfasttext-sys` and linked statically |
| zstd (C) | BSD-3-Clause (dual GPL-2.0, BSD chosen) | every binary | compiled by `zstd-sys`, static |
| ring's C and assembly (BoringSSL-derived) | Apache-2.0 AND ISC | every binary (TLS to S3) | compiled by `ring`, static |
| Oniguruma (C) | BSD-2-Clause | `mill`, `mill-tokenize`, `mill-fuzz` (HuggingFace tokenizers' regex) | compiled by `onig_sys`, static |
| libsais (C, Ilya Grebnov) | Apache-2.0 | `mill`, `mill-dedup` (exact-substring dedup's suffix array) | compiled by `libsais-sys` (without OpenMP), static |
| bzip2 (C) | bzip2-1.0.6 | `mill-train` (the zip reader of checkpoints) | compiled by `bzip2-sys`, static |
| libtorch (PyTorch 2.11.0) | BSD-3-Clause | `mill-train` | dynamic, from PyPI's torch wheel (`trainer/setup-torch.sh`); it loads GNU libgomp (GPL-3.0 with the GCC Runtime Library Exception) |
| CUDA runtime, cuBLAS, cuDNN, NCCL (NVIDIA) | NVIDIA's proprietary licences for redistribution with applications | `mill-train` on GPUs | dynamic, from the nvidia-* wheels torch depends on; NCCL also loaded at run time by `cudarc` with the `cuda` feature |

The models are not linked: lid.176 (CC-BY-SA-3.0) is fetched by
`scripts/fetch-models.sh` at setup time, never shipped in the binaries.

## Rust crates, by licence

A crate offered under a choice of licences (`MIT OR Apache-2.0`) is listed under each.

MD
  python3 -c '
import json, sys
d = json.loads(sys.argv[1])
for licence, crates in d["licenses"]:
    names = sorted({" ".join(c.split()[:2]) for c in crates})
    print(f"- **{licence}** ({len(names)}): " + ", ".join(names))
' "$json"
} >"$out"
echo "wrote $out"
