#!/usr/bin/env bash
# gpu-deps.sh - fetch the Debian 12 packages that `make check-gpu` needs
# to build on a machine that has a C compiler and the CUDA toolkit but
# neither rdma-core, OpenSSL, jemalloc nor xxHash headers, and no package
# mirror (a lent GPU machine).  Run it where apt-get reaches Debian's
# archive; it writes .gpudeps/*.deb (git-ignored).  Carry .gpudeps to the
# GPU machine: tools/check-gpu.sh unpacks it into BUILD_DIR/sysroot when
# the system lacks what the build needs (and only then).
#   tools/gpu-deps.sh
set -eu
cd "$(dirname "$0")/.."
PKGS="libibverbs-dev libibverbs1 librdmacm-dev librdmacm1 libnl-3-200
  libnl-route-3-200 libssl-dev libssl3 libjemalloc-dev libjemalloc2
  libxxhash-dev"
if ! command -v apt-get >/dev/null; then
  echo "gpu-deps: no apt-get here; run this on Debian 12" >&2
  exit 1
fi
rm -rf .gpudeps.new
mkdir -p .gpudeps.new
# shellcheck disable=SC2086
if ! (cd .gpudeps.new && apt-get download $PKGS >/dev/null 2>&1); then
  apt-get update -qq >/dev/null 2>&1 || true
  # shellcheck disable=SC2086
  if ! (cd .gpudeps.new && apt-get download $PKGS >../.gpudeps.log 2>&1); then
    echo "gpu-deps: apt-get download failed: $(tail -1 .gpudeps.log)" >&2
    rm -rf .gpudeps.new .gpudeps.log
    exit 1
  fi
fi
rm -rf .gpudeps .gpudeps.log
mv .gpudeps.new .gpudeps
echo "gpu-deps: $(ls .gpudeps | wc -l) packages, $(du -sh .gpudeps | cut -f1)," \
  "in .gpudeps (carry it with the tree)"
