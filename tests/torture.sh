#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# torture.sh - `make torture`: the linearizability torture (itest_lin: every
# configuration, fresh seeds, longer runs) for RKV_TORTURE_MINUTES per
# provider (default 5), plus one pass of itest_kv's torture and kill tests
# per provider.  Prints the totals (ops checked, violations) and exits
# non-zero on any violation or failed test.
#   tests/torture.sh [--build-dir DIR] [PROVIDER...]   (default: tcp shm)
# Knobs: RKV_TORTURE_MINUTES (or RKV_TORTURE_SECONDS), RKV_LIN_SECONDS (per configuration and run;
# default from the minutes, 5..60), RKV_LIN_OPS (per client process;
# default 250000, which bounds a run's history to about a million ops).
set -u
O=build
PROVS=()
while [ $# -gt 0 ]; do
  case $1 in
    --build-dir|-O) O=$2; shift 2 ;;
    -h|--help) sed -n '3,12p' "$0"; exit 0 ;;
    *) PROVS+=("$1"); shift ;;
  esac
done
[ ${#PROVS[@]} = 0 ] && PROVS=(tcp shm)
cd "$(dirname "$0")/.." || exit 2
LIN=$O/tests/itest_lin
KV=$O/tests/itest_kv
if [ ! -x "$LIN" ]; then
  echo "torture: $LIN not built (make O=$O all)" >&2
  exit 2
fi
MIN=${RKV_TORTURE_MINUTES:-5}
export RKV_LIN_OPS=${RKV_LIN_OPS:-250000}
LOGDIR=$(mktemp -d /tmp/rkv-torture-XXXXXX)
checked=0; viol=0; fails=0; runs=0

# run NAME TIMEOUT CMD...: one test binary, its log kept when it fails
run() {
  local name=$1 tmo=$2 log rc; shift 2
  log=$LOGDIR/$name.log
  timeout -k 5 "$tmo" "$@" >"$log" 2>&1
  rc=$?
  runs=$((runs + 1))
  local c v
  c=$(sed -n 's/^# lin total ([a-z]*): \([0-9]*\) ops checked, \([0-9]*\) violations$/\1/p' "$log" | tail -1)
  v=$(sed -n 's/^# lin total ([a-z]*): \([0-9]*\) ops checked, \([0-9]*\) violations$/\2/p' "$log" | tail -1)
  checked=$((checked + ${c:-0})); viol=$((viol + ${v:-0}))
  grep -E '^# lin [a-z0-9-]+ \(' "$log" | sed 's/^# /  /'
  if [ "$rc" != 0 ]; then
    fails=$((fails + 1))
    echo "  $name: exit $rc; not ok:"
    grep -E '^not ok|^#   (key|  longest|  then|  hint|history)' "$log" | head -20 | sed 's/^/    /'
    echo "  full log: $log"
  else
    echo "  $name: ok"
    rm -f "$log"
  fi
}

for p in "${PROVS[@]}"; do
  end=$((SECONDS + ${RKV_TORTURE_SECONDS:-$((MIN * 60))}))
  iter=0
  echo "== $p: $((end - SECONDS)) s of itest_lin"
  while [ $SECONDS -lt $end ]; do
    left=$((end - SECONDS))
    per=${RKV_LIN_SECONDS:-$((left / 6))}
    [ "$per" -gt 60 ] && per=60
    [ "$per" -lt 5 ] && per=5
    iter=$((iter + 1))
    echo "-- $p run $iter: $per s per configuration, seed $iter"
    RKV_LIN_SECONDS=$per RKV_LIN_SEED=$iter \
      run "lin-$p-$iter" $((per * 8 + 300)) "$LIN" --provider "$p"
  done
  if [ -x "$KV" ]; then
    echo "== $p: itest_kv torture and kill tests"
    run "kv-torture-$p" 900 "$KV" --provider "$p" -t t_torture
    run "kv-kill-$p" 600 "$KV" --provider "$p" -t t_kill
  fi
done
echo "torture: ${PROVS[*]}: $runs runs, $checked ops checked, $viol violations, $fails failed runs"
[ "$fails" = 0 ] && [ "$viol" = 0 ] && rmdir "$LOGDIR" 2>/dev/null
[ "$fails" = 0 ] && [ "$viol" = 0 ]
