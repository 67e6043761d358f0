#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# guest-bench.sh - the verbs half of `make bench`, run INSIDE the Soft-RoCE
# guest by bench/run.sh (through tests/softroce/vm-run.sh): perftest's
# ib_read_lat, ib_write_lat (8, 64, 4096 B) and ib_atomic_lat (CMP_AND_SWAP)
# between a server and a client in this guest, then rkv-bench-transport
# --provider verbs with the perftest figures passed as reference rows, so
# one table shows both and the goals section prints verbs/perftest ratios.
#
#   bench/guest-bench.sh BUILD_DIR [JSON_OUT]
#
# perftest's "t_typical" (its median) is the p50 compared against rkv's
# p50; its 99% percentile column goes in the p99 column.  Every step runs
# under `timeout`; a perftest that fails only drops its reference row.
# Knobs: BENCH_GUEST_ITERS (rkv, default 2000), BENCH_PERFTEST_ITERS
# (default 2000), BENCH_SIZES (default 8,64,4096), BENCH_GOAL_ROUNDS (3:
# the cached get beside ib_read_lat, a pair a round).
set -u
O=${1:-build}
JSON=${2:-}
cd "$(dirname "$0")/.." || exit 2

DEV=${SOFTROCE_DEV:-rxe0}
GIDX=${SOFTROCE_GID_INDEX:-1}
PT_ITERS=${BENCH_PERFTEST_ITERS:-2000}
RKV_ITERS=${BENCH_GUEST_ITERS:-2000}
SIZES=${BENCH_SIZES:-8,64,4096}
BIN=$O/bin/rkv-bench-transport
PORT=18600
REFS=()

# Wait (bounded) until something listens on TCP port $1.
wait_listen() {
  local i
  for i in $(seq 1 100); do
    if command -v ss >/dev/null 2>&1; then
      ss -ltn 2>/dev/null | grep -q ":$1 " && return 0
    elif [ "$i" -ge 20 ]; then
      return 0
    fi
    sleep 0.1
  done
  return 1
}

# perftest TOOL OP SIZE [EXTRA...]: run a server and a client, add a ref row.
perftest() {
  local tool=$1 op=$2 size=$3; shift 3
  local log spid line p50 p99
  PORT=$((PORT + 1))
  log=$(mktemp)
  timeout -k 5 120 "$tool" -d "$DEV" -x "$GIDX" -F -p "$PORT" \
    -n "$PT_ITERS" "$@" >/dev/null 2>&1 &
  spid=$!
  if ! wait_listen "$PORT"; then
    echo "guest-bench: $tool server did not listen on port $PORT"
    kill "$spid" 2>/dev/null; wait "$spid" 2>/dev/null
    rm -f "$log"; return 1
  fi
  timeout -k 5 120 "$tool" -d "$DEV" -x "$GIDX" -F -p "$PORT" \
    -n "$PT_ITERS" "$@" 127.0.0.1 >"$log" 2>&1
  local rc=$?
  wait "$spid" 2>/dev/null
  # Result line: #bytes #iterations t_min t_max t_typical t_avg t_stdev
  # 99% 99.9%
  line=$(awk -v s="$size" '$1 == s && NF >= 7 { print; exit }' "$log")
  if [ "$rc" != 0 ] || [ -z "$line" ]; then
    echo "guest-bench: $tool $* failed (exit $rc):"
    tail -5 "$log" | sed 's/^/    /'
    rm -f "$log"; return 1
  fi
  p50=$(echo "$line" | awk '{ print $5 }')
  p99=$(echo "$line" | awk '{ print (NF >= 8 ? $8 : 0) }')
  printf 'perftest %-13s %5s B  t_typical %8s us  t_avg %8s us  99%% %8s us\n' \
    "$tool" "$size" "$p50" "$(echo "$line" | awk '{ print $6 }')" "$p99"
  REFS+=(--ref "perftest,$op,$size,$p50,$p99")
  rm -f "$log"
}

echo "guest-bench: $(uname -r), device $DEV, GID index $GIDX," \
  "RKV_VERBS_IP=${RKV_VERBS_IP:-unset}"
if ! command -v ib_read_lat >/dev/null 2>&1; then
  echo "guest-bench: perftest not installed; no reference rows"
else
  IFS=, read -r -a SZ <<<"$SIZES"
  for s in "${SZ[@]}"; do
    perftest ib_read_lat read "$s" -s "$s"
    perftest ib_write_lat write "$s" -s "$s"
  done
  perftest ib_atomic_lat cas 8 -A CMP_AND_SWAP
fi

if [ ! -x "$BIN" ]; then
  echo "guest-bench: $BIN not built"
  exit 1
fi
echo
timeout -k 5 600 "$BIN" --provider verbs --iters "$RKV_ITERS" \
  --warmup $((RKV_ITERS / 10)) --sizes "$SIZES" --chain 8 \
  ${JSON:+--json "$JSON"} "${REFS[@]}"
rc=$?
[ "$rc" = 0 ] || echo "guest-bench: rkv-bench-transport exited with $rc"

# The KV store on verbs: get with the location cached (one doorbell: the
# 8-byte slot READ and the block READ) beside ib_read_lat of the block size,
# BENCH_GOAL_ROUNDS (3) times, a pair a round: one "goal: verbs get" line
# each (bench/run-goals.sh reads them from run.sh's table).
KV=$O/bin/rkv-bench-kv
SRV=$O/bin/rkv-server
if [ -x "$KV" ] && [ -x "$SRV" ] && [ -n "${RKV_VERBS_IP:-}" ]; then
  out=$(mktemp)
  timeout -k 5 900 "$SRV" --listen "verbs://$RKV_VERBS_IP:0" --memory 64M \
    --capacity 20000 --log-level warn >"$out" 2>/dev/null &
  spid=$!
  addr=""
  for _ in $(seq 1 200); do
    addr=$(sed -n 's/^rkv-server: listening on //p' "$out")
    [ -n "$addr" ] && break
    sleep 0.1
  done
  [ -n "$addr" ] || echo "guest-bench: rkv-server on verbs did not start"
  for round in $(seq 1 "${BENCH_GOAL_ROUNDS:-3}"); do
    [ -n "$addr" ] || break
    echo
    # a 1000-byte value with a 13-byte key is a 1088-byte block
    REFS=()
    perftest ib_read_lat read 1088 -s 1088
    kvout=$(timeout -k 5 240 "$KV" --servers "$addr" --keys 2000 \
      --seconds "${BENCH_GUEST_KV_SECONDS:-5}" --mix 100:0:0:0 --inflight 1 \
      --label verbs-get 2>&1)
    echo "$kvout"
    get50=$(echo "$kvout" | awk '$1 == "get" { print $4 }')
    ref=$(printf '%s\n' "${REFS[@]}" | awk -F, '/perftest,read,1088,/ { print $4 }')
    if [ -n "$get50" ] && [ -n "$ref" ]; then
      awk -v g="$get50" -v r="$ref" -v n="$round" 'BEGIN { printf "goal: verbs get (cached) p50 %.2f us / ib_read_lat 1088 B %.2f us = %.2fx (goal <= 1.3x), round %d\n", g, r, g / r, n }'
    fi
  done
  kill -TERM "$spid" 2>/dev/null
  wait "$spid" 2>/dev/null
  rm -f "$out"
fi
exit "$rc"
