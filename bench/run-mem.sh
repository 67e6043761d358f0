#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# run-mem.sh - memory per key (part of make bench; never a test): for N
# keys of 16 bytes with 100-byte values, what rkv-server's index and data
# region hold per key, and what the server process holds, beside
# redis-server loaded with the same keys and values in the same run.
#
#   bash bench/run-mem.sh [BUILD_DIR]
#   MEM_KEYS="100000 1000000" bash bench/run-mem.sh     # a quick run
#
# For each N of MEM_KEYS (default 100000 1000000 10000000): an rkv-server
# on shm (the fastest to load) started with --capacity N, loaded by
# `rkv --pipe` (puts go out 64 to an rkv_mput), then read with `rkv stat`:
# index = buckets x slots x 8 B, load factor = keys / (buckets x slots),
# data in use =
# data_len - data_free - data_grace.  Resident = VmRSS - RssShmem + the
# bytes allocated to every memfd the server holds: on shm the clients
# write the data region through their own mappings, so the server's VmRSS
# misses most of it.  The same on tcp for N <= MEM_TCP_MAX (1000000; tcp
# loads at ~30k puts/s here), where resident is a plain VmRSS: the two
# agree.  Then redis-server on a loopback port, loaded by redis-cli
# --pipe: its INFO used_memory less the empty server's, and
# used_memory_rss.  Both loads are fed by the same awk, and their times
# include it.  One server at a time, each stopped (by PID) before the next
# starts; an N the machine's MemAvailable cannot hold (600 B a key) is
# skipped and says so.  Writes bench/results/mem-<DATE>.md.
# Exit status: 0 when it ran (figures never fail it), 2 when it cannot.
set -u
O=${1:-build}
cd "$(dirname "$0")/.." || exit 2

SRV=$O/bin/rkv-server
CLI=$O/bin/rkv
NS=${MEM_KEYS:-100000 1000000 10000000}
TCP_MAX=${MEM_TCP_MAX:-1000000}
KSIZE=16
VSIZE=100
RES=bench/results
DATE=$(date -u +%Y%m%d-%H%M%S)
MD=$RES/mem-$DATE.md
. bench/ycsb/peers.sh
bench_setup run-mem "$SRV" "$CLI"
for b in redis-server redis-cli; do
  if ! command -v "$b" >/dev/null; then
    echo "run-mem: $b not found (bash tools/deps.sh installs it)" >&2
    exit 2
  fi
done
export RKV_SHM_DIR=$tmp/shm

# resident PID: bytes PID holds in memory (header above)
resident() {
  local f n=0
  for f in /proc/"$1"/fd/*; do
    case $(readlink "$f" 2>/dev/null) in
      /memfd:*) n=$((n + $(stat -L -c '%b * %B' "$f"))) ;;
    esac
  done
  awk -v n="$n" '/^VmRSS:/ {r = $2} /^RssShmem:/ {s = $2}
    END {printf "%.0f", (r - s) * 1024 + n}' /proc/"$1"/status
}

# per X N: X / N with one decimal
per() { awk -v x="$1" -v n="$2" 'BEGIN {printf "%.1f", x / n}'; }

# ratio A B: A / B with two decimals
ratio() { awk -v a="$1" -v b="$2" 'BEGIN {printf "%.2f", a / b}'; }

# gen FORMAT N: the N keys (key i: "key" and i zero-padded to KSIZE
# bytes) with a VSIZE-byte value each, as `rkv --pipe` puts (FORMAT rkv)
# or as Redis SETs in RESP (FORMAT resp)
gen() {
  awk -v fmt="$1" -v n="$2" -v ks="$KSIZE" -v vs="$VSIZE" 'BEGIN {
    v = sprintf("%" vs "s", ""); gsub(/ /, "a", v)
    kf = "key%0" (ks - 3) "d"
    for (i = 0; i < n; i++) {
      k = sprintf(kf, i)
      if (fmt == "rkv")
        print "put " k " " v
      else
        printf "*3\r\n$3\r\nSET\r\n$%d\r\n%s\r\n$%d\r\n%s\r\n", ks, k, vs, v
    }
  }'
}

# secs_since T0: seconds since T0 (date +%s.%N), two decimals
secs_since() {
  awk -v a="$1" -v b="$(date +%s.%N)" 'BEGIN {printf "%.2f", b - a}'
}

# rkv_run PROVIDER N: load N keys into a fresh server; its figures in
# R_SECS, R_NB (buckets), R_SL (slots a bucket), R_IDX, R_DATA and R_RES
# (bytes), keyed by PROVIDER
rkv_run() {
  local prov=$1 n=$2 addr=tcp://127.0.0.1:0 t0 out secs st
  [ "$prov" = shm ] && addr=shm:///rkv-mem-$$
  if ! start_rkv_server "$tmp/rkv.out" --listen "$addr" --capacity "$n" \
    --memory $((n * 256 / 1048576 + 64))M --log-level warn; then
    notes+=("rkv $prov, $n keys: rkv-server did not start: $RKV_WHY")
    return 1
  fi
  [ -z "$EMPTY_RKV" ] && EMPTY_RKV=$(resident "$RPID")
  echo "run-mem: rkv $prov: loading $n keys" >&2
  t0=$(date +%s.%N)
  # one line a put: OK, or an error (kept, the first 3)
  out=$(gen rkv "$n" | timeout 1800 "$CLI" --servers "$RADDR" --pipe 2>&1 |
    grep -v '^OK$' | head -3)
  secs=$(secs_since "$t0")
  st=$("$CLI" --servers "$RADDR" stat 2>&1)
  # stat_of NAME: that counter of `rkv stat`
  stat_of() { awk -v k="$1" '$1 == k {print $2}' <<<"$st"; }
  if [ -n "$out" ] || [ "$(stat_of keys)" != "$n" ]; then
    echo "run-mem: rkv $prov, $n keys: the load failed: $out $st" >&2
    notes+=("rkv $prov, $n keys: the load failed: $(head -1 <<<"$out")")
    peers_stop
    return 1
  fi
  R_SECS[$prov]=$secs
  R_NB[$prov]=$(stat_of buckets)
  R_SL[$prov]=$(stat_of bucket_slots)
  R_IDX[$prov]=$((R_NB[$prov] * R_SL[$prov] * 8))
  R_DATA[$prov]=$(($(stat_of data_len) - $(stat_of data_free) - $(stat_of data_grace)))
  R_RES[$prov]=$(resident "$RPID")
  peers_stop
}

# redis_run N: load N keys into a fresh redis-server; its figures in
# D_SECS, D_USED (used_memory less the empty server's) and D_RSS
redis_run() {
  local n=$1 base t0 out w=0 first
  if ! start_peer "$tmp/redis.log" redis-server --port @PORT@ --save '' \
    --appendonly no --bind 127.0.0.1 --enable-debug-command local; then
    notes+=("redis-server did not start: $PEER_WHY")
    return 1
  fi
  # mem_of NAME: that field of INFO memory
  mem_of() {
    redis-cli -p "$PORT" info memory | tr -d '\r' |
      awk -F: -v k="$1" '$1 == k {print $2}'
  }
  base=$(mem_of used_memory)
  [ -z "$EMPTY_REDIS" ] && EMPTY_REDIS=$base
  echo "run-mem: redis: loading $n keys" >&2
  t0=$(date +%s.%N)
  out=$(gen resp "$n" | redis-cli -p "$PORT" --pipe 2>&1)
  D_SECS=$(secs_since "$t0")
  if ! grep -q "errors: 0, replies: $n\$" <<<"$out" ||
    [ "$(redis-cli -p "$PORT" dbsize)" != "$n" ]; then
    echo "run-mem: redis, $n keys: the load failed: $out" >&2
    notes+=("redis, $n keys: the load failed: $(tail -1 <<<"$out")")
    peers_stop
    return 1
  fi
  # A load that doubled the main dict near its end leaves the old table
  # to be rehashed away 1 ms in every 100 (tens of seconds at 10M keys):
  # until then both count.  Wait for it (DEBUG HTSTATS names the target).
  first=$(($(mem_of used_memory) - base))
  while [ "$w" -lt 180 ] &&
    redis-cli -p "$PORT" debug htstats 0 | grep -q 'rehashing target'; do
    sleep 1
    w=$((w + 1))
  done
  D_USED=$(($(mem_of used_memory) - base))
  [ "$w" -gt 0 ] &&
    notes+=("Redis, $n keys: $(per "$first" "$n") B a key right after the load, its dict still rehashing (done $w s later)")
  D_RSS=$(mem_of used_memory_rss)
  peers_stop
}

rows=()
notes=()
EMPTY_RKV=
EMPTY_REDIS=
declare -A R_SECS R_NB R_SL R_IDX R_DATA R_RES
for n in $NS; do
  avail=$(awk '/^MemAvailable:/ {print $2}' /proc/meminfo) # KiB
  if [ "$avail" -lt $((n * 600 >> 10)) ]; then
    notes+=("$n keys skipped: $((avail >> 10)) MiB available, want $((n * 600 >> 20))")
    continue
  fi
  R_SECS=()
  provs=shm
  [ "$n" -le "$TCP_MAX" ] && provs="shm tcp"
  for p in $provs; do rkv_run "$p" "$n"; done
  D_USED=
  redis_run "$n"
  for p in $provs; do
    [ -n "${R_SECS[$p]:-}" ] || continue
    tot=$((R_IDX[$p] + R_DATA[$p]))
    vs="n/a | n/a"
    [ -n "$D_USED" ] && vs="$(ratio "$tot" "$D_USED") | $(ratio "${R_RES[$p]}" "$D_RSS")"
    rows+=("| $n | rkv ($p) | ${R_SECS[$p]} | ${R_NB[$p]} \
| $(per $((n * 100)) $((R_NB[$p] * R_SL[$p])))% | $(per "${R_IDX[$p]}" "$n") \
| $(per "${R_DATA[$p]}" "$n") | $(per "$tot" "$n") \
| $(per "${R_RES[$p]}" "$n") | $vs |")
  done
  [ -n "$D_USED" ] && rows+=("| $n | redis-server | $D_SECS | | | | \
| $(per "$D_USED" "$n") | $(per "$D_RSS" "$n") | 1 | 1 |")
done

block=$(((32 + KSIZE + VSIZE + 63) / 64 * 64))
{
  echo "# Memory per key, $DATE"
  echo
  echo "$KSIZE-byte keys, $VSIZE-byte values, one server at a time on"
  echo "$(nproc) cores (load $(cut -d' ' -f1-3 /proc/loadavg));"
  echo "$(redis-server --version | cut -d' ' -f1-3,5-6). Bytes per key."
  echo
  echo "| keys | server | load s | buckets | load factor | index | data | total | resident | total / Redis | resident / Redis |"
  echo "|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
  printf '%s\n' "${rows[@]}"
  echo
  echo "- index: buckets of ${R_SL[shm]:-32} slots of 8 B as --capacity N"
  echo "  sized them (24 keys a bucket of 32, then a power of two of"
  echo "  buckets): 8 / load factor B a key, where load factor = keys /"
  echo "  slots; 8.6 B at the 93 % an index of 32-slot buckets fills before"
  echo "  its first refusal (docs/DESIGN.md §3)."
  echo "- data: data_len - data_free - data_grace of \`rkv stat\`: one block"
  echo "  a key of a 32 B header + $KSIZE B key + $VSIZE B value = $((32 + KSIZE + VSIZE)) B, rounded"
  echo "  up to 64 B units: $block B, $((block - KSIZE - VSIZE)) B over the key and value"
  echo "  ($((block - 32 - KSIZE - VSIZE)) B of it padding)."
  echo "- total: index + data. Redis: used_memory less the empty server's"
  echo "  (${EMPTY_REDIS:-n/a} B)."
  echo "- resident: rkv, VmRSS - RssShmem + the server's memfds' allocated"
  echo "  bytes (an empty server: ${EMPTY_RKV:-n/a} B); Redis, used_memory_rss."
  echo "  Both include the empty process."
  echo "- load s: \`rkv --pipe\` (puts 64 to an rkv_mput) and \`redis-cli"
  echo "  --pipe\`, each fed by the same awk."
  for l in "${notes[@]}"; do echo "- $l"; done
} | tee "$MD"
echo "run-mem: wrote $MD"
