#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# install.sh - `make install` as a user of librkv meets it: install an
# up-to-date build into a temporary DESTDIR (PREFIX=/usr/local), then
# build a small program against the installed tree through pkg-config
# only (librkv.pc, its prefix moved into the DESTDIR with
# --define-variable): once with librkv.so (run with LD_LIBRARY_PATH), once
# with librkv.a (pkg-config --static).  The program includes both public
# headers and checks that rkv_client_create on an address where nothing
# listens fails with -ECONNREFUSED.  Then make uninstall leaves no file.
#   tests/integration/install.sh BUILD_DIR
# TAP output.  Skips (77) without pkg-config or a C compiler, or when the
# build has no librkv.
set -u
O=${1:-build}
cd "$(dirname "$0")/../.." || exit 2
CC=${CC:-cc}
NOBODY=tcp://127.0.0.1:1
n=0
fails=0
ok() { n=$((n + 1)); echo "ok $n - $1"; }
notok() { n=$((n + 1)); fails=$((fails + 1)); echo "not ok $n - $1"; }
# check NAME CMD...: ok when CMD succeeds
check() {
  local name=$1
  shift
  if "$@"; then ok "$name"; else notok "$name"; fi
}
# show FILE: a file's last lines as TAP comments
show() { tail -n 15 "$1" | sed 's/^/#   /'; }

for t in pkg-config "$CC" make readelf nm; do
  if ! command -v "$t" >/dev/null; then
    echo "1..0 # SKIP no $t"
    exit 77
  fi
done
if [ ! -f "$O/lib/librkv.so" ] || [ ! -x "$O/bin/rkv" ]; then
  echo "1..0 # SKIP $O has no librkv.so or rkv (make O=$O first)"
  exit 77
fi

tmp=$(mktemp -d) || exit 2
trap 'rm -rf "$tmp"' EXIT
DEST=$tmp/dest
PREFIX=/usr/local
ROOT=$DEST$PREFIX
M() { timeout -k 5 240 make --no-print-directory O="$O" DESTDIR="$DEST" PREFIX="$PREFIX" "$@"; }

# A sanitized librkv needs its sanitizer in the programs that link it,
# and make install the build's SANITIZE (for Libs.private) unless make
# test passed it down already.
san=""
syms=$(nm -D --undefined-only "$O/lib/librkv.so" 2>/dev/null)
grep -q ' __asan_' <<<"$syms" && san="address"
grep -q ' __ubsan_' <<<"$syms" && san="${san:+$san,}undefined"
grep -q ' __tsan_' <<<"$syms" && san="thread"
SANFLAGS=${san:+-fsanitize=$san}
MARGS=()
[ -n "$san" ] && [ -z "${SANITIZE:-}" ] && MARGS=("SANITIZE=$san")

# ------------------------------------------------------------ make install
uptodate=0
M -q all "${MARGS[@]}" >/dev/null 2>&1 && uptodate=1
if M install "${MARGS[@]}" >"$tmp/install.log" 2>&1; then
  ok "make install DESTDIR=... PREFIX=$PREFIX O=$O"
else
  notok "make install DESTDIR=... PREFIX=$PREFIX O=$O"
  show "$tmp/install.log"
fi
if [ "$uptodate" = 0 ]; then
  ok "make install on an up-to-date build compiles nothing # SKIP $O was not up to date"
elif grep -qE '(^| )-c [^ ]+\.(c|cu)( |$)| -o [^ ]+\.o( |$)' "$tmp/install.log"; then
  notok "make install on an up-to-date build compiles nothing"
  grep -E ' -c ' "$tmp/install.log" | head -5 | sed 's/^/#   /'
else
  ok "make install on an up-to-date build compiles nothing"
fi

missing=""
for f in bin/rkv bin/rkv-server bin/rkv-ycsb lib/librkv.so.1 lib/librkv.so \
  lib/librkv.a include/rkv/rkv.h include/rkv/rkv_ps.h lib/pkgconfig/librkv.pc \
  share/man/man1/rkv.1 share/man/man1/rkv-server.1 share/man/man1/rkv-ycsb.1 \
  lib/systemd/system/rkv-server.service; do
  [ -e "$ROOT/$f" ] || missing="$missing $f"
done
if [ -z "$missing" ]; then
  ok "the tools, librkv.so, librkv.a, the headers, librkv.pc, the man pages and the unit file are installed"
else
  notok "installed tree lacks:$missing"
fi
# each man page renders without a warning (groff -ww, else man -l)
for page in rkv rkv-server rkv-ycsb; do
  f=$ROOT/share/man/man1/$page.1
  if [ ! -f "$f" ]; then
    notok "man page $page.1 renders without warnings (not installed)"
  elif command -v groff >/dev/null; then
    w=$(groff -man -Tutf8 -ww -z "$f" 2>&1)
    check "man page $page.1 renders without warnings (groff -ww)${w:+: $w}" test -z "$w"
  elif command -v man >/dev/null; then
    w=$(MANWIDTH=80 man -l --warnings "$f" 2>&1 >/dev/null)
    check "man page $page.1 renders without warnings (man -l)${w:+: $w}" test -z "$w"
  else
    ok "man page $page.1 renders without warnings # SKIP neither groff nor man"
  fi
done
unit=$ROOT/lib/systemd/system/rkv-server.service
check "the unit file runs $PREFIX/bin/rkv-server with --listen and --secret-file" \
  grep -q "^ExecStart=$PREFIX/bin/rkv-server --listen .* --secret-file " "$unit"
[ -x "$ROOT/bin/rkv" ] && [ -L "$ROOT/lib/librkv.so" ] &&
  [ "$(readlink "$ROOT/lib/librkv.so")" = librkv.so.1 ]
check "librkv.so links to librkv.so.1, binaries are executable" test $? = 0
soname=$(readelf -d "$ROOT/lib/librkv.so.1" 2>/dev/null | sed -n 's/.*Library soname: \[\(.*\)\]/\1/p')
check "librkv.so.1 has soname librkv.so.1 (got '${soname}')" test "$soname" = librkv.so.1

# ------------------------------------------------------------- pkg-config
export PKG_CONFIG_PATH=$ROOT/lib/pkgconfig
unset PKG_CONFIG_LIBDIR PKG_CONFIG_SYSROOT_DIR
PC=(pkg-config --define-variable=prefix="$ROOT")
check "pkg-config finds librkv in the installed tree" "${PC[@]}" --exists librkv
# pkg-config's answer, its blanks squeezed (pkgconf ends it with one)
pc() { local w; read -ra w <<<"$("${PC[@]}" "$@" 2>/dev/null)"; echo "${w[*]}"; }
cflags=$(pc --cflags librkv)
libs=$(pc --libs librkv)
slibs=$(pc --static --libs librkv)
check "pkg-config --cflags points into the DESTDIR ($cflags)" \
  test "$cflags" = "-I$ROOT/include/rkv"
check "pkg-config --libs is -L\${libdir} -lrkv ($libs)" test "$libs" = "-L$ROOT/lib -lrkv"
pcver=$(pc --modversion librkv)
tool=$("$ROOT/bin/rkv" --version 2>/dev/null)
check "rkv --version names librkv.pc's version $pcver ($tool)" \
  grep -qE "^rkv $pcver \\(protocol [0-9]+, providers " <<<"$tool"

cat >"$tmp/t.c" <<'EOF'
/* a user's program: both public headers, one call that fails */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include <rkv.h>
#include <rkv_ps.h>

int main(int argc, char **argv)
{
	struct rkv_client_opts o;
	struct rkv_client *c = NULL;
	int rc;

	if (argc != 2)
		return 2;
	rkv_client_opts_init(&o);
	o.servers = argv[1];
	o.connect_timeout_ms = 5000;
	rc = rkv_client_create(&o, &c);
	printf("rkv_client_create(%s): %d (%s), ps rule %s\n", argv[1], rc,
	       rc ? strerror(-rc) : "connected", rkv_ps_rule_str(RKV_PS_SUM));
	if (!rc)
		rkv_client_destroy(c);
	return rc == -ECONNREFUSED ? 0 : 1;
}
EOF

# runs CMD...: the test program, run against a port nobody listens on
runs() {
  timeout -k 5 30 "$@" "$NOBODY" >"$tmp/run.log" 2>&1
  local rc=$?
  if [ "$rc" = 0 ]; then
    ok "it runs: rkv_client_create at $NOBODY fails with -ECONNREFUSED"
  else
    notok "it runs: rkv_client_create at $NOBODY fails with -ECONNREFUSED (exit $rc)"
    show "$tmp/run.log"
  fi
}

# --------------------------------------------------- against librkv.so
# shellcheck disable=SC2086
if $CC -std=c11 -Wall -Wextra -Werror $SANFLAGS $cflags -o "$tmp/t_dyn" "$tmp/t.c" \
  $libs >"$tmp/cc.log" 2>&1; then
  ok "a program builds with pkg-config --cflags --libs librkv"
else
  notok "a program builds with pkg-config --cflags --libs librkv"
  show "$tmp/cc.log"
fi
if [ -x "$tmp/t_dyn" ]; then
  resolved=$(LD_LIBRARY_PATH=$ROOT/lib ldd "$tmp/t_dyn" 2>/dev/null | sed -n 's/^[[:space:]]*librkv\.so\.1 => \([^ ]*\).*/\1/p')
  check "it loads the installed librkv.so.1 (${resolved:-not found})" \
    test "$resolved" = "$ROOT/lib/librkv.so.1"
  runs env LD_LIBRARY_PATH="$ROOT/lib" "$tmp/t_dyn"
else
  notok "no program to run (librkv.so)"
fi

# --------------------------------------------------- against librkv.a
# -l:librkv.a: the archive beside librkv.so, as -Bstatic would pick it
slibs_a=$(sed -E 's/(^| )-lrkv( |$)/\1-l:librkv.a\2/' <<<"$slibs")
# shellcheck disable=SC2086
if $CC -std=c11 -Wall -Wextra -Werror $SANFLAGS $cflags -o "$tmp/t_static" "$tmp/t.c" \
  $slibs_a >"$tmp/cc.log" 2>&1; then
  ok "a program builds with pkg-config --static --libs librkv and librkv.a"
else
  notok "a program builds with pkg-config --static --libs librkv and librkv.a"
  echo "#   libs: $slibs_a"
  show "$tmp/cc.log"
fi
if [ -x "$tmp/t_static" ]; then
  if readelf -d "$tmp/t_static" | grep -q 'NEEDED.*librkv'; then
    notok "the static program needs no librkv.so"
  else
    ok "the static program needs no librkv.so"
  fi
  runs "$tmp/t_static"
else
  notok "no program to run (librkv.a)"
fi

# ---------------------------------------------------------- make uninstall
if M uninstall "${MARGS[@]}" >"$tmp/uninstall.log" 2>&1; then
  left=$(find "$DEST" ! -type d | sed "s|^$DEST||")
  if [ -z "$left" ]; then
    ok "make uninstall removes every installed file"
  else
    notok "make uninstall leaves $(grep -c . <<<"$left") file(s)"
    head -10 <<<"$left" | sed 's/^/#   /'
  fi
else
  notok "make uninstall"
  show "$tmp/uninstall.log"
fi

echo "1..$n"
[ "$fails" = 0 ]
