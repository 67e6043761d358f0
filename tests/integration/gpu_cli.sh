#!/usr/bin/env bash
# gpu_cli.sh - rkv-server --data-memory on any machine: bad values are a
# usage error (exit 2); a GPU that cannot be used (no CUDA in the build, no
# driver, no device, index past the last device) refuses the start with
# exactly one stderr line naming the cause and exit 1, before anything is
# listening; host memory still starts.  TAP output.  Usage: gpu_cli.sh BUILD_DIR
set -u
O=${1:-build}
BIN="$O/bin"
n=0; fails=0
ok() { n=$((n+1)); if [ "$1" = 0 ]; then echo "ok $n - $2"; else echo "not ok $n - $2"; fails=$((fails+1)); fi; }
skip() { n=$((n+1)); echo "ok $n - $1 # SKIP $2"; }
out=$(mktemp); err=$(mktemp)
trap 'rm -f "$out" "$err"' EXIT
S() { timeout 20 "$BIN/rkv-server" --listen tcp://127.0.0.1:0 --memory 16M --capacity 1000 "$@" >"$out" 2>"$err"; }

S --data-memory gpux; rc=$?
[ "$rc" = 2 ] && grep -q "not host, gpu or gpu:N" "$err"; ok $? "--data-memory gpux: usage error, exit 2"
S --data-memory gpu:-1; [ $? = 2 ]; ok $? "--data-memory gpu:-1: usage error"

# Is a GPU usable here?  test_mem prints the reason when it is not.
have_gpu=0
if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L 2>/dev/null | grep -q '^GPU '; then
  have_gpu=1
fi
if [ "$have_gpu" = 0 ]; then
  S --data-memory gpu; rc=$?
  [ "$rc" = 1 ] && [ "$(wc -l <"$err")" = 1 ] && grep -q "^rkv-server: --data-memory gpu: " "$err" &&
    grep -qiE "CUDA driver not available|CUDA driver too old|no CUDA device|no CUDA support" "$err"
  ok $? "--data-memory gpu without a usable GPU: one line naming the cause, exit 1"
  sed 's/^/# /' "$err"
  ! grep -q "listening on" "$out"; ok $? "nothing started"
  S --data-memory gpu:7; rc=$?
  [ "$rc" = 1 ] && [ "$(wc -l <"$err")" = 1 ] && grep -q "gpu:7" "$err"; ok $? "--data-memory gpu:7: one line, exit 1"
else
  skip "--data-memory gpu without a usable GPU" "this machine has a GPU (make check-gpu tests it)"
  ngpu=$(nvidia-smi -L | grep -c '^GPU ')
  S --data-memory gpu:$ngpu; rc=$?
  [ "$rc" = 1 ] && [ "$(wc -l <"$err")" = 1 ] && grep -q "requested" "$err"; ok $? "--data-memory gpu:$ngpu past the last device: one line, exit 1"
  sed 's/^/# /' "$err"
fi

# host memory: starts, never touches CUDA
timeout 20 "$BIN/rkv-server" --listen tcp://127.0.0.1:0 --memory 16M --capacity 1000 --data-memory host --log-level error >"$out" 2>"$err" &
srv=$!
up=1
for _ in $(seq 1 100); do grep -q "listening on" "$out" && { up=0; break; }; sleep 0.1; done
ok $up "--data-memory host starts"
kill -TERM $srv 2>/dev/null; wait $srv 2>/dev/null
echo "1..$n"
[ "$fails" = 0 ]
