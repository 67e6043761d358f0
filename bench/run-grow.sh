#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# bench/run-grow.sh - an index that grows online beside one allocated for
# its keys from the start, in the same run.
#
#   bash bench/run-grow.sh [BUILD_DIR]        # default build/
#
# For each provider of GROW_PROVIDERS (default "shm tcp"): three
# rkv-servers of --memory GROW_MEMORY (1G): "grown" without --capacity (its
# index starts at 1/64 of --memory / 8 and adds levels as keys arrive:
# layout.h "Levels"), "hint" with --capacity N (sized for the N keys, and
# may grow: its ops READ the level word), "prealloc" with --capacity N
# --index-max 0 (one fixed level, as before levels).  rkv-ycsb loads N records of 100 bytes
# (workload C's, GROW_RECORDS: 1,000,000 on shm, GROW_TCP_RECORDS:
# 200,000 on tcp; 2 threads x 8 in flight) into each, one server at a
# time, then runs workload C (GROW_OPS reads, default N) against it.
# The figures: load (insert) and C throughput, grown / preallocated; the
# RTTs per insert and per read; the levels the grown index reached, the
# fill of the levels before each step and what a step cost the server
# (its log); index bytes.  Writes bench/results/grow-<DATE>.md.
# Exit status: 0 when it ran (figures never fail it), 2 when it cannot.
set -u
O=${1:-build}
cd "$(dirname "$0")/.." || exit 2

SRV=$O/bin/rkv-server
Y=$O/bin/rkv-ycsb
CLI=$O/bin/rkv
PROVS=${GROW_PROVIDERS:-shm tcp}
MEM=${GROW_MEMORY:-1G}
RES=bench/results
DATE=$(date -u +%Y%m%d-%H%M%S)
MD=$RES/grow-$DATE.md
. bench/ycsb/peers.sh
bench_setup run-grow "$SRV" "$Y" "$CLI"
export RKV_SHM_DIR=$tmp/shm
mkdir -p "$RKV_SHM_DIR"
rows=()
steps=()
notes=()

# json_num FILE PHASE FIELD: FIELD of the PHASE object rkv-ycsb wrote
json_num() {
  python3 - "$1" "$2" "$3" <<'PY'
import json, sys
for line in open(sys.argv[1]):
    o = json.loads(line)
    if o.get("phase") == sys.argv[2]:
        v = o
        for k in sys.argv[3].split("."):
            v = v[int(k)] if isinstance(v, list) else v[k]
        print(v)
        break
PY
}

stat_of() { awk -v k="$1" '$1 == k {print $2; exit}' "$tmp/stat"; }

for prov in $PROVS; do
  n=${GROW_RECORDS:-1000000}
  [ "$prov" = tcp ] && n=${GROW_TCP_RECORDS:-200000}
  ops=${GROW_OPS:-$n}
  for kind in grown hint prealloc; do
    if [ "$prov" = shm ]; then
      listen="shm:///rkv-grow-$$-$kind"
    else
      listen=tcp://127.0.0.1:0
    fi
    extra=()
    [ "$kind" = hint ] && extra=(--capacity "$n")
    [ "$kind" = prealloc ] && extra=(--capacity "$n" --index-max 0)
    if ! start_rkv_server "$tmp/srv-$prov-$kind.out" --listen "$listen" \
      --memory "$MEM" "${extra[@]}"; then
      notes+=("$prov $kind: rkv-server did not start: $RKV_WHY")
      continue
    fi
    echo "run-grow: $prov $kind: $n records" >&2
    json=$tmp/$prov-$kind.json
    timeout -k 5 1800 "$Y" -P workloads/workloadc -p recordcount="$n" \
      -p operationcount="$ops" -p fieldcount=1 -p fieldlength=100 \
      --servers "$RADDR" --threads 2 --batch 8 --json "$json" \
      --label "$prov-$kind" >"$tmp/y-$prov-$kind.txt" 2>&1 ||
      notes+=("$prov $kind: rkv-ycsb failed: $(tail -1 "$tmp/y-$prov-$kind.txt")")
    "$CLI" --servers "$RADDR" stat >"$tmp/stat" 2>&1
    peers_stop
    load=$(json_num "$json" load ops_per_s)
    run=$(json_num "$json" run ops_per_s)
    lrtt=$(json_num "$json" load ops_by_type.0.rtt_per_op)
    rrtt=$(json_num "$json" run ops_by_type.0.rtt_per_op)
    nb=$(stat_of buckets)
    sl=$(stat_of bucket_slots)
    lv=$(awk '$1 == "buckets" {gsub(/[(]/, "", $3); print $3; exit}' "$tmp/stat")
    keys=$(stat_of keys)
    eval "L_${prov}_$kind=\$load R_${prov}_$kind=\$run"
    rows+=("| $prov | $kind | $n | ${lv:-?} | $nb | $(awk -v a="$keys" -v b="$nb" -v s="$sl" \
      'BEGIN {if (b * s) printf "%.1f", 100 * a / (b * s)}') % | $(awk -v b="$nb" -v s="$sl" \
      'BEGIN {printf "%.1f", b * s * 8 / 1048576}') | $(printf %.0f "$load") | $lrtt | $(printf %.0f "$run") | $rrtt |")
    if [ "$kind" = grown ]; then
      while IFS= read -r l; do
        steps+=("- $prov: ${l#*index: }")
      done < <(grep 'index: level' "$tmp/srv-$prov-$kind.out.err")
    fi
  done
  eval "lg=\${L_${prov}_grown:-0} lp=\${L_${prov}_prealloc:-0}"
  eval "rg=\${R_${prov}_grown:-0} rp=\${R_${prov}_prealloc:-0}"
  eval "lh=\${L_${prov}_hint:-0} rh=\${R_${prov}_hint:-0}"
  notes+=("$prov: grown / preallocated: load $(awk -v a="$lg" -v b="$lp" \
    'BEGIN {if (b) printf "%.2f", a / b}'), C $(awk -v a="$rg" -v b="$rp" \
    'BEGIN {if (b) printf "%.2f", a / b}'); hint / preallocated (the same buckets, the level word READ too): load $(awk -v a="$lh" -v b="$lp" \
    'BEGIN {if (b) printf "%.2f", a / b}'), C $(awk -v a="$rh" -v b="$rp" \
    'BEGIN {if (b) printf "%.2f", a / b}')")
done

{
  echo "# An index that grows beside a preallocated one, $DATE"
  echo
  echo "rkv-ycsb, workload C's records of 100 bytes, 2 threads x 8 in"
  echo "flight, one server at a time (--memory $MEM); $(nproc) cores."
  echo "grown: no --capacity; hint: --capacity N; prealloc: --capacity N"
  echo "--index-max 0."
  echo
  echo "| provider | index | records | levels | buckets | slots used | index MiB | load ops/s | RTT/insert | C ops/s | RTT/read |"
  echo "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
  printf '%s\n' "${rows[@]}"
  echo
  echo "Growth steps (the server's log: the new level, what it cost the"
  echo "control thread, and the fill of the levels before it):"
  echo
  printf '%s\n' "${steps[@]}"
  echo
  for l in "${notes[@]}"; do echo "- $l"; done
  echo "- A cold read of a grown index READs two buckets a level in one"
  echo "  doorbell (still one round); a cached read is one READ either way."
} | tee "$MD"
echo "run-grow: wrote $MD"
