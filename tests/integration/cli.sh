#!/usr/bin/env bash
# cli.sh - the rkv command-line client against a real rkv-server (tcp):
# get/put/del/stat, stdin values, exit codes 0/1/2 and one clear error line
# (tools_errors.sh has every error case, on tcp and shm); on tcp and shm:
# exists/mget/mput/incr/decr, keys and values from stdin and @FILE, the
# output modes (--raw, --no-raw, --json), short error lines, scan (and
# with a server down); --version of every tool.
# TAP output.  Usage: cli.sh BUILD_DIR
set -u
# the tools' own lines only: RKV_LOG_LEVEL (CI sets it) adds librkv's
unset RKV_LOG_LEVEL
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
# ------------------------------------------------------------------------
# exists, mget, mput, incr/decr; keys and values from stdin and @FILE;
# --raw, --no-raw, --json; short error lines.  On tcp (the server above)
# and on shm.
tmp=$(mktemp -d)
export RKV_SHM_DIR=$tmp/shm
trap 'kill -TERM $srv ${shm_srv:-} 2>/dev/null; wait $srv ${shm_srv:-} 2>/dev/null; rm -rf "$out" "$err" "$tmp"' EXIT
"$BIN/rkv-server" --listen "shm:///rkv-cli-$$" --memory 16M --capacity 1000 --log-level error >"$tmp/shm.out" 2>/dev/null &
shm_srv=$!
shm_addr=""
for _ in $(seq 1 100); do
  shm_addr=$(sed -n 's/^rkv-server: listening on //p' "$tmp/shm.out"); [ -n "$shm_addr" ] && break; sleep 0.1
done
[ -n "$shm_addr" ] || { echo "not ok $((n+1)) - shm server start"; exit 1; }
# one line on stderr, exit $1, matching $2 (grep -E)
err1() { [ "$rc" = "$1" ] && [ "$(grep -c '' "$err")" = 1 ] && grep -qE -- "$2" "$err"; }
printf 'x\377y\\z' >"$tmp/bin"
truncate -s 67108865 "$tmp/big" # one byte over RKV_VALUE_MAX (sparse)
printf '@at' >"$tmp/atkey"
KEY100K=$(head -c 102400 /dev/zero | tr '\0' k)
for P in tcp shm; do
  if [ "$P" = tcp ]; then A=$addr; else A=$shm_addr; fi
  R() { timeout 20 "$BIN/rkv" --servers "$A" "$@"; }

  R mput e1 one e2 two e3 "" 2>"$err"; rc=$?
  [ "$rc" = 0 ] && [ ! -s "$err" ]; ok $? "$P: mput of three pairs: exit 0"
  v=$(R exists e1 e2 nope e1 e3 2>"$err"); rc=$?
  [ "$rc" = 0 ] && [ "$v" = 4 ]; ok $? "$P: exists counts the keys present (a repeated one twice): 4 ($v)"
  v=$(R exists nope1 nope2 2>"$err"); rc=$?
  [ "$rc" = 0 ] && [ "$v" = 0 ]; ok $? "$P: exists of absent keys: 0, exit 0 ($v)"
  R mget e1 e2 e3 >"$tmp/o" 2>"$err"; rc=$?
  [ "$rc" = 0 ] && cmp -s "$tmp/o" <(printf 'one\ntwo\n\n') && [ ! -s "$err" ]; ok $? "$P: mget: one line per value (an empty one too), exit 0"
  v=$(R mget e1 nope e2 2>"$err"); rc=$?
  [ "$rc" = 1 ] && [ "$v" = $'one\n(nil)\ntwo' ] && [ ! -s "$err" ]; ok $? "$P: mget with an absent key: (nil), exit 1"
  R --raw mget e1 nope e2 >"$tmp/o" 2>"$err"; rc=$?
  [ "$rc" = 1 ] && cmp -s "$tmp/o" <(printf 'one\n\ntwo\n'); ok $? "$P: mget --raw: an absent value is an empty line"
  R put big "$(head -c 5000 /dev/zero | tr '\0' b)"
  v=$(R mget e1 big 2>"$err"); rc=$?
  [ "$rc" = 0 ] && [ "${#v}" = 5004 ]; ok $? "$P: mget of a value larger than its first read (${#v} bytes)"
  R mput a 1 b 2>"$err"; rc=$?
  err1 2 "^rkv: mput takes KEY VALUE \[KEY VALUE\.\.\.\], not 3 arguments$"; ok $? "$P: mput with a key and no value: exit 2"
  R mget 2>"$err"; rc=$?
  err1 2 "^rkv: mget takes KEY\.\.\., not 0 arguments$"; ok $? "$P: mget of no key: exit 2"

  v=$(R incr ctr 2>"$err"); rc=$?
  [ "$rc" = 0 ] && [ "$v" = 1 ]; ok $? "$P: incr of an absent key: 1 ($v)"
  v=$(R incr ctr 41 2>"$err"); rc=$?
  [ "$rc" = 0 ] && [ "$v" = 42 ]; ok $? "$P: incr BY: 42 ($v)"
  v=$(R decr ctr 50 2>"$err"); rc=$?
  [ "$rc" = 0 ] && [ "$v" = -8 ]; ok $? "$P: decr BY below zero: -8 ($v)"
  v=$(R decr ctr -- -10 2>"$err"); rc=$?
  [ "$rc" = 0 ] && [ "$v" = 2 ]; ok $? "$P: decr by a negative BY after --: 2 ($v)"
  R --raw get ctr | cmp -s - <(printf '\002\0\0\0\0\0\0\0'); ok $? "$P: the counter is 8 bytes, little-endian"
  R incr ctr -5 2>"$err"; rc=$?
  err1 2 "^rkv: '-5' is taken for an option: put \"--\" before a negative number$"; ok $? "$P: negative BY without --: exit 2, says what to do"
  R put short abc
  R incr short 2>"$err"; rc=$?
  err1 2 "^rkv: incr short: the value is 3 bytes, not a counter \(8 bytes"; ok $? "$P: incr of a 3-byte value: exit 2, says so"
  R --raw get short | cmp -s - <(printf abc); ok $? "$P: a failed incr leaves the value as it was"
  R put top "$(printf '\376\377\377\377\377\377\377\177')"
  v=$(R incr top 2>"$err"); rc=$?
  [ "$rc" = 0 ] && [ "$v" = 9223372036854775807 ]; ok $? "$P: incr up to INT64_MAX ($v)"
  R incr top 2>"$err"; rc=$?
  err1 2 "^rkv: incr top: 9223372036854775807 \+ 1 overflows the 64-bit signed counter$"; ok $? "$P: incr past INT64_MAX: exit 2, overflow"
  R incr ctr 1x 2>"$err"; rc=$?
  err1 2 "^rkv: incr: BY '1x' is not a whole number"; ok $? "$P: incr BY not a number: exit 2"
  R incr ctr 99999999999999999999 2>"$err"; rc=$?
  err1 2 "^rkv: incr: BY '9+' is not a whole number"; ok $? "$P: incr BY past int64: exit 2"
  R put empty ""
  R incr empty 2>"$err"; rc=$?
  err1 2 "^rkv: incr empty: the value is 0 bytes, not a counter"; ok $? "$P: incr of an empty value: exit 2, says so"
  R del race 2>/dev/null
  for j in 1 2 3 4; do (for _ in $(seq 1 15); do R incr race >/dev/null || echo fail; done) & done >"$tmp/race"
  wait $(jobs -p | grep -vx "$srv" | grep -vx "$shm_srv") 2>/dev/null
  v=$(R incr race 0 2>"$err")
  [ "$v" = 60 ] && [ ! -s "$tmp/race" ]; ok $? "$P: 4 clients x 15 incr at once: 60, none lost ($v)"
  R --read-only incr ctr 2>"$err"; rc=$?
  err1 2 "^rkv: incr ctr: Permission denied \(a --read-only client cannot write\)$"; ok $? "$P: incr from a --read-only client: exit 2"

  printf 'e1' | R get - >"$tmp/o" 2>"$err"; rc=$?
  [ "$rc" = 0 ] && cmp -s "$tmp/o" <(printf one); ok $? "$P: get - reads the key from stdin"
  printf 'e2' >"$tmp/key"
  v=$(R get "@$tmp/key" 2>"$err"); rc=$?
  [ "$rc" = 0 ] && [ "$v" = two ]; ok $? "$P: get @FILE reads the key from the file"
  R put fromfile "@$tmp/bin" && R --raw get fromfile | cmp -s - "$tmp/bin"; ok $? "$P: put KEY @FILE stores the file's bytes"
  R put @@at lit && [ "$(R get "@$tmp/atkey")" = lit ] && [ "$(R get @@at)" = lit ]; ok $? "$P: @@at is the literal key @at"
  R put at2 @@v && [ "$(R get at2)" = @v ]; ok $? "$P: @@v is the literal value @v"
  R get "@$tmp/no-such-file" 2>"$err"; rc=$?
  err1 2 "^rkv: get: cannot open key file '$tmp/no-such-file': No such file or directory$"; ok $? "$P: @missing-file key: exit 2, names the file"
  R put k "@$tmp/no-such-file" 2>"$err"; rc=$?
  err1 2 "^rkv: put: cannot open value file '$tmp/no-such-file'"; ok $? "$P: @missing-file value: exit 2, names the file"
  R get @ 2>"$err"; rc=$?
  err1 2 "^rkv: get: '@' names no key file"; ok $? "$P: a bare @: exit 2, says it names no file"
  : >"$tmp/emptykey"
  R get "@$tmp/emptykey" 2>"$err"; rc=$?
  err1 2 "^rkv: get: the key in '$tmp/emptykey' is empty$"; ok $? "$P: an empty key file: exit 2, names it"
  R put k "@$tmp/big" 2>"$err"; rc=$?
  err1 2 "^rkv: put k: the value of 67108865 bytes in '$tmp/big' is over the limit of 67108864 bytes \(RKV_VALUE_MAX\)$"
  ok $? "$P: a 64 MiB + 1 value file: exit 2, names the size and the limit"
  R put - - </dev/null 2>"$err"; rc=$?
  err1 2 "^rkv: put: more than one argument is \"-\""; ok $? "$P: key and value both from stdin: exit 2"
  R get "$KEY100K" 2>"$err"; rc=$?
  err1 2 "^rkv: get k{1,48}\.\.\.: the key is 102400 bytes, longer than 1024 \(RKV_KEY_MAX\)$" && [ "$(wc -c <"$err")" -lt 200 ]
  ok $? "$P: a 100 KB key argument: exit 2, one line of $(wc -c <"$err") bytes"
  R put "$KEY100K" @@x 2>"$err"; rc=$?
  err1 2 "the key is 102400 bytes" && [ "$(wc -c <"$err")" -lt 200 ]; ok $? "$P: put of a 100 KB key: one short line"
  R get "$(printf 'b\001\\')$(head -c 80 /dev/zero | tr '\0' q)" 2>"$err"; rc=$?
  err1 1 "^rkv: get b\\\\x01\\\\\\\\q{1,42}\.\.\. \(83 bytes\): not found$" && [ "$(wc -c <"$err")" -lt 100 ]
  ok $? "$P: an absent long key: escaped, cut, its length given"
  R mget e1 "$KEY100K" 2>"$err"; rc=$?
  err1 2 "^rkv: mget k{1,48}\.\.\.: the key is 102400 bytes" && [ "$(wc -c <"$err")" -lt 200 ]; ok $? "$P: mget with a 100 KB key: one short line"

  R put bin "@$tmp/bin"
  R --raw get bin | cmp -s - "$tmp/bin"; ok $? "$P: get --raw: the exact bytes, no newline"
  R --no-raw get bin >"$tmp/o"; cmp -s "$tmp/o" <(printf 'x\\xffy\\\\z\n'); ok $? "$P: get --no-raw: \\xNN and \\\\ escapes, a newline"
  v=$(R mget e1 bin); [ "$v" = 'one
x\xffy\\z' ]; ok $? "$P: mget prints values escaped by default"
  if [ -x /usr/bin/script ]; then
    script -qc "$BIN/rkv --servers $A get bin" /dev/null </dev/null >"$tmp/o" 2>&1
    cmp -s "$tmp/o" <(printf 'x\\xffy\\\\z\r\n'); ok $? "$P: get to a terminal: escaped, then a newline"
  fi
  R --raw --json get bin 2>"$err"; rc=$?
  err1 2 "^rkv: --json: give one of --raw, --no-raw and --json$"; ok $? "$P: two output modes: exit 2"
  R put q 'say "hi" \ ok'
  v=$(R --json get q); [ "$v" = '{"key":"q","value":"say \"hi\" \\ ok"}' ]; ok $? "$P: --json get escapes quotes and backslashes ($v)"
  v=$(R --json get bin); [ "$v" = "{\"key\":\"bin\",\"value_base64\":\"$(base64 <"$tmp/bin")\"}" ]; ok $? "$P: --json: a 0xff byte makes value_base64 ($v)"
  R put "$(printf 'k\377')" v
  v=$(R --json get "$(printf 'k\377')"); [ "$v" = '{"key_base64":"a/8=","value":"v"}' ]; ok $? "$P: --json: a key that is not UTF-8 comes as key_base64 ($v)"
  R put nl "$(printf 'a\tb\001')"
  v=$(R --json get nl); [ "$v" = '{"key":"nl","value":"a\tb\u0001"}' ]; ok $? "$P: --json escapes control bytes ($v)"
  v=$(R --json get nope 2>"$err"); rc=$?
  [ "$rc" = 1 ] && [ "$v" = '{"key":"nope","value":null}' ] && [ ! -s "$err" ]; ok $? "$P: --json get of an absent key: null, exit 1"
  v=$(R --json mget e1 nope 2>"$err"); rc=$?
  [ "$rc" = 1 ] && [ "$v" = '{"values":[{"key":"e1","value":"one"},{"key":"nope","value":null}]}' ]; ok $? "$P: --json mget ($v)"
  v=$(R --json exists e1 nope); [ "$v" = '{"exists":1}' ]; ok $? "$P: --json exists ($v)"
  v=$(R --json incr jc 7); [ "$v" = '{"key":"jc","value":7}' ]; ok $? "$P: --json incr ($v)"
  v=$(R --json put jp v); [ "$v" = '{"key":"jp","ok":true}' ]; ok $? "$P: --json put ($v)"
  v=$(R --json mput jp v jq w); [ "$v" = '{"stored":2}' ]; ok $? "$P: --json mput ($v)"
  v=$(R --json del jp); [ "$v" = '{"key":"jp","deleted":true}' ]; ok $? "$P: --json del ($v)"
  v=$(R --json del jp); rc=$?
  [ "$rc" = 1 ] && [ "$v" = '{"key":"jp","deleted":false}' ]; ok $? "$P: --json del of an absent key: false, exit 1"
  v=$(R --json stat)
  grep -qE '^\{"servers":\[\{"server":"[^"]+","uptime_ms":[0-9]+,.*"keys":[0-9]+,.*\}\]\}$' <<<"$v"; ok $? "$P: --json stat"
  # scan: a glob, --count, the modes, line mode, bad arguments
  R mput sc:1 a sc:2 b sc:x c "$(printf 'sc:\377')" d 2>"$err"
  v=$(R scan 'sc:*' | LC_ALL=C sort | tr '\n' ' '); [ "$v" = 'sc:1 sc:2 sc:\xff sc:x ' ]; ok $? "$P: scan PATTERN lists the matching keys, printable ($v)"
  v=$(R scan 'sc:[0-9]' | LC_ALL=C sort | tr '\n' ' '); [ "$v" = 'sc:1 sc:2 ' ]; ok $? "$P: scan with a [set] ($v)"
  v=$(R scan 'sc:?' --count 2 | wc -l); [ "$v" = 2 ]; ok $? "$P: scan --count 2 stops at 2 ($v)"
  v=$(R --raw scan "$(printf 'sc:\377')" | od -An -c | tr -s ' '); [ "$v" = ' s c : 377 \n' ]; ok $? "$P: scan --raw: the exact bytes ($v)"
  v=$(R --json scan 'sc:x'); [ "$v" = '{"keys":[{"key":"sc:x"}],"count":1}' ]; ok $? "$P: --json scan ($v)"
  v=$(R scan 'nothing*' 2>"$err"); rc=$?
  [ "$rc" = 0 ] && [ -z "$v" ] && [ ! -s "$err" ]; ok $? "$P: scan that matches nothing: no output, exit 0"
  v=$(printf 'scan sc:x\nscan nothing*\nscan sc:? --count 1\n' | R --pipe | sed '3s/^"sc:[^ ]*"$/K/' | tr '\n' ' ')
  [ "$v" = '"sc:x" (empty) K ' ]; ok $? "$P: --pipe scan: one line each ($v)"
  R scan a b 2>"$err"; rc=$?; err1 2 "^rkv: scan takes \[PATTERN\] \[--count N\], not two patterns$"
  ok $? "$P: scan with two patterns: one line, exit 2"
  R scan --count x 2>"$err"; rc=$?; err1 2 "^rkv: scan: --count 'x' is not a number of keys"
  ok $? "$P: scan --count x: one line, exit 2"
  R --count 2 get sc:1 2>"$err"; rc=$?; err1 2 "^rkv: --count goes with scan only$"
  ok $? "$P: --count without scan: one line, exit 2"
  if command -v python3 >/dev/null; then
    for c in "get q" "get bin" "mget e1 nope bin q" "stat" "incr jc"; do R --json $c; done 2>/dev/null |
      python3 -c 'import json,sys; sys.exit(len([json.loads(l) for l in sys.stdin]) != 5)' 2>"$err"
    ok $? "$P: --json output parses as JSON, one object a line"
  fi
done

# a secret the server makes read-only (--read-only-secret-file), tcp and shm
printf 'cli full secret 0123456789abcdef' >"$tmp/full"
printf 'cli read-only secret 0123456789' >"$tmp/ro"
chmod 600 "$tmp/full" "$tmp/ro"
for P in tcp shm; do
  if [ "$P" = tcp ]; then L=tcp://127.0.0.1:0; else L="shm:///rkv-cli-ro-$$"; fi
  "$BIN/rkv-server" --listen "$L" --memory 16M --secret-file "$tmp/full" \
    --read-only-secret-file "$tmp/ro" --log-level error >"$tmp/ro.out" 2>/dev/null &
  ro_srv=$!
  A=""
  for _ in $(seq 1 100); do
    A=$(sed -n 's/^rkv-server: listening on //p' "$tmp/ro.out"); [ -n "$A" ] && break; sleep 0.1
  done
  R() { timeout 20 "$BIN/rkv" --servers "$A" "$@"; }
  R --secret-file "$tmp/full" put k v; ok $? "$P: the full secret writes"
  v=$(R --secret-file "$tmp/ro" get k); [ "$v" = v ]; ok $? "$P: the read-only secret reads"
  R --secret-file "$tmp/ro" put k w 2>"$err"; rc=$?
  err1 2 "put k: Permission denied \(server .* grants this secret read-only access\)"
  ok $? "$P: the read-only secret cannot put: one line saying why ($(head -c 120 "$err"))"
  R --secret-file "$tmp/ro" incr n 2>"$err"; rc=$?; err1 2 "Permission denied"
  ok $? "$P: nor incr"
  v=$(R --secret-file "$tmp/full" get k); [ "$v" = v ]; ok $? "$P: the value is unchanged"
  R --secret-file "$tmp/ro" stat | grep -qE "^  denied +0 "; ok $? "$P: stat shows the denied counter"
  kill -TERM $ro_srv; wait $ro_srv 2>/dev/null
done

# scan with a server down: the other's keys, then one line naming it
"$BIN/rkv-server" --listen tcp://127.0.0.1:0 --memory 16M --name sa --log-level error >"$tmp/sa.out" 2>/dev/null &
sa=$!
"$BIN/rkv-server" --listen tcp://127.0.0.1:0 --memory 16M --name sb --log-level error >"$tmp/sb.out" 2>/dev/null &
sb=$!
A=""; B=""
for _ in $(seq 1 100); do
  A=$(sed -n 's/^rkv-server: listening on //p' "$tmp/sa.out"); B=$(sed -n 's/^rkv-server: listening on //p' "$tmp/sb.out")
  [ -n "$A" ] && [ -n "$B" ] && break; sleep 0.1
done
R() { timeout 20 "$BIN/rkv" --servers "sa=$A,sb=$B" --timeout 2000 "$@"; }
for i in $(seq 1 40); do printf 'put k%s v\n' "$i"; done | R --pipe >/dev/null
all=$(R scan | LC_ALL=C sort | tr '\n' ' ')
[ "$(wc -w <<<"$all")" = 40 ]; ok $? "two servers: scan lists the 40 keys of both"
kill -KILL $sb; wait $sb 2>/dev/null
v=$(R scan 2>"$err"); rc=$?
nv=$(grep -c '^k' <<<"$v")
[ "$rc" = 2 ] && [ "$nv" -gt 5 ] && [ "$nv" -lt 35 ] && [ "$(grep -c '' "$err")" = 1 ] && grep -q "^rkv: scan: .*server sb (" "$err"
ok $? "one of two servers down: scan lists the other's $nv keys, then one line naming it, exit 2 ($(head -c 160 "$err"))"
kill -TERM $sa; wait $sa 2>/dev/null

# peers that speak another protocol: "not an rkv server" at once, not a
# timeout (their answer arrives before our --timeout): one that answers
# at once (HTTP), one that waits for the end of a line first, as Redis
# and memcached do (the handshake's first bytes are a line, so they
# answer); then the real ones when installed (on ports they are given,
# stopped by PID)
fake_peer() { # MODE PORTFILE: http or line
  python3 - "$1" "$2" <<'PY' &
import socket, sys, time
s = socket.socket()
s.bind(("127.0.0.1", 0))
s.listen(4)
open(sys.argv[2], "w").write(str(s.getsockname()[1]))
s.settimeout(30)
try:
    while True:
        c, _ = s.accept()
        if sys.argv[1] == "http":
            c.sendall(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n")
            time.sleep(0.2)
            c.close()
            continue
        buf = b""
        while b"\n" not in buf.split(b"\0")[0]:
            d = c.recv(100)
            if not d:
                break
            buf += d
        c.sendall(b"ERROR\r\n")   # and keep the connection open
except socket.timeout:
    pass
PY
  fake_pid=$!
  for _ in $(seq 1 50); do [ -s "$2" ] && break; sleep 0.1; done
}
not_rkv() { # PORT: the rkv line says "not an rkv server", no timeout
  env -u RKV_LOG_LEVEL timeout 20 "$BIN/rkv" --servers "tcp://127.0.0.1:$1" --timeout 15000 get x 2>"$err"; rc=$?
  [ "$rc" = 2 ] && [ "$(grep -c '' "$err")" = 1 ] && grep -q "not an rkv server" "$err" && ! grep -q "timed out" "$err"
}
fake_peer http "$tmp/http.port"
not_rkv "$(cat "$tmp/http.port" 2>/dev/null)"
ok $? "an HTTP server: exit 2, one line, not an rkv server ($(head -c 150 "$err"))"
kill "$fake_pid" 2>/dev/null; wait "$fake_pid" 2>/dev/null
fake_peer line "$tmp/line.port"
not_rkv "$(cat "$tmp/line.port" 2>/dev/null)"
ok $? "a line-protocol peer that waits for a newline (no NUL before it): not an rkv server ($(head -c 150 "$err"))"
kill "$fake_pid" 2>/dev/null; wait "$fake_pid" 2>/dev/null
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
for peer in redis-server memcached; do
  command -v $peer >/dev/null || { n=$((n+1)); echo "ok $n - # SKIP $peer is not installed"; continue; }
  port=$(free_port)
  if [ $peer = redis-server ]; then
    redis-server --port "$port" --bind 127.0.0.1 --save '' --appendonly no >/dev/null 2>&1 &
  else
    memcached -u "$(id -un)" -l 127.0.0.1 -p "$port" -U 0 >/dev/null 2>&1 &
  fi
  ppid=$!
  for _ in $(seq 1 50); do (exec 3<>/dev/tcp/127.0.0.1/$port) 2>/dev/null && break; sleep 0.1; done
  not_rkv "$port"
  ok $? "a real $peer on the port: exit 2, one line, not an rkv server ($(head -c 150 "$err"))"
  kill "$ppid" 2>/dev/null; wait "$ppid" 2>/dev/null
done

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
