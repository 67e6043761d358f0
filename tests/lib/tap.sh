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

# tap_admit NAME TMO: 0 (and TAP_TMO, TAP_CAPPED set) if NAME may start
tap_admit() {
  local name=$1
  TAP_TMO=$2; TAP_CAPPED=0
  if [ -n "${RKV_TEST_DEADLINE:-}" ] &&
     [ "$(date +%s)" -ge "$RKV_TEST_DEADLINE" ]; then
    T_LATE="$T_LATE $name"; T_SKIP=$((T_SKIP + 1))
    return 1
  fi
  if [ -n "${RKV_TEST_END:-}" ]; then
    local left=$((RKV_TEST_END - $(date +%s)))
    if [ "$left" -lt 10 ]; then
      T_LATE="$T_LATE $name"; T_SKIP=$((T_SKIP + 1))
      return 1
    fi
    [ "$left" -lt "$TAP_TMO" ] && { TAP_TMO=$left; TAP_CAPPED=1; }
  fi
  return 0
}

# tap_account NAME TMO CAPPED RC LOG SECONDS: echo and count one test
tap_account() {
  local name=$1 tmo=$2 capped=$3 rc=$4 log=$5 secs=$6 p f s
  sed "s/^/  [$name] /" "$log"
  p=$(grep -cE '^ok [0-9]+' "$log" | head -1)
  s=$(grep -cE '^ok [0-9]+ .*# SKIP' "$log" | head -1)
  f=$(grep -cE '^not ok [0-9]+' "$log" | head -1)
  p=$((p - s))
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
    "$name" "$p" "$f" "$s" "$secs" "$rc"
}

tap_run() {
  local name=$1 tmo=$2; shift 2
  tap_admit "$name" "$tmo" || return 0
  local log rc t0=$SECONDS
  log=$(mktemp)
  timeout -k 5 "$TAP_TMO" "$@" >"$log" 2>&1
  rc=$?
  tap_account "$name" "$TAP_TMO" "$TAP_CAPPED" "$rc" "$log" $((SECONDS - t0))
  rm -f "$log"
  return 0
}

tap_summary() {
  [ -n "$T_LATE" ] && echo "not run, past RKV_TEST_DEADLINE:$T_LATE"
  [ -n "$T_CUT" ] && echo "cut at RKV_TEST_END, not finished:$T_CUT"
  [ -n "$T_FAILED" ] && echo "failed:$T_FAILED"
  if [ "$T_SKIP" != 0 ]; then
    echo "$T_PASS passed, $T_FAIL failed, $T_SKIP skipped"
  else
    echo "$T_PASS passed, $T_FAIL failed"
  fi
  [ "$T_FAIL" = 0 ]
}
