#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# vm-run.sh - run one command inside a throw-away Soft-RoCE guest, so that
# rkv's verbs provider can be tested on a host whose kernel has no RDMA.
#
#   tests/softroce/vm-run.sh [--prepare] [--] CMD [ARGS...]
#
#   --prepare   install what is missing and build the kernel cache; with no
#               CMD, stop there.
#
# How: Debian's linux-image kernel (it ships rdma_rxe.ko) boots under QEMU
# TCG (-cpu Nehalem, 2 vCPUs).  The guest's root is the host's root, shared
# read-only over virtio-9p under a tmpfs overlay, so binaries built on the
# host run unchanged (same libibverbs, librdmacm, rxe provider).  $PWD is
# shared read-write at the same path.  rxe0 sits on a guest-only dummy0 with
# 10.77.0.1/24, because rdma_cm refuses 127.0.0.0/8; the guest has no NIC.
#
# CMD runs in $PWD, as root, stdin /dev/null, stdout+stderr merged on our
# stdout, with SOFTROCE_DEV, SOFTROCE_PORT, SOFTROCE_IP, SOFTROCE_GID_INDEX
# and RKV_VERBS_IP (= SOFTROCE_IP) set.  Our exit status is CMD's, except:
#   124  CMD or the guest ran past its time limit
#   125  setup failed (packages, kernel, boot, rxe); console tail printed
#
# Knobs (environment):
#   SOFTROCE_TIMEOUT=1500       seconds CMD may run in the guest
#   SOFTROCE_BOOT_TIMEOUT=240   seconds for boot + rxe setup
#   SOFTROCE_MEM=2048           guest RAM, MiB
#   SOFTROCE_SMP=2              vCPUs (1 makes busy polling crawl)
#   SOFTROCE_CPU=Nehalem        QEMU CPU model ("max" slows rxe's ICRC 2x)
#   SOFTROCE_ADDR=10.77.0.1/24  dummy0 address inside the guest
#   SOFTROCE_ENV="A B"          host variables to pass to CMD (CI always is)
#   SOFTROCE_CACHE=/var/cache/rkv-softroce   kernel + initramfs cache
#   SOFTROCE_KERNEL_PKG=        e.g. linux-image-6.1.0-57-amd64 (default:
#                               the newest cached, else what
#                               linux-image-amd64 depends on)
#   SOFTROCE_NO_INSTALL=1       never run apt-get (fail if anything lacks)
#   SOFTROCE_VERBOSE=1          timings and the console log on stderr
#
# Only the QEMU this script starts is ever killed, by its PID.
set -euo pipefail

ME=vm-run.sh
CACHE=${SOFTROCE_CACHE:-/var/cache/rkv-softroce}
CMD_TMO=${SOFTROCE_TIMEOUT:-1500}
BOOT_TMO=${SOFTROCE_BOOT_TIMEOUT:-240}
MEM=${SOFTROCE_MEM:-2048}
SMP=${SOFTROCE_SMP:-2}
CPU=${SOFTROCE_CPU:-Nehalem}
ADDR=${SOFTROCE_ADDR:-10.77.0.1/24}
PASS_ENV=${SOFTROCE_ENV:-}
KPKG=${SOFTROCE_KERNEL_PKG:-}
NO_INSTALL=${SOFTROCE_NO_INSTALL:-0}
VERBOSE=${SOFTROCE_VERBOSE:-0}

# Host packages the runner itself needs; the guest uses the host's files,
# so the rxe user-space provider and iproute2's `rdma` come from here too.
NEED_PKGS="qemu-system-x86 busybox-static kmod cpio iproute2 util-linux \
ibverbs-providers ibverbs-utils libibverbs1 librdmacm1"
# Modules the initramfs loads to reach the host root (deps resolved below).
INITRD_MODS="virtio_pci 9pnet_virtio 9p overlay"

msg() { echo "$ME: $*" >&2; }
vmsg() { if [ "$VERBOSE" = 1 ]; then msg "$@"; fi; }
fatal() { msg "ERROR: $*"; exit 125; }
clock() { date +%s.%N; }
elapsed() { awk -v a="$1" -v b="$(clock)" 'BEGIN { printf "%.1f", b - a }'; }

PREPARE=0
while [ $# -gt 0 ]; do
	case "$1" in
	--prepare) PREPARE=1; shift ;;
	--) shift; break ;;
	-h | --help) sed -n '3,/^set -euo/p' "$0" | sed -e '$d' -e 's/^# \{0,1\}//'; exit 0 ;;
	*) break ;;
	esac
done
if [ "$PREPARE" = 0 ] && [ $# = 0 ]; then
	echo "usage: $ME [--prepare] [--] CMD [ARGS...]" >&2
	exit 2
fi
[ "$(id -u)" = 0 ] || fatal "needs root (apt-get, $CACHE, 9p shares of /)"
T0=$(clock)

# ------------------------------------------------------------ packages
apt_q() {
	DEBIAN_FRONTEND=noninteractive timeout 900 \
		apt-get -o DPkg::Lock::Timeout=600 -q "$@"
}

install_missing() {
	local p missing=""

	for p in $NEED_PKGS; do
		[ "$(dpkg-query -W -f='${db:Status-Status}' "$p" 2>/dev/null)" = installed ] ||
			missing="$missing $p"
	done
	[ -z "$missing" ] && return 0
	[ "$NO_INSTALL" = 1 ] && fatal "missing packages:$missing (SOFTROCE_NO_INSTALL=1)"
	msg "installing:$missing"
	# shellcheck disable=SC2086
	apt_q install -y --no-install-recommends $missing >/dev/null 2>&1 || {
		apt_q update >/dev/null 2>&1 || msg "apt-get update failed"
		# shellcheck disable=SC2086
		apt_q install -y --no-install-recommends $missing >/dev/null ||
			fatal "apt-get install$missing failed"
	}
}

# --------------------------------------------------------- kernel cache
# The initramfs only has to reach the host root: load the 9p/overlay
# modules, mount / read-only under a tmpfs overlay, mount the per-run
# control share, and switch to the guest-init script found there.
INIT_SCRIPT='#!/bin/busybox sh
/bin/busybox --install -s /bin
export PATH=/bin
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev
die() { echo "rkv-initramfs: $*"; sync; poweroff -f; echo o >/proc/sysrq-trigger; sleep 30; }
for m in $(cat /mods/order); do insmod /mods/$m || die "insmod $m"; done
P9=trans=virtio,version=9p2000.L,msize=512000
mkdir -p /ro /rw /root
mount -t 9p -o $P9,ro,cache=loose hostroot /ro || die "9p host root"
mount -t tmpfs -o mode=755 tmpfs /rw || die "tmpfs overlay"
mkdir -p /rw/upper /rw/work
mount -t overlay -o lowerdir=/ro,upperdir=/rw/upper,workdir=/rw/work overlay /root ||
	die "overlay"
mount -t tmpfs -o mode=755 tmpfs /root/run || die "tmpfs /run"
mkdir -p /root/run/ctl
mount -t 9p -o $P9,cache=none ctl /root/run/ctl || die "9p control share"
[ -x /root/run/ctl/init ] || die "no /run/ctl/init"
for d in proc sys dev; do mount --move /$d /root/$d; done
exec switch_root /root /run/ctl/init
'

initrd_tag() { printf '%s|%s' "$INIT_SCRIPT" "$INITRD_MODS" | sha256sum | cut -c1-16; }

kernel_pkg_from_apt() {
	{ apt-cache depends linux-image-amd64 2>/dev/null || true; } |
		awk '$1 == "Depends:" && $2 ~ /^linux-image-[0-9]/ { p = $2 } END { print p }'
}

# Sets KROOT (extracted package), KVER, INITRD.
prepare_kernel() {
	local pkg=$KPKG dir d kver tag w f

	mkdir -p "$CACHE"
	exec 8>"$CACHE/lock"
	flock -w 900 8 || fatal "cannot lock $CACHE/lock"
	if [ -z "$pkg" ]; then
		for d in $(ls -1d "$CACHE"/linux-image-*/ 2>/dev/null | sort -V); do
			[ -f "$d/complete" ] && pkg=$(basename "$d")
		done
	fi
	if [ -z "$pkg" ]; then
		pkg=$(kernel_pkg_from_apt)
		if [ -z "$pkg" ] && [ "$NO_INSTALL" != 1 ]; then
			apt_q update >/dev/null 2>&1 || true
			pkg=$(kernel_pkg_from_apt)
		fi
		[ -n "$pkg" ] || fatal "cannot tell which package linux-image-amd64 needs"
	fi
	dir=$CACHE/$pkg
	if [ ! -f "$dir/complete" ]; then
		[ "$NO_INSTALL" = 1 ] && fatal "$pkg is not cached (SOFTROCE_NO_INSTALL=1)"
		msg "downloading $pkg into $dir"
		rm -rf "$dir"
		mkdir -p "$dir/deb"
		chown _apt "$dir/deb" 2>/dev/null || true
		(cd "$dir/deb" && apt_q download "$pkg" >/dev/null 2>&1) || {
			apt_q update >/dev/null 2>&1 || true
			(cd "$dir/deb" && apt_q download "$pkg" >/dev/null) ||
				fatal "apt-get download $pkg failed"
		}
		dpkg-deb -x "$dir"/deb/*.deb "$dir/root" || fatal "dpkg-deb -x $pkg failed"
		rm -rf "$dir/deb"
		kver=$(ls "$dir/root/lib/modules" 2>/dev/null | head -n 1)
		[ -n "$kver" ] && [ -f "$dir/root/boot/vmlinuz-$kver" ] ||
			fatal "$pkg holds no kernel"
		[ -n "$(find "$dir/root/lib/modules/$kver" -name 'rdma_rxe.ko*' | head -n 1)" ] ||
			fatal "$pkg has no rdma_rxe module"
		depmod -b "$dir/root" "$kver" || fatal "depmod $kver failed"
		echo "$kver" >"$dir/kver"
		touch "$dir/complete"
	fi
	kver=$(cat "$dir/kver")
	tag=$(initrd_tag)
	if [ ! -f "$dir/initrd-$tag.cpio" ]; then
		msg "building the initramfs for $kver"
		w=$(mktemp -d)
		mkdir -p "$w/bin" "$w/mods" "$w/proc" "$w/sys" "$w/dev"
		case "$(ldd /bin/busybox 2>&1 || true)" in
		*"not a dynamic"* | *statically*) ;;
		*) rm -rf "$w"; fatal "/bin/busybox is not static (install busybox-static)" ;;
		esac
		cp /bin/busybox "$w/bin/busybox"
		printf '%s' "$INIT_SCRIPT" >"$w/init"
		chmod 755 "$w/init"
		# modprobe prints "insmod PATH" for each dependency, in load order
		# shellcheck disable=SC2086
		for f in $INITRD_MODS; do
			modprobe -d "$dir/root" -S "$kver" --show-depends "$f" ||
				{ rm -rf "$w"; fatal "no module $f in $kver"; }
		done | awk '$1 == "insmod" && !seen[$2]++ { print $2 }' >"$w/list"
		[ -s "$w/list" ] || { rm -rf "$w"; fatal "module dependencies of $kver not found"; }
		while read -r f; do
			cp "$f" "$w/mods/"
			basename "$f"
		done <"$w/list" >"$w/mods/order"
		rm -f "$w/list"
		(cd "$w" && find . | cpio -o -H newc --quiet) >"$dir/initrd-$tag.tmp" ||
			{ rm -rf "$w"; fatal "cpio failed"; }
		mv "$dir/initrd-$tag.tmp" "$dir/initrd-$tag.cpio"
		rm -rf "$w"
	fi
	flock -u 8
	exec 8>&-
	KROOT=$dir/root
	KVER=$kver
	INITRD=$dir/initrd-$tag.cpio
}

install_missing
prepare_kernel
vmsg "kernel $KVER ready after $(elapsed "$T0")s"
if [ $# = 0 ]; then
	msg "prepared: kernel $KVER in $CACHE"
	exit 0
fi

# -------------------------------------------------------------- the run
CTL=$(mktemp -d /tmp/rkv-softroce.XXXXXX)
QEMU_PID=""
on_exit() {
	local rc=$? i

	if [ -n "$QEMU_PID" ] && kill -0 "$QEMU_PID" 2>/dev/null; then
		kill -TERM "$QEMU_PID" 2>/dev/null || true
		for i in 1 2 3 4 5 6 7 8 9 10; do
			kill -0 "$QEMU_PID" 2>/dev/null || break
			sleep 0.5
		done
		kill -KILL "$QEMU_PID" 2>/dev/null || true
		wait "$QEMU_PID" 2>/dev/null || true
	fi
	rm -rf "$CTL"
	exit "$rc"
}
trap on_exit EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

WORKDIR=$(pwd -P)
[ "$WORKDIR" = / ] && fatal "run from a project directory, not /"

# Everything the guest needs to know, as shell assignments.
{
	printf 'KVER=%q\nWORKDIR=%q\nADDR=%q\nCMD_TMO=%q\n' \
		"$KVER" "$WORKDIR" "$ADDR" "$CMD_TMO"
} >"$CTL/config"
{
	for v in CI $PASS_ENV; do
		if [ -n "${!v+set}" ]; then printf 'export %s=%q\n' "$v" "${!v}"; fi
	done
	printf 'exec'
	printf ' %q' "$@"
	printf '\n'
} >"$CTL/cmd"

# PID 1 in the guest.  Its own messages go to ttyS0 (console.log on the
# host); the command writes to ttyS1, which is QEMU's stdio (our stdout).
cat >"$CTL/init" <<'EOF'
#!/bin/bash
export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
export HOME=/root TERM=dumb LC_ALL=C.UTF-8
exec </dev/null >/dev/ttyS0 2>&1
. /run/ctl/config
note() { echo "[guest $(cut -d' ' -f1 /proc/uptime)] $*"; }
halt() { sync; busybox poweroff -f; echo o >/proc/sysrq-trigger; sleep 30; }
setup_failed() { note "setup failed: $*"; echo "$*" >/run/ctl/setup-failed; halt; }
note "init running"
mount -t tmpfs -o mode=1777 tmpfs /tmp
mkdir -p /dev/shm /dev/pts
mount -t tmpfs -o mode=1777 tmpfs /dev/shm
mount -t devpts -o mode=620,ptmxmode=666 devpts /dev/pts
ln -sf /proc/self/fd /dev/fd
mkdir -p "/usr/lib/modules/$KVER"
P9=trans=virtio,version=9p2000.L,msize=512000
mount -t 9p -o $P9,ro,cache=loose kmods "/usr/lib/modules/$KVER" || setup_failed "9p modules"
mkdir -p "$WORKDIR"
mount -t 9p -o $P9,cache=mmap work "$WORKDIR" || setup_failed "9p $WORKDIR"
hostname rkv-softroce 2>/dev/null
ip link set lo up
for m in rdma_rxe rdma_ucm ib_uverbs dummy; do
	modprobe "$m" || setup_failed "modprobe $m"
done
ip link add dummy0 type dummy || setup_failed "ip link add dummy0"
ip addr add "$ADDR" dev dummy0 || setup_failed "ip addr add $ADDR"
ip link set dummy0 up || setup_failed "dummy0 up"
rdma link add rxe0 type rxe netdev dummy0 || setup_failed "rdma link add rxe0"
for i in $(seq 100); do
	rdma link show rxe0/1 2>/dev/null | grep -q 'state ACTIVE' && break
	sleep 0.1
done
rdma link show rxe0/1 | grep -q 'state ACTIVE' || setup_failed "rxe0 port 1 not ACTIVE"
IP=${ADDR%/*}
# RoCE v2 GID of the IPv4 address: ::ffff:a.b.c.d with type "RoCE v2"
want=$(printf '0000:0000:0000:0000:0000:ffff:%02x%02x:%02x%02x' ${IP//./ })
GIDX=""
for i in $(seq 50); do
	for g in /sys/class/infiniband/rxe0/ports/1/gids/*; do
		n=${g##*/}
		[ "$(cat "$g" 2>/dev/null)" = "$want" ] || continue
		t=$(cat "/sys/class/infiniband/rxe0/ports/1/gid_attrs/types/$n" 2>/dev/null)
		case "$t" in *v2*) GIDX=$n; break ;; esac
	done
	[ -n "$GIDX" ] && break
	sleep 0.1
done
[ -n "$GIDX" ] || setup_failed "no RoCE v2 GID for $IP"
export SOFTROCE_DEV=rxe0 SOFTROCE_PORT=1 SOFTROCE_IP=$IP SOFTROCE_GID_INDEX=$GIDX
export RKV_VERBS_IP=$IP
note "rxe0 ACTIVE, gid[$GIDX] for $IP"
cut -d' ' -f1 /proc/uptime >/run/ctl/up.tmp && mv /run/ctl/up.tmp /run/ctl/up
stty -F /dev/ttyS1 raw -echo 2>/dev/null
cd "$WORKDIR" || setup_failed "cd $WORKDIR"
ulimit -l unlimited
ulimit -c 0
timeout -k 10 "$CMD_TMO" /bin/bash /run/ctl/cmd </dev/null >/dev/ttyS1 2>&1
rc=$?
note "command exit status $rc"
echo "$rc" >/run/ctl/rc.tmp && mv /run/ctl/rc.tmp /run/ctl/rc
halt
EOF
chmod 755 "$CTL/init"

console_tail() {
	msg "---- guest console (last 40 lines) ----"
	tail -n 40 "$CTL/console.log" >&2 2>/dev/null || true
	msg "----"
}

T_BOOT=$(clock)
# The outer timeout is a backstop: the guest stops itself in every case.
# shellcheck disable=SC2054 # commas are QEMU option syntax
timeout -k 10 $((BOOT_TMO + CMD_TMO + 60)) qemu-system-x86_64 \
	-accel tcg,thread=multi,tb-size=256 -cpu "$CPU" -smp "$SMP" -m "$MEM" \
	-nodefaults -no-user-config -display none -no-reboot \
	-kernel "$KROOT/boot/vmlinuz-$KVER" -initrd "$INITRD" \
	-append "console=ttyS0 rdinit=/init panic=-1 oops=panic quiet loglevel=4 mitigations=off nowatchdog audit=0 tsc=reliable" \
	-chardev "file,id=con,path=$CTL/console.log" -serial chardev:con \
	-chardev stdio,id=out,signal=off -serial chardev:out \
	-virtfs local,path=/,mount_tag=hostroot,security_model=none,readonly=on,multidevs=remap \
	-virtfs "local,path=$KROOT/lib/modules/$KVER,mount_tag=kmods,security_model=none,readonly=on" \
	-virtfs "local,path=$CTL,mount_tag=ctl,security_model=none" \
	-virtfs "local,path=$WORKDIR,mount_tag=work,security_model=none,multidevs=remap" \
	</dev/null &
QEMU_PID=$!

up=0
while kill -0 "$QEMU_PID" 2>/dev/null; do
	if [ "$up" = 0 ]; then
		if [ -f "$CTL/up" ]; then
			up=1
			T_CMD=$(clock)
			vmsg "rxe0 ready $(elapsed "$T_BOOT")s after QEMU start (guest uptime $(cat "$CTL/up")s)"
		elif [ -f "$CTL/setup-failed" ]; then
			break
		elif [ "$(elapsed "$T_BOOT" | cut -d. -f1)" -ge "$BOOT_TMO" ]; then
			msg "guest not ready after ${BOOT_TMO}s"
			console_tail
			exit 125
		fi
	fi
	sleep 0.2
done
# After a setup failure the guest powers off by itself; allow it a moment.
for _ in $(seq 50); do
	kill -0 "$QEMU_PID" 2>/dev/null || break
	sleep 0.1
done
kill -TERM "$QEMU_PID" 2>/dev/null || true
qrc=0
wait "$QEMU_PID" || qrc=$?
QEMU_PID=""

if [ -f "$CTL/rc" ]; then
	rc=$(cat "$CTL/rc")
	vmsg "command status $rc after $(elapsed "${T_CMD:-$T_BOOT}")s; $(elapsed "$T0")s in all"
	if [ "$VERBOSE" = 1 ]; then console_tail; fi
	exit "$rc"
fi
if [ -f "$CTL/setup-failed" ]; then
	msg "guest setup failed: $(cat "$CTL/setup-failed")"
	console_tail
	exit 125
fi
if [ "$qrc" = 124 ] || [ "$qrc" = 137 ]; then
	msg "the guest ran past its time limit (${CMD_TMO}s + boot)"
	console_tail
	exit 124
fi
msg "the guest stopped without a command status (QEMU exit status $qrc)"
console_tail
exit 125
