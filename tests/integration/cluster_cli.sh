#!/usr/bin/env bash
# cluster_cli.sh - the rkv CLI against a static cluster of three named
# rkv-servers (tcp), as a new user meets it: a cluster file in one order,
# 150 one-shot puts, the keys read back through a file in another order,
# `rkv cluster` (the map and each server's state), one server killed (its
# keys: one line naming it, exit 2; the others' keys: unaffected),
# restarted (served again, empty), a wrong name.
# TAP output.  Usage: cluster_cli.sh BUILD_DIR
set -u
# what a new user sees: librkv's messages only inside the error lines
unset RKV_LOG_LEVEL
O=${1:-build}
BIN="$O/bin"
n=0; fails=0
ok() { n=$((n+1)); if [ "$1" = 0 ]; then echo "ok $n - $2"; else echo "not ok $n - $2"; fails=$((fails+1)); fi; }

tmp=$(mktemp -d)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null; done
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null; done
  rm -rf "$tmp"
}
trap cleanup EXIT

# start NAME [LISTEN]: prints the address; the PID goes to $tmp/NAME.pid
start() {
  local out="$tmp/$1.out" a=""
  "$BIN/rkv-server" --name "$1" --listen "${2:-tcp://127.0.0.1:0}" \
    --memory 16M --capacity 2000 --log-level error >"$out" 2>/dev/null &
  echo $! >"$tmp/$1.pid"
  for _ in $(seq 1 100); do
    a=$(sed -n 's/^rkv-server: listening on //p' "$out"); [ -n "$a" ] && break; sleep 0.1
  done
  echo "$a"
}

declare -A addr
for s in alpha bravo charlie; do
  addr[$s]=$(start $s)
  pids+=("$(cat "$tmp/$s.pid")")
  [ -n "${addr[$s]}" ] || { echo "not ok 1 - start $s"; exit 1; }
done
printf '# three servers\nalpha %s\nbravo %s\ncharlie %s\n' \
  "${addr[alpha]}" "${addr[bravo]}" "${addr[charlie]}" >"$tmp/c1"
printf 'charlie %s\n\n  alpha   %s  # first\nbravo %s\n' \
  "${addr[charlie]}" "${addr[alpha]}" "${addr[bravo]}" >"$tmp/c2"
R1() { timeout 20 "$BIN/rkv" --cluster "$tmp/c1" "$@"; }
R2() { timeout 20 "$BIN/rkv" --cluster "$tmp/c2" "$@"; }

bad=0
for i in $(seq 1 150); do R1 put "k$i" "v$i" || bad=$((bad+1)); done
ok $bad "150 one-shot puts through one cluster file"
bad=0
for i in $(seq 1 150); do [ "$(R2 get "k$i")" = "v$i" ] || bad=$((bad+1)); done
ok $bad "every key read back through the file in another order"
list="bravo=${addr[bravo]},charlie=${addr[charlie]},alpha=${addr[alpha]}"
[ "$(timeout 20 "$BIN/rkv" --servers "$list" get k7)" = v7 ]
ok $? "--servers NAME=ADDR,... places keys alike"
# cluster: the map, the same in either file order
R1 cluster >"$tmp/m1"; rc1=$?; R2 cluster >"$tmp/m2"; rc2=$?
[ "$rc1" = 0 ] && [ "$rc2" = 0 ] && [ "$(sort "$tmp/m1")" = "$(sort "$tmp/m2")" ] &&
  head -1 "$tmp/m1" | grep -q "^static cluster map (no etcd), 4096 partitions$" &&
  [ "$(grep -cE '^  (alpha|bravo|charlie) +tcp://[^ ]+ +up +[0-9]+ partitions \( ?[0-9.]+%\)  [0-9]+ keys$' "$tmp/m1")" = 3 ]
ok $? "cluster: the map, one line a server, the same in either order"
tot=$(R1 --json cluster | python3 -c 'import json,sys; d=json.load(sys.stdin); print(sum(s["partitions"] for s in d["servers"]), sum(s["keys"] for s in d["servers"]), d["epoch"])')
[ "$tot" = "4096 150 0" ]; ok $? "cluster --json: the partitions add up to 4096 and the keys to 150 ($tot)"

# kill bravo: which keys were its?
kill -KILL "$(cat "$tmp/bravo.pid")"; wait "$(cat "$tmp/bravo.pid")" 2>/dev/null
live=0; dead=0; badline=0; badlive=0
for i in $(seq 1 150); do
  v=$(R1 get "k$i" 2>"$tmp/err"); rc=$?
  if [ "$rc" = 0 ] && [ "$v" = "v$i" ]; then
    live=$((live+1))
  elif [ "$rc" = 2 ]; then
    dead=$((dead+1))
    { [ "$(wc -l <"$tmp/err")" = 1 ] && grep -q "bravo" "$tmp/err"; } || { badline=$((badline+1)); cat "$tmp/err" | sed 's/^/# /'; }
  else
    badlive=$((badlive+1))
  fi
done
echo "# bravo killed: $live keys served, $dead failed"
[ "$badlive" = 0 ] && [ "$live" -gt 50 ] && [ "$dead" -gt 10 ]; ok $? "other servers' keys served, bravo's fail (exit 2)"
ok $badline "each failure is one line naming bravo"
R1 stat >"$tmp/stat" 2>"$tmp/err"; rc=$?
[ "$rc" = 2 ] && [ "$(grep -c "keys " "$tmp/stat")" = 2 ] && grep -q bravo "$tmp/err"
ok $? "stat: the live servers' counters, one line for bravo, exit 2"
R1 cluster >"$tmp/m1" 2>"$tmp/err"; rc=$?
[ "$rc" = 2 ] && grep -qE '^  bravo +tcp://[^ ]+ +down ' "$tmp/m1" && [ "$(grep -c ' up ' "$tmp/m1")" = 2 ] &&
  [ "$(grep -c '' "$tmp/err")" = 1 ] && grep -q "^rkv: cluster: 1 of 3 servers down$" "$tmp/err"
ok $? "cluster: bravo down in the table, one line saying so, exit 2"

# back, empty, at the same address
b=$(start bravo "${addr[bravo]}"); pids+=("$(cat "$tmp/bravo.pid")")
[ "$b" = "${addr[bravo]}" ]; ok $? "bravo restarted at its address"
lost=0; bad=0
for i in $(seq 1 150); do
  R1 get "k$i" >/dev/null 2>&1; rc=$?
  [ "$rc" = 1 ] && lost=$((lost+1))
  [ "$rc" = 2 ] && bad=$((bad+1))
done
echo "# bravo back: $lost keys lost with it (no replication)"
[ "$bad" = 0 ] && [ "$lost" = "$dead" ]; ok $? "bravo serves again; exactly its keys are gone"

# a wrong name
printf 'alpha %s\nzulu %s\n' "${addr[alpha]}" "${addr[bravo]}" >"$tmp/c3"
timeout 20 "$BIN/rkv" --cluster "$tmp/c3" get k1 2>"$tmp/err"; rc=$?
[ "$rc" = 2 ] && [ "$(wc -l <"$tmp/err")" = 1 ] && grep -q "calls itself 'bravo', not 'zulu'" "$tmp/err"
ok $? "a server under another name: one line saying both names"
printf 'alpha %s\nalpha %s\n' "${addr[alpha]}" "${addr[bravo]}" >"$tmp/c4"
timeout 20 "$BIN/rkv" --cluster "$tmp/c4" get k1 2>"$tmp/err"; rc=$?
[ "$rc" = 2 ] && grep -q "line 2: server name 'alpha' listed twice" "$tmp/err"
ok $? "a name listed twice: the line and the reason"
printf 'replicas 2\nalpha %s\nbravo %s\n' "${addr[alpha]}" "${addr[bravo]}" >"$tmp/c5"
timeout 20 "$BIN/rkv" --cluster "$tmp/c5" put r1 v1 2>"$tmp/err"; rc=$?
va=$(timeout 20 "$BIN/rkv" --servers "${addr[alpha]}" get r1 2>&1)
vb=$(timeout 20 "$BIN/rkv" --servers "${addr[bravo]}" get r1 2>&1)
[ "$rc" = 0 ] && [ "$va" = v1 ] && [ "$vb" = v1 ]
ok $? "replicas 2: a put is on both servers, each read alone"
timeout 20 "$BIN/rkv" --cluster "$tmp/c5" del r1 2>"$tmp/err" &&
  ! timeout 20 "$BIN/rkv" --servers "${addr[alpha]}" get r1 >/dev/null 2>&1 &&
  ! timeout 20 "$BIN/rkv" --servers "${addr[bravo]}" get r1 >/dev/null 2>&1
ok $? "replicas 2: a delete is absent on both"
kill -KILL "$(cat "$tmp/bravo.pid")"; wait "$(cat "$tmp/bravo.pid")" 2>/dev/null
badline=0
for i in 1 2 3 4 5 6; do
  timeout 20 "$BIN/rkv" --cluster "$tmp/c5" put "q$i" v 2>"$tmp/err"; rc=$?
  { [ "$rc" = 2 ] && [ "$(wc -l <"$tmp/err")" = 1 ] && grep -q "(server bravo (" "$tmp/err"; } ||
    { badline=$((badline+1)); sed 's/^/# /' "$tmp/err"; }
done
ok $badline "replicas 2, bravo down: every put fails with one line naming bravo"
printf 'replicas 3\nalpha %s\nbravo %s\n' "${addr[alpha]}" "${addr[bravo]}" >"$tmp/c6"
timeout 20 "$BIN/rkv" --cluster "$tmp/c6" get k1 2>"$tmp/err"; rc=$?
[ "$rc" = 2 ] && grep -q "replicas 3, but only 2 servers are listed" "$tmp/err"
ok $? "more replicas than servers: the reason"

# rkv admin's bad input: one line, exit 2 (etcd itself: itest_etcd)
A() { env -u RKV_CLUSTER timeout 20 "$BIN/rkv" admin "$@" 2>"$tmp/err" >/dev/null; }
A status; rc=$?
[ "$rc" = 2 ] && [ "$(wc -l <"$tmp/err")" = 1 ] && grep -q "no cluster: --cluster" "$tmp/err"; ok $? "admin without a cluster: one line"
A --cluster etcd://127.0.0.1 status; rc=$?
[ "$rc" = 2 ] && grep -q "want etcd://HOST:PORT/CLUSTER" "$tmp/err"; ok $? "admin with a bad URL: one line"
A --cluster etcd://127.0.0.1:1/x status; rc=$?
[ "$rc" = 2 ] && [ "$(wc -l <"$tmp/err")" = 1 ] && grep -q "Connection refused" "$tmp/err"; ok $? "admin with no etcd there: one line"
A --cluster etcd://127.0.0.1:1/x frob; rc=$?
[ "$rc" = 2 ] && grep -q "unknown command" "$tmp/err"; ok $? "admin: unknown command"
A --cluster etcd://127.0.0.1:1/x drain alpha; rc=$?
[ "$rc" = 2 ] && [ "$(wc -l <"$tmp/err")" = 1 ] && grep -q "Connection refused" "$tmp/err"; ok $? "admin drain with no etcd there: one line"
timeout 20 "$BIN/rkv" --cluster etcd://127.0.0.1:1/x get k 2>"$tmp/err"; rc=$?
[ "$rc" = 2 ] && [ "$(wc -l <"$tmp/err")" = 1 ] && grep -q "is etcd running there" "$tmp/err"; ok $? "a client of an etcd that is not there: one line"
echo "1..$n"
[ "$fails" = 0 ]
