#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# ab-kv.sh - two builds of rkv side by side on the KV benchmark: get and
# put of 1 KB values, 1 and 16 in flight, on tcp and shm.
#
#   bench/ab-kv.sh OLD_BUILD NEW_BUILD [REPS]
#
# Each build runs its own rkv-server (started here, stopped by PID) and
# its own rkv-bench-kv; the runs alternate old, new, old, new ... REPS
# times (default 3) per case, so both see the same machine.  Prints one
# markdown table per provider: the median ops/s of each build, new/old,
# and RTT/op.  BENCH_AB_SECONDS (default 3) per run, BENCH_AB_KEYS keys
# (default 20000), BENCH_AB_PROVIDERS (default "tcp shm").
set -u
OLD=${1:?usage: bench/ab-kv.sh OLD_BUILD NEW_BUILD [REPS]}
NEW=${2:?usage: bench/ab-kv.sh OLD_BUILD NEW_BUILD [REPS]}
REPS=${3:-3}
SECS=${BENCH_AB_SECONDS:-3}
KEYS=${BENCH_AB_KEYS:-20000}
tmp=$(mktemp -d) || exit 2
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null && wait "$p" 2>/dev/null; done
  rm -rf "$tmp"
}
trap cleanup EXIT

# start_server BUILD LISTEN TAG: sets ADDR (run in this shell, not in a
# $(...) subshell, so that its PID is remembered and stopped)
start_server() {
  "$1/bin/rkv-server" --listen "$2" --memory 1G --grace 300 \
    --capacity $((KEYS * 2)) --log-level error >"$tmp/$3.out" 2>"$tmp/$3.err" &
  pids+=($!)
  ADDR=""
  for _ in $(seq 1 100); do
    ADDR=$(sed -n 's/^rkv-server: listening on //p' "$tmp/$3.out")
    [ -n "$ADDR" ] && return 0
    sleep 0.1
  done
  echo "ab-kv: $1's rkv-server on $2 did not start: $(tail -1 "$tmp/$3.err")" >&2
  return 1
}

# run BUILD ADDR MIX INFLIGHT FLAGS: prints "ops_per_s rtt_per_op"
run() {
  local j=$tmp/run.json
  rm -f "$j"
  timeout 300 "$1/bin/rkv-bench-kv" --servers "$2" --keys "$KEYS" \
    --value-size 1024 --seconds "$SECS" --mix "$3" --inflight "$4" $5 \
    --json "$j" >/dev/null 2>&1
  python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); t=d["types"][0]; print("%.0f %.2f" % (d["ops_per_s"], t["rtt_per_op"]))' "$j" 2>/dev/null || echo "0 0"
}

median() { printf '%s\n' "$@" | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }

echo "# rkv-bench-kv, $(basename "$OLD") (old) vs $(basename "$NEW") (new): $(date -u '+%Y-%m-%d %H:%M UTC'), $(nproc) cores"
echo
echo "1 KB values, $KEYS keys, $SECS s per run, median of $REPS alternating runs per build."
for prov in ${BENCH_AB_PROVIDERS:-tcp shm}; do
  case $prov in
    tcp) lo=tcp://127.0.0.1:0; ln=tcp://127.0.0.1:0 ;;
    shm) lo=shm:///rkv-ab-old-$$; ln=shm:///rkv-ab-new-$$ ;;
  esac
  start_server "$OLD" "$lo" old-$prov || continue
  ao=$ADDR
  start_server "$NEW" "$ln" new-$prov || continue
  an=$ADDR
  # load both stores once
  run "$OLD" "$ao" 0:100:0:0 16 "" >/dev/null
  run "$NEW" "$an" 0:100:0:0 16 "" >/dev/null
  echo
  echo "## $prov"
  echo
  echo "| op | in flight | old ops/s | new ops/s | new/old | RTT/op old | RTT/op new |"
  echo "|---|---|---|---|---|---|---|"
  for op in get put; do
    [ $op = get ] && mix=100:0:0:0 || mix=0:100:0:0
    for k in 1 16; do
      o=(); n=(); ro=0; rn=0
      for _ in $(seq 1 "$REPS"); do
        read -r v r < <(run "$OLD" "$ao" $mix $k --no-load); o+=("$v"); ro=$r
        read -r v r < <(run "$NEW" "$an" $mix $k --no-load); n+=("$v"); rn=$r
      done
      mo=$(median "${o[@]}"); mn=$(median "${n[@]}")
      ratio=$(awk -v a="$mo" -v b="$mn" 'BEGIN { if (a > 0) printf "%.3f", b / a; else print "-" }')
      echo "| $op | $k | $mo | $mn | $ratio | $ro | $rn |"
    done
  done
  for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null && wait "$p" 2>/dev/null; done
  pids=()
done
