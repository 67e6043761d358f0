# SPDX-License-Identifier: MIT
# tap.sh - sourced by the test runners: run one test command under a
# timeout, echo its TAP stream, and add its results to the totals.
#   tap_run NAME TIMEOUT_S CMD...
# Totals: T_PASS T_FAIL T_SKIP; failed names in T_FAILED.  A command that
# exits 77 with no TAP line counts as one skip; a crash, a timeout or a
# non-zero exit without a "not ok" line counts as one failure.
# RKV_TEST_DEADLINE (seconds since the epoch, CI's budget): a test not yet
# started by then is not run; each counts as a skip, named at the end.
# RKV_TEST_END (seconds since the epoch, the budget's end): no test runs
# past it; one still running then is stopped, its finished cases counted,
# the rest one skip, named at the end as cut (it is not a result: the
# plain make test runs it whole).
T_PASS=0; T_FAIL=0; T_SKIP=0; T_FAILED=""; T_LATE=""; T_CUT=""

tap_run() {
  local name=$1 tmo=$2; shift 2
  local log rc p f s t0=$SECONDS capped=0 left
  if [ -n "${RKV_TEST_DEADLINE:-}" ] &&
     [ "$(date +%s)" -ge "$RKV_TEST_DEADLINE" ]; then
    T_LATE="$T_LATE $name"; T_SKIP=$((T_SKIP + 1))
    return 0
  fi
  if [ -n "${RKV_TEST_END:-}" ]; then
    left=$((RKV_TEST_END - $(date +%s)))
    if [ "$left" -lt 10 ]; then
      T_LATE="$T_LATE $name"; T_SKIP=$((T_SKIP + 1))
      return 0
    fi
    [ "$left" -lt "$tmo" ] && { tmo=$left; capped=1; }
  fi
  log=$(mktemp)
  timeout -k 5 "$tmo" "$@" >"$log" 2>&1
  rc=$?
  sed "s/^/  [$name] /" "$log"
  p=$(grep -cE '^ok [0-9]+' "$log" | head -1)
  s=$(grep -cE '^ok [0-9]+ .*# SKIP' "$log" | head -1)
  f=$(grep -cE '^not ok [0-9]+' "$log" | head -1)
  p=$((p - s))
  rm -f "$log"
  if [ "$rc" = 77 ] && [ $((p + f + s)) = 0 ]; then
    s=1
  elif [ "$capped" = 1 ] && [ "$f" = 0 ] &&
       { [ "$rc" = 124 ] || [ "$rc" = 137 ]; }; then
    s=$((s + 1))
    echo "  [$name] cut after ${tmo}s at the end of the test budget (RKV_TEST_END): not a result"
    T_CUT="$T_CUT $name"
  elif [ "$rc" != 0 ] && [ "$rc" != 77 ] && [ "$f" = 0 ]; then
    f=1
    [ "$rc" = 124 ] || [ "$rc" = 137 ] && echo "  [$name] TIMEOUT after ${tmo}s"
    echo "  [$name] exited with status $rc"
  fi
  T_PASS=$((T_PASS + p)); T_FAIL=$((T_FAIL + f)); T_SKIP=$((T_SKIP + s))
  [ "$f" != 0 ] && T_FAILED="$T_FAILED $name"
  printf '%-40s %d passed, %d failed, %d skipped, %d s (exit %d)\n' \
    "$name" "$p" "$f" "$s" $((SECONDS - t0)) "$rc"
  return 0
}

tap_summary() {
  [ -n "$T_LATE" ] && echo "not run, past RKV_TEST_DEADLINE or RKV_TEST_END:$T_LATE"
  [ -n "$T_CUT" ] && echo "cut at RKV_TEST_END, not finished:$T_CUT"
  [ -n "$T_FAILED" ] && echo "failed:$T_FAILED"
  if [ "$T_SKIP" != 0 ]; then
    echo "$T_PASS passed, $T_FAIL failed, $T_SKIP skipped"
  else
    echo "$T_PASS passed, $T_FAIL failed"
  fi
  [ "$T_FAIL" = 0 ]
}
