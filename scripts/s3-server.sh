#!/usr/bin/env bash
# Sourced by test.sh and bench.sh: installs (if needed) and starts the S3-compatible
# test server on a free loopback port, exports the variables the tests read, and stops
# the server when the calling script exits.
# With SLURM_CI_BRIDGE_ADDR (exported by slurm-up.sh's multi-node mode) the jobs in the
# nodes' network namespaces must reach it too, through the bridge: it then listens on
# all addresses (moto takes one -H) and TOKENMILL_TEST_S3_NODE_ENDPOINT is the
# endpoint for them (their AWS_ENDPOINT_URL).
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
if ! python3 -c 'import importlib.metadata as m; assert m.version("moto") == "5.1.22" and m.version("fasttext-predict") == "0.9.2.4" and m.version("datatrove") == "0.10.1" and m.version("transformers") == "5.24.0" and m.version("tokenizers") == "0.23.3" and m.version("kubernetes-validate") == "1.37.0" and m.version("kiwipiepy") == "0.21.0" and m.version("pythainlp") == "5.4.0" and m.version("sudachidict-core") == "20261015"' 2>/dev/null; then
  python3 -m pip install --quiet --disable-pip-version-check -r "$here/requirements-test.txt"
fi
s3_host=127.0.0.1
if [ -n "${SLURM_CI_BRIDGE_ADDR:-}" ]; then s3_host=0.0.0.0; fi
port="$(python3 -c 'import socket, sys; s = socket.socket(); s.bind((sys.argv[1], 0)); print(s.getsockname()[1])' "$s3_host")"
log="${TMPDIR:-/tmp}/tokenmill-s3-$port.log"
python3 -m moto.server -H "$s3_host" -p "$port" >"$log" 2>&1 &
s3_pid=$!
# The log goes with the server (a failed start prints it first).
trap 'kill "$s3_pid" 2>/dev/null || true; rm -f "$log"' EXIT
for _ in $(seq 1 100); do
  if python3 -c "import socket; socket.create_connection(('127.0.0.1', $port), 0.2)" 2>/dev/null; then
    break
  fi
  sleep 0.1
done
python3 -c "import socket; socket.create_connection(('127.0.0.1', $port), 1)" || {
  echo "the S3 test server did not start; its log:" >&2
  cat "$log" >&2
  exit 1
}
# Static test credentials for the loopback server; no instance metadata lookups.
export AWS_ACCESS_KEY_ID=tokenmill-test AWS_SECRET_ACCESS_KEY=tokenmill-test
export AWS_REGION=us-east-1 AWS_EC2_METADATA_DISABLED=true
export TOKENMILL_TEST_S3_ENDPOINT="http://127.0.0.1:$port"
echo "S3 test server: $TOKENMILL_TEST_S3_ENDPOINT (log: $log)" >&2
if [ -n "${SLURM_CI_BRIDGE_ADDR:-}" ]; then
  export TOKENMILL_TEST_S3_NODE_ENDPOINT="http://$SLURM_CI_BRIDGE_ADDR:$port"
  python3 -c "import socket; socket.create_connection(('$SLURM_CI_BRIDGE_ADDR', $port), 1)" || {
    echo "the S3 test server is not reachable at $TOKENMILL_TEST_S3_NODE_ENDPOINT" >&2
    exit 1
  }
  echo "S3 test server for Slurm nodes: $TOKENMILL_TEST_S3_NODE_ENDPOINT" >&2
fi
