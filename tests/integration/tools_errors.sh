#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# tools_errors.sh - how the tools fail, as a new user meets it: rkv (the
# CLI), rkv-server and rkv-ycsb against real rkv-servers on 127.0.0.1,
# over tcp and shm.  Each case must exit non-zero (the status each tool
# documents) with exactly one line on stderr that names what failed (the
# option, the argument, the server address): nothing else of the tool's,
# no library or transport log lines (rkv with no command at all: that
# line, then the usage as a hint).
#   tests/integration/tools_errors.sh BUILD_DIR [PROVIDER...]  (tcp shm)
# TAP output.  A case whose only fault is log lines of the transport
# (lines in rkv_log's format) beside the tool's own one line is reported
# as a skip naming them: those come from common/transport, whose messages
# librkv is to route to the client's log callback (then the case passes).
set -u
O=${1:-build}
# what a new user sees: no log level asked for (CI exports one, and with it
# the CLI rightly shows librkv's messages too); cases that want one set it
unset RKV_LOG_LEVEL
shift
PROVIDERS=${*:-tcp shm}
cd "$(dirname "$0")/../.." || exit 2
BIN=$O/bin
n=0
fails=0
tmp=$(mktemp -d) || exit 2
PIDS=()
# shm socket files of this test's servers (killed ones leave theirs) go
# with $tmp
export RKV_SHM_DIR=$tmp/shm

cleanup() {
  local p
  for p in "${PIDS[@]}"; do kill -KILL "$p" 2>/dev/null; done
  for p in "${PIDS[@]}"; do wait "$p" 2>/dev/null; done
  rm -rf "$tmp"
}
trap cleanup EXIT

for b in rkv rkv-server rkv-ycsb; do
  if [ ! -x "$BIN/$b" ]; then
    echo "1..0 # SKIP $BIN/$b not built"
    exit 77
  fi
done

# a line in rkv_log's format (ISO 8601 or seconds.micros, then a level)
LOGLINE='^([0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9:.]+Z?|[0-9]+\.[0-9]+) (debug|info|warn|error) '

# check NAME WANT_RC PATTERN: the last command's status ($rc) and stderr
# ($tmp/err): status WANT_RC, one line, matching PATTERN (grep -E)
check() {
  local name=$1 want=$2 pat=$3 lines own
  lines=$(grep -c '' "$tmp/err")
  own=$(grep -cvE "$LOGLINE" "$tmp/err")
  n=$((n + 1))
  if [ "$rc" = "$want" ] && [ "$lines" = 1 ] && grep -qE -- "$pat" "$tmp/err"; then
    echo "ok $n - $name"
  elif [ "$rc" = "$want" ] && [ "$own" = 1 ] &&
    grep -vE "$LOGLINE" "$tmp/err" | grep -qE -- "$pat"; then
    echo "ok $n - $name # SKIP $((lines - own)) transport log line(s) beside the error line"
    grep -E "$LOGLINE" "$tmp/err" | sed 's/^/#   transport: /'
  else
    fails=$((fails + 1))
    echo "not ok $n - $name"
    echo "#   exit $rc (want $want), $lines line(s) on stderr (want 1 matching /$pat/):"
    sed 's/^/#   /' "$tmp/err" | head -12
  fi
}

# check_usage NAME WANT_RC PATTERN: as check, for the one case whose
# error line is followed by the usage (rkv with no command): the first
# line matches PATTERN, a "usage: " line follows, no log line
check_usage() {
  local name=$1 want=$2 pat=$3
  n=$((n + 1))
  if [ "$rc" = "$want" ] && head -n 1 "$tmp/err" | grep -qE -- "$pat" &&
    sed 1d "$tmp/err" | grep -q '^usage: ' && ! grep -qE "$LOGLINE" "$tmp/err"; then
    echo "ok $n - $name"
  else
    fails=$((fails + 1))
    echo "not ok $n - $name"
    echo "#   exit $rc (want $want), stderr (want /$pat/, then the usage):"
    sed 's/^/#   /' "$tmp/err" | head -12
  fi
}

# run CMD...: status in $rc, stderr in $tmp/err (stdout dropped)
run() {
  timeout -k 5 60 "$@" >/dev/null 2>"$tmp/err"
  rc=$?
}

# start_server VAR ADDR ARGS...: an rkv-server on ADDR (port 0: any);
# VAR gets its address, LAST_PID its PID
start_server() {
  local var=$1 listen=$2 out=$tmp/srv.$RANDOM a=""
  shift 2
  "$BIN/rkv-server" --listen "$listen" --log-level error "$@" >"$out" 2>/dev/null &
  LAST_PID=$!
  PIDS+=("$LAST_PID")
  for _ in $(seq 1 100); do
    a=$(sed -n 's/^rkv-server: listening on //p' "$out")
    [ -n "$a" ] && break
    sleep 0.1
  done
  if [ -z "$a" ]; then
    echo "Bail out! rkv-server --listen $listen $* did not start"
    exit 1
  fi
  printf -v "$var" '%s' "$a"
}

stop_server() {
  kill -TERM "$1" 2>/dev/null
  wait "$1" 2>/dev/null
}

listen_of() { # PROVIDER TAG -> a fresh listen address
  if [ "$1" = shm ]; then echo "shm:///rkv-err-$$-$2"; else echo "tcp://127.0.0.1:0"; fi
}

printf 'a-secret-of-thirty-two-bytes-abc\n' >"$tmp/secret"
printf 'not-the-secret-thirty-two-bytes!\n' >"$tmp/wrong"
chmod 600 "$tmp/secret" "$tmp/wrong"
head -c 1025 /dev/zero | tr '\0' k >"$tmp/longkey"
head -c 67108865 /dev/zero >"$tmp/big" # RKV_VALUE_MAX + 1
LONGKEY=$(cat "$tmp/longkey")
W=workloads/workloada

# ------------------------------------------------------- rkv-server
# (provider-independent: the command line)
run "$BIN/rkv-server" --frob
check "rkv-server: unknown option: exit 2, names it" 2 "rkv-server: unknown option '--frob'"
run "$BIN/rkv-server" --memory
check "rkv-server: option without its value: exit 2, names it" 2 "rkv-server: option '--memory' needs a value"
run "$BIN/rkv-server" --listen nonsense
check "rkv-server: --listen not an address: exit 2, names it" 2 "rkv-server: --listen: 'nonsense' is not an address"
run "$BIN/rkv-server" --memory 12Q
check "rkv-server: bad --memory: exit 2, names it" 2 "rkv-server: --memory: '12Q' is not a size"
run "$BIN/rkv-server" stray
check "rkv-server: stray argument: exit 2, names it" 2 "rkv-server: unexpected argument 'stray'"
run env RKV_LOG_LEVEL=loud "$BIN/rkv-server"
check "rkv-server: bad RKV_LOG_LEVEL: exit 2, names it" 2 "rkv-server: RKV_LOG_LEVEL: 'loud'"
run "$BIN/rkv-server" --listen tcp://nosuchhost.invalid:0 --memory 4M
check "rkv-server: host that does not resolve: exit 1, one line with the cause" 1 \
  "rkv-server: cannot start on tcp://nosuchhost.invalid:0: .*resolve"

# ---------------------------------------------------- per provider
for P in $PROVIDERS; do
  start_server SRV "$(listen_of "$P" plain)" --memory 16M --capacity 16 \
    --index-max 0
  plain_pid=$LAST_PID
  start_server SEC "$(listen_of "$P" sec)" --memory 16M --secret-file "$tmp/secret"
  sec_pid=$LAST_PID
  if [ "$P" = shm ]; then NOBODY=shm:///rkv-err-$$-nobody; else NOBODY=tcp://127.0.0.1:1; fi
  R() { run "$BIN/rkv" --servers "$SRV" "$@"; }

  run "$BIN/rkv-server" --listen "$SRV" --memory 4M
  check "$P: rkv-server: address in use: exit 1, names it" 1 \
    "rkv-server: cannot start on $SRV: cannot listen: Address already in use"

  # ------------------------------------------------------ the CLI
  run "$BIN/rkv" --servers "$NOBODY" get k
  check "$P: rkv: nothing listening: exit 2, names the address" 2 \
    "^rkv: cannot connect to $NOBODY: Connection refused"
  run "$BIN/rkv" --servers "$SEC" --secret-file "$tmp/wrong" get k
  check "$P: rkv: wrong secret: exit 2, names the server" 2 \
    "^rkv: cannot connect to $SEC: Permission denied.*(secret|authentication)"
  run env -u RKV_SECRET_FILE "$BIN/rkv" --servers "$SEC" get k
  check "$P: rkv: no secret for a server that wants one: exit 2" 2 \
    "^rkv: cannot connect to $SEC: Permission denied.*(secret|authentication)"
  run "$BIN/rkv" --servers "$P://bad address" get k
  check "$P: rkv: bad address: exit 2, names it and --servers" 2 \
    "^rkv: --servers: '$P://bad address' is not an address"
  run env RKV_SERVERS="$P:/x" "$BIN/rkv" get k
  check "$P: rkv: bad \$RKV_SERVERS: exit 2, names it" 2 \
    "^rkv: \\\$RKV_SERVERS: '$P:/x' is not an address"
  run "$BIN/rkv" --servers "$SRV,verbs://127.0.0.1:1" get k
  check "$P: rkv: two providers in one list: exit 2, names the address" 2 \
    "^rkv: --servers: 'verbs://127.0.0.1:1' is not a $P address"
  if [ "$P" = tcp ]; then
    run "$BIN/rkv" --servers tcp://nosuchhost.invalid:7000 get k
    check "$P: rkv: host that does not resolve: exit 2, names the address" 2 \
      "^rkv: cannot connect to tcp://nosuchhost.invalid:7000"
  fi
  R --frob get k
  check "$P: rkv: unknown option: exit 2, names it" 2 "^rkv: unknown option '--frob'"
  R -x get k
  check "$P: rkv: unknown short option: exit 2, names it" 2 "^rkv: unknown option '-x'"
  R --read-only=yes get k
  check "$P: rkv: value for a flag: exit 2, names it" 2 "^rkv: option '--read-only' takes no value"
  run "$BIN/rkv" get k --servers
  check "$P: rkv: option without its value: exit 2, names it" 2 "^rkv: option '--servers' needs a value"
  R --timeout 0 get k
  check "$P: rkv: bad --timeout: exit 2, names it" 2 "^rkv: --timeout: '0'"
  R
  check_usage "$P: rkv: no command: exit 2, one line saying so, then the usage" 2 \
    "^rkv: no command: give one of get, put, del, stat or admin$"
  R frobnicate
  check "$P: rkv: unknown command: exit 2, names it" 2 "^rkv: unknown command 'frobnicate'"
  R get
  check "$P: rkv: missing argument: exit 2, names what is missing" 2 "^rkv: get takes KEY"
  R put k
  check "$P: rkv: put without a value: exit 2" 2 "^rkv: put takes KEY VALUE"
  R put "" v
  check "$P: rkv: empty key: exit 2" 2 "^rkv: put: the key is empty"
  R put "$LONGKEY" v
  check "$P: rkv: key over 1024 bytes: exit 2, says the length" 2 \
    "^rkv: put k+\\.\\.\\.: the key is 1025 bytes, longer than 1024"
  R put big - <"$tmp/big"
  check "$P: rkv: value over 67108864 bytes: exit 2, says the limit" 2 \
    "^rkv: put big: the value on stdin is larger than 67108864 bytes"
  R put k v
  R --read-only put k v2
  check "$P: rkv: read-only client writing: exit 2" 2 \
    "^rkv: put k: Permission denied \\(a --read-only client cannot write\\)"
  R --read-only del k
  check "$P: rkv: read-only client deleting: exit 2" 2 \
    "^rkv: del k: Permission denied \\(a --read-only client cannot write\\)"
  R get absent
  check "$P: rkv: absent key: exit 1" 1 "^rkv: get absent: not found"
  # --capacity 16 --index-max 0: 2 buckets of 32 slots that do not
  # grow; the 65th key cannot fit
  for i in $(seq 1 70); do
    R put "fill-$i" v
    [ "$rc" = 0 ] || break
  done
  check "$P: rkv: full table: exit 2, names the server" 2 \
    "^rkv: put fill-[0-9]+: No space left on device \\(server $SRV"

  # the server stops while the CLI waits for its value on stdin
  start_server VICTIM "$(listen_of "$P" victim)" --memory 16M
  victim_pid=$LAST_PID
  mkfifo "$tmp/fifo.$P"
  "$BIN/rkv" --servers "$VICTIM" put k - <"$tmp/fifo.$P" >/dev/null 2>"$tmp/err" &
  cli=$!
  exec 3>"$tmp/fifo.$P"
  sleep 1
  kill -KILL "$victim_pid"
  wait "$victim_pid" 2>/dev/null
  printf 'v' >&3
  exec 3>&-
  wait "$cli"
  rc=$?
  check "$P: rkv: server killed before the put: exit 2, names it" 2 \
    "^rkv: put k: .* \\(server $VICTIM: .*did the server stop"

  # a stopped server: the operation times out
  start_server VICTIM "$(listen_of "$P" stopped)" --memory 16M
  victim_pid=$LAST_PID
  run "$BIN/rkv" --servers "$VICTIM" put k v
  kill -STOP "$victim_pid"
  run "$BIN/rkv" --timeout 1000 --servers "$VICTIM" get k
  kill -KILL "$victim_pid"
  kill -CONT "$victim_pid" 2>/dev/null
  wait "$victim_pid" 2>/dev/null
  check "$P: rkv: server that does not answer: exit 2, names it" 2 \
    "^rkv: (cannot connect to $VICTIM|get k): Connection timed out"

  # -------------------------------------------------------- rkv-ycsb
  Y() { run "$BIN/rkv-ycsb" -P $W -p recordcount=50 -p operationcount=50 "$@"; }
  Y --servers "$NOBODY"
  check "$P: rkv-ycsb: nothing listening: exit 2, names the address" 2 \
    "^rkv-ycsb: cannot connect to rkv at $NOBODY: Connection refused"
  RKV_SECRET_FILE=$tmp/wrong Y --servers "$SEC"
  check "$P: rkv-ycsb: wrong secret: exit 2, names the server" 2 \
    "^rkv-ycsb: cannot connect to rkv at $SEC: Permission denied"
  Y --servers "$P://bad address"
  check "$P: rkv-ycsb: bad address: exit 2, names it" 2 \
    "^rkv-ycsb: --servers: '$P://bad address' is not an rkv address"
  if [ "$P" = tcp ]; then
    Y --servers tcp://nosuchhost.invalid:7000
    check "$P: rkv-ycsb: host that does not resolve: exit 2, names the address" 2 \
      "^rkv-ycsb: cannot connect to rkv at tcp://nosuchhost.invalid:7000"
  fi
  Y --servers "$SRV" --frob
  check "$P: rkv-ycsb: unknown option: exit 2, names it" 2 "^rkv-ycsb: unknown option '--frob'"
  Y --servers "$SRV" --threads
  check "$P: rkv-ycsb: option without its value: exit 2, names it" 2 \
    "^rkv-ycsb: option '--threads' needs a value"
  Y --servers "$SRV" --threads 0
  check "$P: rkv-ycsb: bad --threads: exit 2, names it" 2 "^rkv-ycsb: --threads: bad value '0'"
  Y --servers "$SRV" stray
  check "$P: rkv-ycsb: stray argument: exit 2, names it" 2 "^rkv-ycsb: unexpected argument 'stray'"
  run "$BIN/rkv-ycsb" --servers "$SRV"
  check "$P: rkv-ycsb: no workload: exit 2" 2 "^rkv-ycsb: no workload"
  Y --servers "$SRV" -p fieldcount=100 -p fieldlength=700000
  check "$P: rkv-ycsb: record over the value limit: exit 2" 2 \
    "^rkv-ycsb: fieldcount\\*fieldlength = 70000000 bytes"
  # the CLI filled the 16-key server: the load phase's inserts fail
  Y --servers "$SRV" --phase load
  check "$P: rkv-ycsb: full table: exit 1, one line for all failed inserts" 1 \
    "^rkv-ycsb: load phase: [0-9]+ operations? failed, the first: .*No space left on device \\(rkv at $SRV\\)"

  start_server VICTIM "$(listen_of "$P" ycsb)" --memory 64M
  victim_pid=$LAST_PID
  timeout -k 5 60 "$BIN/rkv-ycsb" -P $W -p recordcount=200 -p operationcount=1000000000 \
    --threads 2 --servers "$VICTIM" >/dev/null 2>"$tmp/err" &
  ycsb=$!
  sleep 2
  kill -KILL "$victim_pid"
  wait "$victim_pid" 2>/dev/null
  wait "$ycsb"
  rc=$?
  check "$P: rkv-ycsb: server killed mid-run: exit 2, one line naming it" 2 \
    "^rkv-ycsb: (load|run) phase: thread [0-9]+: rkv at $VICTIM: .*did the server stop"

  stop_server "$plain_pid"
  stop_server "$sec_pid"
done

echo "1..$n"
[ "$fails" = 0 ]
