#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# run-kv.sh - part of `make bench`: get/put latency and throughput of the KV
# store per provider, with round trips per operation.
#
#   bench/run-kv.sh BUILD_DIR
#
# For tcp and shm: starts one rkv-server (by PID, stopped on exit), loads
# BENCH_KV_KEYS keys of 1000 bytes, then runs rkv-bench-kv: latency
# (one operation in flight: gets only, then puts only), throughput (a
# 70/20/10 get/put/rmw mix with 16 in flight) and the cached get alone
# (--get-loop: BENCH_KV_GETS synchronous gets of 16 hot 1 KB keys).  Writes
# bench/results/kv-<DATE>.md.  The verbs figures (get with the location
# cached beside perftest ib_read_lat) come from bench/guest-bench.sh.
set -u
O=${1:-build}
cd "$(dirname "$0")/.." || exit 2
BIN=$O/bin
KEYS=${BENCH_KV_KEYS:-50000}
SECS=${BENCH_KV_SECONDS:-5}
GETS=${BENCH_KV_GETS:-1000000}
RES=bench/results
DATE=$(date -u +%Y%m%d-%H%M%S)
MD=$RES/kv-$DATE.md
mkdir -p "$RES" || exit 2
tmp=$(mktemp -d) || exit 2
srv=""
cleanup() {
  [ -n "$srv" ] && kill -TERM "$srv" 2>/dev/null && wait "$srv" 2>/dev/null
  rm -rf "$tmp"
}
trap cleanup EXIT

start_server() {
  # puts at full speed leave a grace period of old blocks to hold
  "$BIN/rkv-server" --listen "$1" --memory 2G --grace 300 --capacity $((KEYS * 2)) \
    --log-level warn >"$tmp/srv.out" 2>"$tmp/srv.err" &
  srv=$!
  for _ in $(seq 1 100); do
    addr=$(sed -n 's/^rkv-server: listening on //p' "$tmp/srv.out")
    [ -n "$addr" ] && return 0
    kill -0 "$srv" 2>/dev/null || break
    sleep 0.1
  done
  echo "bench-kv: rkv-server on $1 did not start: $(tail -1 "$tmp/srv.err")"
  return 1
}

{
  echo "# rkv KV store: $(date -u '+%Y-%m-%d %H:%M UTC'), $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg)"
  echo
  echo "Values of 1000 bytes, $KEYS keys, one client process. Latency runs keep"
  echo "one operation in flight; the mix runs 70% get, 20% put, 10% rmw with 16"
  echo "in flight. RTT/op counts dependent network round trips."
  echo
} >"$MD"
for prov in tcp shm; do
  case $prov in
    tcp) listen=tcp://127.0.0.1:0 ;;
    shm) listen=shm:///rkv-bench-kv-$$ ;;
  esac
  start_server "$listen" || continue
  echo "bench-kv: $prov server at $addr"
  {
    echo "## $prov"
    echo
    echo '```'
    timeout 300 "$BIN/rkv-bench-kv" --servers "$addr" --keys "$KEYS" \
      --seconds "$SECS" --mix 100:0:0:0 --inflight 1 --label "$prov-get"
    timeout 300 "$BIN/rkv-bench-kv" --servers "$addr" --keys "$KEYS" \
      --seconds "$SECS" --mix 0:100:0:0 --inflight 1 --no-load --label "$prov-put"
    timeout 300 "$BIN/rkv-bench-kv" --servers "$addr" --keys "$KEYS" \
      --seconds "$SECS" --mix 70:20:10:0 --inflight 16 --no-load --label "$prov-mix"
    timeout 300 "$BIN/rkv-bench-kv" --servers "$addr" --get-loop "$GETS" \
      --hot 16 --label "$prov-get-loop"
    echo '```'
    echo
  } 2>&1 | tee -a "$MD"
  kill -TERM "$srv" 2>/dev/null
  wait "$srv" 2>/dev/null
  srv=""
done
echo "bench-kv: wrote $MD"
