#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# selftest.sh - checks of rkv-ycsb, TAP output.
#
#   bench/ycsb/selftest.sh BUILD_DIR
#
# Bad input (unknown property, malformed value, unreadable file, unknown
# --db, a peer that is not running) exits 2 with one line naming it; the
# same seed gives the same operations (--dump-ops) and YCSB's key names;
# tiny workloads C, F and D (and E: scans skipped) against a real
# rkv-server on tcp finish with zero errors and every value checked
# (dataintegrity=true); the JSON lines and the CDF plot; Redis and
# memcached (workloads E and A) when their servers are installed.
# Fields: one-field updates (writeallfields=false) on rkv over tcp and
# shm, Redis and memcached leave every record checkable byte for byte
# and leave the fields they did not write as they were (records read back
# hold fields of the load's version 0 beside updated ones), while
# writeallfields=true rewrites every field; fieldlengthdistribution
# uniform and zipfian give records of varying lengths that every store
# updates one field of and reads back checked; a bad value is refused.
# Exit 0 when every check passed (skips included), 1 otherwise.
set -u
O=${1:-build}
cd "$(dirname "$0")/../.." || exit 1
Y=$O/bin/rkv-ycsb
SRV=$O/bin/rkv-server
N=0
FAILS=0
PIDS=()
tmp=$(mktemp -d) || exit 1

cleanup() {
  local p
  for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null; done
  for p in "${PIDS[@]}"; do wait "$p" 2>/dev/null; done
  rm -rf "$tmp"
}
trap cleanup EXIT

ok() { N=$((N + 1)); echo "ok $N - $1"; }
notok() {
  N=$((N + 1)); FAILS=$((FAILS + 1)); echo "not ok $N - $1"
  [ -f "$tmp/err" ] && sed 's/^/#   /' "$tmp/err" | tail -5
}
skip() { N=$((N + 1)); echo "ok $N - $1 # SKIP $2"; }

# expect STATUS PATTERN NAME -- CMD...: status and one stderr line, matching
expect() {
  local want=$1 pat=$2 name=$3 rc
  shift 4
  timeout -k 5 60 "$@" >"$tmp/out" 2>"$tmp/err"
  rc=$?
  if [ "$rc" = "$want" ] && grep -qE -- "$pat" "$tmp/err" &&
    [ "$(wc -l <"$tmp/err")" = 1 ]; then
    ok "$name"
  else
    echo "# exit $rc (want $want), stderr:" >>"$tmp/err"
    notok "$name"
  fi
}

. bench/ycsb/peers.sh

if [ ! -x "$Y" ]; then
  echo "not ok 1 - $Y exists (build it first)"
  echo "1..1"
  exit 1
fi
W=workloads

# ------------------------------------------------------------ bad input
printf 'recordcount=10\nfoo=3\n' >"$tmp/unknown"
printf '# c\nrecordcount=1x\n' >"$tmp/malformed"
printf 'readproportion=0.5\nrequestdistribution=pareto\n' >"$tmp/baddist"
expect 2 "$tmp/unknown:2: unknown property 'foo'" \
  "unknown property in a file: file, line and name, exit 2" -- \
  "$Y" -P "$tmp/unknown" --dump-ops 1
expect 2 "$tmp/malformed:2: recordcount: bad value '1x'" \
  "malformed value: file, line and property, exit 2" -- \
  "$Y" -P "$tmp/malformed" --dump-ops 1
expect 2 "$tmp/baddist:2: requestdistribution: bad value 'pareto'" \
  "unknown distribution, exit 2" -- "$Y" -P "$tmp/baddist" --dump-ops 1
expect 2 "-p: readproportion: bad value '1.5'" "-p malformed value, exit 2" -- \
  "$Y" -P $W/workloada -p readproportion=1.5 --dump-ops 1
expect 2 "-p: unknown property 'nosuch'" "-p unknown property, exit 2" -- \
  "$Y" -P $W/workloada -p nosuch=1 --dump-ops 1
expect 2 "cannot read workload file $tmp/none: No such file" \
  "unreadable workload file, exit 2" -- "$Y" -P "$tmp/none"
expect 2 "--db: unknown store 'mongodb'" "unknown --db, exit 2" -- \
  "$Y" -P $W/workloada --db mongodb
expect 2 "--phase: bad value" "bad --phase, exit 2" -- \
  "$Y" -P $W/workloada --phase warmup
dead=$(free_port)
expect 2 "cannot connect to redis at 127.0.0.1:$dead: Connection refused \(start it with: redis-server --port $dead" \
  "redis not running: how to start it, exit 2" -- \
  "$Y" -P $W/workloada --db redis --servers "127.0.0.1:$dead"
expect 2 "cannot connect to memcached at 127.0.0.1:$dead: Connection refused \(start it with: memcached" \
  "memcached not running: how to start it, exit 2" -- \
  "$Y" -P $W/workloada --db memcached --servers "127.0.0.1:$dead"
expect 2 "cannot connect to rkv at tcp://127.0.0.1:$dead: Connection refused \(start it with: rkv-server --listen tcp://127.0.0.1:$dead" \
  "rkv-server not running: how to start it, exit 2" -- \
  "$Y" -P $W/workloada --servers "127.0.0.1:$dead" --provider tcp

# --------------------------------------------------------- determinism
D=(-P $W/workloadd -p recordcount=1000 -p operationcount=1000 --threads 2)
"$Y" "${D[@]}" --seed 7 --dump-ops 200 >"$tmp/d1" 2>"$tmp/err"
"$Y" "${D[@]}" --seed 7 --dump-ops 200 >"$tmp/d2" 2>>"$tmp/err"
"$Y" "${D[@]}" --seed 8 --dump-ops 200 >"$tmp/d3" 2>>"$tmp/err"
if [ "$(wc -l <"$tmp/d1")" = 200 ] && cmp -s "$tmp/d1" "$tmp/d2"; then
  ok "same seed, same 200 operations"
else
  notok "same seed, same 200 operations"
fi
if ! cmp -s "$tmp/d1" "$tmp/d3"; then
  ok "another seed, other operations"
else
  notok "another seed, other operations"
fi
reads=$(grep -c ' READ ' "$tmp/d1"); ins=$(grep -c ' INSERT ' "$tmp/d1")
if [ "$reads" -ge 170 ] && [ "$ins" -ge 2 ] && [ $((reads + ins)) = 200 ]; then
  ok "workload D mix: $reads reads, $ins inserts of 200"
else
  notok "workload D mix: $reads reads, $ins inserts of 200"
fi
# YCSB's key for record 0 (hashed order) is user6284781860667377211
printf 'recordcount=0\noperationcount=2\nreadproportion=0\nupdateproportion=0\ninsertproportion=1\n' >"$tmp/ins"
if "$Y" -P "$tmp/ins" --dump-ops 2 2>"$tmp/err" | head -1 |
  grep -q '^0 INSERT user6284781860667377211$'; then
  ok "key names are YCSB's (user + fnvhash64)"
else
  notok "key names are YCSB's (user + fnvhash64)"
fi
if "$Y" -P "$tmp/ins" -p insertorder=ordered -p zeropadding=6 --dump-ops 2 \
  2>"$tmp/err" | tail -1 | grep -q '^1 INSERT user000001$'; then
  ok "ordered keys with zeropadding"
else
  notok "ordered keys with zeropadding"
fi

# every property of YCSB's workloads/workload_template, as that file sets
# them (its commented ones too), is taken
{
  printf '%s\n' workload=com.yahoo.ycsb.workloads.CoreWorkload \
    recordcount=1000 operationcount=3000 insertcount=1000 insertstart=0 \
    fieldcount=10 fieldlength=100 readallfields=true writeallfields=false \
    fieldlengthdistribution=constant readproportion=0.95 \
    updateproportion=0.05 insertproportion=0 readmodifywriteproportion=0 \
    scanproportion=0 maxscanlength=1000 scanlengthdistribution=uniform \
    insertorder=hashed requestdistribution=zipfian hotspotdatafraction=0.2 \
    hotspotopnfraction=0.8 maxexecutiontime=10 table=usertable \
    columnfamily=family measurementtype=histogram histogram.buckets=1000 \
    timeseries.granularity=1000 reportlatencyforeacherror=false \
    'latencytrackederrors="a,b"'
  echo 'measurement.raw.output_file = /tmp/raw'
  echo 'measurement.trackjvm = false'
  echo 'core_workload_insertion_retry_limit = 0'
  echo 'core_workload_insertion_retry_interval = 3'
} >"$tmp/template"
if "$Y" -P "$tmp/template" --dump-ops 2 >"$tmp/out" 2>"$tmp/err" &&
  [ "$(wc -l <"$tmp/out")" = 2 ]; then
  ok "every property of YCSB's workload_template is taken"
else
  notok "every property of YCSB's workload_template is taken"
fi
expect 2 "fieldlengthdistribution: bad value 'pareto' \(want constant, uniform or zipfian\)" \
  "fieldlengthdistribution pareto refused with one line, exit 2" -- \
  "$Y" -P $W/workloadc -p fieldlengthdistribution=pareto --dump-ops 1
expect 2 "fieldlengthdistribution: histogram is not supported" \
  "fieldlengthdistribution histogram refused with one line, exit 2" -- \
  "$Y" -P $W/workloadc -p fieldlengthdistribution=histogram --dump-ops 1
expect 2 "writeallfields: bad value 'yes' \(want true or false\)" \
  "writeallfields yes refused with one line, exit 2" -- \
  "$Y" -P $W/workloada -p writeallfields=yes --dump-ops 1
expect 2 "minfieldlength 200 > fieldlength 100" \
  "minfieldlength above fieldlength refused with one line, exit 2" -- \
  "$Y" -P $W/workloada -p fieldlengthdistribution=uniform \
  -p minfieldlength=200 --dump-ops 1
# the field choices and lengths do not change the keys and op types
# (they come from a stream of their own)
A=(-P "$W/workloada" -p recordcount=1000 -p operationcount=1000 --seed 7
  --dump-ops 200)
"$Y" "${A[@]}" >"$tmp/a1" 2>"$tmp/err"
"$Y" "${A[@]}" -p fieldlengthdistribution=zipfian -p writeallfields=true \
  >"$tmp/a2" 2>>"$tmp/err"
if [ "$(grep -c ' UPDATE ' "$tmp/a1")" -ge 50 ] && cmp -s "$tmp/a1" "$tmp/a2"; then
  ok "field settings leave the operation stream as it was"
else
  notok "field settings leave the operation stream as it was"
fi

# request distributions over 1000 ordered keys: the first three keys, the
# share of 2000 reads on keys below 200 and on keys from 700
dist_keys() {
  "$Y" -P $W/workloadc -p recordcount=1000 -p operationcount=2000 \
    -p insertorder=ordered -p zeropadding=4 -p requestdistribution="$1" \
    --dump-ops 2000 2>"$tmp/err" | awk '{ k = substr($3, 5) + 0; n++
      if (k < 200) lo++; if (k >= 700) hi++; if (NR <= 3) f = f k "," }
      END { printf "%s %.3f %.3f\n", f, lo / n, hi / n }'
}
within() { awk -v v="$1" -v a="$2" -v b="$3" 'BEGIN { exit !(v >= a && v <= b) }'; }
read -r f lo hi <<<"$(dist_keys sequential)"
if [ "$f" = "0,1,2," ] && [ "$lo" = 0.200 ] && [ "$hi" = 0.300 ]; then
  ok "sequential: keys 0, 1, 2, ... in turn, each as often"
else
  notok "sequential: first $f, below 200 $lo, from 700 $hi"
fi
read -r f lo hi <<<"$(dist_keys hotspot)"
if within "$lo" 0.76 0.84 && within "$hi" 0.04 0.11; then
  ok "hotspot: $lo of the reads on the hot 20 % of the keys"
else
  notok "hotspot: below 200 $lo, from 700 $hi"
fi
read -r f lo hi <<<"$(dist_keys exponential)"
# P(offset < 300) = 1 - exp(-300 ln(20) / 857.14) = 0.650, renormalised
# for the 3 % past key 0: 0.67
if within "$hi" 0.62 0.72 && within "$lo" 0 0.06; then
  ok "exponential: $hi of the reads on the last 30 % of the keys"
else
  notok "exponential: below 200 $lo, from 700 $hi"
fi
expect 2 "exponential.percentile 100 must be in \(0, 100\)" \
  "exponential.percentile out of range, exit 2" -- \
  "$Y" -P $W/workloadc -p exponential.percentile=100 --dump-ops 1

# ------------------------------------------------------------- fields
# 20 ordered records (user0..user19), updates only (every record about 20
# times, on one field each), then every record read 10 times; all with
# dataintegrity=true, so each field of each record read is checked.
FB=(-P "$W/workloada" -p recordcount=20 -p insertorder=ordered
  -p dataintegrity=true --threads 1 --batch 2)
UPD=(-p operationcount=400 -p readproportion=0 -p updateproportion=1
  -p requestdistribution=uniform)
RD=(-p operationcount=200 -p readproportion=1 -p updateproportion=0
  -p requestdistribution=sequential --phase run)

# fields_run NAME ARGS...: load + updates, then the reads, zero errors
fields_run() {
  local name=$1 rc1 rc2
  shift
  timeout -k 5 60 "$Y" "${FB[@]}" "${UPD[@]}" "$@" >"$tmp/out" 2>"$tmp/err"
  rc1=$?
  timeout -k 5 60 "$Y" "${FB[@]}" "${RD[@]}" "$@" >>"$tmp/out" 2>>"$tmp/err"
  rc2=$?
  if [ "$rc1" = 0 ] && [ "$rc2" = 0 ] &&
    grep -q '^  UPDATE  *400 ' "$tmp/out" && grep -q '^  READ  *200 ' "$tmp/out" &&
    ! awk '$1 ~ /^(READ|UPDATE|INSERT)$/ && $9 != 0' "$tmp/out" | grep -q .; then
    ok "$name"
  else
    cat "$tmp/out" >>"$tmp/err"
    notok "$name: exit $rc1, $rc2"
  fi
}

# field_tags GETTER...: for user0..user19 (10 fields of 100 bytes), the
# records with a field of version 0 (the load's) beside an updated one,
# and those whose 10 fields have one version: "MIXED SAME"
field_tags() {
  local k
  for k in $(seq 0 19); do
    "$@" "user$k" | head -c 1000
    echo
  done | awk '{ n0 = 0; d = 0; delete seen
      for (i = 0; i < 10; i++) { t = substr($0, i * 100 + 1, 16)
        if (t == "0000000000000000") n0++
        if (!(t in seen)) { seen[t] = 1; d++ } }
      if (n0 > 0 && n0 < 10) mixed++; if (d == 1) same++ }
    END { printf "%d %d\n", mixed, same }'
}

# fields_tags NAME GETTER...: after fields_run (one-field updates)
fields_tags() {
  local name=$1 mixed same
  shift
  read -r mixed same <<<"$(field_tags "$@")"
  if [ "${mixed:-0}" -ge 1 ] && [ "${same:-1}" = 0 ]; then
    ok "$name: $mixed of 20 records keep load-time fields beside updated ones"
  else
    echo "# $mixed records mixed, $same with one version" >"$tmp/err"
    notok "$name: one-field updates"
  fi
}

# rkv_get ADDR KEY: the raw value
rkv_get() { "$O/bin/rkv" --servers "$1" --raw get "$2"; }

# fields_rkv LABEL ADDR: the field checks on an rkv-server
fields_rkv() {
  local label=$1 a=$2 d lens
  fields_run "one-field updates on rkv $label, then every record read back checked" \
    --servers "$a"
  fields_tags "one-field updates on rkv $label" rkv_get "$a"
  [ "$label" = tcp ] || return 0
  fields_run "writeallfields=true on rkv $label: zero errors" --servers "$a" \
    -p writeallfields=true
  read -r mixed same <<<"$(field_tags rkv_get "$a")"
  if [ "$mixed" = 0 ] && [ "$same" = 20 ]; then
    ok "writeallfields=true: every update rewrites all 10 fields"
  else
    echo "# $mixed records mixed, $same with one version" >"$tmp/err"
    notok "writeallfields=true: every update rewrites all 10 fields"
  fi
  for d in uniform zipfian; do
    fields_run "fieldlengthdistribution=$d on rkv $label: one-field updates, reads checked" \
      --servers "$a" -p fieldlengthdistribution=$d
    # lengths: the 20-byte header + 10 fields of 1..100 bytes
    lens=$(for k in $(seq 0 19); do rkv_get "$a" "user$k" | wc -c; done |
      sort -n | awk '{ s += $1; v[NR] = $1 }
        END { printf "%d %d %d\n", v[1], v[NR], s / NR }')
    read -r lo hi avg <<<"$lens"
    if [ "$d" = uniform ]; then want="$avg -ge 350 ] && [ $avg -le 700"
    else want="$avg -le 400"; fi
    if [ "$lo" -ge 30 ] && [ "$hi" -le 1020 ] && [ "$lo" -lt "$hi" ] &&
      eval "[ $want ]"; then
      ok "fieldlengthdistribution=$d: record lengths $lo..$hi, mean $avg"
    else
      echo "# lengths $lo..$hi, mean $avg" >"$tmp/err"
      notok "fieldlengthdistribution=$d: record lengths"
    fi
  done
}

# start_srv LISTEN NAME: an rkv-server (its PID in PIDS, output in
# $tmp/NAME.out and .err); sets SADDR to its address, empty if it did not
# start (run it in this shell, not in $(...), so its PID stays in PIDS)
start_srv() {
  local a
  "$SRV" --listen "$1" --capacity 20000 --memory 64M >"$tmp/$2.out" \
    2>"$tmp/$2.err" &
  PIDS+=($!)
  for _ in $(seq 1 100); do
    a=$(sed -n 's/^rkv-server: listening on //p' "$tmp/$2.out")
    [ -n "$a" ] && break
    sleep 0.1
  done
  SADDR=$a
}

# --------------------------------------------------- against rkv (tcp)
start_srv tcp://127.0.0.1:0 srv
addr=$SADDR
R=(-p recordcount=500 -p operationcount=3000 -p dataintegrity=true
  --threads 2 --batch 4 --servers "$addr" --json "$tmp/r.json")
if [ -z "$addr" ]; then
  cp "$tmp/srv.err" "$tmp/err"
  notok "rkv-server (tcp) starts"
else
  ok "rkv-server (tcp) starts at $addr"
  for w in c f d; do
    ph=run
    [ $w = c ] && ph=both
    timeout -k 5 120 "$Y" -P $W/workload$w "${R[@]}" --phase $ph \
      --label "rkv-$w" >"$tmp/out" 2>"$tmp/err"
    rc=$?
    if [ "$rc" = 0 ] && grep -q '^\[RUN\] rkv-'"$w"': 3000 ops' "$tmp/out" &&
      ! awk '$1 ~ /^(READ|UPDATE|INSERT|READ-MODIFY-WRITE)$/ && $9 != 0' \
        "$tmp/out" | grep -q .; then
      ok "workload $w on rkv tcp: 3000 ops, zero errors, values checked"
    else
      cat "$tmp/out" >>"$tmp/err"
      notok "workload $w on rkv tcp: exit $rc"
    fi
  done
  timeout -k 5 60 "$Y" -P $W/workloade "${R[@]}" --phase run \
    --label rkv-e >"$tmp/out" 2>"$tmp/err"
  rc=$?
  if [ "$rc" = 0 ] && grep -q 'scan: not supported by a hash index' "$tmp/out" &&
    grep -q 'SCAN: [0-9]* skipped' "$tmp/out" &&
    grep -q '^\[RUN\] rkv-e: not run: SCAN: rkv: not supported' "$tmp/out"; then
    ok "workload E on rkv: not run (scans unsupported and skipped), exit 0"
  else
    cat "$tmp/out" >>"$tmp/err"
    notok "workload E on rkv: exit $rc"
  fi
  # the summary has no ops/s for it, nor a ratio
  "$Y" --summary "$tmp/r.json" >"$tmp/sum" 2>"$tmp/err"
  if grep -q '^| workloade |.* not run | - |$' "$tmp/sum" &&
    ! grep '^| workloade |' "$tmp/sum" | grep -q '[0-9]' &&
    grep -q '^| workloadc | [0-9]' "$tmp/sum"; then
    ok "summary: workload E on rkv reads 'not run'"
  else
    cat "$tmp/sum" >>"$tmp/err"
    notok "summary: workload E on rkv reads 'not run'"
  fi
  nl=$(wc -l <"$tmp/r.json" 2>/dev/null || echo 0)
  if [ "$nl" = 5 ] && grep -q '"phase":"load"' "$tmp/r.json" &&
    grep -q '"rtt_per_op"' "$tmp/r.json" && grep -q '"cdf":\[\[0.01,' "$tmp/r.json"; then
    ok "JSON: one line per phase (5), with RTTs and CDF points"
  else
    notok "JSON: $nl lines"
  fi
  if "$Y" --summary "$tmp/r.json" >"$tmp/sum" 2>"$tmp/err" &&
    grep -q '^| workloadf |' "$tmp/sum"; then
    ok "--summary reads the JSON back"
  else
    notok "--summary reads the JSON back"
  fi
  if ! command -v gnuplot >/dev/null; then
    skip "--plot draws CDFs" "gnuplot not installed"
  elif "$Y" --json "$tmp/r.json" --plot "$tmp/r.png" >/dev/null 2>"$tmp/err" &&
    [ -s "$tmp/r.png" ]; then
    ok "--plot draws CDFs"
  else
    notok "--plot draws CDFs"
  fi
  fields_rkv tcp "$addr"
fi

# --------------------------------------------------- against rkv (shm)
start_srv "shm:///rkv-ycsb-selftest-$$" shm
saddr=$SADDR
if [ -z "$saddr" ]; then
  cp "$tmp/shm.err" "$tmp/err"
  notok "rkv-server (shm) starts"
else
  fields_rkv shm "$saddr"
fi

# ------------------------------------------------------ Redis, memcached
# peer_run NAME GREP LOG ARGS...: runs rkv-ycsb ARGS against the peer on
# $PORT (whose output is in LOG)
peer_run() {
  local name=$1 pat=$2 log=$3 rc
  shift 3
  timeout -k 5 120 "$Y" "$@" --servers "127.0.0.1:$PORT" >"$tmp/out" \
    2>"$tmp/err"
  rc=$?
  if [ "$rc" = 0 ] && grep -qE -- "$pat" "$tmp/out"; then
    ok "$name"
  else
    cat "$tmp/out" >>"$tmp/err"
    sed 's/^/peer: /' "$log" | tail -3 >>"$tmp/err"
    notok "$name: exit $rc"
  fi
}
if ! command -v redis-server >/dev/null; then
  skip "workload E on Redis" "redis-server not installed"
elif ! start_peer "$tmp/redis.log" redis-server --port @PORT@ --save '' \
  --appendonly no --bind 127.0.0.1; then
  printf '%s' "$PEER_WHY" >"$tmp/err"
  notok "workload E on Redis: redis-server does not start"
else
  peer_run "workload E on Redis: scans through the ycsb:keys index" \
    '^  SCAN +[0-9]+' "$tmp/redis.log" -P $W/workloade -p recordcount=300 \
    -p operationcount=300 -p dataintegrity=true --threads 2 --batch 4 \
    --db redis
  grep -q 'records per scan' "$tmp/out" ||
    notok "workload E on Redis: no 'records per scan' line"
  fields_run "one-field updates on Redis (SETRANGE), then every record read back checked" \
    --db redis --servers "127.0.0.1:$PORT"
  if command -v redis-cli >/dev/null; then
    redis_get() { redis-cli -p "$PORT" --raw GET "$1"; }
    fields_tags "one-field updates on Redis" redis_get
  else
    skip "one-field updates on Redis: fields kept" "redis-cli not installed"
  fi
  fields_run "fieldlengthdistribution=zipfian on Redis (splice script): reads checked" \
    --db redis --servers "127.0.0.1:$PORT" -p fieldlengthdistribution=zipfian
fi
user=()
[ "$(id -u)" = 0 ] && user=(-u root)
if ! command -v memcached >/dev/null; then
  skip "workload A on memcached" "memcached not installed"
elif ! start_peer "$tmp/mc.log" memcached "${user[@]}" -l 127.0.0.1 \
  -p @PORT@ -U 0; then
  printf '%s' "$PEER_WHY" >"$tmp/err"
  notok "workload A on memcached: memcached does not start"
else
  peer_run "workload A on memcached: zero errors" '^  UPDATE +[0-9]+' \
    "$tmp/mc.log" -P $W/workloada -p recordcount=300 -p operationcount=1000 \
    -p dataintegrity=true --threads 2 --batch 4 --db memcached
  fields_run "one-field updates on memcached (gets/cas), then every record read back checked" \
    --db memcached --servers "127.0.0.1:$PORT"
  # mc_get KEY: the value, by the text protocol
  mc_get() {
    exec 3<>"/dev/tcp/127.0.0.1/$PORT" || return 1
    printf 'get %s\r\n' "$1" >&3
    head -2 <&3 | tail -1 | tr -d '\r'
    exec 3<&-
  }
  fields_tags "one-field updates on memcached" mc_get
  fields_run "fieldlengthdistribution=uniform on memcached: reads checked" \
    --db memcached --servers "127.0.0.1:$PORT" -p fieldlengthdistribution=uniform
fi

echo "1..$N"
[ "$FAILS" = 0 ]
