#!/usr/bin/env bash
# run.sh - `make run`: the demo on an embedded default configuration.
# Starts an rkv-server on 127.0.0.1 with the tcp provider, loads 100k keys,
# runs a short mixed workload with a progress line, prints throughput,
# latency percentiles and round trips per operation, stops the server.
set -euo pipefail
O=${1:-build}
cd "$(dirname "$0")/.."
KEYS=${RKV_RUN_KEYS:-100000}
SECONDS_RUN=${RKV_RUN_SECONDS:-10}

out=$(mktemp)
"$O/bin/rkv-server" --listen tcp://127.0.0.1:0 --memory 512M \
  --capacity $((KEYS * 2)) --log-level warn >"$out" &
srv=$!
trap 'kill -TERM $srv 2>/dev/null; wait $srv 2>/dev/null; rm -f "$out"' EXIT
addr=""
for _ in $(seq 1 100); do
  addr=$(sed -n 's/^rkv-server: listening on //p' "$out")
  [ -n "$addr" ] && break
  kill -0 $srv 2>/dev/null || { echo "run: rkv-server failed to start" >&2; exit 2; }
  sleep 0.1
done
[ -n "$addr" ] || { echo "run: rkv-server did not start listening" >&2; exit 2; }
echo "rkv-server (pid $srv) listening on $addr"
"$O/bin/rkv-bench-kv" --servers "$addr" --keys "$KEYS" \
  --seconds "$SECONDS_RUN" --mix 70:20:10:0 --value-size 1000 --inflight 16 \
  --progress
