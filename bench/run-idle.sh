#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# run-idle.sh - what an idle server costs (part of make bench; never a
# test): the CPU an rkv-server (tcp, shm) uses while nobody talks to it,
# beside redis-server and memcached idle in the same run, then with one
# idle client connected; and what its sleep costs the first request after
# a pause (bench/idle: a control message, which the server's CPU answers,
# and a get, one-sided).
#
#   bash bench/run-idle.sh [BUILD_DIR]
#
# CPU is read from /proc/PID/task/*/schedstat (ns on a CPU, every thread)
# over IDLE_SECONDS (10) after a second of settling.  Writes
# bench/results/idle-<DATE>.md.  Starts every server itself on 127.0.0.1
# or a private shm directory and stops it by PID.
# Exit status: 0 when it ran (figures never fail it), 2 when it cannot.
set -u
O=${1:-build}
cd "$(dirname "$0")/.." || exit 2

SRV=$O/bin/rkv-server
PROBE=$O/bin/rkv-bench-idle
SECS=${IDLE_SECONDS:-10}
RES=bench/results
DATE=$(date -u +%Y%m%d-%H%M%S)
MD=$RES/idle-$DATE.md
. bench/ycsb/peers.sh
bench_setup run-idle "$SRV" "$PROBE"

# start_rkv ADDR: PID in RPID, bound address in RADDR
start_rkv() {
  RKV_SHM_DIR=$tmp/shm start_rkv_server "$tmp/rkv.out" --listen "$1" \
    --buckets 16 && return 0
  echo "run-idle: rkv-server did not start: $RKV_WHY" >&2
  return 1
}

stop() {
  kill "$1" 2>/dev/null
  wait "$1" 2>/dev/null
}

rows=()
probes=()
for prov in tcp shm; do
  addr=tcp://127.0.0.1:0
  [ "$prov" = shm ] && addr=shm:///rkv-idle-$$
  start_rkv "$addr" || continue
  alone=$(idle_pct "$RPID" "$SECS")
  # one client connected, idle (its probe sleeps before the first request)
  RKV_SHM_DIR=$tmp/shm "$PROBE" --servers "$RADDR" --tries 1 \
    --gap-ms $(((SECS + 3) * 1000)) >/dev/null 2>&1 &
  cpid=$!
  PIDS+=("$cpid")
  with=$(idle_pct "$RPID" "$SECS")
  stop "$cpid"
  rows+=("| rkv-server ($prov) | $alone | $with |")
  p=$(RKV_SHM_DIR=$tmp/shm "$PROBE" --servers "$RADDR" --tries 50 --gap-ms 20 2>&1)
  while read -r l; do probes+=("$prov: $l"); done <<<"$p"
  stop "$RPID"
done
if command -v redis-server >/dev/null &&
  start_peer "$tmp/redis.log" redis-server --port @PORT@ --save '' \
    --appendonly no --bind 127.0.0.1; then
  rpid=${PIDS[-1]}
  rows+=("| redis-server | $(idle_pct "$rpid" "$SECS") | |")
  stop "$rpid"
fi
user=()
[ "$(id -u)" = 0 ] && user=(-u root)
if command -v memcached >/dev/null &&
  start_peer "$tmp/mc.log" memcached "${user[@]}" -l 127.0.0.1 -p @PORT@ -U 0 \
    -t 2; then
  mpid=${PIDS[-1]}
  rows+=("| memcached | $(idle_pct "$mpid" "$SECS") | |")
  stop "$mpid"
fi

{
  echo "# Idle servers, $DATE"
  echo
  echo "CPU while idle, per cent of one core over $SECS s (goal: rkv <= 0.5):"
  echo
  echo "| server | nobody connected | one idle client |"
  echo "|---|---:|---:|"
  printf '%s\n' "${rows[@]}"
  echo
  echo "The first request after 20 ms of silence, beside one straight after"
  echo "it (bench/idle; stats is answered by the server's CPU, a get is"
  echo "one-sided):"
  echo
  printf '    %s\n' "${probes[@]}"
} | tee "$MD"
echo "run-idle: wrote $MD"
