#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# check-rdma.sh - `make check-rdma`: the verbs suite on a real RDMA device.
#
#   tests/softroce/check-rdma.sh BUILD_DIR
#
# With an ACTIVE port on this host (ibv_devinfo), guest-suite.sh runs here.
# Otherwise one Soft-RoCE guest boots (vm-run.sh) and runs it there; a guest
# that does not come up, or times out, counts as one failure with the reason.
# The last line is always "N passed, N failed[, N skipped]"; the exit status
# is non-zero iff something failed.
set -u
O=${1:-build}
cd "$(dirname "$0")/../.." || exit 2

if [ ! -d "$O/tests" ]; then
	echo "check-rdma: $O/tests does not exist (build first: make O=$O)"
	echo "0 passed, 1 failed"
	exit 1
fi

# An IPv4 address of the netdev behind the first active RDMA port.
host_verbs_ip() {
	local nd
	nd=$(rdma link show 2>/dev/null | awk '/state ACTIVE/ { for (i = 1; i < NF; i++) if ($i == "netdev") { print $(i + 1); exit } }')
	[ -n "$nd" ] && ip -4 -o addr show dev "$nd" 2>/dev/null | awk '{ split($4, a, "/"); print a[1]; exit }'
}

if ibv_devinfo 2>/dev/null | grep -q PORT_ACTIVE; then
	echo "check-rdma: using this host's RDMA device"
	export RKV_VERBS_IP=${RKV_VERBS_IP:-$(host_verbs_ip)}
	exec bash tests/softroce/guest-suite.sh "$O"
fi

echo "check-rdma: no usable RDMA device here ($(ibv_devinfo 2>&1 | head -n 1)); booting a Soft-RoCE guest"
export SOFTROCE_TIMEOUT=${SOFTROCE_TIMEOUT:-1800}
export RKV_SUITE_BUDGET=$((SOFTROCE_TIMEOUT - 60))
SOFTROCE_ENV="${SOFTROCE_ENV:-} RKV_SUITE_BUDGET RKV_LOG_LEVEL RKV_TEST_LONG"
export SOFTROCE_ENV
log=$(mktemp)
trap 'rm -f "$log"' EXIT
t0=$(date +%s)
bash tests/softroce/vm-run.sh bash tests/softroce/guest-suite.sh "$O" 2>&1 | tee "$log"
rc=${PIPESTATUS[0]}
echo "check-rdma: guest run took $(($(date +%s) - t0)) s, exit status $rc"

# The guest's own summary, then ours (a boot failure or timeout adds one).
sum=$(grep -E '^[0-9]+ passed, [0-9]+ failed' "$log" | tail -n 1)
p=$(echo "$sum" | sed -nE 's/^([0-9]+) passed.*/\1/p')
f=$(echo "$sum" | sed -nE 's/^[0-9]+ passed, ([0-9]+) failed.*/\1/p')
s=$(echo "$sum" | sed -nE 's/.*, ([0-9]+) skipped.*/\1/p')
p=${p:-0}; f=${f:-0}; s=${s:-0}
case "$rc" in
0) ;;
124) echo "check-rdma: FAILED: the guest run timed out (SOFTROCE_TIMEOUT=${SOFTROCE_TIMEOUT}s)"; f=$((f + 1)) ;;
125) echo "check-rdma: FAILED: the Soft-RoCE guest could not be set up (see the console tail above)"; f=$((f + 1)) ;;
*) [ -z "$sum" ] && { echo "check-rdma: FAILED: the guest suite ended with status $rc and no summary"; f=$((f + 1)); } ;;
esac
if [ "$s" != 0 ]; then
	echo "$p passed, $f failed, $s skipped"
else
	echo "$p passed, $f failed"
fi
[ "$f" = 0 ]
