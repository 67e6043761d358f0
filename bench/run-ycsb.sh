#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# run-ycsb.sh - YCSB workloads A, B, C, F and D on rkv (tcp and shm
# providers) beside Redis and memcached, all at the same threads and batch.
#
#   bench/run-ycsb.sh BUILD_DIR
#
# Starts its own redis-server, memcached and two rkv-servers on 127.0.0.1
# (free ports it picks; stopped by PID on exit), loads recordcount 1 KB
# records (fieldcount=10, fieldlength=100) into each store once, then runs
# each workload's run phase against it.  D runs last: it inserts records.
#
# Writes bench/results/ycsb-<DATE>.json (one JSON object per phase),
# bench/results/ycsb-<DATE>.md (throughput and p99 per store and workload,
# the ratios rkv/Redis and rkv/memcached, RTTs per operation for rkv, the
# goals, and every run's table) and, with gnuplot, ycsb-<DATE>.png (CDFs).
#
# Knobs (environment): YCSB_RECORDS (100000), YCSB_OPS (300000 per run),
# YCSB_THREADS (2), YCSB_BATCH (8), YCSB_MAXTIME (seconds per run, 30),
# YCSB_WORKLOADS ("a b c f d"; e runs too, and reads "not run" on rkv),
# YCSB_WORKLOAD_DIR (workloads: where workloadX lives; point it at a
# checkout's workloads/ to run YCSB's own files unchanged),
# YCSB_STORES ("redis memcached rkv-tcp rkv-shm"), YCSB_SEED (1),
# YCSB_PROPS (more workload properties, name=value separated by spaces,
# for every phase: e.g. "writeallfields=true" to update whole records
# instead of YCSB's default one field).
# Exit status: 0 when it ran (figures never fail it), 2 when it cannot.
set -u
O=${1:-build}
cd "$(dirname "$0")/.." || exit 2

Y=$O/bin/rkv-ycsb
SRV=$O/bin/rkv-server
RECORDS=${YCSB_RECORDS:-100000}
OPS=${YCSB_OPS:-300000}
THREADS=${YCSB_THREADS:-2}
BATCH=${YCSB_BATCH:-8}
MAXTIME=${YCSB_MAXTIME:-30}
WORKLOADS=${YCSB_WORKLOADS:-a b c f d}
WDIR=${YCSB_WORKLOAD_DIR:-workloads}
STORES=${YCSB_STORES:-redis memcached rkv-tcp rkv-shm}
SEED=${YCSB_SEED:-1}
PROPS=${YCSB_PROPS:-}
RES=bench/results
DATE=$(date -u +%Y%m%d-%H%M%S)
JSON=$RES/ycsb-$DATE.json
MD=$RES/ycsb-$DATE.md
PNG=$RES/ycsb-$DATE.png

for w in a $WORKLOADS; do
  if [ ! -r "$WDIR/workload$w" ]; then
    echo "run-ycsb: $WDIR/workload$w: no such workload file" \
      "(YCSB_WORKLOAD_DIR names a directory of workloada..workloadf)" >&2
    exit 2
  fi
done
for b in "$Y" "$SRV"; do
  if [ ! -x "$b" ]; then
    echo "run-ycsb: $b not found (run make first)" >&2
    exit 2
  fi
done
mkdir -p "$RES" || exit 2
tmp=$(mktemp -d) || exit 2
PIDS=()

cleanup() {
  local p
  for p in "${PIDS[@]}"; do
    kill "$p" 2>/dev/null
  done
  for p in "${PIDS[@]}"; do
    wait "$p" 2>/dev/null
  done
  PIDS=()
  rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

. bench/ycsb/peers.sh

# start_rkv LISTEN LOG: start an rkv-server; set ADDR to its address.
# (Runs in this shell, not in $(...), so its PID stays in PIDS.)
start_rkv() {
  if start_rkv_server "$2.out" --listen "$1" \
    --capacity $((RECORDS * 2 + 100000)) --memory 1G; then
    ADDR=$RADDR
    return 0
  fi
  echo "run-ycsb: rkv-server --listen $1 did not start:" >&2
  tail -5 "$2.out.err" >&2
  return 1
}

# start STORE: start its server; set DB, ADDR (or return 1 to skip it).
start() {
  case $1 in
  redis)
    if ! command -v redis-server >/dev/null; then
      echo "run-ycsb: redis-server not found; skipping Redis" \
        "(install it with: apt-get install redis-server)" >&2
      return 1
    fi
    if ! start_peer "$tmp/redis.log" redis-server --port @PORT@ --save '' \
      --appendonly no --bind 127.0.0.1; then
      echo "run-ycsb: redis-server did not start:" $PEER_WHY >&2
      return 1
    fi
    DB=redis ADDR=127.0.0.1:$PORT
    ;;
  memcached)
    if ! command -v memcached >/dev/null; then
      echo "run-ycsb: memcached not found; skipping memcached" \
        "(install it with: apt-get install memcached)" >&2
      return 1
    fi
    local user=()
    [ "$(id -u)" = 0 ] && user=(-u root)
    if ! start_peer "$tmp/memcached.log" memcached "${user[@]}" -l 127.0.0.1 \
      -p @PORT@ -U 0 -m 2048 -t 2; then
      echo "run-ycsb: memcached did not start:" $PEER_WHY >&2
      return 1
    fi
    DB=memcached ADDR=127.0.0.1:$PORT
    ;;
  rkv-tcp)
    start_rkv tcp://127.0.0.1:0 "$tmp/rkv-tcp" || return 1
    DB=rkv
    ;;
  rkv-shm)
    start_rkv "shm:///rkv-ycsb-$$" "$tmp/rkv-shm" || return 1
    DB=rkv
    ;;
  *)
    echo "run-ycsb: unknown store '$1' in YCSB_STORES" >&2
    return 1
    ;;
  esac
  return 0
}

# stop the servers of the store just measured (all PIDs we hold)
stop_all() {
  local p
  for p in "${PIDS[@]}"; do
    kill "$p" 2>/dev/null
  done
  for p in "${PIDS[@]}"; do
    wait "$p" 2>/dev/null
  done
  PIDS=()
}

COMMON=(-p recordcount="$RECORDS" -p operationcount="$OPS"
  -p fieldcount=10 -p fieldlength=100 -p maxexecutiontime="$MAXTIME"
  --threads "$THREADS" --batch "$BATCH" --seed "$SEED" --json "$JSON")
for kv in $PROPS; do COMMON+=(-p "$kv"); done
TMO=$((MAXTIME * 2 + 120))
t_start=$(date +%s)

echo "run-ycsb: $RECORDS records of 1 KB, $OPS operations per run" \
  "(at most ${MAXTIME}s), $THREADS threads, batch $BATCH${PROPS:+, $PROPS};" \
  "stores: $STORES"
for store in $STORES; do
  start "$store" || continue
  echo "run-ycsb: $store ($DB at $ADDR)"
  out=$tmp/$store-load.txt
  timeout -k 5 "$TMO" "$Y" -P "$WDIR/workloada" "${COMMON[@]}" \
    --phase load --db "$DB" --servers "$ADDR" --label "$store" >"$out" 2>&1
  rc=$?
  sed 's/^/  /' "$out" | grep -E '^\s+\[LOAD\]|rkv-ycsb: [^:]*: (cannot|thread)'
  cat "$out" >>"$tmp/all.txt"
  if [ "$rc" = 2 ] || [ "$rc" = 124 ]; then
    echo "run-ycsb: $store: load failed (status $rc); skipping it"
    stop_all
    continue
  fi
  for w in $WORKLOADS; do
    out=$tmp/$store-$w.txt
    timeout -k 5 "$TMO" "$Y" -P "$WDIR/workload$w" "${COMMON[@]}" \
      --phase run --db "$DB" --servers "$ADDR" --label "$store" \
      >"$out" 2>&1
    rc=$?
    grep -E '^\[RUN\]' "$out" | sed "s/^/  workload$w: /"
    [ "$rc" = 0 ] || echo "  workload$w: exited with status $rc" \
      "$([ "$rc" = 124 ] && echo '(timeout)')"
    { echo; cat "$out"; } >>"$tmp/all.txt"
  done
  stop_all
done
t_end=$(date +%s)

if [ ! -s "$JSON" ]; then
  echo "run-ycsb: no results" >&2
  exit 2
fi

# throughput of STORE on workload W from its run's table
tput() {
  local f=$tmp/$1-$2.txt
  [ -f "$f" ] && sed -n 's/^\[RUN\] .* s: \([0-9]*\) ops\/s$/\1/p' "$f" | head -1
}
goal() {
  local a b w=$3 min=$4 x y
  x=$(tput "$1" "$w"); y=$(tput "$2" "$w")
  if [ -z "$x" ] || [ -z "$y" ] || [ "$y" = 0 ]; then
    echo "- $1 >= ${min}x $2 on workload$w: not measured"
    return
  fi
  awk -v x="$x" -v y="$y" -v m="$min" -v a="$1" -v b="$2" -v w="$w" \
    'BEGIN { r = x / y; printf "- %s >= %sx %s on workload%s: %.2fx (%s vs %s ops/s): %s\n",
      a, m, b, w, r, x, y, (r >= m ? "met" : "NOT met") }'
}

{
  echo "# rkv YCSB benchmark, $DATE (UTC)"
  echo
  echo "Host: $(uname -srm), $(nproc) CPUs. Commit:" \
    "$(git rev-parse --short HEAD 2>/dev/null || echo unknown)." \
    "Took $((t_end - t_start)) s."
  echo "Every store: $RECORDS records of 1 KB (fieldcount=10," \
    "fieldlength=100) loaded once, then the run phase of each workload:" \
    "$OPS operations (at most ${MAXTIME} s), $THREADS threads, batch" \
    "$BATCH (operations in flight per thread), seed $SEED," \
    "${PROPS:+properties $PROPS,} all on" \
    "127.0.0.1. Servers: $(redis-server --version 2>/dev/null |
      awk '{print "Redis " $3}' | tr -d 'v='), memcached" \
    "$(memcached -V 2>/dev/null | awk '{print $2}') (-t 2), rkv-server" \
    "(tcp and shm providers)."
  echo "p99 is the worst operation type's p99 in that run (us)."
  echo "Redis pipelines up to the batch; memcached sends reads as one"
  echo "multi-get per batch and writes one at a time (see bench/ycsb/README.md)."
  echo
  "$Y" --summary "$JSON"
  echo
  echo "## Goals (reported, not tested)"
  echo
  for w in b c; do
    goal rkv-tcp redis "$w" 1.5
  done
  for w in b c; do
    goal rkv-shm redis "$w" 20
  done
  echo
  echo "## Every run"
  echo
  echo '```'
  cat "$tmp/all.txt"
  echo '```'
} >"$MD"

if command -v gnuplot >/dev/null; then
  "$Y" --json "$JSON" --plot "$PNG" >/dev/null && echo "run-ycsb: CDFs in $PNG"
else
  echo "run-ycsb: gnuplot not found: no CDF plot (apt-get install gnuplot-nox)"
fi
echo
sed -n '/^| workload/,/^## Goals/p' "$MD" | sed '$d'
sed -n '/^## Goals/,/^## Every run/p' "$MD" | sed '$d'
echo "run-ycsb: wrote $MD and $JSON"
exit 0
