#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# bench/run-fill.sh - how full an index gets before its first refusal.
#
#   bash bench/run-fill.sh [BUILD_DIR]        # default build/
#   FILL_SLOTS="1048576" bash bench/run-fill.sh   # one index size
#
# For each index size of FILL_SLOTS (default 2^20 and 2^23 slots) and
# each bucket size of FILL_BUCKET_SLOTS (default 8 16 32 64; the largest
# index with 8 and 32 only): an rkv-server on shm with --buckets SLOTS /
# BUCKET_SLOTS --bucket-slots BUCKET_SLOTS, loaded by `rkv --pipe` with
# distinct keys, one put a line, as many as the index has slots.  The
# first refusal (ENOSPC) is the figure: the keys stored before it as a
# share of the slots; then how many were stored in all (keys put after
# the first refusal take the slots left).  A key goes in the emptier of
# its two buckets (docs/DESIGN.md §3).  Writes bench/results/fill-<DATE>.md.
# Exit status: 0 when it ran (figures never fail it), 2 when it cannot.
set -u
O=${1:-build}
cd "$(dirname "$0")/.." || exit 2

SRV=$O/bin/rkv-server
CLI=$O/bin/rkv
SIZES=${FILL_SLOTS:-1048576 8388608}
BSIZES=${FILL_BUCKET_SLOTS:-8 16 32 64}
RES=bench/results
DATE=$(date -u +%Y%m%d-%H%M%S)
MD=$RES/fill-$DATE.md
. bench/ycsb/peers.sh
bench_setup run-fill "$SRV" "$CLI"
export RKV_SHM_DIR=$tmp/shm
rows=()
notes=()
largest=0
for n in $SIZES; do [ "$n" -gt "$largest" ] && largest=$n; done

for n in $SIZES; do
  for s in $BSIZES; do
    # the largest index: the old bucket size and the default only
    if [ "$n" = "$largest" ] && [ "$n" != "${SIZES%% *}" ] &&
      [ "$s" != 8 ] && [ "$s" != 32 ]; then
      continue
    fi
    nb=$((n / s))
    if ! start_rkv_server "$tmp/srv.out" --listen "shm:///rkv-fill-$$" \
      --buckets "$nb" --bucket-slots "$s" \
      --memory $((n * 64 / 1048576 + 64))M --log-level warn; then
      notes+=("$n slots of $s: rkv-server did not start: $RKV_WHY")
      continue
    fi
    echo "run-fill: $n slots in buckets of $s" >&2
    # line i of the output answers key i: OK or an error
    awk -v n="$n" 'BEGIN {for (i = 0; i < n; i++) print "put f" i " v"}' |
      timeout 1800 "$CLI" --servers "$RADDR" --pipe >"$tmp/out" 2>&1
    first=$(awk '$0 != "OK" {print NR - 1; exit}' "$tmp/out")
    stored=$(grep -c '^OK$' "$tmp/out")
    other=$(grep -v '^OK$' "$tmp/out" | grep -vc 'No space left' || true)
    peers_stop
    [ -n "$first" ] || first=$n
    [ "$other" = 0 ] || notes+=("$n slots of $s: $other answers other than OK and ENOSPC")
    rows+=("| $n | $s | $first | $(awk -v a="$first" -v b="$n" \
      'BEGIN {printf "%.1f", 100 * a / b}') % | $stored | $(awk -v a="$stored" \
      -v b="$n" 'BEGIN {printf "%.1f", 100 * a / b}') % |")
  done
done

{
  echo "# Index fill before the first refusal, $DATE"
  echo
  echo "One rkv-server on shm at a time, distinct keys put by \`rkv --pipe\`"
  echo "(64 to an rkv_mput), as many as the index has slots; $(nproc) cores."
  echo
  echo "| slots | bucket slots | stored before the first refusal | of the slots | stored in all | of the slots |"
  echo "|---:|---:|---:|---:|---:|---:|"
  printf '%s\n' "${rows[@]}"
  echo
  echo "- A key goes in the emptier of its two buckets; a cold lookup reads"
  echo "  both (2 x bucket slots x 8 B). rkv-server's default is 32 slots."
  echo "- The puts of one rkv_mput run side by side, so the keys just"
  echo "  before the first refusal are placed in any order among themselves."
  for l in "${notes[@]}"; do echo "- $l"; done
} | tee "$MD"
echo "run-fill: wrote $MD"
