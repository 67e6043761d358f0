#!/usr/bin/env bash
# check-gpu.sh - `make check-gpu`: build (WITH_CUDA=1) and run every GPU
# test and the GPU benchmark, each step under its own timeout, in a few
# minutes on one GPU (an H200: 16 cores).  Needs only the repository and a
# CUDA toolkit (CUDA_HOME, default /usr/local/cuda); fetches nothing.
#   tools/check-gpu.sh [BUILD_DIR]      (default build/gpu-check)
# On a machine without rdma-core, OpenSSL, jemalloc or xxHash headers (and
# no package mirror), carry .gpudeps from tools/gpu-deps.sh.
# Steps: build; device check; GPU xxh3 == host xxh3; GPU regions on tcp
# and shm (transport: reads, writes, atomics, refusals, torture); the KV
# store with --data-memory gpu over tcp and shm (get, put, rmw,
# multi-process torture, bad device index); client-side GPU buffers
# (rkv_*_dev and rkv_ps_*_dev against host- and GPU-memory servers on tcp
# and shm, torture, bad input); the host-side refusal tests; the bandwidth
# benchmarks (transport READ/WRITE and PS pull/push with device buffers,
# 1-256 MiB beside cudaMemcpy).
# Ends with "N passed, N failed[, N skipped]" like tests/run.sh; exit 0
# only when none failed.
set -u
cd "$(dirname "$0")/.." || exit 2
O=${1:-build/gpu-check}
CUDA_HOME=${CUDA_HOME:-/usr/local/cuda}
. tests/lib/tap.sh
JOBS=$(nproc 2>/dev/null || echo 4)
t0=$(date +%s)
step() { echo; echo "== $* ($(( $(date +%s) - t0 )) s)"; }

step "build into $O (WITH_CUDA=1, -j$JOBS)"
if [ ! -x "$CUDA_HOME/bin/nvcc" ]; then
  echo "no CUDA toolkit at $CUDA_HOME (set CUDA_HOME)"
  echo "0 passed, 1 failed"; exit 1
fi
# The build's libraries: the system's, or else the Debian packages of
# tools/gpu-deps.sh (carried in .gpudeps) unpacked into $O/sysroot, found
# at run time through the binaries' rpath.  Warnings do not fail this
# build (WERROR=): another distribution's compiler may know new ones.
deps_probe() {
  printf '%s\n' '#include <infiniband/verbs.h>' '#include <rdma/rdma_cma.h>' \
    '#include <openssl/hmac.h>' '#include <xxhash.h>' \
    'int main(void) { return 0; }' |
    ${CC:-cc} -x c - -o /dev/null "$@" -lrdmacm -libverbs -lcrypto -ljemalloc 2>&1
}
mkflags=()
# (RKV_GPU_SYSROOT=1: use .gpudeps even when the system has it all)
if [ -n "${RKV_GPU_SYSROOT:-}" ] || ! why=$(deps_probe); then
  case $O in /*) sys=$O/sysroot ;; *) sys=$PWD/$O/sysroot ;; esac
  libdir=$sys/usr/lib/x86_64-linux-gnu
  if ! ls .gpudeps/*.deb >/dev/null 2>&1; then
    echo "missing build dependencies: $(echo "$why" | grep -m1 -iE 'error|cannot')"
    echo "(run tools/gpu-deps.sh where Debian's archive is reachable, and carry .gpudeps)"
    echo "0 passed, 1 failed"; exit 1
  fi
  mkdir -p "$sys"
  for d in .gpudeps/*.deb; do
    if command -v dpkg-deb >/dev/null; then
      dpkg-deb -x "$d" "$sys"
    else
      m=$(ar t "$d" | grep '^data\.tar')
      case $m in
        *.xz) unz="xz -dc" ;; *.zst) unz="zstd -dc" ;; *.gz) unz="gzip -dc" ;;
        *) unz=cat ;;
      esac
      ar p "$d" "$m" | $unz | tar -x -C "$sys" -f -
    fi
  done
  inc="-isystem $sys/usr/include -isystem $sys/usr/include/x86_64-linux-gnu"
  # DT_RPATH (not RUNPATH) also serves the libraries' own needs (libnl)
  lnk="-L$libdir -Wl,--disable-new-dtags"
  for l in "$libdir" "$sys/lib/x86_64-linux-gnu"; do
    lnk="$lnk -Wl,-rpath-link,$l -Wl,-rpath,$l"
  done
  export LD_LIBRARY_PATH=$libdir:$sys/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
  # shellcheck disable=SC2086
  if ! why=$(deps_probe $inc $lnk); then
    echo "build dependencies from .gpudeps do not work here:"
    echo "$why" | head -5
    echo "0 passed, 1 failed"; exit 1
  fi
  echo "build dependencies: .gpudeps unpacked into $sys"
  mkflags=(CFLAGS="-O2 -g $inc" LDFLAGS="$lnk")
fi
log=$(mktemp)
if ! timeout 900 make --no-print-directory O="$O" WITH_CUDA=1 CUDA_HOME="$CUDA_HOME" \
     WERROR= "${mkflags[@]}" \
     -j"$JOBS" "$O/bin/rkv-server" "$O/tests/test_mem" "$O/tests/gpu_transport" \
     "$O/tests/gpu_kv" "$O/tests/gpu_xxh3" "$O/tests/gpu_client" \
     "$O/tests/gpu_client_nodev" >"$log" 2>&1; then
  tail -40 "$log"; rm -f "$log"
  echo "build failed"; echo "0 passed, 1 failed"; exit 1
fi
rm -f "$log"

step "device"
if command -v nvidia-smi >/dev/null 2>&1; then
  timeout 30 nvidia-smi --query-gpu=index,name,driver_version,memory.total,pci.bus_id --format=csv,noheader || true
else
  echo "nvidia-smi not found"
fi

step "xxh3 on the GPU == libxxhash on the host"
tap_run gpu_xxh3 120 "$O/tests/gpu_xxh3"
for p in tcp shm; do
  step "GPU regions on the $p provider (shm: CUDA IPC)"
  tap_run gpu_transport-$p 300 "$O/tests/gpu_transport" --provider $p
done
for p in tcp shm; do
  step "KV store, rkv-server --data-memory gpu, $p"
  tap_run gpu_kv-$p 300 "$O/tests/gpu_kv" --provider $p
done
for p in tcp shm; do
  step "client GPU buffers (get/put/rmw/PS with device buffers), $p"
  tap_run gpu_client-$p 300 "$O/tests/gpu_client" --provider $p
done
step "client device calls without a usable GPU (skips on a GPU machine)"
tap_run gpu_client_nodev 120 "$O/tests/gpu_client_nodev"
step "memory backend (host path and refusals)"
tap_run test_mem 120 "$O/tests/test_mem"
step "bandwidth: READ/WRITE 1-256 MiB beside cudaMemcpy"
blog=$(mktemp)
# (no pipes: tap_run must run in this shell to count)
tap_run gpu_bench-shm 300 "$O/tests/gpu_transport" --provider shm --bench -t t_bench >"$blog"
tap_run gpu_bench-tcp 300 "$O/tests/gpu_transport" --provider tcp --bench -t t_bench >>"$blog"
step "bandwidth: PS pull/push with device buffers, 1-256 MiB, beside cudaMemcpy"
tap_run gpu_client_bench-shm 300 "$O/tests/gpu_client" --provider shm --bench -t t_bench >>"$blog"
tap_run gpu_client_bench-tcp 300 "$O/tests/gpu_client" --provider tcp --bench -t t_bench >>"$blog"
cat "$blog"
grep -h "GOAL" "$blog" | sed 's/^ *\[[^]]*\] //'
rm -f "$blog"

echo
echo "check-gpu took $(( $(date +%s) - t0 )) s"
tap_summary
