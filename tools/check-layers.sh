#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# check-layers.sh - part of `make test`: librkv's layers call one way
# (docs/DESIGN.md §1.1).  From the built objects: a function of client/
# may call functions of its own layer or of the layers below it, never of
# one above (upward news goes through function pointers, which leave no
# symbol reference).
#   tools/check-layers.sh BUILD_DIR
# TAP output: one line per object.
set -u
O=${1:-build}
cd "$(dirname "$0")/.." || exit 2
OBJ=$O/obj/client

# layer of a client source (bottom 1 .. top 6); client/ps is above all
layer() {
  case $1 in
    engine) echo 1 ;;
    link_ctrl) echo 2 ;;
    conn) echo 3 ;;
    chunks) echo 4 ;;
    op|op_*|bigbuf|cache|dev|words|walk) echo 5 ;;
    api|client|peers|cluster|migrate|failover|scan) echo 6 ;;
    ps/*) echo 7 ;;
    *) echo 0 ;;
  esac
}

# the objects of today's sources (a build directory may hold old ones)
objs=()
for c in client/*.c client/ps/*.c; do
  o=$O/obj/${c%.c}.o
  [ -f "$o" ] || { echo "1..0 # SKIP $o is not built"; exit 0; }
  objs+=("$o")
done
declare -A DEF
for o in "${objs[@]}"; do
  name=${o#"$OBJ"/}; name=${name%.o}
  while read -r sym; do DEF[$sym]=$name; done < <(nm -g --defined-only "$o" | awk '{print $3}')
done
n=0; bad_total=0
for o in "${objs[@]}"; do
  name=${o#"$OBJ"/}; name=${name%.o}
  l=$(layer "$name")
  n=$((n + 1))
  if [ "$l" = 0 ]; then
    echo "not ok $n - $name: no layer (add it to tools/check-layers.sh)"
    bad_total=$((bad_total + 1))
    continue
  fi
  bad=""
  while read -r sym; do
    to=${DEF[$sym]:-}
    [ -n "$to" ] || continue
    tl=$(layer "$to")
    [ "$tl" -gt "$l" ] && bad="$bad $sym ($to)"
  done < <(nm -u "$o" | awk '{print $2}')
  if [ -z "$bad" ]; then
    echo "ok $n - $name (layer $l)"
  else
    echo "not ok $n - $name (layer $l) calls up:$bad"
    bad_total=$((bad_total + 1))
  fi
done
echo "1..$n"
[ "$bad_total" = 0 ]
