#!/usr/bin/env bash
# run.sh - `make test`: unit tests, the transport conformance suite and the
# integration tests on every provider (verbs skips with its reason when
# there is no RDMA device: `make check-rdma` runs it for real).
#   tests/run.sh BUILD_DIR
# Ends with "N passed, N failed[, N skipped]"; exit 0 only when none failed.
#
# RKV_TEST_QUICK=1 (CI's sanitizer runs): the programs only, without what
# a sanitizer adds nothing to: the source checks (check-deps, check-layers),
# the Python module (none in sanitizer builds), the YCSB self-test (Redis,
# memcached and the tools' options; the tools run in tests/integration
# too) and the fuzz run (its own ASan build, run by the plain make test).
# RKV_ITEST_PROVIDERS: the providers of the itest_* programs (default: all
# of RKV_TEST_PROVIDERS); RKV_TEST_SKIP: names of tests not to run, said so
# at the end (e.g. "test_explore cluster_cli").
set -u
O=${1:-build}
cd "$(dirname "$0")/.." || exit 2
. tests/lib/tap.sh
PROVIDERS=${RKV_TEST_PROVIDERS:-tcp shm verbs}
QUICK=${RKV_TEST_QUICK:-0}
ITEST_PROVIDERS=${RKV_ITEST_PROVIDERS:-$PROVIDERS}
SKIP=" ${RKV_TEST_SKIP:-} "
NOT_RUN=""
# wanted NAME: 0 unless RKV_TEST_SKIP names it
wanted() {
  case "$SKIP" in
    *" $1 "*) NOT_RUN="$NOT_RUN $1"; return 1 ;;
  esac
  return 0
}

if [ "$QUICK" != 1 ]; then
  # every #include follows the dependency graph in the Makefile
  # one subshell per #include: 2 min on a loaded 2-core machine
  tap_run check-deps 300 bash tools/check-deps.sh
fi
# librkv.a and librkv.so export only the API of client/librkv.map
tap_run check-symbols 60 bash tools/check-symbols.sh "$O"
if [ "$QUICK" != 1 ]; then
  # librkv's layers call one way (docs/DESIGN.md §1.1)
  tap_run check-layers 60 bash tools/check-layers.sh "$O"
fi

for t in "$O"/tests/test_*; do
  [ -x "$t" ] || continue
  wanted "$(basename "$t")" || continue
  # the explorers: 75-155 s alone, 240+ beside a Soft-RoCE guest
  case "$(basename "$t")" in
    test_explore*) tap_run "$(basename "$t")" 600 "$t" ;;
    *) tap_run "$(basename "$t")" 300 "$t" ;;
  esac
done
if [ -x "$O/tests/conformance" ]; then
  for p in $PROVIDERS; do
    tap_run "conformance-$p" 600 "$O/tests/conformance" --provider "$p"
  done
fi
for t in "$O"/tests/itest_*; do
  [ -x "$t" ] || continue
  wanted "$(basename "$t")" || continue
  for p in $ITEST_PROVIDERS; do
    tap_run "$(basename "$t")-$p" 900 "$t" --provider "$p"
  done
done
# GPU tests: skip with their reason without a usable GPU (make check-gpu
# runs them, and the GPU benchmark, on a GPU machine)
for t in "$O"/tests/gpu_*; do
  [ -x "$t" ] || continue
  tap_run "$(basename "$t")" 600 "$t"
done
for s in tests/integration/*.sh; do
  [ -f "$s" ] || continue
  wanted "$(basename "$s" .sh)" || continue
  tap_run "$(basename "$s" .sh)" 300 bash "$s" "$O"
done
[ "$ITEST_PROVIDERS" = "$PROVIDERS" ] ||
  echo "itest_* run on $ITEST_PROVIDERS only (RKV_ITEST_PROVIDERS)"
[ -z "$NOT_RUN" ] || echo "not run (RKV_TEST_SKIP):$NOT_RUN"
if [ "$QUICK" = 1 ]; then
  echo "RKV_TEST_QUICK=1: check-deps, check-layers, python, ycsb-selftest and fuzz not run"
  tap_summary
  exit
fi
# the Python module (pytest; skips in sanitizer builds, which have none)
if [ -f tests/python/run.sh ]; then
  tap_run python 600 bash tests/python/run.sh "$O"
fi
if [ -f bench/ycsb/selftest.sh ] && [ -x "$O/bin/rkv-ycsb" ]; then
  tap_run ycsb-selftest 300 bash bench/ycsb/selftest.sh "$O"
fi
# a short bounded fuzz of every decoder (make fuzz runs it for longer)
if [ -f tests/fuzz/run.sh ]; then
  tap_run fuzz 600 bash tests/fuzz/run.sh --seconds "${RKV_FUZZ_SECONDS:-60}" --build-dir "$O"
fi
tap_summary
