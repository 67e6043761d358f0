#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# bench/run-big.sh - big values against the transport's own READ and WRITE
# of the same bytes, in one run.
#
#   bash bench/run-big.sh [BUILD_DIR]            # default build/
#   BIG_SIZES=1M,4M BIG_PROVIDERS=shm bash bench/run-big.sh
#
# For each provider of BIG_PROVIDERS (default "tcp shm"): an rkv-server
# (--memory 2G, --big-grace 1000 so that freed blocks come back within
# the run), then `rkv-bench-kv --big BIG_SIZES` (default 1M,4M,16M,64M):
# BIG_REPS (default 30) synchronous puts of one key of each size, then as
# many cached gets of it, each timed alone (p50).  A first run (10 puts
# of each size, so that its blocks fit the region without reuse) writes
# pages of the region for the first time (the "fresh" put column: the
# kernel allocates and maps each 4 KiB page as it is touched); a second
# run (--warm 2G) first puts each size until its blocks have swept the
# whole region, and waits for them to come back, so its puts write
# memory written before, as the raw WRITE's buffer is: the put and get
# columns.  Then
# `rkv-bench-transport --sizes` the same sizes, READ and WRITE p50, one
# at a time, to one place; and WRITE again to a new place each time
# (--spread 2G), as a put's out-of-place block lands.  The ratio is the transport's time over rkv's (1: as
# fast as the raw transfer; goals 0.8 for get, 0.7 for put).  Writes
# bench/results/big-<DATE>.md.  Exit status: 0 when it ran (figures never
# fail it), 2 when it cannot.
set -u
O=${1:-build}
cd "$(dirname "$0")/.." || exit 2

SRV=$O/bin/rkv-server
KV=$O/bin/rkv-bench-kv
TP=$O/bin/rkv-bench-transport
SIZES=${BIG_SIZES:-1M,4M,16M,64M}
PROVS=${BIG_PROVIDERS:-tcp shm}
REPS=${BIG_REPS:-30}
RES=bench/results
DATE=$(date -u +%Y%m%d-%H%M%S)
MD=$RES/big-$DATE.md
. bench/ycsb/peers.sh
bench_setup run-big "$SRV" "$KV" "$TP"
export RKV_SHM_DIR=$tmp/shm
bytes=$(tr ',' '\n' <<<"$SIZES" | awk '
  /[kK]$/ {print $0 * 1024; next} /[mM]$/ {print $0 * 1048576; next} {print}' |
  paste -sd, -)
# tp_p50 FILE PROVIDER OP BYTES: the p50 (us) of rkv-bench-transport's
# row "| PROVIDER | OP | BYTES | 1 | P50 | ..." in FILE
tp_p50() {
  awk -F'|' -v p="$2" -v op="$3" -v n="$4" '{
    for (i = 2; i <= 6; i++) gsub(/ /, "", $i) }
    $2 == p && $3 == op && $4 == n {print $6}' "$1"
}
rows=()
notes=()
for p in $PROVS; do
  addr=tcp://127.0.0.1:0
  [ "$p" = shm ] && addr=shm:///rkv-big-$$
  if ! start_rkv_server "$tmp/srv.out" --listen "$addr" --memory 2G \
    --grace 200 --big-grace 1000 --log-level warn; then
    notes+=("$p: rkv-server did not start: $RKV_WHY")
    continue
  fi
  echo "run-big: $p: rkv" >&2
  # the fresh run's blocks must fit the region without reuse: 10 each
  if ! timeout 900 "$KV" --servers "$RADDR" --big "$SIZES" --reps 10 \
    >"$tmp/fresh.$p" 2>&1 ||
    ! timeout 900 "$KV" --servers "$RADDR" --big "$SIZES" --reps "$REPS" \
      --warm 2G >"$tmp/kv.$p" 2>&1; then
    notes+=("$p: rkv-bench-kv failed: $(tail -1 "$tmp/fresh.$p" "$tmp/kv.$p")")
    peers_stop
    continue
  fi
  peers_stop
  echo "run-big: $p: transport" >&2
  if ! timeout 900 "$TP" --provider "$p" --sizes "$bytes" --ops read,write \
    --iters "$REPS" --warmup 2 >"$tmp/tp.$p" 2>&1; then
    notes+=("$p: rkv-bench-transport failed: $(tail -1 "$tmp/tp.$p")")
    continue
  fi
  # the raw WRITE again, each to a new place of a region as large as the
  # server's (written once before), as a put's out-of-place block is
  if ! timeout 900 "$TP" --provider "$p" --sizes "$bytes" --ops write \
    --iters "$REPS" --warmup 2 --spread 2G >"$tmp/tps.$p" 2>&1; then
    notes+=("$p: rkv-bench-transport --spread failed: $(tail -1 "$tmp/tps.$p")")
    continue
  fi
  for n in $(tr ',' ' ' <<<"$bytes"); do
    # big N put p50 X ns ... get p50 Y ns ...
    put=$(awk -v n="$n" '$1 == "big" && $2 == n {print $5}' "$tmp/kv.$p")
    get=$(awk -v n="$n" '$1 == "big" && $2 == n {print $14}' "$tmp/kv.$p")
    fput=$(awk -v n="$n" '$1 == "big" && $2 == n {print $5}' "$tmp/fresh.$p")
    rd=$(tp_p50 "$tmp/tp.$p" "$p" read "$n")
    wr=$(tp_p50 "$tmp/tp.$p" "$p" write "$n")
    wrs=$(tp_p50 "$tmp/tps.$p" "$p" write "$n")
    if [ -z "$put" ] || [ -z "$get" ] || [ -z "$rd" ] || [ -z "$wr" ] ||
      [ -z "$wrs" ] || [ -z "$fput" ]; then
      notes+=("$p, $n bytes: a figure is missing")
      continue
    fi
    rows+=("$(awk -v p="$p" -v n="$n" -v put="$put" -v get="$get" -v rd="$rd" \
      -v wr="$wr" -v wrs="$wrs" -v fput="$fput" 'BEGIN {
        printf "| %s | %.0f MiB | %.2f ms | %.2f ms | %.2f | %.2f ms | %.2f ms | %.2f | %.2f ms | %.2f | %.2f ms | %.2f |",
          p, n / 1048576, get / 1e6, rd / 1e3, rd * 1e3 / get,
          put / 1e6, wr / 1e3, wr * 1e3 / put, wrs / 1e3, wrs * 1e3 / put,
          fput / 1e6, wr * 1e3 / fput }')")
  done
done

{
  echo "# Big values against the raw transport, $DATE"
  echo
  echo "One client thread, one operation at a time, p50 of $REPS each (of 10 for fresh pages); $(nproc) cores."
  echo
  echo "| provider | size | rkv get | READ | READ / get | rkv put | WRITE | WRITE / put | WRITE, new place | it / put | put, fresh pages | WRITE / it |"
  echo "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
  printf '%s\n' "${rows[@]}"
  echo
  echo "- rkv get: a cached get (one round: the slot word, the header and"
  echo "  key, and on tcp and shm the value straight into the caller's"
  echo "  buffer, checksummed as it is copied). rkv put: space granted (a"
  echo "  block over the chunk size is a CHUNK_ALLOC of its own, asked for"
  echo "  ahead), the value WRITten (on tcp and shm straight from the"
  echo "  caller's buffer, checksummed as it is copied), then its checksum"
  echo "  WRITten with the READ of the buckets, and the slot CASed; into"
  echo "  memory the region had used before (rkv-bench-kv --warm 2G)."
  echo "- put, fresh pages: the same puts by a first run, whose blocks land"
  echo "  on pages of the region touched for the first time."
  echo "- READ / WRITE: rkv-bench-transport, the same provider and bytes,"
  echo "  the same place of the target each time (cache-hot on shm up to"
  echo "  a few MiB). WRITE, new place: each WRITE to the next place of a"
  echo "  2 GiB region written once before (--spread 2G), as every put"
  echo "  writes a new block."
  echo "- Goals (issue): READ / get >= 0.8, WRITE / put >= 0.7."
  for l in "${notes[@]}"; do echo "- $l"; done
} | tee "$MD"
echo "run-big: wrote $MD"
