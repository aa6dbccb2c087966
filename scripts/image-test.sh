#!/usr/bin/env bash
# CI check of the CPU image (scripts/image.sh): the `text` step of fixtures/pipeline.toml
# (extract, langid, quality, toxicity, pii) runs on the fixture crawl from S3 once with
# the host's target/release/mill and once with `mill` inside tokenmill:<version>, and
# the two runs' document shards (Parquet) must be the same bytes. That shows the image
# holds every shared library, the lid.176 model where langid looks for it, and a
# working S3 client. Both runs read from and write to the S3 test server on loopback
# (scripts/s3-server.sh); the container shares the host's network, and sees the
# repository read-only as its working directory (the pipeline's list files are
# relative paths under fixtures/).
# Run after a release build (CI: after the quickstart), as root on Debian 12.
set -euo pipefail
cd "$(dirname "$0")/.."
started=$SECONDS

log() { printf 'image-test: %s\n' "$*" >&2; }
die() { printf 'image-test: FAILED: %s\n' "$*" >&2; exit 1; }

scripts/image.sh
version="$(awk '/^\[workspace\.package\]/ { p = 1; next } /^\[/ { p = 0 }
  p && /^version *=/ { gsub(/.*= *"|".*/, ""); print; exit }' Cargo.toml)"
image="tokenmill:$version"
# scripts/image.sh wrote the engine settings this machine needs (runc, cgroupfs, no
# default ulimits) unless the caller has its own.
export CONTAINERS_CONF="${CONTAINERS_CONF:-$PWD/out/image/containers.conf}"

source scripts/s3-server.sh
bucket=tokenmill-image-test
log "uploading fixtures/crawl to s3://$bucket/crawl/"
python3 - "$bucket" <<'PY'
import os, pathlib, sys
import boto3
s3 = boto3.client("s3", endpoint_url=os.environ["TOKENMILL_TEST_S3_ENDPOINT"])
bucket = sys.argv[1]
s3.create_bucket(Bucket=bucket)
for f in sorted(pathlib.Path("fixtures/crawl").glob("*.warc*")):
    s3.upload_file(str(f), bucket, f"crawl/{f.name}")
PY

# fixtures/pipeline.toml with its top-level input and output moved to S3 and only the
# `text` step kept (every [config.*] table stays).
work=out/image-test
rm -rf "$work"
mkdir -p "$work"
pipeline_for() {
  awk -v input="s3://$bucket/crawl" -v output="s3://$bucket/$1" '
    function flush() { if (!step || keep) printf "%s", buf; buf = "" }
    /^\[/ { flush(); table = 1; step = ($0 == "[[step]]"); keep = 0 }
    !table && /^input *=/ { $0 = "input = \"" input "\"" }
    !table && /^output *=/ { $0 = "output = \"" output "\"" }
    step && /^name *= *"text" *$/ { keep = 1 }
    { buf = buf $0 "\n" }
    END { flush() }' fixtures/pipeline.toml >"$work/$1.toml"
  [ "$(grep -c '^\[\[step\]\]' "$work/$1.toml")" = 1 ] \
    && grep -qx "input = \"s3://$bucket/crawl\"" "$work/$1.toml" \
    && grep -qx "output = \"s3://$bucket/$1\"" "$work/$1.toml" \
    || die "could not derive $work/$1.toml from fixtures/pipeline.toml"
}
pipeline_for host
pipeline_for image

log "host: target/release/mill run $work/host.toml --only text"
AWS_ENDPOINT_URL="$TOKENMILL_TEST_S3_ENDPOINT" \
  target/release/mill run "$work/host.toml" --only text >&2 \
  || die "mill run on the host failed"
log "image: mill run $work/image.toml --only text in $image"
podman run --rm --network host -v "$PWD:/src:ro" -w /src \
  -e AWS_ENDPOINT_URL="$TOKENMILL_TEST_S3_ENDPOINT" -e AWS_ACCESS_KEY_ID \
  -e AWS_SECRET_ACCESS_KEY -e AWS_REGION -e AWS_EC2_METADATA_DISABLED \
  "$image" mill run "$work/image.toml" --only text >&2 \
  || die "mill run in $image failed"

# The document shards only: markers and logs hold hosts and times.
shards="$(python3 - "$bucket" <<'PY'
import os, sys
import boto3
s3 = boto3.client("s3", endpoint_url=os.environ["TOKENMILL_TEST_S3_ENDPOINT"])
bucket = sys.argv[1]
def shards(prefix):
    out = {}
    for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix):
        for o in page.get("Contents", []):
            if o["Key"].endswith(".parquet"):
                body = s3.get_object(Bucket=bucket, Key=o["Key"])["Body"].read()
                out[o["Key"][len(prefix):]] = body
    return out
host, image = shards("host/text/"), shards("image/text/")
fail = []
if not host:
    fail.append("the host run wrote no shard under host/text/")
for k in sorted(set(host) - set(image)):
    fail.append(f"only the host run wrote {k}")
for k in sorted(set(image) - set(host)):
    fail.append(f"only the image run wrote {k}")
for k in sorted(set(host) & set(image)):
    if host[k] != image[k]:
        fail.append(f"{k} differs ({len(host[k])} bytes on the host, {len(image[k])} in the image)")
if fail:
    print("\n".join(fail), file=sys.stderr)
    sys.exit(1)
print(len(host))
PY
)" || die "the image's output differs from the host's (above)"

# sed, not head: head would close the pipe after one line and podman, listing the
# image's second tag, would die of SIGPIPE (a 141 that pipefail turns into a failure).
size="$(podman image ls --format '{{.Size}}' "$image" | sed -n 1p)"
echo "image test passed: $image ($size) wrote the same $shards document shards as the host's mill, in $((SECONDS - started)) s"
