#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# run-failover.sh - failover time (part of make bench; never a test): how
# long the keys of a server killed with -9 stay unreadable when `rkv admin
# watch` is the cluster's coordinator.
#
# Starts its own etcd and FO_KILLS + 2 rkv-servers (tcp, 127.0.0.1) keeping
# 2 copies of each key, and `rkv admin watch`; then FO_KILLS times: a
# probe (rkv-bench-failover) puts 16 keys whose primary is the next
# victim and reads them without pause; the victim is killed (-9); the
# probe reports its first failed read and its first good one after.
# Writes bench/results/failover-<DATE>.md: per kill, kill -> first good
# read, first failed -> first good, and p50 / max.  The goal (issue):
# within the lease TTL (5 s) + 1 s.
#   bash bench/run-failover.sh [BUILD_DIR]
# Knobs: FO_KILLS (10).
# Exit status: 0 when it ran (figures never fail it), 2 when it cannot.
set -u
O=${1:-build}
cd "$(dirname "$0")/.." || exit 2

SRV=$O/bin/rkv-server
CLI=$O/bin/rkv
PROBE=$O/bin/rkv-bench-failover
KILLS=${FO_KILLS:-10}
RES=bench/results
DATE=$(date -u +%Y%m%d-%H%M%S)
MD=$RES/failover-$DATE.md

for b in "$SRV" "$CLI" "$PROBE"; do
  if [ ! -x "$b" ]; then
    echo "run-failover: $b not found (run make first)" >&2
    exit 2
  fi
done
if ! command -v etcd >/dev/null; then
  echo "run-failover: etcd not found (apt-get install etcd-server); skipped" >&2
  exit 0
fi
mkdir -p "$RES" || exit 2
tmp=$(mktemp -d) || exit 2
PIDS=()
. bench/ycsb/peers.sh
trap 'peers_stop; rm -rf "$tmp"' EXIT
trap 'exit 130' INT TERM

if ! start_etcd "$tmp"; then
  echo "run-failover: etcd did not start: $PEER_WHY" >&2
  exit 2
fi
URL=etcd://127.0.0.1:$PORT/bench

declare -A SPID
NSRV=$((KILLS + 2))
for i in $(seq 1 "$NSRV"); do
  n=s$i
  "$SRV" --listen tcp://127.0.0.1:0 --name "$n" --cluster "$URL" \
    --capacity 20000 --memory 64M --log-level warn \
    >"$tmp/$n.out" 2>"$tmp/$n.err" &
  SPID[$n]=$!
  PIDS+=($!)
  for t in $(seq 1 100); do
    grep -q '^rkv-server: listening on' "$tmp/$n.out" && break
    sleep 0.1
  done
done
if ! "$CLI" admin --cluster "$URL" init --replicas 2 >"$tmp/init" 2>&1; then
  echo "run-failover: rkv admin init: $(cat "$tmp/init")" >&2
  exit 2
fi
"$CLI" admin --cluster "$URL" watch >"$tmp/watch.out" 2>&1 &
PIDS+=($!)

now_ns() { date +%s%N; }
KILL_MS=()
DETECT_MS=()
{
  echo "# Failover time ($DATE, tcp, $NSRV servers, 2 copies, \`rkv admin watch\`)"
  echo
  echo "| kill | server | kill -> first good read (ms) | first failed -> first good (ms) |"
  echo "|---:|---|---:|---:|"
} >"$MD"
for k in $(seq 1 "$KILLS"); do
  v=s$k
  "$PROBE" --cluster "$URL" --victim "$v" >"$tmp/probe$k" 2>&1 &
  ppid=$!
  for t in $(seq 1 100); do
    grep -q '^ready' "$tmp/probe$k" && break
    sleep 0.1
  done
  sleep 0.5
  tk=$(now_ns)
  kill -9 "${SPID[$v]}"
  wait "${SPID[$v]}" 2>/dev/null
  wait "$ppid"
  rc=$?
  tf=$(sed -n 's/^fail \([0-9]*\).*/\1/p' "$tmp/probe$k")
  to=$(sed -n 's/^ok \([0-9]*\).*/\1/p' "$tmp/probe$k")
  if [ "$rc" != 0 ] || [ -z "$tf" ] || [ -z "$to" ]; then
    echo "run-failover: kill $k ($v): the probe said: $(tr '\n' ' ' <"$tmp/probe$k")" >&2
    echo "| $k | $v | (probe exit $rc) | |" >>"$MD"
    continue
  fi
  a=$(((to - tk) / 1000000))
  b=$(((to - tf) / 1000000))
  KILL_MS+=("$a")
  DETECT_MS+=("$b")
  echo "| $k | $v | $a | $b |" >>"$MD"
  echo "run-failover: kill $k ($v): readable again $a ms after the kill"
  sleep 1 # the rebuild
done
stat() { printf '%s\n' "$@" | sort -n | awk '{a[NR]=$1} END {if (NR) printf "%d / %d", a[int((NR+1)/2)], a[NR]; else printf "-"}'; }
{
  echo
  echo "p50 / max: kill -> first good read $(stat "${KILL_MS[@]}") ms; first failed -> first good $(stat "${DETECT_MS[@]}") ms, over ${#KILL_MS[@]} kills."
  echo "Goal: within the lease TTL (5,000 ms) + 1,000 ms."
  echo
  echo "The coordinator's log:"
  echo
  sed 's/^/    /' "$tmp/watch.out"
} >>"$MD"
echo "run-failover: $(sed -n 's/^p50 \/ max: //p' "$MD") -> $MD"
exit 0
