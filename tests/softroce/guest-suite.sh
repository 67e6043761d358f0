#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# guest-suite.sh - the verbs suite, run where an RDMA device is usable (inside
# the Soft-RoCE guest of vm-run.sh, or directly on a host with an HCA).
#
#   tests/softroce/guest-suite.sh BUILD_DIR
#
# Runs every $BUILD_DIR/tests/test_verbs_* binary, the conformance suite
# and the KV integration tests (itest_*) with --provider verbs, each under tap_run with a timeout that also fits
# what is left of the whole run (RKV_SUITE_BUDGET seconds, default 1400, a
# little under vm-run.sh's SOFTROCE_TIMEOUT).  A binary that is not built is
# reported and skipped.  rdma_cm needs an address of the RDMA netdev:
# RKV_VERBS_IP (vm-run.sh sets it; default $SOFTROCE_IP).
# Ends with "N passed, N failed[, N skipped]"; exit 0 only when none failed.
set -u
O=${1:-build}
cd "$(dirname "$0")/../.." || exit 2
. tests/lib/tap.sh

BUDGET=${RKV_SUITE_BUDGET:-1400}
T0=$(date +%s)
export RKV_VERBS_IP=${RKV_VERBS_IP:-${SOFTROCE_IP:-}}

# Timeout for the next test: its own bound, within what is left.
bound() {
	local want=$1 left
	left=$((BUDGET - ($(date +%s) - T0) - 10))
	[ "$left" -lt 10 ] && left=10
	[ "$want" -lt "$left" ] && echo "$want" || echo "$left"
}

echo "# verbs suite: $(uname -r), RKV_VERBS_IP=${RKV_VERBS_IP:-unset}"
ibv_devinfo 2>&1 | awk '/hca_id|state:|link_layer|active_mtu/ { $1 = $1; print "# " $0 }'

found=0
for t in "$O"/tests/test_verbs_*; do
	[ -x "$t" ] || continue
	found=1
	tap_run "$(basename "$t")" "$(bound 600)" "$t"
done
[ "$found" = 1 ] || echo "# no $O/tests/test_verbs_* binaries"

if [ -x "$O/tests/conformance" ]; then
	tap_run conformance-verbs "$(bound 1200)" "$O/tests/conformance" --provider verbs
else
	echo "# $O/tests/conformance is not built: conformance-verbs skipped"
	T_SKIP=$((T_SKIP + 1))
fi
# What `rkv-server --check-fabric` says about the guest's device
tap_run check-fabric "$(bound 120)" bash tests/integration/check_fabric.sh "$O"
# The KV store on verbs: real rkv-server processes and librkv clients.
# itest_kv sizes its torture for Soft-RoCE by itself (RKV_TORTURE_OPS overrides)
for t in "$O"/tests/itest_*; do
	[ -x "$t" ] || continue
	tap_run "$(basename "$t")-verbs" "$(bound 900)" "$t" --provider verbs
done
tap_summary
