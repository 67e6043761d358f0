#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# run.sh - `make bench`: rkv's transport providers beside their peers.
#
#   bench/run.sh BUILD_DIR
#
# 1. On the host: rkv-bench-transport --provider all --peers libfabric
#    (tcp and shm, and verbs only if the host has a device), beside
#    libfabric's tcp;ofi_rxm and shm providers.
# 2. In a Soft-RoCE guest booted ONCE through tests/softroce/vm-run.sh:
#    bench/guest-bench.sh (perftest ib_*_lat and rkv's verbs provider,
#    one table with the ratios).  BENCH_SKIP_GUEST=1 skips this part; a
#    guest failure prints a line and the host part still stands.
#
# Writes bench/results/transport-<DATE>.json ({"host": ..., "guest": ...})
# and bench/results/transport-<DATE>.md (the tables and goals).
# Knobs: BENCH_ITERS (host, default 5000), BENCH_WARMUP (500),
# BENCH_REPEAT (3: each host point runs 3 times, the lowest p50 is kept, so
# other tenants of a shared machine disturb it less), BENCH_CHAIN (8),
# BENCH_GUEST_ITERS (2000), BENCH_PERFTEST_ITERS (2000),
# BENCH_GUEST_TIMEOUT (seconds inside the guest, default 900).
# Exit status: 0 when the host part ran (figures never fail the run).
set -u
O=${1:-build}
cd "$(dirname "$0")/.." || exit 2

BIN=$O/bin/rkv-bench-transport
RES=bench/results
DATE=$(date -u +%Y%m%d-%H%M%S)
JSON=$RES/transport-$DATE.json
MD=$RES/transport-$DATE.md
ITERS=${BENCH_ITERS:-5000}
WARMUP=${BENCH_WARMUP:-500}
REPEAT=${BENCH_REPEAT:-3}
CHAIN=${BENCH_CHAIN:-8}
GUEST_TMO=${BENCH_GUEST_TIMEOUT:-900}

if [ ! -x "$BIN" ]; then
  echo "bench: $BIN not found (run make first)" >&2
  exit 2
fi
mkdir -p "$RES" || exit 2
tmp=$(mktemp -d) || exit 2
trap 'rm -rf "$tmp"' EXIT

# ------------------------------------------------------------------ host
cmd=("$BIN" --provider all --peers libfabric --iters "$ITERS"
  --warmup "$WARMUP" --repeat "$REPEAT" --chain "$CHAIN"
  --json "$tmp/host.json")
echo "bench: host: ${cmd[*]}"
timeout -k 10 1800 "${cmd[@]}" >"$tmp/host.txt" 2>"$tmp/host.err"
hrc=$?
cat "$tmp/host.txt"
if [ "$hrc" != 0 ]; then
  echo "bench: host run exited with status $hrc" \
    "$([ "$hrc" = 124 ] && echo '(timeout)')"
  sed 's/^/  /' "$tmp/host.err" | tail -20
fi

{
  echo "# rkv transport benchmark, $DATE (UTC)"
  echo
  echo "Host: $(uname -srm), $(nproc) CPUs, $(hostname)." \
    "Commit: $(git rev-parse --short HEAD 2>/dev/null || echo unknown)."
  echo "Latency is per post (one WR, or one chain of K WRs, the last"
  echo "signaled); Mops/s counts WRs.  p50/p99 from rkv_hist (3% buckets)."
  echo
  echo "## Host: rkv tcp, shm (verbs if a device exists) and libfabric"
  echo
  echo "\`${cmd[*]/$tmp\/host.json/FILE}\`"
  echo
  cat "$tmp/host.txt"
  [ "$hrc" = 0 ] || echo "(host run exited with status $hrc)"
} >"$MD"

# ----------------------------------------------------------------- guest
grc=skip
if [ "${BENCH_SKIP_GUEST:-0}" = 1 ]; then
  echo "bench: guest: skipped (BENCH_SKIP_GUEST=1)"
  gline="skipped (BENCH_SKIP_GUEST=1)"
elif [ ! -f tests/softroce/vm-run.sh ]; then
  echo "bench: guest: tests/softroce/vm-run.sh not found; verbs not measured"
  gline="not run: tests/softroce/vm-run.sh not found"
else
  # The guest sees $PWD read-write, not the host's /tmp.
  gjson=$RES/.guest-$DATE.json
  rm -f "$gjson"
  echo "bench: guest: booting Soft-RoCE guest (verbs vs perftest)..."
  pass="BENCH_GUEST_ITERS BENCH_PERFTEST_ITERS BENCH_SIZES BENCH_GOAL_ROUNDS"
  SOFTROCE_TIMEOUT=$GUEST_TMO SOFTROCE_ENV="${SOFTROCE_ENV:-} $pass" \
    timeout -k 10 $((GUEST_TMO + 300)) \
    bash tests/softroce/vm-run.sh bash bench/guest-bench.sh "$O" "$gjson" \
    >"$tmp/guest.txt" 2>&1
  grc=$?
  cat "$tmp/guest.txt"
  case $grc in
  0) gline="" ;;
  124) gline="guest part timed out (status 124); verbs figures incomplete" ;;
  125) gline="guest did not boot or Soft-RoCE setup failed (status 125)" ;;
  *) gline="guest part exited with status $grc" ;;
  esac
  [ -n "$gline" ] && echo "bench: guest: $gline"
  if [ -s "$gjson" ]; then
    mv "$gjson" "$tmp/guest.json"
  else
    rm -f "$gjson"
  fi
fi

{
  echo
  echo "## Soft-RoCE guest: rkv verbs vs perftest (same guest, TCG)"
  echo
  if [ -s "$tmp/guest.txt" ]; then
    echo '```'
    grep -E '^(guest-bench|perftest) ' "$tmp/guest.txt" || true
    echo '```'
    echo
    # The table and the goals, as the binary printed them.
    grep -E '^(\||goals|- )' "$tmp/guest.txt" | sed 's/^goals/\ngoals/' || true
    # the cached get against ib_read_lat, a line a round (run-goals.sh)
    echo
    grep -E '^goal: verbs get ' "$tmp/guest.txt" || true
  fi
  [ -n "$gline" ] && echo "$gline"
} >>"$MD"

# ------------------------------------------------------------------ json
{
  printf '{\n"host": '
  if [ -s "$tmp/host.json" ]; then cat "$tmp/host.json"; else echo null; fi
  printf ',\n"guest": '
  if [ -s "$tmp/guest.json" ]; then cat "$tmp/guest.json"; else echo null; fi
  printf ',\n"guest_status": "%s"\n}\n' "${gline:-ok}"
} >"$JSON"

echo "bench: wrote $JSON and $MD"
[ "$hrc" = 0 ]
