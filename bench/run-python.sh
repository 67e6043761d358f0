#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# run-python.sh - part of `make bench`: the Python module's per-call cost
# beside the C API's in the same run: synchronous gets and puts of 100 B
# and 1 KiB values with one call in flight (rkv-bench-kv --inflight 1 for
# C, the same loop in Python), dense tensor pull/push of 1 and 16 MiB
# from Python beside rkv-bench-ps, and embedding pull and push of 4,096
# ids x 64 floats (rows/s) with each optimizer, on tcp and shm.
#
#   bench/run-python.sh BUILD_DIR
#
# Starts one rkv-server per provider by PID, stopped on exit.  Writes
# bench/results/python-<DATE>.md.  Skips with its reason when the module
# is not built.
set -u
O=${1:-build}
cd "$(dirname "$0")/.." || exit 2
BIN=$O/bin
PY=${PYTHON:-/usr/bin/python3}
mod=$(ls "$O"/python/rkv*.so 2>/dev/null | head -1)
[ -n "$mod" ] || { echo "run-python: no Python module in $O: skipped"; exit 0; }
RES=bench/results
DATE=$(date -u +%Y%m%d-%H%M%S)
MD=$RES/python-$DATE.md
OPS=${BENCH_PY_OPS:-100000}
mkdir -p "$RES" || exit 2
tmp=$(mktemp -d) || exit 2
export RKV_SHM_DIR=$tmp/shm
srv=""
cleanup() {
  [ -n "$srv" ] && kill -TERM "$srv" 2>/dev/null && wait "$srv" 2>/dev/null
  rm -rf "$tmp"
}
trap cleanup EXIT

cat >"$tmp/bench.py" <<'PY'
import sys, time
import numpy as np
import rkv
addr, kind, size, ops = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
c = rkv.Client(addr, max_inflight=256 if kind.startswith("emb") else 0)
if kind in ("get", "put"):
    keys = [b"py%06d" % i for i in range(10000)]
    val = b"v" * size
    for k in keys:
        c.put(k, val)
    t0 = time.perf_counter()
    if kind == "get":
        for i in range(ops):
            c.get(keys[i % 10000])
    else:
        for i in range(ops):
            c.put(keys[i % 10000], val)
    dt = time.perf_counter() - t0
    print("%.3f" % (dt / ops * 1e6))        # us per call
elif kind.startswith("emb"):
    # 16 batches of 4096 random ids of a 1M-row table, dim 64; every row
    # pushed once first (so pushes update stored rows, pulls read them)
    opt = kind[4:] or "sgd"
    e = c.embedding("bench-" + opt, num_rows=1 << 20, dim=64,
                    optimizer=opt, create=True, exist_ok=True)
    rng = np.random.default_rng(1)
    batches = [rng.choice(1 << 20, 4096, replace=False) for _ in range(16)]
    g = np.full((4096, 64), 0.01, np.float32)
    out = np.empty((4096, 64), np.float32)
    for b in batches:
        e.push(b, g)
    reps = max(16, ops // 2000)
    t0 = time.perf_counter()
    for i in range(reps):
        if size == 0:
            e.pull(batches[i % 16], into=out)
        else:
            e.push(batches[i % 16], g)
    dt = time.perf_counter() - t0
    print("%.0f" % (4096 * reps / dt))           # rows/s
else:
    n = size // 4
    t = c.tensor("bench-%d-%s" % (size, kind), shape=n, create=True)
    g = np.ones(n, np.float32)
    out = np.empty(n, np.float32)
    def one():
        if kind == "pull":
            t.pull(into=out)
        else:
            t.push(g)
    one()                       # warm: pages of out, locations cached
    reps, t0 = 0, time.perf_counter()
    while time.perf_counter() - t0 < 1.0:   # 1 s, as rkv-bench-ps --seconds 1
        one()
        reps += 1
    dt = time.perf_counter() - t0
    print("%.1f" % (size * reps / dt / 1e6))     # MB/s, as rkv-bench-ps
PY

echo "# rkv from Python: $(date -u '+%Y-%m-%d %H:%M UTC'), $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg)" >"$MD"
{
  echo
  echo "One call in flight: Python's per-call time beside the C API's (rkv-bench-kv --inflight 1, mean), $OPS calls each; dense tensors: pull and push (rule sum) MB/s beside rkv-bench-ps's (for time, lower is better; for MB/s, higher). Embedding tables (Client(max_inflight=256)): 4096 distinct random ids of a 1M-row table of 64 floats per call, rows already stored; a rule's cost is its push time per row beyond SGD's, moving its state included."
  echo
  echo "| provider | op | value | C (mean us, or MB/s) | Python | Python / C |"
  echo "|---|---|---:|---:|---:|---:|"
} >>"$MD"
for prov in tcp shm; do
  case $prov in
    tcp) listen=tcp://127.0.0.1:0 ;;
    shm) listen=shm:///rkv-bench-py-$$ ;;
  esac
  "$BIN/rkv-server" --listen "$listen" --memory 1G --grace 200 --lease 50 \
    --chunk 16M --log-level warn >"$tmp/srv.out" 2>"$tmp/srv.err" &
  srv=$!
  addr=""
  for _ in $(seq 1 100); do
    addr=$(sed -n 's/^rkv-server: listening on //p' "$tmp/srv.out")
    [ -n "$addr" ] && break
    sleep 0.1
  done
  [ -n "$addr" ] || { echo "run-python: $prov server did not start"; exit 1; }
  for op in get put; do
    for size in 100 1024; do
      mix=100:0:0:0; [ $op = put ] && mix=0:100:0:0
      "$BIN/rkv-bench-kv" --servers "$addr" --keys 10000 --ops "$OPS" \
        --mix "$mix" --value-size "$size" --inflight 1 --json "$tmp/c.json" >/dev/null 2>&1
      c_us=$("$PY" -c 'import json,sys; d=json.load(open(sys.argv[1])); print("%.3f" % (1e6 / d["ops_per_s"]))' "$tmp/c.json" 2>/dev/null)
      py_us=$(PYTHONPATH="$O/python" "$PY" "$tmp/bench.py" "$addr" "$op" "$size" "$OPS" 2>/dev/null)
      ratio=$(awk -v p="$py_us" -v c="$c_us" 'BEGIN { if (c > 0) printf "%.2f", p / c }')
      echo "| $prov | $op | $size B | $c_us | $py_us | ${ratio}x |" >>"$MD"
    done
  done
  # dense tensors: the C API's pull and push (rkv-bench-ps, rule sum)
  # beside Python's, MB/s (10^6 bytes)
  # (twice: the first run also takes the server's data pages' first
  # touch, which would count against whichever side ran first)
  for _ in 1 2; do
    timeout 600 "$BIN/rkv-bench-ps" --servers "$addr" --sizes 1M,16M \
      --seconds 1 --rule sum --json "$tmp/ps.json" >/dev/null 2>&1
  done
  for op in pull push; do
    for size in 1048576 16777216; do
      c_mbs=$("$PY" -c 'import json,sys
d = json.load(open(sys.argv[1]))
print(next(("%.1f" % r[sys.argv[2] + "_mbs"]) for r in d["rows"] if r["bytes"] == int(sys.argv[3])))' \
        "$tmp/ps.json" "$op" "$size" 2>/dev/null)
      mbs=$(PYTHONPATH="$O/python" "$PY" "$tmp/bench.py" "$addr" "$op" "$size" "$OPS" 2>/dev/null)
      ratio=$(awk -v p="$mbs" -v c="$c_mbs" 'BEGIN { if (c > 0) printf "%.2f", p / c }')
      echo "| $prov | tensor $op | $((size / 1048576)) MiB | $c_mbs MB/s | $mbs MB/s | ${ratio}x |" >>"$MD"
    done
  done
  # embedding tables: rows/s of pulls and of pushes with each optimizer;
  # a rule's cost is its push's time per row beyond SGD's (which includes
  # moving its state: a row of 64 floats is 272 B with SGD, 528 B with
  # Adagrad, 784 B with Adam)
  pull=$(PYTHONPATH="$O/python" "$PY" "$tmp/bench.py" "$addr" emb 0 "$OPS" 2>/dev/null)
  echo "| $prov | embedding pull, 4096 ids | 64 floats | | $pull rows/s | |" >>"$MD"
  sgd=""
  for opt in sgd adagrad adam; do
    rs=$(PYTHONPATH="$O/python" "$PY" "$tmp/bench.py" "$addr" "emb-$opt" 1 "$OPS" 2>/dev/null)
    [ $opt = sgd ] && sgd=$rs
    extra=$(awk -v r="$rs" -v s="$sgd" 'BEGIN { if (r > 0 && s > 0) printf "%+.2f us/row over sgd", 1e6 / r - 1e6 / s }')
    echo "| $prov | embedding push $opt, 4096 ids | 64 floats | | $rs rows/s | $extra |" >>"$MD"
  done
  kill -TERM "$srv"; wait "$srv" 2>/dev/null; srv=""
done
cat "$MD"
