#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# run-ps.sh - part of `make bench`: parameter-server push/pull throughput
# for tensors of 4 KiB to 16 MiB per provider, beside raw transport
# READ/WRITE of the same bytes measured by rkv-bench-ps in the same run.
#
#   bench/run-ps.sh BUILD_DIR
#
# Starts one rkv-server per provider (tcp, shm) by PID, stopped on exit.
# Each rule's run first pushes its region's size (--warm 1G): a push writes
# new blocks, and a region's pages cost a fault on first touch (on a VM
# that shadows page tables, most of a push), so the points measure a
# server that has run a while.  Writes bench/results/ps-<DATE>.md.  Knobs:
# BENCH_PS_SECONDS (per point), BENCH_PS_WARM (1G; 0: none, fresh pages).
set -u
O=${1:-build}
cd "$(dirname "$0")/.." || exit 2
BIN=$O/bin
RES=bench/results
DATE=$(date -u +%Y%m%d-%H%M%S)
MD=$RES/ps-$DATE.md
mkdir -p "$RES" || exit 2
tmp=$(mktemp -d) || exit 2
srv=""
cleanup() {
  [ -n "$srv" ] && kill -TERM "$srv" 2>/dev/null && wait "$srv" 2>/dev/null
  rm -rf "$tmp"
}
trap cleanup EXIT

echo "# rkv parameter server: $(date -u '+%Y-%m-%d %H:%M UTC'), $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg)" >"$MD"
for prov in tcp shm; do
  case $prov in
    tcp) listen=tcp://127.0.0.1:0 ;;
    shm) listen=shm:///rkv-bench-ps-$$ ;;
  esac
  # pushes write fresh blocks; old ones wait out the grace period
  "$BIN/rkv-server" --listen "$listen" --memory 1G --grace 200 --lease 50 \
    --chunk 16M --log-level warn >"$tmp/srv.out" 2>"$tmp/srv.err" &
  srv=$!
  addr=""
  for _ in $(seq 1 100); do
    addr=$(sed -n 's/^rkv-server: listening on //p' "$tmp/srv.out")
    [ -n "$addr" ] && break
    sleep 0.1
  done
  if [ -z "$addr" ]; then
    echo "bench-ps: rkv-server on $prov did not start: $(tail -1 "$tmp/srv.err")"
  else
    {
      echo
      echo "## $prov"
      echo
      echo '```'
      # SUM takes the read-modify-write path, ASSIGN the write-only one
      wopt=()
      [ "${BENCH_PS_WARM:-1G}" != 0 ] && wopt=(--warm "${BENCH_PS_WARM:-1G}")
      for rule in sum assign; do
        timeout 600 "$BIN/rkv-bench-ps" --servers "$addr" \
          --seconds "${BENCH_PS_SECONDS:-2}" --rule "$rule" "${wopt[@]}"
      done
      echo '```'
    } 2>&1 | tee -a "$MD"
  fi
  kill -TERM "$srv" 2>/dev/null
  wait "$srv" 2>/dev/null
  srv=""
done
echo "bench-ps: wrote $MD"
