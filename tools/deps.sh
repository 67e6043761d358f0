#!/usr/bin/env bash
# deps.sh - install the Debian packages rkv needs when they are missing.
# Idempotent and quick when everything is there (one dpkg-query).  Needs root
# (or sudo) only when something is missing.
set -euo pipefail

PKGS="make gcc clang pkg-config rdma-core libibverbs-dev librdmacm-dev \
ibverbs-providers ibverbs-utils rdmacm-utils perftest libxxhash-dev \
libjemalloc-dev libssl-dev libfabric-dev libfabric-bin valgrind iproute2 \
redis-server memcached libhiredis-dev libmemcached-dev gnuplot-nox libclang-rt-14-dev \
qemu-system-x86 busybox-static kmod cpio etcd-server etcd-client \
libcurl4-openssl-dev libcjson-dev libedit-dev python3-dev python3-pytest \
python3-numpy python3-torch python3-sklearn ${RKV_EXTRA_PKGS:-}"

missing=""
for p in $PKGS; do
  st=$(dpkg-query -W -f='${db:Status-Status}' "$p" 2>/dev/null || true)
  [ "$st" = installed ] || missing="$missing $p"
done
[ -z "$missing" ] && exit 0

echo "deps: installing:$missing" >&2
SUDO=""
[ "$(id -u)" = 0 ] || SUDO="sudo"
export DEBIAN_FRONTEND=noninteractive
apt_install() {
  # shellcheck disable=SC2086
  $SUDO apt-get -o DPkg::Lock::Timeout=600 -q install -y --no-install-recommends $missing >/dev/null
}
if ! apt_install; then
  $SUDO apt-get -o DPkg::Lock::Timeout=600 -q update >/dev/null
  apt_install || { echo "deps: apt-get install failed for:$missing" >&2; exit 1; }
fi
