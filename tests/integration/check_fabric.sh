#!/usr/bin/env bash
# check_fabric.sh - `rkv-server --check-fabric` as an operator meets it.
# Without an RDMA device (make test here): one ERROR line that says how
# to get one, the count last, exit 2.  With one (make check-rdma's
# Soft-RoCE guest): the device's atomics, the port ACTIVE with its GIDs
# and netdev, the GID type, the MTU against the netdev's, exit 0; --mtu
# above the port's and a --device that is not there are errors (exit 2);
# a user whose memlock limit is below --memory is told to raise it.
# TAP output.  Usage: check_fabric.sh BUILD_DIR
set -u
O=${1:-build}
SRV="$O/bin/rkv-server"
n=0; fails=0
ok() { n=$((n+1)); if [ "$1" = 0 ]; then echo "ok $n - $2"; else echo "not ok $n - $2"; fails=$((fails+1)); fi; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

"$SRV" --check-fabric >"$tmp/out" 2>"$tmp/err"; rc=$?
sed 's/^/# /' "$tmp/out"
last=$(tail -n 1 "$tmp/out")
echo "$last" | grep -Eq '^[0-9]+ ok, [0-9]+ info, [0-9]+ warnings, [0-9]+ errors$'; ok $? "the count comes last"
[ ! -s "$tmp/err" ]; ok $? "nothing on stderr"
if ! ibv_devinfo 2>/dev/null | grep -q PORT_ACTIVE; then
  [ "$rc" = 2 ] && grep -q "^ERROR no RDMA device on this host: load its driver" "$tmp/out"; ok $? "no device: one ERROR line, exit 2"
  [ "$(grep -c . "$tmp/out")" = 2 ]; ok $? "no device: nothing else"
else
  [ "$rc" = 0 ]; ok $? "a working device: exit 0 ($last)"
  grep -q "^ok    .*: remote atomics" "$tmp/out"; ok $? "atomics reported"
  grep -q "^ok    .*: type-2B memory windows ([0-9]*): each client's rkeys work on its own QP only" "$tmp/out"; ok $? "memory windows reported"
  grep -Eq "^ok    .* port [0-9]+: ACTIVE, .*GIDs: " "$tmp/out"; ok $? "port ACTIVE with its GIDs"
  grep -q "is RoCE v2 (routable" "$tmp/out" || grep -q "InfiniBand" "$tmp/out"; ok $? "GID type said"
  grep -Eq "^(ok|info|WARN) +MTU: " "$tmp/out"; ok $? "MTU against the netdev's"
  "$SRV" --check-fabric --mtu 4096 >"$tmp/out2" 2>&1; rc=$?
  if grep -q "^ok    MTU: 4096" "$tmp/out2"; then
    ok 0 "--mtu 4096: the port runs it"
  else
    [ "$rc" = 2 ] && grep -q "^ERROR --mtu 4096 is above the port's active MTU" "$tmp/out2"; ok $? "--mtu above the port's: ERROR, exit 2"
  fi
  "$SRV" --check-fabric --device no-such-dev0 >"$tmp/out3" 2>&1; rc=$?
  [ "$rc" = 2 ] && grep -q "^ERROR --device no-such-dev0: no such device" "$tmp/out3"; ok $? "--device that is not there: ERROR, exit 2"
  if [ "$(id -u)" = 0 ] && command -v setpriv >/dev/null; then
    setpriv --reuid 65534 --regid 65534 --clear-groups --inh-caps=-all \
      bash -c "ulimit -l 1024; '$SRV' --check-fabric --memory 64M" >"$tmp/out4" 2>&1; rc=$?
    [ "$rc" = 2 ] && grep -q "^ERROR memlock: the limit is 1.0 MiB, below the 72.0 MiB this server registers" "$tmp/out4"; ok $? "memlock below the regions: ERROR with the fix"
    grep "memlock" "$tmp/out4" | sed 's/^/# /'
  fi
fi
echo "1..$n"
[ "$fails" = 0 ]
