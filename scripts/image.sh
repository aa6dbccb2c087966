#!/usr/bin/env bash
# Builds tokenmill's container images without a base image or a registry, for the
# batch engines `mill submit` targets (a Kubernetes Job's `image`, an AWS Batch job
# definition's image; Slurm runs the binaries directly):
#   tokenmill:<version> and tokenmill:latest   the stage binaries (mill, mill-<stage>;
#       not mill-train or mill-fuzz) without their debug info, on PATH; the shared
#       libraries `ldd` lists for them and the dynamic loader; CA certificates (S3 over
#       TLS); the lid.176 model in $TOKENMILL_CACHE/models; /tmp; a minimal /etc/passwd
#       and /etc/group. One layer, made with `podman import` from a folder: no image
#       has to be pulled.
#   tokenmill-trainer:<version> and :latest (with --trainer): that image plus mill-train,
#       mill-classify-gpu (the classify stage's transformers on GPUs)
#       and PyPI torch's libtorch with the CUDA libraries of the nvidia-* wheels, from
#       the virtualenv trainer/setup-torch.sh makes (one more layer, several GB); on GPU
#       hosts it needs the NVIDIA container toolkit, which brings the driver.
# Each image is also written as an OCI archive, out/image/<name>-<version>.oci.tar, for
# `skopeo copy oci-archive:FILE docker://REGISTRY/NAME:TAG` or `podman load -i FILE`.
# Run as root on Debian 12 (it installs podman and runc with apt-get when missing). It
# uses the release binaries in target/release and builds only those that are missing.
# Usage: scripts/image.sh [--trainer]
set -euo pipefail
cd "$(dirname "$0")/.."

log() { printf 'image: %s\n' "$*" >&2; }
die() { log "ERROR: $*"; exit 1; }

trainer=0
for arg in "$@"; do
  case "$arg" in
    --trainer) trainer=1 ;;
    -h | --help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) die "unknown argument $arg (usage: scripts/image.sh [--trainer])" ;;
  esac
done

# The workspace's version: the first `version = "..."` after [workspace.package].
version="$(awk '/^\[workspace\.package\]/ { p = 1; next } /^\[/ { p = 0 }
  p && /^version *=/ { gsub(/.*= *"|".*/, ""); print; exit }' Cargo.toml)"
[ -n "$version" ] || die "no version under [workspace.package] in Cargo.toml"
out=out/image
mkdir -p "$out"

# --- 1. tools -------------------------------------------------------------------------
# Debian's podman with runc: crun refuses cgroup v1 hosts ("hybrid mode not supported").
missing=()
command -v podman >/dev/null 2>&1 || missing+=(podman)
command -v runc >/dev/null 2>&1 || missing+=(runc)
command -v strip >/dev/null 2>&1 || missing+=(binutils)
[ -f /etc/ssl/certs/ca-certificates.crt ] || missing+=(ca-certificates)
python3 -m pip --version >/dev/null 2>&1 || missing+=(python3-pip)  # scripts/fetch-models.sh
if [ "${#missing[@]}" -gt 0 ]; then
  [ "$(id -u)" = 0 ] || die "missing ${missing[*]}: install them, or run as root"
  log "installing ${missing[*]} (apt)"
  export DEBIAN_FRONTEND=noninteractive
  aptlog="$(mktemp /tmp/image-apt.XXXXXX)"
  ok=0
  for attempt in 1 2 3; do
    if apt-get update -q >>"$aptlog" 2>&1 \
      && apt-get install -y -q --no-install-recommends -o Dpkg::Use-Pty=0 \
        -o DPkg::Lock::Timeout=300 "${missing[@]}" </dev/null >>"$aptlog" 2>&1; then
      ok=1; break
    fi
    log "apt attempt $attempt failed; retrying"; sleep 5
  done
  if [ "$ok" != 1 ]; then tail -n 30 "$aptlog" >&2; die "apt-get install failed"; fi
  rm -f "$aptlog"
fi
# The engine settings the smoke run below (and scripts/image-test.sh) use: runc with
# cgroupfs, and no default ulimits (hosts that refuse setrlimit fail on them). A
# CONTAINERS_CONF set by the caller wins.
if [ -z "${CONTAINERS_CONF:-}" ]; then
  printf '[containers]\ndefault_ulimits = []\n[engine]\nruntime = "runc"\ncgroup_manager = "cgroupfs"\n' \
    >"$out/containers.conf"
  CONTAINERS_CONF="$PWD/$out/containers.conf"
  export CONTAINERS_CONF
fi

# --- 2. binaries ----------------------------------------------------------------------
# binary name -> cargo package
declare -A package=(
  [mill]=jobs [mill-extract]=extract [mill-langid]=langid [mill-quality]=quality
  [mill-toxicity]=toxicity [mill-pii]=pii [mill-decontam]=decontam [mill-dedup]=dedup
  [mill-tokenize]=tokenize [mill-import]=import [mill-classify]=classify
)
bins=(mill mill-extract mill-langid mill-quality mill-toxicity mill-pii mill-decontam
  mill-dedup mill-tokenize mill-import mill-classify)
build=()
for b in "${bins[@]}"; do
  [ -x "target/release/$b" ] || build+=(-p "${package[$b]}")
done
if [ "${#build[@]}" -gt 0 ]; then
  command -v cargo >/dev/null 2>&1 || die "target/release lacks binaries and cargo is not installed (rustup.rs)"
  log "building the missing binaries: cargo build --release --locked ${build[*]}"
  cargo build --release --locked "${build[@]}"
fi
if [ "$trainer" = 1 ]; then
  # The trainer links PyPI torch's libtorch (installed once into .cache/torch-venv).
  eval "$(trainer/setup-torch.sh)"
  if [ ! -x target/release/mill-train ] || [ ! -x target/release/mill-classify-gpu ]; then
    command -v cargo >/dev/null 2>&1 || die "target/release/mill-train is missing and cargo is not installed (rustup.rs)"
    log "building mill-train: cargo build --release --locked -p trainer"
    cargo build --release --locked -p trainer
  fi
fi

# --- 3. the CPU image's root file system ----------------------------------------------
scripts/fetch-models.sh
model="$(scripts/fetch-models.sh --print-dir)/lid.176.ftz"
rootfs="$out/rootfs"
rm -rf "$rootfs"
mkdir -p "$rootfs"/{usr/local/bin,etc/ssl/certs,tmp,work,root,usr/local/share/tokenmill/models}
chmod 1777 "$rootfs/tmp"
chmod 700 "$rootfs/root"
# Copies a file (links followed) to the same path under the root file system.
put() {
  mkdir -p "$rootfs$(dirname "$1")"
  cp -L "$1" "$rootfs$1"
}
# Hard-links a folder's tree (a copy where the file systems differ) to a new path.
link_tree() {
  cp -al "$1" "$2" 2>/dev/null || { rm -rf "$2"; cp -a "$1" "$2"; }
}
libs=()
for b in "${bins[@]}"; do
  # Without the DWARF line tables of the release profile (about 190 of a binary's
  # 220 MB); the symbols stay, so backtraces still name functions.
  strip --strip-debug -o "$rootfs/usr/local/bin/$b" "target/release/$b"
  # `ldd` lines: "libx.so => /path (0x...)", and the loader as "/path (0x...)".
  # (without LD_LIBRARY_PATH: --trainer's setup points it at libtorch)
  lddout="$(env -u LD_LIBRARY_PATH ldd "target/release/$b")" || die "ldd target/release/$b failed"
  if grep -q 'not found' <<<"$lddout"; then
    die "target/release/$b: a shared library is not found: $(grep 'not found' <<<"$lddout")"
  fi
  while read -r lib; do libs+=("$lib"); done < <(
    awk '$2 == "=>" && $3 ~ /^\// { print $3 } $1 ~ /^\// { print $1 }' <<<"$lddout")
done
mapfile -t libs < <(printf '%s\n' "${libs[@]}" | sort -u)
for lib in "${libs[@]}"; do put "$lib"; done
log "shared libraries: ${libs[*]}"
cp -L /etc/ssl/certs/ca-certificates.crt "$rootfs/etc/ssl/certs/"
cp "$model" "$rootfs/usr/local/share/tokenmill/models/"
printf 'root:x:0:0:root:/root:/usr/sbin/nologin\nnobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n' \
  >"$rootfs/etc/passwd"
printf 'root:x:0:\nnogroup:x:65534:\n' >"$rootfs/etc/group"
# Names: /etc/hosts first, then DNS (glibc's own files and dns modules, no plugins).
printf 'hosts: files dns\n' >"$rootfs/etc/nsswitch.conf"

# --- 4. the CPU image -----------------------------------------------------------------
image="tokenmill:$version"
# The image a rebuild replaces is removed (unless another name or image still uses it).
drop_replaced() {
  local new
  new="$(podman image inspect --format '{{.Id}}' "$1")"
  if [ -n "$2" ] && [ "$2" != "$new" ]; then podman rmi "$2" >/dev/null 2>&1 || true; fi
}
old="$(podman image inspect --format '{{.Id}}' "$image" 2>/dev/null || true)"
oldtrainer="$(podman image inspect --format '{{.Id}}' "tokenmill-trainer:$version" 2>/dev/null || true)"
changes=(
  --change "ENV=PATH=/usr/local/bin:/usr/bin:/bin"
  --change "ENV=TOKENMILL_CACHE=/usr/local/share/tokenmill"
  --change "ENV=SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt"
  --change "ENV=HOME=/root"
  --change "WORKDIR=/work"
  --change 'CMD=["mill","--help"]'
  --change "LABEL=org.opencontainers.image.title=tokenmill"
  --change "LABEL=org.opencontainers.image.version=$version"
)
log "importing $image"
tar -C "$rootfs" --numeric-owner --owner=0 --group=0 --sort=name -c . \
  | podman import --quiet "${changes[@]}" - "$image" >/dev/null
podman tag "$image" tokenmill:latest
# Every binary has to start: the closure of shared libraries is complete.
for b in "${bins[@]}"; do
  podman run --rm --network none "$image" "$b" --version >/dev/null \
    || die "$b does not start in $image"
done
archive="$out/tokenmill-$version.oci.tar"
rm -f "$archive"
podman save --quiet --format oci-archive -o "$archive" "$image"
log "wrote $archive"
archives=("$archive")

# --- 5. the trainer image -------------------------------------------------------------
if [ "$trainer" = 1 ]; then
  site="$(.cache/torch-venv/bin/python -c 'import os, torch; print(os.path.dirname(os.path.dirname(torch.__file__)))')"
  ctx="$out/trainer"
  rm -rf "$ctx"
  mkdir -p "$ctx/torch" "$ctx/nvidia"
  strip --strip-debug -o "$ctx/mill-train" target/release/mill-train
  strip --strip-debug -o "$ctx/mill-classify-gpu" target/release/mill-classify-gpu
  # libtorch keeps the wheels' layout: libtorch_cuda.so finds the CUDA libraries
  # through its RPATH ($ORIGIN/../../nvidia/*/lib). Hard links where the file system
  # allows, copies elsewhere; static archives and the Python bindings stay out.
  link_tree "$site/torch/lib" "$ctx/torch/lib"
  rm -f "$ctx/torch/lib/libtorch_python.so"
  for d in "$site"/nvidia/*/lib; do
    n="$(basename "$(dirname "$d")")"
    mkdir -p "$ctx/nvidia/$n"
    link_tree "$d" "$ctx/nvidia/$n/lib"
  done
  find "$ctx" \( -name '*.a' -o -name '*.bc' \) -delete
  # The system libraries mill-train, libtorch and the CUDA libraries link that the CPU
  # image lacks (glibc's librt, libdl, libpthread, libutil; zlib) go in at the same paths;
  # libcuda and the rest of the driver come from the NVIDIA container toolkit.
  sys=()
  while read -r lib; do
    case "$lib" in "$PWD/$ctx"/*) continue ;; esac
    [ -e "$rootfs$lib" ] || sys+=("$lib")
  done < <(find "$PWD/$ctx" -type f \( -name 'mill-train' -o -name 'mill-classify-gpu' -o -name '*.so' -o -name '*.so.*' \) \
    -exec env LD_LIBRARY_PATH="$PWD/$ctx/torch/lib" ldd {} + 2>/dev/null \
    | awk '$2 == "=>" && $3 ~ /^\// { print $3 } $1 ~ /^\// && NF == 2 { print $1 }' | sort -u)
  mkdir -p "$ctx/sys"
  for lib in "${sys[@]}"; do
    mkdir -p "$ctx/sys$(dirname "$lib")"
    cp -L "$lib" "$ctx/sys$lib"
  done
  log "system libraries added for the trainer: ${sys[*]:-none}"
  cat >"$ctx/Containerfile" <<EOF
FROM localhost/tokenmill:$version
COPY sys/ /
COPY mill-train /usr/local/bin/mill-train
COPY mill-classify-gpu /usr/local/bin/mill-classify-gpu
COPY torch /opt/libtorch/torch
COPY nvidia /opt/libtorch/nvidia
ENV LD_LIBRARY_PATH=/opt/libtorch/torch/lib
ENV NVIDIA_VISIBLE_DEVICES=all NVIDIA_DRIVER_CAPABILITIES=compute,utility
LABEL org.opencontainers.image.title=tokenmill-trainer
EOF
  timage="tokenmill-trainer:$version"
  log "building $timage (libtorch and the CUDA libraries: several GB)"
  podman build --quiet --layers=false --network none -t "$timage" -f "$ctx/Containerfile" "$ctx" >/dev/null
  podman tag "$timage" tokenmill-trainer:latest
  drop_replaced "$timage" "$oldtrainer"
  rm -rf "$ctx"
  podman run --rm --network none "$timage" mill-train --version >/dev/null \
    || die "mill-train does not start in $timage"
  tarchive="$out/tokenmill-trainer-$version.oci.tar"
  rm -f "$tarchive"
  podman save --quiet --format oci-archive -o "$tarchive" "$timage"
  log "wrote $tarchive"
  archives+=("$tarchive")
fi

# Last: a trainer image built on the replaced CPU image keeps it until now.
drop_replaced "$image" "$old"

# --- 6. sizes -------------------------------------------------------------------------
podman image ls --format '{{.Repository}}:{{.Tag}}\t{{.ID}}\t{{.Size}}' \
  | grep -E '^(localhost/)?tokenmill(-trainer)?:' >&2
ls -lh "${archives[@]}" >&2
