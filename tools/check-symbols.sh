#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# check-symbols.sh - part of `make test`: librkv.a and librkv.so export
# exactly the API listed in client/librkv.map, no internal symbol; so does
# lib/dist/librkv.a, the self-contained librkv.a that make install installs.
#   tools/check-symbols.sh [BUILD_DIR]      (default build)
#   tools/check-symbols.sh --list MAP       the global: names of a version
#                                           script, one a line (the
#                                           Makefile's librkv.a rule uses
#                                           it for objcopy)
# A program linking either library can call only what the map lists: the
# shared library hides the rest with the version script, the static one
# is a single relocatable object whose other globals objcopy made local
# (the $(CLIENT_LIB) rule).  Fails on any defined global of either library
# that the map does not list, and on a name of the map that neither
# defines (an API that went away).  TAP output, one line per check.
set -u
cd "$(dirname "$0")/.." || exit 2

# the names in the global: sections (explicit names only: a pattern such
# as rkv_* would let internals through, so it counts for nothing here)
map_names() {
  sed -e 's|/\*.*\*/||g' "$1" | awk '
    /global:/ { g = 1; sub(/.*global:/, "") }
    /local:/  { g = 0 }
    /}/       { g = 0 }
    g { n = split($0, w, /[;[:space:]]+/)
        for (i = 1; i <= n; i++) if (w[i] ~ /^[A-Za-z_][A-Za-z0-9_]*$/) print w[i] }'
}

if [ "${1:-}" = --list ]; then
  [ -f "${2:-}" ] || { echo "check-symbols: --list needs a map file" >&2; exit 2; }
  map_names "$2"
  exit 0
fi

O=${1:-build}
MAP=client/librkv.map
n=0
fails=0
ok() { n=$((n + 1)); echo "ok $n - $1"; }
notok() { n=$((n + 1)); fails=$((fails + 1)); echo "not ok $n - $1"; }

if [ ! -f "$MAP" ]; then
  echo "Bail out! no $MAP"
  exit 1
fi
api=$(map_names "$MAP" | sort -u)
if [ -z "$api" ]; then
  echo "Bail out! $MAP lists no global names"
  exit 1
fi

# defined global symbols of a library, one name a line ("name@@VER" of a
# shared library without the version; the version node itself is an
# absolute symbol, A, and not an export)
exports() {
  case $1 in
    *.so) nm -DP --defined-only "$1" ;;
    *) nm -gP --defined-only "$1" ;;
  esac | awk 'NF >= 2 && $2 ~ /^[A-Za-z]$/ && $2 != "A" { sub(/@.*/, "", $1); print $1 }' |
    sort -u
}

for lib in "$O/lib/librkv.a" "$O/lib/librkv.so" "$O/lib/dist/librkv.a"; do
  name=${lib#"$O/lib/"}
  if [ ! -f "$lib" ]; then
    notok "$name: no such file (build it first: make O=$O)"
    continue
  fi
  got=$(exports "$lib")
  extra=$(comm -23 <(echo "$got") <(echo "$api"))
  missing=$(comm -13 <(echo "$got") <(echo "$api"))
  if [ -z "$extra" ]; then
    ok "$name exports only names of $MAP ($(echo "$got" | grep -c .) symbols)"
  else
    notok "$name exports $(echo "$extra" | grep -c .) symbol(s) $MAP does not list"
    echo "$extra" | head -20 | sed 's/^/#   /'
  fi
  if [ -z "$missing" ]; then
    ok "$name defines every name of $MAP"
  else
    notok "$name lacks $(echo "$missing" | grep -c .) name(s) of $MAP"
    echo "$missing" | head -20 | sed 's/^/#   /'
  fi
done
echo "1..$n"
if [ "$fails" != 0 ]; then
  echo "check-symbols: librkv's exports differ from $MAP"
  exit 1
fi
exit 0
