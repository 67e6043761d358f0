#!/usr/bin/env bash
# cli_interactive.sh - rkv's line modes against real rkv-servers (tcp and
# shm): `rkv --pipe` (one command a line on stdin, one answer line each,
# gets and puts batched; 100k lines checked answer by answer, the time
# reported), and the prompt of `rkv` with no command at a terminal,
# driven through a pseudo-terminal by python3's pty module (skipped
# without python3, or with a note when the build has no libedit).
# TAP output.  Usage: cli_interactive.sh BUILD_DIR
set -u
# the tools' own lines only: RKV_LOG_LEVEL (CI sets it) adds librkv's
unset RKV_LOG_LEVEL
O=${1:-build}
BIN="$O/bin"
PY=/usr/bin/python3
[ -x "$PY" ] || PY=$(command -v python3 || true)
n=0; fails=0
ok() { n=$((n+1)); if [ "$1" = 0 ]; then echo "ok $n - $2"; else echo "not ok $n - $2"; fails=$((fails+1)); fi; }
skip() { n=$((n+1)); echo "ok $n - $1 # SKIP $2"; }

tmp=$(mktemp -d)
export RKV_SHM_DIR=$tmp/shm
srvs=""
trap 'kill -TERM $srvs 2>/dev/null; wait $srvs 2>/dev/null; rm -rf "$tmp"' EXIT
# start_server ADDR OUTFILE: an rkv-server; its address in $started
start_server() {
  "$BIN/rkv-server" --listen "$1" --memory 160M --grace 5000 --capacity 200000 --log-level error >"$2" 2>/dev/null &
  srvs="$srvs $!"
  started=""
  for _ in $(seq 1 100); do
    started=$(sed -n 's/^rkv-server: listening on //p' "$2"); [ -n "$started" ] && return 0; sleep 0.1
  done
  return 1
}
start_server tcp://127.0.0.1:0 "$tmp/tcp.out" || { echo "not ok 1 - tcp server start"; echo "1..1"; exit 1; }
tcp_addr=$started
start_server "shm:///rkv-pipe-$$" "$tmp/shm.out" || { echo "not ok 1 - shm server start"; echo "1..1"; exit 1; }
shm_addr=$started

# the 100k lines: 50000 puts, then a get of each key
"${PY:-false}" - "$tmp/in100k" "$tmp/want100k" <<'EOF' 2>/dev/null || {
import sys
with open(sys.argv[1], "w") as i, open(sys.argv[2], "w") as w:
    for k in range(50000):
        i.write(f'put key{k:06d} "value {k} \\x01"\n')
        w.write("OK\n")
    for k in range(50000):
        i.write(f"get key{k:06d}\n")
        w.write(f'"value {k} \\x01"\n')
EOF
  for k in $(seq -w 0 49999); do
    echo "put key0$k \"value $((10#$k)) \\x01\""
  done >"$tmp/in100k"
  for k in $(seq -w 0 49999); do echo "get key0$k"; done >>"$tmp/in100k"
  { yes OK | head -50000; for k in $(seq 0 49999); do echo "\"value $k \\x01\""; done; } >"$tmp/want100k"
}

# the largest value (64 MiB), every byte escaped: a line of 256 MiB, the
# answer the get must give, and a line longer than a line holds (4 x (1024
# + RKV_VALUE_MAX) + 4095 bytes); written in 1 MiB pieces (one 256 MiB
# string costs seconds of page faults here)
if [ -n "${PY:-}" ]; then
  "$PY" - "$tmp/inmax" "$tmp/wantmax" "$tmp/inlong" <<'EOF'
import sys
esc, a = b"\\xff" * (1 << 20), b"a" * (1 << 20)
with open(sys.argv[1], "wb") as o:
    o.write(b"put max ")
    for _ in range(64): o.write(esc)
    o.write(b"\nput over ")
    for _ in range(64): o.write(a)
    o.write(b"a\nget max\n")
with open(sys.argv[2], "wb") as o:
    o.write(b'"')
    for _ in range(64): o.write(esc)
    o.write(b'"\n')
with open(sys.argv[3], "wb") as o:
    o.write(b"put long ")
    for _ in range(257): o.write(a)
    o.write(b"\nget a\nping\n")
EOF
fi

for P in tcp shm; do
  if [ "$P" = tcp ]; then A=$tcp_addr; else A=$shm_addr; fi
  R() { timeout 60 "$BIN/rkv" --servers "$A" "$@"; }
  PIPE() { R --pipe "$@" <"$tmp/in" >"$tmp/out" 2>"$tmp/err"; rc=$?; }

  cat >"$tmp/in" <<'EOF'
put a 1
get a
get nope
put "hello world" "x y"
get "hello world"
  GET   a  
# a comment and a blank line answer nothing

del a
del a
incr c
incr c 5
decr c x y
exists c a "hello world"
mget c "hello world" nope
mput m1 v1 m2 "v 2"
mget m1 m2
ping
EOF
  PIPE
  sed -n '1,10p' "$tmp/out" >"$tmp/head"
  printf '%s\n' OK '"1"' '(nil)' OK '"x y"' '"1"' 1 0 1 6 >"$tmp/want"
  cmp -s "$tmp/head" "$tmp/want"; ok $? "$P: --pipe answers get (quoted), (nil), put OK, del 1/0, incr, one line each"
  sed -n '11p' "$tmp/out" | grep -qx '(error) decr takes KEY \[BY\], not 3 arguments'
  ok $? "$P: --pipe: a bad line answers one (error) line ($(sed -n 11p "$tmp/out"))"
  [ "$rc" = 2 ] && [ ! -s "$tmp/err" ]; ok $? "$P: --pipe: exit 2 when a line failed, nothing on stderr (rc $rc)"
  sed -n '12,$p' "$tmp/out" >"$tmp/tail"
  # incr left 6 as 8 bytes: mget shows them escaped
  printf '%s\n' 2 '"\x06\x00\x00\x00\x00\x00\x00\x00" "x y" (nil)' OK '"v1" "v 2"' PONG >"$tmp/want"
  cmp -s "$tmp/tail" "$tmp/want"; ok $? "$P: --pipe goes on after an error: exists, mget on one line, mput OK, ping PONG"

  # escapes in and out, binary bytes, quotes, a value larger than the
  # batch's room per key (read again alone), an empty value
  big=$(head -c 5000 /dev/zero | tr '\0' b)
  printf '%s\n' 'put bin "\x00\xff\"q\\ \t\n"' 'get bin' "put big $big" 'get big' 'put e ""' 'get e' \
    'put esc\ aped \x41\x42' 'get "esc aped"' >"$tmp/in"
  PIPE
  printf '%s\n' OK '"\x00\xff\"q\\ \x09\x0a"' OK "\"$big\"" OK '""' OK '"AB"' >"$tmp/want"
  [ "$rc" = 0 ] && cmp -s "$tmp/out" "$tmp/want"; ok $? "$P: --pipe: escapes, binary bytes, a 5000-byte value, an empty value round-trip"
  R get bin | cmp -s - <(printf '\0\377"q\\ \t\n'); ok $? "$P: --pipe stored the exact bytes (one-shot get reads them)"

  # order within and across batches: the same key put twice in a row,
  # gets after puts, a del between
  printf '%s\n' 'put o 1' 'put o 2' 'put p 1' 'put o 3' 'get o' 'get p' 'del o' 'get o' 'put o 4' 'get o' >"$tmp/in"
  PIPE
  printf '%s\n' OK OK OK OK '"3"' '"1"' 1 '(nil)' OK '"4"' >"$tmp/want"
  [ "$rc" = 0 ] && cmp -s "$tmp/out" "$tmp/want"; ok $? "$P: --pipe keeps the order of puts of one key, gets and dels"

  # errors each take one line and the next line still runs
  printf '%s\n' 'frob x' 'get "open' 'get \x4' 'put k' "get $(head -c 1025 /dev/zero | tr '\0' k)" 'put ok 1' 'get ok' >"$tmp/in"
  PIPE
  [ "$rc" = 2 ] && [ "$(grep -c '' "$tmp/out")" = 7 ] && [ "$(grep -c '^(error) ' "$tmp/out")" = 5 ] &&
    sed -n 1p "$tmp/out" | grep -q "^(error) unknown command 'frob'" &&
    sed -n 2p "$tmp/out" | grep -q "quote is not closed" &&
    sed -n 3p "$tmp/out" | grep -q 'two hex digits' &&
    sed -n 4p "$tmp/out" | grep -q 'put takes KEY VALUE, not 1 argument' &&
    sed -n 5p "$tmp/out" | grep -q 'longer than 1024' &&
    [ "$(tail -2 "$tmp/out" | tr '\n' ' ')" = 'OK "1" ' ]
  ok $? "$P: --pipe: five bad lines, five (error) lines, then the good ones run; exit 2"
  [ "$(awk '{ print length }' "$tmp/out" | sort -n | tail -1)" -lt 200 ]
  ok $? "$P: --pipe: an error line shows no more than 48 bytes of a long key"

  printf '%s\n' 'put j "a\"b"' 'get j' 'get nope' 'mget j nope' 'frob' >"$tmp/in"
  PIPE --json
  printf '%s\n' '{"key":"j","ok":true}' '{"key":"j","value":"a\"b"}' '{"key":"nope","value":null}' \
    '{"values":[{"key":"j","value":"a\"b"},{"key":"nope","value":null}]}' >"$tmp/want"
  head -4 "$tmp/out" | cmp -s - "$tmp/want" && [ "$rc" = 2 ] &&
    sed -n 5p "$tmp/out" | grep -q '^{"error":"unknown command '
  ok $? "$P: --pipe --json: one object a line, errors as {\"error\":...}"
  if [ -n "$PY" ]; then
    "$PY" -c 'import json,sys; [json.loads(l) for l in open(sys.argv[1])]' "$tmp/out" 2>/dev/null
    ok $? "$P: --pipe --json: every line parses as JSON"
  else
    skip "$P: --pipe --json: every line parses as JSON" "no python3"
  fi

  printf 'stat\n' >"$tmp/in"; PIPE
  [ "$rc" = 0 ] && [ "$(grep -c '' "$tmp/out")" = 1 ] && grep -q "^server .* keys [0-9]" "$tmp/out"
  ok $? "$P: --pipe: stat is one line"
  printf 'help\nquit\nget a\n' >"$tmp/in"; PIPE
  [ "$rc" = 0 ] && [ "$(grep -c '' "$tmp/out")" = 1 ] && grep -q "^commands: get KEY" "$tmp/out"
  ok $? "$P: --pipe: help is one line, quit stops reading"
  printf 'put crlf 1\r\nget crlf\r\n' >"$tmp/in"; PIPE
  printf '%s\n' OK '"1"' >"$tmp/want"
  cmp -s "$tmp/out" "$tmp/want"; ok $? "$P: --pipe takes CRLF lines"
  printf 'put last 1\nget last' >"$tmp/in"; PIPE
  printf '%s\n' OK '"1"' >"$tmp/want"
  cmp -s "$tmp/out" "$tmp/want"; ok $? "$P: --pipe runs a last line without a newline"

  # the largest value, every byte escaped; a line over the limit
  if [ -n "$PY" ]; then
    ln -sf "$tmp/inmax" "$tmp/in"; PIPE; rm -f "$tmp/in"
    [ "$rc" = 2 ] && sed -n 1p "$tmp/out" | grep -qx OK &&
      sed -n 2p "$tmp/out" | grep -q '^(error) put over: the value of 67108865 bytes is over the limit' &&
      sed -n 3p "$tmp/out" | cmp -s - "$tmp/wantmax"
    ok $? "$P: --pipe: a value of RKV_VALUE_MAX bytes as \\xff escapes round-trips; one byte more is one error line"
    ln -sf "$tmp/inlong" "$tmp/in"; PIPE; rm -f "$tmp/in"
    [ "$rc" = 2 ] && sed -n 1p "$tmp/out" | grep -q '^(error) a line is longer than' &&
      [ "$(sed -n 3p "$tmp/out")" = PONG ] && [ "$(grep -c '' "$tmp/out")" = 3 ]
    ok $? "$P: --pipe: a line over the limit is one error line and the next lines run"
  else
    skip "$P: --pipe: the largest value" "no python3"
    skip "$P: --pipe: a line over the limit" "no python3"
  fi

  # a peer that waits for each answer before it writes the next line:
  # rkv answers what it has before blocking on stdin
  if [ -n "$PY" ]; then
    "$PY" - "$BIN/rkv" "$A" >"$tmp/peer" 2>&1 <<'EOF'
import subprocess, sys, select
p = subprocess.Popen([sys.argv[1], "--servers", sys.argv[2], "--pipe"],
                     stdin=subprocess.PIPE, stdout=subprocess.PIPE)
got = []
for line in [b"put w 1\n", b"get w\n", b"get w\n", b"incr wc\n"]:
    p.stdin.write(line); p.stdin.flush()
    r, _, _ = select.select([p.stdout], [], [], 10)
    if not r:
        print("no answer to", line); sys.exit(1)
    got.append(p.stdout.readline().strip())
p.stdin.close()
rc = p.wait(10)
print(got, rc)
sys.exit(0 if got == [b"OK", b'"1"', b'"1"', b"1"] and rc == 0 else 1)
EOF
    ok $? "$P: --pipe answers each line before it waits for the next ($(tr -d '\n' <"$tmp/peer"))"
  else
    skip "$P: --pipe answers each line before it waits for the next" "no python3"
  fi

  # batches: 10000 gets written at once against the same gets in lock
  # step (each line waits for its answer: one round trip each).  The pass
  # mark is what the client counts (--client-stats), not the clock: in
  # lock step a doorbell per get, written at once up to 64 gets a
  # doorbell.  On tcp a batch also shares its round trips (much faster, a
  # figure reported); shm has no round trip to share
  if [ -n "$PY" ]; then
    "$PY" - "$BIN/rkv" "$A" >"$tmp/peer" 2>&1 <<'EOF'
import re, subprocess, sys, time
cmd = [sys.argv[1], "--servers", sys.argv[2], "--pipe", "--client-stats"]
lines = [b"get key%06d\n" % k for k in range(10000)]
def bells(err):
    m = re.search(rb"get (\d+) .*doorbells (\d+)", err)
    return (int(m.group(1)), int(m.group(2))) if m else (0, 0)
p = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                     stderr=subprocess.PIPE)
t0 = time.time()
for l in lines:
    p.stdin.write(l); p.stdin.flush()
    p.stdout.readline()
lock = time.time() - t0
p.stdin.close()
lock_gets, lock_bells = bells(p.stderr.read())
p.wait(10)
t0 = time.time()
r = subprocess.run(cmd, input=b"".join(lines), stdout=subprocess.PIPE,
                   stderr=subprocess.PIPE)
piped = time.time() - t0
gets, b = bells(r.stderr)
print("lock step: %d gets, %d doorbells, %.3fs; written at once: %d gets, "
      "%d doorbells, %.3fs (%.1fx)" % (lock_gets, lock_bells, lock, gets, b,
                                       piped, piped and lock / piped))
ok = (r.stdout.count(b"\n") == 10000 and lock_gets == 10000 and
      lock_bells >= 10000 and gets == 10000 and 0 < b <= 10000 // 8)
sys.exit(0 if ok else 1)
EOF
    ok $? "$P: --pipe: 10000 gets in lock step ring a doorbell each; written at once, in batches (at most 1250 doorbells): $(tr -d '\n' <"$tmp/peer")"
  fi

  # 100k lines: 50000 puts, then 50000 gets, each answer checked
  t0=$(date +%s.%N)
  R --pipe <"$tmp/in100k" >"$tmp/out" 2>"$tmp/err"; rc=$?
  t1=$(date +%s.%N)
  secs=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.2f", b - a }')
  rate=$(awk -v s="$secs" 'BEGIN { printf "%d", (s > 0 ? 100000 / s : 0) }')
  [ "$rc" = 0 ] && [ ! -s "$tmp/err" ] && cmp -s "$tmp/out" "$tmp/want100k"
  ok $? "$P: --pipe: 100000 lines (50000 puts, 50000 gets), every answer right: ${secs}s, $rate lines/s"
  echo "# $P: --pipe: 100000 lines in ${secs}s: $rate lines/s"
  # one-shot invocations for comparison: 200 puts
  t0=$(date +%s.%N)
  for i in $(seq 1 200); do R put "one$i" "v$i" || break; done
  t1=$(date +%s.%N)
  osecs=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.3f", b - a }')
  orate=$(awk -v s="$osecs" 'BEGIN { printf "%d", (s > 0 ? 200 / s : 0) }')
  echo "# $P: 200 one-shot 'rkv put' in ${osecs}s: $orate commands/s (100000 would take $(awk -v s="$osecs" 'BEGIN { printf "%d", s * 500 }')s)"
  [ "$rate" -gt $((orate * 20)) ]
  ok $? "$P: --pipe is over 20 times the one-shot rate ($rate vs $orate lines/s)"
done

# ------------------------------------------------------- refused at once
A=$tcp_addr
timeout 20 "$BIN/rkv" --servers "$A" --pipe get a </dev/null >"$tmp/out" 2>"$tmp/err"; rc=$?
[ "$rc" = 2 ] && [ "$(grep -c '' "$tmp/err")" = 1 ] && grep -q "^rkv: --pipe reads its commands from stdin" "$tmp/err"
ok $? "--pipe with a command: exit 2, one line"
timeout 20 "$BIN/rkv" --servers "$A" --pipe --raw </dev/null >"$tmp/out" 2>"$tmp/err"; rc=$?
[ "$rc" = 2 ] && [ "$(grep -c '' "$tmp/err")" = 1 ] && grep -q "^rkv: --raw: --pipe answers one line per command" "$tmp/err"
ok $? "--pipe --raw: exit 2, one line"
# (RKV_LOG_LEVEL would add librkv's own lines, as asked: CI sets it)
echo 'get a' | env -u RKV_LOG_LEVEL timeout 20 "$BIN/rkv" --servers tcp://127.0.0.1:1 --pipe >"$tmp/out" 2>"$tmp/err"; rc=$?
[ "$rc" = 2 ] && [ "$(grep -c '' "$tmp/err")" = 1 ] && grep -q "^rkv: cannot connect to tcp://127.0.0.1:1" "$tmp/err" && [ ! -s "$tmp/out" ]
r=$?; ok $r "--pipe to no server: exit 2, the one connect line"
[ "$r" = 0 ] || { echo "#   exit $rc; stderr:"; sed 's/^/#     /' "$tmp/err" | head -5; echo "#   stdout:"; sed 's/^/#     /' "$tmp/out" | head -5; }
timeout 20 "$BIN/rkv" --servers "$A" </dev/null >"$tmp/out" 2>"$tmp/err"; rc=$?
[ "$rc" = 2 ] && head -1 "$tmp/err" | grep -qx "rkv: no command: give one of get, put, del, stat or admin" && grep -q "^usage: rkv" "$tmp/err"
ok $? "no command and no terminal: exit 2, the line, then the usage (as before)"

# ------------------------------------------------------------- the prompt
cat >"$tmp/ttydrive.py" <<'EOF'
# ttydrive.py OUT STDOUT_FILE|- LINE... -- ARGV...: run ARGV on a pseudo-
# terminal, send each LINE (\x04 alone: Ctrl-D) once the prompt shows,
# write what the terminal showed to OUT and print the exit status (124
# when it had not ended 10 s after the last line: killed).
import os, pty, select, signal, sys, time
out_path, stdout_file = sys.argv[1], sys.argv[2]
sep = sys.argv.index("--")
lines, argv = sys.argv[3:sep], sys.argv[sep + 1:]
pid, fd = pty.fork()
if pid == 0:
    if stdout_file != "-":
        f = os.open(stdout_file, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        os.dup2(f, 1)
    os.execv(argv[0], argv)
buf = b""
def read_until(pat, t):
    global buf
    start, end = len(buf), time.time() + t
    while time.time() < end:
        r, _, _ = select.select([fd], [], [], 0.1)
        if not r:
            continue
        try:
            d = os.read(fd, 65536)
        except OSError:
            return False
        if not d:
            return False
        buf += d
        if pat and pat in buf[start:]:
            return True
    return False
read_until(b"> ", 10)
for l in lines:
    # libedit puts the terminal in its mode after it prints the prompt,
    # and that may drop input typed before: let it settle first
    time.sleep(0.3)
    os.write(fd, l.encode() if l == "\x04" else l.encode() + b"\r")
    read_until(b"> ", 5)
code, end = None, time.time() + 10
while code is None and time.time() < end:
    read_until(None, 0.2)
    done, st = os.waitpid(pid, os.WNOHANG)
    if done:
        code = os.waitstatus_to_exitcode(st)
if code is None:
    os.kill(pid, signal.SIGKILL)
    os.waitpid(pid, 0)
    code = 124
read_until(None, 0.2)
open(out_path, "wb").write(buf)
print(code)
EOF
export HOME=$tmp/home
mkdir -p "$HOME"
A=$tcp_addr
# prompt LINE...: the prompt's session; the terminal's text in $tmp/tty
# (CRs dropped), the exit status in $prc
prompt() { prc=$(timeout 60 "$PY" "$tmp/ttydrive.py" "$tmp/tty.raw" - "$@" -- "$BIN/rkv" --servers "$A"); tr -d '\r' <"$tmp/tty.raw" >"$tmp/tty"; }
if [ -z "$PY" ] || ! "$PY" -c 'import pty' 2>/dev/null; then
  skip "the prompt" "no python3 with pty"
elif "$BIN/rkv" --help | grep -q "no prompt in this build"; then
  prc=$(timeout 60 "$PY" "$tmp/ttydrive.py" "$tmp/tty.raw" - -- "$BIN/rkv" --servers "$A")
  [ "$prc" = 2 ] && grep -q "built without libedit: no prompt" "$tmp/tty.raw"
  ok $? "no libedit in this build: at a terminal rkv says so, exit 2"
  skip "the prompt" "built without libedit"
else
  prompt 'put a 1' 'get a' 'quit'
  [ "$prc" = 0 ] && grep -q "^rkv $A> put a 1$" "$tmp/tty" && grep -qx "OK" "$tmp/tty" &&
    grep -qx '"1"' "$tmp/tty" && grep -q "^rkv $A> quit$" "$tmp/tty"
  ok $? "prompt: 'rkv $A> ', put a 1 -> OK, get a -> \"1\", quit: exit 0"
  R() { timeout 20 "$BIN/rkv" --servers "$A" "$@"; }
  [ "$(R get a)" = 1 ]; ok $? "prompt: the put is in the store"
  prompt 'get nope' 'frob' 'exists a' $'\x04'
  [ "$prc" = 2 ] && grep -qx '(nil)' "$tmp/tty" && grep -q "^(error) unknown command 'frob'" "$tmp/tty" &&
    grep -qx 1 "$tmp/tty"
  ok $? "prompt: (nil), an (error) line, the next command runs; Ctrl-D ends it (exit 2: a line failed)"
  prompt 'help' 'exit'
  [ "$prc" = 0 ] && grep -q "^  get KEY .*in quotes" "$tmp/tty" && grep -q "^  help, quit, exit" "$tmp/tty"
  ok $? "prompt: help lists the commands, exit ends it"
  grep -qx 'get a' "$HOME/.rkv_history" 2>/dev/null || grep -q 'get\\040a' "$HOME/.rkv_history" 2>/dev/null
  ok $? "prompt: history kept in \$HOME/.rkv_history"
  # up-arrow recalls "put h 5", backspace and 6 make it "put h 6"
  prompt 'put h 5' $'\e[A\x7f6' 'get h' 'quit'
  [ "$(R get h)" = 6 ] && grep -qx '"6"' "$tmp/tty"
  ok $? "prompt: line editing: up-arrow recalls the last line, backspace edits it"
  prc=$(timeout 60 "$PY" "$tmp/ttydrive.py" "$tmp/tty.raw" "$tmp/stdout" -- "$BIN/rkv" --servers "$A")
  [ "$prc" = 2 ] && grep -q "rkv: no command: give one of" "$tmp/tty.raw" && ! grep -q "> " "$tmp/tty.raw"
  ok $? "stdin a terminal but stdout a file: no prompt, the no-command line, exit 2"
fi

echo "1..$n"
[ "$fails" = 0 ]
