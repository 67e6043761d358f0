#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# run-repl.sh - what replication costs (part of make bench; never a test):
# YCSB A, B and C on three rkv-servers with a cluster file asking for
# replicas 1, 2 and 3, side by side in one run, with throughput, p99 and
# the ratio to r=1, and the round trips per operation the client counted.
#
#   bash bench/run-repl.sh [BUILD_DIR]
#
# For each r: three fresh rkv-servers (tcp, 127.0.0.1, free ports; stopped
# by PID), a load of REPL_RECORDS 1 KB records, then each workload's run
# phase; rounds of all r are interleaved REPL_ROUNDS times (default 3) and
# the table gives the median, min and max.  Knobs: REPL_RECORDS (20000),
# REPL_OPS (100000), REPL_THREADS (2), REPL_BATCH (8), REPL_MAXTIME (20 s
# a run), REPL_PROVIDER (tcp; shm works too), REPL_WORKLOADS ("a b c").
# Writes bench/results/repl-<DATE>.md and .json.
# Exit status: 0 when it ran (figures never fail it), 2 when it cannot.
set -u
O=${1:-build}
cd "$(dirname "$0")/.." || exit 2

Y=$O/bin/rkv-ycsb
SRV=$O/bin/rkv-server
RECORDS=${REPL_RECORDS:-20000}
OPS=${REPL_OPS:-100000}
THREADS=${REPL_THREADS:-2}
BATCH=${REPL_BATCH:-8}
MAXTIME=${REPL_MAXTIME:-20}
ROUNDS=${REPL_ROUNDS:-3}
PROV=${REPL_PROVIDER:-tcp}
WORKLOADS=${REPL_WORKLOADS:-a b c}
RES=bench/results
DATE=$(date -u +%Y%m%d-%H%M%S)
JSON=$RES/repl-$DATE.json
MD=$RES/repl-$DATE.md

for b in "$Y" "$SRV"; do
  if [ ! -x "$b" ]; then
    echo "run-repl: $b not found (run make first)" >&2
    exit 2
  fi
done
case $PROV in tcp|shm) ;; *)
  echo "run-repl: REPL_PROVIDER must be tcp or shm, not '$PROV'" >&2
  exit 2 ;;
esac
mkdir -p "$RES" || exit 2
tmp=$(mktemp -d) || exit 2
PIDS=()
stop_all() {
  local p
  for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null; done
  for p in "${PIDS[@]}"; do wait "$p" 2>/dev/null; done
  PIDS=()
}
cleanup() { stop_all; rm -rf "$tmp"; }
trap cleanup EXIT
trap 'exit 130' INT TERM

# start_three R: three servers and a cluster file asking for R replicas
# in $tmp/cluster (0 or 1)
start_three() {
  local r=$1 i n addr listen
  : >"$tmp/cluster.new"
  echo "replicas $r" >>"$tmp/cluster.new"
  for n in s0 s1 s2; do
    if [ "$PROV" = tcp ]; then listen=tcp://127.0.0.1:0
    else listen=shm:///rkv-repl-$$-$n; fi
    "$SRV" --listen "$listen" --name "$n" --capacity $((RECORDS * 4 + 10000)) \
      --memory 512M >"$tmp/$n.out" 2>"$tmp/$n.err" &
    PIDS+=($!)
    addr=
    for i in $(seq 1 100); do
      addr=$(sed -n 's/^rkv-server: listening on //p' "$tmp/$n.out")
      [ -n "$addr" ] && break
      kill -0 "${PIDS[-1]}" 2>/dev/null || break
      sleep 0.1
    done
    if [ -z "$addr" ]; then
      echo "run-repl: rkv-server $n did not start:" >&2
      tail -3 "$tmp/$n.err" >&2
      return 1
    fi
    echo "$n $addr" >>"$tmp/cluster.new"
  done
  mv "$tmp/cluster.new" "$tmp/cluster"
}

COMMON=(-p recordcount="$RECORDS" -p operationcount="$OPS"
  -p fieldcount=10 -p fieldlength=100 -p maxexecutiontime="$MAXTIME"
  --threads "$THREADS" --batch "$BATCH" --json "$JSON")
TMO=$((MAXTIME * 2 + 120))
echo "run-repl: $RECORDS records of 1 KB, $OPS operations per run, $THREADS" \
  "threads x $BATCH in flight, $PROV, 3 servers; r = 1 2 3, $ROUNDS rounds"
for round in $(seq 1 "$ROUNDS"); do
  for r in 1 2 3; do
    start_three "$r" || exit 2
    timeout -k 5 "$TMO" "$Y" -P workloads/workloada "${COMMON[@]}" \
      --seed "$round" --phase load --servers "$tmp/cluster" \
      --label "r$r/$round" >"$tmp/load.txt" 2>&1 ||
      { echo "run-repl: load at r=$r failed:"; tail -3 "$tmp/load.txt"; }
    for w in $WORKLOADS; do
      timeout -k 5 "$TMO" "$Y" -P "workloads/workload$w" "${COMMON[@]}" \
        --seed "$round" --phase run --servers "$tmp/cluster" \
        --label "r$r/$round" >"$tmp/run.txt" 2>&1
      grep -E '^\[RUN\]' "$tmp/run.txt" | sed "s|^|  r=$r round $round workload$w: |"
    done
    stop_all
  done
done

python3 - "$JSON" "$MD" "$PROV" "$RECORDS" "$OPS" "$THREADS" "$BATCH" <<'EOF'
import json, statistics, sys
path, md, prov, recs, ops, thr, batch = sys.argv[1:]
runs = {}
for line in open(path):
    line = line.strip()
    if not line:
        continue
    d = json.loads(line)
    if d.get("phase") != "run":
        continue
    r = d["label"].split("/")[0]
    w = d.get("workload", "?")
    runs.setdefault((w, r), []).append(d)

def tput(d):
    return d.get("ops_per_s", 0.0)

def p99(d):
    return max((o.get("p99_us", 0) for o in d.get("ops_by_type", [])),
               default=0)

def rtts(ds):
    by = {}
    for d in ds:
        for o in d.get("ops_by_type", []):
            if "rtt_per_op" in o:
                by.setdefault(o["op"], []).append(o["rtt_per_op"])
    return ", ".join(f"{k} {statistics.median(v):.2f}"
                     for k, v in sorted(by.items())) or "-"

out = ["# Replication cost: YCSB on three rkv-servers, r = 1, 2, 3", "",
       f"{prov}, {recs} records of 1 KB, {ops} operations per run, "
       f"{thr} threads x {batch} in flight; median (min-max) of "
       f"{max(len(v) for v in runs.values()) if runs else 0} rounds, the "
       "r values interleaved in each round.", "",
       "| workload | r | ops/s | ratio to r=1 | p99 us (worst op) | RTTs/op |",
       "|---|---:|---:|---:|---:|---|"]
for w in sorted({k[0] for k in runs}):
    b = runs.get((w, "r1"))
    base = statistics.median(tput(d) for d in b) if b else 0
    for r in ("r1", "r2", "r3"):
        ds = runs.get((w, r))
        if not ds:
            continue
        t = [tput(d) for d in ds]
        med = statistics.median(t)
        ratio = f"{med / base:.2f}" if base else "-"
        out.append(f"| {w} | {r[1]} | {med:,.0f} ({min(t):,.0f}-"
                   f"{max(t):,.0f}) | {ratio} | "
                   f"{statistics.median(p99(d) for d in ds):,.0f} | "
                   f"{rtts(ds)} |")
out += ["", "Goal (issue: replication): B and C at r=2 >= 0.9 of r=1."]
open(md, "w").write("\n".join(out) + "\n")
print("\n".join(out))
EOF
echo "run-repl: $MD"
