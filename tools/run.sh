#!/usr/bin/env bash
# run.sh - `make run`: the default demo on an embedded configuration.
# For now: the transport benchmark on the tcp provider (software RNIC over
# loopback), printing its latency/throughput table.
set -euo pipefail
O=${1:-build}
cd "$(dirname "$0")/.."
exec "$O/bin/rkv-bench-transport" --provider tcp --iters "${RKV_RUN_ITERS:-20000}"
