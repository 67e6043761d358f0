#!/usr/bin/env bash
# cli.sh - the rkv command-line client against a real rkv-server (tcp):
# get/put/del/stat, stdin values, exit codes 0/1/2 and one clear error line
# (tools_errors.sh has every error case, on tcp and shm); --version of
# every tool.
# TAP output.  Usage: cli.sh BUILD_DIR
set -u
O=${1:-build}
BIN="$O/bin"
n=0; fails=0
ok() { n=$((n+1)); if [ "$1" = 0 ]; then echo "ok $n - $2"; else echo "not ok $n - $2"; fails=$((fails+1)); fi; }

out=$(mktemp); err=$(mktemp)
"$BIN/rkv-server" --listen tcp://127.0.0.1:0 --memory 16M --capacity 1000 --log-level error >"$out" 2>/dev/null &
srv=$!
trap 'kill -TERM $srv 2>/dev/null; wait $srv 2>/dev/null; rm -f "$out" "$err"' EXIT
addr=""
for _ in $(seq 1 100); do
  addr=$(sed -n 's/^rkv-server: listening on //p' "$out"); [ -n "$addr" ] && break; sleep 0.1
done
[ -n "$addr" ] || { echo "not ok 1 - server start"; exit 1; }
R() { timeout 20 "$BIN/rkv" --servers "$addr" "$@"; }

R put greeting "hello world"; ok $? "put exits 0"
v=$(R get greeting); rc=$?
[ "$rc" = 0 ] && [ "$v" = "hello world" ]; ok $? "get prints the value"
printf 'from\nstdin\0bin' | R put blob -; ok $? "put - reads stdin"
R get blob | cmp -s - <(printf 'from\nstdin\0bin'); ok $? "binary value round-trips"
R get missing 2>"$err"; rc=$?
[ "$rc" = 1 ] && grep -q "missing: not found" "$err" && [ "$(wc -l <"$err")" = 1 ]; ok $? "absent key: exit 1, one line"
R del greeting; ok $? "del exits 0"
R del greeting 2>/dev/null; [ $? = 1 ]; ok $? "del of an absent key: exit 1"
R stat >"$err"; rc=$?
[ "$rc" = 0 ] && grep -q "keys            1" "$err"; ok $? "stat shows counters"
R frobnicate 2>"$err"; rc=$?
[ "$rc" = 2 ] && grep -q "unknown command" "$err"; ok $? "unknown command: exit 2"
R get 2>"$err"; [ $? = 2 ]; ok $? "missing argument: exit 2"
R put "" v 2>"$err"; rc=$?
[ "$rc" = 2 ] && grep -q "the key is empty" "$err"; ok $? "empty key: exit 2"
long=$(head -c 1100 /dev/zero | tr '\0' k)
R put "$long" v 2>"$err"; rc=$?
[ "$rc" = 2 ] && grep -q "longer than 1024" "$err"; ok $? "key over the limit: exit 2"
timeout 20 "$BIN/rkv" --servers tcp://127.0.0.1:1 get x 2>"$err"; rc=$?
[ "$rc" = 2 ] && grep -q "cannot connect" "$err"; ok $? "unreachable server: exit 2"
timeout 20 "$BIN/rkv" --servers "tcp://bad" get x 2>"$err"; [ $? = 2 ]; ok $? "bad address: exit 2"
R 2>"$err"; rc=$?
[ "$rc" = 2 ] && head -1 "$err" | grep -q "^rkv: no command" && grep -q "^usage: rkv" "$err"
ok $? "no command: exit 2, says so, then the usage"
# every tool: one version line, exit 0
for b in rkv rkv-server rkv-ycsb rkv-bench-kv rkv-bench-ps rkv-bench-transport; do
  [ -x "$BIN/$b" ] || continue
  v=$(timeout 20 "$BIN/$b" --version 2>"$err"); rc=$?
  [ "$rc" = 0 ] && [ ! -s "$err" ] && [ "$(grep -c '' <<<"$v")" = 1 ] &&
    grep -qE "^$b [0-9]+\.[0-9]+\.[0-9]+[^ ]* \(protocol [0-9]+, providers tcp shm verbs" <<<"$v"
  ok $? "$b --version: one line, exit 0 ($v)"
done
echo "1..$n"
[ "$fails" = 0 ]
