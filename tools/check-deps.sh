#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# check-deps.sh - `make check-deps` (and part of `make test`): every
# #include in the tree follows the dependency graph written in the
# Makefile (the DEPS_DIR and IDIRS_DIR lines).
#   tools/check-deps.sh
# Each #include "..." is resolved as the compiler would (the including
# file's folder, then the -I folders its directory gets, then any folder
# of the tree, to name what it hits); an #include <...> that resolves to
# a file of the tree counts too.  An include of a directory that is not
# the file's own or in its DEPS_ line, of a header outside the tree, or a
# quoted include that resolves nowhere, fails with file:line and the edge.
# TAP output: one line per directory of the graph.
set -u
cd "$(dirname "$0")/.." || exit 2

declare -A DEPS IDIRS
while IFS= read -r line; do
  if [[ $line =~ ^(DEPS|IDIRS)_([a-z/]+)[[:space:]]*:=[[:space:]]*(.*)$ ]]; then
    read -ra words <<<"${BASH_REMATCH[3]%%#*}"
    if [ "${BASH_REMATCH[1]}" = DEPS ]; then
      DEPS[${BASH_REMATCH[2]}]=${words[*]}
    else
      IDIRS[${BASH_REMATCH[2]}]=${words[*]}
    fi
  fi
done <Makefile
if [ "${#DEPS[@]}" = 0 ]; then
  echo "Bail out! no DEPS_ lines in the Makefile"
  exit 1
fi
# the graph's directories, in the Makefile's order
DIRS=$(sed -n 's/^DEPS_\([a-z/]*\)[[:space:]]*:=.*/\1/p' Makefile)

idirs() { echo "${IDIRS[$1]:-$1}"; }

# every -I folder of the tree, to name what a forbidden include hits
ALL_IDIRS=""
for d in $DIRS; do ALL_IDIRS="$ALL_IDIRS $(idirs "$d")"; done

# resolve NAME (quoted: QUOTE=1) from FILE of directory DIR: prints the
# tree-relative path, or nothing
resolve() {
  local file=$1 dir=$2 name=$3 quote=$4 cand d dep
  local -a try=()
  [ "$quote" = 1 ] && try+=("$(dirname "$file")/$name")
  for d in $(idirs "$dir"); do try+=("$d/$name"); done
  for dep in ${DEPS[$dir]}; do
    case $dep in
      *.h) [ "$(basename "$dep")" = "$(basename "$name")" ] && try+=("$dep") ;;
      *) for d in $(idirs "$dep"); do try+=("$d/$name"); done ;;
    esac
  done
  for d in $ALL_IDIRS common/gpu; do try+=("$d/$name"); done
  for cand in "${try[@]}"; do
    if [ -f "$cand" ]; then
      realpath -m --relative-to=. "$cand"
      return
    fi
  done
}

# the graph directory a tree path belongs to: the longest that holds it
# (client/ps/x.h is client/ps's, not client's)
owner() {
  local path=$1 d best=""
  for d in $DIRS; do
    case $path in "$d"/*) [ ${#d} -gt ${#best} ] && best=$d ;; esac
  done
  echo "$best"
}

# may a file of directory DIR include tree path PATH?
allowed() {
  local dir=$1 path=$2 dep own
  own=$(owner "$path")
  [ "$own" = "$dir" ] && return 0
  for dep in ${DEPS[$dir]}; do
    case $dep in
      *.h) [ "$path" = "$dep" ] && return 0 ;;
      *) [ "$own" = "$dep" ] && return 0 ;;
    esac
  done
  return 1
}

# the sources of graph directory DIR, not those of a nested one
files_of() {
  local dir=$1 f
  while IFS= read -r -d '' f; do
    [ "$(owner "$f")" = "$dir" ] && printf '%s\0' "$f"
  done < <(find "$dir" -type f \( -name '*.[ch]' -o -name '*.cu' -o -name '*.cuh' \) -print0)
}

n=0
bad_total=0
for dir in $DIRS; do
  n=$((n + 1))
  [ -d "$dir" ] || { echo "ok $n - $dir: no such directory # SKIP"; continue; }
  incs=0; bad=""
  may=${DEPS[$dir]:+only itself and ${DEPS[$dir]// /, }}
  may=${may:-nothing outside itself}
  while IFS=: read -r file lno text; do
    [[ $text =~ ^[[:space:]]*#[[:space:]]*include[[:space:]]*([\"\<])([^\"\>]+)[\"\>] ]] || continue
    name=${BASH_REMATCH[2]}
    quote=0; [ "${BASH_REMATCH[1]}" = '"' ] && quote=1
    path=$(resolve "$file" "$dir" "$name" "$quote")
    if [ -z "$path" ]; then
      # <...> that is not in the tree: a system header
      [ "$quote" = 1 ] && bad="$bad$file:$lno: #include \"$name\" resolves to no file of the tree"$'\n'
      continue
    fi
    incs=$((incs + 1))
    allowed "$dir" "$path" && continue
    case $path in
      ../*) to="outside the tree" ;;
      *) to=$(owner "$path"); to=${to:-${path%%/*}} ;;
    esac
    [ "$quote" = 1 ] && shown="\"$name\"" || shown="<$name>"
    bad="$bad$file:$lno: $dir -> $to: #include $shown is $path, but $dir may include $may"$'\n'
  done < <(files_of "$dir" | sort -z | xargs -0 grep -nE '^[[:space:]]*#[[:space:]]*include' /dev/null)
  deps=${DEPS[$dir]:-nothing}
  if [ -z "$bad" ]; then
    echo "ok $n - $dir -> ${deps// /, } ($incs includes of the tree)"
  else
    nb=$(printf '%s' "$bad" | grep -c .)
    bad_total=$((bad_total + nb))
    echo "not ok $n - $dir -> ${deps// /, } ($incs includes of the tree, $nb forbidden)"
    printf '%s' "$bad" | sed 's/^/# /'
  fi
done
echo "1..$n"
if [ "$bad_total" != 0 ]; then
  echo "check-deps: $bad_total include(s) break the graph in the Makefile (DEPS_ lines)"
  exit 1
fi
exit 0
