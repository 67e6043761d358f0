#!/usr/bin/env bash
# run.sh - `make run`: the demo on an embedded default configuration.
# Starts an rkv-server on 127.0.0.1 with the tcp provider, loads 100k
# records of 1 KB with rkv-ycsb, runs YCSB workload B (95% reads, 5%
# updates, zipfian) for a short while with a progress line, prints
# throughput, latency percentiles and round trips per operation, and stops
# the server.  Knobs: RKV_RUN_RECORDS, RKV_RUN_OPS, RKV_RUN_THREADS,
# RKV_RUN_BATCH.  The server's configuration and log (its stderr) are
# shown only when something fails.
set -euo pipefail
O=${1:-build}
cd "$(dirname "$0")/.."
RECORDS=${RKV_RUN_RECORDS:-100000}
OPS=${RKV_RUN_OPS:-300000}

out=$(mktemp)
log=$(mktemp)
"$O/bin/rkv-server" --listen tcp://127.0.0.1:0 --memory 512M \
  --capacity $((RECORDS * 2)) --log-level warn >"$out" 2>"$log" &
srv=$!
trap 'kill -TERM $srv 2>/dev/null; wait $srv 2>/dev/null; rm -f "$out" "$log"' EXIT
# fail MESSAGE: the message and the server's own words, then exit 2
fail() {
  echo "run: $1; rkv-server's output:" >&2
  sed 's/^/  /' "$out" "$log" | tail -n 40 >&2
  exit 2
}
addr=""
for _ in $(seq 1 100); do
  addr=$(sed -n 's/^rkv-server: listening on //p' "$out")
  [ -n "$addr" ] && break
  kill -0 $srv 2>/dev/null || fail "rkv-server failed to start"
  sleep 0.1
done
[ -n "$addr" ] || fail "rkv-server did not start listening"
echo "rkv-server (pid $srv) listening on $addr"
rc=0
"$O/bin/rkv-ycsb" -P workloads/workloadb --db rkv --servers "$addr" \
  -p recordcount="$RECORDS" -p operationcount="$OPS" \
  -p fieldcount=10 -p fieldlength=100 \
  --threads "${RKV_RUN_THREADS:-2}" --batch "${RKV_RUN_BATCH:-8}" --progress || rc=$?
[ "$rc" = 0 ] || fail "rkv-ycsb exited with status $rc"
