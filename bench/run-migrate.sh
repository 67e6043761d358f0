#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# run-migrate.sh - YCSB B on a cluster in etcd before, during and after a
# live join, then during a drain (part of make bench; never a test).
#
# Starts its own etcd (Debian's etcd-server) and four rkv-servers on
# 127.0.0.1, makes the map of three, loads the records through the map,
# then runs workload B three times: before, while `rkv admin join` adds
# the fourth server (started together with it), and after; then once more
# while `rkv admin drain` takes it out again.  Writes the table to
# bench/results/migrate-<DATE>.md: throughput and p99 of each run, the
# join's and drain's time, keys moved and longest freeze.
#   bash bench/run-migrate.sh [BUILD_DIR]
# Knobs: MIG_RECORDS (100000), MIG_OPS (300000 per run), MIG_THREADS (2),
# MIG_BATCH (8), MIG_PROVIDER (tcp; or shm).
# Exit status: 0 when it ran (figures never fail it), 2 when it cannot.
set -u
O=${1:-build}
cd "$(dirname "$0")/.." || exit 2

Y=$O/bin/rkv-ycsb
SRV=$O/bin/rkv-server
CLI=$O/bin/rkv
RECORDS=${MIG_RECORDS:-100000}
OPS=${MIG_OPS:-300000}
THREADS=${MIG_THREADS:-2}
BATCH=${MIG_BATCH:-8}
PROV=${MIG_PROVIDER:-tcp}
RES=bench/results
DATE=$(date -u +%Y%m%d-%H%M%S)
MD=$RES/migrate-$DATE.md

for b in "$Y" "$SRV" "$CLI"; do
  if [ ! -x "$b" ]; then
    echo "run-migrate: $b not found (run make first)" >&2
    exit 2
  fi
done
if ! command -v etcd >/dev/null; then
  echo "run-migrate: etcd not found (apt-get install etcd-server); skipped" >&2
  exit 0
fi
mkdir -p "$RES" || exit 2
tmp=$(mktemp -d) || exit 2
PIDS=()
. bench/ycsb/peers.sh
trap 'peers_stop; rm -rf "$tmp"' EXIT
trap 'exit 130' INT TERM

if ! start_etcd "$tmp"; then
  echo "run-migrate: etcd did not start: $PEER_WHY" >&2
  exit 2
fi
URL=etcd://127.0.0.1:$PORT/bench
export RKV_SHM_DIR=$tmp/shm

# start_srv NAME: an rkv-server registered in the cluster
start_srv() {
  local listen=tcp://127.0.0.1:0 i
  [ "$PROV" = shm ] && listen="shm:///rkv-mig-$$-$1"
  "$SRV" --listen "$listen" --name "$1" --cluster "$URL" \
    --capacity $((RECORDS + 50000)) --memory 1G --log-level warn \
    >"$tmp/$1.out" 2>"$tmp/$1.err" &
  PIDS+=($!)
  for i in $(seq 1 100); do
    grep -q '^rkv-server: listening on' "$tmp/$1.out" && return 0
    kill -0 "${PIDS[-1]}" 2>/dev/null || break
    sleep 0.1
  done
  echo "run-migrate: rkv-server $1 did not start:" >&2
  tail -3 "$tmp/$1.err" >&2
  return 1
}

for s in s1 s2 s3 s4; do start_srv $s || exit 2; done
"$CLI" admin --cluster "$URL" init s1 s2 s3 >"$tmp/init.txt" 2>&1 || {
  cat "$tmp/init.txt" >&2
  exit 2
}
COMMON=(-P workloads/workloadb -p recordcount="$RECORDS"
  -p operationcount="$OPS" -p fieldcount=10 -p fieldlength=100
  --threads "$THREADS" --batch "$BATCH" --db rkv --servers "$URL")
echo "run-migrate: $RECORDS records of 1 KB on 3 servers ($PROV), $OPS" \
  "operations of workload B per run, $THREADS threads, batch $BATCH"
if ! "$Y" "${COMMON[@]}" --phase load >"$tmp/load.txt" 2>&1; then
  tail -3 "$tmp/load.txt" >&2
  exit 2
fi

# ycsb LABEL: one run of B; its line in $tmp/LABEL.txt
ycsb() {
  "$Y" "${COMMON[@]}" --phase run --label "$1" >"$tmp/$1.txt" 2>&1
}
# the figures of a run: "ops/s read-p99-us read-max-us update-p99-us
# errors"
figures() {
  local t
  t=$(sed -n 's/^\[RUN\] .* s: \([0-9]*\) ops\/s$/\1/p' "$tmp/$1.txt" | head -1)
  awk -v t="${t:-?}" '
    $1 == "READ" { rp = $6; rm = $8; e += $9 }
    $1 == "UPDATE" { up = $6; e += $9 }
    END { printf "%s %s %s %s %d\n", t, rp ? rp : "?", rm ? rm : "?", up ? up : "?", e }
  ' "$tmp/$1.txt"
}
# during ADMIN-ARGS LABEL: a run of B with the admin command started with
# it; the command's time and summary in $tmp/LABEL.admin
during() {
  local t0 t1 apid
  t0=$(date +%s.%N)
  ( "$CLI" admin --cluster "$URL" $1 >"$tmp/$2.admin" 2>&1
    echo "elapsed $(echo "$(date +%s.%N) - $t0" | bc)" >>"$tmp/$2.admin" ) &
  apid=$!
  ycsb "$2"
  t1=$(date +%s.%N)
  wait "$apid"
  echo "run $(echo "$t1 - $t0" | bc)" >>"$tmp/$2.admin"
}

ycsb before
during "join s4" join
ycsb after
during "drain s4" drain

row() {
  local t rp rm up e
  read -r t rp rm up e <<<"$(figures "$1")"
  echo "| $2 | $t | $rp | $up | $rm | $e |"
}
admin_line() {
  local s e r
  s=$(grep '^cluster ' "$tmp/$1.admin" | head -1)
  e=$(sed -n 's/^elapsed //p' "$tmp/$1.admin")
  r=$(sed -n 's/^run //p' "$tmp/$1.admin")
  echo "- $1: ${e:-?} s (the run beside it: ${r:-?} s): ${s:-$(tail -1 "$tmp/$1.admin")}"
}
{
  echo "# YCSB B through a live join and drain, $DATE"
  echo
  echo "$RECORDS records of 1 KB on 3 rkv-servers ($PROV, 127.0.0.1, a map in"
  echo "etcd), workload B (95 % reads), $OPS operations per run, $THREADS"
  echo "threads x $BATCH in flight; \`bash bench/run-migrate.sh\`."
  echo
  echo "| run | ops/s | read p99 us | update p99 us | read max us | errors |"
  echo "|---|---|---|---|---|---|"
  row before "before the join (3 servers)"
  row join "during the join of a 4th"
  row after "after it (4 servers)"
  row drain "during the drain of the 4th"
  echo
  admin_line join
  admin_line drain
} >"$MD"
cat "$MD"
echo "run-migrate: wrote $MD"
